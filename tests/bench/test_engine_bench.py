"""`apportion bench engine` at toy sizes: real figures, the right fields, no overbooked host."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from apportion.bench.engine_bench import capacity_check, curve, growth, percentile, run, scaled
from apportion.bench.machine import machine_info
from apportion.bench.workload import WorkloadSpec, make_workload
from apportion.cli.main import app
from apportion.engine import Engine

TINY = WorkloadSpec(hosts=60, slots_per_host=4, leaves=12, requests=150, groups=4, seed=5)


def test_cold_cycle_fills_but_never_overbooks_a_host():
    wl = make_workload(TINY)
    engine = Engine(wl.plan)
    for r in wl.requests:
        engine.submit(r)
    engine.cycle(0.0)
    check = capacity_check(engine)
    assert check["hosts_over_capacity"] == 0
    assert check["capacity_slots"] == 60 * 4
    assert 0 < check["held_slots"] <= check["capacity_slots"]


def test_run_reports_positive_timings_and_consistent_counts():
    r = run(TINY, steady_cycles=4, change_fraction=0.05)
    assert r["build_submit_s"] > 0 and r["cold_s"] > 0 and r["cold_cpu_s"] >= 0
    st = r["steady"]
    assert len(st["samples_s"]) == 4 and all(x > 0 for x in st["samples_s"])
    assert st["min_s"] <= st["median_s"] <= st["p95_s"] <= st["max_s"]
    assert st["changes"] > 0
    assert r["cold"]["hosts_over_capacity"] == 0 and st["after_hosts_over_capacity"] == 0
    assert r["cold"]["grants"] > 0
    assert r["open_requests"] == TINY.requests  # churn releases as many as it submits
    assert r["peak_rss_mib"] > 1
    assert r["workload"]["depth"] == 4 and r["workload"]["demand_slots"] > r["workload"]["capacity_slots"]
    assert set(r["targets"]) == {"cold_s", "steady_median_s", "peak_rss_mib"}


def test_same_seed_same_decisions():
    def decisions():
        wl = make_workload(TINY)
        e = Engine(wl.plan)
        for q in wl.requests:
            e.submit(q)
        return e.cycle(0.0)

    assert decisions() == decisions()


def test_command_json_has_the_fields():
    res = CliRunner().invoke(app, ["bench", "engine", "--hosts", "40", "--slots-per-host", "4", "--leaves", "8",
                                   "--requests", "100", "--steady-cycles", "3", "--seed", "2", "--json",
                                   "--tracemalloc"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert set(doc["machine"]) >= {"cpu", "logical_cpus", "ram_gib", "python"}
    r = doc["result"]
    assert r["spec"] == {"hosts": 40, "slots_per_host": 4, "leaves": 8, "requests": 100, "groups": 4, "seed": 2, "kinds": 1}
    assert r["cold_s"] > 0 and r["build_submit_s"] > 0
    assert r["steady"]["median_s"] > 0 and r["steady"]["p95_s"] > 0
    assert r["peak_rss_mib"] > 0 and r["tracemalloc_peak_mib"] > 0
    assert r["cold"]["hosts_over_capacity"] == 0


def test_command_table():
    res = CliRunner().invoke(app, ["bench", "engine", "--hosts", "20", "--leaves", "4", "--requests", "40",
                                   "--steady-cycles", "2"])
    assert res.exit_code == 0, res.output
    assert "cold first cycle" in res.output and "steady cycle, median of 2" in res.output
    assert "machine" in res.output


def test_command_rejects_more_groups_than_hosts():
    res = CliRunner().invoke(app, ["bench", "engine", "--hosts", "2", "--groups", "3"])
    assert res.exit_code != 0


def test_curve_scales_and_runs_each_point_in_a_child():
    base = WorkloadSpec(hosts=100, leaves=10, requests=200, seed=3)
    assert scaled(base, 1000) == WorkloadSpec(hosts=1000, leaves=100, requests=2000, seed=3)
    points = curve(WorkloadSpec(hosts=40, slots_per_host=4, leaves=8, requests=80), 2, 0.05, points=(20, 40))
    assert [p["spec"]["hosts"] for p in points] == [20, 40]
    assert [p["spec"]["requests"] for p in points] == [40, 80]
    assert all(p["cold_s"] > 0 and p["cold"]["hosts_over_capacity"] == 0 for p in points)
    exps = growth(points)
    assert exps[0] is None and isinstance(exps[1], float)


def test_percentile_and_machine():
    assert percentile([5, 1, 4, 2, 3], 50) == 3
    assert percentile(list(range(1, 21)), 95) == 19
    assert percentile([7.0], 95) == 7.0
    m = machine_info()
    assert m["logical_cpus"] >= 1 and m["ram_gib"] > 0 and m["cpu"]


def test_kinds_3_runs_with_vector_requests_and_no_host_over():
    res = CliRunner().invoke(app, ["bench", "engine", "--hosts", "40", "--slots-per-host", "8", "--leaves", "8",
                                   "--requests", "100", "--steady-cycles", "3", "--seed", "2", "--json",
                                   "--kinds", "3"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)["result"]
    assert r["spec"]["kinds"] == 3
    assert r["cold"]["grants"] > 0 and r["cold"]["hosts_over_capacity"] == 0
    assert r["steady"]["after_hosts_over_capacity"] == 0
