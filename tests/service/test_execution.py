"""Execution users, limits and reports on the master's side (issue 17), without root: a real
master on loopback, and this test speaking the agent protocol itself (docs/service.md, "The
agent protocol"), so every report an agent may send can be sent, and every answer read.

- the limits' arithmetic (EGO: the host's memory x slots / host slots, or the allocation's
  memory per slot if less; DUCC: order x quantum);
- the start command carries the execution user (inherited; DUCC: mapped through
  ``ducc.accounts``) and the limits;
- reports: usage is kept in memory at each heartbeat and stored at the end only; ``failed``
  ends with the agent's reason and starts nothing; an OOM kill sets ``oom`` and its reason
  and tells the client; ``unkillable`` closes the host with that reason, stored;
- strictness: NaN, booleans for numbers, huge values, unknown levels are refused (422) and
  change nothing; Prometheus shows per-host usage and alien processes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from apportion.plan import PlanError
from apportion.service.ducc.plan import compile_ducc_live
from apportion.service.execution import GB, ducc_limits, ego_limits
from apportion.service.published import HostPub
from tests.service.live import Master, events, granted, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /Apps, execution_user: alice}
  - {path: /Apps/batch}
  - {path: /Plain}
"""


def _host(memory: float, slots: int) -> HostPub:
    return HostPub("h", slots, memory, "Linux", {}, "ok", False)


def test_limits_arithmetic():
    assert ego_limits(_host(8, 4), 1, None) == {"memory": 2 * GB, "swap": 0, "cpu_weight": 100}
    assert ego_limits(_host(8, 4), 3, None)["memory"] == 6 * GB
    assert ego_limits(_host(8, 4), 2, 0.25)["memory"] == GB // 2  # asks for less than its part
    assert ego_limits(_host(8, 4), 1, 16)["memory"] == 2 * GB  # never more than its part of the host
    assert ego_limits(_host(0, 4), 2, None)["memory"] is None  # nothing known, nothing asked
    assert ego_limits(_host(0, 4), 2, 1.5)["memory"] == 3 * GB
    assert ego_limits(None, 1, None)["memory"] is None
    assert ego_limits(_host(7.5, 3), 1, None)["memory"] == int(2.5 * GB)
    assert ducc_limits(3, 1.0) == {"memory": 3 * GB, "swap": 0, "cpu_weight": 300}
    assert ducc_limits(2, 15)["memory"] == 30 * GB


def test_every_activity_state_is_live_or_ended_and_the_api_filters_by_each():
    from typing import get_args

    from apportion.service.api.schemas import ActivityState
    from apportion.service.published import ENDED_STATES, LIVE_STATES

    assert sorted(get_args(ActivityState)) == sorted(LIVE_STATES + ENDED_STATES)
    assert not set(LIVE_STATES) & set(ENDED_STATES)


def test_ducc_accounts_map_users_and_are_checked_with_their_line():
    base = "ducc:\n  properties: {ducc.rm.share.quantum: 1}\n"
    live = compile_ducc_live(base + "  accounts: {ann: ann_os, '*': nobody}\n")
    assert (live.account("ann"), live.account("bob")) == ("ann_os", "nobody")
    assert compile_ducc_live(base).account("bob") == "bob"  # default: the account of the user's name
    with pytest.raises(PlanError) as e:
        compile_ducc_live(base + "  accounts:\n    ann: 'not ok'\n    'b c': x\n")
    problems = {p.field: p for p in e.value.problems}
    assert problems["ducc.accounts.ann"].line == 4 and "not a user name" in problems["ducc.accounts.ann"].reason
    assert problems["ducc.accounts.b c"].line == 5
    with pytest.raises(PlanError, match="must be a mapping"):
        compile_ducc_live(base + "  accounts: [x]\n")


def _agent(m: Master, host: str = "h1", **register: Any) -> httpx.Client:
    c = m.http()
    body = {"slots": 4, "memory": 8.0, "containment": "cgroup-v1", "run_as": {"root": True, "user": "root"},
            **register}
    r = c.post(f"/v1/agents/{host}/register", json=body)
    assert r.status_code == 200, r.text
    return c


def _beat(c: httpx.Client, reports: list[dict[str, Any]], name: str = "h1", **extra: Any) -> list[dict[str, Any]]:
    r = c.post(f"/v1/agents/{name}/heartbeat", json={"wait": 0, "activities": reports, **extra})
    assert r.status_code == 200, r.text
    return r.json()["commands"]


def _stored(m: Master, act: int) -> dict[str, Any]:
    eng = create_engine(m.db)
    try:
        with eng.connect() as conn:
            row = conn.execute(text("SELECT state, usage, limits, \"user\", uid, oom, stop_reason FROM activities "
                                    "WHERE id = :i"), {"i": act}).mappings().one()
            return dict(row)
    finally:
        eng.dispose()


def _json(v: Any) -> Any:
    import json

    return json.loads(v) if isinstance(v, str) else v


def _start(c: httpx.Client, aid: int, host: str = "h1", **body: Any) -> tuple[int, dict[str, Any]]:
    act = c.post(f"/v1/allocations/{aid}/activities", json={"host": host, "argv": ["true"], **body}).json()["id"]
    cmd = next(x for x in _beat(c, []) if x["op"] == "start" and x["activity"] == act)
    return act, cmd


USAGE = {"cpu_seconds": 0.5, "memory": 10 * 2**20, "memory_peak": 12 * 2**20}
LIMITS = {"memory": 2 * GB, "cpu_weight": 100, "pids": 1024}


def test_reports_end_to_end_through_the_agent_protocol(tmp_path: Path) -> None:
    m = start_master(tmp_path, PLAN, extra=["--tick", "0.2", "--heartbeat", "10"])  # this test is the agent
    try:
        c = _agent(m)
        host = c.get("/v1/hosts").json()["hosts"][0]
        assert (host["containment"], host["run_as"], host["closed_reason"]) == \
            ("cgroup-v1", {"root": True, "user": "root"}, None)
        client, aid = granted(c, "batch", "/Apps/batch", 4)

        # the start command: the inherited execution user, the limits
        act, cmd = _start(c, aid)
        assert cmd["user"] == "alice" and cmd["limits"] == {"memory": 2 * GB, "swap": 0, "cpu_weight": 100}, cmd

        # running: who and what it uses are shown, and stored with the change of state
        run = {"id": act, "state": "running", "pid": 4242, "user": "alice", "uid": 1001, "limits": LIMITS,
               "usage": USAGE}
        _beat(c, [run])
        a = c.get(f"/v1/activities/{act}").json()
        assert (a["state"], a["user"], a["uid"], a["limits"], a["usage"], a["oom"]) == \
            ("running", "alice", 1001, LIMITS, USAGE, False), a
        assert _json(_stored(m, act)["usage"]) == USAGE
        # usage alone changes in memory each heartbeat, and is not written
        later = {**USAGE, "cpu_seconds": 7.25, "memory": 20 * 2**20}
        _beat(c, [{**run, "usage": later}])
        assert c.get(f"/v1/activities/{act}").json()["usage"] == later
        assert _json(_stored(m, act)["usage"]) == USAGE
        listed = c.get("/v1/activities", params={"host": "h1", "state": "running"}).json()["activities"]
        assert [x["id"] for x in listed] == [act] and listed[0]["usage"] == later
        assert c.get("/v1/activities", params={"state": "exited"}).json()["activities"] == []
        for bad in ({"state": "zombie"}, {"host": "no spaces"}, {"allocation": "x"}):
            r = c.get("/v1/activities", params=bad)
            assert r.status_code == 422 and list(bad)[0] in r.text, (bad, r.text)

        # Prometheus: the host's activities' memory and CPU, its alien processes
        _beat(c, [{**run, "usage": later}], host={"alien": 3})
        assert c.get("/v1/hosts").json()["hosts"][0]["alien"] == 3
        metrics = c.get("/metrics").text
        assert 'apportion_host_activity_memory_bytes{host="h1"} 2.097152e+07' in metrics, metrics
        assert 'apportion_host_activity_cpu_seconds{host="h1"} 7.25' in metrics
        assert 'apportion_host_alien_processes{host="h1"} 3.0' in metrics

        # an OOM kill: killed, oom, the agent's reason; the client is told; stored at the end
        reason = "out of memory: limit 2048 MiB, peak 2048 MiB"
        final = {**later, "memory_peak": 2 * GB}
        _beat(c, [{**run, "state": "killed", "signal": 9, "oom": True, "reason": reason, "usage": final}])
        a = c.get(f"/v1/activities/{act}").json()
        assert (a["state"], a["oom"], a["stop_reason"], a["usage"]) == ("killed", True, reason, final), a
        ev = [e for e in events(c, client) if e.get("activity") == act and e["state"] == "killed"]
        assert ev and ev[0]["oom"] is True and ev[0]["stop_reason"] == reason and ev[0]["usage"] == final, ev
        row = _stored(m, act)
        assert (row["state"], bool(row["oom"]), row["stop_reason"], _json(row["usage"])) == \
            ("killed", True, reason, final)

        # a refused start: failed with the agent's reason, nothing runs, the allocation keeps its slots
        act2, _ = _start(c, aid, slots=2)
        refusal = "user alice refused on h1: no such user"
        _beat(c, [{"id": act2, "state": "failed", "reason": refusal}])
        a2 = c.get(f"/v1/activities/{act2}").json()
        assert (a2["state"], a2["stop_reason"], a2["pid"]) == ("failed", refusal, None), a2
        assert c.get(f"/v1/allocations/{aid}").json()["held"] == 4
        assert _stored(m, act2)["stop_reason"] == refusal
        ev = [e for e in events(c, client) if e.get("activity") == act2 and e["state"] == "failed"]
        assert ev and ev[0]["stop_reason"] == refusal, ev
        # its slots are free again: a new activity may use all four
        act3, _ = _start(c, aid, slots=4)

        # processes that survive SIGKILL: the host is closed, saying why, and that is stored
        _beat(c, [{"id": act3, "state": "running", "pid": 7, "unkillable": True}])
        h = wait_until(lambda: (x := c.get("/v1/hosts").json()["hosts"][0])["state"] == "closed" and x, 10,
                       "h1 closed")
        assert h["closed_reason"] == f"activity {act3}: processes survive SIGKILL", h
        m.restart()
        assert c.get("/v1/hosts").json()["hosts"][0]["closed_reason"] == h["closed_reason"]
        assert c.post("/v1/hosts/h1/open").status_code == 200
        h = c.get("/v1/hosts").json()["hosts"][0]
        assert (h["state"], h["closed_reason"]) == ("ok", None), h
    finally:
        m.proc.kill()


BAD_REPORTS = [
    {"usage": {"cpu_seconds": math.nan}},
    {"usage": {"cpu_seconds": math.inf}},
    {"usage": {"memory": True}},
    {"usage": {"memory": 2**64}},
    {"usage": {"memory": -1}},
    {"usage": {"memory": 1.5}},
    {"usage": {"nonsense": 1}},
    {"limits": {"memory": "1G"}},
    {"limits": {"pids": 2**40}},
    {"uid": True},
    {"uid": -1},
    {"uid": 2**40},
    {"uid": "0"},
    {"oom": "yes"},
    {"oom": 1},
    {"unkillable": 0},
    {"user": ""},
    {"user": "u" * 201},
    {"reason": "r" * 1001},
    {"state": "zombie"},
]


def test_bad_reports_and_registrations_are_refused_and_change_nothing(tmp_path: Path) -> None:
    m = start_master(tmp_path, PLAN, extra=["--heartbeat", "10"])
    try:
        c = _agent(m)
        _, aid = granted(c, "batch", "/Apps/batch", 1)
        act, _ = _start(c, aid)
        before = c.get(f"/v1/activities/{act}").json()
        for bad in BAD_REPORTS:
            r = c.post("/v1/agents/h1/heartbeat", content=_dumps({"activities": [{"id": act, "state": "running",
                                                                                "pid": 1, **bad}]}),
                       headers={"Content-Type": "application/json"})
            assert r.status_code == 422, (bad, r.status_code, r.text)
        assert c.get(f"/v1/activities/{act}").json() == before
        for bad in ({"alien": -1}, {"alien": True}, {"alien": 10**9}, {"other": 1}):
            r = c.post("/v1/agents/h1/heartbeat", json={"activities": [], "host": bad})
            assert r.status_code == 422, (bad, r.text)
        for bad in ({"containment": "docker"}, {"run_as": {"root": "yes", "user": "root"}},
                    {"run_as": {"root": True}}, {"run_as": {"root": False, "user": ""}}):
            r = c.post("/v1/agents/h1/register", json={"slots": 4, "memory": 8.0, **bad})
            assert r.status_code == 422, (bad, r.text)
        h = c.get("/v1/hosts").json()["hosts"][0]
        assert (h["containment"], h["run_as"]) == ("cgroup-v1", {"root": True, "user": "root"}), h
        client = c.get(f"/v1/allocations/{aid}").json()["client"]
        for memory in (math.nan, math.inf, 0, -1, True, "1", 10**7):
            r = c.post("/v1/allocations", content=_dumps({"client": client, "consumer": "/Apps/batch", "max": 1,
                                                          "memory": memory}),
                       headers={"Content-Type": "application/json"})
            assert r.status_code == 422 and "memory" in r.text, (memory, r.text)
        assert len(c.get("/v1/allocations").json()["allocations"]) == 1
    finally:
        m.proc.kill()


def _dumps(body: Any) -> str:
    """JSON as a careless agent would send it: NaN and Infinity written as Python does."""
    import json

    return json.dumps(body)


DUCC_PLAN = ("ducc:\n  properties: {ducc.rm.share.quantum: 1, ducc.rm.prediction: false}\n"
             "  accounts: {ann: ann_os, '*': nobody}\n")


def test_a_ducc_process_runs_as_its_users_account_within_its_share(tmp_path: Path) -> None:
    m = start_master(tmp_path, DUCC_PLAN, extra=["--tick", "0.2", "--heartbeat", "10"])
    try:
        c = _agent(m, memory=4.0)
        starts: dict[str, dict[str, Any]] = {}
        for user, memory in (("ann", 2), ("bob", 1)):
            r = c.post("/v1/jobs", json={"user": user, "memory": memory, "threads": 1, "work": [1],
                                         "max_processes": 1, "argv": ["true"]})
            assert r.status_code == 201, r.text
            jid = r.json()["id"]
            cmd = wait_until(lambda: next((x for x in _beat(c, []) if x["op"] == "start"
                                           and x["env"].get("APPORTION_JOB") == str(jid)), None), 10,
                             f"job {jid} started")
            starts[user] = cmd
        assert starts["ann"]["user"] == "ann_os" and starts["ann"]["limits"]["memory"] == 2 * GB
        assert starts["bob"]["user"] == "nobody" and starts["bob"]["limits"] == \
            {"memory": GB, "swap": 0, "cpu_weight": 100}
        for cmd in starts.values():  # they end; their jobs are done with them
            _beat(c, [{"id": cmd["activity"], "state": "exited", "exit_code": 0}])

        # a job whose processes the agent refuses fails after three, saying why; a service at once
        refusal = "user zed refused on h1: no such user"

        def refuse(kind: str, jid: int) -> dict[str, Any]:
            def step() -> Any:
                for x in _beat(c, []):
                    if x["op"] == "start" and x["env"].get("APPORTION_JOB") == str(jid):
                        _beat(c, [{"id": x["activity"], "state": "failed", "reason": refusal}])
                j = c.get(f"/v1/{kind}s/{jid}").json()
                return j["state"] == "failed" and j
            return wait_until(step, 20, f"{kind} {jid} failed")

        jid = c.post("/v1/jobs", json={"user": "zed", "memory": 1, "threads": 1, "work": [1],
                                       "argv": ["true"]}).json()["id"]
        j = refuse("job", jid)
        assert j["reason"] == f"3 processes ended before they initialised (last: {refusal})", j
        sid = c.post("/v1/services", json={"user": "zed", "memory": 1, "argv": ["true"]}).json()["id"]
        svc = refuse("service", sid)
        assert svc["reason"] == f"its process could not start on h1: {refusal}", svc
    finally:
        m.proc.kill()


def test_a_burst_of_starts_comes_in_batches_so_the_agent_keeps_beating(tmp_path: Path) -> None:
    """40 starts asked at once reach the agent START_BATCH at a time: an agent that had to start
    them all before its next heartbeat went silent for seconds and its host was taken for dead."""
    from apportion.service.master import START_BATCH

    m = start_master(tmp_path, PLAN, extra=["--tick", "0.2", "--heartbeat", "10"])  # this test is the agent
    try:
        c = _agent(m, slots=40)
        _, aid = granted(c, "burst", "/Plain", 40)
        acts = [c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": ["true"]}).json()["id"]
                for _ in range(40)]
        running: list[dict[str, Any]] = []
        batches = []
        while len(running) < len(acts):
            starts = [x["activity"] for x in _beat(c, running) if x["op"] == "start"]
            assert starts, "the master stopped sending starts before all of them were sent"
            batches.append(len(starts))
            running += [{"id": a, "state": "running", "pid": 1000 + a} for a in starts]
        assert batches == [START_BATCH, START_BATCH, 40 - 2 * START_BATCH], batches
        assert sorted(r["id"] for r in running) == sorted(acts)  # each sent once, none lost
    finally:
        m.proc.kill()
