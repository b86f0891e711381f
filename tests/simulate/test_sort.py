"""A trace out of time order: refused with its times as the file writes them, replayed
whole with --sort (in runs on disk when long), and a spent --skip-bad says so."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.traces import open_trace
from apportion.traces.record import BadLine
from apportion.traces.sort import SortedTrace
from apportion.traces.swf import SwfTrace

BASE = 1_672_510_000  # Unix times, as converted logs write them


def _row(i: int, submit: int, run: int = 10, n: int = 2, user: int = 1) -> str:
    return f"{i} {submit} -1 {run} {n} -1 -1 {n} -1 -1 1 {user} 1 -1 1 -1 -1 -1"


def _shuffled(tmp_path, n: int = 60, seed: int = 5):
    rng = random.Random(seed)
    rows = [(i, BASE + rng.randrange(0, 5000), rng.choice((5, 30, 200)), rng.choice((1, 2, 4)))
            for i in range(1, n + 1)]
    shuffled = tmp_path / "shuffled.swf"
    shuffled.write_text("; MaxNodes: 4\n; MaxProcs: 8\n" + "\n".join(_row(*r) for r in rows) + "\n")
    ordered = tmp_path / "ordered.swf"
    key = sorted(rows, key=lambda r: (r[1], rows.index(r)))
    ordered.write_text("; MaxNodes: 4\n; MaxProcs: 8\n" + "\n".join(_row(*r) for r in key) + "\n")
    return shuffled, ordered


def test_an_unsorted_trace_is_refused_with_its_times_as_written(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text("\n".join([_row(1, BASE + 20_000), _row(2, BASE)]) + "\n")
    with pytest.raises(BadLine) as e:
        list(SwfTrace(path).jobs())
    assert "1672510000 is before the previous job's 1672530000" in str(e.value)
    assert "e+09" not in str(e.value) and "--sort" in str(e.value)


def test_a_spent_skip_budget_says_so(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text("\n".join([_row(1, BASE + 30), _row(2, BASE + 20), _row(3, BASE + 10), _row(4, BASE + 40)])
                    + "\n")
    with pytest.raises(BadLine, match=r"--skip-bad 1 is spent: 1 bad lines were skipped before this one"):
        list(SwfTrace(path, skip_bad=1).jobs())
    t = SwfTrace(path, skip_bad=2)
    assert [j.id for j in t.jobs()] == ["1", "4"] and t.skips.skipped == 2
    # with no budget the message is the line's own
    with pytest.raises(BadLine) as e:
        list(SwfTrace(path).jobs())
    assert "is spent" not in str(e.value)


@pytest.mark.parametrize("chunk", [1_000_000, 7])
def test_sort_yields_the_jobs_in_submission_order_from_zero(tmp_path, chunk):
    shuffled, ordered = _shuffled(tmp_path)
    st = SortedTrace(SwfTrace(shuffled), chunk=chunk, tmpdir=str(tmp_path))
    got = list(st.jobs())
    want = list(SwfTrace(ordered).jobs())
    assert [(j.id, j.submit, j.run, j.slots) for j in got] == [(j.id, j.submit, j.run, j.slots) for j in want]
    assert got[0].submit == 0
    assert st.runs == (0 if chunk > 60 else 9)  # 60 jobs in runs of 7 on disk
    assert not list(tmp_path.glob("apportion-sort-*"))  # the runs' files are gone


def test_sort_on_the_command_line_replays_the_whole_trace(tmp_path):
    shuffled, ordered = _shuffled(tmp_path)
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("consumers:\n  - {path: /A}\n")
    r = CliRunner().invoke(app, ["simulate", str(plan_file), str(shuffled), "--json"])
    assert r.exit_code == 2 and "before the previous job's" in r.output and "e+09" not in r.output
    r = CliRunner().invoke(app, ["simulate", str(plan_file), str(shuffled), "--sort", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    want = json.loads(CliRunner().invoke(app, ["simulate", str(plan_file), str(ordered), "--json"]).output)
    assert got["jobs"] == want["jobs"] == 60
    for k in ("makespan", "utilisation", "wait"):
        assert got[k] == want[k]
    r = CliRunner().invoke(app, ["simulate", "map", str(shuffled), "--by", "user", "--sort"])
    assert r.exit_code == 0 and "consumer: /u1" in r.output, r.output


def test_sort_refuses_a_trace_read_in_its_events_order(tmp_path):
    with pytest.raises(ValueError, match="--sort reads SWF, JSONL and Alibaba"):
        open_trace(tmp_path, kind="ducc", sort=True)


def test_skipped_lines_are_counted_and_the_first_named_in_the_summary(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text("\n".join([_row(1, BASE + 30), _row(2, BASE + 20), _row(3, BASE + 10), _row(4, BASE + 40)])
                    + "\n")
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("hosts: [{name: h, slots: 4}]\nresource_groups: [{name: cpu, hosts: [h]}]\n"
                         "consumers:\n  - {path: /A}\n")
    r = CliRunner().invoke(app, ["simulate", str(plan_file), str(path), "--skip-bad", "5", "--no-progress"])
    assert r.exit_code == 0, r.output
    text = "".join(r.output.split())  # the console wraps long paths anywhere
    assert "2badlinesskipped(--skip-bad),thefirst:" in text and "t.swf:2:submit:1672510020" in text
