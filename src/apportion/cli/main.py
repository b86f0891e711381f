"""The `apportion` command."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from apportion.cli.agent import agent_command
from apportion.cli import ducc_live, live
from apportion.cli.bench import bench_app
from apportion.cli.extras import TidyGroup
from apportion.cli.importer import export_app, import_app
from apportion.cli.server import server_app

app = typer.Typer(
    help="apportion: share a pool of hosts among many tenants, the EGO and DUCC way.",
    cls=TidyGroup,  # help texts as plain prose
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from apportion import __version__

        print(f"apportion {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                       help="Print apportion's version and exit.")) -> None:
    """apportion: share a pool of hosts among many tenants, the EGO and DUCC way."""
app.add_typer(bench_app, name="bench")
__import__("apportion.cli.bench_ducc_live", fromlist=["register"]).register(bench_app)  # bench ducc-live
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")
app.add_typer(server_app, name="server")
app.add_typer(__import__("apportion.cli.traces", fromlist=["x"]).traces_app, name="traces")  # list|fetch|path
app.command(name="agent")(agent_command)
app.command(name="run")(__import__("apportion.cli.run", fromlist=["run"]).run)  # run a command on a share
from apportion.cli.simulate import simulate_app, sweep_command  # noqa: E402

app.add_typer(simulate_app, name="simulate")
app.command(name="sweep")(sweep_command)

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


def _load_input(file: Path, jobs: Path | None = None, prop: list[str] | None = None):
    from apportion.cli.importer import _pairs
    from apportion.plan import PlanError
    from apportion.scenario import ducc_cli

    try:
        return ducc_cli.load(file, jobs, _pairs(prop or [], "--property"))
    except PlanError as e:
        err.print(f"[bold red]{len(e.problems)} problem(s) in {file}:[/]")
        for p in e.problems:
            err.print(str(p), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def solve(
    file: Path = typer.Argument(..., help="A scenario: a plan plus a timeline (YAML or TOML); or a DUCC "
                                "scenario (a `ducc:` key) or DUCC configuration directory (docs/plan-format.md)."),
    json_out: bool = typer.Option(False, "--json", help="Print the snapshots as JSON (the stable contract)."),
    jobs: Path | None = typer.Option(None, "--jobs", help="With a DUCC directory: a jobs file (a DUCC scenario "
                                     "without ducc:; default DIR/jobs.yaml) or a DUCC workload directory (jobs.in/)."),
    prop: list[str] = typer.Option([], "--property", "-p", metavar="KEY=VALUE",
                                   help="With a DUCC directory: a ducc.rm.* property; repeatable."),
) -> None:
    """Run a scenario through the engine and print the settled state after each step."""
    import gc

    # one command that builds a large graph of objects and keeps it to the end: the
    # collector's young generation is made large, so it does not rescan that graph
    # every 700 allocations (a tenth of the time of a 10,000-host scenario)
    gc.set_threshold(200_000, 30, 30)
    from apportion.scenario import ducc_cli
    from apportion.scenario.ducc_model import DuccScenario
    from apportion.scenario.runner import SettleError, run

    scenario = _load_input(file, jobs, prop)
    if isinstance(scenario, DuccScenario):
        from apportion.scenario.ducc_runner import DuccRunError, run as run_ducc

        try:
            ducc_snaps = run_ducc(scenario)
        except DuccRunError as e:
            err.print(f"[bold red]{file}:[/] {e}. That is a bug in apportion: please report it with this "
                      "scenario.", soft_wrap=True)
            raise typer.Exit(3) from None
        _print_snapshots(ducc_snaps, json_out, ducc_cli.render)
        note = ducc_cli.horizon_note(scenario, ducc_snaps)
        if note:
            err.print(f"{file}: {note}", markup=False, highlight=False, soft_wrap=True)
        return
    if scenario.plan.ducc is not None:
        err.print(f"[bold red]{file}:[/] has a `ducc:` section beside EGO sections (resource_groups, consumers, "
                  "policy). `apportion solve` runs either a DUCC scenario or an EGO one: move the DUCC part "
                  "to a file of its own (docs/plan-format.md, \"DUCC scenarios\").", soft_wrap=True)
        raise typer.Exit(2)
    try:
        snaps = run(scenario)
    except SettleError as e:
        err.print(f"[bold red]{file}:[/] the engine did not reach a steady state ({e}). That is a bug in "
                  "apportion, not in the plan: please report it with this scenario.", soft_wrap=True)
        raise typer.Exit(3) from None
    from apportion.cli.render import render_snapshots

    _print_snapshots(snaps, json_out, render_snapshots)


def _print_snapshots(snaps: list, json_out: bool, render) -> None:
    """A scenario's snapshots, EGO or DUCC: the JSON contract, or rich tables."""
    if json_out:
        from apportion.scenario.json_text import dumps_indented

        print(dumps_indented({"snapshots": snaps}))
    else:
        render(out, snaps)


@app.command()
def validate(file: Path = typer.Argument(..., help="A plan or scenario file (YAML or TOML).")) -> None:
    """Check a plan or scenario without running it: every problem, with file:line: field: reason."""
    from apportion.scenario import ducc_cli
    from apportion.scenario.ducc_model import DuccScenario

    sc = _load_input(file)
    if isinstance(sc, DuccScenario):
        out.print(f"[green]ok[/]: {file}: {ducc_cli.summary(sc)}", soft_wrap=True)
        return
    ducc = sc.plan.ducc
    extra = (f", a DUCC configuration ({len(ducc.nodepools)} nodepools, {len(ducc.classes)} classes, "
             f"{len(ducc.users)} users)") if ducc is not None else ""
    out.print(f"[green]ok[/]: {file}: {len(sc.plan.hosts)} hosts, {len(sc.plan.groups)} resource groups, "
              f"{len(sc.plan.consumers)} consumers, {len(sc.steps)} timeline steps{extra}", soft_wrap=True)


plan_app = typer.Typer(help="Plans: what a change would do before it is applied.", no_args_is_help=True)
app.add_typer(plan_app, name="plan")
live.register(app, plan_app)  # plan show|validate|apply, consumer, rg, alloc, host, activity, events, token
ducc_live.register(app, live.host_app)  # job, reserve, service, occupancy, reconfigure, host vary-off|on


@plan_app.command("diff")
def plan_diff_cmd(
    old: Path = typer.Argument(..., help="The plan in force, as a scenario: its timeline is played to the end. "
                               "Alone: the new plan, run against the live master's state."),
    new: Path | None = typer.Argument(None, help="The new plan (its timeline, if any, is ignored)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    master: live.Master = None,
    token_file: live.TokenFile = None,
) -> None:
    """What putting NEW in force would do to the cluster OLD describes: reclaims with
    their deadlines, allocations removed, deserved shares before and after.
    With one file, what putting it in force on the live master would do right now."""
    if new is None:
        live.plan_diff_live(old, master, token_file, json_out)
        return
    from apportion.plan import PlanError, load_plan
    from apportion.scenario.diff import plan_diff

    scenario = _load(old)
    try:
        new_plan = load_plan(new)
    except PlanError as e:
        err.print(f"[bold red]{len(e.problems)} problem(s) in {new}:[/]")
        for p in e.problems:
            err.print(str(p), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    result = plan_diff(scenario, new_plan)
    if json_out:
        print(json.dumps(result, indent=1))
        return
    from rich.table import Table
    from apportion.cli.tables import print_table

    out.print(f"At t = {result['at']:g}s, putting {new} in force would:")
    if result["moves"]:
        t = Table(title="owners that change (- = pool)", title_justify="left")
        for col in ("group", "host", "slots", "from", "to"):
            t.add_column(col)
        for m in result["moves"]:
            t.add_row(m["group"], m["host"], str(m["slots"]), m["from"] or "-", m["to"] or "-")
        print_table(out, t)
    if result["reclaims"]:
        t = Table(title="reclaim (the holder keeps the slots until the deadline)", title_justify="left")
        for col in ("request", "host", "slots", "deadline", "for", "reason"):
            t.add_column(col)
        for r in result["reclaims"]:
            t.add_row(r["request"], r["host"], str(r["slots"]), f"{r['deadline']:g}s", r["for"], r["reason"])
        print_table(out, t)
    if result["removed"]:
        t = Table(title="remove at once (the new plan cannot hold them)", title_justify="left")
        for col in ("request", "host", "slots", "reason"):
            t.add_column(col)
        for r in result["removed"]:
            t.add_row(r["request"], r["host"], str(r["slots"]), r["reason"])
        print_table(out, t)
    if result["deserved"]:
        t = Table(title="deserved shares that change", title_justify="left")
        for col in ("consumer", "group", "before", "after"):
            t.add_column(col)
        for path, groups in result["deserved"].items():
            for g, v in groups.items():
                t.add_row(path, g, "-" if v["before"] is None else str(v["before"]), str(v["after"]))
        print_table(out, t)
    if not (result["moves"] or result["reclaims"] or result["removed"] or result["deserved"]):
        out.print("nothing: no owned host moves, no reclaim, no removal, no deserved share changes.")


def main() -> None:
    """The ``apportion`` entry point: a command whose optional part is not installed says which
    extra to install instead of printing a traceback."""
    from apportion.cli.extras import missing_extra

    try:
        app(prog_name="apportion")
    except ModuleNotFoundError as e:
        message = missing_extra(e)
        if message is None:
            raise
        from rich.markup import escape

        err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        raise SystemExit(4) from None
