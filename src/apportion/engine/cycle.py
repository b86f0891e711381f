"""One scheduling cycle for slot plans (EGO's slot-plan documentation).

The cycle reads the state, decides, and applies its own decisions to the state so
that each phase sees what the previous one did. Order of the phases, which is the
order in which a leaf with unmet demand is served (apportion's reading, docs/policies.md section 16):

0. removals: reclaims whose grace has run out are taken by force; reclaims whose
   beneficiary no longer wants the slots are called off;
1. per group: capacity, ownership honoured in rank order, pools, demand, deserved;
2. own idle owned slots (an owner blocked by an ancestor's max reclaims within it);
3. share-pool slots up to the deserved share, nearest pool first
   (base_quota: static quota in every group first, then the dynamic quota);
4. borrowing of lent slots (rank order of borrowers, first come first served);
5. reclaim of the leaf's own lent slots (worst-ranked borrower first);
   reclaim_before_borrow swaps 4 and 5;
6. share-pool reclaim for fairness, the most over-share first (share_pool_reclaim);
7. surplus: idle pool slots beyond deserved, first come first served;
8. a request that did not reach its ``min`` gives this cycle's grants back.

Each phase first asks, per leaf and group, whether there is anything to be had at
all, and only then walks the leaf's requests: most leaves, most cycles, get
nothing, and finding that out must cost next to nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from itertools import chain

from apportion.engine.decisions import Decisions, Grant, Reclaim, Removal
from apportion.engine.index import UNSET, GroupPlan, rank_key
from apportion.engine.model import ROOT, GroupSettings, Request
from apportion.engine.placement import choose_among, choose_hosts
from apportion.engine import reserve, usage
from apportion.engine.rigid import ReclaimGuard
from apportion.engine.shares import divide_pool, planned, round_shares
from apportion.engine.state import (
    OWN,
    ClusterState,
    PendingReclaim,
    RequestState,
    Usage,
    lent_source,
    pool_source,
)

__all__ = ["Cycle", "GroupView", "QuietRecord", "rank_key"]

INF = float("inf")


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


def _pool_have(u: Usage | None, owner: str, src: str) -> int:
    """What a leaf holds from ``owner``'s pool (source ``src``) plus what is being
    reclaimed for it from there: what counts against its quota in that pool."""
    if u is None:
        return 0
    return u.pools.get(owner, 0) + (u.incoming.get(src, 0) if u.incoming else 0)


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


HELD = Grant("", "", "", "", 0, "")  # the place of a grant held back (Cycle._hold_back) among the grants


class Cycle:
    # slots given to a request still below its min are counted, not made into
    # allocations, until a later grant of the cycle may take it there (_hold_back);
    # off, every grant is an allocation at once: the same decisions, for the tests
    hold_back = True

    def __init__(self, state: ClusterState, now: float) -> None:
        self.s = state
        self.now = now
        self.policy = state.plan.policy
        self.d = Decisions(now)
        self.views: dict[str, GroupView] = {}
        self.want: dict[str, int] = {}  # leaf -> slots it still wants this cycle
        self.granted_now: dict[str, list] = {}  # request -> allocations granted this cycle
        # request -> slots placed this cycle for a request that cannot reach its min
        # (see _give): [(group, host, slots, source, allocation id)], counted like
        # allocations but never made into one, as phase 8 takes them back anyway
        self.held_back: dict[str, list] = {}
        self._hold_back_ok = False  # the serving phases where that is exact (_give)
        self._held_back_keys: set[tuple[str, str, str]] = set()  # (leaf, group, source) of those
        self._excess_cache: dict[tuple[str, str], dict[str, int]] = {}
        self._victim_lists: dict[tuple[str, str], list] = {}
        self.stuck: set[tuple[str, str]] = set()  # (leaf, group) that could not be placed
        self.first: set[str] = set()  # beneficiaries of reclaims completed now: served first
        self._shorts: dict[tuple[str, bool, str], list[str]] = {}
        # leaves whose decisions here could change if they wanted more: what they still
        # wanted bounded something, or their walk reached the end of their requests
        # (QuietRecord: a cycle with nothing but new requests of other leaves since)
        self.sensitive: set[str] = set()
        self.want0: frozenset[str] = frozenset()
        # an engine that skips quiet cycles (the simulator) ends a cycle after phase 3
        # when the others are certain to do nothing, and works that phase out with sums
        # (_plain_phase3): cut_short
        self.settle_quiet = False
        self.cut_short = False
        # the rigid policy (engine/reserve.py): group -> the request with a reservation
        # this cycle; (group, beneficiary, slots) of the reclaims completed at its start
        self.reserved: dict[str, RequestState] = {}
        self.freed: list[tuple[str, str, int]] = []
        self.keeping: frozenset[str] = frozenset()  # leaves with slots kept: no reclaim victims

    # ------------------------------------------------------------------
    def run(self) -> Decisions:
        s = self.s
        s.recent = []
        self.d.lost, s.lost = s.lost, []
        self._expire()
        self._cancel_unneeded()
        for g in s.group_names:
            self.views[g] = self._view(g)
        incoming = s.incoming
        for leaf, n in s.unmet.items():
            if n > 0:
                n -= incoming.get(leaf, 0)
                if n > 0:
                    self.want[leaf] = n
        self.want0 = frozenset(self.want)
        if s.reservations:
            s.reservations = {}
        if self.policy.usage_half_life is not None:
            usage.account(s, self.views, self.now, self.policy.usage_half_life)
        if s.rigid:
            self.reserved = reserve.choose(self)
        if self.want:
            # reservations come after the owners' own slots (phase 2), before the share
            # pools: where nobody owns slots phase 2 has nothing to do, and they come
            # first, before the sums of _plain_phase3 are worked out
            early = bool(self.reserved) and not any(v.gp.owners for v in self.views.values())
            if early:
                self._reserve()
            steps = self._plain_phase3() if self.settle_quiet else None
            if steps is not None:
                self._apply_plain(steps)
                if self.reserved:
                    self._enforce_min()  # the slots kept are given back, as phase 8 does
                self.cut_short = True
                if s.rigid:
                    reserve.after_cycle(self)
                return self.d
            self._serve_own()
            if self.reserved and not early:
                self._reserve()
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
        self.keeping = frozenset()  # slots kept are given back by now
        self._reclaim_overused_pools()
        if s.rigid:
            reserve.after_cycle(self)
        return self.d

    def _reserve(self) -> None:
        """The reservations (engine/reserve.py): backfill, then slots kept or granted."""
        reserve.run(self, self.freed)
        self.keeping = frozenset(rs.spec.consumer for rs in self.reserved.values())

    def _plain_phase3(self) -> list[tuple[str, RequestState, int, bool]] | None:
        """What phase 3 does, worked out from the views with sums alone, when phases 2
        and 4 to 8 are certain to do nothing else; None otherwise (the phases then run
        as usual). Only asked by an engine that skips quiet cycles (the simulator).

        Only for the plainest plan, where each phase's outcome follows from numbers:
        one group; every leaf a child of the root, drawing from the public pool alone;
        nothing owned, lent or capped by a max; no static quota; nothing being
        reclaimed, lost, fenced or held exclusively; the pool not over its size; its
        idle slots all on open hosts. Then, with ``first`` empty:

        - phases 2, 4 and 5 have nothing to do (nothing owned or lent);
        - phase 3 serves the leaves below their share with idle slots in plan order, each
          its waiting requests in arrival order, ``min(room, idle, want, what the
          request still lacks)`` slots to each (only requests of one slot an instance
          and no requirement come here, so every such slot can be placed), until the
          leaf wants nothing more or its room or the idle slots run out. A request that
          reaches its ``min`` is granted; any other is held back, and phase 8 gives it
          back. These are the steps returned: (leaf, request, slots, granted), holds
          only where the group has more than one host (on one, where they go cannot
          move a grant, and the host has room for every grant);
        - phase 6 (share_pool_reclaim) acts only for a leaf still below its share that
          wants slots, and phase 7 only where idle slots are left and a leaf still
          wants some: either gives None;
        - phase 8 takes back only what did not reach a min: the slots held back;
        - the shrinking-pool pass acts only on a pool over its size.

        Nothing else moves: no leaf is found unplaceable, and what the next cycle reads
        is what a full run leaves but allocation ids (slots held back use none up here).
        When nothing is granted, what QuietRecord reads of the cycle is that of a full
        run too: a request given all it still lacks reaches its min, so no leaf was
        given all it wanted (``sensitive``, ``want > 0``) and no walk reached a leaf's
        last request."""
        s = self.s
        if len(self.views) != 1 or self.first or self.d.lost or self.d.removals or self.d.cancelled \
                or self.d.retagged or s.reclaiming or s.in_use or s.fences or s.exclusive_hosts \
                or s.lending or self.policy.base_quota:
            return None
        [(g, v)] = self.views.items()
        gp = v.gp
        if len(gp.parents) != 1 or gp.owners or gp.max_of or gp.owned_hosts or gp.lenders \
                or s.groups[g].exclusive:
            return None
        size = v.pool_size.get(ROOT, 0)
        used = s.pool_used[g].get(ROOT, 0)
        idle = size - used
        if used > size or idle > s.groups[g].open_free:
            return None
        quota = v.deserved_pool.get(ROOT, {})
        usage, wanting, wants = s.usage_in[g], s.wanting_of, self.want
        # where slots held back go cannot move a grant on a group of one host: only
        # grants are kept then (_apply_plain)
        holds_matter = len(s.groups[g].hosts) > 1
        wants_after = False
        steps: list[tuple[str, RequestState, int, bool]] = []
        # plan order: the serving order, as nobody is served first. A leaf outside the
        # group can be given nothing by any phase (no quota, no pool of the group above
        # it): it is left out
        index = gp.index
        for leaf in sorted([x for x in wants if x in index], key=index.__getitem__):
            want = wants[leaf]
            u = usage.get(leaf)
            room = quota.get(leaf, 0) - (u.pools.get(ROOT, 0) if u is not None else 0)
            if room > 0 and idle > 0:
                book = wanting.get(leaf, {})
                for key in book:  # arrival order; nothing changes here, so the book stands
                    rs = book[key]
                    req = rs.spec
                    if req.order != 1 or req.requirement is not None or req.exclusive or g not in rs.groups:
                        return None
                    n = rs.max - rs.held  # min(room, idle, want, what it lacks), inline
                    if room < n:
                        n = room
                    if idle < n:
                        n = idle
                    if want < n:
                        n = want
                    if rs.held + n >= rs.min:
                        steps.append((leaf, rs, n, True))
                    elif holds_matter:
                        steps.append((leaf, rs, n, False))
                    room -= n
                    idle -= n
                    want -= n
                    if want <= 0 or room <= 0 or idle <= 0:
                        break
            if want > 0:
                if room > 0 and self.policy.share_pool_reclaim:
                    return None  # still short: phase 6 may reclaim for it
                wants_after = True
        if wants_after and idle > 0:
            return None  # phase 7 may give it idle slots
        return steps

    def _apply_plain(self, steps: list[tuple[str, RequestState, int, bool]]) -> None:
        """Phase 3's grants as ``_plain_phase3`` found them, each placed where ``_give``
        would place it: after the slots held back before it in serving order took
        theirs on the hosts (those are given back at the end, as phase 8 does)."""
        last = max((i for i, step in enumerate(steps) if step[3]), default=-1)
        if last < 0:
            return
        s = self.s
        [g] = self.views
        group, src = s.groups[g], pool_source(ROOT)
        taken: list[tuple[str, str, int]] = []
        for leaf, rs, n, granted in steps[:last + 1]:
            picks = choose_hosts(s.hosts, group, rs.spec, leaf, n)
            if granted:
                self.want[leaf] -= self._place(rs, g, picks, src)
            else:
                for host, k in picks:
                    s.take_on_host(host, leaf, k)
                    taken.append((host, leaf, k))
        for host, leaf, k in taken:
            s.give_on_host(host, leaf, k)

    # -- 0. forced removals ------------------------------------------------
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

    # -- 1. the group view -------------------------------------------------
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
        got, exact = divide_pool(gp.tree, owner, size, need, parent_mode, dynamic, caps.get if caps else None)
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

    # -- helpers -------------------------------------------------------------
    def _below_max(self, leaf: str, g: str, v: GroupView) -> int | float:
        """How many more slots the leaf may hold under the max of it and its ancestors
        (unbounded without one)."""
        chain = v.gp.max_chain[leaf]
        if not chain:
            return INF
        st = self.s.subtree_held[g]
        return min(mx - st.get(p, 0) for p, mx in chain)

    def _headroom(self, leaf: str, g: str, v: GroupView) -> int:
        """What the leaf still wants, as far as a max lets it grow."""
        return min(self.want.get(leaf, 0), self._below_max(leaf, g, v))

    def _max_room(self, leaf: str, g: str, v: GroupView) -> int | float:
        """Room under the max, counting what is already being reclaimed for the leaf."""
        room = self._below_max(leaf, g, v)
        if room != INF:
            u = self.s.usage_in[g].get(leaf)
            if u is not None and u.incoming:
                room -= u.incoming_total
        return room

    def _give(self, rs: RequestState, g: str, n: int, source: str) -> int:
        """Place up to ``n`` slots of ``rs`` in ``g`` from ``source``; returns slots placed."""
        req: Request = rs.spec
        if n >= self.want.get(req.consumer, 0):
            self.sensitive.add(req.consumer)  # what it wants may be what bounds n
        unmet = rs.max - rs.held
        inst = min(n, unmet) // req.order
        if inst <= 0:
            if n > 0 and unmet >= req.order:
                self._note_stuck(req.consumer, g)  # room for less than one instance
            return 0
        placed = 0
        wanted = inst * req.order
        s = self.s
        hosts, group = s.hosts, s.groups[g]
        place = self._place
        if self.hold_back and self._hold_back_ok and source[0] == "p" and not req.exclusive \
                and not s.in_use and self._stays_below_min(rs, wanted):
            # a request still below its min after this grant: unless a later one this
            # cycle takes it there, phase 8 takes back whatever it is given. What it is
            # given still counts until then (it keeps those slots from the leaves served
            # after it), so it is counted, and made into allocations and grants only if
            # such a later grant comes (_materialise)
            place = self._hold_back
        owned_hosts = self.views[g].gp.owned_hosts
        if owned_hosts:
            # owned hosts first: the consumer's own for its own slots, the lender's for
            # lent ones, the parent's for its private pool's
            mine = owned_hosts.get(req.consumer if source == OWN else source[5:], ())
            if mine:
                placed = place(rs, g, choose_among(hosts, group, req, req.consumer, inst, mine), source)
                inst -= placed // req.order
        if inst > 0:
            placed += place(rs, g, choose_hosts(hosts, group, req, req.consumer, inst), source)
        if placed:
            self.want[req.consumer] -= placed
        if placed < wanted:
            self._note_stuck(req.consumer, g)  # on the books, but no host may take it
        return placed

    def _stays_below_min(self, rs: RequestState, wanted: int) -> bool:
        """Whether ``rs`` stays below its min after ``wanted`` more slots, or could not
        reach it even with every open slot of its groups: what it is given then is held
        back (``_hold_back``)."""
        return rs.held + wanted < rs.min or rs.held + sum(self.s.groups[x].open_free for x in rs.groups) < rs.min

    def _place(self, rs: RequestState, g: str, picks: list[tuple[str, int]], source: str) -> int:
        if not picks:
            return 0
        req = rs.spec
        if req.id in self.held_back:
            self._materialise(rs)  # what it was given earlier comes first, as it came
        placed = 0
        add, grants = self.s.add, self.d.grants
        mine = self.granted_now.setdefault(req.id, [])
        for host, slots in picks:
            mine.append(add(rs, g, host, slots, source))
            grants.append(Grant(req.id, req.consumer, g, host, slots, source))
            placed += slots
        return placed

    def _hold_back(self, rs: RequestState, g: str, picks: list[tuple[str, int]], source: str) -> int:
        """``_place`` for a request phase 8 will take back (``_give``): every count that
        ``ClusterState.add`` moves and a later phase reads (the request's and the
        leaf's, the pool's, the hosts'), moved alike; allocation ids are used up alike.
        Only a share pool's slots in the pool and surplus phases come here: phase 6
        reclaims only from leaves above what they may keep, and no grant of those
        phases takes a leaf there; ``_mark`` checks it (``_held_back_keys``)."""
        if not picks:
            return 0
        s = self.s
        leaf = rs.spec.consumer
        mine = self.held_back.setdefault(rs.spec.id, [])
        grants = self.d.grants
        placed = 0
        for host, slots in picks:
            aid = s.use_id()
            s.take_on_host(host, leaf, slots)
            mine.append((g, host, slots, source, aid, len(grants)))
            grants.append(HELD)  # its place among the grants, should it become one
            placed += slots
        s.count_held(rs, g, source, placed)
        self._held_back_keys.add((leaf, g, source))
        return placed

    def _materialise(self, rs: RequestState) -> None:
        """A request given slots held back (``_hold_back``) is given more by a grant that
        may take it to its min: what it was given becomes allocations and grants now,
        each with the id and the place among the grants it was given then, and in the
        books' order by id (all that came to them since has larger ids), as if made
        then. Nothing between read what differs: no phase marks slots held back."""
        s = self.s
        leaf = rs.spec.consumer
        mine = self.granted_now.setdefault(rs.spec.id, [])
        for g, host, slots, source, aid, at in self.held_back.pop(rs.spec.id):
            self._unhold(rs, g, host, slots, source)
            mine.append(s.add_as(aid, rs, g, host, slots, source))
            self.d.grants[at] = Grant(rs.spec.id, leaf, g, host, slots, source)

    def _unhold(self, rs: RequestState, g: str, host: str, slots: int, source: str) -> None:
        """Slots held back for ``rs`` (``_hold_back``) no longer counted: what phase 8
        does to them, and ``_materialise`` before making them an allocation."""
        self.s.count_held(rs, g, source, -slots)
        self.s.give_on_host(host, rs.spec.consumer, slots)

    def _note_stuck(self, leaf: str, g: str) -> None:
        """The leaf had room in ``g`` but could not place anything: it must not hold
        up the surplus for others (``_pool_has_deficit``), and reclaiming for it is
        futile until something outside the engine changes (``ClusterState.epoch``)."""
        self.stuck.add((leaf, g))
        self.s.futile[(leaf, g)] = self.s.futile_at = self.s.epoch

    def _serve(self, leaves: list[str], room: Callable[[str, str, GroupView], bool],
               serve: Callable[[str, RequestState, str, GroupView], None],
               groups: Callable[[str], Iterable[str]] | None = None,
               first: Callable[[str], bool] | None = None) -> None:
        """For each leaf: the groups where ``room`` says there is something to be had
        (among ``groups(leaf)`` if given: those a phase knows it can serve at all);
        then its open requests in arrival order, each request's groups in its order,
        until the leaf wants nothing more or no group has room left. ``first(leaf)``,
        if given, may serve the leaf itself, exactly as this would (True: done)."""
        views, want, unmet_in = self.views, self.want, self.s.unmet_in
        every = self.s.group_names
        for leaf in leaves:
            if want.get(leaf, 0) <= 0:
                continue
            if first is not None and first(leaf):
                continue
            open_groups = {g for g in (every if groups is None else groups(leaf))
                           if unmet_in[g].get(leaf, 0) > 0 and leaf in views[g].settings
                           and room(leaf, g, views[g])}
            if open_groups:
                self._walk(leaf, 0, open_groups, room, serve)

    def _walk(self, leaf: str, i: int, open_groups: set[str], room: Callable[[str, str, GroupView], bool],
              serve: Callable[[str, RequestState, str, GroupView], None]) -> None:
        """``_serve`` for one leaf, from the ``i``-th request that still wants slots on."""
        views, want = self.views, self.want
        # those that still want slots, in arrival order (held in full: nothing to serve),
        # walked by position and only as far as needed (a long queue is not copied): while
        # serving, a request can only leave the book (served in full), never join it
        book = self.s.wanting_of.get(leaf)
        while book is not None and i < len(book):
            rs = book.peekitem(i)[1]
            for g in rs.groups:
                if g in open_groups:
                    serve(leaf, rs, g, views[g])
                    if want[leaf] <= 0:
                        break  # served: whether room is left no longer matters
                    if not room(leaf, g, views[g]):
                        open_groups.discard(g)
            if rs.held < rs.max:
                i += 1  # still in the book; a request served in full left it, the next took its place
            if want[leaf] <= 0 or not open_groups:
                break
        else:
            self.sensitive.add(leaf)  # every request looked at: a new one would be too

    def _wanting(self, among) -> list[str]:
        """The leaves of ``among`` that still want slots, in serving order."""
        idx = self.s.consumers
        return sorted((x for x in among if self.want.get(x, 0) > 0),
                      key=lambda p: (p not in self.first, idx[p].index))

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

    # -- 2. own idle slots ---------------------------------------------------
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

    # -- 3. share pools up to the deserved share -----------------------------
    def _pool_room(self, leaf: str, g: str, v: GroupView, quotas: dict[str, dict[str, int]],
                   owner: str) -> int:
        have = _pool_have(self.s.usage_in[g].get(leaf), owner, pool_source(owner))
        return quotas.get(owner, {}).get(leaf, 0) - have

    def _short(self, v: GroupView, quotas: dict[str, dict[str, int]], owner: str) -> list[str]:
        """The leaves below their quota in ``owner``'s pool that still want slots (every
        caller asks only about those, and what a leaf wants only shrinks within a
        cycle). From the group views on,
        a leaf's room in a pool only shrinks within a cycle (grants and reclaims for
        it add to what it has; nothing is removed before the phases end), so the
        list is made once per cycle and only pruned after: most leaves of a settled
        pool have their share, and every later look skips them."""
        key = (v.name, quotas is v.static_pool, owner)
        last = self._shorts.get(key)
        mine = quotas.get(owner, {})
        pairs = mine.items() if last is None else [(leaf, mine[leaf]) for leaf in last]
        got = []
        usage, src, want = self.s.usage_in[v.name], pool_source(owner), self.want
        for leaf, quota in pairs:  # _pool_room(...) > 0
            if want.get(leaf, 0) <= 0:
                continue  # wants nothing more this cycle (want only shrinks): no use to anyone
            if quota > _pool_have(usage.get(leaf), owner, src):
                got.append(leaf)
        self._shorts[key] = got
        return got

    def _short_pools(self, quotas: Callable[[GroupView], dict[str, dict[str, int]]],
                     idle_only: bool) -> dict[str, dict[str, list[str]]]:
        """Leaf -> group -> the pools there it is below its quota in, in the order it
        draws from them; only leaves that want slots, and with ``idle_only`` only
        pools with idle slots and groups where the leaf's requests can still run.
        Within a pool phase a leaf's room and a pool's idle slots only shrink, so the
        phase need never look at any other pool."""
        found: dict[str, dict[str, list[str]]] = {}
        want = self.want
        for g, v in self.views.items():
            q = quotas(v)
            unmet = self.s.unmet_in[g]
            # pools were divided nearest first (the view's pool order), so they come
            # here in the order every leaf below draws from them
            for owner in q:
                if idle_only and self._pool_idle(g, v, owner) <= 0:
                    continue
                for leaf in self._short(v, q, owner):
                    if want.get(leaf, 0) > 0 and (not idle_only or unmet.get(leaf, 0) > 0):
                        found.setdefault(leaf, {}).setdefault(g, []).append(owner)
        return found

    def _room_in(self, leaf: str, g: str, v: GroupView, quotas: dict[str, dict[str, int]],
                 owners: Iterable[str], idle_only: bool) -> bool:
        """Whether ``leaf`` is still below its quota in one of ``owners``' pools (with
        ``idle_only``: one that also has idle slots). _pool_room and _pool_idle,
        inlined: the pool phases ask this for every leaf and group they consider."""
        u, used = self.s.usage_in[g].get(leaf), self.s.pool_used[g]
        for o in owners:
            if idle_only and v.pool_size.get(o, 0) <= used.get(o, 0):
                continue
            if quotas.get(o, {}).get(leaf, 0) > _pool_have(u, o, pool_source(o)):
                return True
        return False

    def _quota_passes(self) -> Iterator[Callable[[GroupView], dict[str, dict[str, int]]]]:
        """base_quota (EGO's static share quota documentation): the static quota in every group first, then the
        dynamic one; without it, the dynamic quota alone."""
        if self.policy.base_quota:
            yield lambda v: v.static_pool
        yield lambda v: v.deserved_pool

    def _pool_idle(self, g: str, v: GroupView, owner: str) -> int:
        return v.pool_size.get(owner, 0) - self.s.pool_used[g].get(owner, 0)

    def _serve_pool(self) -> None:
        # what this phase gives a leaf stays within its quota, so within what phase 6
        # lets it keep: slots it gives a request that phase 8 takes back may be counted
        # only (_give, _hold_back)
        self._hold_back_ok = True
        try:
            self._serve_pool_passes()
        finally:
            self._hold_back_ok = False

    def _serve_pool_passes(self) -> None:
        for quotas in self._quota_passes():
            # only leaves below their quota in a pool that has idle slots: in a settled
            # cluster most leaves that want more already have their share. Within the
            # phase a pool's idle slots and a leaf's room only shrink, so the pools
            # found here are the only ones worth a look later: ``room`` and ``serve``
            # ask those alone, in the leaf's order of pools
            short_in = self._short_pools(quotas, idle_only=True)
            if not short_in:
                continue

            def room(leaf: str, g: str, v: GroupView, quotas=quotas) -> bool:
                return self._room_in(leaf, g, v, quotas(v), short_in[leaf].get(g, ()), idle_only=True)

            def serve(leaf: str, rs: RequestState, g: str, v: GroupView, quotas=quotas) -> None:
                q = quotas(v)
                for owner in short_in[leaf].get(g, ()):
                    r = self._pool_room(leaf, g, v, q, owner)
                    if r <= 0:
                        continue
                    n = min(r, self._pool_idle(g, v, owner), self._headroom(leaf, g, v))
                    if n > 0:
                        self._give(rs, g, n, pool_source(owner))

            def first(leaf: str, quotas=quotas, room=room, serve=serve) -> bool:
                return self._hold_first(leaf, short_in[leaf], quotas, room, serve)

            self._serve(self._wanting(short_in), room, serve, lambda leaf: short_in[leaf], first)

    def _hold_first(self, leaf: str, short: dict[str, list[str]],
                    quotas: Callable[[GroupView], dict[str, dict[str, int]]],
                    room: Callable[[str, str, GroupView], bool],
                    serve: Callable[[str, RequestState, str, GroupView], None]) -> bool:
        """The pool phase's ``_serve`` for a leaf below its quota in one pool of one
        group whose first waiting request cannot reach its min there: the most common
        leaf of a backlog of wide rigid jobs, met every cycle. It is served here by
        what ``_serve``, the phase's ``serve`` and ``_give`` do for it, in their order,
        without their general walk; any other leaf is left to them (False, with
        nothing changed). The slots are held back (``_hold_back``); if the leaf still
        has room after that, its walk goes on from its next request."""
        if len(short) != 1 or not self.hold_back:
            return False
        [(g, owners)] = short.items()
        if len(owners) != 1:
            return False
        s, v = self.s, self.views[g]
        if s.in_use or v.gp.owned_hosts or s.unmet_in[g].get(leaf, 0) <= 0 or leaf not in v.settings:
            return False
        owner = owners[0]
        src = pool_source(owner)
        idle = v.pool_size.get(owner, 0) - s.pool_used[g].get(owner, 0)
        r = quotas(v).get(owner, {}).get(leaf, 0) - _pool_have(s.usage_in[g].get(leaf), owner, src)
        if idle <= 0 or r <= 0:
            return False
        book = s.wanting_of.get(leaf)
        if not book:
            return False
        rs = book.peekitem(0)[1]
        req: Request = rs.spec
        if req.exclusive or g not in rs.groups:
            return False
        want = self.want[leaf]
        n = min(r, idle, want, self._below_max(leaf, g, v))
        inst = min(n, rs.max - rs.held) // req.order
        if n <= 0 or inst <= 0:
            return False
        wanted = inst * req.order
        if not self._stays_below_min(rs, wanted):
            return False
        # _give, as the pool phase's serve calls it, with place = _hold_back
        if n >= want:
            self.sensitive.add(leaf)
        placed = self._hold_back(rs, g, choose_hosts(s.hosts, s.groups[g], req, leaf, inst), src)
        if placed:
            self.want[leaf] = want = want - placed
        if placed < wanted:
            self._note_stuck(leaf, g)
        # and on with _serve's walk; room(leaf, g, v) now: the pool's idle slots and the
        # leaf's room there less what was just placed (nothing else moved them)
        if want <= 0 or idle <= placed or r <= placed:
            return True
        self._walk(leaf, 1 if rs.held < rs.max else 0, {g}, room, serve)
        return True

    # -- 4. borrowing ----------------------------------------------------------
    def _lendable(self, lender: str, g: str, v: GroupView) -> int:
        u = self.s.usage_in[g].get(lender)
        own, lent = (u.own, u.lent_total) if u else (0, 0)
        owned = v.owned.get(lender, 0)
        limit = v.settings[lender].lend_limit
        limit = owned if limit is None else min(limit, owned)
        return min(owned - own - lent, limit - lent)

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
            st = v.settings[leaf]
            u = self.s.use(leaf, g)
            for lender in v.gp.lender_order(leaf):
                if lender not in open_lenders[g]:
                    continue
                limit = UNSET if st.borrow_limit is None else st.borrow_limit - u.borrowed_total
                n = min(self._lendable(lender, g, v), limit, self._headroom(leaf, g, v))
                if n > 0:
                    self._give(rs, g, n, lent_source(lender))
                if self._lendable(lender, g, v) <= 0:
                    open_lenders[g].discard(lender)
                if rs.unmet <= 0 or self.want.get(leaf, 0) <= 0:
                    break

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

    # -- 5. the owner takes its lent slots back --------------------------------
    def _mark(self, victim_leaf: str, g: str, src: str, n: int, beneficiary: str, grace: float,
              reason: str, req: Request | None = None, fair: bool = False) -> int:
        """Mark up to ``n`` slots that ``victim_leaf`` holds from ``src`` for reclaim,
        newest allocations first (they have done the least work). With ``req`` (what
        the slots are for), only slots the request could use once freed: on hosts
        matching its requirement where a whole instance would fit. ``fair`` (a reclaim
        for fairness): work started through a reservation is spared (engine/reserve.py)."""
        # slots held back (_hold_back) are never reclaimed: nothing marks a leaf's pool
        # slots before the surplus phase but for being above what it may keep there
        assert (victim_leaf, g, src) not in self._held_back_keys, "a reclaim of slots held back"
        # newest first: the index keeps allocations in the order they came to the source
        index = self.s.by_source.get((victim_leaf, g, src))
        if not index:
            return 0
        hosts = self.s.hosts
        plan: list[tuple] = []
        left = n
        spare = self.s.protected if fair and self.s.protected else None
        # newest first, lazily: the index keeps allocations in the order they came
        if req is None or req.order == 1:
            check = req is not None
            for a in reversed(index.values()):
                if left <= 0:
                    break
                if a.reclaim is not None or (spare is not None and a.request in spare):
                    continue
                if check:
                    h = hosts[a.host]
                    if not h.takes_work or (req.requirement is not None and not req.requirement(h.host)):
                        continue
                take = min(a.slots, left)
                plan.append((a, take))
                left -= take
        else:
            # per host, whole instances of the request: free slots there count,
            # so only what is missing for an instance is taken. Most victims hold
            # too little on any one host for that: one look at their hosts says so
            order = req.order
            have_on = self.s.source_hosts[(victim_leaf, g, src)]
            # the hosts where freeing the victim's slots completes an instance that
            # the free slots alone do not: the only ones it can give anything on
            # (with none free a host needs two or more of the victim's slots)
            useful = set()
            look = self.s.with_free.intersection(have_on)
            multi = self.s.source_multi.get((victim_leaf, g, src))
            if multi:
                look |= multi
            for host in look:
                h = hosts[host]
                free = h.free
                if (free + have_on[host]) // order * order > free:
                    if h.takes_work and (req.requirement is None or req.requirement(h.host)):
                        useful.add(host)
            if not useful:
                return 0
            by_host: dict[str, list] = {}
            for a in reversed(index.values()):  # newest first; hosts in the order met
                if a.host in useful and (spare is None or a.request not in spare):
                    by_host.setdefault(a.host, []).append(a)
            for host, lst in by_host.items():
                if left <= 0:
                    break
                free = hosts[host].free
                have = have_on[host] if spare is None else sum(a.slots for a in lst)
                inst = min((free + have) // order, (free + left) // order)
                need = max(0, inst * order - free)
                for a in lst:
                    if need <= 0:
                        break
                    take = min(a.slots, need)
                    plan.append((a, take))
                    need -= take
                    left -= take
        marked = 0
        deadline = self.now + grace
        ex = self._excess_cache.get((g, src[5:])) if src.startswith("pool:") else None
        for a, take in plan:
            a = self.s.mark(a, take, PendingReclaim(deadline, beneficiary, reason))
            if ex is not None and victim_leaf in ex:
                ex[victim_leaf] -= take
            self.d.reclaims.append(Reclaim(a.request, a.consumer, g, a.host, take, deadline, beneficiary, reason))
            marked += take
        return marked

    def _reclaim_lent(self) -> None:
        def room(leaf: str, g: str, v: GroupView) -> bool:
            # a lender at its max could not use what it took back: lent slots it
            # reclaimed would only go idle and be lent out again, for ever
            u = self.s.usage_in[g].get(leaf)
            return bool(u and u.lent) and not self.s.is_futile(leaf, g) and self._max_room(leaf, g, v) > 0

        def serve(leaf: str, rs: RequestState, g: str, v: GroupView) -> None:
            # every other means first (EGO's owning and borrowing documentation): idle share-pool slots, beyond its share
            if v.settings[leaf].share_ratio > 0:
                for owner in v.gp.draws_from[leaf]:
                    n = min(self._pool_idle(g, v, owner), self._headroom(leaf, g, v))
                    if n > 0 and not self._pool_has_deficit(v, owner):
                        self._give(rs, g, n, pool_source(owner))
            self._take_back_lent(leaf, rs, g, v)

        lending = {leaf for g, v in self.views.items() for leaf in v.gp.lenders
                   if leaf in self.s.usage_in[g] and self.s.usage_in[g][leaf].lent}
        self._serve(self._wanting(lending), room, serve)

    def _take_back_lent(self, leaf: str, rs: RequestState, g: str, v: GroupView) -> None:
        """The owner reclaims slots it lent, worst-ranked borrower first, with the
        shorter of the two graces (the lender's grace is enforced)."""
        lu = self.s.use(leaf, g)
        lgrace = v.settings[leaf].grace
        src = lent_source(leaf)
        victims = sorted(lu.lent, key=lambda b: rank_key(v.settings[b], v.gp.index[b]), reverse=True)
        for b in victims:
            n = min(self.want.get(leaf, 0), rs.unmet, self._max_room(leaf, g, v))
            if n >= self.want.get(leaf, 0):
                self.sensitive.add(leaf)
            n -= n % rs.spec.order  # whole instances only
            if n <= 0:
                break
            got = self._mark(b, g, src, n, leaf, min(v.settings[b].grace, lgrace),
                             "owner reclaims lent slots", rs.spec)
            self.want[leaf] -= got

    # -- 6. share-pool reclaim for fairness ------------------------------------
    def _reclaim_pool(self) -> None:
        parent_mode = self.policy.share_enforcement.value == "parent"
        for quotas in self._quota_passes():
            self._excess_cache = {}
            self._victim_lists = {}
            # (victim, group, source) -> smallest instance it could not free this pass:
            # marks free nothing within a phase, so a larger one will not fit either
            self._no_fit: dict[tuple[str, str, str], int] = {}

            short_in = self._short_pools(quotas, idle_only=False)

            def room(leaf: str, g: str, v: GroupView, quotas=quotas) -> bool:
                if self._headroom(leaf, g, v) <= 0 or self.s.is_futile(leaf, g):
                    return False
                return self._room_in(leaf, g, v, quotas(v), short_in[leaf].get(g, ()), idle_only=False)

            def serve(leaf: str, rs: RequestState, g: str, v: GroupView, quotas=quotas) -> None:
                q = quotas(v)
                guard = None
                if rs.held < rs.min:  # a rigid request not started: only reclaims that let it start
                    guard = ReclaimGuard.open(self, rs, g, v, q, short_in[leaf].get(g, ()), parent_mode)
                    if guard is None:
                        return
                self._reclaim_pool_for(leaf, rs, g, v, q, short_in, parent_mode)
                if guard is not None:
                    guard.close()

            if short_in:
                self._serve(self._wanting(short_in), room, serve, lambda leaf: short_in[leaf])

    def _reclaim_pool_for(self, leaf: str, rs: RequestState, g: str, v: GroupView,
                          q: dict[str, dict[str, int]], short_in: dict, parent_mode: bool) -> None:
        """Phase 6 for one request of ``leaf`` in ``g``: the most over-share first."""
        for owner in short_in[leaf].get(g, ()):
            deficit = min(self._pool_room(leaf, g, v, q, owner), self._headroom(leaf, g, v), rs.unmet)
            if deficit >= self.want.get(leaf, 0):
                self.sensitive.add(leaf)
            deficit -= deficit % rs.spec.order  # whole instances only
            if deficit <= 0:
                continue
            src = pool_source(owner)
            order = rs.spec.order
            plain = rs.spec.requirement is None
            # victims that cannot free an instance that large are passed over
            no_fit = (self._no_fit, g, order) if plain else None
            for victim, excess in self._victims(v, owner, leaf, parent_mode, no_fit):
                key = (victim, g, src)
                got = self._mark(victim, g, src, min(deficit, excess), leaf, v.settings[victim].grace,
                                 "share-pool reclaim for fairness", rs.spec, fair=True)
                if got == 0 and plain:
                    self._no_fit[key] = min(order, self._no_fit.get(key, UNSET))
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
        """Each leaf's holding of ``owner``'s pool above (or below, negative) what it may
        keep; computed once a phase and kept current as slots are marked (``_mark``).
        Leaf enforcement reads only the excess of leaves that hold some of the pool
        (victims), so there the others are left out; parent enforcement sums every
        leaf's, shortfalls included, per branch."""
        key = (v.name, owner)
        ex = self._excess_cache.get(key)
        if ex is None:
            src = pool_source(owner)
            usage = self.s.usage_in[v.name]
            deserved = v.deserved_pool.get(owner, {})
            static = v.static_pool.get(owner, {}) if self.policy.base_quota else None
            every = self.policy.share_enforcement.value == "parent"
            ex = {}
            if owner == ROOT and not every:
                # the public pool lies above every leaf: only those with books here can hold some
                pairs = usage.items()
            else:
                pairs = ((leaf, usage.get(leaf)) for leaf in v.leaves_under.get(owner, ()))
            for leaf, u in pairs:  # u.free_of(src) - _protected, inlined
                held = u.pools.get(owner, 0) if u is not None else 0
                if not held and not every:
                    continue
                keep = deserved.get(leaf, 0)
                if static is not None:
                    keep = max(keep, static.get(leaf, 0))
                e = (held - (u.marked.get(src, 0) if u.marked else 0) if held else 0) - keep
                if e != 0:
                    ex[leaf] = e
            self._excess_cache[key] = ex
        return ex

    def _victims(self, v: GroupView, owner: str, beneficiary: str, parent_mode: bool,
                 no_fit: tuple[dict, str, int] | None = None) -> Iterator[tuple[str, int]]:
        """Leaves to reclaim ``owner``'s pool slots from, the most over-share first
        (ties: worse rank, then later in the plan), each with what it may give.
        ``no_fit`` = (the phase's no-fit book, group, instance size): victims known
        not to free an instance that large are passed over (the book is read as the
        walk goes, so a victim found wanting just now is skipped for the rest)."""
        if not parent_mode:
            return self._victims_leaf_mode(v, owner, beneficiary, no_fit)
        ranked = self._victims_parent_mode(v, owner, beneficiary)
        if no_fit is None:
            return iter(ranked)
        book, g, order = no_fit
        src = pool_source(owner)
        return ((leaf, e) for leaf, e in ranked if book.get((leaf, g, src), UNSET) > order)

    def _victims_leaf_mode(self, v: GroupView, owner: str, beneficiary: str,
                           no_fit: tuple[dict, str, int] | None = None) -> Iterator[tuple[str, int]]:
        """One list per pool for the whole phase, sorted by (most excess, worst rank,
        plan order) and corrected lazily: marks only lower the excess of a victim just
        yielded, which is moved back when it is next met, so no run re-sorts every leaf.
        ``no_fit``: as for ``_victims``."""
        ex = self._excess(v, owner)
        key = (v.name, owner)
        lst = self._victim_lists.get(key)
        if lst is None:
            worst = v.gp.victim_order
            lst = sorted((-e, worst[leaf], leaf) for leaf, e in ex.items() if e > 0)
            self._victim_lists[key] = lst
        if no_fit is not None:
            book, g, order = no_fit
            src = pool_source(owner)
        i = 0
        while i < len(lst):
            neg, rk, leaf = lst[i]
            cur = ex.get(leaf, 0)
            if cur != -neg:  # lowered since it was placed: it moves further down
                del lst[i]
                if cur > 0:
                    bisect.insort(lst, (-cur, rk, leaf))
                continue
            i += 1
            if leaf == beneficiary or (no_fit is not None and book.get((leaf, g, src), UNSET) <= order) \
                    or leaf in self.keeping:
                continue
            yield leaf, cur

    def _victims_parent_mode(self, v: GroupView, owner: str, beneficiary: str) -> list[tuple[str, int]]:
        ex = self._excess(v, owner)
        excess = {leaf: e for leaf, e in ex.items() if e > 0 and leaf != beneficiary and leaf not in self.keeping}
        if excess:
            # a branch gives back only what its own leaves do not deserve
            mine = set(self.s.ancestors.get(beneficiary, ()))
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
        worst = v.gp.victim_order
        return sorted(excess.items(), key=lambda kv: (-kv[1], worst[kv[0]]))

    # -- 7. surplus --------------------------------------------------------------
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

    # -- 8. min -----------------------------------------------------------------
    def _enforce_min(self) -> None:
        undo = set()
        s = self.s
        for rid, allocs in self.granted_now.items():
            rs = s.requests[rid]
            if rs.held < rs.min:
                for a in allocs:
                    if a.id in s.allocs:
                        s.remove(a)
                undo.add(rid)
        changed = s.changed
        for rid, held in self.held_back.items():
            rs = s.requests[rid]
            assert rs.held < rs.min, "a request held back reached its min"
            for g, host, slots, source, aid, _ in held:
                if changed is not None:
                    changed.add(aid)
                self._unhold(rs, g, host, slots, source)
        if self.held_back or undo:
            self.d.grants = [gr for gr in self.d.grants if gr is not HELD and gr.request not in undo]
        self.held_back = {}
        self._held_back_keys.clear()

    # -- shrinking pools --------------------------------------------------------
    def _reclaim_overused_pools(self) -> None:
        """A pool that shrank (hosts down, ownership honoured elsewhere) takes back its
        excess from the most over-share holders."""
        self._excess_cache = {}
        self._victim_lists = {}
        for g, v in self.views.items():
            for owner, size in v.pool_size.items():
                used = self.s.pool_used[g].get(owner, 0)
                if used <= size:
                    continue
                src = pool_source(owner)
                books = self.s.usage_in[g]
                marked = sum(books[leaf].marked.get(src, 0) for leaf in v.leaves_under.get(owner, ())
                             if leaf in books)
                over = used - marked - size
                if over <= 0:
                    continue
                for victim, excess in self._victims(v, owner, "", False):
                    got = self._mark(victim, g, src, min(over, excess), src, v.settings[victim].grace,
                                     "share pool shrank")
                    over -= got
                    if over <= 0:
                        break


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

    def __init__(self, c: Cycle) -> None:
        self.c = c
        self.fingerprint = self._fingerprint(c.s, 0)
        self.seen = 0
        self.shown: dict[tuple[str, str], int] = {}  # (group, leaf) -> its demand in that cycle

    @staticmethod
    def _fingerprint(s: ClusterState, opened: int) -> tuple:
        return (s._next_id, len(s.allocs), s.epoch - opened, len(s.requests) - opened, len(s.fences),
                len(s.in_use))

    @classmethod
    def of(cls, c: Cycle, d: Decisions) -> QuietRecord | None:
        s = c.s
        if d or s.futile_at == s.epoch or s.lost:
            return None
        if c.policy.usage_half_life is not None and s.rigid:
            return None  # debts move with the clock alone, and with them who has a reservation
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
