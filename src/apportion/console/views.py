"""What the console's host, queue and job pages show, counted from what the master has
published (its hosts, allocations, holdings, fences, activities; a DUCC master's jobs,
shares and the accounts of its last cycle) and, for an EGO master, the engine's own
books: the groups each request may use, the order it serves a consumer's requests in,
and the slots being reclaimed for a consumer.

Nothing here changes anything: each function reads the master between two steps (the
master's task changes nothing outside a step, and a step does not yield to the loop).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apportion.service.auth import Principal
    from apportion.service.master import Master

DOWN = ("down", "lost")  # declared lost: what ran there is lost, its slots fenced
STATES = ("ok", "closed", "unreachable", "down", "lost")
TAIL = 20  # lines of each process's output on a job's page


def _fenced(m: Master) -> dict[str, int]:
    out: dict[str, int] = {}
    for (_, host), f in m.fences.items():
        out[host] = out.get(host, 0) + f[0]
    return out


def ducc_use(m: Master) -> dict[str, tuple[int, int, dict[str, int]]]:
    """A DUCC master's hosts: name -> (its order in quanta, quanta its shares use, quanta per
    user there), as DUCC's rm_qoccupancy counts them."""
    out = {}
    for x in m.occupancy():  # type: ignore[attr-defined]
        per: dict[str, int] = {}
        for s in x["shares"]:
            j = m.jobs.get(s["job"])  # type: ignore[attr-defined]
            who = f"/{j.user}" if j is not None else "/"
            per[who] = per.get(who, 0) + s["order"]
        out[x["name"]] = (x["order"], sum(s["order"] for s in x["shares"]), per)
    return out


def capacity(m: Master) -> tuple[str, dict[str, tuple[int, int]]]:
    """The unit hosts are counted in (``slots``; ``quanta`` on a DUCC master, whose shares
    are quanta of a machine's memory) and, per host, (its capacity, what is used there)."""
    if m.kind == "ducc":
        return "quanta", {name: (order, used) for name, (order, used, _) in ducc_use(m).items()}
    return "slots", {h.name: (h.slots, m.host_used.get(h.name, 0)) for h in m.hosts.values()}


def host_counts(m: Master) -> dict[str, Any]:
    """Hosts by state, and the slots (quanta) of hosts not lost: on them, used, and free to
    new work (on hosts ``ok`` and open only, fenced slots not counted)."""
    fenced = _fenced(m)
    unit, cap = capacity(m)
    states = dict.fromkeys(STATES, 0)
    ok = down = closed = unreachable = total = used = free = 0
    for h in m.hosts.values():
        size, u = cap.get(h.name, (h.slots, 0))
        states[h.state] = states.get(h.state, 0) + 1
        if h.state in DOWN:
            down += 1
            continue
        total += size
        used += u
        if h.state == "unreachable":
            unreachable += 1
        elif h.state != "ok" or h.closed:
            closed += 1
        else:
            ok += 1
            free += max(0, size - u - fenced.get(h.name, 0))
    return {"hosts": len(m.hosts), "up": ok, "down": down, "closed": closed, "unreachable": unreachable,
            "states": states, "unit": unit, "slots": total, "used": used, "free": free}


def _json_value(v: Any) -> Any:
    return v if v is None or isinstance(v, (str, int, float, bool, list, dict)) else str(v)


def host_view(m: Master, p: Principal, name: str, now: float) -> dict[str, Any] | None:
    """One host: its state, heartbeat age, size, what is used and free there, what its agent
    reported (attributes, containment, run-as, load and agent version where reported), and
    the allocations (DUCC: shares) on it that ``p`` may see."""
    h = m.hosts.get(name)
    if h is None:
        return None
    unit, cap = capacity(m)
    size, used = cap.get(name, (h.slots, 0))
    out: dict[str, Any] = {
        "name": h.name, "state": h.state, "closed": h.closed, "unit": unit, "capacity": size, "used": used,
        "slots": h.slots, "memory": h.memory, "os": h.os, "attributes": h.attributes,
        "last_seen": h.last_seen or None, "heartbeat_age": round(now - h.last_seen, 1) if h.last_seen else None,
        "fenced": _fenced(m).get(name, 0), "activities": len(m.live_on.get(name, {})),
        **{k: _json_value(v) for k, v in h.facts().items()},
    }
    out["free"] = m.free_on(name) if m.kind != "ducc" else (max(0, size - used) if h.state == "ok" and not h.closed
                                                             else 0)
    for k in ("unreachable_since", "load", "agent_version", "version"):  # as far as the master keeps them
        v = getattr(h, k, None)
        if v is None and isinstance(h.attributes, dict):
            v = h.attributes.get(k)
        if v is not None:
            out["agent_version" if k == "version" else k] = _json_value(v)
    held: list[dict[str, Any]] = []
    if m.kind == "ducc":
        for s in m.shares.values():  # type: ignore[attr-defined]
            j = m.jobs.get(s.job)  # type: ignore[attr-defined]
            if s.host == name and j is not None and p.may_see(f"/{j.user}"):
                held.append({"job": j.id, "kind": j.kind, "user": j.user, "share": s.id, "order": s.order,
                             "activity": s.activity, "evicting": s.evicted is not None})
    else:
        per: dict[int, int] = {}
        for hd in m.holdings.values():
            if hd.host == name:
                per[hd.request] = per.get(hd.request, 0) + hd.slots
        for aid, n in sorted(per.items()):
            a = m.allocations.get(aid)
            if a is not None and p.may_see(a.consumer):
                held.append({"allocation": aid, "consumer": a.consumer, "slots": n,
                             "reclaiming": sum(r.slots for r in a.reclaiming.values() if r.host == name)})
        out["others"] = sum(per.values()) - sum(x["slots"] for x in held)  # held by consumers out of scope
    out["held"] = held
    return out


# -- the queue -------------------------------------------------------------------------------------
def _free_in(m: Master, groups: tuple[str, ...], blocked: set[str]) -> tuple[int, int]:
    """Free slots on hosts that take work in ``groups`` (each host once), and those hosts."""
    s = m.engine.state
    seen: set[str] = set()
    free = 0
    for g in groups:
        gi = s.groups.get(g)
        for led in gi.hosts if gi is not None else ():
            n = led.host.name
            if n in seen or n in blocked:
                continue
            seen.add(n)
            if led.takes_work and n in m.hosts:
                free += m.free_on(n)
    return free, len(seen)


def _n(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _why(m: Master, a: Any, groups: tuple[str, ...], free: int, lines: dict[str, Any], position: int,
         ahead: int) -> str:
    """Why an allocation with unmet demand waits, from the numbers the master published."""
    if not groups:
        return "no resource group of the plan gives its consumer slots"
    parts = []
    gnames = ", ".join(groups)
    if a.held < a.min:
        together = " together" if a.held == 0 and a.min > 1 else ""
        parts.append(f"waiting for its min of {_n(a.min, 'slot')}{together}: {free} free in its groups ({gnames})")
    incoming = m.engine.state.incoming.get(a.consumer, 0)
    line = lines.get(a.consumer)
    held = deserved = 0
    if line is not None:
        for g in groups:
            gl = line.groups.get(g)
            if gl is not None:
                held += gl.held
                deserved += gl.deserved
    if incoming:
        parts.append(f"{_n(incoming, 'slot')} {'is' if incoming == 1 else 'are'} being reclaimed for {a.consumer}")
    if line is not None and deserved == 0 and held == 0 and not incoming:
        parts.append(f"{a.consumer} has no share of its groups now (deserved 0)")
    elif line is not None and held >= deserved and not incoming:
        parts.append(f"{a.consumer} holds {held}, {'over' if held > deserved else 'at'} its consumer's share "
                     f"({deserved} deserved in {gnames}): the rest goes to consumers with a greater claim")
    elif free == 0 and not incoming:
        parts.append(f"no slot is free in its groups ({gnames})")
    if ahead:
        parts.append(f"{ahead} earlier request{'s' if ahead > 1 else ''} of {a.consumer} "
                     f"{'are' if ahead > 1 else 'is'} served first (position {position})")
    if not parts:
        parts.append(f"{free} free in its groups ({gnames}): it is served at the master's next cycle")
    return "; ".join(parts)


def ego_queue(m: Master, p: Principal, report: Any, now: float, limit: int = 500,
              only: int | None = None) -> tuple[int, list[dict[str, Any]]]:
    """The allocations ``p`` may see that hold less than their max, oldest first: how many,
    and the first ``limit`` of them (``only``: that allocation, if it waits; free slots are counted once per set of groups, and each
    consumer's queue once, so a long queue on a big cluster stays cheap)."""
    s = m.engine.state
    out = []
    waiting = [a for a in m.allocations.values() if a.held < a.max and p.may_see(a.consumer)
               and (only is None or a.id == only)]
    waiting.sort(key=lambda a: (a.created_at, a.id))
    places: dict[str, dict[int, int]] = {}  # consumer -> request order -> its place in the consumer's queue
    free_of: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}
    for a in waiting[:limit]:
        rs = s.requests.get(str(a.id))
        groups = rs.groups if rs is not None else tuple(a.groups)
        if a.consumer not in places:
            book = s.wanting_of.get(a.consumer)
            places[a.consumer] = {k: i + 1 for i, k in enumerate(book.keys())} if book is not None else {}
        queue = places[a.consumer]
        position = queue.get(rs.order) if rs is not None else None
        key = (groups, tuple(sorted(a.blocked)))
        if key not in free_of:
            free_of[key] = _free_in(m, groups, set(a.blocked))[0]
        free = free_of[key]
        out.append({"kind": "allocation", "id": a.id, "consumer": a.consumer, "groups": list(groups),
                    "min": a.min, "max": a.max, "held": a.held, "allocated": a.held, "waiting": a.max - a.held,
                    "since": a.created_at, "age": round(now - a.created_at, 1),
                    "position": position, "queue_length": len(queue), "free_in_groups": free,
                    "pending_reason": _why(m, a, groups, free, report.consumers, position or 0,
                                           (position or 1) - 1),
                    "reserved": a.reserved, "planned_start": a.planned_start})
    return len(waiting), out


def ducc_queue(m: Master, p: Principal, now: float, limit: int = 500) -> tuple[int, list[dict[str, Any]]]:
    """DUCC work ``p`` may see that waits for its first process, or holds fewer processes
    than it deserves, oldest first; the reason is the scheduler's own."""
    jobs = [j for j in m.jobs.values() if not j.ended and p.may_see(f"/{j.user}")]  # type: ignore[attr-defined]
    jobs.sort(key=lambda j: (j.submitted_at, j.id))
    waiting_in: dict[str, list[int]] = {}
    for j in jobs:
        if j.state == "waiting":
            waiting_in.setdefault(j.cls, []).append(j.id)
    out = []
    places = {cls: {jid: i + 1 for i, jid in enumerate(ids)} for cls, ids in waiting_in.items()}
    for j in jobs:
        acc = m.accounts.get(str(j.id))  # type: ignore[attr-defined]
        procs = len(m.job_shares.get(j.id, {}))  # type: ignore[attr-defined]
        if j.state == "waiting":
            reason = j.reason or (acc.reason if acc is not None else "") or "waiting for the scheduler's next cycle"
        elif acc is not None and procs < min(acc.deserved, acc.cap):
            reason = f"growing: holds {procs} of the {min(acc.deserved, acc.cap)} processes it deserves now"
        else:
            continue
        queue = places.get(j.cls, {})
        out.append({"kind": j.kind, "id": j.id, "consumer": f"/{j.user}", "user": j.user, "class": j.cls,
                    "state": j.state, "processes": procs, "deserved": acc.deserved if acc is not None else None,
                    "cap": acc.cap if acc is not None else None, "memory": j.memory,
                    "since": j.submitted_at, "age": round(now - j.submitted_at, 1),
                    "position": queue.get(j.id), "queue_length": len(queue),
                    "pending_reason": reason, "planned_start": None})
    return len(out), out[:limit]


# -- a DUCC job ------------------------------------------------------------------------------------
def job_view(m: Master, jid: int, lines: int = TAIL) -> dict[str, Any]:
    """A DUCC job's processes (its shares now, and every process it ran), its items, and
    the last ``lines`` lines of each process's output."""
    j = m.jobs[jid]  # type: ignore[attr-defined]
    out = m.job_json(j)  # type: ignore[attr-defined]
    book = m.books.get(jid)  # type: ignore[attr-defined]
    share_of_act = {s.activity: s for s in m.job_shares.get(jid, {}).values()}  # type: ignore[attr-defined]
    procs = []
    for a in sorted((a for a in m.activities.values() if a.job == jid), key=lambda a: a.id):
        s = share_of_act.get(a.id)
        procs.append({"activity": a.id, "host": a.host, "state": a.state, "share": s.id if s else None,
                      "order": s.order if s else None, "evicting": s.evicted if s else None,
                      "initialized": s.initialized_at is not None if s else None,
                      "items_done": book.done_by.get(s.id, 0) if book is not None and s else None,
                      "holding": sorted(book.holds(s.id)) if book is not None and s else [],
                      "started_at": a.created_at, "ended_at": a.ended_at, "exit_code": a.exit_code,
                      "signal": a.signal, "stop_reason": a.stop_reason, "usage": a.usage,
                      "stdout": a.stdout[-lines:], "stderr": a.stderr[-lines:]})
    out["process_list"] = procs
    shares = m.job_shares.get(jid, {}).values()  # type: ignore[attr-defined]
    out["reservations"] = [{"share": s.id, "host": s.host, "order": s.order} for s in shares if s.activity is None]
    out["now"] = time.time()
    return out
