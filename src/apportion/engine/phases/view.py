"""Phase 1 of a cycle: the group views. Per group: its capacity, ownership honoured
in rank order, the pools, each leaf's demand and what it deserves of each pool
(divided nearest pool first, reusing last cycle's division where it cannot have
changed); and the books put right first (slots counted as owned, lent beyond the
limit, above a max, of a pool no longer drawn from)."""

from __future__ import annotations

from apportion.engine.index import GroupPlan
from apportion.engine.model import ROOT, GroupSettings
from apportion.engine.phases.base import CyclePart
from apportion.engine.shares import divide_pool, planned, round_shares
from apportion.engine.state import OWN, lent_source, pool_source


# how many divisions of one pool ``Views._division`` keeps by their inputs
_RECENT_DIVISIONS = 8


class GroupView:
    """One group in one cycle: the plan-static part plus what depends on the moment."""

    __slots__ = ("gp", "name", "settings", "capacity", "owned", "pool_size", "demand",
                 "deserved_pool", "own_part", "_deserved", "static_pool", "pools_of", "leaves_under")

    def __init__(self, gp: GroupPlan) -> None:
        self.gp = gp
        self.name = gp.name
        self.settings: dict[str, GroupSettings] = gp.settings
        self.pools_of = gp.pools_of
        self.leaves_under = gp.leaves_under
        self.capacity = 0
        self.owned: dict[str, int] = {}  # effective ownership (overallocation honoured in rank order)
        self.pool_size: dict[str, int] = {}  # pool owner (ROOT = public) -> unowned slots
        self.demand: dict[str, int] = {}
        self.deserved_pool: dict[str, dict[str, int]] = {}  # pool owner -> leaf -> slots
        self.own_part: dict[str, int] = {}  # leaf -> owned slots as far as it wants them
        self._deserved: dict[str, int] | None = None
        self.static_pool: dict[str, dict[str, int]] = {}

    @property
    def deserved(self) -> dict[str, int]:
        """Leaf -> what it deserves here: its owned part plus its share of each pool.
        Summed when first asked (the report); the cycle itself reads it only where a
        parent's max caps a pool, and then keeps it current as pools are divided."""
        d = self._deserved
        if d is None:
            d = dict(self.own_part)
            for got in self.deserved_pool.values():
                for leaf, n in got.items():
                    d[leaf] += n
            self._deserved = d
        return d


def _honour_ownership(gp: GroupPlan, capacity: int) -> tuple[dict[str, int], dict[str, int]]:
    """Effective ownership (overallocation honoured in rank order, top level first,
    then each parent's share) and the unowned slots left in each pool."""
    owned: dict[str, int] = {}
    pool_size: dict[str, int] = {}
    budget = {ROOT: capacity}
    for node in gp.parents:
        left = budget.get(node, 0)
        for k in gp.children.get(node, ()):
            take = min(gp.settings[k].owned, left)
            owned[k] = budget[k] = take
            left -= take
        pool_size[node] = left
    return owned, pool_size


class Views(CyclePart):
    """Phase 1's methods: each group's ``GroupView``; ``Cycle`` inherits them."""

    def _view(self, g: str) -> GroupView:
        s = self.s
        gp = s.group_plan(g)
        v = GroupView(gp)
        v.capacity = s.groups[g].capacity()
        # ownership honoured in rank order, top level first, then each parent's share:
        # it depends on the plan and the capacity alone (read only from here on)
        v.owned, v.pool_size = s.memo(("owned", g, v.capacity), lambda: _honour_ownership(gp, v.capacity))
        # only leaves whose books changed since the last view need a look: the rest
        # were normalised then and their demand is what it was (unless ownership moved)
        cache = s.view_cache.get(g)
        touched, s.touched[g] = s.touched[g], set()
        if cache is None or cache[0] != v.capacity:
            look = gp.leaves
            cache = s.view_cache[g] = (v.capacity, {}, {}, {})
        else:
            look = self._leaves_in_order(gp, touched)
        look = self._normalise(v, look)
        if gp.max_of:
            self._trim_over_max(v)
        # demand: what each leaf holds here plus what its requests usable here still want
        unmet, usage = s.unmet_in[g], s.usage_in[g]
        _, demand, own_part, remaining = cache
        for leaf in look:
            u = usage.get(leaf)
            dem = (u.held if u else 0) + unmet.get(leaf, 0)
            st = gp.settings[leaf]
            if st.max is not None and st.max < dem:
                dem = st.max
            demand[leaf] = dem
            own = min(dem, v.owned.get(leaf, 0))
            own_part[leaf] = own
            remaining[leaf] = dem - own if st.share_ratio > 0 and dem > own else 0
        # the books themselves, not copies (a copy of every leaf's, each cycle, is a
        # large part of a cycle that changes little): the next view is the first to
        # change them, and nothing reads this one after that (the engine and its quiet
        # record have moved on to the next; QuietRecord._show_demand's writes are what
        # the next view would work out anyway, for leaves it looks at again)
        v.demand = demand
        v.own_part = own_part
        # with capped parents, what each leaf deserves so far caps the next pools
        deserved = v._deserved = dict(own_part) if gp.capped_parents else None
        if len(gp.pool_order) > 1:
            remaining = dict(remaining)  # nearer pools take their part out of it below
        # deserved: owned (as far as demanded) plus each pool's share, nearest pool first
        parent_mode = self.policy.share_enforcement.value == "parent"
        dynamic = self.policy.adjust_share_to_workload
        for owner in gp.pool_order:
            size = v.pool_size.get(owner, 0)
            under = gp.leaves_under.get(owner)
            if size <= 0 or not under:
                continue
            if self.policy.base_quota:
                v.static_pool[owner] = self.s.memo(("static", g, owner, size), lambda: round_shares(
                    planned(gp.tree, owner, size, under), gp.index))
            # nobody can get more than the whole pool, so needs above its size change
            # nothing: capping them keeps the memo key stable while they move about
            if owner == ROOT and len(gp.pool_order) == 1:
                need = self._public_need(g, size, under, remaining, look, cache)
            else:
                need = {leaf: (r if r < size else size) for leaf in under if (r := remaining[leaf]) > 0}
            if not need:
                continue
            caps = self._parent_caps(v, owner)
            got = self._division(gp, g, owner, size, need, caps, parent_mode, dynamic)
            v.deserved_pool[owner] = got
            if owner != ROOT:  # the public pool comes last: nothing after it reads these
                for leaf, n in got.items():
                    remaining[leaf] -= n
            if deserved is not None:
                for leaf, n in got.items():
                    deserved[leaf] += n
        return v

    def _public_need(self, g: str, size: int, under: list[str], remaining: dict[str, int],
                     look: list[str], cache: tuple) -> dict[str, int]:
        """What each leaf of ``under`` needs of the public pool (its remaining demand,
        capped at the pool's size; leaves needing nothing left out), the pool being
        the group's only one: last view's, with the leaves ``look``ed at now (the only
        ones whose remaining demand moved) put right; worked out anew when the view's
        books were (a new ``cache``), the pool's size moved, or a leaf comes to need
        some (it takes its place in plan order). A copy: the division keeps it."""
        memo = self.s.need_memo.get(g)
        need = None
        if memo is not None and memo[0] is cache and memo[1] == size and memo[2] is under:
            need = memo[3]
            for leaf in look:
                r = remaining[leaf]
                if r > 0:
                    if leaf not in need:
                        need = None
                        break
                    need[leaf] = r if r < size else size
                elif leaf in need:
                    del need[leaf]
        if need is None:
            need = {leaf: (r if r < size else size) for leaf in under if (r := remaining[leaf]) > 0}
            self.s.need_memo[g] = (cache, size, under, need)
        return dict(need)

    def _division(self, gp: GroupPlan, g: str, owner: str, size: int, need: dict[str, int],
                  caps: dict[str, int], parent_mode: bool, dynamic: bool) -> dict[str, int]:
        """A pool's division, reusing last cycle's when it cannot have changed.

        Why reuse is exact: in a water-fill, a leaf that got less than its need
        (unsaturated) weighs on the result only by standing above its share, not by
        how far above. So when the pool, the caps and the set of leaves are the same,
        and every leaf whose need changed was unsaturated before and still needs more
        than its old exact share, the old division stands. (Leaf mode: its planned
        part min(plan, need) is then unchanged too, and it stays unsaturated in the
        spread; static quota: its share min(plan, need) is unchanged.)"""
        key = (g, owner)
        last = self.s.divisions.get(key)
        if last is not None:
            l_size, l_modes, l_caps, l_need, l_exact, l_got = last
            if l_size == size and l_modes == (parent_mode, dynamic) and l_caps == caps \
                    and l_need.keys() == need.keys():
                for leaf, n in need.items():
                    old = l_need[leaf]
                    if n != old:
                        share = l_exact.get(leaf, 0)
                        if not (share < old and share < n):
                            break
                else:
                    self.s.divisions[key] = (size, (parent_mode, dynamic), caps, need, l_exact, l_got)
                    return l_got
        # a division is a function of its inputs alone: one of the last few made here
        # with the same inputs (the needs in the same order too) is the one to make now
        recent = self.s.recent_divisions.get(key)
        if recent is None:
            recent = self.s.recent_divisions[key] = {}
        inputs = (size, parent_mode, dynamic, tuple(caps.items()), tuple(need.items()))
        made = recent.pop(inputs, None)
        if made is None:
            made = divide_pool(gp.tree, owner, size, need, parent_mode, dynamic, caps.get if caps else None)
            if len(recent) >= _RECENT_DIVISIONS:
                del recent[next(iter(recent))]  # the one used longest ago
        recent[inputs] = made
        got, exact = made
        self.s.divisions[key] = (size, (parent_mode, dynamic), caps, need, exact, got)
        return got

    def _parent_caps(self, v: GroupView, owner: str) -> dict[str, int]:
        """A parent's ``max`` limits what its subtree may still deserve from this pool:
        its max less what its leaves already deserve (owned and nearer pools)."""
        caps = {}
        for p in v.gp.capped_parents:
            below_owner = owner == ROOT or owner in v.gp.ancestors[p]
            if below_owner and p in v.gp.leaves_under:
                have = sum(v.deserved[leaf] for leaf in v.gp.leaves_under[p])
                caps[p] = max(0, v.settings[p].max - have)
        return caps

    @staticmethod
    def _leaves_in_order(gp: GroupPlan, among: set[str]) -> list[str]:
        """The leaves of the group among ``among``, in plan order."""
        index = gp.index
        return sorted((leaf for leaf in among if leaf in gp.draws_from), key=index.__getitem__)

    def _normalise(self, v: GroupView, leaves: list[str]) -> list[str]:
        """Keep the books right: a leaf with idle owned slots counts borrowed and pool
        slots it holds as its own (the lender gets its slot back); a leaf whose
        ownership shrank counts the excess as public-pool slots. Only ``leaves`` are
        looked at: the others' books have not changed since they were last put right."""
        s = self.s
        for leaf in sorted(s.lending.get(v.name, ()), key=v.gp.index.__getitem__):
            # first, so that the borrowers below see the result
            self._lent_within_limit(v, leaf, s.usage_in[v.name][leaf])
        if leaves is not v.gp.leaves and s.touched[v.name]:
            leaves = self._leaves_in_order(v.gp, s.touched[v.name].union(leaves))  # borrowers just retagged
        usage, draws = s.usage_in[v.name], v.gp.draws_set
        for leaf in leaves:
            u = usage.get(leaf)
            if u is None or (u.held == 0 and not u.lent):
                continue
            owned = v.owned.get(leaf, 0)
            if not owned and not u.own:
                # nothing owned, nothing to count as owned: only entitlement to check
                if not u.pools.keys() <= draws[leaf]:
                    self._return_unentitled(v, leaf, u)
                continue
            idle = owned - u.own - (u.lent_total if u.lent else 0)
            if idle > 0 and u.held > u.own:
                sources = [lent_source(x) for x in sorted(u.borrowed)] + \
                          [pool_source(p) for p in (ROOT,) + tuple(reversed(s.ancestors[leaf]))]
                for src in sources:
                    idle = self._retag(leaf, v.name, src, OWN, idle)
                    if idle <= 0:
                        break
            elif idle < 0 and u.own > 0:
                # ownership shrank under the leaf (hosts down, a better rank took it):
                # what it holds beyond it is public-pool use from now on, subject to
                # fairness; a borrow-only leaf (ratio 0) may not keep pool slots at all
                n = min(-idle, u.own)
                self._retag(leaf, v.name, OWN, pool_source(ROOT), n, newest_first=True)
            # last, so that slots the lines above just made pool slots are seen too
            if not u.pools.keys() <= draws[leaf]:
                self._return_unentitled(v, leaf, u)
        return leaves

    def _return_unentitled(self, v: GroupView, leaf: str, u) -> None:
        """After a plan change a leaf may hold slots of a pool it may no longer draw
        from (a ratio of 0 on the way up): those go back, with the holder's grace."""
        gp = v.gp
        grace = v.settings[leaf].grace
        for owner, n in list(u.pools.items()):
            if owner not in gp.draws_from[leaf]:
                src = pool_source(owner)
                free = u.free_of(src)
                if free > 0:
                    self._mark(leaf, v.name, src, free, src, grace, "no longer entitled to this pool")

    def _lent_within_limit(self, v: GroupView, leaf: str, u) -> None:
        """Slots lent beyond the lender's limit (the plan lowered it, or turned lending
        off) count as public-pool use of the borrower from now on, subject to fairness."""
        st = v.settings[leaf]
        owned = v.owned.get(leaf, 0)
        limit = 0 if not st.lend else min(owned, owned if st.lend_limit is None else st.lend_limit)
        over = u.lent_total - limit
        for borrower in sorted(u.lent, key=lambda b: v.gp.index[b], reverse=True):
            if over <= 0:
                break
            over = self._retag(borrower, v.name, lent_source(leaf), pool_source(ROOT), over, newest_first=True)

    def _trim_over_max(self, v: GroupView) -> None:
        """A consumer holding more than its max (the plan lowered it) gives the excess
        back, newest first, pool and borrowed slots before owned ones, with grace."""
        st = self.s.subtree_held[v.name]
        for p, mx in v.gp.max_of.items():
            held = st.get(p, 0)
            if held <= mx:
                continue
            leaves = v.leaves_under.get(p) or [p]
            books = self.s.usage_in[v.name]
            marked = sum(sum(books[x].marked.values()) for x in leaves if x in books)
            over = held - marked - mx
            for x in sorted(leaves, key=lambda x: -v.gp.index[x]):
                u = self.s.usage_in[v.name].get(x)
                if u is None or over <= 0:
                    continue
                sources = [pool_source(o) for o in u.pools] + [lent_source(o) for o in u.borrowed] + [OWN]
                for src in sources:
                    n = min(over, u.free_of(src))
                    if n > 0:
                        over -= self._mark(x, v.name, src, n, "max:" + p, v.settings[x].grace, "above max")
                    if over <= 0:
                        break

    def _retag(self, leaf: str, g: str, src: str, dst: str, n: int, newest_first: bool = False) -> int:
        for a in sorted(self.s.of_source(leaf, g, src), key=lambda a: -a.id if newest_first else a.id):
            if n <= 0:
                break
            if a.reclaim is not None:
                continue
            if a.slots > n:
                a = self.s.split(a, n)
            n -= a.slots
            self.s.retag(a, dst)
            self.d.retagged += 1
        return n
