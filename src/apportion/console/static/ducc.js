// The pages of a master serving a DUCC plan: jobs, reservations, services, machines
// (rm_qoccupancy) and classes; the Overview and Hosts pages are shared with EGO.
import { api, esc, fmtTime } from "/ui/core.js";
import { EGO_PAGES, action, pager, table, wireActions } from "/ui/pages.js";
import { colorOf } from "/ui/svg.js";

const secs = (s) => (s == null ? "" : `${Number(s).toFixed(1)} s`);

function work(kind, plural, title) {
  return {
    title, kinds: ["jobs"],
    async render(route) {
      const state = route.params.get("state");
      const list = (await api(`/v1/${plural}${state ? `?state=${encodeURIComponent(state)}` : ""}`))[plural];
      list.sort((a, b) => b.id - a.id);
      const p = pager(route, list.length);
      const rows = list.slice(p.start, p.start + 50).map((j) => {
        const items = j.items || {};
        const procs = Object.values(j.processes || {}).reduce((a, b) => a + b, 0);
        const live = !["done", "failed", "cancelled"].includes(j.state);
        // investment: what the job's processes have put in so far (init plus items, by their times)
        const inv = j.seconds_per_item != null ? (items.done || 0) * j.seconds_per_item + (j.init_seconds || 0) * procs : null;
        return `<tr data-job="${j.id}"><td>${j.id}</td><td>${esc(j.user)}</td><td>${esc(j.class)}</td>
          <td class="state-${esc(j.state)}" data-k="state">${esc(j.state)}</td><td>${esc(j.reason || "")}</td>
          <td class="n" data-k="processes">${procs}</td>
          ${kind === "job" ? `<td class="n" data-k="items">${items.done ?? 0}/${items.total ?? 0}/${items.failed ?? 0}</td>` : ""}
          ${kind === "reservation" ? `<td>${esc(j.host || "waiting")}</td>` : ""}
          <td class="n">${secs(j.init_seconds)}</td><td class="n">${secs(j.seconds_per_item)}</td><td class="n">${secs(inv)}</td>
          <td class="n" data-k="deserved">${j.deserved ?? ""}</td><td class="n" data-k="cap">${j.cap ?? ""}</td>
          <td>${esc(fmtTime(j.submitted_at))}</td>
          <td>${live ? action("Cancel", "DELETE", `/v1/${plural}/${j.id}`, `Cancel ${kind} ${j.id} of ${j.user}?`) : ""}</td></tr>`;
      });
      return `<h1>${esc(title)}</h1>${p.html}${table([{ h: "id" }, { h: "user" }, { h: "class" }, { h: "state" }, { h: "reason" }, { h: "processes", n: 1 },
        ...(kind === "job" ? [{ h: "items done/total/failed", n: 1 }] : []), ...(kind === "reservation" ? [{ h: "host" }] : []),
        { h: "init", n: 1 }, { h: "per item", n: 1 }, { h: "investment", n: 1 }, { h: "deserved", n: 1 }, { h: "cap", n: 1 },
        { h: "submitted" }, { h: "" }], rows)}`;
    },
    after(el) { wireActions(el); },
  };
}

const machines = {
  title: "Machines", kinds: ["jobs", "hosts"],
  async render(route) {
    const list = (await api("/v1/occupancy")).machines;
    const p = pager(route, list.length, 200);
    const rows = list.slice(p.start, p.start + 200).map((m) => `<tr data-machine="${esc(m.name)}"><td><a href="#/activities?host=${encodeURIComponent(m.name)}">${esc(m.name)}</a></td>
      <td>${esc(m.nodepool)}</td><td class="state-${esc(m.state)}">${esc(m.state)}</td><td class="n">${esc(m.memory)}</td>
      <td class="n" data-k="order">${m.order}</td><td class="n" data-k="free">${m.free}</td>
      <td>${m.shares.map((s) => `<span style="color:${colorOf(String(s.job))}">■</span> job ${s.job}:${s.order}${s.evicting ? " (evicting)" : ""}`).join(" ")}</td></tr>`);
    return `<h1>Machines <span class="muted">(as rm_qoccupancy)</span></h1>${p.html}${table([{ h: "machine" }, { h: "nodepool" }, { h: "state" },
      { h: "memory GB", n: 1 }, { h: "order", n: 1 }, { h: "free quanta", n: 1 }, { h: "shares (job:order)" }], rows)}`;
  },
};

const classes = {
  title: "Classes", kinds: ["jobs", "plan"],
  async render() {
    const list = (await api("/v1/classes")).classes;
    return `<h1>Classes</h1>${table([{ h: "class" }, { h: "policy" }, { h: "priority", n: 1 }, { h: "weight", n: 1 }, { h: "nodepool" },
      { h: "jobs", n: 1 }, { h: "held", n: 1 }, { h: "deserved", n: 1 }],
      list.map((k) => `<tr data-class="${esc(k.name)}"><td>${esc(k.name)}</td><td>${esc(k.policy)}</td><td class="n">${k.priority}</td>
        <td class="n">${k.weight ?? ""}</td><td>${esc(k.nodepool)}</td><td class="n" data-k="jobs">${k.jobs}</td>
        <td class="n" data-k="held">${k.held}</td><td class="n" data-k="deserved">${k.deserved}</td></tr>`))}`;
  },
};

export const DUCC_PAGES = { overview: EGO_PAGES.overview, jobs: work("job", "jobs", "Jobs"),
  reservations: work("reservation", "reservations", "Reservations"), services: work("service", "services", "Services"),
  machines, classes, hosts: EGO_PAGES.hosts };
