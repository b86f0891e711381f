"""apportion simulate (files, report), compare, map and sweep (on Dask's LocalCluster)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.simulate.sweep import SweepError, load_grid, run_sweep, set_path

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces"
runner = CliRunner()

PLAN = """\
hosts:
  - {name: "h[1-4]", slots: 4}
resource_groups:
  - {name: cpu, hosts: ["h[1-4]"]}
consumers:
  - {path: /A, share_ratio: 1}
  - {path: /B, share_ratio: 3}
"""
MAP = """\
default: /B
rules:
  - {group: "1", consumer: /A}
"""


def _swf(path: Path, n: int = 120, seed: int = 3, nodes: int = 4, procs: tuple[int, ...] = (1, 2, 4, 8),
         gaps: tuple[int, ...] = (0, 1, 5, 30), runs: tuple[int, ...] = (10, 60, 300), asked: tuple[int, ...] = (),
         groups: int = 2) -> Path:
    """``n`` jobs on ``nodes`` nodes of 4 processors; ``asked``: their requested times as
    multiples of the run time (walltimes), none if empty."""
    rng = random.Random(seed)
    lines = ["; Version: 2.2", f"; MaxNodes: {nodes}", f"; MaxProcs: {4 * nodes}"]
    t = 0
    for i in range(1, n + 1):
        t += rng.choice(gaps)
        width = rng.choice(procs)
        run = rng.choice(runs)
        req = run * rng.choice(asked) if asked else -1
        lines.append(f"{i} {t} -1 {run} {width} -1 -1 {width} {req} -1 1 {rng.randint(1, 9)} "
                     f"{rng.randint(1, groups)} -1 1 -1 -1 -1")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def files(tmp_path):
    (tmp_path / "plan.yaml").write_text(PLAN)
    (tmp_path / "map.yaml").write_text(MAP)
    _swf(tmp_path / "t.swf")
    return tmp_path


def _simulate(d: Path, *extra: str, plan: str = "plan.yaml") -> dict:
    r = runner.invoke(app, ["simulate", str(d / plan), str(d / "t.swf"), "--map", str(d / "map.yaml"), "--json",
                            *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_json_contract_names(files):
    res = _simulate(files)
    for key in ("jobs", "makespan", "utilisation", "fairness", "consumers"):
        assert key in res
    assert set(res["fairness"]) >= {"jain", "max_deviation", "mean_deviation"}
    assert res["jobs"] == 120
    for c in res["consumers"].values():
        assert set(c) >= {"jobs", "wait", "bounded_slowdown", "held_mean", "deserved_mean", "shortfall_seconds",
                          "reclaims", "evictions", "lost_slot_seconds", "finish_time_fairness"}
        assert set(c["wait"]) == {"mean", "p50", "p95", "max"}
        assert set(c["bounded_slowdown"]) == {"mean", "p50", "p95", "max"}
    assert sum(c["jobs"] for c in res["consumers"].values()) == 120


def test_how_slots_are_cut_into_hosts_changes_no_figure(files):
    one = files / "one.yaml"
    one.write_text(PLAN.replace('"h[1-4]", slots: 4', "big, slots: 16").replace('["h[1-4]"]', "[big]"))
    sixteen = files / "sixteen.yaml"
    sixteen.write_text(PLAN.replace('"h[1-4]", slots: 4', '"s[1-16]", slots: 1').replace('["h[1-4]"]', '["s[1-16]"]'))
    runs = [_simulate(files, plan=p) for p in ("plan.yaml", "one.yaml", "sixteen.yaml")]
    for r in runs:
        for k in ("wall_seconds", "cpu_seconds", "plan"):
            r.pop(k)
    assert runs[0] == runs[1] == runs[2]


def test_out_writes_files_and_a_self_contained_report(files):
    out = files / "out"
    r = runner.invoke(app, ["simulate", str(files / "plan.yaml"), str(files / "t.swf"), "--map",
                            str(files / "map.yaml"), "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    for name in ("result.json", "consumers.csv", "series.csv", "report.html", "utilisation.png",
                 "held_vs_deserved.png", "waits.png", "shortfall_and_lost.png"):
        assert (out / name).stat().st_size > 0, name
    html = (out / "report.html").read_text()
    assert not re.search(r"https?://", html)
    assert "<script" not in html and "<link" not in html
    assert len(re.findall(r'<img alt="[a-z_]+" src="data:image/png;base64,', html)) == 4
    assert "Who waits longest" in html and "Who is starved" in html and "Reclaims and evictions" in html
    assert (out / "consumers.csv").read_text().splitlines()[0].startswith("consumer,jobs,wait_mean")
    assert json.loads((out / "result.json").read_text())["jobs"] == 120


def test_compare_marks_the_differences(files):
    a = files / "a.json"
    a.write_text(json.dumps(_simulate(files)))
    (files / "plan9.yaml").write_text(PLAN.replace("share_ratio: 3", "share_ratio: 1"))
    b = files / "b.json"
    b.write_text(json.dumps(_simulate(files, plan="plan9.yaml")))
    r = runner.invoke(app, ["simulate", "compare", str(a), str(a), "--json"])
    same = json.loads(r.stdout)
    assert same["marked"] == 0
    r = runner.invoke(app, ["simulate", "compare", str(a), str(b), "--json"])
    assert r.exit_code == 0, r.output
    diff = json.loads(r.stdout)
    assert diff["marked"] > 0
    held = diff["consumers"]["/A"]["held_mean"]
    assert held["diff"] == pytest.approx(held["b"] - held["a"])
    r = runner.invoke(app, ["simulate", "compare", str(a), str(b)])
    assert r.exit_code == 0 and "/A wait_mean" in r.stdout
    bad = files / "bad.json"
    bad.write_text("{}")
    r = runner.invoke(app, ["simulate", "compare", str(a), str(bad)])
    assert r.exit_code == 2 and "not a simulation result" in r.output


def test_map_by_group_then_simulate(files):
    m, p = files / "gen.map.yaml", files / "gen.plan.yaml"
    r = runner.invoke(app, ["simulate", "map", str(files / "t.swf"), "--by", "group", "-o", str(m),
                            "--plan-out", str(p), "--host-slots", "16"])
    assert r.exit_code == 0, r.output
    assert "{group: \"1\", consumer: /g1}" in m.read_text()
    r = runner.invoke(app, ["simulate", str(p), str(files / "t.swf"), "--map", str(m), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert set(res["consumers"]) == {"/g1", "/g2"} and res["capacity"] == 16


def test_bad_inputs_are_clear_errors(files):
    r = runner.invoke(app, ["simulate", str(files / "plan.yaml"), str(files / "t.swf")])
    assert r.exit_code == 2 and "give --map" in r.output
    (files / "wrong.map.yaml").write_text("default: /Nobody\nrules: []\n")
    r = runner.invoke(app, ["simulate", str(files / "plan.yaml"), str(files / "t.swf"), "--map",
                            str(files / "wrong.map.yaml")])
    assert r.exit_code == 2 and "maps to /Nobody, which is not in the plan" in r.output
    (files / "broken.swf").write_text("1 0 -1 10\n")
    r = runner.invoke(app, ["simulate", str(files / "plan.yaml"), str(files / "broken.swf"), "--map",
                            str(files / "map.yaml"), "--kind", "swf"])
    assert r.exit_code == 2 and "broken.swf:1" in r.output


def test_set_path_and_grid_errors():
    data = {"consumers": [{"path": "/A", "share_ratio": 1}], "hosts": [{"name": "h", "slots": 2}]}
    set_path(data, "consumers[/A].share_ratio", 4)
    set_path(data, "hosts[0].slots", 8)
    set_path(data, "hosts[h].memory", 16)
    set_path(data, "policy.share_enforcement", "parent")
    assert data["consumers"][0]["share_ratio"] == 4 and data["hosts"][0] == {"name": "h", "slots": 8, "memory": 16}
    assert data["policy"] == {"share_enforcement": "parent"}
    with pytest.raises(SweepError, match="no item with path /Z"):
        set_path(data, "consumers[/Z].share_ratio", 1)
    with pytest.raises(SweepError, match="no item 5"):
        set_path(data, "hosts[5].slots", 1)


def test_sweep_on_a_dask_local_cluster(files):
    grid = files / "grid.yaml"
    grid.write_text("plan: plan.yaml\ntrace: t.swf\nmap: map.yaml\n"
                    "grid:\n  consumers[/B].share_ratio: [1, 3]\n"
                    "variants:\n  - {name: A owns 8, set: {\"consumers[/A].owned\": 8}}\n")
    spec = load_grid(grid)
    assert [v["name"] for v in spec["variants"]] == ["consumers[/B].share_ratio=1", "consumers[/B].share_ratio=3",
                                                     "A owns 8"]
    on_dask = run_sweep(spec, dask_local=1, dask_processes=False)
    here = run_sweep(spec, workers=1)
    assert "Dask" in on_dask["ran_on"] and here["ran_on"] == "this process"
    for a, b in zip(on_dask["variants"], here["variants"], strict=True):
        for r in (a["result"], b["result"]):
            r.pop("wall_seconds")
            r.pop("cpu_seconds")
        assert a["result"] == b["result"]
    # each variant ran its own plan: B's slice of 16 slots is 8 at 1:1, 12 at 1:3; A owning 8 gets 8 + 2
    assert [v["result"]["consumers"]["/B"]["entitled"] for v in on_dask["variants"]] == [8, 12, 6]
    assert on_dask["variants"][2]["result"]["consumers"]["/A"]["entitled"] == 10
    r = runner.invoke(app, ["sweep", str(grid), "--workers", "1", "--out", str(files / "sw")])
    assert r.exit_code == 0, r.output
    assert (files / "sw" / "sweep.csv").read_text().startswith("variant,jobs,makespan_h")
    assert (files / "sw" / "sweep_overall.png").stat().st_size > 0


def test_a_local_dask_cluster_forks_its_worker_processes(files):
    """--dask-local N starts N worker processes forked from the sweep's own (it has
    imported the simulator already); their figures are the ones one process gives."""
    import os

    from apportion.simulate.sweep import METHOD_KEY, _local_start

    grid = files / "grid.yaml"
    grid.write_text("plan: plan.yaml\ntrace: t.swf\nmap: map.yaml\ngrid:\n  consumers[/B].share_ratio: [1, 2, 3, 5]\n")
    spec = load_grid(grid)
    import sys

    assert _local_start() == ({METHOD_KEY: "fork"} if sys.platform.startswith("linux") and
                              "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD" not in os.environ else {})
    on_dask = run_sweep(spec, dask_local=2)
    here = run_sweep(spec, workers=1)
    assert on_dask["ran_on"] == "a local Dask cluster of 2 workers"
    for a, b in zip(on_dask["variants"], here["variants"], strict=True):
        for r in (a["result"], b["result"]):
            r.pop("wall_seconds")
            r.pop("cpu_seconds")
        assert a["result"] == b["result"]
    assert [v["result"]["consumers"]["/B"]["entitled"] for v in on_dask["variants"]] == [8, 11, 12, 13]


@pytest.mark.skipif(not (SHARED / "ducc" / "mega-15-min").is_dir(), reason="needs ../shared/traces/ducc (not here)")
def test_ducc_mega_15_min_replays_through_duccs_cycle(tmp_path):
    plan = tmp_path / "ducc.yaml"
    plan.write_text(f"ducc:\n  directory: {SHARED / 'ducc'}\n  properties: {{ducc.rm.share.quantum: 15}}\ncycle: 10\n")
    r = runner.invoke(app, ["simulate", str(plan), str(SHARED / "ducc" / "mega-15-min"), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["jobs"] == 32 and res["unfinished"] == 0
    assert 900 < res["makespan"] < 1100  # the last job ends at about 990 s, as solve's replay shows
    assert res["capacity"] == 138
    assert 0 < res["utilisation"] <= 1
    assert res["evictions"] > 0  # the early big jobs shrink as later users arrive


def test_wide_jobs_on_small_hosts_give_the_one_host_figures(files):
    """Curie's own hosts against one host of the same slots, in little: wide rigid jobs
    span dozens of 16-slot hosts (one allocation per host), and every figure is the
    one-host layout's, which holds each job in one allocation."""
    _swf(files / "t.swf", n=400, seed=11, nodes=256, procs=(1, 3, 16, 40, 100, 250, 700), gaps=(0, 5, 30, 120),
         runs=(20, 300, 1800), asked=(1, 2, 4), groups=3)
    (files / "map.yaml").write_text('default: /C\nrules:\n  - {group: "1", consumer: /A}\n'
                                    '  - {group: "2", consumer: /B}\n')
    plan = ("hosts:\n  - {name: HOSTS, slots: SLOTS}\nresource_groups:\n  - {name: cpu, hosts: [HOSTS]}\n"
            "consumers:\n  - {path: /A, share_ratio: 1}\n  - {path: /B, share_ratio: 2}\n"
            "  - {path: /C, share_ratio: 1}\n")
    (files / "one.yaml").write_text(plan.replace("HOSTS", "big").replace("SLOTS", "1024"))
    (files / "many.yaml").write_text(plan.replace("HOSTS", '"n[1-64]"').replace("SLOTS", "16"))
    runs = [_simulate(files, plan=p) for p in ("one.yaml", "many.yaml")]
    for r in runs:
        for k in ("wall_seconds", "cpu_seconds", "plan"):
            r.pop(k)
    first = runs[0]
    assert first["jobs"] == 400 and first["never_started"] == 0 and first["utilisation"] > 0.5
    assert first["evictions"] >= 1  # a reclaim ran too, on allocations spread over hosts
    assert runs[0] == runs[1]
