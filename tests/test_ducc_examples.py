"""The DUCC examples (examples/12-14), held to the numbers their comment blocks promise.

They go through the real path: the DUCC scenario loader
(``apportion.plan.ducc_scenario.load_ducc_scenario``), the runner
(``apportion.scenario.ducc_runner.run``), and for example 12 the ``apportion solve
--json`` command itself. Example 11 (a replay of DUCC's own test workload) is tested
in tests/test_ducc_replay.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from apportion.plan.ducc_scenario import load_ducc_scenario
from apportion.scenario.ducc_runner import run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
Snap = dict[str, Any]


@cache
def _snaps(name: str) -> tuple[Snap, ...]:
    return tuple(run(load_ducc_scenario(EXAMPLES / name)))


def by_at(name: str) -> dict[float, Snap]:
    out = {s["at"]: s for s in _snaps(name)}
    assert len(out) == len(_snaps(name))
    return out


def counts(snap: Snap, *jobs: str) -> list[tuple[int, int, int]]:
    """(counted, held, pending_removal) per job; (0, 0, 0) for a job not (or no longer) there."""
    out = []
    for j in jobs:
        line = snap["jobs"].get(j)
        out.append((0, 0, 0) if line is None else (line["counted"], line["held"], line["pending_removal"]))
    return out


def reasons(snap: Snap) -> set[str]:
    return {e["reason"] for e in snap["evictions"]}


def test_every_ducc_snapshot_keeps_machines_within_their_order():
    for name in ("12-ducc-newcomer-and-doubling.yaml", "13-ducc-classes-reservations-fixed.yaml",
                 "14-ducc-nodes-vary-off-and-dead.yaml"):
        for snap in _snaps(name):
            for m, line in snap["machines"].items():
                assert 0 <= line["used"] <= line["order"], (name, snap["cycle"], m)
            per_machine: dict[str, int] = {}
            for job in snap["jobs"].values():
                for m, n in job["machines"].items():
                    per_machine[m] = per_machine.get(m, 0) + n * job["order"]
            assert per_machine == {m: v["used"] for m, v in snap["machines"].items() if v["used"]}, name
            for job in snap["jobs"].values():
                assert sum(job["machines"].values()) == job["held"]


# -- 12 --------------------------------------------------------------------------------------


def test_12_doubling_then_a_newcomer_then_equal_shares():
    s = by_at("12-ducc-newcomer-and-doubling.yaml")
    assert [s[t]["jobs"]["a1"]["held"] for t in (0, 10, 20, 30, 40, 50)] == [1, 2, 4, 8, 16, 16]
    # bob arrives: counted 1, a1 sheds 1 which is still there (pending) this cycle
    assert counts(s[60], "a1", "b1") == [(15, 16, 1), (1, 0, 0)]
    assert s[60]["jobs"]["b1"]["state"] == "waiting" and reasons(s[60]) == {"over-count"}
    # the cycle after, the space is free and b1 has it, where the evicted process was
    assert counts(s[70], "a1", "b1") == [(15, 15, 0), (1, 1, 0)]
    assert s[70]["jobs"]["b1"]["machines"] == {s[60]["evictions"][0]["machine"]: 1}
    assert [s[t]["jobs"]["b1"]["counted"] for t in (80, 100, 120)] == [2, 4, 8]
    assert [s[t]["jobs"]["a1"]["counted"] for t in (80, 100, 120)] == [14, 12, 8]
    assert counts(s[130], "a1", "b1") == [(8, 8, 0), (8, 8, 0)]
    assert s[170]["jobs"]["a1"]["held"] == 16 and "b1" not in s[170]["jobs"]
    end = _snaps("12-ducc-newcomer-and-doubling.yaml")[-1]
    assert end["end"] and end["ended"] == "done" and end["jobs"] == {}
    assert end["finished"] == {"b1": 167.5, "a1": 259.375}
    assert all(e["reason"] == "over-count" for snap in s.values() for e in snap["evictions"])


def test_12_through_the_command_line():
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "apportion.cli", "solve", "--json",
                           str(EXAMPLES / "12-ducc-newcomer-and-doubling.yaml")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    snaps = json.loads(done.stdout)["snapshots"]
    assert snaps == json.loads(json.dumps(list(_snaps("12-ducc-newcomer-and-doubling.yaml"))))
    first = snaps[0]
    assert first["cycle"] == 0 and first["at"] == 0 and first["steps"] == ["timeline[0]"]
    assert set(first["jobs"]["a1"]) >= {"counted", "held", "pending_removal", "state", "reason"}
    assert first["jobs"]["a1"]["state"] in ("running", "waiting", "deferred")
    assert set(first) >= {"cycle", "at", "jobs", "classes", "users", "machines", "evictions", "finished"}
    human = subprocess.run([sys.executable, "-m", "apportion.cli", "solve",
                            str(EXAMPLES / "12-ducc-newcomer-and-doubling.yaml")],
                           capture_output=True, text=True, env=env, timeout=120)
    assert human.returncode == 0 and "cycle 6" in human.stdout and "over-count" in human.stdout


# -- 13 --------------------------------------------------------------------------------------

JOBS13 = ("res", "svc", "hi", "mid", "lo")


def test_13_priorities_weights_reservation_and_fixed_share():
    s = by_at("13-ducc-classes-reservations-fixed.yaml")
    t0 = s[0]
    assert t0["jobs"]["res"]["machines"] == {"big1": 1} and t0["jobs"]["res"]["order"] == 8
    assert counts(t0, *JOBS13) == [(1, 1, 0), (2, 2, 0), (11, 11, 0), (6, 6, 0), (3, 3, 0)]
    assert {c: v["quanta"] for c, v in t0["classes"].items()} == {
        "reserve": 8, "fixed": 4, "high": 11, "normal": 6, "low": 3}
    # no machine of exactly 16 quanta: deferred, and nothing else moves
    r2 = s[10]["jobs"]["res2"]
    assert (r2["state"], r2["held"]) == ("deferred", 0) and "exactly 16 quanta" in r2["reason"]
    assert counts(s[10], *JOBS13) == counts(t0, *JOBS13) and s[10]["decisions"]["evictions"] == 0
    # the reservation leaves: 28 quanta, 16 : 8 : 4
    assert counts(s[20], "hi", "mid", "lo") == [(16, 16, 0), (8, 8, 0), (4, 4, 0)]
    assert "res" not in s[20]["jobs"] and s[20]["cancelled"] == {"res": 20.0}
    # bob's two jobs share his 8
    assert counts(s[30], "hi", "mid", "mid2", "lo") == [(16, 16, 0), (4, 4, 0), (4, 4, 0), (4, 4, 0)]
    assert s[30]["users"]["bob"]["held"] == 8
    assert [e["job"] for e in s[30]["evictions"]] == ["mid"] * 4 and reasons(s[30]) == {"over-count"}
    assert s[30]["jobs"]["svc"]["held"] == 2  # fixed share is never preempted for fair share


# -- 14 --------------------------------------------------------------------------------------


def test_14_vary_off_unavailable_and_dead_nodes():
    s = by_at("14-ducc-nodes-vary-off-and-dead.yaml")
    assert counts(s[40], "a1", "svc") == [(14, 14, 0), (1, 1, 0)]
    assert s[40]["jobs"]["svc"]["machines"] == {"m1": 1}
    # vary_off: fair-share work leaves m1, the fixed-share service stays
    assert s[50]["machines"]["m1"]["state"] == "varied_off"
    assert [(e["job"], e["machine"], e["reason"]) for e in s[50]["evictions"]] == [("a1", "m1", "vary-off")] * 2
    assert counts(s[60], "a1", "svc") == [(12, 12, 0), (1, 1, 0)]
    assert s[60]["machines"]["m1"]["used"] == 2
    # unavailable: keeps its work, nothing new
    assert s[70]["machines"]["m3"]["state"] == "unavailable" and s[70]["machines"]["m3"]["used"] == 4
    # heartbeats stop at 90; the third miss (t=110) makes m1 and m2 dead
    assert s[100]["machines"]["m2"]["state"] == "ok" and s[100]["jobs"]["a1"]["held"] == 12
    t110 = s[110]
    assert t110["machines"]["m1"]["state"] == "dead" and t110["machines"]["m2"]["state"] == "dead"
    assert [(e["machine"], e["reason"]) for e in t110["evictions"]] == [("m2", "node-dead")] * 4
    assert [(x["job"], x["machine"]) for x in t110["lost"]] == [("svc", "m1")]
    assert counts(t110, "svc") == [(0, 0, 0)] and t110["jobs"]["svc"]["state"] == "waiting"
    # the service is asked for again and placed once a1 has made room
    assert counts(s[140], "a1", "svc") == [(4, 4, 0), (1, 1, 0)] and s[140]["jobs"]["svc"]["machines"] == {"m4": 1}
    assert all(m["state"] == "ok" for m in s[150]["machines"].values())
    assert counts(s[160], "a1") == [(14, 14, 0)]
