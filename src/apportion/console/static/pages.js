// The pages of a master serving an EGO plan, and those of both kinds (activities, events,
// plan, audit). Each page: {title, kinds (what changes make it fetch again), render(route)
// giving its HTML from /v1, after(el, route) wiring its controls}.
import { api, confirmAction, countdown, esc, fmtTime, hooks, listeners, session, Refused } from "/ui/core.js";
import { colorOf, lineChart, shareBar } from "/ui/svg.js";

const num = (k, v) => `<span data-k="${k}">${esc(v ?? 0)}</span>`;
const card = (k, label, v, extra = "") => `<div class="card"><div class="v">${num(k, v)}${extra}</div><div class="k">${esc(label)}</div></div>`;
const PAGE = 50;

export function table(cols, rows, attrs = "") {
  return `<table ${attrs}><thead><tr>${cols.map((c) => `<th${c.n ? ' class="n"' : ""}>${esc(c.h)}</th>`).join("")}</tr></thead>
    <tbody>${rows.join("") || `<tr><td colspan="${cols.length}" class="muted">nothing</td></tr>`}</tbody></table>`;
}

export function pager(route, total, size = PAGE) {
  const page = Number(route.params.get("page") || 0);
  const pages = Math.max(1, Math.ceil(total / size));
  const link = (p, label) => {
    const q = new URLSearchParams(route.params); q.set("page", p);
    return `<a href="#/${route.name}${route.id ? "/" + route.id : ""}?${q}">${label}</a>`;
  };
  return { page, start: page * size, html: `<div class="pager">${total} in all · page ${page + 1} of ${pages} ` +
    `${page > 0 ? link(page - 1, "‹ previous") : ""} ${page + 1 < pages ? link(page + 1, "next ›") : ""}</div>` };
}

// A button that calls the API after a confirmation: data-method, data-path, data-confirm.
export function action(label, method, path, question, cls = "danger") {
  return `<button type="button" class="${cls}" data-method="${method}" data-path="${esc(path)}" data-confirm="${esc(question)}">${esc(label)}</button>`;
}

export function wireActions(el) {
  for (const b of el.querySelectorAll("button[data-path]")) {
    b.addEventListener("click", async () => {
      if (!(await confirmAction(b.dataset.confirm))) return;
      try {
        await api(b.dataset.path, { method: b.dataset.method });
        hooks.refresh();
      } catch (e) {
        await confirmAction(`Refused: ${e.message}`);
      }
    });
  }
}

// --- Overview ---------------------------------------------------------------------------
const overview = {
  title: "Overview", kinds: ["hosts", "allocations", "activities", "plan", "jobs"],
  async render(route) {
    const span = route.params.get("span") === "day" ? "day" : "hour";
    const [s, h] = await Promise.all([api("/v1/summary"), api(`/v1/history?span=${span}`)]);
    const pts = (k) => h.samples.filter((x) => k in x).map((x) => [x.at, x[k]]);
    const series = [{ name: "slots up", color: "#7f8c8d", points: pts("slots") },
      { name: "used", color: "#2f5fd0", points: pts("used") }];
    if (session.admin) series.push({ name: "asked", color: "#c77700", points: pts("demand") });
    const ducc = s.kind === "ducc";
    const jobs = s.jobs || {};
    return `<h1>Overview <span class="muted">(plan version ${esc(s.plan_version)}, ${esc(s.kind.toUpperCase())})</span></h1>
      <div class="cards">
        ${card("up", "hosts up", s.up)}${card("unreachable", "hosts unreachable", s.unreachable)}${card("down", "hosts down", s.down)}${card("closed", "hosts closed", s.closed)}
        ${card("used", "slots used", s.used)}${card("free", "slots free", s.free)}${card("slots", "slots on hosts up", s.slots)}
        ${card("allocations", ducc ? "allocations (DUCC work)" : "allocations", s.allocations)}${card("held", "slots held", s.held)}
        ${ducc ? card("jobs_running", "jobs running", jobs.jobs_running || 0) + card("jobs_waiting", "jobs waiting", jobs.jobs_waiting || 0)
               : card("demand", "demand", s.demand) + card("shortfall", "shortfall", s.shortfall)}
        ${card("reclaims", "reclaims in flight", s.reclaims, s.reclaims ? ` <small>(${esc(s.reclaiming)} slots)</small>` : "")}
        ${s.next_deadline ? `<div class="card"><div class="v">${countdown(s.next_deadline)}</div><div class="k">next reclaim deadline</div></div>` : ""}
      </div>
      <h2>Utilisation and demand over the last ${span} <small>${span === "hour" ? '<a href="#/overview?span=day">day</a>' : '<a href="#/overview?span=hour">hour</a>'}</small></h2>
      ${lineChart(series, { width: 900, height: 200, title: "slots over time" })}`;
  },
};

// --- Consumers --------------------------------------------------------------------------
function pending(r) {
  if (r.demand <= r.held) return "";
  if (r.deserved === 0 && r.owned === 0) return "no share of this group is planned for it or its parents";
  if (r.held < r.deserved) return `below its deserved ${r.deserved}: waiting for slots to be reclaimed or freed`;
  return `at its deserved share (${r.deserved}): the group's other slots go to consumers with an equal or greater claim`;
}

const consumers = {
  title: "Consumers", kinds: ["allocations", "plan", "hosts"],
  async render() {
    const rows = (await api("/v1/consumers")).consumers;
    const groups = {};
    for (const r of rows) (groups[r.group] ||= []).push(r);
    const out = [`<h1>Consumers</h1><p class="muted">Bars: held (dark: owned, light: borrowed), the dashed outline
      reaches the demand; | marks what it owns, ▼ what it deserves now.</p>`];
    for (const [g, list] of Object.entries(groups).sort()) {
      list.sort((a, b) => a.consumer.localeCompare(b.consumer));
      const scale = Math.max(1, ...list.map((r) => Math.max(r.owned, r.deserved, r.held, r.demand)));
      const body = list.map((r) => {
        const depth = r.consumer === "/" ? 0 : r.consumer.split("/").length - 1;
        const why = pending(r);
        return `<tr data-consumer="${esc(r.consumer)}" data-group="${esc(g)}">
          <td style="padding-left:${8 + depth * 14}px">${esc(r.consumer.split("/").pop() || "/")}</td>
          <td>${shareBar(r, scale)}</td>
          ${["owned", "deserved", "held", "borrowed", "lent", "demand", "shortfall"].map((k) => `<td class="n" data-k="${k}">${esc(r[k])}</td>`).join("")}
          <td class="muted" data-k="pending">${esc(why)}</td></tr>`;
      });
      out.push(`<h2>Resource group ${esc(g)}</h2>` + table([{ h: "consumer" }, { h: "" }, { h: "owned", n: 1 }, { h: "deserved", n: 1 },
        { h: "held", n: 1 }, { h: "borrowed", n: 1 }, { h: "lent", n: 1 }, { h: "demand", n: 1 }, { h: "shortfall", n: 1 },
        { h: "pending reason" }], body, 'class="tree"'));
    }
    return out.join("");
  },
};

// --- Hosts ------------------------------------------------------------------------------
const hosts = {
  title: "Hosts", kinds: ["hosts", "allocations", "activities"],
  async render(route) {
    const by = route.params.get("by") === "memory" ? "memory" : "slots";
    const size = 1000;
    const page = Number(route.params.get("page") || 0);
    const q = new URLSearchParams({ offset: page * size, limit: size });
    for (const k of ["state", "name"]) if (route.params.get(k)) q.set(k, route.params.get(k));
    const m = await api(`/v1/hostmap?${q}`);
    const big = Math.max(1, ...m.tiles.map((t) => (by === "slots" ? t[1] : t[2])));
    const tiles = m.tiles.map(([name, slots, memory, state, closed, used, owner, acts]) => {
      const v = by === "slots" ? slots : memory;
      const side = Math.round(12 + 40 * Math.sqrt(v / big));
      const who = owner >= 0 ? m.owners[owner] : "";
      const cls = ["tile", state === "down" || state === "unreachable" ? state : "", closed || state === "closed" ? "closed" : "", owner < 0 ? "free" : ""].join(" ");
      return `<a class="${cls}" data-host="${esc(name)}" data-state="${esc(state)}" data-used="${used}" href="#/activities?host=${encodeURIComponent(name)}"
        style="width:${side}px;height:${side}px;background:${owner >= 0 ? colorOf(who) : ""}"
        title="${esc(name)} · ${esc(state)}${closed ? " (closed)" : ""} · ${used}/${slots} slots · ${esc(memory)} GB${who ? " · " + esc(who) : ""} · ${acts} activities">${side >= 34 ? `${used}/${slots}` : ""}</a>`;
    }).join("");
    const legend = m.owners.map((o) => `<span><i style="background:${colorOf(o)}"></i>${esc(o)}</span>`).join("");
    const pages = Math.max(1, Math.ceil(m.total / size));
    const link = (p, l) => { const x = new URLSearchParams(route.params); x.set("page", p); return `<a href="#/hosts?${x}">${l}</a>`; };
    const by2 = new URLSearchParams(route.params); by2.set("by", by === "slots" ? "memory" : "slots");
    return `<h1>Hosts</h1>
      <div class="cards">${card("hosts", "hosts", m.hosts)}${card("up", "up", m.up)}${card("closed", "closed", m.closed)}${card("unreachable", "unreachable", m.unreachable)}${card("down", "down", m.down)}${card("used", "slots used", m.used)}${card("free", "slots free", m.free)}</div>
      <div class="toolbar">tiles sized by <b>${by}</b> <a href="#/hosts?${by2}">size by ${by === "slots" ? "memory" : "slots"}</a>
        · <a href="#/hosts?state=closed">closed</a> · <a href="#/hosts?state=unreachable">unreachable</a> · <a href="#/hosts?state=down">down</a> · <a href="#/hosts">all</a>
        · ${m.total} hosts, page ${page + 1} of ${pages} ${page > 0 ? link(page - 1, "‹") : ""} ${page + 1 < pages ? link(page + 1, "›") : ""}</div>
      <div class="legend">${legend}<span><i style="background:#e6e9ef"></i>free</span><span><i class="unreachable"></i>unreachable (keeps its work)</span><span><i style="background:#888"></i>down</span><span><i style="outline:2px solid #c77700"></i>closed</span></div>
      <div class="tiles" id="tiles">${tiles}</div>`;
  },
};

// --- Allocations ------------------------------------------------------------------------
const allocations = {
  title: "Allocations", kinds: ["allocations", "clients"],
  async render(route) {
    const consumer = route.params.get("consumer") || "";
    const q = consumer ? `?consumer=${encodeURIComponent(consumer)}` : "";
    let list = (await api(`/v1/allocations${q}`)).allocations;
    if (route.params.get("reclaiming")) list = list.filter((a) => a.reclaiming.length);
    list.sort((a, b) => b.id - a.id);
    const p = pager(route, list.length);
    const rows = list.slice(p.start, p.start + PAGE).map((a) => `<tr data-allocation="${a.id}">
      <td><a href="#/allocation/${a.id}">${a.id}</a></td><td>${a.client}</td><td>${esc(a.consumer)}</td><td>${esc(a.groups.join(","))}</td>
      <td class="n">${a.min}</td><td class="n">${a.max}</td><td class="n" data-k="held">${a.held}</td>
      <td>${esc(Object.entries(a.hosts).map(([h, n]) => `${h}:${n}`).join(", "))}</td>
      <td>${a.reclaiming.map((r) => `${esc(r.host)}:${r.slots} for ${esc(r.for)} ${countdown(r.deadline)}`).join("<br>")}</td>
      <td><a href="#/activities?allocation=${a.id}">activities</a></td></tr>`);
    return `<h1>Allocations</h1>
      <form class="toolbar" id="filter">consumer subtree <input name="consumer" value="${esc(consumer)}" placeholder="/Apps">
        <label><input type="checkbox" name="reclaiming" ${route.params.get("reclaiming") ? "checked" : ""}> reclaims only</label>
        <button>Filter</button></form>
      ${p.html}${table([{ h: "id" }, { h: "client" }, { h: "consumer" }, { h: "groups" }, { h: "min", n: 1 }, { h: "max", n: 1 },
        { h: "held", n: 1 }, { h: "hosts" }, { h: "reclaiming (countdown)" }, { h: "" }], rows)}`;
  },
  after(el) { filterForm(el, "allocations"); },
};

function filterForm(el, name) {
  const f = el.querySelector("#filter");
  if (!f) return;
  f.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(f)) if (v) q.set(k, v);
    location.hash = `#/${name}?${q}`;
  });
}

const allocation = {
  title: "Allocation", nav: false, kinds: ["allocations", "activities"],
  async render(route) {
    const a = await api(`/v1/allocations/${encodeURIComponent(route.id)}`);
    return `<h1>Allocation ${a.id} <span class="muted">${esc(a.consumer)}</span></h1>
      <div class="cards">${card("held", "held", a.held)}${card("min", "min", a.min)}${card("max", "max", a.max)}</div>
      <h2>Hosts</h2>${table([{ h: "host" }, { h: "slots", n: 1 }], Object.entries(a.hosts).map(([h, n]) => `<tr><td>${esc(h)}</td><td class="n">${n}</td></tr>`))}
      <h2>Reclaims</h2>${table([{ h: "host" }, { h: "slots", n: 1 }, { h: "for" }, { h: "deadline" }],
        a.reclaiming.map((r) => `<tr data-reclaim="${esc(r.host)}"><td>${esc(r.host)}</td><td class="n">${r.slots}</td><td>${esc(r.for)}</td><td>${countdown(r.deadline)}</td></tr>`))}
      <p><a href="#/activities?allocation=${a.id}">its activities</a></p>`;
  },
};

// --- Activities -------------------------------------------------------------------------
const fmtMem = (b) => (b == null ? "" : b >= 1 << 30 ? `${(b / (1 << 30)).toFixed(1)} GiB` : `${(b / (1 << 20)).toFixed(0)} MiB`);

const activities = {
  title: "Activities", kinds: ["activities", "hosts"],
  async render(route) {
    const q = new URLSearchParams();
    for (const k of ["host", "allocation", "state"]) if (route.params.get(k)) q.set(k, route.params.get(k));
    const host = route.params.get("host");
    const calls = [api(`/v1/activities${q.toString() ? "?" + q : ""}`)];
    if (host) calls.push(api(`/v1/hostmap?name=${encodeURIComponent(host)}&limit=50`));
    const [got, hm] = await Promise.all(calls);
    const list = got.activities.sort((a, b) => b.id - a.id);
    const p = pager(route, list.length);
    const rows = list.slice(p.start, p.start + PAGE).map((a) => `<tr data-activity="${a.id}">
      <td><a href="#/activity/${a.id}">${a.id}</a></td><td>${a.allocation}</td><td>${esc(a.host)}</td>
      <td class="state-${esc(a.state)}" data-k="state">${esc(a.state)}${a.stopping ? " (stopping)" : ""}</td><td>${esc(a.user || "")}</td>
      <td class="n">${a.slots}</td><td class="n">${a.usage ? a.usage.cpu_seconds.toFixed(1) + " s" : ""}</td>
      <td class="n">${fmtMem(a.usage && a.usage.memory)}</td><td class="n">${fmtMem(a.limits && a.limits.memory)}</td>
      <td>${a.exit_code ?? ""}${a.signal ? " sig " + a.signal : ""}${a.oom ? " OOM" : ""}</td>
      <td>${esc((a.argv || []).join(" ").slice(0, 60))}</td>
      <td>${a.state === "running" || a.state === "starting" ? action("Kill", "POST", `/v1/activities/${a.id}/kill`, `Kill activity ${a.id} on ${a.host}?`) : ""}</td></tr>`);
    let head = "";
    if (host) {
      const t = hm.tiles.find((x) => x[0] === host);
      const closed = t && (t[4] || t[3] === "closed");
      const silent = t && (t[3] === "unreachable" || t[3] === "down");
      head = `<div class="toolbar" data-host-state="${t ? esc(t[3]) : "unknown"}">host <b>${esc(host)}</b>: <span data-k="host-state" class="state-${t ? esc(t[3]) : ""}">${t ? esc(t[3]) : "unknown"}</span>
        ${t ? `· ${t[5]}/${t[1]} slots used · ${esc(t[2])} GB` : ""}
        ${session.admin && t ? (closed ? action("Open", "POST", `/v1/hosts/${host}/open`, `Open host ${host}?`, "")
          : action("Close", "POST", `/v1/hosts/${host}/close`, `Close host ${host}? It takes no new work.`)
            + " " + action("Vary off", "POST", `/v1/hosts/${host}/vary-off`, `Vary host ${host} off? Fair-share work on it is evicted.`)) : ""}
        ${session.admin && silent ? action("Confirm dead", "POST", `/v1/hosts/${host}/confirm-dead`, `Confirm host ${host} dead? What ran there is lost and its fenced slots are given out again.`) : ""}</div>`;
    }
    return `<h1>Activities${host ? ` on ${esc(host)}` : ""}</h1>${head}
      <form class="toolbar" id="filter">host <input name="host" value="${esc(host || "")}"> allocation <input name="allocation" size="6" value="${esc(route.params.get("allocation") || "")}">
        state <select name="state">${["", "starting", "running", "exited", "killed", "failed", "lost"].map((s) => `<option ${s === (route.params.get("state") || "") ? "selected" : ""}>${s}</option>`).join("")}</select>
        <button>Filter</button></form>
      ${p.html}${table([{ h: "id" }, { h: "alloc" }, { h: "host" }, { h: "state" }, { h: "user" }, { h: "slots", n: 1 }, { h: "cpu", n: 1 },
        { h: "memory", n: 1 }, { h: "limit", n: 1 }, { h: "exit" }, { h: "command" }, { h: "" }], rows)}`;
  },
  after(el) { filterForm(el, "activities"); wireActions(el); },
};

const activity = {
  title: "Activity", nav: false, kinds: ["activities"],
  async render(route) {
    const id = encodeURIComponent(route.id);
    const [a, o] = await Promise.all([api(`/v1/activities/${id}`), api(`/v1/activities/${id}/output`)]);
    return `<h1>Activity ${a.id} <span class="state-${esc(a.state)}">${esc(a.state)}</span></h1>
      ${a.state === "running" || a.state === "starting" ? action("Kill", "POST", `/v1/activities/${a.id}/kill`, `Kill activity ${a.id}?`) : ""}
      ${table([{ h: "field" }, { h: "value" }], Object.entries({ allocation: a.allocation, host: a.host, user: a.user, uid: a.uid, slots: a.slots,
        pid: a.pid, command: (a.argv || []).join(" "), exit: a.exit_code, signal: a.signal, oom: a.oom, "stop reason": a.stop_reason,
        limits: JSON.stringify(a.limits), usage: JSON.stringify(a.usage), created: fmtTime(a.created_at), ended: fmtTime(a.ended_at) })
        .map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v ?? "")}</td></tr>`))}
      <h2>Output (the tail the master keeps)</h2><pre data-k="stdout">${esc(o.stdout.join("\n"))}</pre>
      ${o.stderr.length ? `<h2>Errors</h2><pre>${esc(o.stderr.join("\n"))}</pre>` : ""}`;
  },
  after(el) { wireActions(el); },
};

// --- Events -----------------------------------------------------------------------------
function eventLine(e) {
  const what = Object.entries(e).filter(([k]) => !["id", "at", "type"].includes(k)).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
  return `<div data-event="${e.id}">${esc(new Date(e.at * 1000).toLocaleTimeString())} #${e.id} <b>${esc(e.type)}</b> ${esc(what)}</div>`;
}

const events = {
  title: "Events", kinds: [],
  async render() {
    return `<h1>Events <span class="muted">(live, newest first, since this page was opened)</span></h1>
      <div class="feed" id="feed">${session.events.slice().reverse().map(eventLine).join("")}</div>`;
  },
  after(el) {
    const feed = el.querySelector("#feed");
    listeners.length = 0;
    listeners.push((type, data) => { if (type === "message" && feed.isConnected) feed.insertAdjacentHTML("afterbegin", eventLine(data)); });
  },
};

// --- Plan -------------------------------------------------------------------------------
// What the administrator typed, and what was previewed, outlive a redraw of the page (a
// plan event, a refresh): a live feed must never wipe an edit or a preview in progress.
// A preview holds for the version it was made against only: a plan applied meanwhile
// asks for a new one. (A newline right after <textarea> is dropped by the HTML parser:
// one is written there so that a text's own first newline stays.)
const noDraft = () => ({ text: null, previewed: null, preview: "", against: null });
let draft = noDraft();
let planVersion = null;

const plan = {
  title: "Plan", admin: true, kinds: ["plan"],
  async render(route) {
    const [p, v] = await Promise.all([api("/v1/plan"), api("/v1/plan/versions")]);
    const shown = route.params.get("version") ? await api(`/v1/plan/versions/${encodeURIComponent(route.params.get("version"))}`) : p;
    planVersion = p.version;
    const editing = draft.text !== null && draft.text !== p.text;
    const ready = editing && draft.previewed === draft.text && draft.against === p.version;
    return `<h1>Plan <span class="muted">version ${esc(p.version)}, applied by ${esc(p.applied_by)} at ${esc(fmtTime(p.applied_at))}</span></h1>
      <h2>Versions</h2>${table([{ h: "version" }, { h: "applied by" }, { h: "at" }],
        v.versions.map((x) => `<tr><td><a href="#/plan?version=${x.version}">${x.version}</a></td><td>${esc(x.applied_by)}</td><td>${esc(fmtTime(x.applied_at))}</td></tr>`))}
      <h2>Text of version ${esc(shown.version)}</h2><pre data-k="plan-text">${esc(shown.text)}</pre>
      <h2>Change the plan</h2><p class="muted">Edit, preview what it would reclaim and remove now, then apply.
        ${editing ? `<span id="plan-draft">Your edits below are not applied; the plan in force is version ${esc(p.version)}.</span>` : ""}</p>
      <textarea id="plan-text">\n${esc(editing ? draft.text : p.text)}</textarea>
      <div class="toolbar"><button type="button" id="plan-diff">Preview the diff</button>
        <button type="button" id="plan-apply" class="danger" ${ready ? "" : "disabled"}>Apply…</button>
        ${editing ? `<button type="button" id="plan-discard">Discard my edits</button>` : ""}</div>
      <pre id="plan-preview" ${ready ? "" : "hidden"}>${ready ? esc(draft.preview) : ""}</pre>`;
  },
  after(el) {
    const text = el.querySelector("#plan-text"), out = el.querySelector("#plan-preview"), apply = el.querySelector("#plan-apply");
    text.addEventListener("input", () => {
      draft.text = text.value;
      apply.disabled = draft.previewed !== text.value || draft.against !== planVersion;
    });
    el.querySelector("#plan-discard")?.addEventListener("click", () => {
      draft = noDraft();
      hooks.refresh();
    });
    el.querySelector("#plan-diff").addEventListener("click", async () => {
      const asked = text.value, against = planVersion;
      draft.text = asked;
      out.hidden = false;
      try {
        const d = await api("/v1/plan/diff", { method: "POST", body: asked, headers: { "Content-Type": "text/plain" } });
        draft.preview = out.textContent = JSON.stringify(d, null, 2);
        draft.previewed = asked; draft.against = against; apply.disabled = text.value !== asked;
      } catch (e) { out.textContent = `Refused: ${e.message}`; draft.previewed = null; apply.disabled = true; }
    });
    apply.addEventListener("click", async () => {
      const previewed = draft.previewed;
      if (previewed === null || previewed !== text.value || !(await confirmAction("Apply this plan now?", out.textContent))) return;
      try {
        const r = await api("/v1/plan", { method: "PUT", body: previewed, headers: { "Content-Type": "text/plain" } });
        draft = noDraft();
        out.textContent = `applied: version ${r.version}`;
        hooks.refresh();
      } catch (e) { out.textContent = `Refused: ${e.message}`; }
    });
  },
};

// --- Audit ------------------------------------------------------------------------------
const audit = {
  title: "Audit", admin: true, kinds: [],
  async render() {
    let got;
    try { got = await api(`/v1/audit?since=${Math.floor(Date.now() / 1000) - 86400}&limit=10000`); } catch (e) {
      if (e instanceof Refused && e.status === 404) return `<h1>Audit</h1><p class="muted">This master does not serve an audit (GET /v1/audit).</p>`;
      throw e;
    }
    const list = (got.audit || []).slice(-500).reverse();
    return `<h1>Audit <span class="muted">(the last day, newest first)</span></h1>${table([{ h: "at" }, { h: "who" }, { h: "call" }, { h: "status" }, { h: "outcome" }],
      list.map((r) => `<tr data-audit="${esc(r.id)}"><td>${esc(fmtTime(r.at))}</td><td>${esc(r.kind || "")} ${esc(r.consumer || "")}</td>
        <td>${esc(r.method)} ${esc(r.path)}</td><td>${esc(r.status)}</td><td>${esc(r.outcome)}</td></tr>`))}`;
  },
};

export const EGO_PAGES = { overview, consumers, hosts, allocations, allocation };
export const COMMON_PAGES = { activities, activity, events, plan, audit };
