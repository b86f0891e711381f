"""How long live work runs, and when it started: the engine's book of ends, kept live.

A client may say how long its allocation's work runs once started (``walltime``,
seconds; ``POST /v1/allocations``), as a batch job's requested time: the engine
(engine/reserve.py, engine/backfill.py) plans a waiting reservation's start from
the ends of running work that said so, and starts other work out of turn on the
slots kept for it when that work ends in time.

An end is a start plus a walltime. The engine notes when work with a walltime
started (the cycle that granted it its min); the master notes the same moment for
every allocation (``started_at``: the time of the cycle in which it first held its
min, at least one slot), stores it with the allocation and shows it in
``GET /v1/allocations``. A restarted master gives the engine those start times
back (``restore``), so the planned starts it shows are the ones it showed before.

The walltime is the client's word: nothing ends the work when it runs past it
(the planned start it helped make is then in the past, and the reservation waits
for the slots to come free, as without a walltime).
"""

from __future__ import annotations

from typing import Any

# the master (service/master.py) is named ``Any``: it calls this module's functions
# from its hooks, and this module imports nothing of it
Master = Any


def _held(engine: Any, rid: str) -> int:
    """What the engine's request ``rid`` holds now (a slot request, or a resource vector
    request of engine/drf.py); 0 when it is not open."""
    rs = engine.state.requests.get(rid)
    if rs is None:
        rs = engine.kinds.requests.get(rid)
    return rs.held if rs is not None else 0


def note_started(m: Master, decisions: Any, batch: Any, now: float) -> None:
    """After a cycle, before its batch is committed: each allocation this cycle's grants
    took to its min (at least one slot) for the first time started at ``now``, the
    cycle's time (the engine's note of the same start has that time too)."""
    if decisions is None or not decisions.grants:
        return
    allocations = m.allocations
    for rid in {g.request for g in decisions.grants}:
        try:
            a = allocations.get(int(rid))
        except ValueError:
            continue  # not an allocation of the API's (ids are numbers)
        if a is None or a.started_at is not None:
            continue
        if _held(m.engine, rid) >= max(a.min, 1):
            a.started_at = now
            batch.allocations[a.id] = a


def restore(m: Master) -> None:
    """After the engine was rebuilt from the store: the start of every running allocation
    with a walltime, as stored, so its end is in the engine's book again."""
    s = m.engine.state
    for a in m.allocations.values():
        rid = str(a.id)
        if a.walltime is not None and a.started_at is not None and rid in s.requests:
            s.started[rid] = a.started_at
    s.ends = None  # made anew from ``started`` at the next cycle (engine/reserve.py)
