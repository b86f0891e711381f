"""One simulation from files: a plan, a trace and a mapping in, figures out.

``simulate()`` is what ``apportion simulate``, ``apportion sweep`` and ``apportion
bench simulate`` call. A plan with a ``ducc:`` section replays DUCC work through
DUCC's cycle (``simulate.ducc``); any other plan replays rigid jobs through the
EGO engine (``simulate.replay``), and, when asked, through plain batch schedulers on
the same slots (``simulate.baselines``) for the figures' ``baselines``.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from apportion.simulate.figures import SimRun  # here too: `from apportion.simulate.run import SimRun`
from apportion.simulate.replay import DEFAULT_SAMPLE, DEFAULT_TICK, Progress, Replay, SimulationError, \
    iter_jobs, one_consumer
from apportion.traces.record import Trace, TraceJob


def open_any(path: str | os.PathLike[str], kind: str | None = None, skip_bad: int = 0,
             sort: bool = False) -> Trace:
    from apportion.traces import open_trace

    return open_trace(path, kind=kind, skip_bad=skip_bad, sort=sort)


def _resolver(plan, mapping_path: str | os.PathLike[str] | None):
    if mapping_path is not None:
        from apportion.traces.mapping import load_mapping

        return load_mapping(mapping_path).resolve
    leaves = [c.path for c in plan.consumers if c.is_leaf]
    if len(leaves) == 1:
        return one_consumer(leaves[0])
    raise SimulationError(f"the plan has {len(leaves)} leaf consumers: give --map to say which jobs go where "
                          "(apportion simulate map TRACE --by group writes one)")


def _arriving(jobs: Iterable[TraceJob], arrivals: float, first: int | None = None) -> Iterable[TraceJob]:
    """``jobs`` arriving ``arrivals`` times as fast (each submit time divided by it); only
    the ``first`` ones where given."""
    if first is not None:
        jobs = itertools.islice(jobs, first)
    if arrivals == 1:
        return jobs
    return (dataclasses.replace(j, submit=j.submit / arrivals) for j in jobs)


def is_ducc_plan(data: Any) -> bool:
    return isinstance(data, dict) and data.get("ducc") is not None


def simulate(plan_path: str | os.PathLike[str], trace_path: str | os.PathLike[str],
             map_path: str | os.PathLike[str] | None = None, *, kind: str | None = None, skip_bad: int = 0,
             tick: float | None = None, host_slots: int | None = None, sample: float = DEFAULT_SAMPLE,
             plan_data: dict[str, Any] | None = None, series_points: int = 400,
             on_progress: Callable[[Progress], None] | None = None, trace: Trace | None = None,
             on_replay: Callable[[Replay], None] | None = None, baselines: tuple[str, ...] = (),
             sort: bool = False, arrivals: float = 1, first: int | None = None) -> SimRun:
    """Replay ``trace_path`` under the plan at ``plan_path`` (or ``plan_data``, that
    plan's data changed, for sweeps). PlanError, BadLine and SimulationError are the
    user's mistakes and say where. ``on_replay`` sees the EGO replay before it runs
    (the bench times its cycles). ``baselines``: "fcfs", "easy" (``simulate.baselines``),
    replayed after the plan, each on the trace read again; ``sort``: the trace is read in
    submission order whatever its own (``traces.sort``); ``arrivals``: jobs arrive that many
    times as fast (each submit time divided by it; their sizes and run times as written), to
    ask what the plan does under a heavier load than the trace's; ``first``: only the trace's
    first that many jobs (in the order it is read)."""
    from apportion.plan.positions import load_document

    wall0, cpu0 = time.perf_counter(), time.process_time()
    tr = trace if trace is not None else open_any(trace_path, kind, skip_bad, sort)
    data = plan_data if plan_data is not None else load_document(plan_path).data
    if not arrivals > 0:
        raise SimulationError(f"arrivals {arrivals!r}: a number above 0")
    if first is not None and (isinstance(first, bool) or not isinstance(first, int) or first < 1):
        raise SimulationError(f"first {first!r}: a whole number of jobs above 0")
    if is_ducc_plan(data):
        if arrivals != 1 or first is not None:
            raise SimulationError("arrivals, first: a DUCC plan's work is replayed as the trace has it")
        if baselines:
            raise SimulationError("--baseline replays rigid jobs; a DUCC plan's work is elastic")
        from apportion.simulate.ducc import ducc_simulate

        run = ducc_simulate(plan_path, tr, map_path, data=plan_data, tick=tick, on_progress=on_progress,
                            series_points=series_points)
    else:
        from apportion.simulate.cluster import load_sim_plan

        plan, _ = load_sim_plan(plan_path, tr.info, host_slots, data=plan_data)
        resolve = _resolver(plan, map_path)
        mix = None
        if any(h.resources for h in plan.hosts):  # by kind: the task types GPU fragmentation is measured over
            from apportion.simulate.kindfigures import workload_mix

            mix = workload_mix((j.resources, j.slots) for j in _arriving(tr.jobs(), arrivals, first))
        r = Replay(plan, iter_jobs(_arriving(tr.jobs(), arrivals, first)), resolve, tick=tick or DEFAULT_TICK,
                   sample=sample, on_progress=on_progress, gpu_mix=mix)
        if on_replay is not None:
            on_replay(r)
        r.run()
        run = SimRun(r.result(), r.rec, series_points)
        run.result["arrived"] = r.arrived
        if baselines:
            from apportion.simulate.baselines import baseline

            run.result["baselines"] = {}
            for name in dict.fromkeys(baselines):
                b0 = time.process_time()
                b = baseline(name, plan, iter_jobs(_arriving(tr.jobs(), arrivals, first)), resolve)
                b.result["cpu_seconds"] = time.process_time() - b0
                run.result["baselines"][name] = b.result
    res = run.result
    dropped = dict(getattr(tr, "dropped", {}) or {})
    res["dropped"] = dropped
    res["dropped_jobs"] = sum(dropped.values())
    res["plan"] = os.fspath(plan_path)
    res["trace"] = os.fspath(trace_path)
    res["map"] = os.fspath(map_path) if map_path is not None else None
    if arrivals != 1:
        res["arrivals"] = arrivals
    if first is not None:
        res["first"] = first
    res["skipped_lines"] = tr.skips.skipped
    res["skipped_first"] = [str(e) for e in tr.skips.first]
    res["wall_seconds"] = time.perf_counter() - wall0
    res["cpu_seconds"] = time.process_time() - cpu0
    return run
