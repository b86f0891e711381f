// What every page uses: the session (its token in sessionStorage only), calls to /v1 with
// it, HTML escaping, the confirmation dialog, and hooks the shell fills in.
export const KEY = "apportion.token";
export const $ = (id) => document.getElementById(id);

export const session = { token: sessionStorage.getItem(KEY), kind: null, admin: false, scope: null, events: [] };

export class Refused extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

function detailText(body) {
  const d = body && body.detail;
  if (typeof d === "string") return d;
  if (Array.isArray(d)) return d.map((x) => (typeof x === "string" ? x : x.msg || JSON.stringify(x))).join("; ");
  return d ? JSON.stringify(d) : "";
}

// A call to /v1 with the session's token; a refusal throws Refused with the master's detail.
export async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${session.token}`, ...(options.headers || {}) };
  const r = await fetch(path, { ...options, headers });
  const text = await r.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = { detail: text }; }
  if (r.status === 401) { hooks.logout(detailText(body) || "the token was refused"); throw new Refused(401, detailText(body)); }
  if (!r.ok) throw new Refused(r.status, detailText(body) || `${r.status} ${r.statusText}`);
  return body;
}

export function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// Ask before acting; resolves true on Confirm.
export function confirmAction(text, detail) {
  const d = $("confirm");
  $("confirm-text").textContent = text;
  $("confirm-detail").hidden = !detail;
  $("confirm-detail").textContent = detail || "";
  d.returnValue = "";
  d.showModal();
  return new Promise((resolve) => d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true }));
}

export const hooks = { logout: () => {}, refresh: () => {} };

export const listeners = [];
export function onEvent(fn) { listeners.push(fn); }

export function fmtTime(t) { return t ? new Date(t * 1000).toLocaleString() : ""; }

export function countdown(deadline) {
  return deadline ? `<span class="countdown" data-deadline="${deadline}">${Math.max(0, deadline - Date.now() / 1000).toFixed(0)} s</span>` : "";
}

// A duration as an operator reads it: 42 s, 3 min 5 s, 2 h 10 min, 3 d 4 h.
export function fmtDur(s) {
  if (s == null || !isFinite(s)) return "";
  s = Math.max(0, Math.floor(s));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

// Time since `since` (epoch seconds), or from `since` to `until`; a running one ticks
// (the shell updates every [data-since] twice a second).
export function elapsed(since, until) {
  if (!since) return "";
  if (until) return `<span class="elapsed" data-k-elapsed="${until - since}">${fmtDur(until - since)}</span>`;
  return `<span class="elapsed" data-since="${since}">${fmtDur(Date.now() / 1000 - since)}</span>`;
}

// Host states, each with its own colour (console.css: .st-NAME) and what it means.
export const HOST_STATES = {
  ok: "takes work",
  closed: "keeps its work, takes nothing new",
  unreachable: "missed heartbeats: nothing new placed, its work kept",
  down: "declared lost: its work lost, its slots fenced",
  lost: "declared lost: its work lost, its slots fenced",
};
export function stateChip(state) {
  return `<span class="chip st-${esc(state)}" title="${esc(HOST_STATES[state] || "")}">${esc(state)}</span>`;
}
export function stateLegend() {
  return `<div class="legend states">host states (a tile's lower edge and outline): ${Object.entries(HOST_STATES).map(([k, v]) =>
    `<span data-legend-state="${k}" title="${esc(v)}"><i class="st-${k}"></i>${k}</span>`).join("")}</div>`;
}
