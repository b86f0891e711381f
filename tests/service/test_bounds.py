"""Bounds where numbers meet arithmetic: host memory, slots, per-slot memory, and what an agent
reports of a process (pid, exit code, signal, uid) all have bounds the limits and the stores
hold; no report or request can overflow a memory limit or a column.

The test plays an agent over HTTP (register, heartbeat, the start commands it gets back), as a
buggy or hostile agent would, against a real master."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apportion.service.execution import MAX_MEMORY, MIN_MEMORY, ego_limits
from apportion.service.published import HostPub
from tests.service.live import start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A}
"""


def _post(c: httpx.Client, path: str, body: dict) -> httpx.Response:
    """JSON as any client may send it: a lone surrogate as its escape (httpx would not encode it)."""
    return c.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})


def _hb(c: httpx.Client, host: str, activities: list | None = None) -> httpx.Response:
    return _post(c, f"/v1/agents/{host}/heartbeat", {"activities": activities or []})


def _starts(c: httpx.Client, host: str) -> list[dict]:
    r = _hb(c, host)
    assert r.status_code == 200, r.text
    return [x for x in r.json()["commands"] if x["op"] == "start"]


def test_the_report_a_host_of_1e300_gb_and_1e_300_gb_per_slot_are_refused(tmp_path, db_url):
    m = start_master(tmp_path / "m", PLAN, db=db_url)
    try:
        with m.http() as c:
            r = c.post("/v1/agents/h1/register", json={"slots": 4, "memory": 1e300})
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "memory"], r.text
            # the largest host memory the API takes, on a host of many slots: a limit a cgroup takes
            r = c.post("/v1/agents/h1/register", json={"slots": 1_000_000, "memory": 1_000_000.0})
            assert r.status_code == 200, r.text
            client = c.post("/v1/clients", json={"name": "app", "consumer": "/A"}).json()["id"]
            alloc = {"client": client, "consumer": "/A", "max": 2}
            r = c.post("/v1/allocations", json={**alloc, "memory": 1e-300})
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "memory"], r.text
            aid = c.post("/v1/allocations", json={**alloc, "memory": 1_000_000.0}).json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 2, 20, "granted")
            act = c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": ["true"], "slots": 2})
            assert act.status_code == 201, act.text
            start = wait_until(lambda: _starts(c, "h1"), 10, "the start command")
            limit = start[0]["limits"]["memory"]
            assert MIN_MEMORY <= limit <= MAX_MEMORY
            # a report with a pid or an exit code no store column holds: a 422, not a stopped master
            bad = [{"id": act.json()["id"], "state": "running", "pid": 2**70}]
            r = _hb(c, "h1", bad)
            assert r.status_code == 422 and r.json()["detail"][0]["loc"][:4] == ["body", "activities", 0, "pid"]
            ok = [{"id": act.json()["id"], "state": "running", "pid": 4242}]
            assert _hb(c, "h1", ok).status_code == 200
            assert c.get("/readyz").status_code == 200
    finally:
        m.proc.kill()


def test_limits_stay_within_what_a_cgroup_takes_whatever_a_stored_host_says():
    for memory, slots, per_slot in ((1e300, 1, None), (float("inf"), 4, None), (1e-300, 1_000_000, None),
                                    (0.0, 4, 1e-300), (64.0, 4, 1e300), (5e-324, 1, 5e-324)):
        h = HostPub("h", slots, memory, "", {}, "ok", False, 0.0, True)
        got = ego_limits(h, slots, per_slot)["memory"]
        assert got is None or MIN_MEMORY <= got <= MAX_MEMORY, (memory, slots, per_slot, got)


# -- a property: whatever the register and allocation bodies say, nothing answers 500 afterwards -------------
extremes = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False, allow_infinity=False),
                     st.sampled_from([0, -1, 2**31, 2**31 - 1, 2**63, 1e300, -1e300, 1e-300, 5e-324, 1e6, 1e6 + 1]))
numbers = st.integers(min_value=1, max_value=8) | st.floats(min_value=0.01, max_value=1e6) | extremes
texts = st.text(max_size=12) | st.sampled_from(["Linux\x00", "a\x1b[2J", "\ud800", "\t\n"])
register_bodies = st.fixed_dictionaries(
    {"slots": numbers, "memory": numbers},
    optional={"os": texts, "attributes": st.dictionaries(st.sampled_from(["rack", "gpu", "mem"]), numbers | texts,
                                                         max_size=2)})
allocation_bodies = st.fixed_dictionaries(
    {"max": numbers}, optional={"min": numbers, "memory": numbers, "slots_per_instance": numbers,
                                "requirement": st.sampled_from(["select(slots > 0)", "select(rack == 'r1')",
                                                                "select(mem > 1e308)", "select(gpu > 0)"]) | texts})
reports = st.fixed_dictionaries({"state": st.sampled_from(["running", "exited", "failed"])},
                                optional={"pid": numbers, "exit_code": numbers, "signal": numbers, "uid": numbers,
                                          "reason": texts, "user": texts})


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    m = start_master(tmp_path_factory.mktemp("bounds"), PLAN)
    with m.http() as c:
        client = c.post("/v1/clients", json={"name": "app", "consumer": "/A"}).json()["id"]
        for h in ("p1", "p2"):  # hosts with room: the examples that change them start from these
            assert c.post(f"/v1/agents/{h}/register", json={"slots": 4, "memory": 8.0}).status_code == 200
    yield m, client
    m.proc.kill()


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(host=st.sampled_from(["p1", "p2"]), register=register_bodies, allocation=allocation_bodies, report=reports)
def test_extreme_values_in_register_and_allocation_never_answer_500(live, host, register, allocation, report):
    m, client = live
    with m.http() as c:
        r = _post(c, f"/v1/agents/{host}/register", register)
        assert r.status_code < 500, (register, r.text)
        event(f"register {r.status_code}")
        r = _post(c, "/v1/allocations", {"client": client, "consumer": "/A", **allocation})
        assert r.status_code < 500, (allocation, r.text)
        event(f"allocation {r.status_code}")
        if r.status_code == 201:
            aid = r.json()["id"]
            try:
                hosts = wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["hosts"], 1.5, "a grant")
            except AssertionError:  # none to be had (no host fits): the rest is still checked
                hosts = {}
            for h in hosts:
                act = c.post(f"/v1/allocations/{aid}/activities", json={"host": h, "argv": ["true"]})
                assert act.status_code < 500, act.text
                event(f"activity {act.status_code}")
            # every host's heartbeat: the start commands (their memory limits) are made here
            for h in ("p1", "p2"):
                hb = _hb(c, h)
                assert hb.status_code < 500, hb.text
                for cmd in hb.json().get("commands", []) if hb.status_code == 200 else []:
                    if cmd["op"] == "start":
                        event("a start command")
                        limit = cmd["limits"]["memory"]
                        assert limit is None or MIN_MEMORY <= limit <= MAX_MEMORY, cmd
                        r = _hb(c, h, [{"id": cmd["activity"], **report}])
                        assert r.status_code < 500, (report, r.text)
            c.delete(f"/v1/allocations/{aid}")
        # nothing answers 500 afterwards, and the master still commits
        for h in ("p1", "p2"):
            assert _hb(c, h).status_code < 500
        assert c.get("/v1/hosts").status_code == 200
        assert c.get("/v1/allocations").status_code == 200
        assert c.get("/readyz").status_code == 200, c.get("/readyz").text
        assert m.proc.alive, m.proc.output()[-3000:]
