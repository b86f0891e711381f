"""A master killed with SIGKILL and restarted loses nothing; hosts and agents come and go.

Each runs a real master and real agents on loopback, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import sys

import psutil

from apportion.agent import statefile
from tests.service.live import events, granted, host_state, reap, running, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A, grace: 3}
  - {path: /B, grace: 3}
"""


def test_master_sigkill_loses_nothing(tmp_path, db_url):
    m = start_master(tmp_path / "m", PLAN, db=db_url)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=4)
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            a, aid = granted(c, "appA", "/A", 4, group="all")
            act, pid = running(c, aid, "h1")
            b = c.post("/v1/clients", json={"name": "appB", "consumer": "/B"}).json()["id"]
            bid = c.post("/v1/allocations", json={"client": b, "consumer": "/B", "group": "all", "max": 2}).json()["id"]
            before = wait_until(lambda: (x := c.get(f"/v1/allocations/{aid}").json())["reclaiming"] and x, 20,
                                "a pending reclaim on A")
            deadline = before["reclaiming"][0]["deadline"]
            events_a, events_b = events(c, a), events(c, b)

        m.proc.kill(signal.SIGKILL)  # not stopped cleanly
        m.proc.start()
        wait_until(m.ready, 30, "the master back")
        with m.http() as c:
            after = c.get(f"/v1/allocations/{aid}").json()
            # the grants, and the pending reclaim with its absolute deadline, are as they were
            # (unless the deadline already passed while the master restarted)
            if after["reclaiming"]:
                assert after == before
            assert c.get(f"/v1/allocations/{bid}").json()["consumer"] == "/B"
            # the stored events are the same events, with the same ids
            assert events(c, a)[:len(events_a)] == events_a
            assert events(c, b)[:len(events_b)] == events_b
            # the process runs on: the agent kept it and the master recovered it
            assert c.get(f"/v1/activities/{act}").json()["state"] == "running"
            assert psutil.pid_exists(pid)
            # the reclaim is enforced at its deadline, not a grace period later
            removed = wait_until(lambda: [e for e in events(c, a) if e["type"] == "removed"], 20, "removal")[0]
            assert deadline <= removed["at"] <= deadline + 3.0, (removed, deadline)
            wait_until(lambda: c.get(f"/v1/allocations/{bid}").json()["held"] == 2, 20, "B granted 2")
            ids = [e["id"] for e in events(c, a) + events(c, b)]
            assert len(ids) == len(set(ids)), "an event id was given twice"
            used = {h["name"]: h["used"] for h in c.get("/v1/hosts").json()["hosts"]}
            assert used == {"h1": 4}
    finally:
        agent.kill()
        m.proc.kill()
        reap()  # the activities a killed agent leaves running, as it should


def test_host_down_and_back(tmp_path):
    m = start_master(tmp_path / "m", PLAN)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=2)
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            a, aid = granted(c, "appA", "/A", 2, group="all")
            act, pid = running(c, aid, "h1")

            agent.kill(signal.SIGKILL)  # the host goes silent: 3 missed heartbeats later it is down
            wait_until(lambda: host_state(m, "h1") == "down", 20, "h1 down")
            lost = [e for e in events(c, a) if e["type"] == "lost"]
            assert lost and sum(e["slots"] for e in lost) == 2 and lost[0]["host"] == "h1"
            assert c.get(f"/v1/allocations/{aid}").json()["held"] == 0
            assert c.get(f"/v1/activities/{act}").json()["state"] == "lost"

            agent = start_agent(m, "h1", tmp_path / "h1", slots=2)  # it comes back
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 back")
            # offered again: the allocation still wants 2 and gets them
            wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == 2, 20, "A granted again")
            # the process the master declared lost does not run on beside the new grants
            wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie", 20,
                       "the lost process stopped by the returning agent")
    finally:
        agent.kill()
        m.proc.kill()
        reap()  # the activities a killed agent leaves running, as it should


def test_agent_restart_reconciles(tmp_path):
    # a 1 s heartbeat: the agent's restart fits inside the 3 s before its host would be down
    m = start_master(tmp_path / "m", PLAN, extra=["--heartbeat", "1"])
    agent = start_agent(m, "h1", tmp_path / "h1", slots=3)
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            a, aid = granted(c, "appA", "/A", 3, group="all")
            acts, pids = zip(*(running(c, aid, "h1") for _ in range(3)))

            agent.kill(signal.SIGKILL)
            os.kill(pids[1], signal.SIGKILL)  # this one dies while its agent is away
            c.post(f"/v1/activities/{acts[2]}/kill")  # this one the master wants gone meanwhile
            agent = start_agent(m, "h1", tmp_path / "h1", slots=3)

            # the survivor is kept; the one that died is reported ended; the unwanted one is stopped
            gone = wait_until(lambda: (x := c.get(f"/v1/activities/{acts[1]}").json())["state"] != "running" and x,
                              20, "the dead process reported")
            assert gone["state"] in ("exited", "killed")
            wait_until(lambda: c.get(f"/v1/activities/{acts[2]}").json()["state"] == "killed", 20, "stopped")
            assert not psutil.pid_exists(pids[2]) or psutil.Process(pids[2]).status() == "zombie"
            assert c.get(f"/v1/activities/{acts[0]}").json()["state"] == "running"
            assert psutil.pid_exists(pids[0])
            assert host_state(m, "h1") == "ok"
            assert not [e for e in events(c, a) if e["type"] == "lost"]
    finally:
        agent.kill()
        m.proc.kill()
        reap()  # the activities a killed agent leaves running, as it should


def test_an_end_seen_while_the_master_was_away_keeps_its_exit_code(tmp_path, db_url):
    """The agent registers again with the ends it has not yet reported: the master hears how they
    ended (exit code 3) instead of ending them itself as exited with no code."""
    m = start_master(tmp_path / "m", PLAN, db=db_url)
    agent = start_agent(m, "h1", tmp_path / "h1", slots=2)
    flag = f"/tmp/apportion-test-exit-{os.getpid()}-{tmp_path.name}"
    waits = [sys.executable, "-c", f"import os, time\nwhile not os.path.exists({flag!r}): time.sleep(0.02)\n"
                              "raise SystemExit(3)"]
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            _, aid = granted(c, "appA", "/A", 2, group="all")
            act, pid = running(c, aid, "h1", waits)
        m.proc.kill(signal.SIGKILL)
        open(flag, "w").close()  # noqa: SIM115 - the process ends while the master is away
        wait_until(lambda: statefile.load(tmp_path / "h1")[act].state != "running", 20,
                   "the agent to see the process end")
        m.proc.start()
        wait_until(m.ready, 30, "the master back")
        with m.http() as c:
            end = wait_until(lambda: (x := c.get(f"/v1/activities/{act}").json())["state"] != "running" and x, 20,
                             "the end reported")
            assert (end["state"], end["exit_code"]) == ("exited", 3), end
    finally:
        agent.kill()
        m.proc.kill()
        reap()
        if os.path.exists(flag):
            os.unlink(flag)
