"""`apportion bench ducc-live`: DUCC's mega-15-min on the live master, real agents and processes."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console


def register(bench_app: typer.Typer) -> None:
    """Add ``ducc-live`` to ``apportion bench``."""
    bench_app.command("ducc-live")(ducc_live)


def ducc_live(
    traces: Path | None = typer.Option(None, "--traces", help="The DUCC traces directory (ducc.classes, "
                                       "52.simulated.nodes, mega-*); default ../shared/traces/ducc beside "
                                       "the repository."),
    workload: str = typer.Option("mega-15-min", "--workload", help="The workload directory under --traces."),
    scale: float = typer.Option(100.0, "--scale", min=0.001, help="Submission and item times are divided by "
                                "this, after jobs.prepare's own compression."),
    jobs: int | None = typer.Option(None, "--jobs", min=1, help="Only the first N jobs in submission order "
                                    "(default: all)."),
    max_items: int | None = typer.Option(None, "--max-items", min=1, help="Only each job's first N work items "
                                         "(default: all)."),
    machines: int | None = typer.Option(None, "--machines", min=1, help="N machines, the memory sizes in the "
                                        "simulated cluster's proportions (default: the whole cluster)."),
    heartbeat: float = typer.Option(1.0, "--heartbeat", min=0.05, help="The agents' heartbeat, seconds "
                                    "(the master's --heartbeat)."),
    tick: float = typer.Option(1.0, "--tick", min=0.01, help="The master's --tick, seconds."),
    timeout: float = typer.Option(900.0, "--timeout", min=1.0, help="Seconds for every job to end, from the "
                                  "first submission."),
    keep: bool = typer.Option(False, "--keep", help="Keep the work directory (logs, SQLite store)."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """DUCC's mega-15-min end to end on the live master, real agents and real processes.

    A real master on a DUCC plan, agents with the simulated cluster's memory sizes, the
    jobs submitted by the SDK at their times and worked through by real processes; then
    the store is checked (every job done, every item done once, no machine above its
    order at any cycle) and the master's cycle times reported."""
    from apportion.bench.ducc_live_bench import DuccLiveSpec, render, run
    from apportion.bench.machine import machine_info

    try:
        spec = DuccLiveSpec(traces=str(traces) if traces is not None else "", workload=workload, scale=scale,
                            jobs=jobs, max_items=max_items, machines=machines, heartbeat=heartbeat, tick=tick,
                            timeout=timeout, keep=keep)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    for need in ("ducc.classes", "52.simulated.nodes", workload):
        if not (spec.traces_dir / need).exists():
            raise typer.BadParameter(f"{spec.traces_dir / need} is absent: give the DUCC traces with --traces",
                                     param_hint="--traces")
    errc = Console(stderr=True)

    def progress(msg: str) -> None:
        if not json_out:
            errc.print(f"[dim]{msg}[/]", highlight=False)

    result = run(spec, progress)
    machine = machine_info()
    if json_out:
        print(json.dumps({"machine": machine, "result": result}, indent=1))
    else:
        render(Console(), machine, result)
    if not result["ok"]:
        raise typer.Exit(1)
