"""Two simulation runs side by side (`apportion simulate compare A.json B.json`).

For the run and each consumer in either, each figure of A and B with B - A, in its unit,
marked ``better``/``worse`` when it moved by more than ``threshold`` of the larger value
and by more than its unit's floor (a second of waiting, a thousandth of a ratio, one job),
in the direction that is good for that figure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from apportion.cli.tables import print_table

# figure -> where to read it and whether larger is better
OVERALL = {
    "never_started": (("never_started",), False),
    "makespan": (("makespan",), False),
    "utilisation": (("utilisation",), True),
    "jain": (("fairness", "jain"), True),
    "max_deviation": (("fairness", "max_deviation"), False),
    "mean_deviation": (("fairness", "mean_deviation"), False),
    "reclaims": (("reclaims",), False),
    "evictions": (("evictions",), False),
    "lost_slot_seconds": (("lost_slot_seconds",), False),
    "wait_mean": (("wait", "mean"), False),
}
PER_CONSUMER = {
    "never_started": (("never_started",), False),
    "wait_mean": (("wait", "mean"), False),
    "wait_p95": (("wait", "p95"), False),
    "bounded_slowdown_mean": (("bounded_slowdown", "mean"), False),
    "held_mean": (("held_mean",), None),
    "deserved_mean": (("deserved_mean",), None),
    "shortfall_seconds": (("shortfall_seconds",), False),
    "reclaims": (("reclaims",), False),
    "evictions": (("evictions",), False),
    "lost_slot_seconds": (("lost_slot_seconds",), False),
    "finish_time_fairness": (("finish_time_fairness",), False),
}
EPS = 1e-9
# each figure's unit, and the least move in it that counts (less is noise, whatever the ratio)
UNITS = {"never_started": "jobs", "makespan": "s", "utilisation": "ratio", "jain": "ratio",
         "max_deviation": "ratio", "mean_deviation": "ratio", "reclaims": "count", "evictions": "count",
         "lost_slot_seconds": "slot-s", "wait_mean": "s", "wait_p95": "s", "bounded_slowdown_mean": "ratio",
         "held_mean": "slots", "deserved_mean": "slots", "shortfall_seconds": "s",
         "finish_time_fairness": "ratio"}
FLOOR = {"jobs": 1.0, "count": 1.0, "s": 1.0, "slot-s": 1.0, "slots": 0.01, "ratio": 0.001}


def load_run(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: not JSON ({e.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("consumers"), dict):
        raise ValueError(f"{path}: not a simulation result (no \"consumers\"): use apportion simulate --json "
                         "or the result.json that --out writes")
    return data


def _get(d: dict | None, keys: tuple[str, ...]) -> float | None:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d if isinstance(d, (int, float)) else None


def _line(a: float | None, b: float | None, higher_better: bool | None, threshold: float,
          unit: str = "ratio") -> dict[str, Any]:
    out: dict[str, Any] = {"a": a, "b": b, "diff": None, "mark": "", "unit": unit}
    if a is None or b is None:
        out["mark"] = "only in a" if b is None and a is not None else "only in b" if a is None and b is not None \
            else ""
        return out
    out["diff"] = b - a
    big = max(abs(a), abs(b))
    if abs(b - a) > max(threshold * big, EPS) and abs(b - a) >= FLOOR[unit] - EPS:
        if higher_better is None:
            out["mark"] = "changed"
        else:
            out["mark"] = "better" if (b > a) == higher_better else "worse"
    return out


def compare(a: dict[str, Any], b: dict[str, Any], threshold: float = 0.05, name_a: str = "a",
            name_b: str = "b") -> dict[str, Any]:
    overall = {k: _line(_get(a, keys), _get(b, keys), hb, threshold, UNITS[k]) for k, (keys, hb) in OVERALL.items()}
    consumers = {}
    for p in sorted(set(a["consumers"]) | set(b["consumers"])):
        ca, cb = a["consumers"].get(p), b["consumers"].get(p)
        consumers[p] = {k: _line(_get(ca, keys), _get(cb, keys), hb, threshold, UNITS[k])
                        for k, (keys, hb) in PER_CONSUMER.items()}
    marked = sum(1 for x in overall.values() if x["mark"]) + sum(
        1 for c in consumers.values() for x in c.values() if x["mark"])
    return {"a": name_a, "b": name_b, "threshold": threshold, "overall": overall, "consumers": consumers,
            "marked": marked}


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, int) or float(x).is_integer():
        return f"{x:,.0f}"
    return f"{x:,.3f}" if abs(x) < 100 else f"{x:,.0f}"


_STYLE = {"better": "green", "worse": "red", "changed": "yellow", "only in a": "magenta", "only in b": "magenta"}


def _row(t: Table, label: str, line: dict[str, Any]) -> None:
    mark = line["mark"]
    style = _STYLE.get(mark)
    diff = "-" if line["diff"] is None else ("+" if line["diff"] > 0 else "") + _fmt(line["diff"])
    unit = line.get("unit", "")
    t.add_row(escape(label), escape(unit), _fmt(line["a"]), _fmt(line["b"]), diff,
              f"[{style}]{mark}[/]" if style else "")


def render_compare(console: Console, r: dict[str, Any]) -> None:
    t = Table(title=f"A = {escape(r['a'])}   B = {escape(r['b'])}   (marked: moved by more than {r['threshold']:.0%})")
    for col in ("figure", "unit", "A", "B", "B - A", ""):
        t.add_column(col, justify="left" if col in ("figure", "unit", "") else "right")
    for k, line in r["overall"].items():
        _row(t, k, line)
    for p, figs in r["consumers"].items():
        t.add_section()
        for k, line in figs.items():
            _row(t, f"{p} {k}", line)
    print_table(console, t)
    console.print(f"{r['marked']} difference(s) marked")
