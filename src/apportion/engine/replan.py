"""A new plan under running work: carry requests and allocations over to a fresh state.

Built aside from the live state and returned whole, so the caller can swap it in
atomically (``Engine.apply_plan``); nothing here touches the old state. Owned hosts
(EGO's ownership policy) are worked out first, from the ownership in force and the work running
now (``engine/ownership.py``), and again when a host goes down or comes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apportion.engine import ownership
from apportion.engine.decisions import Removal
from apportion.engine.index import GroupPlan
from apportion.engine.model import ROOT, HostState, Plan
from apportion.engine.state import OWN, Allocation, ClusterState, PendingReclaim, pool_source


@dataclass(slots=True)
class Rebuilt:
    state: ClusterState
    removed: list[Removal] = field(default_factory=list)


def workload_of(state: ClusterState) -> dict[str, dict[str, dict[str, int]]]:
    """group -> host -> leaf -> slots held there now (what ownership changes try not to disturb)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for a in state.allocs.values():
        per = out.setdefault(a.group, {}).setdefault(a.host, {})
        per[a.consumer] = per.get(a.consumer, 0) + a.slots
    return out


def _down_after(old: ClusterState, plan: Plan) -> set[str]:
    """Hosts of ``plan`` that are down once it is in force (states carry over)."""
    down = set()
    for h in plan.hosts:
        ledger = old.hosts.get(h.name)
        if (ledger.state if ledger is not None else h.state) is HostState.DOWN:
            down.add(h.name)
    return down


def reown(old: ClusterState, plan: Plan) -> Plan:
    """``plan`` with its owned hosts worked out from the ownership in force and the work
    running now (the steps of EGO's ownership policy, minimal impact), rather than from scratch."""
    if not ownership.uses_host_ownership(plan):
        return plan
    previous = old.plan.host_ownership or {}
    got = ownership.assign(plan, previous, workload_of(old), _down_after(old, plan))
    return ownership.with_ownership(plan, got)


def after_host_change(state: ClusterState, grew: bool) -> ClusterState:
    """A host went down or came back: the groups it is in shrank or grew. Ownership
    is worked out again (a shrink trims over-owners; a growth also collects idle owned
    hosts and hands them out by rank: EGO's ownership policy, step 3). Returns a new state when
    ownership changed, else ``state`` itself. Built aside, like apply_plan."""
    plan = state.plan
    if not ownership.uses_host_ownership(plan):
        return state
    down = {n for n, h in state.hosts.items() if h.state is HostState.DOWN}
    step = ownership.redistribute if grew else ownership.assign
    got = step(plan, plan.host_ownership or {}, workload_of(state), down)
    new_plan = ownership.with_ownership(plan, got)
    if new_plan.host_ownership == plan.host_ownership:
        return state
    return rebuild(state, new_plan, reassign=False).state


def rebuild(old: ClusterState, plan: Plan, *, reassign: bool = True) -> Rebuilt:
    if reassign:
        plan = reown(old, plan)
    new = ClusterState(plan)
    out = Rebuilt(new)
    for name, h in old.hosts.items():
        if name in new.hosts and h.state is not new.hosts[name].state:
            new.set_host_state(name, h.state)
    new.lost.clear()
    # allocations lost with a host since the last cycle are still to be reported by it
    new.lost.extend(old.lost)
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
    # the live service's books carry over: processes still use what they used, and
    # fenced slots stay fenced until they are gone (hosts no longer planned drop out)
    new.changed = old.changed
    new.in_use = dict(old.in_use)
    # when work with a walltime started (engine/reserve.py: what planned starts are made of)
    new.started = {rid: t for rid, t in old.started.items() if rid in new.requests}
    new.protected = {rid for rid in old.protected if rid in new.requests}
    new.released_marked = [x for x in old.released_marked if x[0] in new.groups]
    new.cut_short = set(old.cut_short)
    new.ready_freed = {x for x in old.ready_freed if x[0] in new.groups}
    new.debt, new.debt_at = {x: d for x, d in old.debt.items() if x in new.consumers}, old.debt_at
    for (rid, host), n in old.fences.items():
        if host in new.hosts:
            book = old.fence_pool.get((rid, host))
            if book is not None:  # the part that counts in a pool, then the rest
                new.fence(rid, host, book[2], (book[0], book[1]))
                n -= book[2]
            if n:
                new.fence(rid, host, n)
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
