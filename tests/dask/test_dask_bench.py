"""`apportion bench dask`, small: one short real run whose figures are sane and whose checks pass."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("distributed", reason="Dask is not installed: pip install 'apportion[dask]'")

from apportion.bench.dask_bench import DaskBenchSpec  # noqa: E402
from apportion.cli.main import app  # noqa: E402


def test_a_short_run_reaches_its_workers_and_gives_back_half_without_force() -> None:
    out = CliRunner().invoke(app, ["bench", "dask", "--agents", "2", "--slots-per-agent", "2", "--workers", "4",
                                   "--reclaim", "2", "--tasks", "80", "--task-seconds", "0.1", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["machine"]["logical_cpus"] >= 1
    r = d["result"]
    up, rc = r["scale_up"], r["reclaim"]
    assert up["workers"] == 4 and up["workers_measured"] == 4
    assert 0 <= up["granted_all_s"] <= up["processes_running_s"] <= up["scale_up_s"] < 60
    assert up["first_worker_s"] <= up["half_workers_s"] <= up["scale_up_s"]
    assert up["worker_cpu_mean_s"] > 0
    assert rc["reclaimed_slots"] == 2 and rc["workers_retired"] == 2 and rc["workers_after"] == 2
    assert rc["released_in_time"] and rc["forced"] == 0 and rc["removed_events"] == 0
    assert rc["heard_s"] <= rc["released_s"] and rc["complete_s"] < 10
    assert r["workload"]["right"] and r["ok"] and r["close_ended_all"]
    assert r["targets"]["forced"]["met"]


def test_a_spec_that_cannot_fit_is_refused_with_the_option_named() -> None:
    with pytest.raises(ValueError, match="must fit"):
        DaskBenchSpec(agents=1, slots_per_agent=2, workers=4)
    out = CliRunner().invoke(app, ["bench", "dask", "--agents", "1", "--slots-per-agent", "2", "--workers", "4"])
    assert out.exit_code == 2 and "must fit" in out.output


def test_worker_start_costs_are_measured_for_each_kind() -> None:
    from apportion.bench.dask_bench import WORKER_KINDS, worker_starts

    r = worker_starts(2, idle_s=0.2)
    assert [k["kind"] for k in r["kinds"]] == list(WORKER_KINDS)
    for k in r["kinds"]:
        assert k["workers"] == 2 and 0 < k["all_connected_s"] < 60, k
        assert k["cpu_per_worker_s"] > 0 and k["idle_cpu_percent"] >= 0, k
