"""A cycle that decided nothing, kept to answer whether the next one would too
(the engine skips such cycles when asked to: ``Engine(skip_quiet=True)``)."""

from __future__ import annotations

from apportion.engine import reserve
from apportion.engine.decisions import Decisions
from apportion.engine.phases.base import CyclePart
from apportion.engine.phases.view import GroupView
from apportion.engine.state import ClusterState, RequestState


class QuietRecord:
    """A cycle that decided nothing, kept to answer whether the next one would too.

    When nothing but new requests came since (no release, change, host event,
    deadline or allocation), the next cycle decides nothing either if each new
    request's leaf could not have been served differently with more demand:

    - in that cycle it wanted slots from the start, and still did at the end (every
      test of ``want > 0`` comes out the same);
    - no amount given or reclaimed for it was bounded by what it wanted (``sensitive``),
      and its walk through its requests stopped before their end: a new request,
      last in arrival order, is never reached;
    - it already had a wanting request leading it, in every group the new one can
      use, and no later in the surplus order (``_surplus``);
    - its demand grows only where it was above what it owns (its owned part is the
      same) and in pools whose division stands (it got less than it needed, or it
      needed the whole pool: ``Cycle._division``'s reuse rule), or it was at its max;
    - nothing would be called off for it (``_cancel_unneeded``);
    - and no leaf was found unplaceable at that epoch (a new request starts a new
      epoch, and ``is_futile`` would answer otherwise).

    The cycle would then read the same numbers everywhere and decide nothing: it is
    not run. Its views stay (what each leaf deserves is the same); the demand shown
    for the new requests' leaves is brought up to date."""

    __slots__ = ("c", "fingerprint", "seen", "shown")

    def __init__(self, c: CyclePart) -> None:
        self.c = c
        self.fingerprint = self._fingerprint(c.s, 0)
        self.seen = 0
        self.shown: dict[tuple[str, str], int] = {}  # (group, leaf) -> its demand in that cycle

    @staticmethod
    def _fingerprint(s: ClusterState, opened: int) -> tuple:
        return (s._next_id, len(s.allocs), s.epoch - opened, len(s.requests) - opened, len(s.fences),
                len(s.in_use))

    @classmethod
    def of(cls, c: CyclePart, d: Decisions) -> QuietRecord | None:
        s = c.s
        if d or s.futile_at == s.epoch or s.lost:
            return None
        if c.policy.usage_half_life is not None and s.rigid:
            return None  # debts move with the clock alone, and with them who has a reservation
        if c.freed and s.reservations:
            # slots freed for a reclaim's beneficiary were left to it in this cycle only:
            # the next one keeps them for a reservation, decided or not
            return None
        return cls(c)

    def still_quiet(self, s: ClusterState, now: float) -> bool:
        c = self.c
        if s is not c.s or s.lost:
            return False
        new = s.recent
        if self._fingerprint(s, len(new)) != self.fingerprint:
            return False
        deadline = s.next_deadline()
        if deadline is not None and deadline <= now:
            return False
        for rs in new[self.seen:]:
            if not self._absorbs(rs):
                return False
        for rs in new[self.seen:]:
            self._show_demand(rs)
        self.seen = len(new)
        return True

    def _absorbs(self, rs: RequestState) -> bool:
        c, s = self.c, self.c.s
        leaf = rs.spec.consumer
        if leaf in c.sensitive or leaf not in c.want0 or c.want.get(leaf, 0) <= 0:
            return False
        if s.incoming.get(leaf, 0) > s.unmet.get(leaf, 0):
            return False
        book = s.wanting_of.get(leaf)
        if not book:
            return False
        head = book.peekitem(0)[1]
        if head.order >= s._opened - len(s.recent) or head.seq > rs.seq:
            return False  # it was not there to lead, or it would not lead
        if s.rigid and not reserve.absorbs(c, rs):
            return False  # it could change a reservation or backfill one
        for g in rs.groups:
            if g not in head.groups:
                return False
            v = c.views.get(g)
            if v is None or not self._division_stands(v, leaf):
                return False
        return True

    def _division_stands(self, v: GroupView, leaf: str) -> bool:
        gp = v.gp
        st = gp.settings[leaf]
        dem = self.shown.get((v.name, leaf))
        if dem is None:
            dem = v.demand.get(leaf, 0)
        if st.max is not None and dem >= st.max:
            return True  # its demand stays at its max
        if dem < v.owned.get(leaf, 0):
            return False  # its owned part would grow
        if st.share_ratio <= 0:
            return True  # it takes part in no division
        divisions = self.c.s.divisions
        for owner in gp.pools_of[leaf]:
            size = v.pool_size.get(owner, 0)
            if size <= 0:
                continue
            if owner not in v.deserved_pool:
                return False  # not divided then: it did not need this pool
            last = divisions.get((v.name, owner))
            if last is None:
                return False
            need = last[3].get(leaf)
            if need is None:
                return False
            if not (need >= size or last[4].get(leaf, 0) < need):
                return False  # it had all it needed: more need changes the division
        return True

    def _show_demand(self, rs: RequestState) -> None:
        c, s = self.c, self.c.s
        leaf = rs.spec.consumer
        for g in rs.groups:
            v = c.views[g]
            u = s.usage_in[g].get(leaf)
            dem = (u.held if u else 0) + s.unmet_in[g].get(leaf, 0)
            mx = v.gp.settings[leaf].max
            self.shown.setdefault((g, leaf), v.demand.get(leaf, 0))
            v.demand[leaf] = dem if mx is None or mx >= dem else mx
