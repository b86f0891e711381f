"""Rigid work on a real master with a real agent and real processes.

Two consumers of ratio 1 share one host of 8 slots. /A's rigid request of 6 is
granted and its job (one process on 6 slots) runs. /B's rigid request of 6 comes:
/B deserves 4, and 4 cannot start it, so nothing is reclaimed from /A (that would
end /A's job and leave /B still waiting). /A's job runs on; when it ends, /B's
request has all 6 at once and its job starts.
"""

from __future__ import annotations

from tests.service.live import SLEEPER, events, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A, share_ratio: 1, grace: 2}
  - {path: /B, share_ratio: 1, grace: 2}
"""


def test_two_rigid_jobs_run_in_turn_and_none_is_ended_for_nothing(tmp_path):
    m = start_master(tmp_path / "m", PLAN)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=8)
    try:
        with m.http() as c:
            wait_until(lambda: any(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]), 20, "h1 up")
            a = c.post("/v1/clients", json={"name": "appA", "consumer": "/A"}).json()["id"]
            b = c.post("/v1/clients", json={"name": "appB", "consumer": "/B"}).json()["id"]
            got = c.post("/v1/allocations", json={"client": a, "consumer": "/A", "group": "all", "min": 6, "max": 6})
            assert got.status_code == 201, got.text
            aid = got.json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["hosts"] == {"h1": 6}, 20, "A granted 6")
            job_a = c.post(f"/v1/allocations/{aid}/activities",
                           json={"host": "h1", "argv": SLEEPER, "slots": 6}).json()["id"]
            wait_until(lambda: c.get(f"/v1/activities/{job_a}").json()["state"] == "running", 20, "A's job")

            got = c.post("/v1/allocations", json={"client": b, "consumer": "/B", "group": "all", "min": 6, "max": 6})
            assert got.status_code == 201, got.text
            bid = got.json()["id"]
            # the master has cycled with B's request waiting: past its grace, more than once
            seen = c.get("/readyz").json()["cycles"]
            wait_until(lambda: c.get("/readyz").json()["cycles"] >= seen + 4, 20, "four more cycles")
            assert [e for e in events(c, a) if e["type"] in ("reclaim", "removed")] == []
            assert c.get(f"/v1/allocations/{aid}").json()["reclaiming"] == []
            assert c.get(f"/v1/activities/{job_a}").json()["state"] == "running"
            assert c.get(f"/v1/allocations/{bid}").json()["held"] == 0

            # A's job ends, A lets its slots go: B starts with all 6 at once
            assert c.delete(f"/v1/allocations/{aid}").status_code == 204
            wait_until(lambda: c.get(f"/v1/allocations/{bid}").json()["hosts"] == {"h1": 6}, 30, "B granted 6")
            job_b = c.post(f"/v1/allocations/{bid}/activities",
                           json={"host": "h1", "argv": SLEEPER, "slots": 6}).json()["id"]
            wait_until(lambda: c.get(f"/v1/activities/{job_b}").json()["state"] == "running", 20, "B's job")
            granted_b = [e for e in events(c, b) if e["type"] == "granted"]
            assert sum(e["slots"] for e in granted_b) == 6
    finally:
        agent.kill()
        m.proc.kill()
