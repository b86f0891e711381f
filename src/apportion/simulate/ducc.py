"""DUCC work replayed through DUCC's cycle: elastic jobs grow and shrink as
``engine.ducc.schedule`` decides.

The plan is a DUCC scenario without a timeline (its ``ducc:`` section, and ``cycle``,
``until`` if wanted: docs/plan-format.md, "DUCC scenarios"). Each trace job with DUCC
work becomes a ``JobSpec`` submitted at its time, and ``scenario.ducc_runner.DuccRunner``
plays the cluster around the engine exactly as `apportion solve` does for a DUCC
scenario (processes initialise and work, evictions lose the item in flight and are
confirmed the next cycle, jobs finish when their items are done). This module only
watches the cycles go by and feeds the same ``Recorder`` as the EGO replay.

Units: a slot is a share quantum (``ducc.rm.share.quantum`` GB); a process of order
``o`` holds ``o`` quanta. A consumer (the mapping's, or ``/USER`` without one) holds
the quanta of its jobs' processes, deserves its jobs' fair share (``JobAccount.deserved``
processes x order), and has demand while one of its jobs could use more (held below
its cap). A job's wait is from its submission to its first process; its run, from then
to its last item; an eviction loses the item fraction its process had in flight.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from apportion.engine.ducc import api
from apportion.engine.ducc.config import Policy
from apportion.plan.positions import load_document
from apportion.scenario.ducc_model import DuccScenario, DuccStep, JobSpec
from apportion.scenario.ducc_runner import DuccRunner, machine_orders
from apportion.simulate.figures import Recorder, SimRun
from apportion.simulate.replay import Progress, SimulationError
from apportion.traces.record import Trace, TraceJob

DEFAULT_INIT_SECONDS = 0.0


def _scenario(plan_path: str | os.PathLike[str], data: dict[str, Any] | None) -> DuccScenario:
    from apportion.plan.ducc_scenario import compile_ducc_scenario

    doc = load_document(plan_path)
    raw = dict(data if data is not None else doc.data)
    for k in ("timeline", "replay"):
        raw.pop(k, None)
    return compile_ducc_scenario(raw, doc.source, doc.positions if data is None else None)


def _specs(trace: Trace, sc: DuccScenario, init_seconds: float) -> tuple[list[DuccStep], dict[str, TraceJob]]:
    cfg = sc.config
    default = cfg.default_class(Policy.FAIR_SHARE)
    by_time: dict[float, list[JobSpec]] = {}
    jobs: dict[str, TraceJob] = {}
    for seq, tj in enumerate(trace.jobs(), start=1):
        w = tj.ducc
        if w is None:
            raise SimulationError(f"job {tj.id} has no DUCC work (items, threads): a DUCC plan replays DUCC "
                                  "workloads; give an EGO plan (no ducc: section) for rigid jobs")
        cls = w.cls if w.cls in cfg.classes and not cfg.classes[w.cls].abstract else (
            default.name if default is not None else None)
        if cls is None:
            raise SimulationError(f"job {tj.id}: class {w.cls or '(none)'} is not defined and the configuration "
                                  "has no default FAIR_SHARE class")
        if tj.id in jobs:
            raise SimulationError(f"job id {tj.id} comes twice in the trace")
        jobs[tj.id] = tj
        by_time.setdefault(tj.submit, []).append(JobSpec(
            id=tj.id, user=tj.user, cls=cls, memory=w.memory, max_processes=w.max_processes, threads=w.threads,
            work_items=w.items, init_seconds=init_seconds, seconds_per_item=w.item_seconds, submitted=tj.submit,
            seq=seq))
    steps = [DuccStep(at=t, jobs=tuple(js), label="trace", report=False) for t, js in sorted(by_time.items())]
    return steps, jobs


def ducc_simulate(plan_path: str | os.PathLike[str], trace: Trace, map_path: str | os.PathLike[str] | None, *,
                  data: dict[str, Any] | None = None, tick: float | None = None,
                  on_progress: Callable[[Progress], None] | None = None, series_points: int = 400,
                  init_seconds: float = DEFAULT_INIT_SECONDS):
    sc = _scenario(plan_path, data)
    steps, tjobs = _specs(trace, sc, init_seconds)
    if map_path is not None:
        from apportion.traces.mapping import load_mapping

        resolve = load_mapping(map_path).resolve
        consumer = {jid: resolve(tj)[0] for jid, tj in tjobs.items()}
    else:
        consumer = {jid: "/" + (tj.user or "anonymous") for jid, tj in tjobs.items()}
    cycle = tick or sc.cycle or 10.0
    scenario = DuccScenario(config=sc.config, steps=tuple(steps), cycle=cycle, report="steps", until=sc.until,
                            source=sc.source, horizon=None)
    runner = DuccRunner(scenario)
    cfg = sc.config
    machines = tuple(api.Machine(n, float(m or 0.0)) for n, m in cfg.hosts.items())
    capacity = sum(machine_orders(cfg, machines).values())
    rec = Recorder(capacity, sorted(set(consumer.values())))
    orders: dict[str, int] = {}
    first_start: dict[str, float] = {}
    done: set[str] = set()
    cycles = 0
    for r in runner.records():
        cycles += 1
        now = r.now
        for j in r.before.jobs:
            if j.id not in orders:
                orders[j.id] = api.process_order(j.memory_gb, cfg.quantum(cfg.classes[j.cls].nodepool))
                rec.arrive(consumer[j.id], j.submitted_at, 0)
        if r.decisions.evictions:
            procs = {p.share_id: p for p in r.before.processes}
            for e in r.decisions.evictions:
                p = procs.get(e.share_id)
                tj = tjobs.get(e.job)
                if p is None or tj is None or tj.ducc is None:
                    continue
                path = consumer[e.job]
                rec.reclaimed(path)
                in_flight = p.investment - math.floor(p.investment + 1e-9)  # items: lost
                rec.evicted(path, in_flight * tj.ducc.item_seconds / max(1, tj.ducc.threads) * p.order)
        # held quanta, deserved quanta and demand per consumer after this cycle
        held: dict[str, int] = {}
        deserved: dict[str, int] = {}
        wanting: set[str] = set()
        for jid, acc in r.decisions.jobs.items():
            path = consumer.get(jid)
            if path is None:
                continue
            o = orders.get(jid, 1)
            held[path] = held.get(path, 0) + acc.held * o
            deserved[path] = deserved.get(path, 0) + acc.deserved * o
            if acc.held < acc.cap:
                wanting.add(path)
            if acc.held > 0 and jid not in first_start:
                first_start[jid] = now
        for path in rec.c:
            rec.set_state(path, now, held.get(path, 0), 1 if path in wanting else 0)
        rec.deserved(now, deserved)
        if len(runner.finished) > len(done):
            for jid, t in runner.finished.items():
                if jid not in done and jid in tjobs:
                    done.add(jid)
                    start = first_start.get(jid, t)
                    rec.finish(consumer[jid], tjobs[jid].submit, t - start, 1, t)
        if on_progress is not None and cycles % 256 == 0:
            on_progress(Progress(now, len(orders), len(done), cycles))
    if on_progress is not None:
        on_progress(Progress(runner.now, len(orders), len(done), cycles))
    stranded = [jid for jid in tjobs if jid not in first_start and jid in consumer]
    for jid in stranded:  # never started: a censored wait, as for rigid jobs
        tj = tjobs[jid]
        rec.unfinished(consumer[jid], tj.submit, tj.run, tj.run, 1)
    res = rec.result(until=runner.now if stranded else None)
    res["cycles"] = cycles
    res["tick"] = cycle
    res["never_started"] = sum(1 for jid in tjobs if jid not in first_start)
    res["unfinished"] = sum(1 for jid in tjobs if jid not in runner.finished)
    res["ended"] = runner.ended
    res["unit"] = f"share quantum ({cfg.quantum(next(iter(cfg.nodepools)))} GB)"
    return SimRun(res, rec, series_points)
