// The Resources page (EGO): the cluster, its consumers and its hosts per resource kind (slots,
// cores, memory, GPUs and custom kinds), from /v1/kindmap, counted as /v1/hosts and
// /v1/consumers count them; each consumer's dominant share (Dominant Resource Fairness).
import { api, esc, session, stateChip } from "/ui/core.js";
import { gpuCells, kindBar } from "/ui/svg.js";

const SIZE = 100; // hosts a page
const LABEL = { slots: "slots", cores: "cores", memory: "memory", gpus: "GPUs" };
const label = (k) => LABEL[k] || k;
// an amount as people read it: whole numbers bare, fractions to 2 places; memory in GB
const amount = (k, x) => `${Number.isInteger(x) ? x : x.toFixed(2)}${k === "memory" ? " GB" : ""}`;
const pct = (x) => `${(100 * x).toFixed(x > 0 && x < 0.1 ? 1 : 0)}%`;

// One kind in a cell: a bar of used over total (the bar's title and data-* say both).
function cell(k, used, total) {
  return `<td class="kind" data-kind="${esc(k)}" data-used="${used}" data-total="${total}">${kindBar(used, total)}
    <span class="amt">${amount(k, used)} / ${amount(k, total)}</span></td>`;
}

export const resources = {
  title: "Resources", kinds: ["hosts", "allocations", "activities", "plan"],
  async render(route) {
    const page = Number(route.params.get("page") || 0);
    const q = new URLSearchParams({ offset: page * SIZE, limit: SIZE });
    if (route.params.get("name")) q.set("name", route.params.get("name"));
    const v = await api(`/v1/kindmap?${q}`);
    const kinds = v.kinds;
    const totals = v.totals;
    const cards = kinds.map((k) => `<div class="card" data-kind-card="${esc(k)}"><div class="v">${kindBar(v.used[k] || 0, totals[k] || 0, 130)}</div>
      <div class="k"><span data-k="used-${esc(k)}">${amount(k, v.used[k] || 0)}</span> of <span data-k="total-${esc(k)}">${amount(k, totals[k] || 0)}</span> ${esc(label(k))} allocated</div></div>`).join("");
    const share = (r) => r.dominant_kind ? `<span data-k="dominant">${pct(r.dominant_share)}</span> <span class="muted">${esc(label(r.dominant_kind))}</span>` : '<span class="muted">–</span>';
    const crow = v.consumers.map((r) => {
      const depth = r.consumer === "/" ? 0 : r.consumer.split("/").length - 1;
      return `<tr data-consumer="${esc(r.consumer)}"><td style="padding-left:${8 + depth * 14}px">${esc(r.consumer.split("/").pop() || "/")}</td>
        ${kinds.map((k) => cell(k, r.used[k] || 0, totals[k] || 0)).join("")}<td class="n">${share(r)}</td></tr>`;
    });
    const hidden = kinds.some((k) => (v.others[k] || 0) > 0);
    if (hidden) {
      crow.push(`<tr data-consumer="others" class="muted"><td>outside this token's scope</td>
        ${kinds.map((k) => cell(k, v.others[k] || 0, totals[k] || 0)).join("")}<td></td></tr>`);
    }
    const hrow = v.hosts.map((h) => `<tr data-host-kinds="${esc(h.name)}"><td><a href="#/host/${encodeURIComponent(h.name)}">${esc(h.name)}</a></td>
      <td>${stateChip(h.state)}${h.closed && h.state !== "closed" ? " (closed)" : ""}</td>
      ${kinds.map((k) => cell(k, h.used[k] || 0, h.total[k] || 0)).join("")}
      <td data-k="devices">${gpuCells(h.total.gpus || 0, h.gpus)}</td></tr>`);
    const head = (first, last) => `<thead><tr>${first.map((c) => `<th>${esc(c)}</th>`).join("")}${kinds.map((k) => `<th>${esc(label(k))}</th>`).join("")}<th${last === "dominant share" ? ' class="n"' : ""}>${esc(last)}</th></tr></thead>`;
    const pages = Math.max(1, Math.ceil(v.total / SIZE));
    const to = (p) => { const x = new URLSearchParams(route.params); x.set("page", p); return `#/resources?${x}`; };
    return `<h1>Resources by kind</h1>
      <p class="muted">What is allocated of each kind: a slot counts what its request asked for of each
        (cores, memory, GPUs), and otherwise its part of its host's cores and memory. The bars are what is allocated over what the
        hosts not lost have${session.admin ? "" : "; consumers outside this token's scope are summed in one line"}.</p>
      <div class="cards" id="kind-totals">${cards}</div>
      <h2>Consumers <small class="muted">(a parent: its subtree; the dominant share is the largest, over the kinds, of what it holds of the cluster${Object.keys(v.weights || {}).length ? ", weighted by the plan's weights" : ""})</small></h2>
      <table class="tree" id="kind-consumers">${head(["consumer"], "dominant share")}<tbody>${crow.join("") || `<tr><td class="muted">nothing</td></tr>`}</tbody>
        </table>
      <h2>Hosts <small class="muted">(GPUs: each square one GPU, filled by the part its running activities hold)</small></h2>
      <form class="toolbar" id="kindsearch"><input name="name" type="search" placeholder="search host names" value="${esc(route.params.get("name") || "")}" aria-label="search host names">
        <button>Search</button> · <span data-k="hosts-total">${v.total}</span> hosts, page ${page + 1} of ${pages}
        ${page > 0 ? `<a href="${to(page - 1)}">‹</a>` : ""} ${page + 1 < pages ? `<a href="${to(page + 1)}">›</a>` : ""}</form>
      <table id="kind-hosts">${head(["host", "state"], "GPU devices")}<tbody>${hrow.join("") || `<tr><td class="muted">nothing</td></tr>`}</tbody></table>`;
  },
  after(el) {
    const f = el.querySelector("#kindsearch");
    f.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const name = new FormData(f).get("name");
      location.hash = name ? `#/resources?name=${encodeURIComponent(name)}` : "#/resources";
    });
  },
};
