"""Phase 0 of a cycle: forced removals. Reclaims whose grace has run out are taken
by force (their beneficiaries are served first this cycle); a started rigid request
that a reclaim left below its min gives back the rest (all or nothing); reclaims
whose beneficiary no longer wants the slots are called off."""

from __future__ import annotations

from apportion.engine.decisions import Reclaim, Removal
from apportion.engine.phases.base import CyclePart
from apportion.engine.state import RESERVATION_READY


class Removals(CyclePart):
    """Phase 0's methods; ``Cycle`` inherits them."""

    def _expire(self) -> None:
        for a in self.s.due(self.now):
            self.d.removals.append(Removal(a.request, a.consumer, a.group, a.host, a.slots,
                                           "reclaimed: " + a.reclaim.reason))
            self.first.add(a.reclaim.beneficiary)
            self.freed.append((a.group, a.reclaim.beneficiary, a.slots))
            if a.reclaim.reason == RESERVATION_READY:
                self.ready_freed.add((a.group, a.reclaim.beneficiary))
            if a.request in self.s.rigid:
                self.s.cut_short.add(a.request)
            self.s.remove(a)
        if self.s.cut_short:
            self._rest_of_cut_short()

    def _rest_of_cut_short(self) -> None:
        """A rigid request runs all of its min or nothing: once a reclaim (or its holder,
        giving marked slots back) takes a started one below its min, what it still holds
        runs nothing, so it is given back now and the request waits again from 0, as a
        batch scheduler requeues a job it preempted. Slots of it already marked for
        another reclaim go to that reclaim's beneficiary, as if their grace had run out."""
        s = self.s
        cut, s.cut_short = sorted(s.cut_short), set()
        for rid in cut:
            rs = s.requests.get(rid)
            if rs is None or not 0 < rs.held < rs.min:
                continue
            for a in sorted(rs.allocs.values(), key=lambda a: a.id):
                self.d.removals.append(Removal(a.request, a.consumer, a.group, a.host, a.slots,
                                               "below min: the rest of a rigid request a reclaim cut short"))
                if a.reclaim is not None:
                    self.first.add(a.reclaim.beneficiary)
                    self.freed.append((a.group, a.reclaim.beneficiary, a.slots))
                s.remove(a)

    def _cancel_unneeded(self) -> None:
        """A beneficiary that no longer wants what is being reclaimed for it (it was
        released, or it lowered its max) lets the holder keep the slots. Only
        beneficiaries whose unmet slots or pending reclaims changed since the last
        cycle can have too many (ClusterState.reclaim_dirty)."""
        s = self.s
        dirty, s.reclaim_dirty = s.reclaim_dirty, set()
        for leaf in sorted(dirty.intersection(s.reclaim_for)):
            if leaf not in s.consumers:
                continue  # for a pool that shrank ("pool:/P"): kept until the pool fits again
            extra = s.incoming.get(leaf, 0) - s.unmet.get(leaf, 0)  # incoming: the marked slots' sum
            if extra <= 0:
                continue
            for a in sorted(s.reclaim_for[leaf].values(), key=lambda a: (-a.reclaim.deadline, -a.id)):
                if extra <= 0:
                    break
                if a.slots > extra:
                    a = s.split(a, extra)
                extra -= a.slots
                s.unmark(a)
                self.d.cancelled.append(Reclaim(a.request, a.consumer, a.group, a.host, a.slots,
                                                self.now, leaf, "no longer needed"))
