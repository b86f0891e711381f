"""Every table the CLI prints shows every number whole, at 60, 80 and 200 columns and into a pipe.

Two kinds of check:
- the figures against the data: ``apportion solve`` run as a user runs it (its own process, into a
  pipe and on a terminal of each width), its rows parsed and compared with ``--json``;
- every table of every command, in this process: what ``print_table`` was given (each cell's
  text) against what came out. Every word of a number column, every header word, and every
  word with a digit in a text column must be there whole, as often as the table holds it,
  unless its column is one the output names as left out; no ``…`` anywhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from apportion.cli import live, simulate, tables
from apportion.cli import main as cli_main
from apportion.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "apportion.cli"]
WIDTHS = (60, 80, 200)
MODES = (*WIDTHS, "pipe")
_SPLIT = re.compile(r"[\s│┃║]+")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# solve's columns and the JSON group line's key for each (the glossary's words)
COLUMNS = {"owned": "planned_owned", "allocated": "held", "from-owned": "owned", "borrowed": "borrowed",
           "shared": "shared", "lent": "lent", "deserved": "deserved", "demand": "demand"}
FIELDS = tuple(COLUMNS)


# --- the data: apportion solve, parsed --------------------------------------------------------


def _solve(*args: str, width: int | None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    if width is None:
        env["TTY_COMPATIBLE"] = "0"  # a pipe: what `| cat` sees
    else:
        env.update(TTY_COMPATIBLE="1", COLUMNS=str(width), NO_COLOR="1")
    r = subprocess.run([*CLI, "solve", *args], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return _ANSI.sub("", r.stdout)


def _consumer_tables(text: str) -> list[dict[str, dict[str, str]]]:
    """Each per-group table of `solve`: {consumer name: {column: value}} for the columns shown."""
    found: list[dict[str, dict[str, str]]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        words = line.split()
        if not words or words[0] != "consumer" or not set(words[1:]) <= set(FIELDS):
            continue
        rows: dict[str, dict[str, str]] = {}
        for row in lines[i + 1:]:
            cells = row.split()
            if cells and set(cells[0]) <= set("─━ "):
                continue  # the rule under the header
            if len(cells) != len(words):
                break
            rows[cells[0]] = dict(zip(words[1:], cells[1:], strict=True))
        found.append(rows)
    return found


@pytest.mark.parametrize("width", [None, *WIDTHS], ids=lambda w: "pipe" if w is None else f"{w}-columns")
def test_solve_shows_each_consumers_figures_as_the_json_has_them(width: int | None) -> None:
    """`apportion solve examples/20-host-ownership.yaml | cat` shows Risk's demand as 12 and
    intraday's as 8; at any width each figure shown is the JSON's, and none is cut."""
    example = "examples/20-host-ownership.yaml"
    snaps = json.loads(_solve(example, "--json", width=None))["snapshots"]
    text = _solve(example, width=width)
    assert "…" not in text
    shown = _consumer_tables(text)
    assert len(shown) == len(snaps)
    for snap, rows in zip(snaps, shown, strict=True):
        assert set(rows) == {p.rsplit("/", 1)[-1] for p in snap["consumers"]}
        for path, line in snap["consumers"].items():
            g = line["groups"]["RG1"]
            want = {f: g.get(k, 0) for f, k in COLUMNS.items()}
            got = rows[path.rsplit("/", 1)[-1]]
            assert {"owned", "allocated", "demand"} <= set(got), got  # what a reader needs most is never left out
            assert got == {f: str(want[f]) for f in got}, (path, got)
    if width is None or width == 200:
        assert all(set(rows[name]) == set(FIELDS) for rows in shown for name in rows)  # every column
    first = shown[0]
    assert first["Risk"]["demand"] == "12" and first["intraday"]["demand"] == "8"


# --- every table, in this process -------------------------------------------------------------


def _snapshot(table: Table) -> list[tuple[str, bool, list[str]]]:
    return [(tables._plain(c.header), tables._whole(c), [tables._plain(x) for x in c.cells]) for c in table.columns]


class Seen:
    """What print_table was given: each table's columns, and which it left out."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tables: list[tuple[list[tuple[str, bool, list[str]]], set[int]]] = []
        fit, plain = tables.fit, tables.plain_lines

        def fit_(console: Console, table: Table, width: int | None = None, drop_first: Any = ()) -> list[str]:
            snap, before = _snapshot(table), list(table.columns)
            dropped = fit(console, table, width, drop_first)
            left_out = {i for i, c in enumerate(before) if not any(c is k for k in table.columns)}
            assert len(left_out) == len(dropped) and all(dropped), dropped  # each named in the note
            self.tables.append((snap, left_out))
            return dropped

        def plain_(table: Table) -> list[str]:
            self.tables.append((_snapshot(table), set()))
            return plain(table)

        monkeypatch.setattr(tables, "fit", fit_)
        monkeypatch.setattr(tables, "plain_lines", plain_)

    def needed(self) -> Counter[str]:
        need: Counter[str] = Counter()
        for columns, left_out in self.tables:
            for i, (header, whole, cells) in enumerate(columns):
                if i in left_out:
                    continue
                need.update(header.split())
                for cell in cells:
                    need.update(w for w in cell.split()
                                if whole or (any(ch.isdigit() for ch in w) and len(w) <= tables._FOLD_AT))
        return need


CONSOLES = (cli_main.out, live.out, simulate.out)


def run(monkeypatch: pytest.MonkeyPatch, mode: int | str, args: list[str], env: dict[str, str] | None = None
        ) -> tuple[str, Seen]:
    """`apportion ARGS` in this process, on a terminal MODE columns wide or into a pipe."""
    seen = Seen(monkeypatch)
    tty = mode != "pipe"
    for c in CONSOLES:
        monkeypatch.setattr(c, "width", mode if tty else 80)
    r = CliRunner().invoke(app, args, env={**(env or {}), "TTY_COMPATIBLE": "1" if tty else "0",
                                           "COLUMNS": str(mode if tty else 80), "FORCE_COLOR": None})
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    assert r.exit_code == 0, r.output
    return r.stdout, seen


def check(out: str, seen: Seen, tables_at_least: int = 1) -> None:
    """Every word print_table must show is in ``out`` whole, as often as the tables hold it."""
    assert len([t for t in seen.tables if t[0] and t[0][0][2]]) >= tables_at_least, seen.tables
    assert "…" not in out
    have = Counter(w for w in _SPLIT.split(_ANSI.sub("", out)) if w)
    missing = {w: n - have[w] for w, n in seen.needed().items() if have[w] < n}
    assert not missing, f"cut or missing: {missing}\n{out}"
    if isinstance(out, str) and seen.tables and all(not d for _, d in seen.tables):
        assert "not shown at this width" not in out


def test_a_table_never_cuts_a_number_at_any_width() -> None:
    """A wide table of long numbers at every width from 30 to 200: each number whole or its column
    left out (and named), never cut; text wraps; a pipe gets it all on one line a row."""
    def make() -> Table:
        t = Table(title="a title long enough to wrap on a narrow terminal, whose words stay whole")
        t.add_column("name")
        for h in ("first figure", "second", "third", "a fourth one", "fifth"):
            t.add_column(h, justify="right")
        t.add_column("why")
        t.add_column("")  # a column without a header, as bench's met / not met
        for i in range(6):
            t.add_row(("  " if i % 2 else "") + f"/Team{i}/app{i}", f"{123456789 * (i + 1):,}", str(i * 1000003),
                      f"{i / 7:.4f}", f"{i * 98765}", "-" if i % 2 else str(10 ** i),
                      f"waits for {i * 12} slots on host{i}:{i * 4}, since 12:00:{i:02}",
                      "[green]met[/]" if i % 2 else "")
        return t

    for width in range(30, 201, 7):
        import io

        console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
        t = make()
        cells = _snapshot(t)
        tables.print_table(console, t)
        out = console.file.getvalue()
        assert "…" not in out
        assert max(len(line) for line in out.splitlines()) <= width
        note = re.search(r"not shown at this width: (.*?) \(", " ".join(out.split()))
        dropped = set(note.group(1).split(", ")) if note else set()
        assert "name" not in dropped
        assert not note or all(dropped), out  # every column left out is named
        words = Counter(_SPLIT.split(out))
        for i, (header, whole, column) in enumerate(cells):
            if (header or f"column {i + 1}") in dropped:
                continue
            for v in column:
                for w in v.split():
                    if whole or (any(ch.isdigit() for ch in w) and len(w) <= tables._FOLD_AT):
                        assert words[w] >= 1, (width, header, w, out)
        if width >= 120:
            assert not dropped
    console = Console(file=__import__("io").StringIO(), width=40, force_terminal=False)
    tables.print_table(console, make())
    out = console.file.getvalue().splitlines()
    assert out[1].split() == ["name", "first", "figure", "second", "third", "a", "fourth", "one", "fifth", "why"]
    assert out[3].split()[-1] == "met" and out[3].startswith("  /Team1/app1 ")
    assert out[2].split()[:6] == ["/Team0/app0", "123,456,789", "0", "0.0000", "0", "1"]
    assert len(out) == 1 + 1 + 6


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the offline commands read: a plan change, a small trace, a mapping, a sweep grid,
    two simulation results to compare."""
    from tests.simulate.test_commands import MAP, PLAN, _swf

    d = tmp_path_factory.mktemp("offline")
    (d / "plan.yaml").write_text(PLAN)
    (d / "plan9.yaml").write_text(PLAN.replace("share_ratio: 3", "share_ratio: 1"))
    (d / "map.yaml").write_text(MAP)
    _swf(d / "t.swf")
    new = (ROOT / "examples" / "20-host-ownership.yaml").read_text().split("timeline:")[0]
    (d / "new-plan.yaml").write_text(new.replace("{path: /Pricing, owned_hosts: 2", "{path: /Pricing, owned_hosts: 3")
                                     .replace("{path: /Batch, owned_hosts: 2", "{path: /Batch, owned_hosts: 1"))
    (d / "grid.yaml").write_text("plan: plan.yaml\ntrace: t.swf\nmap: map.yaml\n"
                                 "grid:\n  consumers[/B].share_ratio: [1, 3]\n"
                                 "variants:\n  - {name: A owns 8, set: {\"consumers[/A].owned\": 8}}\n")
    for name, plan in (("a.json", "plan.yaml"), ("b.json", "plan9.yaml")):
        r = CliRunner().invoke(app, ["simulate", str(d / plan), str(d / "t.swf"), "--map", str(d / "map.yaml"),
                                     "--json"])
        assert r.exit_code == 0, r.output
        (d / name).write_text(r.stdout)
    return d


OFFLINE = {
    "solve": lambda d: ["solve", str(ROOT / "examples" / "20-host-ownership.yaml")],
    "solve-ducc": lambda d: ["solve", str(ROOT / "examples" / "12-ducc-newcomer-and-doubling.yaml")],
    "plan-diff": lambda d: ["plan", "diff", str(ROOT / "examples" / "20-host-ownership.yaml"),
                            str(d / "new-plan.yaml")],
    "simulate": lambda d: ["simulate", str(d / "plan.yaml"), str(d / "t.swf"), "--map", str(d / "map.yaml"),
                           "--no-progress"],
    "compare": lambda d: ["simulate", "compare", str(d / "a.json"), str(d / "b.json")],
    "sweep": lambda d: ["sweep", str(d / "grid.yaml"), "--workers", "1"],
}


@pytest.mark.parametrize("mode", MODES, ids=str)
@pytest.mark.parametrize("command", list(OFFLINE))
def test_offline_tables_keep_every_number(offline: Path, monkeypatch: pytest.MonkeyPatch, command: str,
                                          mode: int | str) -> None:
    out, seen = run(monkeypatch, mode, OFFLINE[command](offline))
    check(out, seen)
    if command == "simulate":  # the per-consumer table: every consumer's jobs, whole
        res = json.loads((offline / "a.json").read_text())
        for c in res["consumers"].values():
            assert f"{c['jobs']:,}" in _SPLIT.split(out)


# --- the live commands ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A master on examples/service/plan.yaml, one agent of 6 slots, two allocations with a
    reclaim under way and an activity running."""
    from apportion.client import Client
    from tests.service.live import SLEEPER, reap, start_agent, start_master, wait_until

    d = tmp_path_factory.mktemp("live")
    m = start_master(d / "m", (ROOT / "examples" / "service" / "plan.yaml").read_text())
    agent = start_agent(m, "host-with-a-long-name-1", d / "a1", slots=6)
    try:
        with Client(m.url, token=m.token) as api:
            wait_until(lambda: [h for h in api.hosts() if h["state"] == "ok"], 30, "the agent reported")
            batch = api.register("batch-manager", "/Apps/batch")
            a = api.allocate("/Apps/batch", None, 0, 6, client=batch)["id"]
            wait_until(lambda: api.allocation(a)["held"] >= 4, 30, "batch granted")
            api.start_activity(a, "host-with-a-long-name-1", SLEEPER, slots=1)
            wait_until(lambda: [x for x in api.activities(a) if x["state"] == "running"], 30, "the activity runs")
            web = api.register("web-manager", "/Apps/web")
            api.allocate("/Apps/web", None, 0, 4, client=web)
            wait_until(lambda: any(x.get("reclaiming") for x in api.allocations()), 30, "a reclaim under way")
            api.create_token_record("consumer", consumer="/Apps/web")
        yield m, a
    finally:
        agent.kill()
        m.proc.kill()
        reap()


LIVE = {
    "consumer-list": lambda a: ["consumer", "list"],
    "consumer-view": lambda a: ["consumer", "view", "/Apps/batch"],
    "rg": lambda a: ["rg", "Workers"],
    "alloc-list": lambda a: ["alloc", "list"],
    "alloc-view": lambda a: ["alloc", "view", str(a)],
    "host-list": lambda a: ["host", "list"],
    "activity-list": lambda a: ["activity", "list"],
    "token-list": lambda a: ["token", "list"],
    "audit": lambda a: ["audit"],
}


@pytest.mark.slow  # a master and an agent: not in `make test-fast`
@pytest.mark.parametrize("mode", MODES, ids=str)
def test_live_tables_keep_every_number(cluster: Any, monkeypatch: pytest.MonkeyPatch, mode: int | str) -> None:
    m, alloc = cluster
    env = {"APPORTION_MASTER": m.url, "APPORTION_TOKEN": m.token, "APPORTION_TOKEN_FILE": None,
           "APPORTION_RETRY_FOR": "2"}
    for name, args in LIVE.items():
        out, seen = run(monkeypatch, mode, args(alloc), env)
        check(out, seen)
        if name == "rg":  # the figures against the master's own
            data = json.loads(run(monkeypatch, "pipe", [*args(alloc), "--json"], env)[0])
            words = _SPLIT.split(out)
            for r in data["consumers"]:
                for f in ("held", "demand"):
                    assert str(r[f]) in words, (f, r)


@pytest.mark.slow  # a master and an agent: not in `make test-fast`
def test_ducc_job_list_and_occupancy_keep_every_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DUCC master with a job whose reason is long: `job list` and `occupancy` at each width."""
    from apportion.client import Client
    from tests.service.live import reap, start_agent, start_master, wait_until
    from tests.service.test_ducc_live import PLAN, worker

    m = start_master(tmp_path / "m", PLAN, extra=["--tick", "0.5"])
    agent = start_agent(m, "node1", tmp_path / "node1", extra=["--memory", "4"])
    try:
        with Client(m.url, token=m.token) as api:
            wait_until(lambda: [h for h in api.hosts() if h["state"] == "ok"], 30, "node1 reported")
            small = api.submit_job(list(range(50)), worker(5), memory=1, threads=1, user="ann")
            api.submit_job(list(range(3)), worker(5), memory=3, threads=1, user="bob")  # waits for a share: a reason
            wait_until(lambda: sum((api.job(small["id"]).get("processes") or {}).values()) > 0, 60,
                       "the small job's processes started")
        env = {"APPORTION_MASTER": m.url, "APPORTION_TOKEN": m.token, "APPORTION_TOKEN_FILE": None,
               "APPORTION_RETRY_FOR": "2"}
        for mode in MODES:
            for args in (["job", "list"], ["occupancy"]):
                out, seen = run(monkeypatch, mode, args, env)
                check(out, seen)
    finally:
        agent.kill()
        m.proc.kill()
        reap()
