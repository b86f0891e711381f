"""The command as a user runs it: bad files give every problem, no traceback, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BAD = """\
hosts:
  - {name: "h[1-4]", slots: 4}
  - {name: h2, slots: 2}
resource_groups:
  - {name: RG1, hosts: ["h[1-4]"]}
  - {name: RG2, select: "select(type == && linux)"}
consumers:
  - {path: /LOB1, owned: 2}
  - {path: /LOB1/app1, owned: 3, lend: true, lend_limit: 5}
  - {path: /LOB1/app1/x/y/z/w, share_ratio: 1}
  - {path: /LOB2, share_ratio: -1, lend: true}
  - {path: /LOB2/b, groups: {RG9: {owned: 1}}}
"""


def apportion(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "apportion.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_validate_lists_every_problem_with_file_and_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(BAD)
    r = apportion("validate", str(f))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr + r.stdout
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(str(f))]
    text = "\n".join(lines)
    # every problem, each with its line and field
    assert f"{f}:3: hosts" in text  # h2 given twice
    assert f"{f}:6: resource_groups[1].select" in text  # select() does not parse
    assert f"{f}:9: consumers[1]" in text and "lend_limit" in text  # above owned
    assert "owned" in text and "/LOB1" in text  # parent owns less than its child
    assert f"{f}:10: consumers[2].path" in text  # deeper than 5 levels
    assert f"{f}:11: consumers[3].share_ratio" in text  # negative
    assert "lend" in text and "consumers[3]" in text  # lend settings on a non-leaf
    assert "RG9" in text  # unknown group
    assert len(lines) >= 8


def test_solve_refuses_a_bad_scenario_and_prints_nothing_on_stdout(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(BAD + "timeline:\n  - at: 0\n    requests: [{id: r, consumer: /LOB2, max: 1}]\n")
    r = apportion("solve", str(f), "--json")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert "consumers" in r.stderr


def test_unreadable_and_unknown_files(tmp_path):
    r = apportion("validate", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "missing.yaml" in r.stderr
    f = tmp_path / "plan.txt"
    f.write_text("hosts: []")
    r = apportion("validate", str(f))
    assert r.returncode == 2 and "plan.txt" in r.stderr


def test_toml_scenario_solves_and_json_is_stable(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("""
[[hosts]]
name = "h[1-3]"
slots = 6

[[resource_groups]]
name = "RG"
hosts = ["h[1-3]"]

[[consumers]]
path = "/A"
share_ratio = 1

[[consumers]]
path = "/B"
share_ratio = 2

[[timeline]]
at = 0
requests = [{id = "a", consumer = "/A", max = 100}, {id = "b", consumer = "/B", max = 100}]
""")
    r = apportion("solve", str(f), "--json")
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)["snapshots"][0]
    assert snap["at"] == 0
    assert snap["consumers"]["/A"]["groups"]["RG"]["held"] == 6
    assert snap["consumers"]["/B"]["groups"]["RG"]["held"] == 12
    assert snap["requests"]["b"]["held"] == 12
    for key in ("held", "owned", "borrowed", "shared", "lent", "deserved", "demand"):
        assert key in snap["consumers"]["/A"]["groups"]["RG"]


def test_an_imported_ducc_plan_validates_and_its_errors_carry_lines(tmp_path):
    src = tmp_path / "site"
    src.mkdir()
    (src / "ducc.classes").write_text(
        "Nodepool --default-- { nodefile = ducc.nodes; share-quantum = 15 }\n"
        "Class fair { policy = FAIR_SHARE; priority = 10; weight = 100; nodepool = --default-- }\n"
    )
    (src / "ducc.nodes").write_text("n1\nn2\n")
    plan = tmp_path / "plan.yaml"
    r = apportion("import", "ducc", str(src), "--memory", "n[1-2]=64", "--out", str(plan))
    assert r.returncode == 0, r.stderr
    r = apportion("validate", str(plan))
    assert r.returncode == 0 and "1 nodepools" in r.stdout and "2 hosts" in r.stdout, r.stdout + r.stderr
    # break it: the class names a nodepool that does not exist
    text = plan.read_text().replace("nodepool: --default--", "nodepool: nowhere", 1)
    plan.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "nodepool: nowhere" in ln)
    r = apportion("validate", str(plan))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{plan}:{line}:" in r.stderr and "nowhere" in r.stderr
    # and solve runs it as a DUCC scenario (no timeline: nothing happens)
    plan.write_text(text.replace("nodepool: nowhere", "nodepool: --default--", 1))
    r = apportion("solve", str(plan), "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == {"snapshots": []}, r.stderr


def test_an_engine_that_does_not_settle_is_reported_not_a_traceback(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import apportion.scenario.runner as runner
    from apportion.cli.main import app

    f = tmp_path / "s.yaml"
    f.write_text("hosts: [{name: h1, slots: 2}]\nresource_groups: [{name: RG, hosts: [h1]}]\n"
                 "consumers: [{path: /A}]\ntimeline: [{at: 0, requests: [{id: a, consumer: /A, max: 2}]}]\n")
    monkeypatch.setattr(runner, "MAX_CYCLES_PER_SETTLE", 0)
    r = CliRunner().invoke(app, ["solve", str(f)])
    assert r.exit_code == 3
    assert "did not reach a steady state" in r.output and "Traceback" not in r.output


def test_plan_diff_shows_reclaims_with_deadlines_before_anything_is_applied(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("""\
hosts: [{name: "h[1-3]", slots: 6}]
resource_groups: [{name: RG1, hosts: ["h[1-3]"]}]
consumers:
  - {path: /A, grace: 30}
  - {path: /B, grace: 30}
timeline:
  - at: 0
    requests: [{id: a, consumer: /A, max: 100}, {id: b, consumer: /B, max: 100}]
  - at: 10
""")
    new = tmp_path / "new.yaml"
    new.write_text("""\
hosts: [{name: "h[1-3]", slots: 6}]
resource_groups: [{name: RG1, hosts: ["h[1-3]"]}]
consumers:
  - {path: /A, share_ratio: 2, grace: 30}
  - {path: /B, grace: 30}
""")
    r = apportion("plan", "diff", str(old), str(new), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["moves"] == [] and d["removed"] == []
    assert [(x["request"], x["slots"], x["deadline"]) for x in d["reclaims"]] == [("b", 3, 40.0)]
    assert d["deserved"]["/A"]["RG1"] == {"before": 9, "after": 12}
    # a bad new plan is refused with its problems and changes nothing
    new.write_text(new.read_text().replace("share_ratio: 2", "share_ratio: -1"))
    r = apportion("plan", "diff", str(old), str(new))
    assert r.returncode == 2 and "share_ratio" in r.stderr and "Traceback" not in r.stderr


def test_solve_tells_what_a_new_plan_removed(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("""\
hosts: [{name: "h[1-3]", slots: 6}]
resource_groups: [{name: RG, hosts: ["h[1-3]"]}]
consumers: [{path: /A}, {path: /B}]
timeline:
  - at: 0
    requests: [{id: a, consumer: /A, max: 100}, {id: b, consumer: /B, max: 100}]
  - at: 10
    plan: {consumers: [{path: /A}]}
""")
    r = apportion("solve", str(f))
    assert r.returncode == 0, r.stderr
    assert "removed by the new plan" in r.stdout and "/B is no longer in the plan" in r.stdout
