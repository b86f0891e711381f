"""DUCC scenario files: what they may say, the problems they report (file:line: field: reason),
and what `apportion solve` / `validate` do with them (docs/plan-format.md, "DUCC scenarios")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from apportion.importers.ducc import load_ducc
from apportion.importers.ducc.to_plan import dump_plan_yaml
from apportion.plan.ducc_scenario import ducc_scenario_from_directory, load_ducc_scenario
from apportion.plan.errors import PlanError
from apportion.scenario.ducc_runner import run


def apportion(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "apportion.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(PlanError) as e:
        load_ducc_scenario(path)
    return [str(p) for p in e.value.problems]


SIMPLE = """\
ducc:
  properties: {ducc.rm.share.quantum: 4, ducc.rm.prediction: false}
hosts:
  - {name: "m[1-2]", memory: 16}
timeline:
  - at: 0
    jobs:
      - {id: a, user: ann, memory: 4, work_items: 1000}
      - {id: b, user: bob, memory: 4, work_items: 1000}
"""


def test_defaults_one_nodepool_and_duccs_default_classes(tmp_path):
    sc = load_ducc_scenario(write(tmp_path / "s.yaml", SIMPLE))
    cfg = sc.config
    assert list(cfg.nodepools) == ["--default--"] and dict(cfg.hosts) == {"m1": 16, "m2": 16}
    assert {c.name for c in cfg.schedulable_classes()} == {
        "background", "low", "normal", "high", "weekly", "urgent", "standalone", "fixed", "debug", "JobDriver",
        "reserve"}
    assert cfg.quantum("--default--") == 4 and cfg.properties.prediction is False
    assert sc.cycle is None and sc.report == "steps"
    a = sc.steps[0].jobs[0]
    assert (a.cls, a.threads, a.init_seconds, a.seconds_per_item, a.max_processes, a.reserve) == (
        "normal", 4, 0.0, 1.0, None, False)
    # without a clock, one snapshot per step: two users share 8 quanta equally
    (snap,) = run(sc)
    assert snap["steps"] == ["timeline[0]"] and snap["end"]
    assert [snap["jobs"][j]["held"] for j in "ab"] == [4, 4]
    assert snap["users"]["ann"]["quanta"] == 4


def test_files_are_read_relative_to_the_scenario(tmp_path):
    write(tmp_path / "conf" / "site.classes",
          "Nodepool big { nodefile = big.nodes }\nNodepool small { }\n"
          "Class batch { policy = FAIR_SHARE; nodepool = big; weight = 1; default = true }\n"
          "Class svc { policy = FIXED_SHARE; nodepool = small; max-allotment = 8 }\n")
    write(tmp_path / "conf" / "big.nodes", "b[1-2]\n")
    write(tmp_path / "conf" / "more.nodes", "s1\n")
    write(tmp_path / "conf" / "site.users", "User ann { max-allotment.svc = 16 }\n")
    f = write(tmp_path / "s.yaml", """\
ducc:
  classes: conf/site.classes
  nodes: [conf/more.nodes]
  users: conf/site.users
  properties: {ducc.rm.share.quantum: 2}
hosts:
  - {name: "b[1-2]", memory: 8}
  - {name: s1, memory: 4}
cycle: 5
report: cycles
until: 10
timeline:
  - at: 0
    jobs:
      - {id: j, user: bob, memory: 2, work_items: 100000}
      - {id: k, user: ann, class: svc, memory: 2, max_processes: 1}
""")
    sc = load_ducc_scenario(f)
    cfg = sc.config
    assert cfg.pool_hosts("big") == ["b1", "b2"] and cfg.pool_hosts("small") == ["s1"]
    assert cfg.class_allotment("ann", "svc") == 8 and cfg.class_allotment("bob", "svc") == 4
    snaps = run(sc)
    assert [s["cycle"] for s in snaps] == [0, 1, 2] and snaps[-1]["end"]
    assert snaps[0]["jobs"]["k"]["machines"] == {"s1": 1}
    assert set(snaps[-1]["jobs"]["j"]["machines"]) <= {"b1", "b2"}


def test_a_scenario_reports_every_problem_with_its_line(tmp_path):
    f = write(tmp_path / "s.yaml", """\
ducc:
  properties: {ducc.rm.share.quantum: 4, ducc.rm.quantum: 2}
hosts:
  - {name: "m[1-2]", memory: 16}
  - {name: m2, memory: 8}
cycle: 0
timeline:
  - at: 0
    jobs:
      - {id: a, user: ann, class: normel, memory: 4}
      - {id: a, user: bob, memory: 4, threads: 0}
      - {id: r, user: eve, class: normal, memory: 16, reserve: true}
      - {id: r2, user: eve, memory: 16, reserve: true, work_items: 3}
      - {id: f, user: fay, class: fair-base, memory: 1}
      - {id: g, user: gus, class: reserve, memory: 4}
  - at: -5
    cancel: [zz]
    nodes: {vary_off: [m9], vary_on: ["m[1-2]"], dead: [m1], alive: [m1]}
""")
    got = problems(f)
    expected = [
        "s.yaml:2: ducc.properties.ducc.rm.quantum: unknown DUCC property",
        "s.yaml:5: hosts[1].name: m2 already defined by hosts[0]",
        "s.yaml:6: cycle: must be greater than 0 (got 0)",
        "s.yaml:10: timeline[0].jobs[0].class: class normel is not defined in the DUCC configuration "
        "(did you mean normal?)",
        "s.yaml:11: timeline[0].jobs[1].threads: must be at least 1 (got 0)",
        "s.yaml:11: timeline[0].jobs[1].id: job id a already used at timeline[0].jobs[0]",
        "s.yaml:12: timeline[0].jobs[2].class: class normal is FAIR_SHARE (preemptable); a reservation needs "
        "a RESERVE or FIXED_SHARE class",
        "s.yaml:13: timeline[0].jobs[3].work_items: does not apply to a reservation",
        "s.yaml:14: timeline[0].jobs[4].class: class fair-base is abstract",
        "s.yaml:15: timeline[0].jobs[5].class: class reserve is a RESERVE class: it takes reservations",
        "s.yaml:16: timeline[1].at: must be at least 0",
        "s.yaml:17: timeline[1].cancel[0]: cannot cancel zz: it is not submitted",
        "s.yaml:18: timeline[1].nodes.alive[0]: host m1 is also in nodes.dead",
        "s.yaml:18: timeline[1].nodes.vary_off[0]: unknown host m9",
    ]
    for want in expected:
        assert any(g.startswith(f"{tmp_path}/{want}") for g in got), (want, got)
    assert len(got) == len(expected), got


def test_files_that_do_not_exist_and_errors_in_duccs_own_files(tmp_path):
    write(tmp_path / "bad.classes", "Nodepool --default-- { }\nClass c { policy = FAIR_SHARE; nodepool = nowhere }\n")
    f = write(tmp_path / "s.yaml", "ducc: {classes: nope.classes, users: none.users}\nhosts: [{name: h, memory: 4}]\n")
    got = problems(f)
    assert any(g.startswith(f"{f}:1: ducc.classes: nope.classes: no such file") for g in got), got
    assert any(g.startswith(f"{f}:1: ducc.users: none.users: no such file") for g in got), got
    f.write_text("ducc: {classes: bad.classes}\nhosts: [{name: h, memory: 4}]\n")
    got = problems(f)
    assert any(g.startswith(f"{tmp_path / 'bad.classes'}:2: ") and "nowhere" in g for g in got), got


def test_hosts_need_memory(tmp_path):
    write(tmp_path / "n.nodes", "h1\nh2\n")
    f = write(tmp_path / "s.yaml", "ducc: {nodes: n.nodes}\nhosts: [{name: h1, memory: 4}]\n")
    got = problems(f)
    assert len(got) == 1 and "no memory size for 1 host(s)" in got[0] and "h2" in got[0]


def test_a_plan_written_by_apportion_import_ducc_is_a_scenario_too(tmp_path):
    src = tmp_path / "site"
    write(src / "ducc.classes", "Nodepool --default-- { nodefile = ducc.nodes; share-quantum = 4 }\n"
          "Class fair { policy = FAIR_SHARE; nodepool = --default--; default = true }\n")
    write(src / "ducc.nodes", "n1\nn2\n")
    cfg = load_ducc(src, memory={"n1": 16, "n2": 16})
    f = write(tmp_path / "plan.yaml", dump_plan_yaml(cfg) + """\
timeline:
  - at: 0
    jobs: [{id: a, user: ann, memory: 4, work_items: 1000}]
""")
    sc = load_ducc_scenario(f)
    assert sc.config == cfg
    (snap,) = run(sc)
    assert snap["jobs"]["a"]["held"] == 8  # 1000 items / 4 threads, doubling settles at 8 quanta


def test_a_new_configuration_in_a_step(tmp_path):
    write(tmp_path / "a.classes", "Nodepool --default-- { }\n"
          "Class hi { policy = FAIR_SHARE; nodepool = --default--; weight = 300; default = true }\n"
          "Class lo { policy = FAIR_SHARE; nodepool = --default--; weight = 100 }\n")
    write(tmp_path / "b.classes", (tmp_path / "a.classes").read_text().replace("300", "100"))
    f = write(tmp_path / "s.yaml", """\
ducc: {classes: a.classes, properties: {ducc.rm.prediction: false}}
hosts: [{name: "h[1-2]", memory: 8}]
timeline:
  - at: 0
    jobs:
      - {id: x, user: ann, class: hi, memory: 1, work_items: 100000}
      - {id: y, user: bob, class: lo, memory: 1, work_items: 100000}
  - at: 10
    ducc: {classes: b.classes, properties: {ducc.rm.prediction: false}}
""")
    first, second = run(load_ducc_scenario(f))
    assert [first["jobs"][j]["held"] for j in "xy"] == [12, 4]
    assert [second["jobs"][j]["counted"] for j in "xy"] == [8, 8]


def test_cancel_and_a_job_that_can_never_fit_end_the_run(tmp_path):
    f = write(tmp_path / "s.yaml", """\
ducc: {properties: {ducc.rm.share.quantum: 4}}
hosts: [{name: m1, memory: 16}]
cycle: 10
timeline:
  - at: 0
    jobs:
      - {id: huge, user: ann, memory: 64, work_items: 10}
      - {id: svc, user: bob, memory: 4}
  - at: 30
    cancel: [svc]
""")
    snaps = run(load_ducc_scenario(f))
    end = snaps[-1]
    assert end["end"] and end["ended"] == "stalled" and end["cancelled"] == {"svc": 30.0}
    assert list(end["jobs"]) == ["huge"]
    assert end["jobs"]["huge"]["held"] == 0 and end["jobs"]["huge"]["state"] in ("waiting", "deferred")
    assert end["cycle"] < 30  # it stops once nothing can change


def test_until_stops_the_clock(tmp_path):
    f = write(tmp_path / "s.yaml", SIMPLE + "cycle: 10\nuntil: 25\n")
    snaps = run(load_ducc_scenario(f))
    assert [s["cycle"] for s in snaps] == [0, 2] and snaps[-1]["at"] == 20 and snaps[-1]["ended"] == "until"


# -- the command -----------------------------------------------------------------------------


def test_solve_and_validate_a_ducc_scenario(tmp_path):
    f = write(tmp_path / "s.yaml", SIMPLE)
    r = apportion("validate", str(f))
    assert r.returncode == 0 and "a DUCC scenario: 2 hosts, 1 nodepools, 11 classes, 2 jobs" in r.stdout, r.stderr
    r = apportion("solve", str(f), "--json")
    assert r.returncode == 0, r.stderr
    (snap,) = json.loads(r.stdout)["snapshots"]
    assert snap["jobs"]["a"]["counted"] == 4 and snap["jobs"]["a"]["state"] == "running"
    r = apportion("solve", str(f))
    assert r.returncode == 0 and "ann" in r.stdout and "8 of 8 quanta in use" in r.stdout


def test_solve_refuses_a_bad_ducc_scenario_with_every_problem(tmp_path):
    f = write(tmp_path / "s.yaml", SIMPLE.replace("memory: 4, work_items", "memory: -4, work_items"))
    r = apportion("solve", str(f), "--json")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert f"{f}:8: timeline[0].jobs[0].memory: must be greater than 0" in r.stderr.replace("\n", "")
    r = apportion("solve", str(f), "--jobs", str(f))
    assert r.returncode == 2 and "only with a DUCC configuration directory" in r.stderr


def test_solve_a_ducc_configuration_directory_with_a_jobs_file(tmp_path):
    site = tmp_path / "site"
    write(site / "ducc.classes", "Nodepool --default-- { nodefile = ducc.nodes }\n"
          "Class fair { policy = FAIR_SHARE; nodepool = --default--; default = true }\n")
    write(site / "ducc.nodes", "n[1-2]\n")
    jobs = write(tmp_path / "jobs.yaml", """\
hosts: [{name: "n[1-2]", memory: 16}]
timeline:
  - at: 0
    jobs: [{id: a, user: ann, memory: 4, work_items: 1000}]
""")
    sc = ducc_scenario_from_directory(site, jobs, {"ducc.rm.share.quantum": "4"})
    assert sc.config.quantum("--default--") == 4 and [j.cls for j in sc.steps[0].jobs] == ["fair"]
    r = apportion("solve", str(site), "--jobs", str(jobs), "-p", "ducc.rm.share.quantum=4", "--json")
    assert r.returncode == 0, r.stderr
    (snap,) = json.loads(r.stdout)["snapshots"]
    assert snap["jobs"]["a"]["held"] == 8
    # jobs.yaml in the directory is the default
    write(site / "jobs.yaml", jobs.read_text())
    r = apportion("solve", str(site), "-p", "ducc.rm.share.quantum=4", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["snapshots"][0]["jobs"]["a"]["held"] == 8
    # a jobs file may not bring its own configuration
    bad = write(tmp_path / "bad.yaml", "ducc: {}\n" + jobs.read_text())
    r = apportion("solve", str(site), "--jobs", str(bad))
    assert r.returncode == 2 and "leave ducc: out of the jobs file" in r.stderr


def test_unknown_fields_suggest_the_right_name(tmp_path):
    f = write(tmp_path / "s.toml", """\
cycle = 10
reprot = "steps"

[ducc]
clases = "x"

[[hosts]]
name = "m1"
memory = 16

[[timeline]]
at = 0
jobs = [ { id = "a", user = "ann", memory = 4, thread = 2 } ]
""")
    assert problems(f) == [
        f"{f}:2: reprot: unknown field; did you mean 'report'?",
        f"{f}:5: ducc.clases: unknown field; did you mean 'classes'?",
        f"{f}:13: timeline[0].jobs[0].thread: unknown field; did you mean 'threads'?",
    ]
