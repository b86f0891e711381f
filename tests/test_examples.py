"""The example scenarios in examples/, run the way a user runs them.

Each example starts with a comment block that promises numbers; the tests here
hold the examples to those promises. They go through the real path: the file
loader (``apportion.plan.load_scenario``) and the scenario runner
(``apportion.scenario.runner.run``), and the ``apportion`` command itself for
``validate`` (every example) and ``solve --json`` (example 01).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from apportion.plan import load_scenario
from apportion.scenario.runner import run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ALL = sorted(p.name for p in EXAMPLES.glob("*.yaml"))
EGO = [n for n in ALL if "-ducc-" not in n]  # DUCC examples: tests/test_ducc_examples.py, test_ducc_replay.py
TRACES = EXAMPLES.parent.parent / "shared" / "traces" / "ducc"

Snap = dict[str, Any]


# -- helpers -----------------------------------------------------------------------


def _cli() -> list[str]:
    exe = shutil.which("apportion")
    if exe is not None:
        return [exe]
    return [sys.executable, "-c", "from apportion.cli.main import main; main()"]


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([*_cli(), *args], capture_output=True, text=True, env=env, timeout=120)


def _by_time(snaps: list[Snap]) -> dict[float, Snap]:
    out = {s["at"]: s for s in snaps}
    assert len(out) == len(snaps), "two steps at the same time: address them by index instead"
    return out


@cache
def _solve_file(path: str) -> tuple[Snap, ...]:
    return tuple(run(load_scenario(Path(path))))


def solve(name: str) -> dict[float, Snap]:
    return _by_time(list(_solve_file(str(EXAMPLES / name))))


def held(snap: Snap, *paths: str, group: str = "RG1") -> list[int]:
    return [snap["consumers"][p]["groups"][group]["held"] for p in paths]


def line(snap: Snap, path: str, group: str = "RG1") -> dict[str, int]:
    return snap["consumers"][path]["groups"][group]


def reclaiming(snap: Snap) -> dict[tuple[str, float, str], int]:
    """Pending reclaims summed over hosts: (request, deadline, beneficiary) -> slots."""
    out: dict[tuple[str, float, str], int] = {}
    for r in snap["reclaiming"]:
        key = (r["request"], r["deadline"], r["for"])
        out[key] = out.get(key, 0) + r["slots"]
    return out


def hosts(snap: Snap, request: str) -> dict[str, int]:
    return snap["requests"][request]["hosts"]


# -- every example -------------------------------------------------------------------


def test_the_examples_are_the_ones_tested_here():
    assert ALL == [
        "01-ownership-and-lending.yaml",
        "02-share-ratios-1-2-3.yaml",
        "03-leaf-vs-parent-enforcement-leaf.yaml",
        "04-leaf-vs-parent-enforcement-parent.yaml",
        "05-base-quota.yaml",
        "06-borrowing-rank-and-preference.yaml",
        "07-hosts-down-and-overallocation.yaml",
        "08-priority-and-borrow-only.yaml",
        "09-placement-and-gang-requests.yaml",
        "10-plan-change.yaml",
        "11-ducc-mega-15-min.yaml",
        "12-ducc-newcomer-and-doubling.yaml",
        "13-ducc-classes-reservations-fixed.yaml",
        "14-ducc-nodes-vary-off-and-dead.yaml",
        "20-host-ownership.yaml",
        "21-rigid-reservations-and-backfill.yaml",
    ]


@pytest.mark.parametrize("name", ALL)
def test_each_example_opens_with_a_comment_block(name):
    lines = (EXAMPLES / name).read_text().splitlines()
    head = []
    for text in lines:
        if not text.startswith("#"):
            break
        head.append(text)
    assert len(head) >= 8, f"{name}: the comment block should say what to look for"
    assert head[0].startswith("# " + name[:2] + " - ")


@pytest.mark.parametrize("name", ALL)
def test_apportion_validate_says_ok(name):
    if name.startswith("11-") and not TRACES.is_dir():
        pytest.skip(f"{name} needs ../shared/traces/ducc beside the repository")
    done = _run_cli("validate", str(EXAMPLES / name))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: "), done.stdout


@pytest.mark.parametrize("name", EGO)
def test_books_balance_in_every_snapshot(name):
    """Requests hold what their consumers hold, and no host gives more than it has."""
    sc = load_scenario(EXAMPLES / name)
    slots = {h.name: h.slots for h in sc.plan.hosts}
    plans = [sc.plan] + [st.plan for st in sc.steps if st.plan is not None]
    leaves = {c.path for plan in plans for c in plan.consumers if c.is_leaf}
    slots = {h.name: h.slots for plan in plans for h in plan.hosts}
    for snap in _solve_file(str(EXAMPLES / name)):
        by_consumer = sum(c["held"] for p, c in snap["consumers"].items() if p in leaves)
        by_request = sum(r["held"] for r in snap["requests"].values())
        assert by_consumer == by_request, snap["at"]
        used: dict[str, int] = {}
        for r in snap["requests"].values():
            assert sum(r["hosts"].values()) == r["held"]
            for h, n in r["hosts"].items():
                used[h] = used.get(h, 0) + n
        assert all(used[h] <= slots[h] for h in used), snap["at"]


# -- 01 ---------------------------------------------------------------------------------


def test_01_ownership_and_lending_through_the_cli():
    done = _run_cli("solve", str(EXAMPLES / "01-ownership-and-lending.yaml"), "--json")
    assert done.returncode == 0, done.stderr
    snaps = json.loads(done.stdout)["snapshots"]
    assert [s["at"] for s in snaps] == [0, 30, 60, 90, 120]
    # the command line and the library give the same answer
    assert snaps == json.loads(json.dumps(list(_solve_file(str(EXAMPLES / "01-ownership-and-lending.yaml")))))
    s = _by_time(snaps)

    # t=0: Test borrows Dev's lendable 6; Dev's reserved 4 and Ops's 6 stay idle
    assert held(s[0], "/Dev", "/Ops", "/Test") == [0, 0, 6]
    assert line(s[0], "/Test")["borrowed"] == 6 and line(s[0], "/Dev")["lent"] == 6
    assert line(s[0], "/Test")["demand"] == 10
    assert line(s[0], "/Dev")["planned_owned"] == 10
    # t=30: Ops takes its own 6 at once, nobody else moves
    assert held(s[30], "/Dev", "/Ops", "/Test") == [0, 6, 6]
    assert line(s[30], "/Ops")["owned"] == 6 and s[30]["reclaiming"] == []
    # t=60: Dev takes its 4 idle slots and reclaims 4 from Test, who keeps them until 90
    assert held(s[60], "/Dev", "/Ops", "/Test") == [4, 6, 6]
    assert reclaiming(s[60]) == {("test1", 90.0, "/Dev"): 4}
    # t=90: the deadline has passed
    assert held(s[90], "/Dev", "/Ops", "/Test") == [8, 6, 2]
    assert line(s[90], "/Dev")["owned"] == 8 and line(s[90], "/Dev")["lent"] == 2
    assert line(s[90], "/Test")["borrowed"] == 2 and s[90]["reclaiming"] == []
    # t=120: Dev is done; Test borrows back up to the lend limit
    assert held(s[120], "/Dev", "/Ops", "/Test") == [0, 6, 6]
    assert line(s[120], "/Dev")["lent"] == 6


# -- 02 ---------------------------------------------------------------------------------


def test_02_share_ratios_1_2_3():
    s = solve("02-share-ratios-1-2-3.yaml")
    assert held(s[0], "/A") == [18] and line(s[0], "/A")["deserved"] == 18
    assert held(s[10], "/A", "/B") == [6, 12]
    assert held(s[20], "/A", "/B", "/C") == [3, 6, 9]
    assert [line(s[20], p)["deserved"] for p in ("/A", "/B", "/C")] == [3, 6, 9]
    # 7.2 and 10.8 rounded by largest remainder
    assert held(s[30], "/A", "/B", "/C") == [0, 7, 11]
    assert [line(s[30], p)["deserved"] for p in ("/B", "/C")] == [7, 11]
    assert held(s[40], "/B", "/C") == [14, 4]
    assert [line(s[40], p)["deserved"] for p in ("/B", "/C")] == [14, 4]
    # grace 0: reclaimed slots change hands within the step, none is left pending
    assert all(snap["reclaiming"] == [] for snap in s.values())
    assert s[10]["decisions"]["reclaims"] > 0


# -- 03 and 04 ---------------------------------------------------------------------------

LEAVES = ("/LOB1/app1", "/LOB1/app2", "/LOB2/app3", "/LOB2/app4")


def test_03_leaf_enforcement():
    s = solve("03-leaf-vs-parent-enforcement-leaf.yaml")
    assert held(s[0], *LEAVES) == [10, 10, 10, 10]
    assert held(s[10], *LEAVES) == [0, 15, 13, 12]
    # app1 reclaims straight from every leaf above its planned 10, across branches
    assert held(s[20], *LEAVES) == [0, 15, 13, 12]
    assert [line(s[20], p)["deserved"] for p in LEAVES] == [10, 10, 10, 10]
    assert reclaiming(s[20]) == {("w2", 25.0, "/LOB1/app1"): 5, ("w3", 25.0, "/LOB1/app1"): 3,
                                 ("w4", 25.0, "/LOB1/app1"): 2}
    assert held(s[30], *LEAVES) == [10, 10, 10, 10]
    assert held(s[40], *LEAVES) == [20, 20, 0, 0]
    assert reclaiming(s[50]) == {("v1", 55.0, "/LOB2/app3"): 7, ("w2", 55.0, "/LOB2/app3"): 8}
    assert held(s[60], *LEAVES) == [13, 12, 15, 0]


def test_04_parent_enforcement():
    s = solve("04-leaf-vs-parent-enforcement-parent.yaml")
    assert held(s[0], *LEAVES) == [10, 10, 10, 10]
    assert held(s[10], *LEAVES) == [0, 20, 10, 10]
    # app1 reclaims from its sibling only; LOB2 is not touched
    assert reclaiming(s[20]) == {("w2", 25.0, "/LOB1/app1"): 10}
    assert held(s[30], *LEAVES) == [10, 10, 10, 10]
    assert held(s[40], *LEAVES) == [20, 20, 0, 0]
    assert reclaiming(s[50]) == {("v1", 55.0, "/LOB2/app3"): 10, ("w2", 55.0, "/LOB2/app3"): 10}
    assert [line(s[50], p)["deserved"] for p in LEAVES[:3]] == [10, 10, 20]
    assert held(s[60], *LEAVES) == [10, 10, 20, 0]
    assert held(s[60], "/LOB1", "/LOB2") == [20, 20]


# -- 05 ---------------------------------------------------------------------------------

ABC = ("/A", "/B", "/C")


def _both(snap: Snap) -> list[tuple[int, int]]:
    return [(held(snap, p, group="RG1")[0], held(snap, p, group="RG2")[0]) for p in ABC]


def test_05_base_quota_takes_the_static_quota_in_every_group_first():
    s = solve("05-base-quota.yaml")
    assert _both(s[0]) == [(7, 7), (0, 0), (0, 0)]
    for t in (100, 110, 120):
        assert _both(s[t]) == [(7, 7), (7, 7), (6, 6)], t
    assert all(snap["reclaiming"] == [] and snap["decisions"]["reclaims"] == 0 for snap in s.values())


def test_05_the_same_scenario_without_base_quota(tmp_path):
    text = (EXAMPLES / "05-base-quota.yaml").read_text()
    switch = "policy: {adjust_share_to_workload: true, base_quota: true}"
    assert text.count(switch) == 1
    flipped = tmp_path / "05-no-base-quota.yaml"
    flipped.write_text(text.replace(switch, switch.replace("base_quota: true", "base_quota: false")))
    s = _by_time(run(load_scenario(flipped)))
    assert _both(s[0]) == [(14, 0), (0, 0), (0, 0)]
    assert _both(s[100]) == [(14, 0), (6, 10), (0, 10)]
    assert reclaiming(s[100]) == {("a1", 110.0, "/C"): 6, ("a1", 110.0, "/B"): 1}
    assert _both(s[110]) == [(7, 0), (7, 10), (6, 10)]
    assert reclaiming(s[110]) == {("b1", 120.0, "/A"): 3, ("c1", 120.0, "/A"): 4}
    assert _both(s[120]) == [(7, 7), (7, 7), (6, 6)]
    reclaimed = sum(r["slots"] for snap in s.values() for r in snap["reclaiming"])
    assert reclaimed == 14


# -- 06 ---------------------------------------------------------------------------------

BORROWERS = ("/Web", "/Lab", "/Eng/ci")


def test_06_borrowing_rank_preference_and_limits():
    s = solve("06-borrowing-rank-and-preference.yaml")
    lent = lambda snap, p: line(snap, p)["lent"]  # noqa: E731
    # t=0: Web (rank 1) first although Lab asked first; Lab gets what is left
    assert held(s[0], *BORROWERS) == [10, 2, 0]
    assert [lent(s[0], p) for p in ("/Eng/build", "/Fin/batch", "/Fin/report")] == [0, 6, 6]
    # t=10: Lab stops at its borrow limit with 9 lent slots idle
    assert held(s[10], "/Lab") == [3]
    assert [lent(s[10], p) for p in ("/Fin/batch", "/Fin/report")] == [3, 0]
    # t=20: Web borrows from the lender it prefers
    assert held(s[20], "/Web", "/Lab") == [4, 3]
    assert [lent(s[20], p) for p in ("/Fin/batch", "/Fin/report")] == [3, 4]
    # t=30: first come first served: Web's better rank does not displace Lab
    assert held(s[30], "/Web", "/Lab") == [9, 3]
    assert line(s[30], "/Fin")["lent"] == 12
    assert s[30]["reclaiming"] == []
    # t=40: build lends to its sibling only
    assert held(s[40], *BORROWERS) == [9, 3, 6]
    assert line(s[40], "/Eng/ci")["borrowed"] == 6 and lent(s[40], "/Eng/build") == 6
    for snap in s.values():
        for p in BORROWERS:
            if p in snap["consumers"]:
                g = line(snap, p)
                assert g["shared"] == 0 and g["held"] == g["borrowed"]


# -- 07 ---------------------------------------------------------------------------------


def test_07_overallocation_in_rank_order_and_hosts_down():
    s = solve("07-hosts-down-and-overallocation.yaml")
    owned = lambda snap: [line(snap, p)["planned_owned"] for p in ("/A", "/B")]  # noqa: E731
    assert held(s[0], "/A", "/B") == [0, 12] and owned(s[0]) == [0, 12]
    assert held(s[10], "/A", "/B") == [6, 12] and owned(s[10]) == [6, 12]
    assert held(s[20], "/A", "/B") == [12, 12] and owned(s[20]) == [12, 12]
    # h1 down: B's 6 there are lost; A gives back 6 after its grace
    assert s[30]["lost"] == [{"request": "b1", "host": "h1", "slots": 6, "consumer": "/B"}]
    assert owned(s[30]) == [6, 12]
    assert held(s[30], "/A", "/B") == [12, 6]
    assert sum(reclaiming(s[30]).values()) == 6
    assert {(r["request"], r["deadline"]) for r in s[30]["reclaiming"]} == {("a1", 45.0)}
    assert held(s[50], "/A", "/B") == [6, 12] and s[50]["reclaiming"] == []
    assert held(s[60], "/A", "/B") == [12, 12]
    # h1 closed: its free slots do not count
    assert held(s[70], "/A", "/B") == [6, 12] and owned(s[70]) == [6, 12]
    assert "h1" not in hosts(s[70], "a2")
    assert held(s[80], "/A", "/B") == [12, 12]


# -- 08 ---------------------------------------------------------------------------------

EIGHT = ("/Prod", "/Dev", "/Batch", "/Scav")


def test_08_priority_bands_and_borrow_only():
    s = solve("08-priority-and-borrow-only.yaml")
    assert held(s[0], *EIGHT) == [0, 12, 0, 6]
    assert line(s[0], "/Scav")["borrowed"] == 6 and line(s[0], "/Owner")["lent"] == 6
    assert held(s[10], *EIGHT) == [8, 4, 0, 6]
    assert [line(s[10], p)["deserved"] for p in EIGHT[:3]] == [8, 4, 0]
    assert held(s[20], *EIGHT) == [8, 0, 4, 6]
    # 4 pool slots idle, and the borrow-only consumer leaves them alone
    assert held(s[30], *EIGHT) == [8, 0, 0, 6]
    for snap in s.values():
        assert line(snap, "/Scav")["shared"] == 0


def test_08_owner_uses_idle_pool_slots_before_reclaiming():
    s = solve("08-priority-and-borrow-only.yaml")
    assert held(s[40], "/Owner", "/Scav", "/Prod") == [6, 4, 8]


# -- 09 ---------------------------------------------------------------------------------


def test_09_placement_and_gang_requests():
    s = solve("09-placement-and-gang-requests.yaml")
    t0 = s[0]
    assert hosts(t0, "st1") == {"s1": 4, "s2": 2}
    assert [hosts(t0, r) for r in ("ba1", "ba2", "ba3")] == [{"b1": 1}, {"b2": 1}, {"b3": 1}]
    assert hosts(t0, "ex1") == {"x1": 2} and hosts(t0, "ex2") == {"x2": 4}
    assert hosts(t0, "solo") == {"e1": 2}
    t10 = s[10]
    assert hosts(t10, "ssd1") == {"s3": 4}
    assert hosts(t10, "pairs") == {"b1": 3, "b2": 3}
    assert hosts(t10, "more") == {"e2": 4}
    assert hosts(s[20], "gang") == {}
    assert held(s[20], "/A", group="Stacked") == [6]
    assert hosts(s[30], "gang") == {"s1": 4}
    assert held(s[30], "/A", "/B", group="Stacked") == [4, 4]


# -- 21 ---------------------------------------------------------------------------------


def test_21_rigid_work_reservation_and_backfill():
    s = solve("21-rigid-reservations-and-backfill.yaml")
    held_of = {t: {rid: r["held"] for rid, r in snap["requests"].items()} for t, snap in s.items()}
    # b1 cannot start on its share: nothing is reclaimed from a1, which runs on
    assert all(snap["reclaiming"] == [] and snap["decisions"]["reclaims"] == 0 for snap in s.values())
    assert held_of[10] == {"a1": 6, "b1": 0}
    [r] = s[10]["reservations"]
    assert (r["request"], r["kept"], r["planned_start"]) == ("b1", {"h1": 2}, 100.0)
    assert s[20]["reservations"][0]["request"] == "b1"  # a2 waits behind it
    assert held_of[30]["s1"] == 2  # backfilled: it ends (80) before b1's planned start
    assert held_of[80] == {"a1": 6, "b1": 0, "a2": 0}
    assert held_of[100] == {"b1": 6, "a2": 0}  # b1 starts beyond its share of 4
    [r] = s[100]["reservations"]
    assert (r["request"], r["planned_start"]) == ("a2", 200.0)
    assert held_of[200] == {"a2": 6} and "reservations" not in s[200]


# -- 10 ---------------------------------------------------------------------------------


def test_10_plan_change():
    s = {snap["at"]: snap for snap in _solve_file(str(EXAMPLES / "10-plan-change.yaml"))}
    assert held(s[0], "/A", "/B") == [9, 9]
    assert held(s[10], "/A", "/B") == [9, 9]
    assert [(r["request"], r["slots"], r["deadline"]) for r in s[10]["reclaiming"]] == [("b", 3, 40.0)]
    assert [(r["request"], r["slots"], r["deadline"]) for r in s[20]["reclaiming"]] == [("b", 3, 40.0),
                                                                                         ("b", 1, 50.0)]
    assert held(s[60], "/A", "/B", "/C") == [10, 5, 3] and s[60]["reclaiming"] == []


# -- 20 ---------------------------------------------------------------------------------


def test_20_host_ownership_rank_order_trim_growth_and_plan_changes():
    s = solve("20-host-ownership.yaml")
    paths = ("/Risk", "/Risk/intraday", "/Risk/eod", "/Pricing", "/Batch")

    def owned(snap):
        return {p: line(snap, p)["owned_hosts"] for p in paths}

    assert owned(s[0]) == {"/Risk": ["h1", "h2", "h3"], "/Risk/intraday": ["h1", "h2"], "/Risk/eod": [],
                           "/Pricing": ["h4", "h5"], "/Batch": ["h6", "h7"]}
    assert held(s[0], *paths) == [12, 8, 4, 8, 6]
    # h4 down: Batch (worst rank) is trimmed of h7, the host its work uses least
    assert owned(s[10])["/Pricing"] == ["h5", "h7"] and owned(s[10])["/Batch"] == ["h6"]
    assert [x["host"] for x in s[10]["lost"]] == ["h4"]
    assert held(s[10], "/Pricing", "/Batch") == [8, 4]
    # a plan change that moves one host (h3, Risk's private pool, to eod) and reclaims nothing
    assert owned(s[20]) == {**owned(s[10]), "/Risk/eod": ["h3"]}
    assert s[20]["decisions"] == {"grants": 0, "reclaims": 0, "removals": 0}
    # h4 back: Batch, short of a host, gets it
    assert owned(s[30])["/Batch"] == ["h4", "h6"] and held(s[30], "/Batch") == [6]
    # Pricing grows to 3 hosts: only h4 moves, from Batch; Batch's 2 slots there go back
    assert owned(s[40]) == {**owned(s[30]), "/Pricing": ["h4", "h5", "h7"], "/Batch": ["h6"]}
    assert held(s[40], "/Pricing", "/Batch") == [12, 4]
