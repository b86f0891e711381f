"""Phase 0 of a cycle: forced removals. Reclaims whose grace has run out are taken
by force (their beneficiaries are served first this cycle); reclaims whose
beneficiary no longer wants the slots are called off."""

from __future__ import annotations

from apportion.engine.decisions import Reclaim, Removal
from apportion.engine.phases.base import CyclePart


class Removals(CyclePart):
    """Phase 0's methods; ``Cycle`` inherits them."""

    def _expire(self) -> None:
        for a in self.s.due(self.now):
            self.d.removals.append(Removal(a.request, a.consumer, a.group, a.host, a.slots,
                                           "reclaimed: " + a.reclaim.reason))
            self.first.add(a.reclaim.beneficiary)
            self.freed.append((a.group, a.reclaim.beneficiary, a.slots))
            self.s.remove(a)

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
