"""What Of (DUCC's RM documentation): put the counted processes on real machines.

Each nodepool keeps its machines that can take new work, sorted by free space:
a process goes on the **smallest free space that holds it** (best fit), a partly
used machine before an empty one of the same free size, then by machine name.
Best fit fills a machine before moving on, so large processes keep the large holes
and small ones fill the gaps. Jobs are taken largest order first (after last
cycle's needy jobs), so the hardest to place go first.

A fair-share job searches its class's nodepool, then the subpools in search order
(depth first); a fixed-share process and a reservation stay in the class's own
nodepool. A reservation takes a whole empty machine of exactly its order (or, with
``enforce = false``, the smallest empty machine at least that large).

Space held by processes being removed is not free: it is used the cycle after
the caller confirms them gone.
"""

from __future__ import annotations

from sortedcontainers import SortedList

from apportion.engine.ducc.world import FAIR, RESERVE, J, M, P, World


class FreeIndex:
    """Per nodepool, the accepting machines with free space, keyed by
    (free quanta, partly used before empty, machine index) packed into one int."""

    def __init__(self, world: World) -> None:
        self.world = world
        n = max(1, len(world.machines))
        self.n = n
        self.n2 = 2 * n
        self.lists: dict[str, SortedList] = {name: SortedList() for name in world.pools}
        by_pool: dict[str, list[int]] = {name: [] for name in world.pools}
        for m in world.machines:
            if m.pool is not None and m.accepting and m.free > 0:
                by_pool[m.pool.name].append(self._key(m))
        for name, keys in by_pool.items():
            self.lists[name].update(keys)

    def _key(self, m: M) -> int:
        return m.free * self.n2 + (self.n if m.used == 0 else 0) + m.idx

    def _drop(self, m: M) -> None:
        if m.pool is not None and m.accepting and m.free > 0:
            self.lists[m.pool.name].remove(self._key(m))

    def _keep(self, m: M) -> None:
        if m.pool is not None and m.accepting and m.free > 0:
            self.lists[m.pool.name].add(self._key(m))

    def best(self, pool: str, order: int) -> M | None:
        sl = self.lists[pool]
        i = sl.bisect_left(order * self.n2)
        if i < len(sl):
            return self.world.machines[sl[i] % self.n]
        return None

    def whole(self, pool: str, order: int, exact: bool, max_order: int) -> M | None:
        sl = self.lists[pool]
        for f in ([order] if exact else range(order, max_order + 1)):
            lo = f * self.n2 + self.n
            i = sl.bisect_left(lo)
            if i < len(sl) and sl[i] < lo + self.n:
                return self.world.machines[sl[i] % self.n]
        return None

    def use(self, m: M, quanta: int) -> None:
        """``quanta`` more of ``m`` are taken (negative: given back)."""
        self._drop(m)
        m.used += quanta
        self._keep(m)


def start(world: World, index: FreeIndex, j: J, m: M, order: int) -> P:
    """A new process of ``j`` on ``m``."""
    p = P(world.next_id, j, m, order, started=world.now, new=True)
    world.next_id += 1
    index.use(m, order)
    m.procs.append(p)
    j.procs.append(p)
    j.active += 1
    world.new.append(p)
    return p


def place(world: World, index: FreeIndex, j: J, n: int) -> int:
    """Place up to ``n`` more processes of ``j``; returns how many were placed."""
    if n <= 0:
        return 0
    if j.policy is RESERVE:
        placed = 0
        pool = j.pool
        while placed < n:
            m = index.whole(pool.name, j.order, world.exact(j), pool.max_order)
            if m is None:
                break
            start(world, index, j, m, m.order)
            placed += 1
        return placed
    pools = j.pool.search if j.policy is FAIR else (j.pool.name,)
    o = j.order
    placed = 0
    for pool in pools:
        while placed < n:
            m = index.best(pool, o)
            if m is None:
                break
            k = min(n - placed, m.free // o)
            for _ in range(k):
                start(world, index, j, m, o)
            placed += k
        if placed >= n:
            break
    return placed


def what_of(world: World, index: FreeIndex, order: list[J]) -> None:
    """Place each job's counted processes it does not hold yet, in ``order``."""
    for j in order:
        missing = j.counted - j.active
        if missing > 0 and j.schedulable:
            place(world, index, j, missing)


def job_order(world: World) -> list[J]:
    """Last cycle's needy jobs first; then by priority (best first), nodepools bottom up
    (subpools before their parents), reservations, fixed shares, fair shares, and within
    those the largest order first, then by submission."""
    kind_rank = {RESERVE: 0}
    rest = sorted((j for j in world.jobs if j.schedulable and j.counted > 0),
                  key=lambda j: (j.priority, j.pool.rank, kind_rank.get(j.policy, 1 if j.policy is not FAIR else 2),
                                 -j.order, j.sort_key))
    first = [j for j in world.needy_last if j.schedulable]
    seen = {j.id for j in first}
    return first + [j for j in rest if j.id not in seen]
