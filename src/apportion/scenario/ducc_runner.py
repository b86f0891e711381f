"""Drive the DUCC scheduling cycle through a DUCC scenario, simulating time.

The engine (``apportion.engine.ducc.api``) is pure: it owns no clock and runs no
work. This runner plays the rest of DUCC around it, the Orchestrator and the
agents, so that a scenario's jobs start, initialise, work, shrink and finish:

- **the clock**: with ``cycle: S`` a scheduling cycle runs every S seconds, at
  0, S, 2S, ... (from the first step on). A timeline step happens at its own
  ``at``; the first cycle at or after it sees it. Without ``cycle`` the runner
  *settles* each step: cycles run at the step's time until one changes nothing.
- **processes**: a new process initialises ``init_seconds`` after it was
  started, then works: each initialised process completes ``threads /
  seconds_per_item`` work items per second. A job's work is the sum of its
  processes' (a fluid model: items are not run one by one). Its ``investment``
  is the items it has completed. A job is finished when all its work items are
  done; its processes exit with it, and their space is free at the next cycle.
- **evictions**: an evicted process stops working at once and loses the work of
  the items it had in flight (the fraction of an item it had done). It stays on
  its machine, *pending removal*, until the runner confirms it gone at the start
  of the next cycle, so its space is used one cycle later, as in DUCC.
- **nodes**: ``dead`` stops a node's heartbeats; with a clock, one heartbeat is
  missed per cycle and the engine declares the node dead after
  ``ducc.rm.node.stability`` of them (without a clock at once); its processes
  stop working at once. ``alive`` restarts the heartbeats. ``vary_off`` /
  ``vary_on`` and ``unavailable`` / ``available`` set and clear the node's state.
  A non-preemptable process lost with its node is asked for again (its job stays).
- **cancel** removes a job and its processes at the step's time.
- **the end**: after the last step, when no job with work to do is left (or
  ``until`` is reached; or nothing has changed for a while and nothing can: the
  remaining jobs cannot be placed). Without ``until`` a clocked run stops at its
  ``horizon`` at the latest (7 days of simulated time unless set), work left or
  not: long jobs are normal, and that end is as ordinary as the others.

Observed timings feed the engine's prediction as DUCC's do: a job's
``init_seconds`` is known once one of its processes has initialised, its
``seconds_per_item`` once it has completed an item.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from apportion.engine.ducc import api
from apportion.engine.ducc.config import DuccConfig
from apportion.scenario.ducc_model import DuccScenario, DuccStep, JobSpec

FOREVER_ITEMS = 10**12  # a job without work_items (a service) never runs out of work
MAX_SETTLE_CYCLES = 1000
_EPS = 1e-9


class DuccRunError(RuntimeError):
    """The simulation did not come to an end (a step that never settles): a bug, never a user error."""


@dataclass
class _Proc:
    share_id: int
    job: str
    machine: str
    order: int
    started: float
    ready_at: float  # when it has initialised
    items: float = 0.0  # work items completed by this process (fractions included)
    evicted: bool = False


@dataclass
class _Job:
    spec: JobSpec
    done: float = 0.0  # items completed, fractions included
    init_seen: bool = False
    procs: dict[int, _Proc] = field(default_factory=dict)

    @property
    def work(self) -> float:
        return float(self.spec.work_items) if self.spec.work_items is not None else math.inf

    @property
    def finite(self) -> bool:
        return self.spec.work_items is not None and not self.spec.reserve


@dataclass
class _Node:
    name: str
    memory: float
    varied_off: bool = False
    unavailable: bool = False
    stopped: bool = False  # heartbeats stopped
    missed: int = 0


@dataclass(frozen=True, slots=True)
class CycleRecord:
    """One cycle, for observers: the state the engine was given, its decisions, the
    state after them, and which steps were applied before it."""

    cycle: int
    now: float
    before: api.DuccState
    decisions: api.DuccDecisions
    after: api.DuccState
    config: DuccConfig
    steps: tuple[DuccStep, ...]


class DuccRunner:
    """A DUCC scenario played through the engine. ``records()`` yields every cycle;
    ``run()`` returns the snapshots (the JSON contract of ``apportion solve --json``)."""

    def __init__(self, scenario: DuccScenario, max_cycles: int | None = None) -> None:
        self.sc = scenario
        self.config = scenario.config
        self.max_cycles = max_cycles
        self.now = 0.0
        self.cycle = 0
        self.jobs: dict[str, _Job] = {}
        self.finished: dict[str, float] = {}
        self.cancelled: dict[str, float] = {}
        self.nodes: dict[str, _Node] = {}
        self.pending: set[int] = set()
        self.needy: tuple[str, ...] = ()
        self.next_share_id = 1
        self.ended = ""  # why the run ended: done, until, horizon, stalled, or last step (no clock)
        self.schedule_fn: Callable[[DuccConfig, api.DuccState, float], api.DuccDecisions] = api.schedule
        self._machines_for(self.config)

    # --- the world between cycles ----------------------------------------------

    def _machines_for(self, cfg: DuccConfig) -> None:
        for host, mem in cfg.hosts.items():
            if host not in self.nodes:
                self.nodes[host] = _Node(host, float(mem or 0.0))
            elif mem is not None:
                self.nodes[host].memory = float(mem)

    def _working(self, p: _Proc) -> bool:
        return not p.evicted and not self.nodes[p.machine].stopped

    def _work_until(self, t: float) -> None:
        """Let processes initialise and work from ``self.now`` to ``t``; finish jobs whose work is done."""
        t0 = self.now
        if t <= t0:
            return
        for jid in list(self.jobs):
            job = self.jobs[jid]
            if not job.finite:
                continue
            procs = [p for p in job.procs.values() if self._working(p) and p.ready_at < t]
            if not procs:
                continue
            rate = job.spec.threads / job.spec.seconds_per_item
            bounds = sorted({t0, t} | {p.ready_at for p in procs if t0 < p.ready_at < t})
            end = None
            for a, b in zip(bounds, bounds[1:], strict=False):
                active = [p for p in procs if p.ready_at <= a]
                if not active:
                    continue
                step = rate * (b - a)
                need = job.work - job.done
                if step * len(active) >= need - _EPS:
                    dt = need / (rate * len(active))
                    for p in active:
                        p.items += rate * dt
                    job.done = job.work
                    end = a + dt
                    break
                for p in active:
                    p.items += step
                job.done += step * len(active)
            if end is not None:
                self._finish(jid, end)
        self.now = t

    def _finish(self, jid: str, at: float) -> None:
        job = self.jobs.pop(jid)
        self.finished[jid] = round(at, 6)
        for sid in job.procs:
            self.pending.discard(sid)

    def _lose_in_flight(self, job: _Job, p: _Proc) -> None:
        lost = p.items - math.floor(p.items + _EPS)
        if lost > _EPS and job.finite:
            job.done = max(0.0, job.done - lost)

    def _apply_step(self, step: DuccStep) -> None:
        if step.config is not None:
            self.config = step.config
            self._machines_for(step.config)
        for spec in step.jobs:
            self.jobs[spec.id] = _Job(spec)
        for jid in step.cancel:
            job = self.jobs.pop(jid, None)
            if job is not None:
                self.cancelled[jid] = step.at
                for sid in job.procs:
                    self.pending.discard(sid)
        ev = step.nodes
        for name in ev.dead:
            self.nodes[name].stopped = True
            self.nodes[name].missed = 0
        for name in ev.alive:
            self.nodes[name].stopped = False
            self.nodes[name].missed = 0
        for name in ev.vary_off:
            self.nodes[name].varied_off = True
        for name in ev.vary_on:
            self.nodes[name].varied_off = False
        for name in ev.unavailable:
            self.nodes[name].unavailable = True
        for name in ev.available:
            self.nodes[name].unavailable = False

    # --- the engine's view -------------------------------------------------------

    def _state(self) -> api.DuccState:
        settle = self.sc.cycle is None
        machines = []
        for n in self.nodes.values():
            if n.name not in self.config.hosts:
                continue
            if n.stopped and settle:
                state = "dead"
            elif n.varied_off:
                state = "varied_off"
            elif n.unavailable:
                state = "unavailable"
            else:
                state = "ok"
            machines.append(api.Machine(n.name, n.memory, state=state, missed_heartbeats=n.missed))
        jobs = []
        procs = []
        for job in sorted(self.jobs.values(), key=lambda j: (j.spec.submitted, j.spec.seq)):
            s = job.spec
            done = min(int(math.floor(job.done + _EPS)), s.work_items) if s.work_items is not None else 0
            kind = "reservation" if s.reserve else "job"
            jobs.append(api.Job(
                id=s.id, user=s.user, cls=s.cls, memory_gb=s.memory, max_processes=s.max_processes,
                threads=s.threads, work_items=(s.work_items if s.work_items is not None and not s.reserve
                                               else (1 if s.reserve else FOREVER_ITEMS)),
                done_items=done if not s.reserve else 0,
                init_seconds=s.init_seconds if job.init_seen else None,
                seconds_per_item=s.seconds_per_item if done > 0 else None,
                submitted_at=s.submitted, kind=kind))
            for p in job.procs.values():
                initialized = p.ready_at <= self.now + _EPS
                procs.append(api.Process(p.share_id, p.job, p.machine, p.order, initialized, p.started,
                                         round(p.items, 9)))
        return api.DuccState(machines=tuple(machines), jobs=tuple(jobs), processes=tuple(procs),
                             pending_removal=frozenset(self.pending), needy=self.needy,
                             next_share_id=self.next_share_id)

    def _confirm_gone(self) -> None:
        if not self.pending:
            return
        owner = {sid: job for job in self.jobs.values() for sid in job.procs}
        for sid in self.pending:
            job = owner.get(sid)
            if job is not None:
                del job.procs[sid]
        self.pending.clear()

    def _publish(self, d: api.DuccDecisions) -> None:
        by_sid = {sid: (job, p) for job in self.jobs.values() for sid, p in job.procs.items()}
        for e in d.evictions:
            hit = by_sid.get(e.share_id)
            if hit is None:
                continue
            job, p = hit
            if not p.evicted:
                self._lose_in_flight(job, p)
                p.evicted = True
            if e.reason == "node-dead":
                job.procs.pop(e.share_id, None)
            else:
                self.pending.add(e.share_id)
        for lost in d.lost:
            hit = by_sid.get(lost.share_id)
            if hit is not None:
                job, p = hit
                self._lose_in_flight(job, p)
                job.procs.pop(lost.share_id, None)
                self.pending.discard(lost.share_id)
        for n in d.new:
            job = self.jobs.get(n.job)
            if job is None:
                continue
            job.procs[n.share_id] = _Proc(n.share_id, n.job, n.machine, n.order, self.now,
                                          self.now + job.spec.init_seconds)
        self.needy = d.needy
        self.next_share_id = d.next_share_id

    def _one_cycle(self, steps: tuple[DuccStep, ...]) -> CycleRecord:
        self._confirm_gone()
        for job in self.jobs.values():
            if not job.init_seen and any(p.ready_at <= self.now + _EPS and not p.evicted
                                         for p in job.procs.values()):
                job.init_seen = True
        if self.sc.cycle is not None:
            for n in self.nodes.values():
                if n.stopped:
                    n.missed += 1
        before = self._state()
        d = self.schedule_fn(self.config, before, self.now)
        after = api.advance(before, d)
        self._publish(d)
        rec = CycleRecord(self.cycle, self.now, before, d, after, self.config, steps)
        self.cycle += 1
        return rec

    # --- the loops ----------------------------------------------------------------

    def records(self) -> Iterator[CycleRecord]:
        if self.sc.cycle is None:
            yield from self._settle_records()
        else:
            yield from self._clock_records(self.sc.cycle)

    def _settle_records(self) -> Iterator[CycleRecord]:
        for step in self.sc.steps:
            self._work_until(step.at)
            self._apply_step(step)
            first = True
            for _ in range(MAX_SETTLE_CYCLES):
                pending_before = bool(self.pending)
                rec = self._one_cycle((step,) if first else ())
                first = False
                yield rec
                d = rec.decisions
                if not (d.new or d.evictions or d.lost or pending_before or self.pending):
                    break
            else:
                raise DuccRunError(f"no steady state after {MAX_SETTLE_CYCLES} cycles at t={step.at:g}")

    def _quiet_limit(self) -> int:
        return self.config.properties.node_stability + 3

    def _clock_records(self, cycle: float) -> Iterator[CycleRecord]:
        steps = list(self.sc.steps)
        i = 0
        k = math.floor(steps[0].at / cycle + _EPS) if steps else 0
        quiet = 0
        end, why = (self.sc.until, "until") if self.sc.until is not None else (self.sc.horizon, "horizon")
        for _ in range(self.max_cycles) if self.max_cycles is not None else itertools.count():
            now = k * cycle
            if end is not None and now > end + _EPS:
                self.ended = why
                return
            applied = []
            while i < len(steps) and steps[i].at <= now + _EPS:
                self._work_until(steps[i].at)
                self._apply_step(steps[i])
                applied.append(steps[i])
                i += 1
            self._work_until(now)
            rec = self._one_cycle(tuple(applied))
            yield rec
            k += 1
            if i < len(steps):
                continue
            d = rec.decisions
            busy = any(self._working(p) for job in self.jobs.values() if job.finite for p in job.procs.values())
            if not any(job.finite for job in self.jobs.values()) and not self.pending:
                self.ended = "done"
                return
            if d.new or d.evictions or d.lost or self.pending or busy or applied:
                quiet = 0
            else:
                quiet += 1
                if quiet >= self._quiet_limit():
                    self.ended = "stalled"  # what is left cannot be placed
                    return
        raise DuccRunError(f"the simulation did not end in {self.max_cycles} cycles (t={self.now:g}s)")

    # --- snapshots --------------------------------------------------------------------

    def snapshot(self, rec: CycleRecord) -> dict[str, Any]:
        return snapshot(rec, self)

    def run(self, on_cycle: Callable[[CycleRecord], None] | None = None) -> list[dict[str, Any]]:
        """Snapshots with a clock: after every cycle (report: cycles) or after the cycles that
        saw a step (report: steps), and after the last cycle (``"end": true``)."""
        snaps: list[dict[str, Any]] = []
        every = self.sc.report == "cycles"
        last: CycleRecord | None = None
        for rec in self.records():
            if on_cycle is not None:
                on_cycle(rec)
            last = rec
            if every or any(s.report for s in rec.steps):
                snaps.append(self.snapshot(rec))
        if last is not None and (not snaps or snaps[-1]["cycle"] != last.cycle):
            snaps.append(self.snapshot(last))
        if snaps:
            snaps[-1]["end"] = True
            snaps[-1]["ended"] = self.ended
        return snaps


def _run_settled(runner: DuccRunner, on_cycle) -> list[dict[str, Any]]:
    """Without a clock: one snapshot per step, after the cycles that settled it; its
    decisions, evictions and losses are those of all these cycles."""
    snaps: list[dict[str, Any]] = []
    group: list[CycleRecord] = []

    def flush() -> None:
        if not group or not group[0].steps[0].report:
            return
        step = group[0].steps[0]
        s = snapshot(group[-1], runner)
        s["at"] = step.at
        s["steps"] = [step.label]
        s["cycles"] = len(group)
        s["decisions"] = {k: sum(len(getattr(r.decisions, a)) for r in group)
                          for k, a in (("new", "new"), ("evictions", "evictions"), ("lost", "lost"))}
        s["evictions"] = [{"job": e.job, "machine": e.machine, "reason": e.reason}
                          for r in group for e in r.decisions.evictions]
        s["lost"] = [{"job": x.job, "machine": x.machine, "reason": x.reason} for r in group for x in r.decisions.lost]
        snaps.append(s)

    for rec in runner.records():
        if on_cycle is not None:
            on_cycle(rec)
        if rec.steps:
            flush()
            group = []
        group.append(rec)
    flush()
    if snaps:
        snaps[-1]["end"] = True
        snaps[-1]["ended"] = "last step"
    return snaps


def run(scenario: DuccScenario, on_cycle: Callable[[CycleRecord], None] | None = None,
        max_cycles: int | None = None) -> list[dict[str, Any]]:
    """Play ``scenario``; return its snapshots (``apportion solve --json``)."""
    runner = DuccRunner(scenario, max_cycles=max_cycles)
    if scenario.cycle is None:
        return _run_settled(runner, on_cycle)
    return runner.run(on_cycle)


def machine_orders(config: DuccConfig, machines: tuple[api.Machine, ...]) -> dict[str, int]:
    out = {}
    for m in machines:
        pool = config.nodepool_of(m.name)
        if pool is None:
            pool = next(iter(config.nodepools))
        out[m.name] = api.machine_order(m.memory_gb, config.quantum(pool), m.reserved_gb)
    return out


def snapshot(rec: CycleRecord, runner: DuccRunner) -> dict[str, Any]:
    """The state after ``rec``: the JSON contract (docs/plan-format.md, "DUCC scenarios")."""
    d, after, cfg = rec.decisions, rec.after, rec.config
    specs = {j.id: j for j in rec.before.jobs}
    placed: dict[str, dict[str, int]] = {}
    for p in after.processes:
        if p.job in specs:
            placed.setdefault(p.job, {})
            placed[p.job][p.machine] = placed[p.job].get(p.machine, 0) + 1
    jobs: dict[str, Any] = {}
    classes: dict[str, dict[str, int]] = {}
    users: dict[str, dict[str, int]] = {}
    for jid, acc in d.jobs.items():
        job = specs.get(jid)
        if job is None:
            continue
        quantum = cfg.quantum(cfg.classes[job.cls].nodepool) if job.cls in cfg.classes else None
        line = {"counted": acc.counted, "held": acc.held, "pending_removal": acc.pending_removal,
                "state": acc.state, "reason": acc.reason, "deserved": acc.deserved, "cap": acc.cap,
                "user": job.user, "class": job.cls,
                "order": api.process_order(job.memory_gb, quantum) if quantum else None,
                "machines": dict(sorted(placed.get(jid, {}).items()))}
        if job.kind != "reservation" and job.work_items < FOREVER_ITEMS:
            line["done_items"] = job.done_items
            line["work_items"] = job.work_items
        jobs[jid] = line
        for table, key in ((classes, job.cls), (users, job.user)):
            t = table.setdefault(key, {"jobs": 0, "counted": 0, "held": 0, "pending_removal": 0, "quanta": 0})
            t["jobs"] += 1
            t["counted"] += acc.counted
            t["held"] += acc.held
            t["pending_removal"] += acc.pending_removal
            t["quanta"] += acc.held * (line["order"] or 0)
    orders = machine_orders(cfg, after.machines)
    used: dict[str, int] = {}
    for p in after.processes:
        used[p.machine] = used.get(p.machine, 0) + p.order
    machines = {}
    for m in after.machines:
        o = orders[m.name]
        u = used.get(m.name, 0)
        machines[m.name] = {"order": o, "used": u, "free": o - u, "state": d.machines.get(m.name, m.state)}
    out = {
        "cycle": rec.cycle,
        "at": rec.now,
        "steps": [s.label for s in rec.steps],
        "jobs": jobs,
        "classes": dict(sorted(classes.items())),
        "users": dict(sorted(users.items())),
        "machines": machines,
        "decisions": {"new": len(d.new), "evictions": len(d.evictions), "lost": len(d.lost)},
        "evictions": [{"job": e.job, "machine": e.machine, "reason": e.reason} for e in d.evictions],
        "lost": [{"job": x.job, "machine": x.machine, "reason": x.reason} for x in d.lost],
        "finished": dict(runner.finished),
        "cancelled": dict(runner.cancelled),
    }
    return out
