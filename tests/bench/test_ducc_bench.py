"""`apportion bench ducc` at a tiny size: real figures, the right fields, no machine above its order."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from apportion.bench.ducc_bench import DuccBenchSpec, make_config, make_scenario, run
from apportion.cli.main import app

TINY = DuccBenchSpec(machines=40, classes=20, users=12, jobs=80, cycles=3, arrivals=2, seed=3)


def test_the_workload_has_the_promised_shape():
    cfg = make_config(TINY)
    assert len(cfg.hosts) == 40 and all(32 <= gb <= 256 for gb in cfg.hosts.values())
    classes = [c for c in cfg.classes.values() if not c.abstract]
    assert len(classes) == 20 and len({c.priority for c in classes}) == 3
    assert cfg.quantum("--default--") == 15
    sc = make_scenario(TINY)
    assert len(sc.steps[0].jobs) == 80 and sum(len(s.jobs) for s in sc.steps) == 80 + 3 * 2
    assert len({j.user for s in sc.steps for j in s.jobs}) <= 12
    assert make_scenario(TINY) == sc  # the same seed, the same workload


def test_run_reports_timings_and_counts():
    r = run(TINY)
    assert r["cycles_timed"] == 3 and len(r["samples_s"]) == 3 and all(x > 0 for x in r["samples_s"])
    assert r["min_s"] <= r["median_s"] <= r["p95_s"] <= r["max_s"] and r["first_cycle_s"] > 0
    assert r["machines_over_order"] == 0
    assert r["first_cycle"]["new"] > 0 and r["first_cycle"]["jobs"] == 80
    assert len(r["per_cycle"]) == 4
    assert r["workload"]["capacity_quanta"] > 0 and r["peak_rss_mib"] > 1
    assert set(r["targets"]) == {"median_s", "peak_rss_mib"}
    assert r["targets"]["median_s"]["target"] == 0.2


def test_command_json_and_table():
    args = ["bench", "ducc", "--machines", "30", "--users", "10", "--jobs", "60", "--cycles", "2", "--arrivals", "1"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert set(doc) == {"machine", "result"} and doc["result"]["cycles_timed"] == 2
    assert doc["machine"]["logical_cpus"] >= 1
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and "full cycle, median of 2" in res.output
