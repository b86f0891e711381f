"""How Much for non-preemptable work (DUCC's RM documentation): FIXED_SHARE and RESERVE.

Non-preemptable work is given what it asks for, up to the user's **allotment**,
and is never shrunk for fairness:

- a service instance or a managed reservation asks for one process; a fixed-share
  job for ``min(max processes, remaining work items / threads)`` processes;
  a RESERVE request for one whole machine of exactly its order (with the class's
  ``enforce = false``: the smallest machine at least that large);
- the allotment: ``max-allotment`` of the user (GB, every FIXED_SHARE and RESERVE
  class together; ``ducc.rm.global_allotment`` when the user has none) and the
  class's (or the user's per-class) ``max-allotment`` in quanta. What the user
  already holds counts first; requests are then served by priority, submission,
  id. A request that can get nothing because of the allotment is **deferred**;
- the space is the class's own nodepool only (never its subpools); a process that
  does not fit the free space How Much sees now waits (the space may come free);
  a reservation for which no machine of its order exists at all is **deferred**.
"""

from __future__ import annotations

from apportion.engine.ducc.howmuch import Space
from apportion.engine.ducc.world import FAIR, J, World


class Allotments:
    """What each user holds in non-preemptable work: GB overall, quanta per class."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.gb: dict[str, float] = {}
        self.quanta: dict[tuple[str, str], int] = {}
        for j in world.jobs:
            if j.policy is None or j.policy is FAIR:
                continue
            q = sum(p.order for p in j.procs if p.active)
            if q:
                self._add(j, q)

    def _add(self, j: J, quanta: int) -> None:
        self.gb[j.user] = self.gb.get(j.user, 0) + quanta * j.pool.quantum
        key = (j.user, j.cls.name)
        self.quanta[key] = self.quanta.get(key, 0) + quanta

    def room(self, j: J) -> tuple[int | None, str]:
        """Quanta ``j``'s user may still take in ``j``'s class (None: no limit), and
        which limit binds."""
        cfg = self.world.config
        room: int | None = None
        why = ""
        gb_limit = cfg.user_allotment_gb(j.user)
        if gb_limit is not None:
            room = int((gb_limit - self.gb.get(j.user, 0)) // j.pool.quantum)
            why = f"user {j.user}'s max-allotment of {gb_limit} GB (holds {self.gb.get(j.user, 0):g} GB)"
        q_limit = cfg.class_allotment(j.user, j.cls.name)
        if q_limit is not None:
            left = q_limit - self.quanta.get((j.user, j.cls.name), 0)
            if room is None or left < room:
                room = left
                why = (f"the max-allotment of {q_limit * j.pool.quantum} GB for user {j.user} in class "
                       f"{j.cls.name} (holds {self.quanta.get((j.user, j.cls.name), 0) * j.pool.quantum} GB)")
        return (None if room is None else max(0, room)), why

    def take(self, j: J, quanta: int) -> None:
        self._add(j, quanta)


def how_much_fixed(world: World, j: J, space: Space, allot: Allotments) -> None:
    """Count a FIXED_SHARE request's processes (sets ``j.counted`` and maybe ``deferred``/``note``)."""
    held = j.active
    j.counted = held
    need = j.want - held
    if need <= 0:
        return
    if j.order > j.pool.max_order:
        if held == 0:
            j.deferred = (f"a process of {j.order} quanta ({j.order * j.pool.quantum} GB) is larger than any "
                          f"machine in nodepool {j.pool.name}")
        return
    room, why = allot.room(j)
    n = need if room is None else min(need, room // j.order)
    if n <= 0:
        if held == 0:
            j.deferred = f"held back by {why}"
        else:
            j.note = f"{need} more held back by {why}"
        return
    got = space.place(j.order, n)
    if got:
        allot.take(j, got * j.order)
        j.counted = held + got
    if got < need:
        parts = []
        if n < need:
            parts.append(f"{need - n} held back by {why}")
        if got < n:
            parts.append(f"{n - got} do not fit in nodepool {j.pool.name} now")
        j.note = "; ".join(parts)


def how_much_reserve(world: World, j: J, space: Space, allot: Allotments, orders: dict[str, set[int]]) -> None:
    """Count a RESERVE request: one whole machine."""
    held = j.active
    j.counted = held
    if held >= j.want or j.want <= 0:
        return
    exact = world.exact(j)
    have = orders.get(j.pool.name, set())
    if exact and j.order not in have or not exact and not any(o >= j.order for o in have):
        j.deferred = (f"no machine of {'exactly ' if exact else 'at least '}{j.order} quanta "
                      f"({j.order * j.pool.quantum} GB) in nodepool {j.pool.name}")
        return
    room, why = allot.room(j)
    if room is not None and room < j.order:
        if held == 0:
            j.deferred = f"held back by {why}"
        return
    got = space.take_whole(j.order, exact)
    if got and (room is None or got <= room):
        allot.take(j, got)
        j.counted = held + 1
    elif got:
        space.add(got, got)  # the machine is larger than the allotment allows
        j.note = f"the smallest free machine ({got} quanta) is held back by {why}"
    else:
        j.note = (f"no machine of {j.order} quanta in nodepool {j.pool.name} is open to new work and free of "
                  f"non-preemptable work")

