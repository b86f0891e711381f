"""What ``apportion solve`` and ``apportion validate`` do with DUCC input.

Two forms (docs/plan-format.md, "DUCC scenarios"):

- a scenario file with a top-level ``ducc:`` key;
- a DUCC configuration directory (``ducc.classes``, node files, ``ducc.users``,
  ``ducc.properties``), with ``--jobs FILE`` (a DUCC scenario without ``ducc:``;
  default ``DIR/jobs.yaml``) or ``--jobs WORKLOAD_DIR`` (a DUCC system-test
  workload, replayed), and ``--property KEY=VALUE`` overrides.

The rich tables here are for people; ``--json`` prints the snapshots as they are
(``apportion.scenario.ducc_runner``), which is the contract.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from apportion.cli.tables import print_table

from apportion.scenario.ducc_model import DuccScenario
from apportion.scenario.model import Scenario


def load(path: Path, jobs: Path | None = None,
         properties: list[tuple[str, str]] | None = None) -> DuccScenario | Scenario:
    """What ``path`` stands for, the file read once: a DUCC scenario for a directory (a DUCC
    configuration) or a file with a ``ducc:`` key and no EGO sections, else an EGO scenario.
    ``PlanError`` lists every problem."""
    from apportion.plan.compile import scenario_of
    from apportion.plan.ducc_scenario import ducc_scenario_from_directory, ducc_scenario_of, is_ducc_scenario
    from apportion.plan.errors import PlanError, Problem
    from apportion.plan.positions import load_document

    if path.is_dir():
        return ducc_scenario_from_directory(path, jobs, dict(properties or []))
    doc = load_document(path)
    if not is_ducc_scenario(doc.data):
        return scenario_of(doc)
    if jobs is not None or properties:
        raise PlanError([Problem(str(path), None, "--jobs/--property",
                                 "only with a DUCC configuration directory; a scenario file names its own "
                                 "files and properties in ducc:")])
    return ducc_scenario_of(doc)


def summary(sc: DuccScenario) -> str:
    cfg = sc.config
    jobs = sum(len(s.jobs) for s in sc.steps)
    reservations = sum(1 for s in sc.steps for j in s.jobs if j.reserve)
    classes = sum(1 for c in cfg.classes.values() if not c.abstract)
    if sc.cycle is None:
        clock = "no clock (each step settled)"
    elif sc.until is not None:
        clock = f"a cycle every {sc.cycle:g}s until {sc.until:g}s"
    else:
        clock = f"a cycle every {sc.cycle:g}s until no work is left" + (
            f" or the horizon, {sc.horizon:g}s" if sc.horizon is not None else "")
    return (f"a DUCC scenario: {len(cfg.hosts)} hosts, {len(cfg.nodepools)} nodepools, {classes} classes, "
            f"{jobs - reservations} jobs, {reservations} reservations, {len(sc.steps)} steps, {clock}")


def horizon_note(sc: DuccScenario, snaps: list[dict[str, Any]]) -> str | None:
    """The one line a run that stopped at its horizon prints on stderr; None for any other end."""
    if not snaps or snaps[-1].get("ended") != "horizon":
        return None
    left = sum(1 for j in snaps[-1]["jobs"].values() if j.get("done_items", 0) < j.get("work_items", 0))
    return (f"the run stopped at its horizon, t = {sc.horizon:g}s of simulated time, with {left} job(s) "
            "still at work; that is not an "
            "error. Set `until: SECONDS` to stop the clock earlier, or `horizon: SECONDS` to run longer.")


def _t(x: float) -> str:
    return f"{x:g}s"


def _grouped(items: list[dict[str, Any]]) -> str:
    counts: dict[tuple[str, str, str], int] = {}
    for e in items:
        key = (e["job"], e["machine"], e["reason"])
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{job}@{m}" + (f" x{n}" if n > 1 else "") + f" ({why})" for (job, m, why), n in counts.items())


def render(console: Console, snaps: list[dict[str, Any]], machines_limit: int = 16) -> None:
    if not snaps:
        console.print("no timeline: nothing is submitted, so nothing is scheduled (add a timeline with jobs, "
                      "or a replay)", highlight=False)
    for snap in snaps:
        title = f"cycle {snap['cycle']}  ·  t = {_t(snap['at'])}"
        if snap.get("steps"):
            plain = [x for x in snap["steps"] if not x.startswith("replay ")]
            replayed = [x.removeprefix("replay ") for x in snap["steps"] if x.startswith("replay ")]
            title += "  ·  " + ", ".join(plain + (["replay " + ", ".join(replayed)] if replayed else []))
        if snap.get("end"):
            title += "  ·  end" + {"done": ": all work done", "until": ": `until` reached",
                                   "stalled": ": what is left cannot be placed",
                                   "horizon": ": the horizon is reached, work left"}.get(snap.get("ended", ""), "")
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  caption="ord = quanta per process; count = processes How Much gives the job; allocated = on "
                          "machines, evicted ones included; going = evicted, not yet gone", caption_justify="left")
        jobs = snap["jobs"]
        widths = {"job": max([3, *map(len, jobs)]), "user": max([4, *(len(j["user"]) for j in jobs.values())]),
                  "class": max([5, *(len(j["class"]) for j in jobs.values())]),
                  "state": max([5, *(len(j["state"]) for j in jobs.values())]),
                  "done": max([4, *(len(f"{j['done_items']}/{j['work_items']}") for j in jobs.values()
                                    if "work_items" in j)])}
        for col, just in (("job", "left"), ("user", "left"), ("class", "left"), ("ord", "right"),
                          ("count", "right"), ("allocated", "right"), ("going", "right"), ("state", "left"),
                          ("done", "right")):
            t.add_column(col, justify=just, no_wrap=True, min_width=widths.get(col, len(col)))
        notes = []
        for jid, j in snap["jobs"].items():
            done = f"{j['done_items']}/{j['work_items']}" if "work_items" in j else "-"
            t.add_row(jid, j["user"], j["class"], str(j["order"] or "-"), str(j["counted"]), str(j["held"]),
                      str(j["pending_removal"]), j["state"], done)
            if j["state"] != "running" or j["held"] != j["counted"]:
                notes.append(f"  {jid}: {j['reason']}")
        if snap["jobs"]:
            print_table(console, t, drop_first=("going", "class"))
        else:
            console.print(f"[bold]{title}[/]: no job left", highlight=False)
        for note in notes:
            console.print(note, soft_wrap=True, highlight=False, markup=False)
        if snap["classes"]:
            console.print("classes: " + "; ".join(
                f"{c} {v['held']} allocated / {v['counted']} counted ({v['quanta']} quanta)"
                for c, v in snap["classes"].items()), soft_wrap=True, highlight=False)
        ms = snap["machines"]
        total = sum(m["order"] for m in ms.values())
        used = sum(m["used"] for m in ms.values())
        states: dict[str, int] = {}
        for m in ms.values():
            states[m["state"]] = states.get(m["state"], 0) + 1
        console.print(f"machines: {len(ms)}, {used} of {total} quanta in use; "
                      + ", ".join(f"{n} {s}" for s, n in sorted(states.items())), highlight=False)
        if len(ms) <= machines_limit:
            console.print("  " + "  ".join(f"{name} {m['used']}/{m['order']}"
                                           + ("" if m["state"] == "ok" else f" ({m['state']})")
                                           for name, m in ms.items()), soft_wrap=True, highlight=False)
        if snap["evictions"]:
            console.print("[yellow]evicted:[/] " + _grouped(snap["evictions"]), soft_wrap=True, highlight=False)
        if snap["lost"]:
            console.print("[red]lost:[/] " + _grouped(snap["lost"]), soft_wrap=True, highlight=False)
        if snap.get("end") and (snap["finished"] or snap["cancelled"]):
            if snap["finished"]:
                console.print("finished: " + ", ".join(f"{j} at {_t(t)}" for j, t in snap["finished"].items()),
                              soft_wrap=True, highlight=False)
            if snap["cancelled"]:
                console.print("cancelled: " + ", ".join(f"{j} at {_t(t)}" for j, t in snap["cancelled"].items()),
                              soft_wrap=True, highlight=False)
        console.print()
