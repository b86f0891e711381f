"""The pure centre of apportion: (plan, hosts, requests, allocations, time) -> decisions.

No I/O and no clock: the caller says what time it is. The service, the simulator
and the tests all drive this same class.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping
from dataclasses import replace

from apportion.engine.cycle import Cycle, QuietRecord
from apportion.engine.decisions import Decisions, Grant, Reclaim, Removal
from apportion.engine.drf import KindBook
from apportion.engine.model import (
    ROOT,
    AllocationPolicy,
    Consumer,
    GroupSettings,
    Host,
    HostFilter,
    HostState,
    Plan,
    Policy,
    Request,
    ResourceGroup,
    ShareEnforcement,
)
from apportion.engine.report import Report, ReservationLine, build_report, reservation_lines
from apportion.engine.ownership import prepared
from apportion.engine.replan import after_host_change, rebuild
from apportion.engine.state import ClusterState, PendingReclaim


class _Blocked:
    """A request's requirement with hosts the client blocked (never given to it again)."""

    __slots__ = ("blocked", "inner")

    def __init__(self, blocked: frozenset[str], inner: HostFilter | None) -> None:
        self.blocked = blocked
        self.inner = getattr(inner, "inner", inner)  # blocking again wraps the first filter once

    def __call__(self, host: Host) -> bool:
        return host.name not in self.blocked and (self.inner is None or self.inner(host))


class Engine:
    """Holds the state of one cluster under one plan and runs its cycles.

    ``skip_quiet``: a cycle is not run when it is certain to decide nothing: the last
    one decided nothing and only new requests came since, none of which that cycle
    could have served or that changes anyone's share (``cycle.QuietRecord``); and,
    for the plainest plans, a cycle's phase 3 is worked out with sums and the rest
    not run when they are certain to do nothing (``Cycle._plain_phase3``). The
    decisions are the same either way; for callers that change the state only
    through this class (the simulator), not the live master (it fences slots on the
    state itself)."""

    def __init__(self, plan: Plan, *, skip_quiet: bool = False) -> None:
        self._start(ClusterState(prepared(plan)), skip_quiet)  # owned hosts worked out if not yet (EGO's ownership policy)

    def _start(self, state: ClusterState, skip_quiet: bool) -> None:
        """Every field of an engine, in one place for both ways of making one."""
        self.state = state
        self._views: dict = {}
        self.skip_quiet = skip_quiet
        self._quiet: QuietRecord | None = None
        self.skipped = 0  # cycles not run (skip_quiet)
        self.cut_short = 0  # cycles ended after a phase 3 worked out with sums (skip_quiet)
        self.kinds = KindBook()  # requests with resource vectors (engine/drf.py)

    @classmethod
    def over(cls, state: ClusterState) -> Engine:
        """An engine over a state built elsewhere (a plan change tried aside, on a copy)."""
        e = cls.__new__(cls)
        e._start(state, skip_quiet=False)
        return e

    @property
    def plan(self) -> Plan:
        return self.state.plan

    # what the world tells the engine ------------------------------------------
    def submit(self, request: Request) -> None:
        if request.resources:  # a resource vector per slot: Dominant Resource Fairness (engine/drf.py)
            self.kinds.submit(self.state, request)
            return
        if request.id in self.kinds.requests:
            raise ValueError(f"request {request.id!r} is already open")
        self.state.add_request(request)

    def change(self, request_id: str, *, min: int | None = None, max: int | None = None) -> None:
        self._quiet = None
        if request_id in self.kinds.requests:
            self.kinds.change(self.state, request_id, min, max)
            return
        self.state.change_request(request_id, min_slots=min, max_slots=max)

    def release(self, request_id: str) -> None:
        """The client is done: every slot of the request goes back."""
        self._quiet = None
        if request_id in self.kinds.requests:
            self.kinds.release(self.state, request_id)
            return
        self.state.close_request(request_id)

    def release_hosts(self, request_id: str, hosts: Iterable[str], block: bool = False,
                      slots: Mapping[str, int] | None = None) -> int:
        """The client gives back what the request holds on ``hosts``, or ``slots[host]``
        slots of it on each host named there: those being reclaimed first, then the
        newest. Its max stays: it may be granted elsewhere. ``block``: those hosts never
        serve it again. Returns the slots given back."""
        self._quiet = None
        rs = self.state.requests[request_id]
        counts = dict(slots or {})
        names = set(hosts) | set(counts)
        if block:
            blocked = frozenset(names) | getattr(rs.spec.requirement, "blocked", frozenset())
            rs.spec = replace(rs.spec, requirement=_Blocked(blocked, rs.spec.requirement))
        given = 0
        for a in sorted((a for a in rs.allocs.values() if a.host in names),
                        key=lambda a: (a.reclaim is None, -a.id)):
            want = counts.get(a.host, a.slots)
            if want <= 0:
                continue
            take = min(want, a.slots)
            self.state.release(a, take)
            if a.host in counts:
                counts[a.host] -= take
            given += take
        self.state.touch()
        return given

    def restore(self, request: Request, held: Iterable[tuple[int, str, str, int, str, PendingReclaim | None]],
                blocked: Iterable[str] = ()) -> None:
        """Put back an open request and what it held, as stored by the service: each
        allocation as (id, group, host, slots, source, pending reclaim or None). Ids are
        kept, so the service's books and the engine's keep naming the same allocations."""
        self._quiet = None
        names = frozenset(blocked)
        if names:
            request = replace(request, requirement=_Blocked(names, request.requirement))
        s = self.state
        s.add_request(request)
        rs = s.requests[request.id]
        for aid, group, host, slots, source, reclaim in held:
            s._next_id, after = aid, max(s._next_id, aid + 1)
            a = s.add(rs, group, host, slots, source)
            s._next_id = after
            if reclaim is not None:
                s.mark(a, slots, reclaim)

    def apply_plan(self, plan: Plan) -> list[Removal]:
        """Put a new plan in force, atomically: the new state is built aside and swapped
        in only when complete, so a failure leaves the old plan and state untouched.

        Open requests and their allocations carry over. An allocation keeps its
        source where the new plan still allows it (own stays own; a pool slot stays
        in its pool if that pool still lies above the leaf; a borrowed slot stays
        borrowed if the lender still lends to it), otherwise it counts as public-pool
        use; the next cycles trim what is over a share, with grace. What the new plan
        cannot hold at all is removed and returned: requests of consumers that are
        gone or no longer leaves, allocations in groups the consumer is no longer
        planned in, on hosts no longer in the plan or the group. Host states carry
        over for hosts that remain. Owned hosts (EGO's ownership policy) are worked out again from
        those in force and the work running, moving only what the plan requires."""
        new = rebuild(self.state, plan)
        self.state = new.state
        self._views = {}
        self._quiet = None
        return new.removed + self.kinds.after_plan(self.state)

    def set_host_state(self, name: str, state: HostState, keep_in_use: bool = False) -> list[Removal]:
        """A host closes, opens, goes down (its allocations are lost) or comes back.
        Going down or coming back shrinks or grows its groups: owned hosts are worked
        out again (EGO's ownership policy, step 3; engine/ownership.py)."""
        self._quiet = None
        was_down = self.state.hosts[name].state is HostState.DOWN
        self.kinds.forget_places()
        lost = self.kinds.host_down(self.state, name) if state is HostState.DOWN and self.kinds else []
        self.state.lost.extend(lost)
        lost += self.state.set_host_state(name, state, keep_in_use)
        if was_down != (state is HostState.DOWN):
            self._reown(grew=was_down)
        return lost

    def _reown(self, grew: bool) -> None:
        self._quiet = None
        new = after_host_change(self.state, grew)
        if new is not self.state:
            self.state = new
            self._views = {}

    def redistribute_ownership(self) -> None:
        """The periodic pass of step 3 of EGO's ownership policy: idle owned hosts are collected from
        every consumer and handed out again by rank. No-op without owned hosts."""
        self._reown(grew=True)

    # what the engine decides ------------------------------------------------------
    def cycle(self, now: float) -> Decisions:
        quiet = self._quiet
        if quiet is not None and quiet.still_quiet(self.state, now):
            self.skipped += 1
            d = Decisions(now)
            if self.kinds and self.kinds.cycle(self.state, now, d):
                self._quiet = None
            return d
        # a cycle makes a great many small objects and no reference cycles among them;
        # the collector, triggered by the count alone, would walk the whole state again
        # and again (some 15% of a steady cycle). It is paused for the cycle only.
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            c = Cycle(self.state, now)
            c.settle_quiet = self.skip_quiet
            decisions = c.run()
        finally:
            if paused:
                gc.enable()
        self._views = c.views
        self.cut_short += c.cut_short
        self._quiet = QuietRecord.of(c, decisions) if self.skip_quiet else None
        if self.kinds and self.kinds.cycle(self.state, now, decisions):
            self._quiet = None
        return decisions

    def next_deadline(self) -> float | None:
        """The earliest reclaim deadline still pending, if any."""
        mine = self.state.next_deadline()
        theirs = self.kinds.next_deadline() if self.kinds else None
        return theirs if mine is None else mine if theirs is None else min(mine, theirs)

    def report(self) -> Report:
        return build_report(self.state, self._views)

    def reservations(self) -> list[ReservationLine]:
        """The reservations in force after the last cycle (the report's, without the rest
        of the report: the master reads them after every cycle)."""
        return reservation_lines(self.state)

    def deserved(self) -> dict[str, dict[str, int]]:
        """Group -> leaf -> what the leaf deserved at the last cycle (the report's deserved,
        without the rest of the report: the simulator samples it often)."""
        return {g: v.deserved for g, v in self._views.items()}


__all__ = [
    "ROOT", "AllocationPolicy", "Consumer", "Decisions", "Engine", "Grant", "GroupSettings", "Host",
    "HostState", "Plan", "Policy", "Reclaim", "Removal", "Report", "Request", "ResourceGroup",
    "ShareEnforcement",
]
