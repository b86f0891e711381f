"""What the cluster looks like: per consumer and group, as EGO's `rg` view shows it.

For a leaf the numbers are its own. For a parent they are its leaves' sums, seen
from the parent: slots its leaves take from pools at or below the parent count as
the parent's *owned* (they are inside its ownership), slots from pools above it as
*shared*; borrowing and lending count only across the parent's boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apportion.engine.model import ROOT
from apportion.engine.state import ClusterState


@dataclass(slots=True)
class GroupLine:
    held: int = 0
    owned: int = 0
    borrowed: int = 0
    shared: int = 0
    lent: int = 0
    deserved: int = 0
    demand: int = 0
    planned_owned: int = 0  # effective ownership in force (after overallocation)
    shortfall: int = 0  # held below the guarantee while demand is unmet (EGO reports)
    owned_hosts: list[str] = field(default_factory=list)  # hosts owned whole, sorted (EGO's ownership policy)
    private_pool: int = 0  # held from the private pools of consumers (the private pools of EGO's ownership policy)
    public_pool: int = 0  # held from the public pool (the root's)


@dataclass(slots=True)
class ConsumerLine:
    held: int = 0
    groups: dict[str, GroupLine] = field(default_factory=dict)


@dataclass(slots=True)
class ReclaimLine:
    request: str
    host: str
    slots: int
    deadline: float
    beneficiary: str


@dataclass(slots=True)
class ReservationLine:
    """A rigid request with a reservation (engine/reserve.py)."""

    request: str
    consumer: str
    group: str
    min: int
    held: int
    kept: dict[str, int]  # host -> idle slots kept for it at the last cycle
    planned_start: float | None  # None: not known (running work without a walltime)


@dataclass(slots=True)
class Report:
    consumers: dict[str, ConsumerLine]
    requests: dict[str, dict[str, int]]  # request -> host -> slots
    reclaiming: list[ReclaimLine]
    reservations: list[ReservationLine] = field(default_factory=list)


def build_report(state: ClusterState, views: dict) -> Report:
    consumers: dict[str, ConsumerLine] = {}
    for c in state.plan.consumers:
        line = ConsumerLine()
        inside = set(_subtree(state, c.path))
        leaves = [p for p in inside if state.consumers[p].is_leaf]
        for g in state.group_names:
            if g not in c.groups:
                continue
            v = views.get(g)
            gl = GroupLine()
            gl.planned_owned = v.owned.get(c.path, 0) if v else 0
            parts = state.plan.owned_on_hosts(g, c.path)
            if parts:
                gl.owned_hosts = sorted(h for h, n in parts.items() if n >= state.hosts[h].host.slots)
            for leaf in leaves:
                u = state.usage_in[g].get(leaf)
                if v is not None:
                    gl.deserved += v.deserved.get(leaf, 0)
                    gl.demand += v.demand.get(leaf, 0)
                    # the guarantee is what the leaf owns, as far as it wants it
                    guarantee = min(v.demand.get(leaf, 0), v.owned.get(leaf, 0))
                    gl.shortfall += max(0, guarantee - (u.held if u else 0))
                if u is None:
                    continue
                gl.held += u.held
                gl.owned += u.own
                for owner, n in u.pools.items():
                    if owner == ROOT:
                        gl.public_pool += n
                    else:
                        gl.private_pool += n
                    if owner != ROOT and owner in inside:
                        gl.owned += n
                    else:
                        gl.shared += n
                for lender, n in u.borrowed.items():
                    if lender in inside:
                        gl.owned += n  # a sibling's owned slot is still inside this parent's ownership
                    else:
                        gl.borrowed += n
                gl.lent += sum(n for b, n in u.lent.items() if b not in inside)
            line.groups[g] = gl
            line.held += gl.held
        consumers[c.path] = line
    requests = {}
    for rid, rs in state.requests.items():
        hosts: dict[str, int] = {}
        for a in rs.allocs.values():
            hosts[a.host] = hosts.get(a.host, 0) + a.slots
        requests[rid] = dict(sorted(hosts.items()))
    reclaiming = [
        ReclaimLine(a.request, a.host, a.slots, a.reclaim.deadline, a.reclaim.beneficiary)
        for a in sorted(state.reclaiming.values(), key=lambda a: (a.reclaim.deadline, a.request, a.host, a.id))
    ]
    return Report(consumers, requests, reclaiming, reservation_lines(state))


def reservation_lines(state: ClusterState) -> list[ReservationLine]:
    """The reservations in force after the last cycle, by group (engine/reserve.py)."""
    return [
        ReservationLine(r.request, r.consumer, r.group, r.min, r.held, dict(sorted(r.kept.items())), r.planned_start)
        for _, r in sorted(state.reservations.items()) if r.request in state.requests
    ]


def _subtree(state: ClusterState, path: str):
    stack = [path]
    while stack:
        p = stack.pop()
        yield p
        stack.extend(state.consumers[p].children)
