"""Phase 4 of a cycle: borrowing of lent slots, the borrowers nearest an open lender
first, then by rank (reclaim_before_borrow runs it after phase 5)."""

from __future__ import annotations

from apportion.engine.index import UNSET, rank_key
from apportion.engine.model import ROOT
from apportion.engine.phases.base import CyclePart
from apportion.engine.phases.view import GroupView
from apportion.engine.state import RequestState, lent_source


class Borrowing(CyclePart):
    """Phase 4's methods; ``Cycle`` inherits them."""

    def _lendable(self, lender: str, g: str, v: GroupView) -> int:
        u = self.s.usage_in[g].get(lender)
        own, lent = (u.own, u.lent_total) if u else (0, 0)
        owned = v.owned.get(lender, 0)
        limit = v.settings[lender].lend_limit
        limit = owned if limit is None else min(limit, owned)
        return min(owned - own - lent, limit - lent)

    def _borrow_for(self, leaf: str, rs: RequestState, g: str, v: GroupView, open_lenders: set[str]) -> None:
        """``rs`` of ``leaf`` borrows in ``g`` from the lenders of ``open_lenders``
        (those closed by it are taken out), nearest first, within its limits."""
        st = v.settings[leaf]
        u = self.s.use(leaf, g)
        for lender in v.gp.lender_order(leaf):
            if lender not in open_lenders:
                continue
            limit = UNSET if st.borrow_limit is None else st.borrow_limit - u.borrowed_total
            n = min(self._lendable(lender, g, v), limit, self._headroom(leaf, g, v))
            if n > 0:
                self._give(rs, g, n, lent_source(lender))
            if self._lendable(lender, g, v) <= 0:
                open_lenders.discard(lender)
            if rs.unmet <= 0 or self.want.get(leaf, 0) <= 0:
                break

    def _borrow(self) -> None:
        open_lenders: dict[str, set[str]] = {}
        for g, v in self.views.items():
            open_lenders[g] = {x for x in v.gp.lenders if self._lendable(x, g, v) > 0}

        if not any(open_lenders.values()):
            return

        lender_parents = {p for g, xs in open_lenders.items() for x in xs
                          for p in self.s.ancestors[x] + (ROOT,)}

        def borrower_key(leaf: str):
            # lending goes to the lender's parent's pool first, then up (EGO's ownership policy): the
            # borrowers nearest an open lender first (siblings before cousins), then by rank
            c = self.s.consumers[leaf]
            near = UNSET
            for depth, p in enumerate(self.s.ancestors[leaf] + (ROOT,)):
                if p in lender_parents:
                    near = depth
                    break
            rks = [rank_key(c.groups[g], c.index) for g in self.s.group_names if g in c.groups]
            return (near,) + (min(rks) if rks else (UNSET, c.index))

        def room(leaf: str, g: str, v: GroupView) -> bool:
            st = v.settings[leaf]
            if not st.borrow or not open_lenders[g]:
                return False
            if st.borrow_limit is not None:
                u = self.s.usage_in[g].get(leaf)
                if u is not None and u.borrowed_total >= st.borrow_limit:
                    return False
            return True

        def serve(leaf: str, rs: RequestState, g: str, v: GroupView) -> None:
            self._borrow_for(leaf, rs, g, v, open_lenders[g])

        # only leaves with an open lender they may borrow from, in a group where they
        # can use slots and are below their borrow_limit: lenders only close and
        # borrowing only grows within the phase, so no other leaf can get any
        can: dict[str, list[str]] = {}
        for g, v in self.views.items():
            unmet = self.s.unmet_in[g]
            here = {b for x in open_lenders[g] for b in v.gp.borrowers_of(x)}
            for leaf in here:
                if self.want.get(leaf, 0) > 0 and unmet.get(leaf, 0) > 0 and room(leaf, g, v):
                    can.setdefault(leaf, []).append(g)
        leaves = sorted(can, key=borrower_key)
        self._serve(leaves, room, serve, lambda leaf: can[leaf])
