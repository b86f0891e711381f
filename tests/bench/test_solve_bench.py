"""`apportion bench solve` and `apportion bench ducc --end-to-end` at tiny sizes: the scenario
files hold the benchmarks' workloads, and the command is timed as a user runs it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from apportion.bench.ducc_bench import DuccBenchSpec, make_scenario
from apportion.bench.scenario_files import ducc_scenario, ego_scenario
from apportion.bench.solve_bench import run_ducc, run_ego
from apportion.bench.workload import WorkloadSpec, make_workload
from apportion.cli.main import app
from apportion.plan import compile_scenario
from apportion.plan.ducc_scenario import compile_ducc_scenario

EGO = WorkloadSpec(hosts=120, slots_per_host=8, leaves=40, requests=300, groups=3, seed=4)
DUCC = DuccBenchSpec(machines=30, classes=6, users=8, jobs=60, cycles=2, arrivals=2, seed=2)


def test_the_ego_scenario_file_holds_the_benchmark_plan_and_requests():
    mapping = ego_scenario(EGO, 0.05)
    sc = compile_scenario(json.loads(json.dumps(mapping)))
    wl = make_workload(EGO)
    assert sc.plan.hosts == wl.plan.hosts and sc.plan.groups == wl.plan.groups
    assert sc.plan.consumers == wl.plan.consumers
    first, second = sc.steps
    assert [(r.id, r.consumer, r.max, r.min, r.order, r.groups) for r in first.requests] == [
        (r.id, r.consumer, r.max, r.min, r.order, r.groups) for r in wl.requests]
    touched = len(second.change) + len(second.release)
    assert touched == round(0.05 * 300) and len(second.requests) == len(second.release) > 0


def test_the_ducc_scenario_file_holds_the_benchmark_jobs():
    sc = compile_ducc_scenario(json.loads(json.dumps(ducc_scenario(DUCC))))
    bench = make_scenario(DUCC)
    assert sc.config == bench.config and (sc.cycle, sc.until) == (bench.cycle, bench.until) == (10.0, 20.0)
    assert _jobs(sc.steps) == _jobs(bench.steps)


def _jobs(steps) -> list:
    return [(s.at, [(j.id, j.user, j.cls, j.memory, j.max_processes, j.threads, j.work_items, j.init_seconds,
                     j.seconds_per_item) for j in s.jobs]) for s in steps]


def test_run_ego_times_the_command_and_checks_its_answer(tmp_path):
    r = run_ego(EGO, 0.05, runs=2, keep=tmp_path / "kept.yaml")
    assert len(r["solve_s"]["samples"]) == 2 and r["solve_s"]["min"] > 0 and r["cpu_s"]["median"] > 0
    assert r["answer"]["snapshots"] == 2 and r["answer"]["requests"][0] == 300
    assert r["json_round_trip_s"]["median"] > 0 and r["ratio_to_json"] > 1
    assert r["met"] == (r["solve_s"]["median"] <= 3.0) and r["target_s"] == 3.0
    assert json.loads((tmp_path / "kept.yaml").read_text())["timeline"][0]["requests"][0]["id"] == "r0"
    assert r["file"]["bytes"] == (tmp_path / "kept.yaml").stat().st_size


def test_run_ducc_times_the_command_over_three_cycles():
    r = run_ducc(DUCC, runs=1)
    assert r["answer"]["cycles"] == 3 and r["answer"]["ended"] == "until" and r["answer"]["at"] == 20
    assert r["scenario"] == {"machines": 30, "jobs": 64, "cycles": 3, "cycle_s": 10.0}
    assert r["target_s"] == 2.0


def test_commands_json_and_table():
    res = CliRunner().invoke(app, ["bench", "solve", "--hosts", "60", "--leaves", "20", "--requests", "100",
                                   "--groups", "2", "--runs", "1", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert set(doc) == {"machine", "result"} and doc["result"]["answer"]["snapshots"] == 2
    res = CliRunner().invoke(app, ["bench", "ducc", "--end-to-end", "--machines", "20", "--users", "5",
                                   "--jobs", "30", "--arrivals", "1", "--runs", "1"])
    assert res.exit_code == 0, res.output
    assert "end to end, median" in res.output and "json.loads + json.dumps" in res.output
