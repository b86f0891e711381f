"""One reclaim followed all the way, with a real master, a real agent and real processes.

/A holds both slots of host h1 and runs two processes; the newer one ignores
SIGTERM. /B arrives with an equal share: one slot is reclaimed from /A with /A's
grace period. /A ignores the reclaim. At the deadline the master takes the slot
back, the agent sends SIGTERM to /A's newest process and SIGKILL after kill_grace,
and only once the agent reports it gone is the slot granted to /B, whose own
process then starts.
"""

from __future__ import annotations

import sys

from tests.service.live import SLEEPER, events, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A, grace: 2}
  - {path: /B, grace: 2}
"""

IGNORES_TERM = [sys.executable, "-c",
                "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
                "while True: time.sleep(0.05)"]


def test_reclaim_end_to_end(tmp_path, db_url):
    m = start_master(tmp_path / "m", PLAN, db=db_url)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=2)
    try:
        with m.http() as c:
            wait_until(lambda: any(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]), 20, "h1 up")
            a = c.post("/v1/clients", json={"name": "appA", "consumer": "/A"}).json()["id"]
            b = c.post("/v1/clients", json={"name": "appB", "consumer": "/B"}).json()["id"]
            alloc_a = c.post("/v1/allocations", json={"client": a, "consumer": "/A", "group": "all", "max": 2})
            assert alloc_a.status_code == 201, alloc_a.text
            aid = alloc_a.json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["hosts"] == {"h1": 2}, 20, "A granted 2")
            first = c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": SLEEPER}).json()["id"]
            newest = c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": IGNORES_TERM}).json()["id"]
            # a third process would use more than A holds on h1
            over = c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": SLEEPER})
            assert over.status_code == 422 and over.json()["detail"][0]["loc"] == ["body", "slots"]
            for act in (first, newest):
                wait_until(lambda act=act: c.get(f"/v1/activities/{act}").json()["state"] == "running", 20,
                           f"activity {act} running")
            wait_until(lambda: c.get(f"/v1/activities/{newest}/output").json()["stdout"] == ["ready"], 20,
                       "the SIGTERM trap set")

            bid = c.post("/v1/allocations", json={"client": b, "consumer": "/B", "group": "all", "max": 1}).json()["id"]
            reclaim = wait_until(lambda: [e for e in events(c, a) if e["type"] == "reclaim"], 20, "a reclaim event")[0]
            assert reclaim["allocation"] == aid and reclaim["host"] == "h1" and reclaim["slots"] == 1
            assert reclaim["for"] == "/B"
            assert c.get(f"/v1/allocations/{aid}").json()["reclaiming"] == [
                {"host": "h1", "slots": 1, "deadline": reclaim["deadline"], "for": "/B"}]
            # /A ignores it. Until the deadline /B gets nothing: the slot is still /A's
            assert c.get(f"/v1/allocations/{bid}").json()["held"] == 0

            killed = wait_until(lambda: [e for e in events(c, a) if e["type"] == "activity"
                                         and e["activity"] == newest and e["state"] in ("killed", "exited")],
                                30, "A's newest process gone")[0]
            assert killed["state"] == "killed" and killed["signal"] == 9, killed  # it ignored SIGTERM
            removed = [e for e in events(c, a) if e["type"] == "removed"]
            assert removed and removed[0]["slots"] == 1 and removed[0]["at"] >= reclaim["deadline"]
            # SIGKILL came kill_grace (1 s) after the SIGTERM sent at the deadline
            assert killed["at"] - reclaim["deadline"] >= 1.0, (killed, reclaim)
            # the older process runs on: A still holds one slot on h1
            assert c.get(f"/v1/activities/{first}").json()["state"] == "running"
            assert c.get(f"/v1/allocations/{aid}").json()["hosts"] == {"h1": 1}

            granted_b = wait_until(lambda: [e for e in events(c, b) if e["type"] == "granted"], 20, "B granted")[0]
            assert granted_b["host"] == "h1" and granted_b["slots"] == 1
            assert granted_b["id"] > killed["id"], "B was granted the slot before A's process was gone"
            b_act = c.post(f"/v1/allocations/{bid}/activities", json={"host": "h1", "argv": SLEEPER}).json()["id"]
            wait_until(lambda: c.get(f"/v1/activities/{b_act}").json()["state"] == "running", 20, "B's process")
            hosts = c.get("/v1/hosts").json()["hosts"]
            assert hosts[0]["used"] == 2 and hosts[0]["free"] == 0
    finally:
        agent.kill()
        m.proc.kill()


OPS_PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /Ops, owned: 2}
  - {path: /Apps}
  - {path: /Apps/batch, grace: 1}
  - {path: /Apps/web, share_ratio: 2}
"""


def test_the_beneficiary_waits_for_the_processes_even_beside_idle_owned_slots(tmp_path):
    """/Ops owns 2 of h1's 6 slots and leaves them idle. While batch's reclaimed processes
    are being stopped, web must not be served out of /Ops' idle slots instead."""
    m = start_master(tmp_path / "m", OPS_PLAN)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=6)
    try:
        with m.http() as c:
            wait_until(lambda: c.get("/v1/hosts").json()["hosts"], 20, "h1 up")
            batch = c.post("/v1/clients", json={"name": "batch", "consumer": "/Apps/batch"}).json()["id"]
            web = c.post("/v1/clients", json={"name": "web", "consumer": "/Apps/web"}).json()["id"]
            aid = c.post("/v1/allocations", json={"client": batch, "consumer": "/Apps/batch", "max": 4}).json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 4, 20, "batch granted 4")
            acts = [c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": IGNORES_TERM}).json()["id"]
                    for _ in range(4)]
            for x in acts:
                wait_until(lambda x=x: c.get(f"/v1/activities/{x}/output").json()["stdout"] == ["ready"], 20, "ready")
            wid = c.post("/v1/allocations", json={"client": web, "consumer": "/Apps/web", "max": 4}).json()["id"]
            killed = wait_until(lambda: [e for e in events(c, batch) if e["type"] == "activity"
                                         and e["state"] == "killed"], 30, "batch's processes killed")
            granted = wait_until(lambda: [e for e in events(c, web) if e["type"] == "granted"], 20, "web granted")
            assert granted[0]["id"] > max(e["id"] for e in killed), (granted, killed)
            assert granted[0]["at"] >= max(e["at"] for e in killed)
            # the four processes go one by one, and web is granted as each one's slots come free
            wait_until(lambda: c.get(f"/v1/allocations/{wid}").json()["held"] == 3, 20, "web holds 3")
    finally:
        agent.kill()
        m.proc.kill()
