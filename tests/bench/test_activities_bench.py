"""`apportion bench activities`: its spec's checks, and one tiny real run (a master, agents running
real activities with containment on and off, a small tree, a busy agent) through the CLI: the JSON has
every figure, and nothing it started is left running."""

from __future__ import annotations

import json

import psutil
import pytest
from typer.testing import CliRunner

from apportion.bench.activities_bench import ActivitiesBenchSpec
from apportion.cli.main import app


@pytest.mark.parametrize(("fields", "says"), [
    ({"activities": 0}, "activities must be at least 1"),
    ({"tree": 5, "daemons": 5}, "daemons must be fewer"),
    ({"window": 0}, "window and heartbeat"),
    ({"containment": "process-group"}, "not process-group itself"),
])
def test_spec_refuses_nonsense(fields: dict, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ActivitiesBenchSpec(**fields)


def _ours() -> set[int]:
    """This test's live descendants (orphans come to it: tests/conftest.py makes it a subreaper)."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.Error:
            continue
    return out


@pytest.mark.slow
def test_a_tiny_run_has_every_figure_and_leaves_nothing() -> None:
    before = _ours()
    r = CliRunner().invoke(app, ["bench", "activities", "--activities", "4", "--agents", "2", "--tree", "6",
                                 "--daemons", "2", "--stop-repeat", "1", "--busy", "3", "--window", "0.5", "--json"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    out = json.loads(r.stdout)
    res = out["result"]
    assert set(out["machine"]) >= {"cpu", "logical_cpus", "ram_gib"}
    on, off, light = res["start"]["on"], res["start"]["off"], res["start"]["light"]
    assert on["n"] == off["n"] == light["n"] == 4
    assert on["failed_count"] == off["failed_count"] == light["failed_count"] == 0
    assert off["containment"] == ["process-group"] and light["containment"] == ["light"]
    assert 0 < on["p50_s"] <= on["p99_s"] <= on["max_s"]
    assert on["sample"]["user"] and on["sample"]["uid"] != 0  # never root
    assert len(res["stop"]["on"]["times_s"]) == 1 and res["stop"]["off"]["containment"] == "process-group"
    live = res["stop"]["live"]
    assert live["processes_seen"] == 6 and live["end_state"] == "killed"
    assert live["alive_when_granted"] == 0  # the slots went to the beneficiary only once the tree was gone
    assert live["beneficiary_held"] == 2
    assert res["overhead"]["on"]["activities"] == 3 and res["overhead"]["on"]["core_share"] >= 0
    assert set(res["targets"]) == {"start_p50_s", "start_p99_s", "stop_s", "granted_after_gone",
                                   "granted_within_cycle_s", "overhead_core", "left_running"}
    assert res["left_running"] == 0
    assert _ours() <= before  # the bench's master, agents and activities are all gone
