"""examples/simulate/sweep-share-ratios.yaml answers its question with different figures: its jobs
arrive faster than the trace has them (options.arrivals), so the share pool is contended and the
share ratios decide who waits; and `arrivals` itself does what it says."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.simulate.sweep import SweepError, load_grid, run_sweep

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "simulate" / "sweep-share-ratios.yaml"
NASA = REPO.parent / "shared" / "traces" / "NASA-iPSC-1993-3.1-cln.swf.gz"
runner = CliRunner()


def test_the_example_says_what_it_shows_and_runs_faster_than_the_trace() -> None:
    text = EXAMPLE.read_text()
    comment = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert "arrive one and a half times as fast" in comment and "options.arrivals: 1.5" in comment
    assert "half idle" in comment and "the same figures" in comment  # why it needs arrivals
    assert "Jain's index from 0.99 to 0.95" in comment  # what it shows (checked by the slow test below)
    spec = load_grid(EXAMPLE)
    assert spec["options"]["arrivals"] > 1 and spec["options"]["first"] == 4000
    names = [v["name"] for v in spec["variants"]]
    assert len(names) == 5 and len(set(names)) == 5


def test_arrivals_must_be_a_positive_number(tmp_path: Path) -> None:
    bad = tmp_path / "g.yaml"
    bad.write_text(EXAMPLE.read_text().replace("plan: ", f"plan: {EXAMPLE.parent}/", 1)
                   .replace("map: ", f"map: {EXAMPLE.parent}/", 1).replace("arrivals: 1.5", "arrivals: -1"))
    with pytest.raises(SweepError, match="options.arrivals: a number above 0"):
        load_grid(bad)
    bad.write_text(bad.read_text().replace("arrivals: -1", "arrivals: 1.5").replace("first: 4000", "first: 0"))
    with pytest.raises(SweepError, match="options.first: a whole number of jobs above 0"):
        load_grid(bad)


PLAN = """\
hosts:
  - {name: h, slots: 8}
resource_groups:
  - {name: cpu, hosts: [h]}
consumers:
  - {path: /A, share_ratio: 1}
  - {path: /B, share_ratio: 3}
"""


def test_arrivals_divides_each_submit_time(tmp_path: Path) -> None:
    """20 jobs of 8 slots, one every 100 s, each running 60 s: as the trace has them nobody waits;
    arriving 4 times as fast (one every 25 s) each waits for the one before it."""
    (tmp_path / "p.yaml").write_text(PLAN)
    (tmp_path / "m.yaml").write_text("default: /B\nrules:\n  - {user: '1', consumer: /A}\n")
    lines = ["; MaxProcs: 8"] + [f"{i} {i * 100} 0 60 8 -1 -1 8 60 -1 1 {1 + i % 2} 1 -1 1 -1 -1 -1"
                                 for i in range(1, 21)]
    (tmp_path / "t.swf.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))

    def run(*extra: str) -> dict:
        r = runner.invoke(app, ["simulate", str(tmp_path / "p.yaml"), str(tmp_path / "t.swf.gz"), "--map",
                                str(tmp_path / "m.yaml"), "--json", "--no-progress", *extra])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    plain, fast = run(), run("--arrivals", "4")
    assert "arrivals" not in plain and fast["arrivals"] == 4
    assert all(c["wait"]["max"] == 0 for c in plain["consumers"].values())
    assert max(c["wait"]["max"] for c in fast["consumers"].values()) > 0
    assert fast["makespan"] < plain["makespan"]
    assert fast["jobs"] == plain["jobs"] == 20
    first = run("--first", "5")  # only the trace's first 5 jobs
    assert first["jobs"] == 5 and first["first"] == 5 and "first" not in plain


@pytest.mark.slow  # four replays of 4,000 NASA jobs under contention: about a minute of CPU
@pytest.mark.skipif(not NASA.is_file(), reason="needs ../shared/traces beside the repository (not here)")
def test_the_sweeps_variants_give_different_figures() -> None:
    """The grid's four variants over the trace's first 4,000 jobs, as the example sets them: each
    variant's per-consumer waits differ from every other's, and raising /Others' ratio from 1 to 4
    moves the figures as the example's comment says: Jain's index from 0.99 to 0.95, /Aero's mean
    wait longer (at either ratio of /Physics), /Others' own mean wait within a few percent."""
    spec = load_grid(EXAMPLE)
    assert spec["options"]["first"] == 4000
    spec["variants"] = spec["variants"][:4]  # the grid (the fifth, "nobody owns", changes ownership)
    res = run_sweep(spec, workers=2)
    figures = {r["name"]: tuple(round(c["wait"]["mean"]) for _, c in sorted(r["result"]["consumers"].items()))
               for r in res["variants"]}
    assert len(set(figures.values())) == 4, figures

    def jain(ratio: int, physics: int) -> float:
        name = f"consumers[/Others].share_ratio={ratio}, consumers[/Physics].share_ratio={physics}"
        return next(r for r in res["variants"] if r["name"] == name)["result"]["fairness"]["jain"]

    assert abs(jain(1, 1) - 0.995) < 0.005 and abs(jain(4, 1) - 0.946) < 0.005

    def wait(who: str, ratio: int, physics: int) -> float:
        name = f"consumers[/Others].share_ratio={ratio}, consumers[/Physics].share_ratio={physics}"
        return next(r for r in res["variants"] if r["name"] == name)["result"]["consumers"][who]["wait"]["mean"]

    assert wait("/Aero", 4, 1) > wait("/Aero", 1, 1)
    assert wait("/Aero", 4, 2) > 1.3 * wait("/Aero", 1, 2)
    for physics in (1, 2):
        assert abs(wait("/Others", 4, physics) - wait("/Others", 1, physics)) < 0.05 * wait("/Others", 1, physics)
