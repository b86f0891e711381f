"""Reclaims: marking slots for reclaim, newest first (``_mark``); phase 5, the owner
takes its lent slots back, worst-ranked borrower first; phase 6, share-pool reclaim
for fairness, the most over-share first (share_pool_reclaim); and after the phases,
a pool that shrank takes back its excess."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from apportion.engine.backfill import add_fill_held, fill_live
from apportion.engine.decisions import Reclaim
from apportion.engine.index import UNSET, rank_key
from apportion.engine.model import ROOT, Request
from apportion.engine.phases.base import CyclePart
from apportion.engine.phases.view import GroupView
from apportion.engine.rigid import ReclaimGuard, protected_held, reach_usable, usable_idle
from apportion.engine.state import PendingReclaim, RequestState, lent_source, pool_source


class Reclaims(CyclePart):
    """Phases 5 and 6, ``_mark`` and the victims, the shrinking pools; ``Cycle`` inherits them."""

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
        # nor the elastic work on a reservation's kept slots (engine/backfill.py)
        lent = self._fill_live.get(g) if fair else None
        if lent:
            spare = spare if spare is not None else frozenset()  # not None: hosts' counts are summed
            spare_ids = lent
        else:
            spare_ids = ()
        # newest first, lazily: the index keeps allocations in the order they came
        if req is None or req.order == 1:
            check = req is not None
            for a in reversed(index.values()):
                if left <= 0:
                    break
                if a.reclaim is not None or (spare is not None and a.request in spare) or a.id in spare_ids:
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
                if a.host in useful and (spare is None or a.request not in spare) and a.id not in spare_ids:
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
        pos = self._excess_pos.get((g, src[5:])) if ex is not None else None
        for a, take in plan:
            a = self.s.mark(a, take, PendingReclaim(deadline, beneficiary, reason))
            if ex is not None and victim_leaf in ex:
                e = ex[victim_leaf]
                ex[victim_leaf] = e - take
                if pos is not None and pos[0] is ex:  # the sum of the excess over 0, kept with it
                    pos[1] -= (e if e > 0 else 0) - (e - take if e > take else 0)
            self.d.reclaims.append(Reclaim(a.request, a.consumer, g, a.host, take, deadline, beneficiary, reason))
            marked += take
        return marked

    # -- 5. the owner takes its lent slots back --------------------------------
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
            head = self._head_rigid(leaf, rs)
            if head.held < head.min:
                # a rigid request not started, this one or an earlier one of the owner's
                # (the slots go to that one first): its owner takes back only what lets
                # it start; slots it could not use would go idle, be lent again and be
                # reclaimed again, for ever (the borrower's work ended each time). When
                # even all it lent would not do, nothing is marked (marks called off
                # would leave the books cut where they were marked)
                if reach_usable(self, head) + self.s.usage_in[g][leaf].lent_total < head.min:
                    return
                guard = ReclaimGuard(self, head)
                self._take_back_lent(leaf, rs, g, v)
                guard.close()
            else:
                self._take_back_lent(leaf, rs, g, v)

        lending = {leaf for g, v in self.views.items() for leaf in v.gp.lenders
                   if leaf in self.s.usage_in[g] and self.s.usage_in[g][leaf].lent}
        self._serve(self._wanting(lending), room, serve)

    def _head_rigid(self, leaf: str, rs: RequestState) -> RequestState:
        """The earliest request of ``leaf``, up to ``rs``, that waits for its min: slots
        that come to the leaf go to it first (its requests are served in arrival order)."""
        for other in self.s.wanting_of[leaf].values():
            if other is rs or (0 < other.min and other.held < other.min):
                return other
        return rs

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
        self._sparing = True  # the excess leaves protected work out (_excess)
        self._spared = {}
        # and elastic work on kept slots: no mark within the phase moves it (it is spared)
        self._fill_live = {g: live for g in self.s.fill if (live := fill_live(self.s, g))}
        for quotas in self._quota_passes():
            self._excess_cache = {}
            self._victim_lists = {}
            self.could_cache = {}
            # (victim, group, source) -> smallest instance it could not free this pass:
            # marks free nothing within a phase, so a larger one will not fit either
            self._no_fit: dict[tuple[str, str, str], int] = {}

            short_in = self._short_pools(quotas, idle_only=False)

            def room(leaf: str, g: str, v: GroupView, quotas=quotas) -> bool:
                if self._headroom(leaf, g, v) <= 0 or self.s.is_futile(leaf, g):
                    return False
                return self._room_in(leaf, g, v, quotas(v), short_in[leaf].get(g, ()), idle_only=False)

            # (leaf, group, groups, instance) -> [reclaims, wants, most]: while the count
            # of reclaims and what the leaf wants are those, a waiting rigid request of
            # the leaf that needs more than ``most`` to reach its min cannot start
            # (ReclaimGuard.open's first test, its figures kept for the next request)
            beyond: dict[tuple, list] = {}
            # (leaf, group) -> what the leaf's earlier requests there that wait for their min,
            # and that no reclaim lets start, take of any slot that comes to the leaf: its
            # requests are served in arrival order, each such one is given (and gives back at
            # the end of the cycle) as much as it wants. Slots reclaimed for a later request
            # reach it only beyond that; the rest would sit idle, go to someone else and be
            # reclaimed again, for ever
            ahead: dict[tuple[str, str], int] = {}
            # the same for a later rigid request, but for the group's reservation while no
            # elastic work runs on its kept slots: the slots it takes are kept for it and
            # make it ready sooner (they are not lent on and reclaimed again)
            ahead_rigid: dict[tuple[str, str], int] = {}
            reserved, fill = self.reserved, self.s.fill

            def passed(rs: RequestState, key: tuple[str, str]) -> None:
                ahead[key] = ahead.get(key, 0) + rs.max - rs.held
                if reserved.get(key[1]) is not rs or fill.get(key[1]):
                    ahead_rigid[key] = ahead_rigid.get(key, 0) + rs.max - rs.held

            def serve(leaf: str, rs: RequestState, g: str, v: GroupView, quotas=quotas) -> bool | None:
                guard = None
                if rs.held < rs.min:  # a rigid request not started: only reclaims that let it start
                    key = (leaf, g, rs.groups, rs.spec.order)
                    b = beyond.get(key)
                    n, w = len(self.d.reclaims), self.want.get(leaf, 0)
                    # what earlier requests of the leaf that cannot start take first of
                    # whatever comes to it is not this one's: it needs that much more
                    first = ahead_rigid.get((leaf, g), 0)
                    if b is not None and b[0] == n and b[1] == w and rs.min - rs.held + first > b[2]:
                        passed(rs, (leaf, g))
                        return True
                    guard = ReclaimGuard.open(self, rs, g, v, quotas(v), short_in[leaf].get(g, ()), parent_mode,
                                              beyond, key, first)
                    if guard is None:
                        passed(rs, (leaf, g))
                        return True  # nothing marked: nothing changed
                first = ahead.get((leaf, g), 0) if rs.min <= 0 else 0
                if first and self.s.incoming.get(leaf, 0) + usable_idle(self, leaf, g, v) < first:
                    # what it would free goes to those ahead first, as far as what already
                    # comes to the leaf leaves them short: none of it would reach this one
                    return True
                self._reclaim_pool_for(leaf, rs, g, v, quotas(v), short_in, parent_mode, first)
                if guard is not None and not guard.close() and rs.held < rs.min:
                    passed(rs, (leaf, g))
                return None

            if short_in:
                self._serve(self._wanting(short_in), room, serve, lambda leaf: short_in[leaf])
        self._sparing = False
        self._fill_live = {}
        self._excess_cache = {}
        self._victim_lists = {}

    def _reclaim_pool_for(self, leaf: str, rs: RequestState, g: str, v: GroupView,
                          q: dict[str, dict[str, int]], short_in: dict, parent_mode: bool, ahead: int = 0) -> None:
        """Phase 6 for one request of ``leaf`` in ``g``: the most over-share first.
        ``ahead``: what the leaf's earlier requests that cannot start take first of
        whatever comes to the leaf there."""
        for owner in short_in[leaf].get(g, ()):
            deficit = min(self._pool_room(leaf, g, v, q, owner) - ahead, self._headroom(leaf, g, v), rs.unmet)
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
            # phase 6 spares protected work (engine/rigid.py): it is not counted as excess
            spared = None
            live = self._fill_live.get(v.name) if self._sparing else None
            if self._sparing and (self.s.protected or live):
                # the same within phase 6: no reclaim for fairness marks protected work,
                # nor elastic work on a reservation's kept slots
                spared = self._spared.get((v.name, src))
                if spared is None:
                    spared = protected_held(self.s, v.name, src)
                    if live:
                        spared = add_fill_held(live, src, spared)
                    self._spared[(v.name, src)] = spared
            if owner == ROOT and not every:
                ex = self._public_excess(v, src, usage, deserved, static, spared)
                self._excess_cache[key] = ex
                return ex
            pairs = ((leaf, usage.get(leaf)) for leaf in v.leaves_under.get(owner, ()))
            for leaf, u in pairs:  # u.free_of(src) - _protected, inlined
                held = u.pools.get(owner, 0) if u is not None else 0
                if not held and not every:
                    continue
                keep = deserved.get(leaf, 0)
                if static is not None:
                    keep = max(keep, static.get(leaf, 0))
                e = (held - (u.marked.get(src, 0) if u.marked else 0) if held else 0) - keep
                if spared and leaf in spared:
                    e -= spared[leaf]
                if e != 0:
                    ex[leaf] = e
            self._excess_cache[key] = ex
        return ex

    def _public_excess(self, v: GroupView, src: str, usage: dict, deserved: dict[str, int],
                       static: dict[str, int] | None, spared: dict[str, int] | None) -> dict[str, int]:
        """``_excess`` of the public pool in leaf enforcement, where it reads every leaf
        with books in the group: last time's, as worked out then (``excess_memo``),
        with only the leaves whose slots or marks moved since worked out again
        (``excess_dirty``), while what each may keep and the work spared are what
        they were; else every leaf's. A copy: marks lower it within the phase."""
        g = v.name
        s = self.s
        dirty = s.excess_dirty[g]
        memo = s.excess_memo.get(g)
        sp = spared or None
        moved = _moved_keys(memo, deserved, static, sp) if memo is not None else None
        if moved is not None:
            base = memo[3]
            if moved:  # what some may keep, or their work spared, moved: they are looked at too
                memo = (dict(deserved), dict(static) if static is not None else None,
                        dict(sp) if sp is not None else None, base)
                moved |= dirty
            look = ((leaf, usage.get(leaf)) for leaf in (moved or dirty))
        else:
            base = {}
            look = usage.items()
            memo = (dict(deserved), dict(static) if static is not None else None,
                    dict(sp) if sp is not None else None, base)
        for leaf, u in look:  # u.free_of(src) - _protected, inlined
            held = u.pools.get(ROOT, 0) if u is not None else 0
            e = 0
            if held:
                keep = deserved.get(leaf, 0)
                if static is not None:
                    keep = max(keep, static.get(leaf, 0))
                e = held - (u.marked.get(src, 0) if u.marked else 0) - keep
                if sp and leaf in sp:
                    e -= sp[leaf]
            if e != 0:
                base[leaf] = e
            elif leaf in base:
                del base[leaf]
        dirty.clear()
        s.excess_memo[g] = memo
        return dict(base)

    def _victims_hold(self, v: GroupView, owner: str, beneficiary: str) -> int:
        """What every victim ``_victims`` yields in leaf enforcement could give in all
        (their excess summed), without walking them: the excess over 0 of every leaf,
        kept with the excess as slots are marked (``_mark``), less the beneficiary's
        and that of the leaves with slots kept (those it passes over)."""
        ex = self._excess(v, owner)
        key = (v.name, owner)
        pos = self._excess_pos.get(key)
        if pos is None or pos[0] is not ex:
            pos = self._excess_pos[key] = [ex, sum(e for e in ex.values() if e > 0)]
        total = pos[1]
        e = ex.get(beneficiary, 0)
        if e > 0:
            total -= e
        for leaf in self.keeping:
            if leaf != beneficiary:
                e = ex.get(leaf, 0)
                if e > 0:
                    total -= e
        return total

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

    # -- after the phases: shrinking pools -------------------------------------
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


def _moved_keys(memo: tuple, deserved: dict[str, int], static: dict[str, int] | None,
                sp: dict[str, int] | None) -> set[str] | None:
    """The leaves whose part of ``_public_excess``'s inputs (what each may keep, its
    static share, its work spared) differs from ``memo``'s (found at C speed: the
    items that differ); None when ``memo`` cannot be brought up to date that way
    (static shares there and not here, or the other way round)."""
    if (memo[1] is None) != (static is None):
        return None
    moved: set[str] = set()
    for old, new in ((memo[0], deserved), (memo[1], static), (memo[2] or {}, sp or {})):
        if old != new:
            moved.update(k for k, _ in old.items() ^ new.items())
    return moved
