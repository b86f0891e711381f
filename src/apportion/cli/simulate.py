"""`apportion simulate PLAN TRACE`, `apportion simulate compare A.json B.json`,
`apportion simulate map TRACE`, and `apportion sweep GRID.yaml` (docs/simulate.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from apportion.cli.tables import print_table
from typer.core import TyperGroup

from apportion.simulate.report import dominant_text, dropped_text, duration, kinds_text

out = Console()
err = Console(stderr=True)


class _DefaultRun(TyperGroup):
    """`apportion simulate PLAN TRACE` runs `run`; `compare` and `map` are subcommands."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


simulate_app = typer.Typer(cls=_DefaultRun, no_args_is_help=True,
                           help="Replay a workload trace against a plan: waits, fairness, reclaims, a report.")


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _user_errors():
    from apportion.plan import PlanError
    from apportion.simulate.replay import SimulationError
    from apportion.traces.record import BadLine

    return PlanError, SimulationError, BadLine, ValueError, OSError


def _say_problem(e: Exception) -> None:
    from apportion.plan import PlanError

    if isinstance(e, PlanError):
        err.print(f"[bold red]{len(e.problems)} problem(s):[/]")
        for p in e.problems:
            err.print(str(p), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    _fail(str(e))


def _pct(x: float) -> str:
    return f"{x:.1%}"


def render_result(console: Console, res: dict) -> None:
    ftf = res["fairness"]
    console.print(f"[bold]{res['jobs']:,} jobs[/] over {duration(res['makespan'])} (makespan); utilisation "
                  f"{_pct(res['utilisation'])}; Jain {ftf['jain']:.3f}; deviation from deserved: max "
                  f"{_pct(ftf['max_deviation'])}, mean {_pct(ftf['mean_deviation'])} of the cluster; "
                  f"{res['reclaims']:,} reclaims, {res['evictions']:,} evictions, "
                  f"{res['lost_slot_seconds'] / 3600:,.1f} slot-hours lost")
    if res.get("never_started"):
        console.print(f"[bold red]{res['never_started']:,} jobs never started[/]: still waiting when nothing "
                      "was left to run or arrive; their waits count as censored (at least the end of the run "
                      "less their submission)")
    left_out = dropped_text(res)
    if left_out:
        console.print(f"[yellow]left out:[/] {left_out}", highlight=False)
    by_kind = kinds_text(res)
    if by_kind:
        console.print(f"[bold]by kind:[/] {by_kind}", highlight=False)
    t = Table(title="per consumer")
    for col in ("consumer", "jobs", "never", "wait mean", "wait p95", "bsld mean", "bsld p95", "allocated", "deserved",
                "shortfall", "starved", "reclaims", "evictions", "lost slot-h", "FTF") + (("dominant share",) if by_kind
                                                                                          else ()):
        t.add_column(col, justify="left" if col == "consumer" else "right")
    for path, c in res["consumers"].items():
        f = c["finish_time_fairness"]
        t.add_row(path, f"{c['jobs']:,}", f"{c.get('never_started', 0):,}", duration(c["wait"]["mean"]),
                  duration(c["wait"]["p95"]),
                  f"{c['bounded_slowdown']['mean']:.2f}", f"{c['bounded_slowdown']['p95']:.2f}",
                  f"{c['held_mean']:,.1f}", f"{c['deserved_mean']:,.1f}", duration(c["shortfall_seconds"]),
                  duration(c.get("starved_seconds", 0.0)), f"{c['reclaims']:,}", f"{c['evictions']:,}",
                  f"{c['lost_slot_seconds'] / 3600:,.1f}", "-" if f is None else f"{f:.2f}",
                  *((dominant_text(c),) if by_kind else ()))
    print_table(console, t)
    if res.get("baselines"):
        render_baselines(console, res)
    console.print(f"{res.get('cycles', 0):,} cycles in {res.get('wall_seconds', 0):.2f} s "
                  f"({res.get('cpu_seconds', 0):.2f} s CPU)")


def render_baselines(console: Console, res: dict) -> None:
    """The plan's figures beside the plain batch schedulers' (``--baseline``)."""
    t = Table(title="the plan against plain batch schedulers (one queue, the plan ignored)")
    for col in ("scheduler", "jobs", "never", "utilisation", "makespan", "wait mean", "wait p95", "bsld mean"):
        t.add_column(col, justify="left" if col == "scheduler" else "right")
    for name, r in [("plan", res), *res["baselines"].items()]:
        t.add_row(name, f"{r['jobs']:,}", f"{r.get('never_started', 0):,}", _pct(r["utilisation"]),
                  duration(r["makespan"]), duration(r["wait"]["mean"]), duration(r["wait"]["p95"]),
                  f"{r['bounded_slowdown']['mean']:.2f}")
    print_table(console, t)


@simulate_app.command("run", hidden=True)
def run_cmd(
    plan: Path = typer.Argument(..., help="The plan (YAML/TOML). Without hosts, the cluster is the trace's; "
                                "with a ducc: section, DUCC work is replayed through DUCC's cycle."),
    trace: Path = typer.Argument(..., help="The trace: SWF (.swf, .swf.gz), a DUCC workload directory, Google "
                                 "2011 task events, Alibaba GPU 2023 pods, or apportion JSONL."),
    map_file: Path | None = typer.Option(None, "--map", help="The mapping from trace users/groups/queues/"
                                         "partitions to consumers (needed when the plan has several leaves)."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON (the stable contract)."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write result.json, consumers.csv, series.csv, "
                                        "report.html and its PNGs here."),
    skip_bad: int = typer.Option(0, "--skip-bad", min=0, help="Skip up to N bad trace lines (counted); the "
                                 "next one stops the replay and says the budget is spent."),
    kind: str | None = typer.Option(None, "--kind", help="The trace's kind when its name does not say: "
                                    "swf, ducc, google, alibaba, jsonl."),
    tick: float | None = typer.Option(None, "--tick", min=0.001, help="Seconds between cycles (default: the "
                                      "master's tick, 1 s; DUCC: the plan's cycle, 10 s)."),
    host_slots: int | None = typer.Option(None, "--host-slots", min=1, help="When the cluster comes from the "
                                          "trace: cut its processors into hosts of N slots."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="A progress bar on stderr "
                                  "(never with --json or when stderr is not a terminal)."),
    baseline: list[str] = typer.Option([], "--baseline", help="Also replay the trace on the plan's slots "
                                       "under a plain batch scheduler, the plan ignored, and print its "
                                       "figures beside the plan's: fcfs (one queue, first come first "
                                       "served) or easy (the same with EASY backfilling, on requested "
                                       "times). Repeat for both."),
    sort: bool = typer.Option(False, "--sort", help="Read a trace that is not in submission order in that "
                              "order (an external sort in bounded memory; SWF, JSONL, Alibaba)."),
    arrivals: float = typer.Option(1.0, "--arrivals", min=0.001, help="Jobs arrive N times as fast as the "
                                   "trace has them (each submit time divided by N; sizes and run times as "
                                   "written): the plan under a heavier load. Not for DUCC plans."),
    first: int | None = typer.Option(None, "--first", min=1, help="Replay only the trace's first N jobs "
                                     "(in the order it is read). Not for DUCC plans."),
    inflate: str | None = typer.Option(None, "--inflate", help="Also grow a GPU trace's workload to these "
                                       "percentages of the cluster's GPUs (10,20,...,100) and report the GPU "
                                       "allocation at each, as the FGD paper does (Alibaba GPU traces)."),
    seeds: int = typer.Option(10, "--seeds", min=1, help="With --inflate: seeds to average over."),
    policy: str = typer.Option("fgd", "--policy", help="With --inflate: placement, random, bestfit or fgd."),
) -> None:
    """Replay TRACE against PLAN: who waits, who is starved, reclaims, work lost, fairness."""
    from apportion.simulate.progress import progress_bar
    from apportion.simulate.run import open_any, simulate

    from apportion.simulate.baselines import BASELINES

    bad = [b for b in baseline if b not in BASELINES]
    if bad:
        _fail(f"--baseline: unknown scheduler {bad[0]!r}; known: {', '.join(BASELINES)}")
    percents = None
    if inflate is not None:
        from apportion.engine.gpupack import POLICIES
        from apportion.simulate.inflate import parse_percents

        if policy not in POLICIES:
            _fail(f"--policy: {policy!r} is not one of {', '.join(POLICIES)}")
        try:
            percents = parse_percents(inflate)
        except ValueError as e:
            _fail(str(e))
    try:
        tr = open_any(trace, kind, skip_bad, sort)
        with progress_bar(progress and not json_out, tr.info.jobs) as cb:
            run = simulate(plan, trace, map_file, kind=kind, skip_bad=skip_bad, tick=tick, host_slots=host_slots,
                           on_progress=cb, trace=tr, baselines=tuple(baseline), sort=sort, arrivals=arrivals,
                           first=first)
        if percents is not None:
            from apportion.simulate.inflate import inflate as run_inflate
            from apportion.simulate.inflate import read_gpu_trace

            if getattr(tr, "kind", None) != "alibaba":
                raise ValueError("--inflate needs a GPU trace (the Alibaba GPU 2023 pod list)")
            run.result.update(run_inflate(read_gpu_trace(trace, getattr(tr, "nodes", None)), percents, seeds,
                                          policy))
    except _user_errors() as e:
        _say_problem(e)
        return
    if out_dir is not None:
        from apportion.simulate.output import write_all
        from apportion.simulate.report import write_report

        write_all(out_dir, run.result, run.series)
        html = write_report(out_dir, run.result, run.series)
        if not json_out:
            out.print(f"wrote {out_dir}/result.json, consumers.csv, series.csv and {html.name}")
    if json_out:
        print(json.dumps(run.result, indent=1))
    else:
        render_result(out, run.result)
        if "inflate" in run.result:
            from apportion.simulate.inflate import render_inflate

            render_inflate(out, run.result)


@simulate_app.command("compare")
def compare_cmd(
    a: Path = typer.Argument(..., help="A run's JSON (apportion simulate --json, or --out's result.json)."),
    b: Path = typer.Argument(..., help="The other run's JSON."),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    threshold: float = typer.Option(0.05, "--threshold", min=0.0, help="Mark differences larger than this "
                                    "fraction of the larger value."),
) -> None:
    """Two runs side by side, per consumer, with the differences marked."""
    from apportion.simulate.compare import compare, load_run, render_compare

    try:
        ra, rb = load_run(a), load_run(b)
    except (OSError, ValueError) as e:
        _fail(str(e))
        return
    result = compare(ra, rb, threshold, str(a), str(b))
    if json_out:
        print(json.dumps(result, indent=1))
    else:
        render_compare(out, result)


@simulate_app.command("map")
def map_cmd(
    trace: Path = typer.Argument(..., help="The trace to read through once."),
    by: str = typer.Option("group", "--by", help="One consumer per distinct user, group, queue or partition."),
    out_file: Path | None = typer.Option(None, "-o", "--output", help="Write the mapping here (default: stdout)."),
    plan_out: Path | None = typer.Option(None, "--plan-out", help="Also write a plan: the trace's hosts and "
                                         "one consumer per value, share ratio 1."),
    prefix: str = typer.Option("/", "--prefix", help="The parent of the consumers (/ or a path like /Teams)."),
    kind: str | None = typer.Option(None, "--kind", help="The trace's kind when its name does not say."),
    skip_bad: int = typer.Option(0, "--skip-bad", min=0, help="Skip up to N bad trace lines (counted)."),
    host_slots: int | None = typer.Option(None, "--host-slots", min=1, help="In --plan-out, cut the trace's "
                                          "processors into hosts of N slots (fewer, larger hosts: same figures, "
                                          "faster replay)."),
    sort: bool = typer.Option(False, "--sort", help="Read a trace that is not in submission order (as "
                              "apportion simulate --sort)."),
) -> None:
    """A mapping with one consumer per group (or user, queue, partition) of TRACE."""
    from apportion.simulate.cluster import VECTOR_TRACES, cluster_from_info
    from apportion.simulate.run import open_any
    from apportion.traces.mapping import generate, render_map, render_plan

    try:
        tr = open_any(trace, kind, skip_bad, sort)
        mapping, plan = generate(tr, by, prefix)
        if host_slots is not None or tr.info.kind in VECTOR_TRACES:  # Alibaba: hosts with resources
            plan.update(cluster_from_info(tr.info, host_slots))
    except _user_errors() as e:
        _say_problem(e)
        return
    note = f"apportion simulate map {trace.name} --by {by}: {len(mapping.rules)} consumers"
    text = render_map(mapping, note)
    if out_file is None:
        sys.stdout.write(text)
    else:
        out_file.write_text(text, encoding="utf-8")
        err.print(f"wrote {out_file} ({len(mapping.rules)} rules, default {mapping.default})")
    if plan_out is not None:
        plan_out.write_text(render_plan(plan, note), encoding="utf-8")
        err.print(f"wrote {plan_out} ({len(plan.get('hosts', []))} host lines, "
                  f"{len(plan.get('consumers', []))} consumers)")


def sweep_command(
    grid: Path = typer.Argument(..., help="The sweep: a plan, a trace, a mapping and the variants "
                                "(docs/simulate.md, \"Sweeps\")."),
    scheduler: str | None = typer.Option(None, "--scheduler", help="Run the variants on this Dask scheduler "
                                         "(tcp://HOST:PORT); needs apportion[dask]."),
    dask_local: int | None = typer.Option(None, "--dask-local", min=1, help="Run them on a local Dask "
                                          "cluster of N worker processes."),
    workers: int | None = typer.Option(None, "--workers", min=1, help="Local processes (default: CPUs)."),
    json_out: bool = typer.Option(False, "--json", help="Print every variant's figures as JSON."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write sweep.json, sweep.csv and the plots here."),
    trace: Path | None = typer.Option(None, "--trace", help="The trace to replay, instead of the GRID's "
                                      "trace: (e.g. \"$(apportion traces path nasa)\")."),
) -> None:
    """Plan variants over one trace, side by side (local processes, or Dask)."""
    from apportion.simulate.sweep import SweepError, load_grid, render_sweep, run_sweep, write_sweep

    if scheduler and dask_local:
        _fail("give --scheduler or --dask-local, not both")
    try:
        spec = load_grid(grid)
        if trace is not None:
            spec["trace"] = str(trace)
        result = run_sweep(spec, scheduler=scheduler, dask_local=dask_local, workers=workers)
    except SweepError as e:
        _fail(str(e))
        return
    except _user_errors() as e:
        _say_problem(e)
        return
    if out_dir is not None:
        files = write_sweep(out_dir, result)
        if not json_out:
            out.print(f"wrote {', '.join(f.name for f in files)} in {out_dir}")
    if json_out:
        print(json.dumps(result, indent=1))
    else:
        render_sweep(out, result)


def bench_simulate(
    cases: list[str] = typer.Argument(None, help="Cases to run: nasa, curie, synthetic, sweep (default: all)."),
    traces: Path | None = typer.Option(None, "--traces", help="The shared traces directory "
                                       "(default: ../shared/traces beside the repository)."),
    jobs: int = typer.Option(1_000_000, "--jobs", min=1, help="synthetic: jobs; curie: only the first N jobs."),
    consumers: int = typer.Option(1_000, "--consumers", min=1, help="synthetic: consumers."),
    hosts: int = typer.Option(10_000, "--hosts", min=1, help="synthetic: hosts of 8 slots."),
    variants: int = typer.Option(16, "--variants", min=1, help="sweep: variants."),
    workers: int = typer.Option(2, "--workers", min=1, help="sweep: local Dask workers."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Replays end to end, each in a fresh interpreter: NASA iPSC with three tenants, CEA Curie with
    one consumer per group, a synthetic million-job trace, a 16-variant sweep on Dask
    (docs/performance.md, "Simulation")."""
    from apportion.bench import simulate_bench as sb

    chosen = tuple(cases or sb.CASES)
    unknown = [c for c in chosen if c not in sb.CASES]
    if unknown:
        _fail(f"unknown case {unknown[0]!r}; known: {', '.join(sb.CASES)}")
    where = traces or sb.TRACES
    gone = sb.missing(where, chosen)
    if gone:
        _fail(f"{where} has no {', '.join(sorted(set(gone)))}: give --traces DIR")
    result = sb.bench(chosen, where, {"jobs": jobs, "consumers": consumers, "hosts": hosts, "variants": variants,
                                      "workers": workers})
    if json_out:
        print(json.dumps(result, indent=1))
        return
    m = result["machine"]
    out.print(f"[bold]machine[/]: {m['cpu']}, {m['logical_cpus']} logical CPUs, {m['ram_gib']} GiB RAM, "
              f"{m['python']}")
    t = Table(title="apportion bench simulate")
    for col in ("case", "jobs", "cycles", "wall", "CPU", "peak RSS", "cycle / event", "sim / wall", "target"):
        t.add_column(col, justify="left" if col in ("case", "target") else "right")
    for c in result["cases"]:
        if "error" in c:
            t.add_row(c["case"], "", "", "", "", "", "", "", f"[red]{c['error']}[/]")
            continue
        met = ", ".join(f"{k} <= {v['target']:g}: " + ("[green]met[/]" if v["met"] else "[red]not met[/]")
                        for k, v in c["targets"].items())
        if c["case"] == "sweep":
            t.add_row("sweep", f"{c['variants']} variants", "", f"{c['dask_s']:.1f} s (serial {c['serial_s']:.1f})",
                      f"{c['cpu_s']:.1f} s", f"{c['peak_rss_mib']:.0f} MiB", "", f"ratio {c['ratio']:.2f}", met)
            continue
        t.add_row(c["case"], f"{c['jobs']:,}", f"{c['cycles']:,}", f"{c['wall_s']:.2f} s", f"{c['cpu_s']:.2f} s",
                  f"{c['peak_rss_mib']:.0f} MiB",
                  "-" if c["cycle_per_event_us"] is None else f"{c['cycle_per_event_us']:.0f} us",
                  f"{c['simulated_per_wall']:,.0f}x", met)
    print_table(out, t)
