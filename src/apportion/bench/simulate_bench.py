"""`apportion bench simulate`: replays of real and synthetic workloads, end to end.

Each case runs in a fresh interpreter (``python -m apportion.bench.simulate_bench
CASE``), so its time includes starting Python, importing apportion, reading the trace
from disk and writing nothing but its figures, and its peak memory is its own:

- ``nasa``: NASA iPSC/860 (18,239 jobs, 128 nodes), three tenants: the plan and
  mapping of examples/simulate/nasa-3-tenants*.yaml. Targets: <= 3 s, <= 300 MB.
- ``curie``: CEA Curie (312,826 jobs, 93,312 cores): a mapping with one consumer
  per group is generated from the trace first (as `apportion simulate map --by
  group` does; its time counts), every consumer share ratio 1, the cores as one
  host. Target: <= 90 s on one core. The engine's cycles are timed apart: the
  cycle's cost per event is their time over the events (arrivals, ends, evictions).
  ``--jobs N`` replays only the first N jobs (the mapping is still made from them all).
- ``synthetic``: a seeded synthetic trace (``traces.synthetic``: 1,000,000 jobs, 1,000
  consumers, 10,000 hosts of 8 slots), each consumer share ratio 1. Target: <= 600 s.
- ``sweep``: 16 variants of the NASA case (the owners' slots and grace), one after
  the other in one process, then on a local Dask cluster of 2 worker processes.
  Target: the Dask time <= 0.6 x the serial time.

Times are wall-clock (``time.perf_counter``) with the CPU time beside them: on a
shared machine the CPU time is the steadier of the two.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "simulate"
TRACES = REPO.parent / "shared" / "traces"
NASA = "NASA-iPSC-1993-3.1-cln.swf.gz"
CURIE = "CEA-Curie-2011-2.1-cln.swf.gz"
CASES = ("nasa", "curie", "synthetic", "sweep")
TARGETS = {"nasa": {"wall_s": 3.0, "peak_rss_mib": 300.0}, "curie": {"wall_s": 90.0},
           "synthetic": {"wall_s": 600.0}, "sweep": {"ratio": 0.6}}


def _peak_mib() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (r if sys.platform == "darwin" else r * 1024) / 2**20


def _timed_cycles(counter: dict[str, float]):
    def hook(replay) -> None:
        cycle = replay.engine.cycle

        def timed(now: float):
            t = time.perf_counter()
            d = cycle(now)
            counter["s"] += time.perf_counter() - t
            return d

        replay.engine.cycle = timed  # this bench's instance only
        counter["replay"] = replay  # type: ignore[assignment]
    return hook


def _figures(res: dict[str, Any], counter: dict[str, Any]) -> dict[str, Any]:
    r = counter.get("replay")
    events = 0
    skipped = cut = None
    if r is not None:
        events = r.arrived + r.finished + res.get("evictions", 0)
        skipped = getattr(r.engine, "skipped", None)
        cut = getattr(r.engine, "cut_short", None)
    return {"jobs": res["jobs"], "arrived": res.get("arrived"), "cycles": res["cycles"], "events": events,
            "cycles_not_run": skipped, "cycles_cut_short": cut,
            "makespan_s": res["makespan"], "utilisation": res["utilisation"], "jain": res["fairness"]["jain"],
            "reclaims": res["reclaims"], "evictions": res["evictions"], "replay_wall_s": res["wall_seconds"],
            "replay_cpu_s": res["cpu_seconds"], "cycles_s": counter["s"],
            "cycle_per_event_us": counter["s"] / events * 1e6 if events else None,
            "cycle_mean_us": counter["s"] / res["cycles"] * 1e6 if res["cycles"] else None,
            "simulated_per_wall": res["makespan"] / res["wall_seconds"] if res["wall_seconds"] else None}


def child_nasa(traces: Path) -> dict[str, Any]:
    from apportion.simulate.run import simulate

    counter: dict[str, Any] = {"s": 0.0}
    run = simulate(EXAMPLES / "nasa-3-tenants.yaml", traces / NASA, EXAMPLES / "nasa-3-tenants.map.yaml",
                   on_replay=_timed_cycles(counter))
    return _figures(run.result, counter)


class _First:
    """The first ``n`` jobs of a trace (a shorter run of the same case)."""

    def __init__(self, trace, n: int) -> None:
        self.trace, self.n = trace, n
        self.info, self.skips = trace.info, trace.skips

    def jobs(self):
        import itertools

        return itertools.islice(self.trace.jobs(), self.n)


def child_curie(traces: Path, jobs: int | None = None) -> dict[str, Any]:
    """``jobs``: only the first that many jobs are replayed (the mapping is still made
    from the whole trace, so the consumers are the same)."""
    from apportion.simulate.cluster import cluster_from_info
    from apportion.simulate.run import open_any, simulate
    from apportion.traces.mapping import generate, render_map, render_plan

    t0 = time.perf_counter()
    tr = open_any(traces / CURIE)
    mapping, plan = generate(tr, "group")
    plan.update(cluster_from_info(tr.info, tr.info.processors))
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "plan.yaml").write_text(render_plan(plan), encoding="utf-8")
        (Path(d) / "map.yaml").write_text(render_map(mapping), encoding="utf-8")
        mapped = time.perf_counter() - t0
        counter: dict[str, Any] = {"s": 0.0}
        trace = open_any(traces / CURIE)
        run = simulate(Path(d) / "plan.yaml", traces / CURIE, Path(d) / "map.yaml",
                       trace=trace if jobs is None else _First(trace, jobs), on_replay=_timed_cycles(counter))
    out = _figures(run.result, counter)
    out["consumers"] = len(run.result["consumers"])
    out["map_s"] = mapped
    return out


def child_synthetic(jobs: int, consumers: int, hosts: int) -> dict[str, Any]:
    from apportion.simulate.run import simulate
    from apportion.traces.mapping import render_map, render_plan
    from apportion.traces.synthetic import SyntheticTrace, synthetic_mapping

    tr = SyntheticTrace(jobs=jobs, consumers=consumers, hosts=hosts)
    mapping = synthetic_mapping(consumers)
    plan = {"hosts": [{"name": f"h[1-{hosts}]", "slots": tr.spec.slots_per_host}],
            "resource_groups": [{"name": "cpu", "hosts": [f"h[1-{hosts}]"]}],
            "consumers": [{"path": r.consumer, "share_ratio": 1} for r in mapping.rules]
            + [{"path": mapping.default, "share_ratio": 1}]}
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "plan.yaml").write_text(render_plan(plan), encoding="utf-8")
        (Path(d) / "map.yaml").write_text(render_map(mapping), encoding="utf-8")
        counter: dict[str, Any] = {"s": 0.0}
        run = simulate(Path(d) / "plan.yaml", tr.path, Path(d) / "map.yaml", trace=tr,
                       on_replay=_timed_cycles(counter))
    out = _figures(run.result, counter)
    out["hosts"] = hosts
    out["consumers"] = consumers
    return out


def sweep_grid(traces: Path, variants: int) -> dict[str, Any]:
    """The sweep spec: ``variants`` NASA variants (owned slots x grace)."""
    from apportion.simulate.sweep import load_grid

    owned = [16, 32, 48, 64, 80, 96, 112, 128][: max(1, variants // 2)]
    grace = [0, 600][: max(1, min(2, variants))]
    text = (f"plan: {EXAMPLES / 'nasa-3-tenants.yaml'}\ntrace: {traces / NASA}\n"
            f"map: {EXAMPLES / 'nasa-3-tenants.map.yaml'}\n"
            f"grid:\n  consumers[/Physics].owned: {owned}\n  consumers[/Physics].grace: {grace}\n")
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "grid.yaml"
        p.write_text(text, encoding="utf-8")
        return load_grid(p)


def child_sweep(traces: Path, variants: int, workers: int) -> dict[str, Any]:
    from apportion.simulate.sweep import run_variant, run_sweep

    spec = sweep_grid(traces, variants)
    jobs = [{"plan": spec["plan"], "trace": spec["trace"], "map": spec["map"], "options": spec["options"],
             "plan_data": v["plan_data"]} for v in spec["variants"]]
    t = time.perf_counter()
    serial = [run_variant(j) for j in jobs]
    serial_s = time.perf_counter() - t
    t = time.perf_counter()
    dask = run_sweep(spec, dask_local=workers)
    dask_s = time.perf_counter() - t
    same = all(json.dumps({k: v for k, v in a.items() if not k.endswith("seconds")}, sort_keys=True)
               == json.dumps({k: v for k, v in b["result"].items() if not k.endswith("seconds")}, sort_keys=True)
               for a, b in zip(serial, dask["variants"], strict=True))
    return {"variants": len(jobs), "workers": workers, "serial_s": serial_s, "dask_s": dask_s,
            "ratio": dask_s / serial_s if serial_s else None, "same_figures": same}


def run_case(case: str, traces: Path, opts: dict[str, Any]) -> dict[str, Any]:
    """``case`` in a fresh interpreter: its figures, its wall time end to end, its peak RSS."""
    cmd = [sys.executable, "-m", "apportion.bench.simulate_bench", case, str(traces), json.dumps(opts)]
    t = time.perf_counter()
    cpu0 = os.times()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    cpu1 = os.times()
    if p.returncode != 0:
        return {"case": case, "error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"}
    out = json.loads(p.stdout)
    out["case"] = case
    out["wall_s"] = wall
    out["cpu_s"] = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    target = TARGETS.get(case, {})
    out["targets"] = {k: {"target": v, "met": out.get(k) is not None and out[k] <= v} for k, v in target.items()}
    return out


def missing(traces: Path, cases: tuple[str, ...]) -> list[str]:
    need = {"nasa": NASA, "curie": CURIE, "sweep": NASA}
    return [need[c] for c in cases if c in need and not (traces / need[c]).exists()]


def bench(cases: tuple[str, ...], traces: Path, opts: dict[str, Any]) -> dict[str, Any]:
    from apportion.bench.machine import machine_info, source_revision

    return {"machine": machine_info(), "revision": source_revision(whole=True),
            "cases": [run_case(c, traces, opts) for c in cases]}


def _main(argv: list[str]) -> None:
    case, traces, opts = argv[0], Path(argv[1]), json.loads(argv[2])
    if case == "nasa":
        out = child_nasa(traces)
    elif case == "curie":
        out = child_curie(traces, opts.get("jobs"))
    elif case == "synthetic":
        out = child_synthetic(opts.get("jobs", 1_000_000), opts.get("consumers", 1_000), opts.get("hosts", 10_000))
    elif case == "sweep":
        out = child_sweep(traces, opts.get("variants", 16), opts.get("workers", 2))
    else:
        raise SystemExit(f"unknown case {case!r}; known: {', '.join(CASES)}")
    out["peak_rss_mib"] = _peak_mib()
    print(json.dumps(out))


if __name__ == "__main__":  # the child: python -m apportion.bench.simulate_bench CASE TRACES OPTIONS
    _main(sys.argv[1:])
