"""Phase 3 of a cycle: share-pool slots up to the deserved share, nearest pool first
(base_quota: the static quota in every group first, then the dynamic quota); the
short path for a leaf whose first waiting request cannot reach its min
(``_hold_first``); and, for the plainest plans, phase 3 worked out with sums when the
phases after it are certain to do nothing (``_plain_phase3``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from apportion.engine.model import ROOT, Request
from apportion.engine.phases.base import CyclePart, pool_have
from apportion.engine.phases.view import GroupView
from apportion.engine.placement import choose_hosts
from apportion.engine.state import RequestState, pool_source


class SharePools(CyclePart):
    """Phase 3's methods and the share-pool helpers later phases use too; ``Cycle`` inherits them."""

    def _pool_room(self, leaf: str, g: str, v: GroupView, quotas: dict[str, dict[str, int]],
                   owner: str) -> int:
        have = pool_have(self.s.usage_in[g].get(leaf), owner, pool_source(owner))
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
            if quota > pool_have(usage.get(leaf), owner, src):
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
            if quotas.get(o, {}).get(leaf, 0) > pool_have(u, o, pool_source(o)):
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
        r = quotas(v).get(owner, {}).get(leaf, 0) - pool_have(s.usage_in[g].get(leaf), owner, src)
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

    # -- phase 3 with sums alone, for the plainest plans (an engine that skips quiet cycles)

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
