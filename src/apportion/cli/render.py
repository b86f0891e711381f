"""Rich tables for people; the --json output is the stable contract."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich import box
from rich.table import Table
from apportion.cli.tables import print_table

# the JSON group line's key -> its column, in the words of docs/policies.md's "Words"
COLUMNS = {"planned_owned": "owned", "held": "allocated", "owned": "from-owned", "borrowed": "borrowed",
           "shared": "shared", "lent": "lent", "deserved": "deserved", "demand": "demand"}
FIELDS = tuple(COLUMNS.values())
HELP = ("owned = ownership in force; allocated = slots it has now; from-owned = allocated slots of its own "
        "ownership; borrowed = lent by others; shared = from share pools above; lent = own slots lent out")


def _fmt_time(t: float) -> str:
    return f"{t:g}s"


def _amounts(v: dict[str, float]) -> str:
    return ", ".join(f"{k} {a:g}" for k, a in v.items())


def render_snapshots(console: Console, snaps: list[dict[str, Any]]) -> None:
    for snap in snaps:
        groups: list[str] = []
        for line in snap["consumers"].values():
            for g in line["groups"]:
                if g not in groups:
                    groups.append(g)
        for g in groups:
            t = Table(title=f"t = {_fmt_time(snap['at'])}  ·  resource group {g}", title_justify="left",
                      caption=HELP, caption_justify="left", box=box.SIMPLE_HEAD)
            names = ["  " * (p.count("/") - 1) + p.rsplit("/", 1)[-1] for p in snap["consumers"]]
            t.add_column("consumer", overflow="fold", min_width=max([len("consumer")] + [len(n) for n in names]))
            for f in FIELDS:
                t.add_column(f, justify="right", min_width=len(f), no_wrap=True)
            for path, line in snap["consumers"].items():
                gl = line["groups"].get(g)
                if gl is None:
                    continue
                depth = path.count("/") - 1
                name = "  " * depth + path.rsplit("/", 1)[-1]
                t.add_row(name, *(str(gl.get(k, 0)) for k in COLUMNS))
            print_table(console, t, drop_first=("lent", "shared", "borrowed", "from-owned"))
        for g, kg in snap.get("kinds", {}).items():
            kinds = list(kg["totals"])
            t = Table(title=f"resource group {g} by kind (of {_amounts(kg['totals'])})", title_justify="left",
                      box=box.SIMPLE_HEAD)
            t.add_column("consumer")
            for k in kinds:
                t.add_column(k, justify="right")
            t.add_column("dominant share", justify="right")
            for path, c in kg["consumers"].items():
                t.add_row(path, *(f"{c['used'].get(k, 0):g}" for k in kinds), f"{c['dominant_share']:.3f}")
            print_table(console, t)
        if snap["requests"]:
            t = Table(title="requests", title_justify="left")
            t.add_column("request")
            t.add_column("allocated", justify="right")
            t.add_column("hosts")
            for rid, r in snap["requests"].items():
                t.add_row(rid, str(r["held"]), " ".join(f"{h}:{n}" for h, n in r["hosts"].items()))
            print_table(console, t)
        if snap["reclaiming"]:
            t = Table(title="reclaiming (still with their holder)", title_justify="left")
            for col in ("request", "host", "slots", "deadline", "for"):
                t.add_column(col)
            for r in snap["reclaiming"]:
                t.add_row(r["request"], r["host"], str(r["slots"]), _fmt_time(r["deadline"]), r["for"])
            print_table(console, t)
        if snap.get("reservations"):
            t = Table(title="reservations (rigid requests waiting for their min)", title_justify="left")
            for col in ("request", "consumer", "group", "min", "kept", "planned start"):
                t.add_column(col)
            for r in snap["reservations"]:
                start = "unknown" if r["planned_start"] is None else _fmt_time(r["planned_start"])
                t.add_row(r["request"], r["consumer"], r["group"], str(r["min"]),
                          " ".join(f"{h}:{n}" for h, n in r["kept"].items()) or "-", start)
            print_table(console, t)
        if snap.get("removed_by_plan"):
            console.print("[bold yellow]removed by the new plan:[/] " + "; ".join(
                f"{x['request']}@{x['host']} ({x['slots']}): {x['reason']}" for x in snap["removed_by_plan"]),
                soft_wrap=True)
        if snap.get("lost"):
            console.print("[bold red]lost:[/] " + ", ".join(
                f"{x['request']}@{x['host']} ({x['slots']})" for x in snap["lost"]))
        console.print()
