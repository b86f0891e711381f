// The pages of a master serving an EGO plan, and those of both kinds (activities, events,
// plan, audit). Each page: {title, kinds (what changes make it fetch again), render(route)
// giving its HTML from /v1, after(el, route) wiring its controls}.
import { HOST_STATES, api, confirmAction, countdown, elapsed, esc, fmtDur, fmtTime, hooks, listeners, session, stateChip, stateLegend, Refused } from "/ui/core.js";
import { colorOf, lineChart, shareBar } from "/ui/svg.js";
import { resources } from "/ui/kinds.js";

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
    const series = [{ name: "slots up", color: "#7f8c8d", points: pts("slots") }];
    // the stored samples count slots held by allocations: a DUCC master's shares are not among them
    if (s.kind !== "ducc") series.push({ name: "used", color: "#2f5fd0", points: pts("used") });
    if (session.admin && s.kind !== "ducc") series.push({ name: "asked", color: "#c77700", points: pts("demand") });
    const ducc = s.kind === "ducc";
    const jobs = s.jobs || {};
    const unit = s.unit || "slots";
    return `<h1>Overview <span class="muted">(plan version ${esc(s.plan_version)}, ${esc(s.kind.toUpperCase())})</span></h1>
      <div class="cards">
        ${card("up", "hosts up", s.up)}${card("down", "hosts down or lost", s.down)}${card("closed", "hosts closed", s.closed)}${card("unreachable", "hosts unreachable", s.unreachable ?? 0)}
        ${card("used", `${unit} used`, s.used)}${card("free", `${unit} free`, s.free)}${card("slots", `${unit} on hosts not lost`, s.slots)}
        ${ducc ? card("processes", "processes (shares)", s.processes) + card("held", "quanta allocated", s.held)
               : card("allocations", "allocations", s.allocations) + card("held", "slots allocated", s.held)}
        ${ducc ? card("jobs_running", "jobs running", jobs.jobs_running || 0) + card("jobs_waiting", "jobs waiting", jobs.jobs_waiting || 0)
               : card("demand", "demand", s.demand) + card("shortfall", "shortfall", s.shortfall)}
        ${ducc ? "" : card("reclaims", "reclaims in flight", s.reclaims, s.reclaims ? ` <small>(${esc(s.reclaiming)} slots)</small>` : "")}
        ${s.next_deadline ? `<div class="card"><div class="v">${countdown(s.next_deadline)}</div><div class="k">next reclaim deadline</div></div>` : ""}
      </div>
      <p><a href="#/queue">the queue: what waits, and why</a></p>
      <h2>Utilisation and demand over the last ${span} <small>${span === "hour" ? '<a href="#/overview?span=day">day</a>' : '<a href="#/overview?span=hour">hour</a>'}</small></h2>
      ${ducc ? '<p class="muted">The stored history counts the hosts\' slots and the slots of allocations, not DUCC\'s shares: what the shares use now is above and on <a href="#/machines">Machines</a>.</p>' : ""}
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
    const out = [`<h1>Consumers</h1><p class="muted">Bars: allocated (dark: owned, light: borrowed), the dashed outline
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
        { h: "allocated", n: 1 }, { h: "borrowed", n: 1 }, { h: "lent", n: 1 }, { h: "demand", n: 1 }, { h: "shortfall", n: 1 },
        { h: "pending reason" }], body, 'class="tree"'));
    }
    return out.join("");
  },
};

// --- Hosts ------------------------------------------------------------------------------
const hostLink = (name) => `<a href="#/host/${encodeURIComponent(name)}" data-host-link="${esc(name)}">${esc(name)}</a>`;

const hosts = {
  title: "Hosts", kinds: ["hosts", "allocations", "activities", "jobs"],
  async render(route) {
    const by = route.params.get("by") === "memory" ? "memory" : "slots";
    const view = route.params.get("view") === "table" ? "table" : "tiles";
    const size = 1000;
    const page = Number(route.params.get("page") || 0);
    const q = new URLSearchParams({ offset: page * size, limit: size });
    for (const k of ["state", "name"]) if (route.params.get(k)) q.set(k, route.params.get(k));
    const m = await api(`/v1/hostmap?${q}`);
    const unit = m.unit || "slots";
    const big = Math.max(1, ...m.tiles.map((t) => (by === "slots" ? t[1] : t[2])));
    // few hosts: big tiles, each labelled with its name; many: small ones (the name on hover and in the table)
    const [lo, span] = m.tiles.length <= 200 ? [56, 60] : [12, 40];
    const tiles = view !== "tiles" ? "" : m.tiles.map(([name, slots, memory, state, closed, used, owner, acts]) => {
      const v = by === "slots" ? slots : memory;
      const side = Math.round(lo + span * Math.sqrt(v / big));
      const who = owner >= 0 ? m.owners[owner] : "";
      const cls = ["tile", `st-${state}`, closed || state === "closed" ? "closed" : "", owner < 0 ? "free" : ""].join(" ");
      const label = side >= 44 ? `<span class="name">${esc(name)}</span><span class="use">${used}/${slots}</span>` : "";
      return `<a class="${cls}" data-host="${esc(name)}" data-state="${esc(state)}" data-used="${used}" href="#/host/${encodeURIComponent(name)}"
        style="width:${side}px;height:${side}px;${owner >= 0 && !["down", "lost"].includes(state) ? `background:${colorOf(who)}` : ""}"
        title="${esc(name)} · ${esc(state)}${closed ? " (closed)" : ""} · ${used}/${slots} ${unit} · ${esc(memory)} GB${who ? " · " + esc(who) : ""} · ${acts} activities">${label}</a>`;
    }).join("");
    const rows = view !== "table" ? [] : m.tiles.map(([name, slots, memory, state, closed, used, owner, acts]) => `<tr data-host-row="${esc(name)}">
      <td>${hostLink(name)}</td><td data-k-state="${esc(state)}">${stateChip(state)}${closed && state !== "closed" ? " (closed)" : ""}</td>
      <td class="n">${used}</td><td class="n">${slots}</td><td class="n">${esc(memory)}</td>
      <td>${owner >= 0 ? `<i class="sw" style="background:${colorOf(m.owners[owner])}"></i>${esc(m.owners[owner])}` : ""}</td>
      <td class="n">${acts}</td></tr>`);
    const legend = m.owners.map((o) => `<span><i style="background:${colorOf(o)}"></i>${esc(o)}</span>`).join("");
    const pages = Math.max(1, Math.ceil(m.total / size));
    const with_ = (k, v) => { const x = new URLSearchParams(route.params); if (v == null) x.delete(k); else x.set(k, v); if (k !== "page") x.delete("page"); return `#/hosts?${x}`; };
    const link = (p, l) => `<a href="${with_("page", p)}">${l}</a>`;
    const st = route.params.get("state") || "";
    return `<h1>Hosts</h1>
      <div class="cards">${card("hosts", "hosts", m.hosts)}${card("up", "up", m.up)}${card("closed", "closed", m.closed)}${card("unreachable", "unreachable", m.unreachable ?? 0)}${card("down", "down or lost", m.down)}${card("used", `${unit} used`, m.used)}${card("free", `${unit} free`, m.free)}</div>
      <form class="toolbar" id="hostsearch">
        <input name="name" type="search" placeholder="search host names" value="${esc(route.params.get("name") || "")}" aria-label="search host names">
        <select name="state" aria-label="host state"><option value="">any state</option>${Object.keys(HOST_STATES).map((k) => `<option ${k === st ? "selected" : ""}>${k}</option>`).join("")}</select>
        <button>Search</button>
        · view: ${view === "tiles" ? "<b>tiles</b>" : `<a href="${with_("view", null)}">tiles</a>`} ${view === "table" ? "<b>table</b>" : `<a href="${with_("view", "table")}" id="table-view">table</a>`}
        ${view === "tiles" ? `· sized by <b>${by === "slots" ? unit : "memory"}</b> <a href="${with_("by", by === "slots" ? "memory" : "slots")}">size by ${by === "slots" ? "memory" : unit}</a>` : ""}
        · <span data-k="total">${m.total}</span> hosts, page ${page + 1} of ${pages} ${page > 0 ? link(page - 1, "‹") : ""} ${page + 1 < pages ? link(page + 1, "›") : ""}</form>
      ${stateLegend()}
      ${view === "table" ? table([{ h: "host" }, { h: "state" }, { h: `${unit} used`, n: 1 }, { h: unit, n: 1 }, { h: "memory GB", n: 1 },
        { h: "allocated most to" }, { h: "activities", n: 1 }], rows, 'id="hosttable"')
        : `<div class="legend">allocated most to: ${legend}<span><i style="background:#e6e9ef"></i>nobody</span></div><div class="tiles" id="tiles">${tiles}</div>`}`;
  },
  after(el) {
    const f = el.querySelector("#hostsearch");
    f.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const q = new URLSearchParams(parseParams());
      for (const k of ["name", "state", "page"]) q.delete(k);
      for (const [k, v] of new FormData(f)) if (v) q.set(k, v);
      location.hash = `#/hosts?${q}`;
    });
  },
};

function parseParams() { return new URLSearchParams(location.hash.split("?")[1] || ""); }

// --- One host ---------------------------------------------------------------------------
const host = {
  title: "Host", nav: false, kinds: ["hosts", "allocations", "activities", "jobs"],
  async render(route) {
    const name = decodeURIComponent(route.id || "");
    const [h, got] = await Promise.all([api(`/v1/hostmap/${encodeURIComponent(name)}`),
      api(`/v1/activities?host=${encodeURIComponent(name)}`)]);
    const ducc = session.kind === "ducc";
    const reported = (k, fmt = (v) => esc(v)) => (h[k] == null ? '<span class="muted">not reported</span>' : fmt(h[k]));
    const facts = {
      state: `<span data-k="host-state" data-state="${esc(h.state)}">${stateChip(h.state)}</span>${h.closed && h.state !== "closed" ? " (closed by an administrator)" : ""}`,
      "last heartbeat": h.last_seen ? `<span data-since="${h.last_seen}">${fmtDur(Date.now() / 1000 - h.last_seen)}</span> ago <span class="muted">(${esc(fmtTime(h.last_seen))})</span>` : '<span class="muted">none since this master started</span>',
      memory: `${esc(h.memory)} GB`, [h.unit]: `<span data-k="used">${h.used}</span> used of <span data-k="capacity">${h.capacity}</span>, <span data-k="free">${h.free}</span> free${h.fenced ? `, <span data-k="fenced">${h.fenced}</span> fenced` : ""}`,
      ...(ducc ? { "slots reported": esc(h.slots) } : {}),
      load: reported("load"), "agent version": reported("agent_version"), os: esc(h.os), containment: reported("containment"),
      "runs as": h.run_as ? esc(h.run_as.root ? `any user (root; the agent is ${h.run_as.user || "root"})` : `only ${h.run_as.user || "its own user"}`) : '<span class="muted">not reported</span>',
      ...(h.closed_reason ? { "closed because": esc(h.closed_reason) } : {}),
      ...(h.unreachable_since ? { "unreachable for": elapsed(h.unreachable_since) } : {}),
      ...(h.alien ? { "processes outside activities": esc(h.alien) } : {}),
      "live activities": `<span data-k="activities">${h.activities}</span>`,
    };
    const attrs = Object.entries(h.attributes || {});
    const closed = h.closed || h.state === "closed";
    const held = ducc
      ? table([{ h: "job" }, { h: "kind" }, { h: "user" }, { h: "share" }, { h: "quanta", n: 1 }, { h: "process" }],
        h.held.map((x) => `<tr data-share="${x.share}"><td><a href="#/job/${x.job}">${x.job}</a></td><td>${esc(x.kind)}</td><td>${esc(x.user)}</td>
          <td>${x.share}${x.evicting ? " (evicting)" : ""}</td><td class="n">${x.order}</td><td>${x.activity ? `<a href="#/activity/${x.activity}">${x.activity}</a>` : ""}</td></tr>`))
      : table([{ h: "allocation" }, { h: "consumer" }, { h: "slots", n: 1 }, { h: "being reclaimed", n: 1 }],
        h.held.map((x) => `<tr data-held="${x.allocation}"><td><a href="#/allocation/${x.allocation}">${x.allocation}</a></td><td>${esc(x.consumer)}</td>
          <td class="n">${x.slots}</td><td class="n">${x.reclaiming || ""}</td></tr>`))
        + (h.others ? `<p class="muted">${h.others} more slots allocated to consumers outside this token's scope.</p>` : "");
    const list = got.activities.sort((a, b) => b.id - a.id);
    return `<h1>Host ${esc(h.name)} ${stateChip(h.state)}</h1>
      ${session.admin ? `<div class="toolbar">${closed ? action("Open", "POST", `/v1/hosts/${h.name}/open`, `Open host ${h.name}?`, "")
        : action("Close", "POST", `/v1/hosts/${h.name}/close`, `Close host ${h.name}? It takes no new work.`)
          + " " + action("Vary off", "POST", `/v1/hosts/${h.name}/vary-off`, `Vary host ${h.name} off? Fair-share work on it is evicted.`)}
        ${["unreachable", "down"].includes(h.state) ? " " + action("Confirm dead", "POST", `/v1/hosts/${h.name}/confirm-dead`, `Confirm host ${h.name} dead? What ran there is lost and its fenced slots are given out again.`) : ""}</div>` : ""}
      <table class="facts"><tbody>${Object.entries(facts).map(([k, v]) => `<tr><th>${esc(k)}</th><td>${v}</td></tr>`).join("")}</tbody></table>
      <h2>Attributes</h2>${attrs.length ? table([{ h: "attribute" }, { h: "value" }], attrs.map(([k, v]) => `<tr data-attr="${esc(k)}"><td>${esc(k)}</td><td>${esc(typeof v === "object" ? JSON.stringify(v) : v)}</td></tr>`)) : '<p class="muted">none reported</p>'}
      <h2>${ducc ? "Shares on it" : "Allocations on it"}</h2>${held}
      <h2>Its activities <small><a href="#/activities?host=${encodeURIComponent(h.name)}">all, with filters</a></small></h2>
      ${activityTable(list.slice(0, PAGE))}${list.length > PAGE ? `<p class="muted">the newest ${PAGE} of ${list.length}</p>` : ""}`;
  },
  after(el) { wireActions(el); },
};

// --- Queue ------------------------------------------------------------------------------
// a rigid allocation waiting with slots kept for it: when it is planned to start, if known
function plannedStart(w) {
  if (!w.reserved) return '<span class="muted">–</span>';
  if (w.planned_start == null) return "reserved, start unknown";
  const left = w.planned_start - Date.now() / 1000;
  return `reserved, planned start at ${esc(fmtTime(w.planned_start))} <span class="muted">(${left >= 0 ? `in ${fmtDur(left)}` : `${fmtDur(-left)} late`})</span>`;
}

const queue = {
  title: "Queue", kinds: ["allocations", "jobs", "hosts", "plan"],
  async render() {
    const q = await api("/v1/queue");
    const ducc = q.kind === "ducc";
    const rows = q.waiting.map((w) => `<tr data-waiting="${w.kind}-${w.id}">
      <td>${w.kind === "allocation" ? `<a href="#/allocation/${w.id}">allocation ${w.id}</a>` : `<a href="#/job/${w.id}">${esc(w.kind)} ${w.id}</a>`}</td>
      <td>${esc(w.consumer)}</td><td>${esc(ducc ? w.class : w.groups.join(", "))}</td>
      ${ducc ? `<td class="n" data-k="processes">${w.processes}</td><td class="n">${w.deserved ?? ""}</td>`
             : `<td class="n" data-k="held">${w.held}</td><td class="n">${w.min}</td><td class="n">${w.max}</td>`}
      <td>${esc(fmtTime(w.since))}</td><td class="n">${elapsed(w.since)}</td>
      <td class="n" data-k="position">${w.position == null ? "" : `${w.position} of ${w.queue_length}`}</td>
      <td data-k="reason" class="reason">${esc(w.pending_reason)}</td>
      <td data-k="planned">${plannedStart(w)}</td></tr>`);
    return `<h1>Queue <span class="muted">(work that waits, oldest first)</span></h1>
      <p class="muted">${ducc ? "Jobs, reservations and services waiting for a process, or holding fewer than they deserve now; the reason is the scheduler's own. Position: among the waiting work of its class, by submission."
        : "Allocations holding less than their max. Position: among its consumer's waiting requests, in the order the engine serves them. The reason is counted from what the master published."}</p>
      ${table([{ h: "what" }, { h: "consumer" }, { h: ducc ? "class" : "groups" },
        ...(ducc ? [{ h: "processes", n: 1 }, { h: "deserved", n: 1 }] : [{ h: "allocated", n: 1 }, { h: "min", n: 1 }, { h: "max", n: 1 }]),
        { h: "since" }, { h: "waiting for", n: 1 }, { h: "position", n: 1 }, { h: "why it waits" }, { h: "planned start" }], rows, 'id="queue"')}
      ${q.total > q.waiting.length ? `<p class="muted">the oldest ${q.waiting.length} of <span data-k="queue-total">${q.total}</span></p>` : ""}`;
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
        { h: "allocated", n: 1 }, { h: "hosts" }, { h: "reclaiming (countdown)" }, { h: "" }], rows)}`;
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
    const w = a.held < a.max ? (await api(`/v1/queue?allocation=${a.id}`)).waiting[0] : null;
    return `<h1>Allocation ${a.id} <span class="muted">${esc(a.consumer)}</span></h1>
      <div class="cards">${card("held", "allocated", a.held)}${card("min", "min", a.min)}${card("max", "max", a.max)}</div>
      ${w ? `<p data-waiting="${a.id}">It has waited ${elapsed(w.since)} for ${w.max - w.held} more slot${w.max - w.held === 1 ? "" : "s"}
        (position ${w.position ?? "?"} of ${w.queue_length} in ${esc(w.consumer)}'s queue): <span data-k="reason" class="reason">${esc(w.pending_reason)}</span>
        <a href="#/queue">the queue</a></p>` : ""}
      <h2>Hosts</h2>${table([{ h: "host" }, { h: "slots", n: 1 }], Object.entries(a.hosts).map(([h, n]) => `<tr><td>${esc(h)}</td><td class="n">${n}</td></tr>`))}
      <h2>Reclaims</h2>${table([{ h: "host" }, { h: "slots", n: 1 }, { h: "for" }, { h: "deadline" }],
        a.reclaiming.map((r) => `<tr data-reclaim="${esc(r.host)}"><td>${esc(r.host)}</td><td class="n">${r.slots}</td><td>${esc(r.for)}</td><td>${countdown(r.deadline)}</td></tr>`))}
      <p><a href="#/activities?allocation=${a.id}">its activities</a></p>`;
  },
};

// --- Activities -------------------------------------------------------------------------
const fmtMem = (b) => (b == null ? "" : b >= 1 << 30 ? `${(b / (1 << 30)).toFixed(1)} GiB` : `${(b / (1 << 20)).toFixed(0)} MiB`);

// Activities as a table: started, elapsed (ticking while it runs), usage, exit, a Kill button.
export function activityTable(list) {
  const rows = list.map((a) => `<tr data-activity="${a.id}">
      <td><a href="#/activity/${a.id}">${a.id}</a></td><td>${a.job != null ? `<a href="#/job/${a.job}">job ${a.job}</a>` : `<a href="#/allocation/${a.allocation}">${a.allocation}</a>`}</td>
      <td><a href="#/host/${encodeURIComponent(a.host)}">${esc(a.host)}</a></td>
      <td class="state-${esc(a.state)}" data-k="state">${esc(a.state)}${a.stopping ? " (stopping)" : ""}</td><td>${esc(a.user || "")}</td>
      <td class="n">${a.slots}</td><td>${esc(fmtTime(a.created_at))}</td><td class="n" data-k="elapsed">${elapsed(a.created_at, a.ended_at)}</td>
      <td class="n">${a.usage ? a.usage.cpu_seconds.toFixed(1) + " s" : ""}</td>
      <td class="n">${fmtMem(a.usage && a.usage.memory)}</td><td class="n">${fmtMem(a.limits && a.limits.memory)}</td>
      <td>${a.exit_code ?? ""}${a.signal ? " sig " + a.signal : ""}${a.oom ? " OOM" : ""}</td>
      <td>${esc((a.argv || []).join(" ").slice(0, 60))}</td>
      <td>${a.state === "running" || a.state === "starting" ? action("Kill", "POST", `/v1/activities/${a.id}/kill`, `Kill activity ${a.id} on ${a.host}?`) : ""}</td></tr>`);
  return table([{ h: "id" }, { h: "for" }, { h: "host" }, { h: "state" }, { h: "user" }, { h: "slots", n: 1 }, { h: "started" },
    { h: "elapsed", n: 1 }, { h: "cpu", n: 1 }, { h: "memory", n: 1 }, { h: "limit", n: 1 }, { h: "exit" }, { h: "command" }, { h: "" }], rows);
}

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
    let head = "";
    if (host) {
      const t = hm.tiles.find((x) => x[0] === host);
      const closed = t && (t[4] || t[3] === "closed");
      const silent = t && (t[3] === "unreachable" || t[3] === "down");
      head = `<div class="toolbar" data-host-state="${t ? esc(t[3]) : "unknown"}">host <b><a href="#/host/${encodeURIComponent(host)}">${esc(host)}</a></b>: <span data-k="host-state" class="state-${t ? esc(t[3]) : ""}">${t ? esc(t[3]) : "unknown"}</span>
        ${t ? `· ${t[5]}/${t[1]} ${esc(hm.unit || "slots")} used · ${esc(t[2])} GB` : ""}
        ${session.admin && t ? (closed ? action("Open", "POST", `/v1/hosts/${host}/open`, `Open host ${host}?`, "")
          : action("Close", "POST", `/v1/hosts/${host}/close`, `Close host ${host}? It takes no new work.`)
            + " " + action("Vary off", "POST", `/v1/hosts/${host}/vary-off`, `Vary host ${host} off? Fair-share work on it is evicted.`)) : ""}
        ${session.admin && silent ? action("Confirm dead", "POST", `/v1/hosts/${host}/confirm-dead`, `Confirm host ${host} dead? What ran there is lost and its fenced slots are given out again.`) : ""}</div>`;
    }
    return `<h1>Activities${host ? ` on ${esc(host)}` : ""}</h1>${head}
      <form class="toolbar" id="filter">host <input name="host" value="${esc(host || "")}"> allocation <input name="allocation" size="6" value="${esc(route.params.get("allocation") || "")}">
        state <select name="state">${["", "starting", "running", "exited", "killed", "failed", "lost"].map((s) => `<option ${s === (route.params.get("state") || "") ? "selected" : ""}>${s}</option>`).join("")}</select>
        <button>Filter</button></form>
      ${p.html}${activityTable(list.slice(p.start, p.start + PAGE))}`;
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
        limits: JSON.stringify(a.limits), usage: JSON.stringify(a.usage), started: fmtTime(a.created_at), ended: fmtTime(a.ended_at) })
        .map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v ?? "")}</td></tr>`))}
      <p>${a.ended_at ? "ran for" : "running for"} <b data-k="elapsed">${elapsed(a.created_at, a.ended_at)}</b></p>
      <h2>Output (the tail the master keeps)</h2><pre data-k="stdout">${esc(o.stdout.join("\n"))}</pre>
      ${o.stderr.length ? `<h2>Errors</h2><pre>${esc(o.stderr.join("\n"))}</pre>` : ""}`;
  },
  after(el) { wireActions(el); },
};

// --- Events ---------------------------------------------------------------------------
const plural = (n, one, many = one + "s") => `${n} ${n === 1 ? one : many}`;
const aLink = (id) => `<a href="#/allocation/${id}">allocation ${id}</a>`;
const jLink = (id) => `<a href="#/job/${id}">job ${id}</a>`;
const hLink = (name) => `<a href="#/host/${encodeURIComponent(name)}">${esc(name)}</a>`;
const actLink = (id) => `<a href="#/activity/${id}">activity ${id}</a>`;

// An event as a sentence (HTML); what it does not know falls back to its fields.
export function sentence(e) {
  const why = e.reason ? ` (${esc(e.reason)})` : "";
  switch (e.type) {
    case "granted": return `${aLink(e.allocation)} was granted ${plural(e.slots, "slot")} on ${hLink(e.host)}`;
    case "reclaim": return `${plural(e.slots, "slot")} of ${aLink(e.allocation)} on ${hLink(e.host)} are being reclaimed for ${esc(e.for)}${e.deadline ? `, by ${esc(new Date(e.deadline * 1000).toLocaleTimeString())}` : ""}${why}`;
    case "reclaim_cancelled": return `the reclaim of ${plural(e.slots, "slot")} of ${aLink(e.allocation)} on ${hLink(e.host)} was cancelled: it keeps them`;
    case "removed": return `${plural(e.slots, "slot")} of ${aLink(e.allocation)} on ${hLink(e.host)} were taken back${why}`;
    case "lost": return `${plural(e.slots, "slot")} of ${aLink(e.allocation)} on ${hLink(e.host)} were lost${why}`;
    case "activity": {
      const of = e.job != null ? jLink(e.job) : aLink(e.allocation);
      const how = { starting: "is starting", running: "is running", exited: `exited with code ${e.exit_code ?? "?"}`,
        killed: `was killed${e.signal ? ` (signal ${e.signal})` : ""}`, failed: "could not start", lost: "was lost with its host" }[e.state] || esc(e.state);
      return `${actLink(e.activity)} of ${of} on ${hLink(e.host)} ${how}${e.oom ? " (out of memory)" : ""}${e.stop_reason ? `: ${esc(e.stop_reason)}` : ""}`;
    }
    case "placed": return `${jLink(e.job)} got a process on ${hLink(e.host)} (share ${e.share}, ${plural(e.order, "quantum", "quanta")})`;
    case "evicted": return `the process of ${jLink(e.job)} on ${hLink(e.host)} (share ${e.share}) is evicted${why}`;
    case "job": return `${jLink(e.job)} is ${esc(e.state)}${e.reason ? `: ${esc(e.reason)}` : ""}`;
    case "items_failed": return `${jLink(e.job)}: ${plural((e.items || []).length, "item")} failed on ${hLink(e.host)}${e.error ? `: ${esc(String(e.error).split("\n")[0])}` : ""}`;
    case "restarted": return `the service ${jLink(e.job)} was started again on ${hLink(e.host)} (its process exited${e.exit_code != null ? ` with code ${e.exit_code}` : ""})`;
    default: return `<b>${esc(e.type)}</b> ${esc(rawFields(e))}`;
  }
}

function rawFields(e) {
  return Object.entries(e).filter(([k]) => !["id", "at", "type"].includes(k)).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
}

let rawEvents = false; // the raw toggle outlives a redraw
function eventLine(e) {
  const body = rawEvents ? `<b>${esc(e.type)}</b> ${esc(rawFields(e))}` : sentence(e);
  return `<div data-event="${e.id}" data-type="${esc(e.type)}"><span class="muted">${esc(new Date(e.at * 1000).toLocaleTimeString())} #${e.id}</span> ${body}</div>`;
}

const events = {
  title: "Events", kinds: [],
  async render() {
    return `<h1>Events <span class="muted">(live, newest first, since this page was opened)</span></h1>
      <div class="toolbar"><label><input type="checkbox" id="raw-events" ${rawEvents ? "checked" : ""}> raw fields</label></div>
      <div class="feed" id="feed">${session.events.slice().reverse().map(eventLine).join("")}</div>`;
  },
  after(el) {
    const feed = el.querySelector("#feed");
    el.querySelector("#raw-events").addEventListener("change", (ev) => {
      rawEvents = ev.target.checked;
      feed.innerHTML = session.events.slice().reverse().map(eventLine).join("");
    });
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

export const EGO_PAGES = { overview, consumers, hosts, resources, host, queue, allocations, allocation };
export const COMMON_PAGES = { activities, activity, events, plan, audit };
