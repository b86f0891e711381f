"""Plain batch schedulers beside a plan (``apportion simulate --baseline fcfs|easy``).

One queue in submission order, the plan's consumers and shares ignored, on the plan's
slots (a job whose resource names a resource group queues for that group's slots; any
other job for the whole cluster):

- ``fcfs``: first come, first served; the queue's head starts as soon as enough slots
  are free, and no job overtakes it;
- ``easy``: the same with EASY backfilling (Lifka 1995; Mu'alem and Feitelson 2001):
  when the head cannot start it gets a reservation, the earliest time at which enough
  slots come free given the running jobs' estimated ends (start + requested time, SWF
  field 9, else the run time); a later job may start now if it fits and either ends, by
  its own estimate, before that time, or uses only slots the reservation does not need
  (the extra slots free at that time beyond the head's).

Jobs run for their run time; nothing is reclaimed or evicted. Time is the events'
(arrivals and ends), with no tick: at each time, ends first, then arrivals, then the
queue is served. The per-consumer figures use the plan's mapping, so the same
consumers can be read side by side with the plan's; ``deserved`` and the fairness
figures mean nothing here and are left out.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterable
from typing import Any

from apportion.engine import Plan
from apportion.simulate.figures import Recorder
from apportion.traces.record import TraceJob

BASELINES = ("fcfs", "easy")
NOT_DEFINED = ("deserved_mean", "deviation_mean", "shortfall_seconds", "entitled", "finish_time_fairness")


def estimate(job: TraceJob) -> float:
    """What a batch scheduler plans with: the requested time, else the run time."""
    w = job.walltime
    return w if w is not None and w > 0 else max(0.0, job.run)


class _Pool:
    __slots__ = ("capacity", "free", "queue", "running")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.free = capacity
        self.queue: list[_Waiting] = []
        self.running: list[tuple[float, int, int]] = []  # (estimated end, seq, slots), sorted


class _Waiting:
    __slots__ = ("job", "consumer", "seq")

    def __init__(self, job: TraceJob, consumer: str, seq: int) -> None:
        self.job = job
        self.consumer = consumer
        self.seq = seq


class Batch:
    """One baseline replay: ``run(jobs)`` (in submit order) returns its figures, shaped
    as the plan's (``Recorder.result()``); ``starts``, when asked for, maps each job's
    id to its start time (the comparison with other simulators)."""

    def __init__(self, plan: Plan, resolve, backfill: bool, keep_starts: bool = False) -> None:
        slots_of = {h.name: h.slots for h in plan.hosts}
        self.group_slots = {g.name: sum(slots_of[h] for h in g.hosts) for g in plan.groups}
        self.capacity = sum(self.group_slots.values())
        self.pools: dict[str, _Pool] = {}
        self.resolve = resolve
        self.backfill = backfill
        self.starts: dict[str, float] | None = {} if keep_starts else None
        # with keep_starts: each head job's first reservation (its planned start)
        self.reserved: dict[str, float] | None = {} if keep_starts else None
        leaves = sorted(c.path for c in plan.consumers if c.is_leaf)
        self.rec = Recorder(self.capacity, leaves)
        self._mapped: dict[tuple[str, str, str, str, str], str] = {}
        self._ends: list[tuple[float, int, _Pool, _Waiting, float]] = []
        self._seq = 0
        self.now = -math.inf
        self.result: dict[str, Any] | None = None

    def _pool(self, job: TraceJob) -> _Pool:
        name = job.resource if job.resource in self.group_slots else "*"
        p = self.pools.get(name)
        if p is None:
            p = self.pools[name] = _Pool(self.group_slots[name] if name != "*" else self.capacity)
        return p

    def _consumer(self, job: TraceJob) -> str:
        key = (job.user, job.group, job.queue, job.partition, job.resource)
        c = self._mapped.get(key)
        if c is None:
            c = self._mapped[key] = self.resolve(job)[0]
        return c

    def _start(self, pool: _Pool, w: _Waiting, t: float) -> None:
        n = w.job.slots
        pool.free -= n
        bisect.insort(pool.running, (t + estimate(w.job), w.seq, n))
        end = t + max(0.0, w.job.run)
        heapq.heappush(self._ends, (end, w.seq, pool, w, t + estimate(w.job)))
        self.rec.start_job(w.consumer, t, n)
        if self.starts is not None:
            self.starts[w.job.id] = t

    def _serve(self, pool: _Pool, t: float) -> None:
        q = pool.queue
        k = 0
        while k < len(q) and q[k].job.slots <= pool.free:
            self._start(pool, q[k], t)
            k += 1
        if k:
            del q[:k]
        if not q or not self.backfill or pool.free <= 0:
            return
        need = q[0].job.slots
        avail = pool.free
        shadow = math.inf
        extra = 0
        for est_end, _seq, n in pool.running:
            avail += n
            if avail >= need:
                shadow = max(est_end, t)
                extra = avail - need
                break
        if self.reserved is not None:
            self.reserved.setdefault(q[0].job.id, shadow)
        keep = [q[0]]
        for i in range(1, len(q)):
            w = q[i]
            n = w.job.slots
            if pool.free <= 0:
                keep.extend(q[i:])
                break
            if n <= pool.free:
                if t + estimate(w.job) <= shadow:
                    self._start(pool, w, t)
                    continue
                if n <= extra:
                    extra -= n
                    self._start(pool, w, t)
                    continue
            keep.append(w)
        pool.queue = keep

    def run(self, jobs: Iterable[TraceJob]) -> dict[str, Any]:
        it = iter(jobs)
        peek = next(it, None)
        ends = self._ends
        rec = self.rec
        while True:
            te = ends[0][0] if ends else math.inf
            ta = peek.submit if peek is not None else math.inf
            t = min(te, ta)
            if t == math.inf:
                break
            self.now = t
            touched: dict[int, _Pool] = {}
            while ends and ends[0][0] <= t:
                _, seq, pool, w, est_end = heapq.heappop(ends)
                n = w.job.slots
                pool.free += n
                i = bisect.bisect_left(pool.running, (est_end, seq, n))
                del pool.running[i]
                rec.stop_job(w.consumer, t, n, requeued=False)
                rec.finish(w.consumer, w.job.submit, w.job.run, n, t)
                touched[id(pool)] = pool
            while peek is not None and peek.submit <= t:
                job = peek
                peek = next(it, None)
                consumer = self._consumer(job)
                pool = self._pool(job)
                if job.slots <= 0 or job.slots > pool.capacity:
                    rec.unrunnable_job(consumer)
                    continue
                self._seq += 1
                pool.queue.append(_Waiting(job, consumer, self._seq))
                rec.arrive(consumer, job.submit, job.slots)
                touched[id(pool)] = pool
            for pool in touched.values():
                self._serve(pool, t)
        for pool in self.pools.values():
            for w in pool.queue:  # only jobs that can never start (none: each fits its pool)
                rec.unfinished(w.consumer, w.job.submit, w.job.run, w.job.run, w.job.slots)
        out = rec.result(until=self.now)
        out["fairness"] = None
        for line in out["consumers"].values():
            for k in NOT_DEFINED:
                line.pop(k, None)
        out["scheduler"] = "easy" if self.backfill else "fcfs"
        return out


def baseline(name: str, plan: Plan, jobs: Iterable[TraceJob], resolve, keep_starts: bool = False) -> Batch:
    """Run the baseline ``name`` ("fcfs" or "easy") over ``jobs``; the ``Batch`` keeps its
    ``result`` (and ``starts`` when asked)."""
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
    b = Batch(plan, resolve, backfill=name == "easy", keep_starts=keep_starts)
    b.result = b.run(jobs)
    return b
