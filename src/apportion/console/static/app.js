// The console's shell: the token (sessionStorage only), calls to /v1 with it, the live
// feed (/v1/events read with fetch, so the Authorization header goes with it), routing by
// the URL's fragment (#/hosts, #/activities?host=h1) and the confirmation dialog.
import { $, KEY, Refused, api, esc, fmtDur, hooks, listeners, session } from "/ui/core.js";
import { EGO_PAGES, COMMON_PAGES } from "/ui/pages.js";
import { DUCC_PAGES } from "/ui/ducc.js";

// --- the live feed ---------------------------------------------------------------------
let feedAbort = null;

async function readFeed() {
  while (session.token) {
    feedAbort = new AbortController();
    try {
      const r = await fetch("/v1/events", { headers: { Authorization: `Bearer ${session.token}`, Accept: "text/event-stream" },
                                           signal: feedAbort.signal });
      if (!r.ok || !r.body) throw new Error(`feed: ${r.status}`);
      $("live").className = "live on";
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let type = "message"; const data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) type = line.slice(6).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
          }
          if (data.length) dispatch(type, JSON.parse(data.join("\n")));
        }
      }
    } catch (e) {
      if (feedAbort.signal.aborted) return;
    }
    $("live").className = "live off";
    await new Promise((res) => setTimeout(res, 1000));
  }
}

function dispatch(type, data) {
  if (type === "message") {
    session.events.push(data);
    if (session.events.length > 500) session.events.splice(0, session.events.length - 500);
  }
  for (const fn of listeners) fn(type, data);
  if (type === "change" && current && current.page.kinds) {
    if (data.kinds.some((k) => current.page.kinds.includes(k))) refreshSoon();
  }
}

// --- pages ------------------------------------------------------------------------------
let current = null; // {page, params, name}
let refreshing = false, again = false;

function pagesFor() {
  const own = session.kind === "ducc" ? DUCC_PAGES : EGO_PAGES;
  return { ...own, ...COMMON_PAGES };
}

function parseHash() {
  const h = location.hash.replace(/^#\/?/, "");
  const [path, query] = h.split("?");
  const parts = (path || "overview").split("/");
  return { name: parts[0] || "overview", id: parts[1], params: new URLSearchParams(query || "") };
}

// A live redraw of the page on screen keeps what the user is typing: form fields changed
// and not yet submitted get their value back, and the field being typed in its focus
// and cursor. (A new page, or the same one opened again, starts from what it shows.)
function keepEdits(el) {
  const key = (f) => `${f.form ? f.form.id : ""}|${f.name}`;
  const kept = [];
  for (const f of el.querySelectorAll("form [name]")) {
    if (f.type === "checkbox" || f.type === "radio") {
      if (f.checked !== f.defaultChecked) kept.push([key(f), "checked", f.checked]);
    } else if (f.tagName === "SELECT") {
      if ([...f.options].some((o) => o.selected !== o.defaultSelected)) kept.push([key(f), "value", f.value]);
    } else if (f.value !== f.defaultValue) kept.push([key(f), "value", f.value]);
  }
  const a = document.activeElement;
  const focus = a && a.name && el.contains(a) ? [key(a), a.selectionStart, a.selectionEnd] : null;
  const find = (k) => {
    const [form, name] = k.split("|");
    return el.querySelector(`${form ? `#${CSS.escape(form)} ` : ""}[name="${CSS.escape(name)}"]`);
  };
  return () => {
    for (const [k, prop, v] of kept) {
      const f = find(k);
      if (f) f[prop] = v;
    }
    const f = focus && find(focus[0]);
    if (f) {
      f.focus();
      if (typeof focus[1] === "number") try { f.setSelectionRange(focus[1], focus[2]); } catch { /* not a text field */ }
    }
  };
}

let drawn = null; // the page visit last drawn (route() makes a new one per visit)

async function render() {
  if (!current) return;
  if (refreshing) { again = true; return; }
  refreshing = true;
  const el = $("page");
  const mine = current;
  try {
    const html = await mine.page.render(mine.route);
    if (current === mine) {
      const restore = drawn === mine ? keepEdits(el) : null;
      el.innerHTML = html;
      drawn = mine;
      if (restore) restore();
      if (current.page.after) current.page.after(el, current.route);
      el.dataset.loaded = String(Date.now());
    }
  } catch (e) {
    if (e instanceof Refused) {
      el.innerHTML = `<h1>${esc(mine.page.title)}</h1><p class="refusal" data-refusal="${e.status}">Refused (${e.status}): ${esc(e.message)}</p>`;
      el.dataset.loaded = String(Date.now());
    } else {
      el.innerHTML = `<p class="refusal" data-error="1">Error: ${esc(e.message)}</p>`;
      el.dataset.loaded = String(Date.now());
      console.error(e);
    }
  } finally {
    refreshing = false;
  }
  if (again) { again = false; render(); }
}

let timer = null;
function refreshSoon() {
  if (timer) return;
  timer = setTimeout(() => { timer = null; render(); }, 50);
}

async function route() {
  if (timer) { clearTimeout(timer); timer = null; } // a redraw asked for the page left: this one is drawn now
  const r = parseHash();
  const pages = pagesFor();
  const page = pages[r.name] || pages.overview;
  current = { page, route: r, el: $("page") };
  document.title = `${page.title} · apportion`;
  for (const a of $("nav").querySelectorAll("a")) a.classList.toggle("on", a.dataset.page === r.name);
  $("page").dataset.page = r.name;
  $("page").dataset.loaded = "";
  await render();
}

function drawNav() {
  const pages = pagesFor();
  $("nav").innerHTML = Object.entries(pages).filter(([, p]) => p.nav !== false && (!p.admin || session.admin))
    .map(([name, p]) => `<a href="#/${name}" data-page="${name}">${esc(p.title)}</a>`).join("");
}

// --- log in / out -----------------------------------------------------------------------
async function start() {
  $("login").hidden = true;
  // the kind of plan, and whether the token is an admin's (an admin token may read the plan
  // versions; any other is scoped), asked at once
  const [s, versions] = await Promise.allSettled([api("/v1/summary"), api("/v1/plan/versions")]);
  if (s.status === "rejected") {
    showLogin(s.reason.message);
    return;
  }
  session.kind = s.value.kind;
  session.admin = versions.status === "fulfilled";
  session.scope = (s.value.token && s.value.token.consumer) || null;
  $("who").textContent = session.admin ? "admin token" : session.scope ? `consumer token for ${session.scope}` : "consumer token";
  $("logout").hidden = false;
  drawNav();
  readFeed();
  await route();
}

function showLogin(message) {
  $("page").innerHTML = "";
  $("nav").innerHTML = "";
  $("login").hidden = false;
  $("logout").hidden = true;
  $("who").textContent = "";
  $("login-error").hidden = !message;
  $("login-error").textContent = message || "";
}

function logout(message) {
  sessionStorage.removeItem(KEY);
  session.token = null;
  if (feedAbort) feedAbort.abort();
  current = null;
  showLogin(message);
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  session.token = $("token").value.trim();
  sessionStorage.setItem(KEY, session.token);
  $("token").value = "";
  start();
});
$("logout").addEventListener("click", () => logout());
window.addEventListener("hashchange", route);
setInterval(() => { for (const el of document.querySelectorAll("[data-deadline]")) {
  const left = Number(el.dataset.deadline) - Date.now() / 1000;
  el.textContent = left > 0 ? `${left.toFixed(0)} s` : "due";
}
for (const el of document.querySelectorAll("[data-since]")) el.textContent = fmtDur(Date.now() / 1000 - Number(el.dataset.since));
}, 500);

hooks.logout = logout;
hooks.refresh = refreshSoon;
if (session.token) start(); else showLogin();
