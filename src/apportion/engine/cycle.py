"""One scheduling cycle for slot plans (EGO, seeds 002-004).

The cycle reads the state, decides, and applies its own decisions to the state so
that each phase sees what the previous one did. Order of the phases, which is the
order in which a leaf with unmet demand is served (POLICY-NOTES section 4):

0. removals: reclaims whose grace has run out are taken by force;
1. per group: capacity, ownership honoured in rank order, pools, demand, deserved;
2. own idle owned slots;
3. share-pool slots up to the deserved share, nearest pool first
   (base_quota: static quota in every group first, then the dynamic quota);
4. borrowing of lent slots (rank order of borrowers, first come first served);
5. reclaim of the leaf's own lent slots (worst-ranked borrower first);
   reclaim_before_borrow swaps 4 and 5;
6. share-pool reclaim for fairness, the most over-share first (share_pool_reclaim);
7. surplus: idle pool slots beyond deserved, first come first served;
8. a request that did not reach its ``min`` gives this cycle's grants back.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from apportion.engine.decisions import Decisions, Grant, Reclaim, Removal
from apportion.engine.model import ROOT, GroupSettings, Request
from apportion.engine.placement import choose_hosts
from apportion.engine.shares import ShareTree, divide_pool, planned, round_shares
from apportion.engine.state import (
    OWN,
    ClusterState,
    PendingReclaim,
    RequestState,
    Usage,
    lent_source,
    pool_source,
)

UNSET = 1 << 30


def rank_key(s: GroupSettings, index: int) -> tuple[int, int]:
    """Best rank first; unset after every set rank; ties to the earlier consumer."""
    return (s.rank if s.rank is not None else UNSET, index)


class GroupView:
    """Everything a cycle computes about one group before it grants anything."""

    __slots__ = ("name", "settings", "capacity", "owned", "pool_size", "tree", "leaves_under",
                 "demand", "deserved_pool", "deserved", "static_pool", "pools_of", "lenders")

    def __init__(self, name: str) -> None:
        self.name = name
        self.settings: dict[str, GroupSettings] = {}
        self.capacity = 0
        self.owned: dict[str, int] = {}  # effective ownership (overallocation honoured in rank order)
        self.pool_size: dict[str, int] = {}  # pool owner (ROOT = public) -> unowned slots
        self.tree: ShareTree | None = None
        self.leaves_under: dict[str, list[str]] = {}
        self.demand: dict[str, int] = {}
        self.deserved_pool: dict[str, dict[str, int]] = {}  # pool owner -> leaf -> slots
        self.deserved: dict[str, int] = {}
        self.static_pool: dict[str, dict[str, int]] = {}
        self.pools_of: dict[str, tuple[str, ...]] = {}  # leaf -> pool owners, nearest first
        self.lenders: list[str] = []


class Cycle:
    def __init__(self, state: ClusterState, now: float) -> None:
        self.s = state
        self.now = now
        self.policy = state.plan.policy
        self.d = Decisions(now)
        self.views: dict[str, GroupView] = {}
        self.want: dict[str, int] = {}  # leaf -> slots it still wants this cycle
        self.granted_now: dict[str, list] = {}  # request -> allocations granted this cycle
        self._excess_cache: dict[tuple[str, str], dict[str, int]] = {}

    # ------------------------------------------------------------------
    def run(self) -> Decisions:
        s = self.s
        self.d.lost, s.lost = s.lost, []
        self._expire()
        for g in s.group_names:
            self.views[g] = self._view(g)
        for leaf, n in s.unmet.items():
            if n > 0:
                inc = sum(s.use(leaf, g).incoming_total for g in s.group_names if (leaf, g) in s.usage)
                if n - inc > 0:
                    self.want[leaf] = n - inc
        if self.want:
            self._serve_own()
            self._serve_pool()
            if self.policy.reclaim_before_borrow:
                self._reclaim_lent()
                self._borrow()
            else:
                self._borrow()
                self._reclaim_lent()
            if self.policy.share_pool_reclaim:
                self._reclaim_pool()
            self._surplus()
            self._enforce_min()
        self._reclaim_overused_pools()
        return self.d

    # -- 0. forced removals ------------------------------------------------
    def _expire(self) -> None:
        due = [a for a in self.s.reclaiming.values() if a.reclaim.deadline <= self.now]
        due.sort(key=lambda a: (a.reclaim.deadline, a.id))
        for a in due:
            self.d.removals.append(Removal(a.request, a.consumer, a.group, a.host, a.slots,
                                           "reclaimed: " + a.reclaim.reason))
            self.s.remove(a)

    # -- 1. the group view -------------------------------------------------
    def _view(self, g: str) -> GroupView:
        s = self.s
        v = GroupView(g)
        cons = [c for c in s.plan.consumers if g in c.groups]
        v.settings = {c.path: c.groups[g] for c in cons}
        v.capacity = s.groups[g].capacity()
        children: dict[str, list[str]] = {ROOT: []}
        for c in cons:
            children.setdefault(c.parent, []).append(c.path)
        # ownership honoured in rank order, top level first, then each parent's share
        order = [ROOT] + [c.path for c in cons if c.children]
        budget = {ROOT: v.capacity}
        for node in order:
            kids = sorted(children.get(node, ()), key=lambda p: rank_key(v.settings[p], s.consumers[p].index))
            left = budget.get(node, 0)
            for k in kids:
                take = min(v.settings[k].owned, left)
                v.owned[k] = budget[k] = take
                left -= take
            v.pool_size[node] = left
        ratio = {p: v.settings[p].share_ratio for p in v.settings}
        ratio[ROOT] = 1
        prio = {p: v.settings[p].priority for p in v.settings}
        prio[ROOT] = None
        index = {p: s.consumers[p].index for p in v.settings}
        index[ROOT] = -1
        v.tree = ShareTree(children, ratio, prio, index)
        leaves = [c.path for c in cons if c.is_leaf]
        for leaf in leaves:
            chain = tuple(p for p in s.ancestors[leaf] if p in v.settings) + (ROOT,)
            v.pools_of[leaf] = chain
            for p in chain:
                v.leaves_under.setdefault(p, []).append(leaf)
        self._normalise(v, leaves)
        # demand: what each leaf holds here plus what its requests usable here still want
        for leaf in leaves:
            u = s.usage.get((leaf, g))
            held = u.held if u else 0
            dem = held + s.unmet_g.get((leaf, g), 0)
            mx = v.settings[leaf].max
            v.demand[leaf] = dem if mx is None else min(dem, mx)
        # deserved: owned (as far as demanded) plus each pool's share, nearest pool first
        remaining = {}
        for leaf in leaves:
            v.deserved[leaf] = min(v.demand[leaf], v.owned.get(leaf, 0))
            remaining[leaf] = (v.demand[leaf] - v.deserved[leaf]) if ratio[leaf] > 0 else 0
        parent_mode = self.policy.share_enforcement.value == "parent"
        dynamic = self.policy.adjust_share_to_workload
        for owner in sorted(v.pool_size, key=lambda p: -(p.count("/") if p != ROOT else 0)):
            size = v.pool_size[owner]
            under = v.leaves_under.get(owner, [])
            if size <= 0 or not under:
                continue
            need = {leaf: remaining[leaf] for leaf in under if remaining[leaf] > 0}
            if self.policy.base_quota:
                plan = planned(v.tree, owner, Fraction(size), under)
                v.static_pool[owner] = round_shares(plan, index)
            if not need:
                continue
            got, _ = divide_pool(v.tree, owner, size, need, parent_mode, dynamic)
            v.deserved_pool[owner] = got
            for leaf, n in got.items():
                remaining[leaf] -= n
                v.deserved[leaf] += n
        v.lenders = [c.path for c in cons if c.is_leaf and v.settings[c.path].lend and v.owned.get(c.path, 0) > 0]
        return v

    def _normalise(self, v: GroupView, leaves: Iterable[str]) -> None:
        """Keep the books right: a leaf with idle owned slots counts borrowed and pool
        slots it holds as its own (the lender gets its slot back); a leaf whose
        ownership shrank counts the excess as public-pool slots."""
        s = self.s
        for leaf in leaves:
            u = s.usage.get((leaf, v.name))
            if u is None or u.held == 0:
                continue
            owned = v.owned.get(leaf, 0)
            idle = owned - u.own - u.lent_total
            if idle > 0 and u.held > u.own:
                sources = [lent_source(x) for x in sorted(u.borrowed)] + \
                          [pool_source(p) for p in (ROOT,) + tuple(reversed(s.ancestors[leaf]))]
                for src in sources:
                    idle = self._retag(leaf, v.name, src, OWN, idle)
                    if idle <= 0:
                        break
            elif idle < 0:
                # ownership shrank under the leaf (hosts down, a better rank took it):
                # what it holds beyond it is public-pool use from now on, subject to
                # fairness; a borrow-only leaf (ratio 0) may not keep pool slots at all
                self._retag(leaf, v.name, OWN, pool_source(ROOT), -idle)
                if v.settings[leaf].share_ratio == 0:
                    self._mark(leaf, v.name, pool_source(ROOT), -idle, ROOT, v.settings[leaf].grace,
                               "ownership shrank")

    def _retag(self, leaf: str, g: str, src: str, dst: str, n: int) -> int:
        for a in sorted(self.s.of_source(leaf, g, src), key=lambda a: a.id):
            if n <= 0:
                break
            if a.reclaim is not None:
                continue
            if a.slots > n:
                a = self.s.split(a, n)
            n -= a.slots
            self.s.retag(a, dst)
        return n

    # -- helpers -------------------------------------------------------------
    def _leaves_in_order(self) -> list[str]:
        idx = self.s.consumers
        return sorted(self.want, key=lambda p: idx[p].index)

    def _requests_of(self, leaf: str) -> list[RequestState]:
        return [rs for rs in self.s.requests_of.get(leaf, {}).values() if rs.unmet > 0]

    def _headroom(self, leaf: str, g: str, v: GroupView) -> int:
        room = self.want.get(leaf, 0)
        st = self.s.subtree_held[g]
        for p in (leaf,) + self.s.ancestors[leaf]:
            mx = v.settings[p].max
            if mx is not None:
                room = min(room, mx - st.get(p, 0))
        return room

    def _give(self, rs: RequestState, g: str, n: int, source: str) -> int:
        """Place up to ``n`` slots of ``rs`` in ``g`` from ``source``; returns slots placed."""
        req: Request = rs.spec
        inst = min(n, rs.unmet) // req.order
        if inst <= 0:
            return 0
        placed = 0
        for host, slots in choose_hosts(self.s.hosts, self.s.groups[g], req, req.consumer, inst):
            a = self.s.add(rs, g, host, slots, source)
            self.granted_now.setdefault(req.id, []).append(a)
            self.d.grants.append(Grant(req.id, req.consumer, g, host, slots, source))
            placed += slots
        if placed:
            self.want[req.consumer] -= placed
        return placed

    def _each_request_group(self, leaf: str):
        for rs in self._requests_of(leaf):
            for g in rs.groups:
                if self.want.get(leaf, 0) <= 0:
                    return
                if rs.unmet > 0:
                    yield rs, g, self.views[g]

    # -- 2. own idle slots ---------------------------------------------------
    def _serve_own(self) -> None:
        for leaf in self._leaves_in_order():
            for rs, g, v in self._each_request_group(leaf):
                u = self.s.use(leaf, g)
                idle = v.owned.get(leaf, 0) - u.own - u.lent_total
                if idle > 0:
                    self._give(rs, g, min(idle, self._headroom(leaf, g, v)), OWN)
                    idle = v.owned.get(leaf, 0) - u.own - u.lent_total
                    short = min(idle, self.want.get(leaf, 0), rs.unmet)
                    if short > 0:
                        self._free_within_max(leaf, g, v, short)

    def _free_within_max(self, leaf: str, g: str, v: GroupView, short: int) -> None:
        """Owned slots are a guarantee: when an ancestor's ``max`` is full of slots its
        subtree took from pools or lenders, those give way to the owner."""
        st = self.s.subtree_held[g]
        for p in self.s.ancestors[leaf]:
            mx = v.settings[p].max
            if mx is None:
                continue
            blocked = min(short, st.get(p, 0) - (mx - short))
            if blocked <= 0:
                continue
            for victim in sorted(v.leaves_under.get(p, ()), key=lambda x: -self.s.consumers[x].index):
                vu = self.s.usage.get((victim, g))
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

    # -- 3. share pools up to the deserved share -----------------------------
    def _serve_pool(self) -> None:
        passes = ["static", "dynamic"] if self.policy.base_quota else ["dynamic"]
        for which in passes:
            for leaf in self._leaves_in_order():
                for rs, g, v in self._each_request_group(leaf):
                    if v.settings[leaf].share_ratio <= 0:
                        continue
                    u = self.s.use(leaf, g)
                    for owner in v.pools_of[leaf]:
                        quota = (v.static_pool if which == "static" else v.deserved_pool).get(owner, {}).get(leaf, 0)
                        src = pool_source(owner)
                        room = quota - u.pools.get(owner, 0) - u.incoming.get(src, 0)
                        idle = v.pool_size.get(owner, 0) - self.s.pool_used[g].get(owner, 0)
                        n = min(room, idle, self._headroom(leaf, g, v))
                        if n > 0:
                            self._give(rs, g, n, src)

    # -- 4. borrowing ----------------------------------------------------------
    def _lendable(self, lender: str, g: str, v: GroupView) -> int:
        u = self.s.use(lender, g)
        owned = v.owned.get(lender, 0)
        limit = v.settings[lender].lend_limit
        limit = owned if limit is None else min(limit, owned)
        return min(owned - u.own - u.lent_total, limit - u.lent_total)

    def _may_borrow(self, borrower: str, lender: str, v: GroupView) -> bool:
        if borrower == lender:
            return False
        ls, bs = v.settings[lender], v.settings[borrower]
        if bs.grace > ls.grace:
            return False
        if ls.lend_to is not None:
            if "siblings" in ls.lend_to:
                if self.s.consumers[borrower].parent != self.s.consumers[lender].parent:
                    return False
            elif borrower not in ls.lend_to:
                return False
        return True

    def _lender_order(self, borrower: str, v: GroupView) -> list[str]:
        prefs = v.settings[borrower].borrow_preference
        mine = (borrower,) + self.s.ancestors[borrower]

        def nearness(lender: str) -> int:
            theirs = set(self.s.ancestors[lender])
            for depth, p in enumerate(mine[1:]):
                if p in theirs:
                    return depth
            return len(mine)

        def key(lender: str):
            pref = prefs.index(lender) if lender in prefs else len(prefs)
            return (pref, nearness(lender), rank_key(v.settings[lender], self.s.consumers[lender].index))

        return sorted((x for x in v.lenders if self._may_borrow(borrower, x, v)), key=key)

    def _borrow(self) -> None:
        def borrower_key(leaf: str):
            c = self.s.consumers[leaf]
            rks = [rank_key(c.groups[g], c.index) for g in self.s.group_names if g in c.groups]
            return min(rks) if rks else (UNSET, c.index)

        for leaf in sorted(self.want, key=borrower_key):
            for rs, g, v in self._each_request_group(leaf):
                st = v.settings[leaf]
                if not st.borrow or not v.lenders:
                    continue
                u = self.s.use(leaf, g)
                for lender in self._lender_order(leaf, v):
                    limit = UNSET if st.borrow_limit is None else st.borrow_limit - u.borrowed_total
                    n = min(self._lendable(lender, g, v), limit, self._headroom(leaf, g, v))
                    if n > 0:
                        self._give(rs, g, n, lent_source(lender))
                    if rs.unmet <= 0 or self.want.get(leaf, 0) <= 0:
                        break

    # -- 5. the owner takes its lent slots back --------------------------------
    def _mark(self, victim_leaf: str, g: str, src: str, n: int, beneficiary: str, grace: float,
              reason: str, req: Request | None = None) -> int:
        """Mark up to ``n`` slots that ``victim_leaf`` holds from ``src`` for reclaim,
        newest allocations first (they have done the least work)."""
        marked = 0
        for a in sorted(self.s.of_source(victim_leaf, g, src), key=lambda a: -a.id):
            if marked >= n:
                break
            if a.reclaim is not None:
                continue
            if req is not None and req.requirement is not None and not req.requirement(self.s.hosts[a.host].host):
                continue
            take = min(a.slots, n - marked)
            deadline = self.now + grace
            a = self.s.mark(a, take, PendingReclaim(deadline, beneficiary, reason))
            ex = self._excess_cache.get((g, src[5:])) if src.startswith("pool:") else None
            if ex is not None and victim_leaf in ex:
                ex[victim_leaf] -= take
            self.d.reclaims.append(Reclaim(a.request, a.consumer, g, a.host, take, deadline, beneficiary, reason))
            marked += take
        return marked

    def _reclaim_lent(self) -> None:
        for leaf in self._leaves_in_order():
            for rs, g, v in self._each_request_group(leaf):
                lu = self.s.use(leaf, g)
                if not lu.lent:
                    continue
                lgrace = v.settings[leaf].grace
                src = lent_source(leaf)
                victims = sorted(lu.lent, key=lambda b: rank_key(v.settings[b], self.s.consumers[b].index), reverse=True)
                for b in victims:
                    n = min(self.want.get(leaf, 0), rs.unmet)
                    if n <= 0:
                        break
                    got = self._mark(b, g, src, n, leaf, min(v.settings[b].grace, lgrace),
                                     "owner reclaims lent slots", rs.spec)
                    self.want[leaf] -= got

    # -- 6. share-pool reclaim for fairness ------------------------------------
    def _reclaim_pool(self) -> None:
        parent_mode = self.policy.share_enforcement.value == "parent"
        passes = ["static", "dynamic"] if self.policy.base_quota else ["dynamic"]
        for which in passes:
            self._excess_cache = {}
            for leaf in self._leaves_in_order():
                for rs, g, v in self._each_request_group(leaf):
                    if v.settings[leaf].share_ratio <= 0:
                        continue
                    u = self.s.use(leaf, g)
                    for owner in v.pools_of[leaf]:
                        quotas = v.static_pool if which == "static" else v.deserved_pool
                        src = pool_source(owner)
                        deficit = min(quotas.get(owner, {}).get(leaf, 0) - u.pools.get(owner, 0) - u.incoming.get(src, 0),
                                      self.want.get(leaf, 0), rs.unmet)
                        if deficit <= 0:
                            continue
                        for victim, excess in self._victims(v, owner, leaf, parent_mode):
                            n = min(deficit, excess)
                            got = self._mark(victim, g, src, n, leaf, v.settings[victim].grace,
                                             "share-pool reclaim for fairness", rs.spec)
                            deficit -= got
                            self.want[leaf] -= got
                            if deficit <= 0:
                                break

    def _protected(self, v: GroupView, owner: str, leaf: str) -> int:
        """What a leaf may keep from a pool without being over its share."""
        keep = v.deserved_pool.get(owner, {}).get(leaf, 0)
        if self.policy.base_quota:
            keep = max(keep, v.static_pool.get(owner, {}).get(leaf, 0))
        return keep

    def _excess(self, v: GroupView, owner: str) -> dict[str, int]:
        """Leaves holding more of ``owner``'s pool than they may keep, computed once a
        phase and kept current as slots are marked (see ``_mark``)."""
        key = (v.name, owner)
        ex = self._excess_cache.get(key)
        if ex is None:
            src = pool_source(owner)
            ex = {}
            for leaf in v.leaves_under.get(owner, ()):
                u = self.s.usage.get((leaf, v.name))
                e = (u.free_of(src) if u is not None else 0) - self._protected(v, owner, leaf)
                if e != 0:
                    ex[leaf] = e
            self._excess_cache[key] = ex
        return ex

    def _victims(self, v: GroupView, owner: str, beneficiary: str, parent_mode: bool) -> list[tuple[str, int]]:
        ex = self._excess(v, owner)
        excess = {leaf: e for leaf, e in ex.items() if e > 0 and leaf != beneficiary}
        if parent_mode and excess:
            # a branch gives back only what its own leaves do not deserve
            mine = set(self.s.ancestors[beneficiary]) if beneficiary in self.s.ancestors else set()
            node_excess: dict[str, int] = {}
            for leaf, e in ex.items():
                for p in self.s.ancestors[leaf]:
                    node_excess[p] = node_excess.get(p, 0) + e
            for leaf in list(excess):
                for p in self.s.ancestors[leaf]:
                    if p in mine or p == owner:
                        break
                    excess[leaf] = min(excess[leaf], node_excess.get(p, 0))
                if excess[leaf] <= 0:
                    del excess[leaf]
        idx = self.s.consumers
        return sorted(excess.items(),
                      key=lambda kv: (-kv[1], tuple(-x for x in rank_key(v.settings[kv[0]], idx[kv[0]].index))))

    # -- 7. surplus --------------------------------------------------------------
    def _surplus(self) -> None:
        if not self.want:
            return
        first_seq = {}
        for leaf in self.want:
            open_ = self._requests_of(leaf)
            if open_:
                first_seq[leaf] = min(rs.seq for rs in open_)
        blocked: dict[tuple[str, str], bool] = {}
        for leaf in sorted(self.want, key=lambda p: (first_seq.get(p, UNSET), self.s.consumers[p].index)):
            for rs, g, v in self._each_request_group(leaf):
                if v.settings[leaf].share_ratio <= 0:
                    continue
                for owner in v.pools_of[leaf]:
                    # surplus grants never create a deficit, so one look per pool is enough
                    key = (g, owner)
                    if key not in blocked:
                        blocked[key] = self._pool_has_deficit(v, owner)
                    if blocked[key]:
                        continue
                    idle = v.pool_size.get(owner, 0) - self.s.pool_used[v.name].get(owner, 0)
                    n = min(idle, self._headroom(leaf, g, v))
                    if n > 0:
                        self._give(rs, g, n, pool_source(owner))

    def _pool_has_deficit(self, v: GroupView, owner: str) -> bool:
        """Surplus waits while a leaf of the pool still lacks its deserved share and
        has nothing on the way: handing its slots to others would only be reclaimed."""
        src = pool_source(owner)
        for leaf, d in v.deserved_pool.get(owner, {}).items():
            if self.want.get(leaf, 0) <= 0:
                continue
            u = self.s.usage.get((leaf, v.name))
            have = (u.pools.get(owner, 0) + u.incoming.get(src, 0)) if u else 0
            if d > have:
                return True
        return False

    # -- 8. min -----------------------------------------------------------------
    def _enforce_min(self) -> None:
        undo = set()
        for rid, allocs in self.granted_now.items():
            rs = self.s.requests[rid]
            if rs.held < rs.min:
                for a in allocs:
                    if a.id in self.s.allocs:
                        self.s.remove(a)
                undo.add(rid)
        if undo:
            self.d.grants = [gr for gr in self.d.grants if gr.request not in undo]

    # -- shrinking pools --------------------------------------------------------
    def _reclaim_overused_pools(self) -> None:
        """A pool that shrank (hosts down, ownership honoured elsewhere) takes back its
        excess from the most over-share holders."""
        self._excess_cache = {}
        for g, v in self.views.items():
            for owner, size in v.pool_size.items():
                src = pool_source(owner)
                used = self.s.pool_used[g].get(owner, 0)
                marked = sum(self.s.use(leaf, g).marked.get(src, 0) for leaf in v.leaves_under.get(owner, ())
                             if (leaf, g) in self.s.usage)
                over = used - marked - size
                if over <= 0:
                    continue
                for victim, excess in self._victims(v, owner, "", False):
                    got = self._mark(victim, g, src, min(over, excess), owner, v.settings[victim].grace,
                                     "share pool shrank")
                    over -= got
                    if over <= 0:
                        break


def run_cycle(state: ClusterState, now: float) -> Decisions:
    return Cycle(state, now).run()
