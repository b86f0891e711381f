"""Defragmentation (DUCC's RM documentation): give needy jobs space taken from the richest users.

After What Of and the evictions, a job is **needy** when it keeps fewer processes
than the smaller of its pure fair share (capped by what it can use now) and
``ducc.rm.fragmentation.threshold``; a non-preemptable request is needy when it holds
fewer processes than it was counted. (The documentation gives non-preemptable work a deserved
share of exactly one process; but How Much has already set aside the space for all it
was counted, so a fixed-share job left short by fragmentation would keep that space idle
for good: apportion defragments for all of it.) For each needy job,
largest order first (after priority), and for each process it lacks:

1. **space already on its way**: a machine where processes being removed will leave
   enough room (best fit) is promised to the job, and nothing more is evicted. This
   is the usual case when a new user arrives: the incumbent's evictions make the room,
   and the new job takes it next cycle, before anyone else;
2. **take from the rich**: users by wealth (quanta held), the richest first, and only
   users richer than the needy job's user; their fair-share jobs (never of a better
   priority than the needy job), and on machines where the needy process could run,
   enough of the rich users' processes are removed to make room. A donor job never
   drops below its own min(pure fair share, threshold): it does not become needy. A
   process started this very cycle is simply given to the needy job instead (nothing
   was published yet); otherwise it is evicted (reason ``defrag``) and the room is
   promised to the needy job. A donor job at its own minimum may still give a process
   up if it can restart it at once in a free hole elsewhere (a *move*): the documentation's
   example, where job A's small processes are rearranged so job B's large one fits.

Jobs still short afterwards are remembered as needy: the next cycle places them
before anything else. The search looks at no more than ``BUDGET`` processes and holes
per cycle, so a cycle stays fast however fragmented the cluster is.
"""

from __future__ import annotations

from sortedcontainers import SortedList

from apportion.engine.ducc import evict
from apportion.engine.ducc.whatof import FreeIndex, start
from apportion.engine.ducc.world import FAIR, RESERVE, J, M, P, World

BUDGET = 10_000  # processes and holes looked at by one cycle's defragmentation


def target(w: World, j: J) -> int:
    """The fewest processes ``j`` should keep before it counts as needy."""
    if not j.schedulable or j.counted <= 0:
        return 0
    if j.policy is FAIR:
        return min(j.pure, w.props.fragmentation_threshold)
    return j.counted  # non-preemptable: all it was counted (see the module doc)


def defragment(w: World, index: FreeIndex) -> None:
    needy = [j for j in w.jobs if j.active < target(w, j)]
    if not needy:
        return
    needy.sort(key=lambda j: (j.priority, -j.order, j.sort_key))
    d = _Defrag(w, index)
    for j in needy:
        want = target(w, j)
        while j.active + d.promised.get(j.id, 0) < want:
            if not (d.claim_future(j) or d.take_from_rich(j)):
                break
        if j.active < want:
            w.needy_next.append(j.id)


class _Defrag:
    def __init__(self, w: World, index: FreeIndex) -> None:
        self.w = w
        self.index = index
        self.budget = BUDGET
        self.promised: dict[str, int] = {}
        self.wealth: dict[str, int] = {}
        self.jobs_of: dict[str, list[J]] = {}
        for j in w.jobs:
            q = 0
            for p in j.procs:
                if p.active:
                    q += p.order
            if q:
                self.wealth[j.user] = self.wealth.get(j.user, 0) + q
            if j.policy is FAIR and j.active:
                self.jobs_of.setdefault(j.user, []).append(j)
        self.rich = SortedList((-q, u) for u, q in self.wealth.items() if u in self.jobs_of)
        # per nodepool, machines where processes being removed will leave room, keyed by
        # (room, all of it free, machine index) packed in one int as in whatof.FreeIndex
        n = max(1, len(w.machines))
        self.n, self.n2 = n, 2 * n
        self.future: dict[str, SortedList] = {name: SortedList() for name in w.pools}
        for m in w.machines:
            self._keep(m)

    # --- where a needy process may go ------------------------------------------

    def _fits(self, j: J, m: M) -> bool:
        if not m.accepting or m.pool is None or m.order < j.order:
            return False
        if j.policy is FAIR:
            return m.pool.name in j.pool.search
        if m.pool is not j.pool:
            return False
        return j.policy is not RESERVE or not self.w.exact(j) or m.order == j.order

    def _need(self, j: J, m: M) -> int:
        return m.order if j.policy is RESERVE else j.order

    def _room(self, m: M) -> int:
        return m.free + m.leaving - m.claimed

    def _key(self, m: M) -> int | None:
        if m.pool is None or not m.accepting or m.leaving <= m.claimed:
            return None
        room = self._room(m)
        return room * self.n2 + (self.n if room == m.order else 0) + m.idx

    def _keep(self, m: M) -> None:
        k = self._key(m)
        if k is not None:
            self.future[m.pool.name].add(k)

    def _drop(self, m: M) -> None:
        k = self._key(m)
        if k is not None:
            self.future[m.pool.name].remove(k)

    def claim_future(self, j: J) -> bool:
        """Promise ``j`` room that processes being removed will leave: the smallest
        that holds it, in its own nodepool first, then (fair share) the subpools."""
        machines = self.w.machines
        for pool in self.w.allowed_pools(j):
            sl = self.future[pool]
            if not sl:
                continue
            if j.policy is RESERVE:
                exact = self.w.exact(j)
                for f in ([j.order] if exact else range(j.order, self.w.pools[pool].max_order + 1)):
                    lo = f * self.n2 + self.n
                    i = sl.bisect_left(lo)
                    if i < len(sl) and sl[i] < lo + self.n:
                        self._promise(j, machines[sl[i] % self.n])
                        return True
                continue
            i = sl.bisect_left(j.order * self.n2)
            if i < len(sl):
                self._promise(j, machines[sl[i] % self.n])
                return True
        return False

    def _promise(self, j: J, m: M) -> None:
        need = self._need(j, m)
        now_free = m.free - max(0, m.claimed - m.leaving)
        if now_free >= need:
            self._drop(m)
            start(self.w, self.index, j, m, need)
            self._keep(m)
            return
        self._drop(m)
        m.claimed += need
        self._keep(m)
        self.promised[j.id] = self.promised.get(j.id, 0) + 1

    # --- take from the rich ----------------------------------------------------

    def _surplus(self, d: J) -> int:
        return d.active - min(d.pure, self.w.props.fragmentation_threshold)

    def _donor(self, d: J, j: J, poor: int) -> bool:
        return (d is not j and d.policy is FAIR and d.priority >= j.priority
                and self.wealth.get(d.user, 0) > poor)

    def take_from_rich(self, j: J) -> bool:
        poor = self.wealth.get(j.user, 0)
        tried: set[int] = set()
        for negw, user in list(self.rich):
            if -negw <= poor:
                break
            for d in self.jobs_of.get(user, ()):
                if not self._donor(d, j, poor):
                    continue
                for p in d.procs:
                    if not p.active:
                        continue
                    m = p.m
                    if m.idx in tried:
                        continue
                    tried.add(m.idx)
                    self.budget -= 1
                    if self.budget <= 0:
                        return False
                    if self._fits(j, m) and self._clear(j, m, poor):
                        return True
        return False

    def _clear(self, j: J, m: M, poor: int) -> bool:
        """Make room for one process of ``j`` on ``m`` from rich users' processes.

        A donor job above its own min(pure fair share, threshold) simply loses the
        process; a donor at it keeps its count by **moving**: the process restarts in a
        free hole elsewhere (the documentation's example: job A is rearranged so that job B fits)."""
        need = self._need(j, m)
        room = m.free + m.leaving - m.claimed
        if room < need:
            self.budget -= len(m.procs)
            cands = [p for p in m.procs if p.active and p.j is not None and self._donor(p.j, j, poor)]
            if sum(p.order for p in cands) + room < need:
                return False
            cands.sort(key=lambda p: (-self.wealth.get(p.j.user, 0), self._investment(p)))
            taken: dict[str, int] = {}
            holes: dict[int, int] = {}  # machine index -> quanta promised to moved processes
            picks: list[tuple[P, M | None]] = []
            for p in cands:
                if room >= need:
                    break
                d = p.j
                if self._surplus(d) - taken.get(d.id, 0) > 0:
                    taken[d.id] = taken.get(d.id, 0) + 1
                    picks.append((p, None))
                else:
                    hole = self._hole(d, m, holes)
                    if hole is None:
                        continue
                    holes[hole.idx] = holes.get(hole.idx, 0) + d.order
                    picks.append((p, hole))
                room += p.order
            if room < need:
                return False
            for p, hole in picks:
                self._take(p, hole)
        self._promise(j, m)
        return True

    def _hole(self, d: J, not_on: M, used: dict[int, int]) -> M | None:
        """A machine where a process of ``d`` can start now, other than ``not_on``."""
        machines = self.w.machines
        n = self.index.n
        for pool in self.w.allowed_pools(d):
            sl = self.index.lists[pool]
            i = sl.bisect_left(d.order * self.index.n2)
            while i < len(sl):
                m = machines[sl[i] % n]
                i += 1
                if m is not_on:
                    continue
                if m.free - max(0, m.claimed - m.leaving) - used.get(m.idx, 0) >= d.order:
                    return m
                self.budget -= 1
                if self.budget <= 0:
                    return None
        return None

    def _investment(self, p: P) -> tuple:
        w = self.w
        if p.new:
            return (0,) + evict.investment_key(evict.Process(p.share_id, False, 0.0, 0.0, p.m.depth, p.started))
        return (1,) + evict.investment_key(evict.Process(p.share_id, p.initialized,
                                                         w.investment_age(p) if not p.initialized else 0.0,
                                                         p.investment, p.m.depth, p.started))

    def _take(self, p: P, hole: M | None) -> None:
        """Remove ``p`` for a needy job; with a ``hole``, its job restarts it there."""
        d, m = p.j, p.m
        if hole is None:
            old = self.wealth[d.user]
            self.rich.discard((-old, d.user))
            self.wealth[d.user] = old - p.order
            self.rich.add((-(old - p.order), d.user))
        self._drop(m)
        if p.new:
            # not published yet: the space is free at once
            p.cancelled = True
            d.active -= 1
            self.index.use(m, -p.order)
        else:
            self.w.evict(p, "defrag")
        self._keep(m)
        if hole is not None:
            self._drop(hole)
            start(self.w, self.index, d, hole, d.order)
            self._keep(hole)
