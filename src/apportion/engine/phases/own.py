"""Phase 2 of a cycle: owners use their idle owned slots (an owner blocked by an
ancestor's max reclaims within it; with reclaim_for_preference, a leaf takes its
lent slots back in the group it prefers first)."""

from __future__ import annotations

from itertools import chain

from apportion.engine.phases.base import CyclePart
from apportion.engine.phases.view import GroupView
from apportion.engine.state import OWN, RequestState, lent_source, pool_source


class OwnSlots(CyclePart):
    """Phase 2's methods; ``Cycle`` inherits them."""

    def _own_idle(self, leaf: str, g: str, v: GroupView) -> int:
        u = self.s.usage_in[g].get(leaf)
        owned = v.owned.get(leaf, 0)
        return owned - (u.own + u.lent_total if u else 0)

    def _preferred_lent(self, leaf: str, g: str, v: GroupView) -> bool:
        """reclaim_for_preference (EGO's ownership policy): a leaf that states a preference for ``g``
        takes its lent slots back there before it uses idle owned slots elsewhere."""
        if not self.policy.reclaim_for_preference or v.settings[leaf].preference is None:
            return False
        u = self.s.usage_in[g].get(leaf)
        return bool(u and u.lent) and not self.s.is_futile(leaf, g)

    def _serve_own(self) -> None:
        def serve(leaf: str, rs: RequestState, g: str, v: GroupView) -> None:
            idle = self._own_idle(leaf, g, v)
            if idle <= 0:
                if self._preferred_lent(leaf, g, v):
                    self._take_back_lent(leaf, rs, g, v)
                return
            self._give(rs, g, min(idle, self._headroom(leaf, g, v)), OWN)
            short = min(self._own_idle(leaf, g, v), self.want.get(leaf, 0), rs.unmet)
            if short >= self.want.get(leaf, 0):
                self.sensitive.add(leaf)
            if short > 0 and not self.s.is_futile(leaf, g):
                self._free_within_max(leaf, g, v, short)

        def room(leaf: str, g: str, v: GroupView) -> bool:
            return self._own_idle(leaf, g, v) > 0 or self._preferred_lent(leaf, g, v)

        # owners (somewhere) that want slots, and the groups where they have idle owned
        # slots, or lent ones to take back, and can use slots: nothing in the phase
        # gives an owner idle slots back, so no other group will have room. Idle owned
        # slots need ownership in the group; lent ones, slots lent there
        want, views = self.want, self.views
        can: dict[str, list[str]] = {}
        for g, v in views.items():
            unmet = self.s.unmet_in[g]
            owned = v.owned
            here = chain((x for x in v.gp.owners if owned.get(x, 0) > 0),
                         (x for x in self.s.lending.get(g, ()) if owned.get(x, 0) <= 0
                          and any(o.owned.get(x, 0) > 0 for o in views.values())))
            for leaf in here:
                if want.get(leaf, 0) > 0 and unmet.get(leaf, 0) > 0 and room(leaf, g, v):
                    can.setdefault(leaf, []).append(g)
        self._serve(self._wanting(can), room, serve, can.__getitem__)

    def _free_within_max(self, leaf: str, g: str, v: GroupView, short: int) -> None:
        """Owned slots are a guarantee: when an ancestor's ``max`` is full of slots its
        subtree took from pools or lenders, those give way to the owner."""
        st = self.s.subtree_held[g]
        for p, mx in v.gp.max_chain[leaf]:
            if p == leaf:
                continue
            blocked = min(short, st.get(p, 0) - (mx - short))
            if blocked <= 0:
                continue
            for victim in sorted(v.leaves_under.get(p, ()), key=lambda x: -self.s.consumers[x].index):
                vu = self.s.usage_in[g].get(victim)
                if vu is None:
                    continue
                for src in [pool_source(o) for o in vu.pools] + [lent_source(x) for x in vu.borrowed]:
                    n = min(blocked, vu.free_of(src))
                    if n > 0:
                        got = self._mark(victim, g, src, n, leaf, v.settings[victim].grace,
                                         "owner needs its slots within the parent's max")
                        blocked -= got
                        self.want[leaf] -= got
                    if blocked <= 0:
                        return
