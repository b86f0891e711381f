"""`apportion bench ...`: measured figures, not adjectives."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from apportion.cli.tables import print_table

bench_app = typer.Typer(help="Benchmarks whose figures go into docs/performance.md.", no_args_is_help=True)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:,.1f} ms"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:,.3f} s"


def _mib(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f} MiB"


def _machine_line(m: dict) -> str:
    return (f"{m['cpu']}, {m['logical_cpus']} logical CPUs ({m['physical_cores']} cores), "
            f"{m['ram_gib']} GiB RAM, {m['python']}, {m['platform']}")


def _revision(rev: dict) -> str:
    if not rev.get("commit"):
        return "revision unknown"
    return f"commit {rev['commit']}" + (" with local edits to engine/" if rev["engine_dirty"] else "")


def _met(t: dict) -> str:
    return "[green]met[/]" if t["met"] else "[red]not met[/]"


def _render(console: Console, machine: dict, r: dict) -> None:
    sp, wl, st = r["spec"], r["workload"], r["steady"]
    console.print(f"[bold]machine[/]: {_machine_line(machine)}")
    console.print(f"[bold]engine[/]: {_revision(r['revision'])}")
    console.print(
        f"[bold]workload[/]: {sp['hosts']:,} hosts x {sp['slots_per_host']} slots = {wl['capacity_slots']:,} slots "
        f"in {sp['groups']} groups; {wl['consumers']:,} consumers (depth {wl['depth']}), {sp['leaves']:,} leaves "
        f"({wl['owning_leaves']} owning, {wl['lending_leaves']} lending); {sp['requests']:,} requests asking "
        f"{wl['demand_slots']:,} slots; seed {sp['seed']}")
    t = Table(title="apportion bench engine")
    t.add_column("measure")
    t.add_column("value", justify="right")
    t.add_column("target", justify="right")
    t.add_column("")
    tg = r["targets"]
    t.add_row("generate workload", _s(r["generate_s"]), "", "")
    t.add_row("build engine + submit all", _s(r["build_submit_s"]), "", "")
    t.add_row("cold first cycle", _s(r["cold_s"]), _s(tg["cold_s"]["target"]), _met(tg["cold_s"]))
    t.add_row("  CPU time", _s(r["cold_cpu_s"]), "", "")
    c = r["cold"]
    t.add_row("  decisions", f"{c['grants']:,} grants, {c['reclaims']:,} reclaims", "", "")
    t.add_row("  allocated after / capacity", f"{c['held_slots']:,} / {c['capacity_slots']:,} "
              f"({c['utilisation']:.1%})", "", "")
    t.add_row("  hosts over capacity", str(c["hosts_over_capacity"]), "0",
              "[green]ok[/]" if c["hosts_over_capacity"] == 0 else "[red]BUG[/]")
    se = r["settle"]
    t.add_row("settle after the cold cycle", f"{se['cycles']} cycles, {_s(se['s'])}", "", "")
    t.add_row("  allocated when settled", f"{se['held']:,} / {c['capacity_slots']:,} "
              f"({se['held'] / max(1, c['capacity_slots']):.1%})", "", "")
    n = r["steady_cycles"]
    t.add_row(f"steady cycle, median of {n}", _ms(st["median_s"]), _ms(tg["steady_median_s"]["target"]),
              _met(tg["steady_median_s"]))
    t.add_row(f"steady cycle, p95 of {n}", _ms(st["p95_s"]), "", "")
    t.add_row("  CPU time, median", _ms(st["cpu_median_s"]), "", "")
    t.add_row("steady cycle, min / max", f"{_ms(st['min_s'])} / {_ms(st['max_s'])}", "", "")
    t.add_row("  changes per step (applied, median)",
              f"{st['changes'] // max(1, n):,} ({_ms(st['apply_median_s'])})", "", "")
    t.add_row("  decisions over all steps",
              f"{st['grants']:,} grants, {st['reclaims']:,} reclaims, {st['removals']:,} removals", "", "")
    t.add_row("peak RSS (process)", _mib(r["peak_rss_mib"]), _mib(tg["peak_rss_mib"]["target"]),
              _met(tg["peak_rss_mib"]))
    if r["tracemalloc_peak_mib"] is not None:
        t.add_row("tracemalloc peak (separate run)", _mib(r["tracemalloc_peak_mib"]), "", "")
    print_table(console, t)


def _render_curve(console: Console, machine: dict, points: list[dict], exps: dict) -> None:
    console.print(f"[bold]machine[/]: {_machine_line(machine)}")
    revs = {_revision(r["revision"]) for r in points}
    console.print(f"[bold]engine[/]: {', '.join(sorted(revs))}")
    t = Table(title="apportion bench engine --curve (each point in a fresh process)")
    for col in ("hosts", "leaves", "requests", "build+submit", "cold cycle", "cold growth",
                "steady median", "steady p95", "steady growth", "peak RSS"):
        t.add_column(col, justify="right")
    for i, r in enumerate(points):
        sp = r["spec"]
        ce, se = exps["cold"][i], exps["steady"][i]
        t.add_row(f"{sp['hosts']:,}", f"{sp['leaves']:,}", f"{sp['requests']:,}", _s(r["build_submit_s"]),
                  _s(r["cold_s"]), "-" if ce is None else f"n^{ce:.2f}",
                  _ms(r["steady"]["median_s"]), _ms(r["steady"]["p95_s"]),
                  "-" if se is None else f"n^{se:.2f}", _mib(r["peak_rss_mib"]))
    print_table(console, t)
    console.print("growth: the exponent k in time ~ n^k between a point and the one before it "
                  "(1.00 is linear; n log n over a 10x step is about 1.1).")


def _spec(make, **fields):
    """A benchmark's spec, its checks turned into a usage error naming the option."""
    try:
        return make(**fields)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


def _emit(machine: dict, result: dict, json_out: bool, render) -> None:
    """One benchmark's figures: JSON ({"machine", "result"}) or the human rendering."""
    if json_out:
        print(json.dumps({"machine": machine, "result": result}, indent=1))
    else:
        render(Console(), machine, result)


def _run_with_targets(name: str, run, spec, progress, json_out: bool, render, errc: Console) -> None:
    """Run a benchmark that checks targets: a RuntimeError of the run, or a target not met, exits 1."""
    from apportion.bench.machine import machine_info

    try:
        result = run(spec, progress)
    except RuntimeError as e:
        errc.print(f"apportion bench {name}: {e}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    _emit(machine_info(), result, json_out, render)
    if not all(t["met"] for t in result["targets"].values()):
        raise typer.Exit(1)


# the engine benchmark's workload, shared by `bench engine` and `bench solve`
_HOSTS = typer.Option(10_000, "--hosts", min=1, help="Hosts in the cluster.")
_SLOTS = typer.Option(16, "--slots-per-host", min=1, help="Slots on each host.")
_LEAVES = typer.Option(1_000, "--leaves", min=1, help="Leaf consumers, in a 4-level tree.")
_GROUPS = typer.Option(4, "--groups", min=1, help="Resource groups (stacked and balanced alternating).")
_SEED = typer.Option(1, "--seed", help="Seed of the workload generator.")
_JSON = typer.Option(False, "--json", help="Print the figures as JSON.")


@bench_app.command("engine")
def engine(
    hosts: int = _HOSTS,
    slots_per_host: int = _SLOTS,
    leaves: int = _LEAVES,
    requests: int = typer.Option(20_000, "--requests", min=0, help="Open requests (1-32 slots each)."),
    groups: int = _GROUPS,
    steady_cycles: int = typer.Option(20, "--steady-cycles", min=0, help="Steady cycles to time after the cold one."),
    change_fraction: float = typer.Option(0.01, "--change-fraction", min=0.0, max=1.0,
                                          help="Share of the open requests changed before each steady cycle."),
    seed: int = _SEED,
    json_out: bool = _JSON,
    curve: bool = typer.Option(False, "--curve",
                               help="Run at 1k / 10k / 100k hosts, requests and leaves scaled alike, "
                                    "each point in a fresh process."),
    trace_memory: bool = typer.Option(False, "--tracemalloc",
                                      help="Also measure the tracemalloc peak, in a separate untimed run (not with --curve)."),
    kinds: int = typer.Option(1, "--kinds", min=1, max=3,
                              help="1: plain slots; 3: hosts with cores, memory and GPUs, and requests with a "
                                   "resource vector per slot (Dominant Resource Fairness)."),
) -> None:
    """Time the engine: build, cold first cycle, steady cycles under churn, and peak memory."""
    from apportion.bench.engine_bench import curve as run_curve
    from apportion.bench.engine_bench import growth, run
    from apportion.bench.machine import machine_info
    from apportion.bench.workload import WorkloadSpec

    spec = _spec(WorkloadSpec, hosts=hosts, slots_per_host=slots_per_host, leaves=leaves, requests=requests,
                 groups=groups, seed=seed, kinds=kinds)
    machine = machine_info()
    console = Console()
    errc = Console(stderr=True)
    if curve:
        def progress(s):
            if not json_out:
                errc.print(f"[dim]running {s.hosts:,} hosts, {s.leaves:,} leaves, {s.requests:,} requests...[/]")

        points = run_curve(spec, steady_cycles, change_fraction, progress=progress)
        exps = {"cold": growth(points), "steady": growth(points, lambda r: r["steady"]["median_s"])}
        if json_out:
            print(json.dumps({"machine": machine, "curve": points, "growth": exps}, indent=1))
        else:
            _render_curve(console, machine, points, exps)
        return
    _emit(machine, run(spec, steady_cycles, change_fraction, trace_memory=trace_memory), json_out, _render)


@bench_app.command("ducc")
def ducc(
    machines: int = typer.Option(2_000, "--machines", min=1, help="Machines (32-256 GB each)."),
    classes: int = typer.Option(20, "--classes", min=1, help="Classes, over 3 priorities."),
    users: int = typer.Option(500, "--users", min=1, help="Users."),
    jobs: int = typer.Option(5_000, "--jobs", min=1, help="Jobs submitted at the start."),
    quantum: int = typer.Option(15, "--quantum", min=1, help="Share quantum, GB."),
    cycles: int | None = typer.Option(None, "--cycles", min=0,
                                      help="Cycles after the first one (default 20; 2 with --end-to-end)."),
    arrivals: int = typer.Option(25, "--arrivals", min=0, help="New jobs per cycle."),
    seed: int = typer.Option(1, "--seed", help="Seed of the workload generator."),
    end_to_end: bool = typer.Option(False, "--end-to-end",
                                    help="Time `apportion solve --json` on the scenario written to a file, "
                                         "instead of the engine's cycles."),
    runs: int = typer.Option(3, "--runs", min=1, help="With --end-to-end: runs of the command."),
    keep: Path | None = typer.Option(None, "--keep", help="With --end-to-end: keep the scenario file there."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Time one full DUCC scheduling cycle (caps, How Much, What Of, evictions, defragmentation),
    or with --end-to-end the whole `apportion solve --json` on a scenario file."""
    from apportion.bench.ducc_bench import DuccBenchSpec, render, run
    from apportion.bench.machine import machine_info

    if cycles is None:
        cycles = 2 if end_to_end else 20
    spec = _spec(DuccBenchSpec, machines=machines, classes=classes, users=users, jobs=jobs, quantum=quantum,
                 cycles=cycles, arrivals=arrivals, seed=seed)
    if end_to_end:
        from apportion.bench.solve_bench import render as render_solve
        from apportion.bench.solve_bench import run_ducc

        _emit(machine_info(), run_ducc(spec, runs, keep), json_out, render_solve)
        return
    _emit(machine_info(), run(spec), json_out, render)


@bench_app.command("solve")
def solve(
    hosts: int = _HOSTS,
    slots_per_host: int = _SLOTS,
    leaves: int = _LEAVES,
    requests: int = typer.Option(20_000, "--requests", min=0, help="Requests at t = 0 (1-32 slots each)."),
    groups: int = _GROUPS,
    change_fraction: float = typer.Option(0.01, "--change-fraction", min=0.0, max=1.0,
                                          help="Share of the requests the second step changes."),
    seed: int = _SEED,
    runs: int = typer.Option(3, "--runs", min=1, help="Runs of the command."),
    keep: Path | None = typer.Option(None, "--keep", help="Keep the scenario file there."),
    json_out: bool = _JSON,
) -> None:
    """Time `apportion solve --json` end to end on a scenario file: the engine benchmark's
    cluster and requests, then one step changing 1% of them; beside it, json.loads + dumps of the file."""
    from apportion.bench.machine import machine_info
    from apportion.bench.solve_bench import render, run_ego
    from apportion.bench.workload import WorkloadSpec

    spec = _spec(WorkloadSpec, hosts=hosts, slots_per_host=slots_per_host, leaves=leaves, requests=requests,
                 groups=groups, seed=seed)
    _emit(machine_info(), run_ego(spec, change_fraction, runs, keep), json_out, render)


def _resources_option(text: str | None) -> dict | None:
    from apportion.client import parse_resources

    try:
        return parse_resources(text) if text is not None else None
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--resources") from None


@bench_app.command("service")
def service(
    db: str = typer.Option("sqlite", "--db", help="sqlite, or postgres (a fresh database on 127.0.0.1:5432, "
                           "dropped afterwards)."),
    seconds: float = typer.Option(60.0, "--seconds", min=0.5, help="The timed window."),
    agents: int = typer.Option(100, "--agents", min=1, help="Light agents (register and heartbeat, no processes)."),
    slots: int = typer.Option(4, "--slots-per-agent", min=1, help="Slots each agent offers."),
    clients: int = typer.Option(200, "--clients", min=1, help="Clients, each looping create, granted, delete."),
    load_procs: int = typer.Option(4, "--load-processes", min=1, help="Processes the clients run in."),
    consumers: int = typer.Option(4, "--consumers", min=1, help="Leaf consumers sharing the select() group."),
    rate: float | None = typer.Option(None, "--rate", min=0.1, help="Allocations per second over all clients "
                                      "(default: as fast as they go)."),
    events: str = typer.Option("sse", "--events", help="How clients hear of grants: sse (Server-Sent Events, "
                               "as the SDK) or poll (long poll)."),
    kill: int = typer.Option(0, "--kill", min=0, help="SIGKILL the master this many times under load "
                             "and restart it."),
    failover: bool = typer.Option(False, "--failover", help="Two masters on PostgreSQL; SIGKILL the leader and "
                                  "time until the standby serves."),
    scale: bool = typer.Option(False, "--scale", help="Instead: restart time and memory at 10,000 hosts, "
                               "1,000 consumers and 20,000 allocations."),
    seed: int = typer.Option(1, "--seed", help="Seed of the kill moments."),
    keep: bool = typer.Option(False, "--keep", help="Keep the work directory (logs, SQLite file)."),
    resources: str | None = typer.Option(None, "--resources", help="What each slot of every allocation needs, "
                                         "e.g. cores=1,memory=2 (multi-resource requests; default plain slots)."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """The live service end to end: a real master, light agents and client processes on loopback."""
    from apportion.bench.machine import machine_info
    from apportion.bench.service_bench import ScaleSpec, ServiceBenchSpec, render, render_scale, run, run_scale

    errc = Console(stderr=True)

    def progress(msg: str) -> None:
        if not json_out:
            errc.print(f"[dim]{msg}[/]", highlight=False)

    db = "postgres" if db in ("postgres", "postgresql", "pg") else db
    if scale:
        sspec = _spec(ScaleSpec, db=db, seed=seed, keep=keep)
        _emit(machine_info(), run_scale(sspec, progress), json_out, render_scale)
        return
    spec = _spec(ServiceBenchSpec, db=db, seconds=seconds, agents=agents, slots_per_agent=slots, clients=clients,
                 load_processes=load_procs, consumers=consumers, rate=rate, events=events, kill=kill,
                 failover=failover, seed=seed, keep=keep, resources=_resources_option(resources))
    result = run(spec, progress)
    _emit(machine_info(), result, json_out, render)
    if not result["check"]["ok"]:
        raise typer.Exit(1)


@bench_app.command("plan-change")
def plan_change(
    hosts: int = typer.Option(10_000, "--hosts", min=1, help="Hosts, every one owned."),
    slots: int = typer.Option(16, "--slots-per-host", min=1, help="Slots on each host."),
    parents: int = typer.Option(20, "--parents", min=1, help="Top-level consumers owning hosts."),
    leaves: int = typer.Option(1_000, "--leaves", min=1, help="Leaves owning hosts, under the parents."),
    change_fraction: float = typer.Option(0.10, "--change-fraction", min=0.0, max=1.0,
                                          help="Share of the leaves whose ownership the change alters."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Time a plan change under running work (diff + apply) and count the reclaims it forces."""
    from apportion.bench.machine import machine_info
    from apportion.bench.plan_change_bench import PlanChangeSpec, run

    spec = _spec(PlanChangeSpec, hosts=hosts, slots=slots, parents=parents, leaves=leaves,
                 change_fraction=change_fraction)
    _emit(machine_info(), run(spec), json_out, _render_plan_change)


def _render_plan_change(console: Console, machine: dict, r: dict) -> None:
    cl, ch = r["cluster"], r["change"]
    console.print(f"[bold]machine[/]: {_machine_line(machine)}")
    console.print(f"[bold]engine[/]: {_revision(r['revision'])}")
    console.print(f"[bold]cluster[/]: {cl['hosts']:,} hosts, {cl['slots']:,} slots, all owned; {cl['consumers']:,} "
                  f"consumers ({cl['owning_leaves']:,} leaves owning hosts); {cl['allocations']:,} allocations "
                  f"({cl['allocations_on_own_hosts']:,} on their owner's hosts)")
    console.print(f"[bold]change[/]: {ch['leaves_altered']} ownerships altered ({ch['shrinkers']} leaves a host "
                  f"less, {ch['growers']} a host more)")
    t = Table(title="apportion bench plan-change")
    t.add_column("measure")
    t.add_column("value", justify="right")
    t.add_column("target", justify="right")
    t.add_column("")
    t.add_row("diff (new ownership + moves)", _s(r["diff_s"]), "", "")
    t.add_row("apply (Engine.apply_plan)", _s(r["apply_s"]), "", "")
    t.add_row("diff + apply", _s(r["diff_and_apply_s"]), _s(r["target_s"]),
              "[green]met[/]" if r["met"] else "[red]not met[/]")
    t.add_row("hosts that change owner", f"{r['moved_hosts']:,}", "", "")
    t.add_row("allocations reclaimed", f"{r['reclaims']:,} ({r['reclaimed_slots']:,} slots)",
              f"{r['minimum_reclaims']:,}",
              "[green]= minimum[/]" if r["reclaims"] == r["minimum_reclaims"] else "[red]above minimum[/]")
    t.add_row("  of them on a moved host", f"{r['reclaims_on_moved_hosts']:,}", "", "")
    t.add_row("removed at once", f"{r['removed']:,}", "0", "")
    t.add_row("settle after the change", f"{r['settle_after_cycles']} cycles, {_s(r['settle_after_s'])}", "", "")
    print_table(console, t)


@bench_app.command("dask")
def dask(
    agents: int = typer.Option(8, "--agents", min=1, help="Agents (real processes, each its own)."),
    slots: int = typer.Option(4, "--slots-per-agent", min=1, help="Slots each agent offers."),
    workers: int = typer.Option(32, "--workers", min=1, help="adapt(maximum=...): the workers to reach."),
    reclaim: int = typer.Option(16, "--reclaim", min=1, help="Slots the rival consumer (larger share) asks for."),
    grace: float = typer.Option(10.0, "--grace", min=0.1, help="/dask's grace period, seconds."),
    tasks: int = typer.Option(1280, "--tasks", min=1, help="Tasks in the workload."),
    task_seconds: float = typer.Option(0.25, "--task-seconds", min=0.0, help="Seconds each task sleeps."),
    keep: bool = typer.Option(False, "--keep", help="Keep the work directory (logs, SQLite file)."),
    worker_start: bool = typer.Option(False, "--worker-start", help="Instead: what starting a worker costs; "
                                      "--workers workers of each kind (dask worker with and without a nanny, "
                                      "apportion.dask.worker) at once against a local scheduler, no master."),
    json_out: bool = _JSON,
) -> None:
    """Dask on the live service: adapt() from 0 to N workers under a workload, then a reclaim of
    half of them by a consumer with a larger share; time to scale up, time to complete the reclaim,
    workers stopped by force."""
    import importlib

    from apportion.bench.dask_bench import DaskBenchSpec, render, render_worker_starts, run, worker_starts
    from apportion.bench.machine import machine_info

    try:
        importlib.import_module("distributed")
    except ImportError as e:
        Console(stderr=True).print(f"apportion bench dask needs Dask: pip install 'apportion[dask]' ({e})",
                                   markup=False, highlight=False)
        raise typer.Exit(2) from None
    errc = Console(stderr=True)

    def progress(msg: str) -> None:
        if not json_out:
            errc.print(f"[dim]{msg}[/]", highlight=False)

    if worker_start:
        _emit(machine_info(), worker_starts(workers, progress=progress), json_out, render_worker_starts)
        return
    spec = _spec(DaskBenchSpec, agents=agents, slots_per_agent=slots, workers=workers, reclaim=reclaim,
                 grace=grace, tasks=tasks, task_seconds=task_seconds, keep=keep)
    result = run(spec, progress)
    _emit(machine_info(), result, json_out, render)
    if not result["ok"]:
        raise typer.Exit(1)


@bench_app.command("console")
def console_bench(
    hosts: int = typer.Option(10_000, "--hosts", min=1, help="Hosts, written to the store as reported."),
    consumers: int = typer.Option(1_000, "--consumers", min=1, help="Leaf consumers (under 20 parents)."),
    allocations: int = typer.Option(20_000, "--allocations", min=0, help="Allocations of 1 slot, by the API."),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Navigations per page, and updates per kind."),
    chromium: str = typer.Option("/usr/bin/chromium", "--chromium", help="The browser (Debian's chromium)."),
    keep: bool = typer.Option(False, "--keep", help="Keep the work directory (logs, SQLite file)."),
    json_out: bool = _JSON,
) -> None:
    """The console in Chromium at the service's scale: Overview, Consumers and Hosts interactive after a
    navigation, the bytes each moves, and a committed change to the open page showing it."""
    from apportion.bench.console_bench import ConsoleBenchSpec, render, run

    errc = Console(stderr=True)

    def progress(msg: str) -> None:
        if not json_out:
            errc.print(f"[dim]{msg}[/]", highlight=False)

    spec = _spec(ConsoleBenchSpec, hosts=hosts, consumers=consumers, allocations=allocations, repeat=repeat,
                 chromium=chromium, keep=keep)
    _run_with_targets("console", run, spec, progress, json_out, render, errc)


@bench_app.command("activities")
def activities(
    count: int = typer.Option(500, "--activities", min=1, help="Activities started through the API, for each "
                              "containment level."),
    agents: int = typer.Option(10, "--agents", min=1, help="Agents (real processes, each its own)."),
    tree: int = typer.Option(100, "--tree", min=2, help="Processes in the tree the stop figure kills."),
    daemons: int = typer.Option(20, "--daemons", min=0, help="Of them, setsid double-forked daemons."),
    stop_repeat: int = typer.Option(5, "--stop-repeat", min=1, help="Trees killed for each level."),
    busy: int = typer.Option(200, "--busy", min=1, help="Activities running on the agent whose CPU is measured."),
    window: float = typer.Option(30.0, "--window", min=0.1, help="Seconds the agent's CPU is measured over."),
    containment: str = typer.Option("auto", "--containment", help="The level 'containment on' means (auto: the "
                                    "agent's best); 'off' is always process-group."),
    keep: bool = typer.Option(False, "--keep", help="Keep the work directory (logs, SQLite file)."),
    json_out: bool = _JSON,
) -> None:
    """Activities under containment: start latency (API call to running reported) with containment on
    and off, a tree of processes with setsid daemons from SIGKILL to gone (and the slots granted after),
    and the CPU of an agent running many activities."""
    from apportion.bench.activities_bench import ActivitiesBenchSpec, render, run

    errc = Console(stderr=True)

    def progress(msg: str) -> None:  # on stderr, with --json too: the run takes minutes
        errc.print(f"[dim]{msg}[/]", highlight=False)

    spec = _spec(ActivitiesBenchSpec, activities=count, agents=agents, tree=tree, daemons=daemons,
                 stop_repeat=stop_repeat, busy=busy, window=window, containment=containment, keep=keep)
    _run_with_targets("activities", run, spec, progress, json_out, render, errc)


@bench_app.command("soak")
def soak(
    minutes: float = typer.Option(10.0, "--minutes", min=0.1, help="How long the load and the faults last."),
    db: str = typer.Option("sqlite", "--db", help="sqlite, or postgres (a fresh database on 127.0.0.1:5432, "
                           "made from db test and dropped after)."),
    agents: int = typer.Option(20, "--agents", min=4, help="Agents: four run real processes, the rest are light."),
    seed: int = typer.Option(18, "--seed", help="The random faults' and workload's seed."),
    workdir: Path | None = typer.Option(None, "--workdir", help="Keep the logs and the SQLite file here "
                                        "(default: a temporary directory, removed after)."),
    partitions: bool = typer.Option(False, "--partitions", help="Run the agents in network namespaces of their "
                                    "own, joined to the master's by veth pairs, and cut and heal their links at "
                                    "random (needs root and iproute2's ip; everything made is removed after)."),
    host_lost_after: float = typer.Option(6.0, "--host-lost-after", min=1.0, help="Passed to the master, where "
                                          "it takes this option: seconds a host may stay unreachable before what "
                                          "ran there is lost."),
    json_out: bool = _JSON,
) -> None:
    """A real master under mixed work, SIGKILLs of master, agents and processes, network partitions
    (--partitions) and hostile requests; then every invariant checked from the store, the agents'
    own lists of live processes and what clients saw (exit 1 on a violation). docs/performance.md,
    "Hardening: the soak"."""
    from apportion.bench.machine import machine_info
    from apportion.bench.soak import render, run_soak

    if db not in ("sqlite", "postgres"):
        raise typer.BadParameter("sqlite or postgres", param_hint="--db")
    if partitions:
        from apportion.bench.netns import unavailable

        why = unavailable()
        if why:
            typer.echo(f"Error: {why}", err=True)
            raise typer.Exit(2)
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        result = run_soak(minutes, db=db, agents=agents, seed=seed, workdir=workdir, partitions=partitions,
                          host_lost_after=host_lost_after)
    except KeyboardInterrupt:
        typer.echo("interrupted: what the soak started is stopped, and what it made is removed", err=True)
        raise typer.Exit(130) from None
    _emit(machine_info(), result, json_out, render)
    if result["violations"]:
        raise typer.Exit(1)


from apportion.cli.simulate import bench_simulate  # noqa: E402  (apportion bench simulate)

bench_app.command("simulate")(bench_simulate)
