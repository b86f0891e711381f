"""What `apportion bench service` checks against the store once the master has stopped.

Pure functions over plain lists (so tests can hand them a crafted history), and one
reader that takes those lists out of the store with SQLAlchemy.

- No slot granted twice: the final holdings never put more slots on a host than it
  has; and replaying the stored events in id order, step by step (``granted`` adds,
  ``removed`` and ``lost`` take away; see ``step_starts``) together with the clients'
  deletions (at the moment each DELETE was sent, the earliest the master could have
  acted on it, so the replay can only under-count what was held, never over-count)
  never puts more on a host than it has, nor more on an allocation than its max (1 here).
- No allocation lost: every allocation a client got a 201 for is in the store, or was
  deleted by that client (a 204); none a client deleted is still there.
- Every committed grant is still there: for each allocation in the store, the slots
  its events leave it per host are exactly its holdings.
- Event streams: each client's ids strictly increase with no duplicate; every stored
  event of that client up to the last it received was received (no gap), and it
  received none that the store does not hold.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from apportion.bench.service_load import A_CREATED, A_DEL_SENT, A_DELETED, A_ID

RELEASING = ("removed", "lost")


@dataclass
class StoreView:
    hosts: dict[str, int]  # name -> slots
    holdings: list[tuple[int, str, int]]  # (allocation, host, slots)
    allocations: set[int]
    events: list[tuple[int, int, dict[str, Any]]]  # (id, client, body), by id


@dataclass
class Findings:
    final_overbooked: list[dict[str, Any]] = field(default_factory=list)
    replay_overbooked: list[dict[str, Any]] = field(default_factory=list)
    over_max: list[dict[str, Any]] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    resurrected: list[int] = field(default_factory=list)
    grants_missing: list[dict[str, Any]] = field(default_factory=list)
    holdings_unexplained: list[dict[str, Any]] = field(default_factory=list)
    orphan_holdings: list[int] = field(default_factory=list)
    event_order: list[dict[str, Any]] = field(default_factory=list)
    event_gaps: list[dict[str, Any]] = field(default_factory=list)
    event_unstored: list[dict[str, Any]] = field(default_factory=list)
    grants_replayed: int = 0
    events_checked: int = 0
    allocations_checked: int = 0

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            out[k] = len(v) if isinstance(v, list) else v
        out["examples"] = {k: v[:5] for k, v in self.__dict__.items() if isinstance(v, list) and v}
        out["slots_granted_twice"] = (len(self.final_overbooked) + len(self.replay_overbooked)
                                      + len(self.over_max))
        out["allocations_lost"] = len(self.lost) + len(self.grants_missing)
        out["ok"] = not any(v for v in self.__dict__.values() if isinstance(v, list))
        return out


def final_holdings(view: StoreView) -> list[dict[str, Any]]:
    used: dict[str, int] = defaultdict(int)
    for _, host, slots in view.holdings:
        used[host] += slots
    return [{"host": h, "held": n, "slots": view.hosts.get(h, 0)} for h, n in sorted(used.items())
            if n > view.hosts.get(h, 0)]


KIND_RANK = {"granted": 0, "removed": 3, "lost": 4}  # the order in which a master step writes them


def step_starts(events: list[tuple[int, int, dict[str, Any]]]) -> dict[int, tuple[float, int]]:
    """For each grant or release event, the (time, id) of the first event of its master step,
    as far as the ids show it.

    Every event of one step carries the step's time (``at``), and a step writes its
    events in the order grants, reclaims, removals, losses: so a new time, or a grant
    after a removal or a loss, starts a new step. Within a step a host may lose an
    allocation and the engine grant it again elsewhere, the loss written after the
    grant: the replay moves each release to the start of its step. Should two steps
    be read as one, a release may come before its own grant: it is then kept and
    applied right after that grant. Both only move releases earlier: the replay can
    miss a double grant but never make one up."""
    out: dict[int, tuple[float, int]] = {}
    rank, start = 99, (float("nan"), 0)
    for eid, _client, body in events:
        r = KIND_RANK.get(body.get("type", ""))
        if r is None:
            continue
        at = float(body.get("at", 0.0))
        if r < rank or at != start[0]:
            start = (at, eid)
        out[eid] = start
        rank = r
    return out


def replay(view: StoreView, deletions: dict[int, float], max_of: dict[int, int] | None = None,
           default_max: int = 1) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Replay grants and releases in order (each release at the start of its step);
    (hosts over their slots, allocations over their max, grants replayed).
    ``deletions``: allocation -> when its DELETE was sent (Unix seconds)."""
    starts = step_starts(view.events)
    timeline: list[tuple[float, int, float, Any]] = []
    for eid, _client, body in view.events:
        if eid not in starts:
            continue
        if body["type"] == "granted":
            timeline.append((float(body.get("at", 0.0)), 1, eid, body))
        else:
            t, first = starts[eid]
            timeline.append((t, 1, first - 0.5, body))
    for aid, t in deletions.items():
        timeline.append((t, 0, -1, aid))
    timeline.sort(key=lambda x: (x[0], x[1], x[2]))
    on_host: dict[str, int] = defaultdict(int)
    held: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    gone: set[int] = set()
    over_hosts: list[dict[str, Any]] = []
    over_max: list[dict[str, Any]] = []
    pending: dict[tuple[int, str], int] = defaultdict(int)  # releases that came before their grant
    grants = 0

    def release(aid: int, host: str, slots: int) -> int:
        n = min(slots, held[aid].get(host, 0))
        held[aid][host] -= n
        on_host[host] -= n
        return slots - n

    for _t, kind, _k, x in timeline:
        if kind == 0:
            gone.add(x)
            for host, n in held.pop(x, {}).items():
                on_host[host] -= n
            continue
        aid, host, slots = int(x["allocation"]), x["host"], int(x["slots"])
        if aid in gone:
            continue  # after its DELETE was sent: the replay counts it released already
        if x["type"] != "granted":
            left = release(aid, host, slots)
            if left:
                pending[(aid, host)] += left
            continue
        grants += 1
        held[aid][host] += slots
        on_host[host] += slots
        if pending.get((aid, host)):
            pending[(aid, host)] = release(aid, host, pending[(aid, host)])
        if on_host[host] > view.hosts.get(host, 0):
            over_hosts.append({"event": x.get("id"), "at": x.get("at"), "host": host, "held": on_host[host],
                               "slots": view.hosts.get(host, 0)})
        total = sum(held[aid].values())
        if total > (max_of or {}).get(aid, default_max):
            over_max.append({"event": x.get("id"), "allocation": aid, "held": total})
    return over_hosts, over_max, grants


def grants_vs_holdings(view: StoreView) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[int]]:
    """For every allocation in the store, what its events leave it per host against its holdings."""
    net: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for _, _, body in view.events:
        kind = body.get("type")
        if kind == "granted":
            net[int(body["allocation"])][body["host"]] += int(body["slots"])
        elif kind in RELEASING:
            net[int(body["allocation"])][body["host"]] -= int(body["slots"])
    have: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    orphans = []
    for aid, host, slots in view.holdings:
        if aid not in view.allocations:
            orphans.append(aid)
        have[aid][host] += slots
    missing, unexplained = [], []
    for aid in sorted(view.allocations):
        hosts = set(net.get(aid, {})) | set(have.get(aid, {}))
        for h in sorted(hosts):
            e, s = net.get(aid, {}).get(h, 0), have.get(aid, {}).get(h, 0)
            if e > s:
                missing.append({"allocation": aid, "host": h, "granted": e, "held": s})
            elif s > e:
                unexplained.append({"allocation": aid, "host": h, "granted": e, "held": s})
    return missing, unexplained, sorted(set(orphans))


def streams(view: StoreView, clients: Iterable[dict[str, Any]]) -> tuple[list, list, list, int]:
    """Each client's received ids against the store's events of that client."""
    stored: dict[int, list[int]] = defaultdict(list)
    for eid, client, _ in view.events:
        stored[client].append(eid)
    order, gaps, unstored = [], [], []
    checked = 0
    for c in clients:
        got = list(c["received"])
        checked += len(got)
        bad = [(a, b) for a, b in zip(got, got[1:], strict=False) if b <= a]
        if bad:
            order.append({"client": c["id"], "pairs": bad[:5], "count": len(bad)})
        if not got:
            continue
        top = max(got)
        mine = set(stored.get(c["id"], []))
        seen = set(got)
        missing = sorted(i for i in mine if i <= top and i not in seen)
        if missing:
            gaps.append({"client": c["id"], "missing": missing[:10], "count": len(missing)})
        extra = sorted(seen - mine)
        if extra:
            unstored.append({"client": c["id"], "ids": extra[:10], "count": len(extra)})
    return order, gaps, unstored, checked


def check(view: StoreView, clients: list[dict[str, Any]]) -> Findings:
    f = Findings()
    f.final_overbooked = final_holdings(view)
    deletions: dict[int, float] = {}
    for c in clients:
        for rec in c["allocs"]:
            if rec[A_DEL_SENT] is not None:
                deletions[int(rec[A_ID])] = float(rec[A_DEL_SENT])
            f.allocations_checked += 1
            aid = int(rec[A_ID])
            if rec[A_CREATED] is not None and rec[A_DELETED] is None and aid not in view.allocations:
                f.lost.append(aid)
            if rec[A_DELETED] is not None and aid in view.allocations:
                f.resurrected.append(aid)
    f.replay_overbooked, f.over_max, f.grants_replayed = replay(view, deletions)
    f.grants_missing, f.holdings_unexplained, f.orphan_holdings = grants_vs_holdings(view)
    f.event_order, f.event_gaps, f.event_unstored, f.events_checked = streams(view, clients)
    return f


def read_store(url: str) -> StoreView:
    """The store's hosts, holdings, allocations and events (the master must have stopped)."""
    from sqlalchemy import create_engine, select

    from apportion.service.store.models import EventRow, HoldingRow, HostRow, RequestRow

    engine = create_engine(url)
    try:
        with engine.connect() as c:
            hosts = {r.name: r.slots for r in c.execute(select(HostRow.name, HostRow.slots))}
            holdings = [(r.request, r.host, r.slots)
                        for r in c.execute(select(HoldingRow.request, HoldingRow.host, HoldingRow.slots))]
            allocations = {r.id for r in c.execute(select(RequestRow.id))}
            events = [(r.id, r.client, r.body)
                      for r in c.execute(select(EventRow.id, EventRow.client, EventRow.body).order_by(EventRow.id))]
    finally:
        engine.dispose()
    return StoreView(hosts, holdings, allocations, events)
