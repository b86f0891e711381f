"""Backfill: work that cannot delay a reservation runs on the slots kept for it.

While a reservation (engine/reserve.py) waits for its planned start, the idle slots
kept for it would stand idle. As in Slurm's backfill scheduler and the EASY
backfilling it follows, a waiting request that says how long it runs (``walltime``)
is started on them, out of turn, when it cannot delay the reservation:

- it ends before the planned start (now + walltime <= planned start): the slots are
  free again by the time the reservation needs them; or
- it uses only the *extra* slots: those that will be free at the planned start
  beyond what the reservation needs (EASY's extra nodes).

Candidates are taken in arrival order, each from the pools its consumer draws from
in the group, nearest first, within its consumer's max; a rigid one only if it
reaches its min. Without a planned start (running work without a walltime), nothing
is backfilled: no end is known before which backfill would have to end.
"""

from __future__ import annotations

from apportion.engine.rigid import pool_idle
from apportion.engine.state import RequestState, pool_source

# ``c`` below is the running cycle (engine/cycle.py's Cycle), which imports this
# module: this one does not import it back


def candidates(c, g: str, reserved: RequestState) -> list[RequestState]:
    """Waiting requests with a walltime that may run in ``g``, in arrival order."""
    want = c.want
    return sorted((rs for rs in c.s.rigid.values()
                   if rs is not reserved and rs.spec.walltime is not None and rs.held < rs.max
                   and g in rs.groups and want.get(rs.spec.consumer, 0) > 0),
                  key=lambda rs: rs.order)


def fill(c, g: str, reserved: RequestState, start: float, extra: int, owed: int) -> int:
    """Backfill ``g`` before ``start``; returns the slots given (they are no longer
    idle for the reservation to keep; its planned start does not move)."""
    given = 0
    for rs in candidates(c, g, reserved):
        leaf = rs.spec.consumer
        v = c.views.get(g)
        if v is None or leaf not in v.settings:
            continue
        ends_in_time = c.now + rs.spec.walltime <= start
        limit = rs.max - rs.held
        if not ends_in_time:
            limit = min(limit, extra)
        pools = pool_idle(c, leaf, g)
        idle = sum(n for _, n in pools) - owed
        limit = min(limit, idle, c._headroom(leaf, g, v))
        limit -= limit % rs.spec.order
        if limit <= 0 or rs.held + limit < rs.min:
            continue
        placed = 0
        for owner, n in pools:
            take = min(n, limit - placed)
            if take > 0:
                placed += c._give(rs, g, take, pool_source(owner))
            if placed >= limit:
                break
        given += placed
        if not ends_in_time:
            extra -= placed
    return given
