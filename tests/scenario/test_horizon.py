"""A clocked DUCC scenario without `until` ends when no work is left, or at its horizon
(7 days of simulated time unless set): an ordinary end, exit code 0, one line on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from apportion.plan.ducc_scenario import load_ducc_scenario
from apportion.plan.errors import PlanError
from apportion.scenario.ducc_model import DEFAULT_HORIZON
from apportion.scenario.ducc_runner import run

LONG = """\
ducc:
  properties: {ducc.rm.share.quantum: 4, ducc.rm.prediction: false}
hosts:
  - {name: "m[1-2]", memory: 16}
cycle: 10
timeline:
  - at: 0
    jobs:
      - {id: long, user: ann, memory: 4, work_items: 100000000, seconds_per_item: 10}
      - {id: short, user: bob, memory: 4, work_items: 40}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "long.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_long_jobs_end_at_the_horizon_with_exit_code_0(tmp_path):
    path = _write(tmp_path, LONG + "horizon: 600\n")
    r = subprocess.run([sys.executable, "-m", "apportion.cli", "solve", str(path), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    last = json.loads(r.stdout)["snapshots"][-1]
    assert last["end"] is True and last["ended"] == "horizon" and last["at"] == 600
    assert "long" in last["jobs"] and "short" in last["finished"]
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"{path}: the run stopped at its horizon, t = 600s") and "1 job(s) still at work" in line
    assert "until" in line and "horizon" in line and "bug" not in line


def test_the_table_says_the_horizon_was_reached(tmp_path):
    path = _write(tmp_path, LONG + "horizon: 60\n")
    r = subprocess.run([sys.executable, "-m", "apportion.cli", "solve", str(path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "the horizon is reached, work left" in r.stdout


def test_the_default_horizon_is_seven_days():
    assert DEFAULT_HORIZON == 7 * 24 * 3600


def test_the_default_horizon_applies_without_until(tmp_path):
    sc = load_ducc_scenario(_write(tmp_path, LONG))
    assert sc.horizon == DEFAULT_HORIZON and sc.until is None


def test_work_done_before_the_horizon_ends_as_done(tmp_path):
    text = LONG.replace("work_items: 100000000, seconds_per_item: 10", "work_items: 80") + "horizon: 100000\n"
    snaps = run(load_ducc_scenario(_write(tmp_path, text)))
    assert snaps[-1]["ended"] == "done" and snaps[-1]["at"] < 1000


def test_until_ends_the_run_as_until(tmp_path):
    snaps = run(load_ducc_scenario(_write(tmp_path, LONG + "until: 50\n")))
    assert snaps[-1]["ended"] == "until" and snaps[-1]["at"] == 50


@pytest.mark.parametrize(("extra", "reason"), [
    ("horizon: 600\nuntil: 50\n", "give until or horizon, not both"),
    ("horizon: 0\n", "greater than 0"),
    ("horizon: 5\n", "timeline[1] comes at 30s, after the run's horizon (5s)"),
])
def test_horizon_problems_name_the_field_and_line(tmp_path, extra, reason):
    text = LONG + "  - at: 30\n    cancel: [short]\n" + extra
    with pytest.raises(PlanError) as err:
        load_ducc_scenario(_write(tmp_path, text))
    found = [p for p in err.value.problems if p.field == "horizon"]
    assert found and reason in found[0].reason, err.value.problems
    assert found[0].line == text.splitlines().index(extra.splitlines()[0]) + 1


def test_horizon_needs_a_clock(tmp_path):
    text = LONG.replace("cycle: 10\n", "") + "horizon: 600\n"
    with pytest.raises(PlanError, match="horizon needs a clock"):
        load_ducc_scenario(_write(tmp_path, text))


def test_validate_states_the_horizon(tmp_path):
    path = _write(tmp_path, LONG + "horizon: 600\n")
    r = subprocess.run([sys.executable, "-m", "apportion.cli", "validate", str(path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "a cycle every 10s until no work is left or the horizon, 600s" in r.stdout
