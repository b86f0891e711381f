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
