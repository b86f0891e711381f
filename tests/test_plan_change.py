"""A timeline step that carries a new plan, as a user writes it."""

from __future__ import annotations

import pytest

from apportion.plan import PlanError, load_scenario
from apportion.scenario.runner import run

BASE = """\
hosts: [{name: "h[1-3]", slots: 6}]
resource_groups: [{name: RG, hosts: ["h[1-3]"]}]
consumers:
  - {path: /A, grace: 30}
  - {path: /B, grace: 30}
timeline:
  - at: 0
    requests: [{id: a, consumer: /A, max: 100}, {id: b, consumer: /B, max: 100}]
"""


def held(snap, *paths):
    return [snap["consumers"][p]["held"] for p in paths if p in snap["consumers"]]


def test_an_inline_plan_changes_ratios_with_grace_and_later_steps_use_it(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(BASE + """\
  - at: 10
    plan:
      consumers:
        - {path: /A, share_ratio: 2, grace: 30}
        - {path: /B, grace: 30}
        - {path: /C}
  - at: 20
    requests: [{id: c, consumer: /C, max: 3}]
  - at: 60
""")
    s = {snap["at"]: snap for snap in run(load_scenario(f))}
    assert held(s[0], "/A", "/B") == [9, 9]
    # A:B is now 2:1 (12:6): 3 of B's slots are reclaimed with B's grace
    assert held(s[10], "/A", "/B", "/C") == [9, 9, 0]
    assert [(r["request"], r["slots"], r["deadline"]) for r in s[10]["reclaiming"]] == [("b", 3, 40.0)]
    # C, new in the plan, asks for 3: A:B:C = 2:1:1, C capped at 3, A:B split 15 as 10:5
    assert held(s[60], "/A", "/B", "/C") == [10, 5, 3]


def test_every_problem_of_a_step_plan_is_reported_with_its_line(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(BASE + """\
  - at: 10
    plan:
      consumers:
        - {path: /A, share_ratio: -2}
      teams: []
  - at: 20
    requests: [{id: c, consumer: /C, max: 3}]
""")
    with pytest.raises(PlanError) as e:
        load_scenario(f)
    text = str(e.value)
    assert f"{f}:12: timeline[1].plan.consumers[0].share_ratio" in text
    assert f"{f}:13: timeline[1].plan.teams" in text
    assert f"{f}:15: timeline[2].requests[0].consumer: unknown consumer /C" in text


def test_a_plan_file_and_what_it_removes(tmp_path):
    (tmp_path / "smaller.yaml").write_text("""\
hosts: [{name: "h[1-2]", slots: 6}]
resource_groups: [{name: RG, hosts: ["h[1-2]"]}]
consumers: [{path: /A}]
""")
    f = tmp_path / "s.yaml"
    f.write_text(BASE + "  - {at: 10, plan: smaller.yaml}\n")
    s = run(load_scenario(f))
    last = s[-1]
    assert "/B" not in last["consumers"] and "b" not in last["requests"]
    removed = last["removed_by_plan"]
    assert sum(r["slots"] for r in removed if r["request"] == "b") == 9
    assert all(r["reason"].startswith("plan change: ") for r in removed)
    assert held(last, "/A") == [12]  # h3 is gone; A takes the rest of h1 and h2


# -- owned hosts (seed 000) ------------------------------------------------------------

OWNERS = """\
hosts: [{name: "h[1-6]", slots: 4}]
resource_groups: [{name: RG1, hosts: ["h[1-6]"]}]
consumers:
  - {path: /A, owned_hosts: 2, rank: 1}
  - {path: /B, owned_hosts: 2, rank: 2, grace: 30}
  - {path: /C, owned_hosts: 2, rank: 3, grace: 60}
"""
GROWN = OWNERS.replace("/A, owned_hosts: 2", "/A, owned_hosts: 3").replace("/C, owned_hosts: 2", "/C, owned_hosts: 1")
WORK = """\
timeline:
  - at: 5
    requests:
      - {id: a, consumer: /A, max: 12, order: 4}
      - {id: b, consumer: /B, max: 8, order: 4}
      - {id: c, consumer: /C, max: 6}
"""


def _owned(snap, path):
    return snap["consumers"][path]["groups"]["RG1"]["owned_hosts"]


def test_a_step_plan_moves_only_the_hosts_it_must(tmp_path):
    f = tmp_path / "s.yaml"
    step = "  - at: 10\n    plan:\n      consumers:\n" + "".join(
        "        " + line.strip() + "\n" for line in GROWN.split("consumers:\n")[1].splitlines())
    f.write_text(OWNERS + WORK + step + "  - at: 70\n")
    s = {snap["at"]: snap for snap in run(load_scenario(f))}
    assert [_owned(s[5], p) for p in ("/A", "/B", "/C")] == [["h1", "h2"], ["h3", "h4"], ["h5", "h6"]]
    # A takes one host, from C (the worst rank), the one C's own work uses least (h6:
    # 2 slots); B is not touched. C's 2 slots there are reclaimed with C's grace (60).
    assert [_owned(s[10], p) for p in ("/A", "/B", "/C")] == [["h1", "h2", "h6"], ["h3", "h4"], ["h5"]]
    assert [(r["request"], r["host"], r["slots"], r["deadline"]) for r in s[10]["reclaiming"]] == [
        ("c", "h6", 2, 70.0)]
    assert held(s[70], "/A", "/B", "/C") == [12, 8, 4]
    assert s[70]["requests"]["a"]["hosts"] == {"h1": 4, "h2": 4, "h6": 4}


def test_plan_diff_json_lists_moves_and_reclaims(tmp_path):
    import json
    import subprocess
    import sys

    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(OWNERS + WORK)
    new.write_text(GROWN)
    done = subprocess.run([sys.executable, "-c", "from apportion.cli.main import main; main()",
                           "plan", "diff", str(old), str(new), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert d["moves"] == [{"host": "h6", "group": "RG1", "from": "/C", "to": "/A", "slots": 4}]
    assert [{k: r[k] for k in ("request", "host", "slots", "deadline")} for r in d["reclaims"]] == [
        {"request": "c", "host": "h6", "slots": 2, "deadline": 65.0}]
    # the same plan again moves nothing
    same = tmp_path / "same.yaml"
    same.write_text(OWNERS)
    from apportion.plan import load_plan
    from apportion.scenario.diff import plan_diff

    assert plan_diff(load_scenario(old), load_plan(same))["moves"] == []
