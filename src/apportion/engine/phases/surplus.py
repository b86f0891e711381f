"""Phase 7 of a cycle: surplus, idle pool slots beyond the deserved share, first come
first served, only from pools where no leaf still lacks its share."""

from __future__ import annotations

from collections.abc import Iterator

from apportion.engine.phases.base import CyclePart
from apportion.engine.phases.view import GroupView
from apportion.engine.state import RequestState, pool_source


class Surplus(CyclePart):
    """Phase 7's methods; ``Cycle`` inherits them."""

    def _under_idle_pools(self) -> tuple[set[str], dict[str, dict[str, list[str]]]]:
        """Leaves that want slots and stand under a pool with idle slots and no deficit:
        the only ones the surplus phase can serve; and for every leaf under an idle
        pool at all, group -> those pools, in the order it draws from them. Pools
        whose subtree wants nothing stay idle for good, so asking every leaf about
        every pool each cycle would be waste; and as idle slots only shrink within
        the phase, no other pool can open up for a leaf later."""
        out: set[str] = set()
        idle_in: dict[str, dict[str, list[str]]] = {}
        for g, v in self.views.items():
            unmet = self.s.unmet_in[g]
            for owner in v.gp.pool_order:  # nearest first: each leaf's pools come in its order
                if self._pool_idle(g, v, owner) <= 0:
                    continue
                under = v.leaves_under.get(owner, ())
                hungry = [leaf for leaf in under if self.want.get(leaf, 0) > 0
                          and unmet.get(leaf, 0) > 0 and owner in v.gp.draws_set[leaf]]
                for leaf in hungry:
                    idle_in.setdefault(leaf, {}).setdefault(g, []).append(owner)
                if hungry and not self._pool_has_deficit(v, owner):
                    out.update(hungry)
        return out, idle_in

    def _surplus(self) -> None:
        candidates, idle_in = self._under_idle_pools()
        if not candidates:
            return
        blocked: dict[tuple[str, str], bool] = {}

        def open_pools(leaf: str, g: str, v: GroupView) -> Iterator[str]:
            for owner in idle_in[leaf].get(g, ()):
                if v.pool_size.get(owner, 0) - self.s.pool_used[g].get(owner, 0) <= 0:
                    continue
                # surplus grants never create a deficit, so one look per pool is enough
                key = (g, owner)
                if key not in blocked:
                    blocked[key] = self._pool_has_deficit(v, owner)
                if not blocked[key]:
                    yield owner

        def room(leaf: str, g: str, v: GroupView) -> bool:
            return any(True for _ in open_pools(leaf, g, v))

        def serve(leaf: str, rs: RequestState, g: str, v: GroupView) -> None:
            for owner in list(open_pools(leaf, g, v)):
                idle = v.pool_size.get(owner, 0) - self.s.pool_used[g].get(owner, 0)
                n = min(idle, self._headroom(leaf, g, v))
                if n > 0:
                    self._give(rs, g, n, pool_source(owner))

        first_seq = {}
        for leaf in candidates:
            n = self.want.get(leaf, 0)
            if n > 0:
                open_ = [rs.seq for rs in self.s.wanting_of.get(leaf, {}).values()]
                if open_:
                    first_seq[leaf] = min(open_)
        leaves = sorted(first_seq, key=lambda p: (first_seq[p], self.s.consumers[p].index))
        self._hold_back_ok = True  # only phase 8 comes after: nothing marks slots given here
        try:
            self._serve(leaves, room, serve, lambda leaf: idle_in[leaf])
        finally:
            self._hold_back_ok = False

    def _pool_has_deficit(self, v: GroupView, owner: str) -> bool:
        """Surplus waits while a leaf of the pool still lacks its deserved share and
        has nothing on the way: handing its slots to others would only be reclaimed."""
        for leaf in self._short(v, v.deserved_pool, owner):
            if self.want.get(leaf, 0) <= 0 or self.s.unmet_in[v.name].get(leaf, 0) <= 0:
                continue  # nothing it still wants can run in this group
            if (leaf, v.name) in self.stuck or self.s.is_futile(leaf, v.name):
                continue
            if self._headroom(leaf, v.name, v) <= 0:
                continue  # a max above it is full: it could not take the slots anyway
            return True
        return False
