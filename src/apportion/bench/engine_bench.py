"""`apportion bench engine`: time the engine's cold and steady cycles on a synthetic cluster.

Timings use ``time.perf_counter`` (wall clock) around exactly the calls they
name and are taken without tracemalloc; the cycles' CPU time
(``time.process_time``) is recorded beside them, as it is less disturbed by
other load on the machine. Peak memory is the process's peak resident set
(``getrusage``), and, on request, the tracemalloc peak of a separate, untimed run.
"""

from __future__ import annotations

import gc
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict

from apportion.bench.machine import machine_info, source_revision
from apportion.bench.workload import Churn, Workload, WorkloadSpec, make_workload
from apportion.engine import Engine
from apportion.scenario.runner import quiet_cycles

MIB = 2**20

TARGETS = {"cold_s": 2.0, "steady_median_s": 0.050, "peak_rss_mib": 1024.0}


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    s = sorted(values)
    k = max(1, math.ceil(p / 100 * len(s)))
    return s[k - 1]


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def capacity_check(engine: Engine) -> dict:
    """Slots held per host against the host's slots: how many hosts are over, and how full the cluster is."""
    st = engine.state
    over = 0
    held_total = 0
    fenced: dict[str, int] = {}
    for (_, host), n in st.fences.items():  # slots kept for work outside the slot books (vector requests)
        fenced[host] = fenced.get(host, 0) + n
    for name, ledger in st.hosts.items():
        held = int(sum(a.slots for a in st.by_host[name].values())) + fenced.get(name, 0)  # slots may be gmpy2 integers
        held_total += held
        if held > ledger.host.slots or ledger.free < 0 or ledger.free != ledger.host.slots - held:
            over += 1
    capacity = sum(h.host.slots for h in st.hosts.values())
    return {"hosts_over_capacity": over, "held_slots": held_total, "capacity_slots": capacity,
            "utilisation": round(held_total / capacity, 4) if capacity else 0.0}


def apply_changes(engine: Engine, changes) -> None:
    for ch in changes:
        if ch.kind == "release":
            engine.release(ch.id)
        elif ch.kind == "submit":
            engine.submit(ch.request)
        else:
            engine.change(ch.id, max=ch.max)


def run(spec: WorkloadSpec, steady_cycles: int = 20, change_fraction: float = 0.01,
        trace_memory: bool = False) -> dict:
    """Generate, build, run the cold cycle and the steady cycles; return the figures."""
    t = time.perf_counter()
    wl = make_workload(spec)
    generate_s = time.perf_counter() - t

    gc.collect()
    t = time.perf_counter()
    engine = Engine(wl.plan)
    for req in wl.requests:
        engine.submit(req)
    build_s = time.perf_counter() - t

    gc.collect()
    c, t = time.process_time(), time.perf_counter()
    d = engine.cycle(0.0)
    cold_s = time.perf_counter() - t
    cold_cpu_s = time.process_time() - c
    cold = {"grants": len(d.grants), "reclaims": len(d.reclaims), "removals": len(d.removals)}
    check = capacity_check(engine)

    # the cluster settles before steady cycles are measured: cycles at t=0 until one
    # decides nothing (reclaims with grace 0 complete in the next cycle)
    t = time.perf_counter()
    settle_cycles = sum(1 for _ in quiet_cycles(engine, 0.0))
    settle_s = time.perf_counter() - t
    held = sum(a.slots for a in engine.state.allocs.values()) + sum(a.slots for a in engine.kinds.allocs.values())

    churn = Churn(wl, change_fraction)
    steady: list[float] = []
    steady_cpu: list[float] = []
    apply_s: list[float] = []
    totals = {"grants": 0, "reclaims": 0, "removals": 0, "changes": 0}
    now = 0.0
    for changes in churn.steps(steady_cycles):
        t = time.perf_counter()
        apply_changes(engine, changes)
        apply_s.append(time.perf_counter() - t)
        now += 1.0
        c, t = time.process_time(), time.perf_counter()
        d = engine.cycle(now)
        steady.append(time.perf_counter() - t)
        steady_cpu.append(time.process_time() - c)
        totals["grants"] += len(d.grants)
        totals["reclaims"] += len(d.reclaims)
        totals["removals"] += len(d.removals)
        totals["changes"] += len(changes)
    steady_check = capacity_check(engine)

    out = {
        "spec": asdict(spec),
        "revision": source_revision(),
        "steady_cycles": steady_cycles,
        "change_fraction": change_fraction,
        "workload": _describe(wl),
        "generate_s": generate_s,
        "build_submit_s": build_s,
        "cold_s": cold_s,
        "cold_cpu_s": cold_cpu_s,
        "cold": cold | check,
        "settle": {"cycles": settle_cycles, "s": settle_s, "held": held},
        "steady": {
            "median_s": statistics.median(steady) if steady else None,
            "p95_s": percentile(steady, 95) if steady else None,
            "min_s": min(steady) if steady else None,
            "max_s": max(steady) if steady else None,
            "cpu_median_s": statistics.median(steady_cpu) if steady_cpu else None,
            "apply_median_s": statistics.median(apply_s) if apply_s else None,
            "samples_s": steady,
            **totals,
            **{"after_" + k: v for k, v in steady_check.items()},
        },
        "open_requests": len(engine.state.requests),
        "allocations": len(engine.state.allocs),
        "peak_rss_mib": peak_rss_bytes() / MIB,
        "tracemalloc_peak_mib": None,
    }
    del engine, churn, wl, d
    gc.collect()
    if trace_memory:
        out["tracemalloc_peak_mib"] = traced_peak(spec) / MIB
    out["targets"] = targets_met(out)
    return out


def traced_peak(spec: WorkloadSpec) -> int:
    """Peak bytes allocated by Python for generate + build + submit + cold cycle (slow; untimed)."""
    import tracemalloc

    tracemalloc.start()
    try:
        wl = make_workload(spec)
        engine = Engine(wl.plan)
        for req in wl.requests:
            engine.submit(req)
        engine.cycle(0.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def targets_met(r: dict) -> dict:
    """Each target of the issue against the figure measured (only meaningful at the target size)."""
    med = r["steady"]["median_s"]
    return {
        "cold_s": {"target": TARGETS["cold_s"], "measured": r["cold_s"], "met": r["cold_s"] <= TARGETS["cold_s"]},
        "steady_median_s": {"target": TARGETS["steady_median_s"], "measured": med,
                            "met": med is not None and med <= TARGETS["steady_median_s"]},
        "peak_rss_mib": {"target": TARGETS["peak_rss_mib"], "measured": r["peak_rss_mib"],
                         "met": r["peak_rss_mib"] <= TARGETS["peak_rss_mib"]},
    }


def _describe(wl: Workload) -> dict:
    plan = wl.plan
    return {
        "consumers": len(plan.consumers),
        "depth": max(c.depth for c in plan.consumers),
        "owning_leaves": sum(1 for c in plan.consumers if c.is_leaf and any(s.owned for s in c.groups.values())),
        "lending_leaves": sum(1 for c in plan.consumers if c.is_leaf and any(s.lend for s in c.groups.values())),
        "capacity_slots": wl.capacity,
        "demand_slots": wl.demand,
    }


# -- the curve: each point in a fresh interpreter, so that peak RSS is its own -----------------------

CURVE_HOSTS = (1_000, 10_000, 100_000)


def scaled(spec: WorkloadSpec, hosts: int) -> WorkloadSpec:
    f = hosts / spec.hosts
    return WorkloadSpec(hosts=hosts, slots_per_host=spec.slots_per_host,
                        leaves=max(1, round(spec.leaves * f)), requests=max(1, round(spec.requests * f)),
                        groups=min(spec.groups, hosts), seed=spec.seed, kinds=spec.kinds)


def run_in_child(spec: WorkloadSpec, steady_cycles: int, change_fraction: float) -> dict:
    args = json.dumps({"spec": asdict(spec), "steady_cycles": steady_cycles, "change_fraction": change_fraction})
    proc = subprocess.run([sys.executable, "-m", "apportion.bench.engine_bench", args],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout)


def curve(spec: WorkloadSpec, steady_cycles: int, change_fraction: float, points=CURVE_HOSTS,
          progress=None) -> list[dict]:
    out = []
    for hosts in points:
        s = scaled(spec, hosts)
        if progress:
            progress(s)
        out.append(run_in_child(s, steady_cycles, change_fraction))
    return out


def growth(points: list[dict], key=lambda r: r["cold_s"]) -> list[float | None]:
    """Empirical exponent between consecutive points: log(t2/t1) / log(n2/n1) (1.0 is linear)."""
    out: list[float | None] = [None]
    for a, b in zip(points, points[1:]):
        ta, tb = key(a), key(b)
        na, nb = a["spec"]["hosts"], b["spec"]["hosts"]
        out.append(math.log(tb / ta) / math.log(nb / na) if ta and tb and na != nb else None)
    return out


def _child_main(argv: list[str]) -> None:
    args = json.loads(argv[0])
    r = run(WorkloadSpec(**args["spec"]), args["steady_cycles"], args["change_fraction"])
    print(json.dumps(r))


__all__ = ["TARGETS", "capacity_check", "curve", "growth", "machine_info", "percentile", "run", "scaled"]


if __name__ == "__main__":
    _child_main(sys.argv[1:])
