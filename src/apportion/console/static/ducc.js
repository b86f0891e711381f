// The pages of a master serving a DUCC plan: jobs, reservations, services, machines
// (rm_qoccupancy) and classes; the Overview and Hosts pages are shared with EGO.
import { api, elapsed, esc, fmtTime } from "/ui/core.js";
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
        return `<tr data-job="${j.id}"><td><a href="#/job/${j.id}">${j.id}</a></td><td>${esc(j.user)}</td><td>${esc(j.class)}</td>
          <td class="state-${esc(j.state)}" data-k="state">${esc(j.state)}</td><td>${esc(j.reason || "")}</td>
          <td class="n" data-k="processes">${procs}</td>
          ${kind === "job" ? `<td class="n" data-k="items">${items.done ?? 0}/${items.total ?? 0}/${items.failed ?? 0}</td>` : ""}
          ${kind === "reservation" ? `<td>${esc(j.host || "waiting")}</td>` : ""}
          <td class="n">${secs(j.init_seconds)}</td><td class="n">${secs(j.seconds_per_item)}</td><td class="n">${secs(inv)}</td>
          <td class="n" data-k="deserved">${j.deserved ?? ""}</td><td class="n" data-k="cap">${j.cap ?? ""}</td>
          <td>${esc(fmtTime(j.submitted_at))}</td><td class="n">${elapsed(j.submitted_at, j.ended_at)}</td>
          <td>${live ? action("Cancel", "DELETE", `/v1/${plural}/${j.id}`, `Cancel ${kind} ${j.id} of ${j.user}?`) : ""}</td></tr>`;
      });
      return `<h1>${esc(title)}</h1>${p.html}${table([{ h: "id" }, { h: "user" }, { h: "class" }, { h: "state" }, { h: "reason" }, { h: "processes", n: 1 },
        ...(kind === "job" ? [{ h: "items done/total/failed", n: 1 }] : []), ...(kind === "reservation" ? [{ h: "host" }] : []),
        { h: "init", n: 1 }, { h: "per item", n: 1 }, { h: "investment", n: 1 }, { h: "deserved", n: 1 }, { h: "cap", n: 1 },
        { h: "submitted" }, { h: "elapsed", n: 1 }, { h: "" }], rows)}`;
    },
    after(el) { wireActions(el); },
  };
}

const machines = {
  title: "Machines", kinds: ["jobs", "hosts"],
  async render(route) {
    const list = (await api("/v1/occupancy")).machines;
    const p = pager(route, list.length, 200);
    const rows = list.slice(p.start, p.start + 200).map((m) => `<tr data-machine="${esc(m.name)}"><td><a href="#/host/${encodeURIComponent(m.name)}">${esc(m.name)}</a></td>
      <td>${esc(m.nodepool)}</td><td class="state-${esc(m.state)}">${esc(m.state)}</td><td class="n">${esc(m.memory)}</td>
      <td class="n" data-k="order">${m.order}</td><td class="n" data-k="free">${m.free}</td>
      <td>${m.shares.map((s) => `<span style="color:${colorOf(String(s.job))}">■</span> <a href="#/job/${s.job}">job ${s.job}</a>:${s.order}${s.evicting ? " (evicting)" : ""}`).join(" ")}</td></tr>`);
    return `<h1>Machines <span class="muted">(as rm_qoccupancy)</span></h1>${p.html}${table([{ h: "machine" }, { h: "nodepool" }, { h: "state" },
      { h: "memory GB", n: 1 }, { h: "order", n: 1 }, { h: "free quanta", n: 1 }, { h: "shares (job:order)" }], rows)}`;
  },
};

const classes = {
  title: "Classes", kinds: ["jobs", "plan"],
  async render() {
    const list = (await api("/v1/classes")).classes;
    return `<h1>Classes</h1>${table([{ h: "class" }, { h: "policy" }, { h: "priority", n: 1 }, { h: "weight", n: 1 }, { h: "nodepool" },
      { h: "jobs", n: 1 }, { h: "allocated", n: 1 }, { h: "deserved", n: 1 }],
      list.map((k) => `<tr data-class="${esc(k.name)}"><td>${esc(k.name)}</td><td>${esc(k.policy)}</td><td class="n">${k.priority}</td>
        <td class="n">${k.weight ?? ""}</td><td>${esc(k.nodepool)}</td><td class="n" data-k="jobs">${k.jobs}</td>
        <td class="n" data-k="held">${k.held}</td><td class="n" data-k="deserved">${k.deserved}</td></tr>`))}`;
  },
};

// One job (service, reservation): its processes, items and the tails of their output.
const job = {
  title: "Job", nav: false, kinds: ["jobs", "activities"],
  async render(route) {
    const j = await api(`/v1/jobview/${encodeURIComponent(route.id)}`);
    const items = j.items || {};
    const live = !["done", "failed", "cancelled"].includes(j.state);
    const plural = j.kind === "job" ? "jobs" : `${j.kind}s`;
    const card = (k, label, v) => `<div class="card"><div class="v"><span data-k="${k}">${esc(v ?? "")}</span></div><div class="k">${esc(label)}</div></div>`;
    const procs = j.process_list.map((x) => `<tr data-process="${x.activity}">
      <td><a href="#/activity/${x.activity}">${x.activity}</a></td><td><a href="#/host/${encodeURIComponent(x.host)}">${esc(x.host)}</a></td>
      <td class="state-${esc(x.state)}" data-k="state">${esc(x.state)}${x.evicting ? ` (evicting: ${esc(x.evicting)})` : ""}</td>
      <td>${x.share ?? ""}</td><td class="n">${x.order ?? ""}</td><td>${x.initialized == null ? "" : x.initialized ? "yes" : "not yet"}</td>
      <td class="n" data-k="done">${x.items_done ?? ""}</td><td>${esc((x.holding || []).join(", "))}</td>
      <td>${esc(fmtTime(x.started_at))}</td><td class="n">${elapsed(x.started_at, x.ended_at)}</td>
      <td>${x.exit_code ?? ""}${x.signal ? ` sig ${x.signal}` : ""}${x.stop_reason ? ` ${esc(x.stop_reason)}` : ""}</td></tr>`);
    const tails = j.process_list.filter((x) => x.stdout.length || x.stderr.length).slice(-20).reverse().map((x) => `
      <h3>Process ${x.activity} on ${esc(x.host)} <span class="muted">(${esc(x.state)}; the last ${x.stdout.length} lines)</span></h3>
      <pre data-tail="${x.activity}">${esc(x.stdout.join("\n"))}</pre>${x.stderr.length ? `<pre class="stderr" data-stderr="${x.activity}">${esc(x.stderr.join("\n"))}</pre>` : ""}`).join("");
    const failed = j.failed_items || [];
    return `<h1>${esc(j.kind[0].toUpperCase() + j.kind.slice(1))} ${j.id} <span class="state-${esc(j.state)}" data-k="job-state">${esc(j.state)}</span>
        <span class="muted">${esc(j.user)} · class ${esc(j.class)}</span></h1>
      ${j.reason ? `<p class="reason" data-k="job-reason">${esc(j.reason)}</p>` : ""}
      ${live ? action("Cancel", "DELETE", `/v1/${plural}/${j.id}`, `Cancel ${j.kind} ${j.id} of ${j.user}?`) : ""}
      <div class="cards">
        ${card("processes", "processes now", Object.values(j.processes || {}).reduce((a, b) => a + b, 0))}
        ${j.kind === "job" ? card("items_done", "items done", items.done ?? 0) + card("items_total", "items in all", items.total ?? 0)
          + card("items_failed", "items failed", items.failed ?? 0) + card("items_in_flight", "items in flight", items.in_flight ?? 0) : ""}
        ${card("deserved", "deserved", j.deserved)}${card("cap", "cap", j.cap)}
        ${card("init", "init time", j.init_seconds == null ? "" : `${j.init_seconds.toFixed(1)} s`)}${card("per_item", "per item", j.seconds_per_item == null ? "" : `${j.seconds_per_item.toFixed(2)} s`)}
        <div class="card"><div class="v">${elapsed(j.submitted_at, j.ended_at)}</div><div class="k">${j.ended_at ? "ran for" : "since submitted"}</div></div>
      </div>
      <p class="muted">submitted ${esc(fmtTime(j.submitted_at))}${j.ended_at ? `, ended ${esc(fmtTime(j.ended_at))}` : ""} · ${esc(j.memory)} GB a process · ${j.threads} thread${j.threads === 1 ? "" : "s"}
        ${j.max_processes ? ` · at most ${j.max_processes} processes` : ""}</p>
      ${j.reservations.length ? `<h2>Reserved</h2>${table([{ h: "share" }, { h: "host" }, { h: "quanta", n: 1 }], j.reservations.map((r) => `<tr><td>${r.share}</td><td>${esc(r.host)}</td><td class="n">${r.order}</td></tr>`))}` : ""}
      <h2>Processes</h2>${table([{ h: "activity" }, { h: "host" }, { h: "state" }, { h: "share" }, { h: "quanta", n: 1 }, { h: "initialized" },
        { h: "items done", n: 1 }, { h: "items in flight" }, { h: "started" }, { h: "elapsed", n: 1 }, { h: "exit" }], procs, 'id="processes"')}
      ${failed.length ? `<h2>Failed items</h2>${table([{ h: "item" }, { h: "error" }], failed.slice(0, 200).map((f) => `<tr data-failed="${esc(f.item ?? f.id ?? "")}"><td>${esc(f.item ?? f.id ?? "")}</td><td><pre>${esc(f.error ?? JSON.stringify(f))}</pre></td></tr>`))}` : ""}
      <h2>Output <span class="muted">(the tail the master keeps of each process)</span></h2>${tails || '<p class="muted">no output yet</p>'}`;
  },
  after(el) { wireActions(el); },
};

export const DUCC_PAGES = { overview: EGO_PAGES.overview, jobs: work("job", "jobs", "Jobs"),
  reservations: work("reservation", "reservations", "Reservations"), services: work("service", "services", "Services"),
  job, queue: EGO_PAGES.queue, machines, classes, hosts: EGO_PAGES.hosts, host: EGO_PAGES.host };
