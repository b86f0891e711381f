"""`apportion bench ducc`: time one full DUCC scheduling cycle on a large synthetic cluster.

The workload (a pure function of ``DuccBenchSpec`` and its seed):

- ``machines`` machines of 32-256 GB (32, 48, 64, 96, 128, 192 or 256, smaller sizes
  more common), one nodepool, a ``quantum`` GB share quantum (15: orders 2 to 17);
- ``classes`` classes over three priorities: a tenth FIXED_SHARE at priority 5, the
  rest FAIR_SHARE, two thirds at priority 10 and one third at priority 20, weights
  1-400; the site's initialization cap (1), expand-by-doubling and prediction on;
- ``users`` users (a skewed choice: some users own many jobs);
- ``jobs`` jobs submitted at t = 0, processes of 4-60 GB (orders 1-4), 1-8 threads,
  up to 1-64 processes, 20-20,000 work items of 1-60 s, 0-60 s initialisation;
  FIXED_SHARE jobs have at most 4 processes; and every cycle ``arrivals`` new jobs,
  so that jobs finishing, arriving, growing by doubling and being shrunk keep the
  scheduler busy.

The scenario runner (``apportion.scenario.ducc_runner``) plays the Orchestrator and
the agents around the engine: processes initialise and work, evictions are confirmed
the cycle after, jobs finish. Only the engine's ``schedule`` call is timed: one full
cycle (job caps, How Much, What Of, evictions, defragmentation). The first cycle (no
process yet, every job new) is reported apart; the figure is the **median of the
next ``cycles`` cycles**. Peak memory is the process's peak resident set (getrusage).
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from apportion.bench.engine_bench import MIB, peak_rss_bytes, percentile
from apportion.bench.machine import source_revision
from apportion.engine.ducc.config import DEFAULT_NODEPOOL, DuccConfig
from apportion.importers.ducc import ducc_config_from_mapping
from apportion.scenario.ducc_model import DuccScenario, DuccStep, JobSpec

TARGETS = {"median_s": 0.200, "peak_rss_mib": 1024.0}
SIZES_GB = (32, 48, 64, 96, 128, 192, 256)
SIZE_WEIGHTS = (6, 5, 5, 4, 3, 2, 1)


@dataclass(frozen=True, slots=True)
class DuccBenchSpec:
    machines: int = 2_000
    classes: int = 20
    users: int = 500
    jobs: int = 5_000
    quantum: int = 15
    cycles: int = 20
    arrivals: int = 25  # new jobs per cycle while measuring
    cycle_s: float = 10.0
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("machines", "classes", "users", "jobs", "quantum", "cycle_s"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.cycles < 0 or self.arrivals < 0:
            raise ValueError("cycles and arrivals must not be negative")


def _classes(spec: DuccBenchSpec, rng: random.Random) -> list[dict[str, Any]]:
    n_fixed = max(1, spec.classes // 10) if spec.classes >= 3 else 0
    n_fair = spec.classes - n_fixed
    n_low = n_fair // 3
    out = []
    for i in range(n_fixed):
        out.append({"name": f"fixed-{i + 1}", "policy": "FIXED_SHARE", "nodepool": DEFAULT_NODEPOOL,
                    "priority": 5, "default": i == 0})
    for i in range(n_fair):
        out.append({"name": f"fair-{i + 1}", "policy": "FAIR_SHARE", "nodepool": DEFAULT_NODEPOOL,
                    "priority": 20 if i >= n_fair - n_low else 10, "weight": rng.choice((1, 50, 100, 100, 200, 400)),
                    "expand_by_doubling": True, "initialization_cap": 1, "use_prediction": True,
                    "prediction_fudge": 120_000, "default": i == 0})
    return out


def make_config(spec: DuccBenchSpec) -> DuccConfig:
    rng = random.Random(spec.seed)
    names = [f"n{i:05d}" for i in range(spec.machines)]
    hosts = {n: rng.choices(SIZES_GB, SIZE_WEIGHTS)[0] for n in names}
    section = {
        "properties": {"ducc.rm.share.quantum": spec.quantum},
        "nodepools": [{"name": DEFAULT_NODEPOOL, "share_quantum": spec.quantum, "nodes": names}],
        "classes": _classes(spec, rng),
    }
    return ducc_config_from_mapping(section, hosts, source="<bench>")


class _Jobs:
    def __init__(self, spec: DuccBenchSpec, cfg: DuccConfig) -> None:
        self.rng = random.Random(spec.seed * 7919 + 1)
        self.users = [f"u{i:03d}" for i in range(spec.users)]
        self.fair = [c.name for c in cfg.schedulable_classes() if c.policy.value == "FAIR_SHARE"]
        self.fixed = [c.name for c in cfg.schedulable_classes() if c.policy.value == "FIXED_SHARE"]
        self.seq = 0

    def make(self, at: float) -> JobSpec:
        r = self.rng
        self.seq += 1
        user = self.users[min(len(self.users) - 1, int(r.paretovariate(1.2)) - 1)] if r.random() < 0.3 \
            else r.choice(self.users)
        fixed = bool(self.fixed) and r.random() < 0.05
        cls = r.choice(self.fixed) if fixed else r.choice(self.fair)
        return JobSpec(
            id=f"j{self.seq:06d}", user=user, cls=cls, memory=float(r.choice((4, 8, 14, 20, 28, 30, 45, 60))),
            max_processes=r.randint(1, 4) if fixed else r.choice((1, 2, 4, 8, 16, 32, 64)),
            threads=r.randint(1, 8), work_items=int(r.choice((20, 100, 500, 2_000, 20_000)) * r.uniform(0.5, 1)),
            init_seconds=float(r.randint(0, 60)), seconds_per_item=float(r.randint(1, 60)),
            submitted=at, seq=self.seq)


def make_scenario(spec: DuccBenchSpec) -> DuccScenario:
    cfg = make_config(spec)
    gen = _Jobs(spec, cfg)
    steps = [DuccStep(at=0.0, jobs=tuple(gen.make(0.0) for _ in range(spec.jobs)), label="start")]
    for k in range(1, spec.cycles + 1):
        at = k * spec.cycle_s
        steps.append(DuccStep(at=at, jobs=tuple(gen.make(at) for _ in range(spec.arrivals)), label=f"arrivals {k}",
                              report=False))
    return DuccScenario(config=cfg, steps=tuple(steps), cycle=spec.cycle_s, report="steps",
                        until=spec.cycles * spec.cycle_s, source="<bench>")


def run(spec: DuccBenchSpec) -> dict[str, Any]:
    from apportion.engine.ducc import api
    from apportion.scenario.ducc_runner import DuccRunner, machine_orders

    t = time.perf_counter()
    sc = make_scenario(spec)
    generate_s = time.perf_counter() - t
    runner = DuccRunner(sc)
    wall: list[float] = []
    cpu: list[float] = []

    def timed(config, state, now):
        gc.collect()
        c, t0 = time.process_time(), time.perf_counter()
        d = api.schedule(config, state, now)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c)
        return d

    runner.schedule_fn = timed
    counts = []
    over = 0
    orders = None
    for rec in runner.records():
        d = rec.decisions
        if orders is None:
            orders = machine_orders(rec.config, rec.after.machines)
        used: dict[str, int] = {}
        for p in rec.after.processes:
            used[p.machine] = used.get(p.machine, 0) + p.order
        over += sum(1 for m, u in used.items() if u > orders[m])
        states: dict[str, int] = {}
        for acc in d.jobs.values():
            states[acc.state] = states.get(acc.state, 0) + 1
        counts.append({"jobs": len(rec.before.jobs), "processes": len(rec.after.processes),
                       "quanta_used": sum(used.values()), "new": len(d.new), "evictions": len(d.evictions),
                       "defrag_evictions": sum(1 for e in d.evictions if e.reason == "defrag"),
                       "needy": len(d.needy), "states": states})
    steady = wall[1:]
    capacity = sum(orders.values()) if orders else 0
    out: dict[str, Any] = {
        "spec": asdict(spec),
        "revision": source_revision(),
        "workload": {
            "machines": len(sc.config.hosts), "capacity_quanta": capacity,
            "classes": sum(1 for c in sc.config.classes.values() if not c.abstract),
            "priorities": sorted({c.priority for c in sc.config.classes.values()}),
            "users": spec.users, "jobs_at_start": spec.jobs,
            "jobs_submitted": sum(len(s.jobs) for s in sc.steps),
        },
        "generate_s": generate_s,
        "first_cycle_s": wall[0] if wall else None,
        "first_cycle": counts[0] if counts else None,
        "cycles_timed": len(steady),
        "median_s": statistics.median(steady) if steady else None,
        "p95_s": percentile(steady, 95) if steady else None,
        "min_s": min(steady) if steady else None,
        "max_s": max(steady) if steady else None,
        "cpu_median_s": statistics.median(cpu[1:]) if steady else None,
        "samples_s": steady,
        "per_cycle": counts,
        "machines_over_order": over,
        "peak_rss_mib": peak_rss_bytes() / MIB,
    }
    med = out["median_s"]
    out["targets"] = {
        "median_s": {"target": TARGETS["median_s"], "measured": med,
                     "met": med is not None and med <= TARGETS["median_s"]},
        "peak_rss_mib": {"target": TARGETS["peak_rss_mib"], "measured": out["peak_rss_mib"],
                         "met": out["peak_rss_mib"] <= TARGETS["peak_rss_mib"]},
    }
    return out


def render(console, machine: dict, r: dict) -> None:
    """The figures as a rich table (``apportion bench ducc`` without --json)."""
    from rich.table import Table
    from apportion.cli.tables import print_table

    sp, wl, tg = r["spec"], r["workload"], r["targets"]

    def ms(x):
        return "-" if x is None else f"{x * 1000:,.1f} ms"

    def met(t):
        return "[green]met[/]" if t["met"] else "[red]not met[/]"

    console.print(f"[bold]machine[/]: {machine['cpu']}, {machine['logical_cpus']} logical CPUs "
                  f"({machine['physical_cores']} cores), {machine['ram_gib']} GiB RAM, {machine['python']}, "
                  f"{machine['platform']}", highlight=False)
    rev = r["revision"]
    console.print("[bold]engine[/]: " + (f"commit {rev['commit']}" + (" with local edits to engine/"
                                                                         if rev["engine_dirty"] else "")
                                         if rev.get("commit") else "revision unknown"), highlight=False)
    console.print(f"[bold]workload[/]: {wl['machines']:,} machines ({wl['capacity_quanta']:,} quanta of "
                  f"{sp['quantum']} GB), {wl['classes']} classes at priorities "
                  f"{', '.join(map(str, wl['priorities']))}, {sp['users']} users, {sp['jobs']:,} jobs at the start "
                  f"and {sp['arrivals']} more per cycle; a cycle every {sp['cycle_s']:g}s; seed {sp['seed']}",
                  highlight=False)
    t = Table(title="apportion bench ducc")
    t.add_column("measure")
    t.add_column("value", justify="right")
    t.add_column("target", justify="right")
    t.add_column("")
    first = r["first_cycle"] or {}
    t.add_row("first cycle (every job new)", ms(r["first_cycle_s"]), "", "")
    t.add_row("  processes started", f"{first.get('new', 0):,}", "", "")
    n = r["cycles_timed"]
    t.add_row(f"full cycle, median of {n}", ms(r["median_s"]), ms(tg["median_s"]["target"]), met(tg["median_s"]))
    t.add_row(f"full cycle, p95 of {n}", ms(r["p95_s"]), "", "")
    t.add_row("  min / max", f"{ms(r['min_s'])} / {ms(r['max_s'])}", "", "")
    t.add_row("  CPU time, median", ms(r["cpu_median_s"]), "", "")
    later = r["per_cycle"][1:]
    if later:
        t.add_row("  per cycle: jobs, processes", f"{later[-1]['jobs']:,}, {later[-1]['processes']:,}", "", "")
        t.add_row("  started / evicted (defrag) over the timed cycles",
                  f"{sum(c['new'] for c in later):,} / {sum(c['evictions'] for c in later):,} "
                  f"({sum(c['defrag_evictions'] for c in later):,})", "", "")
    t.add_row("machines above their order (all cycles)", str(r["machines_over_order"]), "0",
              "[green]ok[/]" if r["machines_over_order"] == 0 else "[red]BUG[/]")
    t.add_row("peak RSS (process)", f"{r['peak_rss_mib']:,.0f} MiB", f"{tg['peak_rss_mib']['target']:,.0f} MiB",
              met(tg["peak_rss_mib"]))
    print_table(console, t)
