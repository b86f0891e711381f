"""The cluster's history for the console's charts: one sample a minute of hosts, slots,
allocations and demand, kept in its own table (``history``, migration 0005) for a day.

The master's task calls :meth:`Sampler.on_commit` after each step (the ``committed``
hook); at most once every ``every`` seconds it counts what the master has published
(cheap: one pass over hosts and allocations) and writes the row on a worker thread, so
the task never waits for the store. :func:`read` gives the samples of the last hour or
day, thinned to at most ``points`` of them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, Engine, Float, Integer, MetaData, Table, delete, insert, select

if TYPE_CHECKING:
    from apportion.service.master import Master
    from apportion.service.store.writer import Batch

log = logging.getLogger("apportion.history")
KEEP = 86_400.0  # seconds of history kept
SPANS = {"hour": 3_600.0, "day": KEEP}

metadata = MetaData()
history = Table(
    "history", metadata,
    Column("at", Float, primary_key=True, autoincrement=False),
    Column("hosts_ok", Integer, nullable=False),
    Column("hosts_down", Integer, nullable=False),
    Column("hosts_closed", Integer, nullable=False),
    Column("slots", Integer, nullable=False),  # slots of hosts that are up
    Column("used", Integer, nullable=False),  # slots held by allocations
    Column("allocations", Integer, nullable=False),
    Column("demand", Integer, nullable=False),  # slots asked for (the sum of allocations' max)
    Column("reclaiming", Integer, nullable=False),  # slots being reclaimed
)


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    hosts_ok: int
    hosts_down: int
    hosts_closed: int
    slots: int
    used: int
    allocations: int
    demand: int
    reclaiming: int

    def json(self) -> dict[str, Any]:
        return asdict(self)


def take(m: Master, now: float) -> Sample:
    """What the master has published now, counted."""
    ok = down = closed = slots = 0
    for h in m.hosts.values():
        if h.state == "down":
            down += 1
            continue
        slots += h.slots
        if h.closed or h.state in ("closed", "unreachable"):  # up, and taking no new work
            closed += 1
        else:
            ok += 1
    held = demand = reclaiming = 0
    for a in m.allocations.values():
        held += a.held
        demand += a.max
        reclaiming += sum(r.slots for r in a.reclaiming.values())
    return Sample(round(now, 3), ok, down, closed, slots, held, len(m.allocations), demand, reclaiming)


def _every() -> float:
    try:
        return max(1.0, float(os.environ.get("APPORTION_HISTORY_SECONDS", "60")))
    except ValueError:
        return 60.0


class Sampler:
    """Samples once every ``every`` seconds (default 60; ``APPORTION_HISTORY_SECONDS``)."""

    def __init__(self, m: Master, db: Engine, every: float | None = None) -> None:
        self.m = m
        self.db = db
        self.every = every if every is not None else _every()
        self.last = 0.0
        self.writing: asyncio.Task | None = None

    def on_commit(self, batch: Batch) -> None:
        now = time.time()
        if now - self.last < self.every or (self.writing is not None and not self.writing.done()):
            return
        self.last = now
        sample = take(self.m, now)
        self.writing = asyncio.get_running_loop().create_task(asyncio.to_thread(self._write, sample))

    def _write(self, sample: Sample) -> None:
        try:
            with self.db.begin() as c:
                c.execute(insert(history).values(**sample.json()))
                c.execute(delete(history).where(history.c.at < sample.at - KEEP))
        except Exception as e:  # noqa: BLE001 - a chart's sample is never worth stopping the master for
            log.warning("history: a sample was not stored: %s: %s", e.__class__.__name__, str(e)[:300])


def read(db: Engine, span: str, now: float, points: int = 240) -> list[Sample]:
    """The samples of the last ``span`` ("hour" or "day"), oldest first, at most ``points``
    of them (evenly thinned)."""
    since = now - SPANS[span]
    with db.connect() as c:
        rows = c.execute(select(history).where(history.c.at >= since).order_by(history.c.at)).all()
    got = [Sample(*r) for r in rows]
    if len(got) > points:
        step = len(got) / points
        got = [got[int(i * step)] for i in range(points - 1)] + [got[-1]]
    return got
