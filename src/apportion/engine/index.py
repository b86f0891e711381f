"""What never changes while a plan is in force, worked out once per plan and group.

A cycle needs, per group, the consumer tree planned there, each leaf's chain of
pools, the lenders a borrower may try and in which order, and which ancestors
cap a leaf with ``max``. None of it depends on demand or allocations, so it is
built once and shared by every cycle.
"""

from __future__ import annotations

from apportion.engine.model import ROOT, GroupSettings, Plan
from apportion.engine.sharetree import ShareTree

UNSET = 1 << 30


def rank_key(s: GroupSettings, index: int) -> tuple[int, int]:
    """Best rank first; unset after every set rank; ties to the earlier consumer."""
    return (s.rank if s.rank is not None else UNSET, index)


class GroupPlan:
    __slots__ = ("name", "settings", "children", "tree", "leaves", "parents", "pools_of",
                 "leaves_under", "pool_order", "lenders", "max_chain", "index", "_lender_order",
                 "ancestors", "parent_of", "capped_parents", "draws_from", "owners", "max_of",
                 "owned_hosts", "draws_set", "victim_order", "_borrowers", "_top_owners", "_most")

    def __init__(self, plan: Plan, name: str, ancestors: dict[str, tuple[str, ...]]) -> None:
        self.name = name
        cons = [c for c in plan.consumers if name in c.groups]
        self.settings: dict[str, GroupSettings] = {c.path: c.groups[name] for c in cons}
        self.index = {c.path: c.index for c in cons}
        self.index[ROOT] = -1
        self.ancestors = ancestors
        self.parent_of = {c.path: c.parent for c in cons}
        children: dict[str, list[str]] = {ROOT: []}
        for c in cons:
            children.setdefault(c.parent, []).append(c.path)
        # children in the order ownership is honoured: best rank first
        self.children = {
            p: sorted(kids, key=lambda k: rank_key(self.settings[k], self.index[k]))
            for p, kids in children.items()
        }
        ratio = {p: s.share_ratio for p, s in self.settings.items()}
        ratio[ROOT] = 1
        prio = {p: s.priority for p, s in self.settings.items()}
        prio[ROOT] = None
        plan_order = {p: [k for k in kids] for p, kids in children.items()}
        self.tree = ShareTree(plan_order, ratio, prio, self.index)
        self.leaves = [c.path for c in cons if c.is_leaf]
        self.parents = [ROOT] + [c.path for c in cons if c.children]
        self.pools_of: dict[str, tuple[str, ...]] = {}
        self.leaves_under: dict[str, list[str]] = {}
        self.draws_from: dict[str, tuple[str, ...]] = {}
        for leaf in self.leaves:
            chain = tuple(p for p in ancestors[leaf] if p in self.settings) + (ROOT,)
            self.pools_of[leaf] = chain
            for p in chain:
                self.leaves_under.setdefault(p, []).append(leaf)
            # the pools the leaf may take slots from: a ratio-0 node on the way up
            # (the leaf itself included) shuts it out of every pool above that node
            ok = []
            blocked = ratio[leaf] <= 0
            for p in chain:
                if blocked:
                    break
                ok.append(p)
                blocked = p != ROOT and ratio[p] <= 0
            self.draws_from[leaf] = tuple(ok)
        self.draws_set = {leaf: frozenset(pools) for leaf, pools in self.draws_from.items()}
        # nearest pools are divided first: deepest owners first, the public pool last
        self.pool_order = sorted(self.parents, key=lambda p: -p.count("/") if p != ROOT else 1)
        self.lenders = [leaf for leaf in self.leaves if self.settings[leaf].lend and self.settings[leaf].owned > 0]
        self.owners = [leaf for leaf in self.leaves if self.settings[leaf].owned > 0]
        self.max_chain: dict[str, tuple[tuple[str, int], ...]] = {}
        for leaf in self.leaves:
            self.max_chain[leaf] = tuple(
                (p, self.settings[p].max) for p in (leaf,) + ancestors[leaf]
                if p in self.settings and self.settings[p].max is not None)
        self._lender_order: dict[str, list[str]] = {}
        self._borrowers: dict[str, list[str]] = {}
        # owners with no owner above them: a consumer inside an owner owns part of what it does
        self._most: dict[tuple[str, int], int] = {}  # most_for, per leaf and group size
        self._top_owners = [p for p, st in self.settings.items() if st.owned > 0 and not any(
            a in self.settings and self.settings[a].owned > 0 for a in ancestors.get(p, ()))]
        self.capped_parents = [p for p in self.parents if p != ROOT and self.settings[p].max is not None]
        self.max_of = {p: st.max for p, st in self.settings.items() if st.max is not None}
        # victims are taken worst rank first, then latest in the plan: the rank key negated
        self.victim_order = {leaf: tuple(-x for x in rank_key(self.settings[leaf], self.index[leaf]))
                             for leaf in self.leaves}
        # multidimensional ownership: the hosts each consumer owns here, in plan order;
        # its own work, and what it lends, go to those hosts first
        position = {h.name: i for i, h in enumerate(plan.hosts)}
        self.owned_hosts: dict[str, tuple[str, ...]] = {
            c: tuple(sorted((h for h, n in parts.items() if n > 0), key=position.__getitem__))
            for c, parts in ((plan.host_ownership or {}).get(name) or {}).items()
        }

    def most_for(self, leaf: str, slots: int) -> int:
        """The most ``leaf`` may ever hold here, of a group of ``slots`` slots: those
        slots less what consumers outside its chain own (EGO's ownership: theirs
        alone), plus what of that they may lend it, within its ``borrow_limit`` and
        every ``max`` above it. A rigid request wider than this can never start."""
        got = self._most.get((leaf, slots))
        if got is None:
            got = self._most[(leaf, slots)] = self._most_for(leaf, slots)
        return got

    def _most_for(self, leaf: str, slots: int) -> int:
        chain = set(self.pools_of[leaf]) | {leaf}
        lent = 0
        for x in self.lenders:
            if x not in chain and self.may_borrow(leaf, x):
                st = self.settings[x]
                lent += st.owned if st.lend_limit is None else min(st.owned, st.lend_limit)
        limit = self.settings[leaf].borrow_limit
        if limit is not None:
            lent = min(lent, limit)
        if ROOT in self.draws_from[leaf]:
            n = slots - sum(self.settings[o].owned for o in self._top_owners if o not in chain)
        else:  # shut out of the public pool: its own and its ancestors' pools only
            n = max((self.settings[p].owned for p in self.draws_from[leaf] if p != ROOT), default=0)
        n += lent
        for _, mx in self.max_chain[leaf]:
            n = min(n, mx)
        return max(0, min(n, slots))

    def may_borrow(self, borrower: str, lender: str) -> bool:
        if borrower == lender:
            return False
        ls, bs = self.settings[lender], self.settings[borrower]
        if not bs.borrow or bs.grace > ls.grace:
            return False
        if ls.lend_to is not None:
            if "siblings" in ls.lend_to:
                return self.parent_of[borrower] == self.parent_of[lender]
            return borrower in ls.lend_to
        return True

    def nearness(self, a: str, b: str) -> int:
        """How far up from ``a`` the nearest common ancestor of ``a`` and ``b`` is:
        0 for siblings, 1 for cousins, and so on."""
        mine = self.ancestors[a]
        theirs = set(self.ancestors[b])
        for depth, p in enumerate(mine):
            if p in theirs:
                return depth
        return len(mine)

    def borrowers_of(self, lender: str) -> list[str]:
        """The leaves that may borrow from ``lender`` (worked out once per plan)."""
        got = self._borrowers.get(lender)
        if got is None:
            got = self._borrowers[lender] = [b for b in self.leaves if self.may_borrow(b, lender)]
        return got

    def lender_order(self, borrower: str) -> list[str]:
        """The lenders ``borrower`` may borrow from, in the order it tries them:
        its borrow_preference first, then the nearest (siblings before cousins),
        then by rank."""
        got = self._lender_order.get(borrower)
        if got is not None:
            return got
        prefs = self.settings[borrower].borrow_preference

        def key(lender: str):
            pref = prefs.index(lender) if lender in prefs else len(prefs)
            return (pref, self.nearness(borrower, lender), rank_key(self.settings[lender], self.index[lender]))

        got = sorted((x for x in self.lenders if self.may_borrow(borrower, x)), key=key)
        self._lender_order[borrower] = got
        return got
