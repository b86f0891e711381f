"""The `apportion` command."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from apportion.cli.bench import bench_app
from apportion.cli.importer import import_app

app = typer.Typer(
    help="apportion: share a pool of hosts among many tenants, the EGO and DUCC way.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(bench_app, name="bench")
app.add_typer(import_app, name="import")

out = Console()
err = Console(stderr=True)


def _load(file: Path):
    from apportion.plan import PlanError, load_scenario

    try:
        return load_scenario(file)
    except PlanError as e:
        err.print(f"[bold red]{len(e.problems)} problem(s) in {file}:[/]")
        for p in e.problems:
            err.print(str(p), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def solve(
    file: Path = typer.Argument(..., help="A scenario: a plan plus a timeline (YAML or TOML)."),
    json_out: bool = typer.Option(False, "--json", help="Print the snapshots as JSON (the stable contract)."),
) -> None:
    """Run a scenario through the engine and print the settled state after each step."""
    from apportion.scenario.runner import SettleError, run

    scenario = _load(file)
    if scenario.plan.ducc is not None:
        err.print(f"[bold red]{file}:[/] has a `ducc:` section. It is valid, but DUCC fair-share "
                  "scheduling (quanta, nodepools, classes) is not in the engine yet, so it cannot "
                  "be solved; `apportion validate` checks it.", soft_wrap=True)
        raise typer.Exit(2)
    try:
        snaps = run(scenario)
    except SettleError as e:
        err.print(f"[bold red]{file}:[/] the engine did not reach a steady state ({e}). That is a bug in "
                  "apportion, not in the plan: please report it with this scenario.", soft_wrap=True)
        raise typer.Exit(3) from None
    if json_out:
        print(json.dumps({"snapshots": snaps}, indent=1))
    else:
        from apportion.cli.render import render_snapshots

        render_snapshots(out, snaps)


@app.command()
def validate(file: Path = typer.Argument(..., help="A plan or scenario file (YAML or TOML).")) -> None:
    """Check a plan or scenario without running it: every problem, with file:line: field: reason."""
    sc = _load(file)
    ducc = sc.plan.ducc
    extra = (f", a DUCC configuration ({len(ducc.nodepools)} nodepools, {len(ducc.classes)} classes, "
             f"{len(ducc.users)} users)") if ducc is not None else ""
    out.print(f"[green]ok[/]: {file}: {len(sc.plan.hosts)} hosts, {len(sc.plan.groups)} resource groups, "
              f"{len(sc.plan.consumers)} consumers, {len(sc.steps)} timeline steps{extra}", soft_wrap=True)


def main() -> None:  # pragma: no cover
    app()
