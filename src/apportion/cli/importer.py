"""`apportion import ...`: other systems' configuration turned into apportion plan files;
`apportion export ...`: a plan written back in another system's files.

Registered in ``apportion.cli.main`` as ``app.add_typer(import_app, name="import")`` and
``app.add_typer(export_app, name="export")``.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

import_app = typer.Typer(help="Turn another system's configuration into an apportion plan file.",
                         no_args_is_help=True)


@import_app.callback()
def _group() -> None:
    """Turn another system's configuration into an apportion plan file."""


def _pairs(values: list[str], option: str) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        name, eq, rest = value.partition("=")
        if not eq or not name.strip() or not rest.strip():
            raise typer.BadParameter(f"{value!r}: write NAME=VALUE", param_hint=option)
        pairs.append((name.strip(), rest.strip()))
    return pairs


def _emit(err: Console, text: str, out: Path | None) -> bool:
    """Print ``text``, or write it to ``out`` (True: written); a file that cannot be written exits 2."""
    if out is None:
        print(text, end="")
        return False
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        err.print(f"[bold red]cannot write {out}:[/] {exc.strerror or exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    return True


@import_app.command("ducc")
def ducc(
    directory: Path = typer.Argument(..., metavar="DIR", help="A DUCC resources directory: ducc.classes, node files, "
                                     "ducc.users, ducc.properties (each optional)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the plan here (YAML); "
                                    "default: print it."),
    memory: list[str] = typer.Option([], "--memory", "-m", metavar="HOSTS=GB",
                                     help="Memory of a host, or of every host a range pattern names "
                                     "(h[01-16]=64); repeatable; wins over simulated-cluster files."),
    prop: list[str] = typer.Option([], "--property", "-p", metavar="KEY=VALUE",
                                   help="A ducc.rm.* property (DUCC's own key), over ducc.properties; "
                                   "repeatable. E.g. ducc.rm.share.quantum=15."),
) -> None:
    """Import a DUCC configuration as a plan: hosts with memory, and a `ducc:` section (docs/ducc-import.md)."""
    from apportion.importers.ducc import load_ducc
    from apportion.importers.ducc.to_plan import dump_plan_yaml
    from apportion.importers.ducc.values import BadValue, read_memory
    from apportion.plan import PlanError
    from apportion.plan.hostnames import expand_hosts

    err = Console(stderr=True)
    sizes: dict[str, int | float] = {}
    for pattern, text in _pairs(memory, "--memory"):
        try:
            names = expand_hosts(pattern)
            gb = read_memory(text)
        except (ValueError, BadValue) as exc:
            raise typer.BadParameter(str(exc), param_hint="--memory") from None
        for name in names:
            sizes[name] = gb
    overrides = dict(_pairs(prop, "--property"))
    try:
        cfg = load_ducc(directory, properties=overrides, memory=sizes, properties_source="--property",
                        memory_source="--memory")
    except PlanError as e:
        err.print(f"[bold red]{len(e.problems)} problem(s) in the DUCC configuration in {directory}:[/]",
                  highlight=False, soft_wrap=True)
        for p in e.problems:
            err.print(str(p), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None

    header = [f"apportion plan imported from the DUCC configuration in {directory}",
              "by `apportion import ducc`; the ducc: section is described in docs/ducc-import.md"]
    text = dump_plan_yaml(cfg, header)
    unknown = [name for name, mem in cfg.hosts.items() if mem is None]
    if _emit(err, text, out):
        classes = sum(1 for c in cfg.classes.values() if not c.abstract)
        err.print(f"[green]wrote[/] {out}: {len(cfg.hosts)} hosts, {len(cfg.nodepools)} nodepools, "
                  f"{classes} classes, {len(cfg.users)} users", highlight=False, soft_wrap=True)
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        err.print(f"[yellow]note[/]: no memory size for {len(unknown)} host(s) ({shown}); give it with "
                  "--memory HOSTS=GB", highlight=False, soft_wrap=True)


def _print_problems(err: Console, title: str, problems: list) -> None:  # noqa: ANN001 - Problem list
    err.print(f"[bold red]{len(problems)} problem(s) {title}:[/]", highlight=False, soft_wrap=True)
    for p in problems:
        err.print(str(p), markup=False, highlight=False, soft_wrap=True)


def _print_notes(err: Console, notes: list) -> None:  # noqa: ANN001 - Problem list
    for n in notes:
        err.print(f"[yellow]note[/]: {escape(str(n))}", highlight=False, soft_wrap=True)


@import_app.command("ego")
def ego(
    paths: list[Path] = typer.Argument(..., metavar="DIR|FILE", help="A directory holding ConsumerTrees.xml, "
                                       "ResourceGroups.xml and (optional) MDPlan.xml and hosts.yaml, or those "
                                       "files."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the plan here (YAML); default: print it."),
    hosts: Path | None = typer.Option(None, "--hosts", metavar="FILE", help="The cluster's hosts, as a plan "
                                      "file's `hosts:` (EGO keeps them outside its XML files); default: "
                                      "hosts.yaml beside the XML files."),
) -> None:
    """Import an EGO cluster's plan (docs/ego-import.md): consumers, resource groups, ownership, sharing,
    lending and borrowing, grace periods and execution users. What is not carried is said, with why."""
    import yaml

    from apportion.importers.ego import import_ego
    from apportion.plan import PlanError

    err = Console(stderr=True)
    try:
        result = import_ego(paths, hosts)
    except PlanError as e:
        _print_problems(err, "in the EGO files", e.problems)
        raise typer.Exit(2) from None
    header = ["apportion plan imported from IBM EGO's files by `apportion import ego`",
              *(f"  {p}" for p in result.files.values()),
              "the mapping is in docs/ego-import.md"]
    if result.notes:
        header.append("not carried, or carried with a change:")
        header.extend(f"  {n}" for n in result.notes)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's, where PyYAML has it: 10x faster
    text = "".join(f"# {line}\n" for line in header) + "\n" + yaml.dump(
        result.plan, Dumper=dumper, sort_keys=False, allow_unicode=True, width=110)
    if _emit(err, text, out):
        plan = result.plan
        err.print(f"[green]wrote[/] {out}: {len(plan.get('hosts', []))} hosts, {len(plan['resource_groups'])} "
                  f"resource groups, {len(plan['consumers'])} consumers", highlight=False, soft_wrap=True)
    _print_notes(err, result.notes)


export_app = typer.Typer(help="Write an apportion plan in another system's files.", no_args_is_help=True)


@export_app.callback()
def _export_group() -> None:
    """Write an apportion plan in another system's files."""


@export_app.command("ego")
def export_ego_command(
    plan: Path = typer.Argument(..., metavar="PLAN", help="The plan file (YAML, JSON or TOML)."),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="The directory to write ConsumerTrees.xml, "
                             "ResourceGroups.xml, MDPlan.xml and hosts.yaml into (made if missing)."),
) -> None:
    """Write a plan as EGO's ConsumerTrees.xml, ResourceGroups.xml and MDPlan.xml (docs/ego-import.md);
    `apportion import ego DIR` reads them back to the same plan. What they cannot hold is said."""
    from apportion.importers.ego import export_ego, write_files
    from apportion.plan import PlanError

    err = Console(stderr=True)
    try:
        result = export_ego(plan)
    except PlanError as e:
        _print_problems(err, f"in {plan}", e.problems)
        raise typer.Exit(2) from None
    except OSError as exc:
        err.print(f"[bold red]cannot read {plan}:[/] {exc.strerror or exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    try:
        written = write_files(result, out)
    except OSError as exc:
        err.print(f"[bold red]cannot write into {out}:[/] {exc.strerror or exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    err.print(f"[green]wrote[/] {', '.join(str(p) for p in written)}", highlight=False, soft_wrap=True)
    _print_notes(err, result.notes)


if __name__ == "__main__":  # pragma: no cover
    import_app()
