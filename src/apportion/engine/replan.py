"""A new plan under running work: carry requests and allocations over to a fresh state.

Built aside from the live state and returned whole, so the caller can swap it in
atomically (``Engine.apply_plan``); nothing here touches the old state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apportion.engine.decisions import Removal
from apportion.engine.index import GroupPlan
from apportion.engine.model import ROOT, HostState, Plan
from apportion.engine.state import OWN, Allocation, ClusterState, PendingReclaim, pool_source


@dataclass(slots=True)
class Rebuilt:
    state: ClusterState
    removed: list[Removal] = field(default_factory=list)


def rebuild(old: ClusterState, plan: Plan) -> Rebuilt:
    new = ClusterState(plan)
    out = Rebuilt(new)
    for name, h in old.hosts.items():
        if name in new.hosts and h.state is not new.hosts[name].state:
            new.set_host_state(name, h.state)
    new.lost.clear()
    new._next_id = old._next_id
    for rid, rs in old.requests.items():
        c = new.consumers.get(rs.spec.consumer)
        if c is None or not c.is_leaf:
            why = (f"{rs.spec.consumer} is no longer in the plan" if c is None
                   else f"{rs.spec.consumer} is no longer a leaf consumer")
            for a in rs.allocs.values():
                out.removed.append(_gone(a, "plan change: " + why))
            continue
        new.add_request(rs.spec)
        nrs = new.requests[rid]
        if rs.min != nrs.min or rs.max != nrs.max:
            new.change_request(rid, min_slots=rs.min, max_slots=rs.max)
        for a in sorted(rs.allocs.values(), key=lambda a: a.id):
            reason = _fits(new, a)
            if reason:
                out.removed.append(_gone(a, "plan change: " + reason))
                continue
            b = new.add(nrs, a.group, a.host, a.slots, _source(new, a))
            if a.reclaim is not None:
                r = a.reclaim
                beneficiary = r.beneficiary
                if beneficiary in new.consumers or beneficiary.startswith("pool:"):
                    new.mark(b, b.slots, PendingReclaim(r.deadline, beneficiary, r.reason))
    new.touch()
    return out


def _gone(a: Allocation, reason: str) -> Removal:
    return Removal(a.request, a.consumer, a.group, a.host, a.slots, reason)


def _fits(new: ClusterState, a: Allocation) -> str | None:
    c = new.consumers[a.consumer]
    if a.group not in new.groups:
        return f"group {a.group} no longer exists"
    if a.group not in c.groups:
        return f"{a.consumer} is no longer planned in {a.group}"
    h = new.hosts.get(a.host)
    if h is None:
        return f"host {a.host} is no longer in the plan"
    if a.host not in new.groups[a.group].rank:
        return f"host {a.host} is no longer in {a.group}"
    if h.state is HostState.DOWN:
        return f"host {a.host} is down"
    if h.free < a.slots:
        return f"host {a.host} has fewer slots now"
    return None


def _source(new: ClusterState, a: Allocation) -> str:
    """The allocation's source if the new plan still allows it, else the public pool."""
    src = a.source
    if src == OWN:
        return OWN
    kind, _, who = src.partition(":")
    gp: GroupPlan = new.group_plan(a.group)
    if kind == "pool":
        return src if (who == ROOT or who in gp.draws_from.get(a.consumer, ())) else pool_source(ROOT)
    if who in gp.settings and who in gp.lenders and gp.may_borrow(a.consumer, who):
        return src
    return pool_source(ROOT)
