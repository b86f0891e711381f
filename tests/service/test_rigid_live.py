"""Rigid work on a real master with a real agent and real processes.

Two consumers of ratio 1 share one host of 8 slots. /A's rigid request of 6 is
granted and its job (one process on 6 slots) runs. /B's rigid request of 6 comes:
/B deserves 4, and 4 cannot start it, so nothing is reclaimed from /A (that would
end /A's job and leave /B still waiting). /A's job runs on; when it ends, /B's
request has all 6 at once and its job starts. While it waits, /v1/allocations and
`apportion alloc list` show it reserved.
"""

from __future__ import annotations

from tests.client.test_live import cli
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
            # B waits with a reservation (the slots kept for it as they come free); A's job
            # says nothing of how long it runs, so B's planned start is not known
            listed = {x["id"]: x for x in c.get("/v1/allocations").json()["allocations"]}
            assert (listed[bid]["reserved"], listed[bid]["planned_start"]) == (True, None)
            assert (listed[aid]["reserved"], listed[aid]["planned_start"]) == (False, None)
            assert c.get(f"/v1/allocations/{bid}").json()["reserved"] is True
            shown = cli(m, "alloc", "list")
            assert shown.returncode == 0, shown.output
            row = next(line for line in shown.output.splitlines() if line.split()[:1] == [str(bid)])
            assert "reserved, start unknown" in row, shown.output

            # A's job ends, A lets its slots go: B starts with all 6 at once
            assert c.delete(f"/v1/allocations/{aid}").status_code == 204
            wait_until(lambda: c.get(f"/v1/allocations/{bid}").json()["hosts"] == {"h1": 6}, 30, "B granted 6")
            job_b = c.post(f"/v1/allocations/{bid}/activities",
                           json={"host": "h1", "argv": SLEEPER, "slots": 6}).json()["id"]
            wait_until(lambda: c.get(f"/v1/activities/{job_b}").json()["state"] == "running", 20, "B's job")
            granted_b = [e for e in events(c, b) if e["type"] == "granted"]
            assert sum(e["slots"] for e in granted_b) == 6
            # started: no reservation any more
            b_now = c.get(f"/v1/allocations/{bid}").json()
            assert (b_now["reserved"], b_now["planned_start"]) == (False, None)
    finally:
        agent.kill()
        m.proc.kill()


PLAN_20 = "resource_groups:\n  - {name: all, select: \"select(slots > 0)\"}\nconsumers:\n" + "".join(
    f"  - {{path: /t{i:02d}, share_ratio: 1, grace: 2}}\n" for i in range(20))


def test_twenty_consumers_each_asking_wider_than_its_share_all_complete(tmp_path):
    # 64 slots on four hosts; twenty consumers (a share of 3.2 each) each ask for 10
    # slots at once. Each job runs a process on its 10 slots and is ended once it
    # runs; every one starts in its turn, and none is ended by a reclaim
    m = start_master(tmp_path / "m", PLAN_20)
    agents = [start_agent(m, f"h{i}", tmp_path / f"h{i}", slots=16) for i in range(4)]
    try:
        with m.http() as c:
            wait_until(lambda: sum(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]) == 4, 30,
                       "four hosts up")
            ids: dict[int, int] = {}  # allocation -> client
            for i in range(20):
                cl = c.post("/v1/clients", json={"name": f"app{i}", "consumer": f"/t{i:02d}"}).json()["id"]
                got = c.post("/v1/allocations", json={"client": cl, "consumer": f"/t{i:02d}", "group": "all",
                                                      "min": 10, "max": 10})
                assert got.status_code == 201, got.text
                ids[got.json()["id"]] = cl
            done: set[int] = set()

            def a_job_ran() -> bool:
                for aid in sorted(set(ids) - done):
                    hosts = c.get(f"/v1/allocations/{aid}").json()["hosts"]
                    if sum(hosts.values()) == 10:
                        host, n = max(hosts.items(), key=lambda kv: kv[1])
                        act = c.post(f"/v1/allocations/{aid}/activities",
                                     json={"host": host, "argv": SLEEPER, "slots": n}).json()["id"]
                        wait_until(lambda: c.get(f"/v1/activities/{act}").json()["state"] == "running", 20,
                                   f"the job of allocation {aid}")
                        assert c.delete(f"/v1/allocations/{aid}").status_code == 204
                        done.add(aid)
                        return True
                return False

            while len(done) < 20:
                wait_until(a_job_ran, 30, f"one more job to run ({len(done)} of 20 so far)")
            for aid, cl in ids.items():
                assert [e for e in events(c, cl) if e["type"] == "reclaim"] == [], aid
    finally:
        for a in agents:
            a.kill()
        m.proc.kill()
