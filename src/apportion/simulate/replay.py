"""A trace of rigid jobs replayed through the engine in virtual time.

The middle layer, as ``scenario/runner.py`` and the live master are: it owns the clock
and the jobs, and drives the pure engine (``Engine.submit/release/cycle``). What
happens to a job (docs/simulate.md, "The model"):

- it **arrives** at its submit time and asks its consumer (the mapping) for its slots,
  rigid: ``min = max``, with its requested time (``walltime``, SWF field 9) when the
  trace has one, which reservations and backfill plan with (engine/backfill.py), in the group named by its resource (``cpu``/``gpu``) when the
  plan has one, else in any group of its consumer; requests keep arrival order
  (``Request.seq``), and the engine serves a consumer's requests in that order. On a
  plan whose hosts have ``resources``, a job that says what each slot needs of each kind
  (``TraceJob.resources``) asks for that vector, its slots together on one host
  (``order``), and the engine shares the kinds by Dominant Resource Fairness; what it
  holds of each kind is measured too (``kindfigures.KindRecorder``);
- it **starts** at the cycle that grants it and runs for its run time, then releases;
- a **reclaim** on any of its slots (deadline = cycle time + grace) stops it at the
  deadline unless it ends first: it is **evicted**, loses the work since it started
  (or since its last checkpoint, every ``checkpoint`` seconds of run), its slots go
  back and it queues again as a new request (after those already waiting), with the
  run time it has left. A job whose slots the engine takes by force (a removal) is
  evicted the same way.

Cycles run on the master's tick (``tick``, the service's ``Settings.tick``): at the
first tick at or after something changed (an arrival, an end, a reclaim deadline),
and at the next tick after a cycle that reclaimed, called off a reclaim, removed or
moved slots between sources, or says the next may decide more (``Decisions.again``: a
reservation's planned start may move) (the master's timer would run it; the engine may
act on its own books there); never when nothing changed. A cycle that only granted has
served everything it could, so the one after it would decide nothing. Events between two ticks are applied together,
in time order, before the cycle. The cost of a cycle therefore follows the events,
and this loop does no work over all jobs or hosts: jobs in flight are in two heaps
(ends, deadlines) and a dict; figures are running integrals (``figures.Recorder``).
"""

from __future__ import annotations

import gc
import heapq
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import compress
from operator import ne

from apportion.engine import Engine, Plan, Request
from apportion.simulate.figures import Recorder
from apportion.traces.record import TraceJob, as_written

DEFAULT_TICK = 1.0  # seconds: apportion.service.master.Settings.tick
DEFAULT_SAMPLE = 0.0  # no longer used: what consumers deserve is read after every cycle


Resolver = Callable[[TraceJob], tuple[str, "float | None"]]
"""job -> (consumer path, checkpoint interval or None): ``traces.mapping.Mapping.resolve``."""


def one_consumer(path: str) -> Resolver:
    """Every job to ``path`` (a plan with one leaf needs no mapping)."""
    return lambda job: (path, None)


class SimulationError(ValueError):
    """A replay that cannot be run as asked (a job mapped to no leaf, ...): a user error."""


class _Job:
    __slots__ = ("job", "consumer", "rid", "attempt", "start", "end", "left", "done", "deadline", "marked",
                 "groups", "submit", "checkpoint", "need", "host")

    def __init__(self, job: TraceJob, consumer: str, groups: tuple[str, ...], checkpoint: float | None) -> None:
        self.job = job
        self.consumer = consumer
        self.groups = groups
        self.checkpoint = checkpoint
        self.submit = job.submit
        self.attempt = 0
        self.rid = ""
        self.start: float | None = None
        self.end = 0.0
        self.left = max(0.0, job.run)  # run time still to do
        self.done = 0.0  # run kept by checkpoints over earlier attempts
        self.deadline: float | None = None
        self.marked = 0  # slots under reclaim
        self.need: tuple[tuple[str, float], ...] = ()  # what each slot asks of each kind, when by kind
        self.host: str | None = None  # where it runs (asked by kind: one host)


@dataclass(slots=True)
class Progress:
    """What a progress display is told now and then."""

    now: float
    arrived: int
    finished: int
    cycles: int


class Replay:
    """One replay of ``jobs`` (in submit order) under ``plan``; ``run()`` returns the
    ``Recorder``; ``result()`` the figures (the JSON contract)."""

    def __init__(self, plan: Plan, jobs: Iterable[TraceJob], resolve: Resolver, *,
                 tick: float = DEFAULT_TICK, sample: float = DEFAULT_SAMPLE,
                 on_progress: Callable[[Progress], None] | None = None, progress_every: int = 2048,
                 gpu_mix=None) -> None:
        if tick <= 0:
            raise SimulationError("tick must be above 0 seconds")
        self.plan = plan
        self.engine = Engine(plan, skip_quiet=True)
        self.jobs = iter(jobs)
        self.resolve = resolve
        self.tick = tick
        self.on_progress = on_progress
        self.progress_every = max(1, progress_every)
        cmap = plan.consumer_map()
        self.leaves = {c.path: c for c in plan.consumers if c.is_leaf}
        self.group_names = {g.name for g in plan.groups}
        slots_of = {h.name: h.slots for h in plan.hosts}
        self.group_slots = {g.name: sum(slots_of[h] for h in g.hosts) for g in plan.groups}
        self.capacity = sum(self.group_slots.values())
        self._cmap = cmap
        self._mapped: dict[tuple[str, str, str, str, str], tuple[str, float | None]] = {}
        self._room: dict[tuple[str, tuple[str, ...]], int] = {}
        self.rec = Recorder(self.capacity, sorted(self.leaves), entitled(plan))
        # hosts with resources: jobs that say what they need of each kind ask by kind, and are
        # measured by kind (``gpu_mix``: the workload's task types, for GPU fragmentation)
        self.vectors = any(h.resources for h in plan.hosts)
        if self.vectors:
            from apportion.simulate.kindfigures import KindRecorder, engine_free

            self.rec.kinds = KindRecorder(plan, engine_free(self.engine), gpu_mix)
        self.by_rid: dict[str, _Job] = {}
        self.ends: list[tuple[float, int, _Job, int]] = []
        self.kills: list[tuple[float, int, _Job, int]] = []
        self._seq = 0
        self._heap_seq = 0
        self.now = -math.inf
        self.cycles = 0
        self.arrived = 0
        self.finished = 0
        self.waiting = 0  # jobs submitted and not started
        self._deserved_keys: list[str] = []  # the leaves, in the engine's order, at the last cycle
        self._deserved_vals: list[int] = []  # what they deserved then
        self._stranded_until: float | None = None  # the replay's end, when jobs were left waiting

    # --- the world ------------------------------------------------------------
    def _consumer(self, job: TraceJob) -> tuple[str, float | None]:
        key = (job.user, job.group, job.queue, job.partition, job.resource)
        found = self._mapped.get(key)
        if found is None:
            found = self.resolve(job)
            path = found[0]
            if path not in self.leaves:
                what = "not in the plan" if path not in self._cmap else "not a leaf of the plan (it has children)"
                names = ", ".join(sorted(self.leaves)[:8]) + (" ..." if len(self.leaves) > 8 else "")
                raise SimulationError(
                    f"job {job.id} (user {job.user!r}, group {job.group!r}, queue {job.queue!r}, "
                    f"partition {job.partition!r}) maps to {path}, which is {what}; leaves: {names}. "
                    "Fix the mapping's rules or its default.")
            self._mapped[key] = found
        if job.checkpoint is not None:
            return found[0], job.checkpoint
        return found

    def _groups(self, job: TraceJob, consumer: str) -> tuple[str, ...]:
        if job.resource in self.group_names:
            return (job.resource,)
        if job.resource == "cpu" or (self.vectors and job.resources):
            return ()
        raise SimulationError(f"job {job.id} asks for {job.resource} slots and the plan has no resource group "
                              f"named {job.resource!r}")

    def _room_for(self, consumer: str, groups: tuple[str, ...]) -> int:
        key = (consumer, groups)
        n = self._room.get(key)
        if n is None:
            planned = self._cmap[consumer].groups
            names = groups or tuple(g for g in planned)
            n = self._room[key] = sum(self._may_use(consumer, g) for g in names if g in planned)
        return n

    def _may_use(self, leaf: str, g: str) -> int:
        """The most ``leaf`` may ever hold in ``g`` (``GroupPlan.most_for``): a job wider
        than that could never start."""
        return self.engine.state.group_plan(g).most_for(leaf, self.group_slots[g])

    def _submit(self, j: _Job, t: float) -> None:
        j.attempt += 1
        j.rid = f"{j.job.id}" if j.attempt == 1 else f"{j.job.id}#{j.attempt}"
        self._seq += 1
        n = j.job.slots
        self.engine.submit(Request(j.rid, j.consumer, max=n, min=n, groups=j.groups, seq=self._seq,
                                   walltime=_walltime(j), resources=j.need, order=n if j.need else 1))
        self.by_rid[j.rid] = j
        self.waiting += 1

    def _arrive(self, job: TraceJob) -> None:
        consumer, checkpoint = self._consumer(job)
        groups = self._groups(job, consumer)
        self.arrived += 1
        if job.slots > self._room_for(consumer, groups) or job.slots <= 0:
            self.rec.unrunnable_job(consumer)  # could never start: left out, counted
            return
        j = _Job(job, consumer, groups, checkpoint)
        if self.vectors:
            j.need = job.resources
        self.rec.arrive(consumer, job.submit, job.slots)
        self._submit(j, job.submit)

    def _push(self, heap: list, t: float, j: _Job) -> None:
        self._heap_seq += 1
        heapq.heappush(heap, (t, self._heap_seq, j, j.attempt))

    def _end(self, j: _Job, t: float) -> None:
        """The job's run is done at ``t``."""
        self.engine.release(j.rid)
        del self.by_rid[j.rid]
        n = j.job.slots
        self.rec.stop_job(j.consumer, t, n, requeued=False, need=j.need, host=j.host)
        self.rec.finish(j.consumer, j.submit, j.job.run, n, t)
        self.finished += 1

    def _evict(self, j: _Job, t: float) -> None:
        """The job is stopped at ``t`` (a reclaim's deadline, or slots taken): it keeps
        what its checkpoints saved, loses the rest, and queues again."""
        ran = max(0.0, t - j.start) if j.start is not None else 0.0
        every = j.checkpoint
        kept = math.floor(ran / every + 1e-9) * every if every and every > 0 else 0.0
        kept = min(kept, j.left)
        n = j.job.slots
        self.engine.release(j.rid)
        del self.by_rid[j.rid]
        self.rec.stop_job(j.consumer, t, n, requeued=True, need=j.need, host=j.host)
        self.rec.evicted(j.consumer, (ran - kept) * n)
        j.left -= kept
        j.done += kept
        j.start = None
        j.deadline = None
        j.marked = 0
        self._submit(j, t)

    def _apply_until(self, t: float) -> None:
        """Every end, deadline and arrival at or before ``t``, in time order."""
        ends, kills = self.ends, self.kills
        while True:
            te = ends[0][0] if ends else math.inf
            tk = kills[0][0] if kills else math.inf
            ta = self._peek.submit if self._peek is not None else math.inf
            first = min(te, tk, ta)
            if first > t:
                return
            if te == first:
                _, _, j, attempt = heapq.heappop(ends)
                if attempt == j.attempt and j.start is not None:
                    self._end(j, te)
            elif tk == first:
                _, _, j, attempt = heapq.heappop(kills)
                if attempt == j.attempt and j.start is not None and j.deadline == tk:
                    self._evict(j, tk)
            else:
                self._arrive(self._peek)
                self._peek = next(self.jobs, None)

    # --- the engine's decisions -----------------------------------------------
    def _decided(self, d, t: float) -> None:
        by_rid = self.by_rid
        for g in d.grants:
            j = by_rid.get(g.request)
            if j is None or j.start is not None:
                continue
            j.start = t
            j.end = t + j.left
            j.host = g.host
            self.waiting -= 1
            self.rec.start_job(j.consumer, t, j.job.slots, j.need, g.host)
            self._push(self.ends, j.end, j)
        for r in d.reclaims:
            j = by_rid.get(r.request)
            if j is None or j.start is None:
                continue
            if j.marked == 0:
                self.rec.reclaimed(j.consumer)
            j.marked += r.slots
            if r.deadline < j.end and (j.deadline is None or r.deadline < j.deadline):
                j.deadline = r.deadline
                self._push(self.kills, r.deadline, j)
        for r in d.cancelled:
            j = by_rid.get(r.request)
            if j is not None and j.marked:
                j.marked -= r.slots
                if j.marked <= 0:
                    j.marked = 0
                    j.deadline = None  # its kill entry is now stale
        for x in (*d.removals, *d.lost):
            j = by_rid.get(x.request)
            if j is not None and j.start is not None:
                self._evict(j, t)

    def _read_deserved(self, t: float) -> None:
        """What each leaf deserves from this cycle to the next (the engine decides only at
        cycles): the recorder is told the leaves whose value changed. The engine keeps its
        leaves in one order, so the values are compared as lists, and the changed ones
        found, at C speed; a cycle that moved nothing costs one compare."""
        groups = self.engine.deserved()
        if len(groups) == 1:
            by_leaf = next(iter(groups.values()))  # read only
        else:
            by_leaf = {}
            for per_leaf in groups.values():
                for leaf, n in per_leaf.items():
                    by_leaf[leaf] = by_leaf.get(leaf, 0) + n
        vals = list(by_leaf.values())
        keys = list(by_leaf)
        last_vals, last_keys = self._deserved_vals, self._deserved_keys
        same_leaves = keys == last_keys  # the same str objects in the same order: a quick compare
        if same_leaves and vals == last_vals:
            return
        if same_leaves:
            changed = [(keys[i], vals[i]) for i in compress(range(len(vals)), map(ne, vals, last_vals))]
        else:  # other leaves: compare by name
            last = dict(zip(last_keys, last_vals))
            changed = [(k, v) for k, v in zip(keys, vals) if last.get(k) != v]
            changed += [(k, 0) for k in last.keys() - by_leaf.keys() if last[k]]
            self._deserved_keys = keys
        self._deserved_vals = vals
        if changed:
            self.rec.deserved_changes(t, changed)

    # --- the loop ----------------------------------------------------------------
    def _next_tick(self, t: float) -> float:
        k = math.ceil(t / self.tick - 1e-9)
        tt = k * self.tick
        return tt if tt > self.now else self.now + self.tick

    def run(self) -> Recorder:
        # a long run makes many small objects and no reference cycles: the collector's
        # young generation is made large, so it does not rescan the live jobs every 700
        old = gc.get_threshold()
        gc.set_threshold(200_000, 30, 30)
        try:
            self._loop()
        finally:
            gc.set_threshold(*old)
        return self.rec

    def _loop(self) -> None:
        self._peek = next(self.jobs, None)
        engine, tick = self.engine, self.tick
        again = False
        every, report = self.progress_every, self.on_progress
        while True:
            nxt = math.inf
            if self._peek is not None:
                nxt = self._peek.submit
            if self.ends:
                nxt = min(nxt, self.ends[0][0])
            if self.kills:
                nxt = min(nxt, self.kills[0][0])
            if again:
                nxt = min(nxt, self.now + tick)
            if nxt == math.inf:
                break
            t = self._next_tick(nxt)
            self._apply_until(t)
            self.now = t
            d = engine.cycle(t)
            self.cycles += 1
            # a cycle that only granted has served all it could: the next one, with
            # nothing changed, would decide nothing (0 of 17,801 such on NASA iPSC)
            again = bool(d.reclaims or d.cancelled or d.removals or d.lost or d.retagged or d.again)
            if d.grants or d.reclaims or d.cancelled or d.removals or d.lost:
                self._decided(d, t)
            self._read_deserved(t)
            if report is not None and self.cycles % every == 0:
                report(Progress(t, self.arrived, self.finished, self.cycles))
        if report is not None:
            report(Progress(self.now, self.arrived, self.finished, self.cycles))

    def result(self) -> dict:
        waiting = [j for j in self.by_rid.values() if j.start is None]
        for j in waiting:  # still waiting when the replay ended: a censored wait
            self.rec.unfinished(j.consumer, j.submit, j.job.run, j.left, j.job.slots)
        if waiting:
            self.by_rid = {rid: j for rid, j in self.by_rid.items() if j.start is not None}
            self._stranded_until = self.now
        out = self.rec.result(until=self._stranded_until)
        out["cycles"] = self.cycles
        out["tick"] = self.tick
        out["never_started"] = self.waiting
        return out


def _walltime(j: _Job) -> float | None:
    """What the engine is told the job runs for (backfill plans with it): its requested
    time (SWF field 9) less the run its checkpoints kept over earlier attempts; None when
    the trace does not say."""
    w = j.job.walltime
    if w is None:
        return None
    return max(w - j.done, 1e-9) if j.done else w


def entitled(plan: Plan) -> dict[str, int]:
    """What each leaf deserves when every leaf wants the whole cluster: its slice of the
    plan (finish-time fairness runs a consumer's jobs alone on it)."""
    eng = Engine(plan)
    total = sum(h.slots for h in plan.hosts)
    for i, c in enumerate(x for x in plan.consumers if x.is_leaf):
        eng.submit(Request(f"entitled-{i}", c.path, max=max(1, total), seq=i))
    eng.cycle(0.0)
    out: dict[str, int] = {}
    for per_leaf in eng.deserved().values():
        for leaf, n in per_leaf.items():
            out[leaf] = out.get(leaf, 0) + n
    return out


def replay(plan: Plan, jobs: Iterable[TraceJob], resolve: Resolver, **kw) -> dict:
    """Run a replay; its figures (the JSON contract)."""
    r = Replay(plan, jobs, resolve, **kw)
    r.run()
    return r.result()


def iter_jobs(jobs: Iterable[TraceJob]) -> Iterator[TraceJob]:
    """``jobs``, checked to come in submit order (a replay needs it)."""
    last = -math.inf
    for j in jobs:
        if j.submit < last:
            raise SimulationError(f"job {j.id} is submitted at {as_written(j.submit)} s, before the job read "
                                  f"before it ({as_written(last)} s): a trace must be in submit order "
                                  "(--sort reads it so)")
        last = j.submit
        yield j
