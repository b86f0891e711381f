"""Host states with fencing, with a real master, real agents and real processes.

A host whose agent misses its heartbeats is ``unreachable``: it keeps its allocations and its
activities, and takes nothing new. Only after ``--host-lost-after`` seconds of silence is it
``down`` and its activities ``lost``; even then the slots of those activities stay fenced until
the returning agent reports their processes gone, or an administrator confirms the host dead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from apportion.agent import statefile
from tests.service.live import CLI, events, granted, host_state, reachable_workdir, reap, running, start_agent, \
    start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A, grace: 2}
  - {path: /B, grace: 2}
"""

# an activity of 5 processes (a leader and 4 children) that all ignore SIGTERM
STUBBORN = [sys.executable, "-c",
            "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "for _ in range(4):\n    if os.fork() == 0:\n        break\n"
            "while True: time.sleep(0.05)"]


def host(c, name: str) -> dict:
    return next(h for h in c.get("/v1/hosts").json()["hosts"] if h["name"] == name)


def processes_of(act: int) -> list[psutil.Process]:
    """The live processes of activity ``act`` (descendants of this test: it is a subreaper)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.environ().get("APPORTION_ACTIVITY") == str(act) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def apportion(m, *args: str) -> subprocess.CompletedProcess:
    """The ``apportion`` command as an operator runs it."""
    env = {**os.environ, "APPORTION_MASTER": m.url, "APPORTION_TOKEN": m.token, "COLUMNS": "200",
           "APPORTION_RETRY_FOR": "2"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.slow
def test_an_agent_restarted_20_times_keeps_every_activity(tmp_path):
    """SIGTERM and start again, 20 times, with work running: the host is unreachable meanwhile,
    never down, and every activity is adopted by the next agent: none is lost."""
    m = start_master(tmp_path / "m", PLAN, extra=["--heartbeat", "0.1", "--tick", "0.1", "--host-lost-after", "30"])
    agent = start_agent(m, "h1", tmp_path / "h1", slots=4)
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            a, aid = granted(c, "appA", "/A", 4, group="all")
            acts, pids = zip(*(running(c, aid, "h1") for _ in range(4)))
            began = time.monotonic()
            for i in range(20):
                agent.kill(signal.SIGTERM)  # as an upgrade stops it: its processes keep running
                assert agent.popen.returncode == 0, agent.output()[-2000:]
                # the master notices the silence before the new agent comes (a restart on a quiet
                # machine can be quicker than three missed heartbeats of 0.1 s)
                wait_until(lambda: host_state(m, "h1") == "unreachable", 20, "h1 unreachable")
                agent = start_agent(m, "h1", tmp_path / "h1", slots=4)
                wait_until(lambda: agent.output().count("h1: registered with") == i + 2, 20, "the agent back")
                wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 back")
            took = time.monotonic() - began
            states = [c.get(f"/v1/activities/{act}").json() for act in acts]
            assert [(s["state"], s["pid"]) for s in states] == [("running", pid) for pid in pids], states
            assert all(psutil.pid_exists(pid) for pid in pids)
            assert not [e for e in events(c, a) if e["type"] in ("lost", "removed")]
            assert c.get(f"/v1/allocations/{aid}").json()["hosts"] == {"h1": 4}
            # each restart (a second or more) outlasted 3 missed heartbeats of 0.1 s: unreachable, not down
            said = m.proc.output()
            assert said.count("host h1: no heartbeat for") >= 20 and "down, what ran there is lost" not in said
            print(f"20 agent restarts in {took:.1f} s, 4 of 4 activities kept")
    finally:
        agent.kill()
        m.proc.kill()
        reap()


def test_a_host_back_from_loss_grants_nothing_while_its_old_processes_live(tmp_path):
    """The agent is SIGKILLed under an activity whose 5 processes ignore SIGTERM; the host is
    declared lost, then its agent comes back. Not one slot of it is granted while any of those
    processes lives: the returning agent stops them (SIGKILL after kill_grace), and only then."""
    m = start_master(tmp_path / "m", PLAN, extra=["--host-lost-after", "2"])
    agent = start_agent(m, "h1", tmp_path / "h1", slots=2)
    try:
        with m.http() as c:
            aid, act = stubborn_on_h1(m, c)
            agent.kill(signal.SIGKILL)
            wait_until(lambda: host_state(m, "h1") == "unreachable", 20, "h1 unreachable")
            assert c.get(f"/v1/activities/{act}").json()["state"] == "running"
            assert c.get(f"/v1/allocations/{aid}").json()["hosts"] == {"h1": 2}
            wait_until(lambda: host_state(m, "h1") == "down", 20, "h1 down")
            assert c.get(f"/v1/activities/{act}").json()["state"] == "lost"
            assert c.get(f"/v1/allocations/{aid}").json()["held"] == 0
            h = host(c, "h1")
            assert (h["fenced"], h["fenced_for"]) == (2, [act]), h
            m.restart()  # the fence is in the store: a restarted master keeps it
            h = host(c, "h1")
            assert (h["state"], h["fenced"], h["fenced_for"]) == ("down", 2, [act]), h
            b = c.post("/v1/clients", json={"name": "appB", "consumer": "/B"}).json()["id"]
            bid = c.post("/v1/allocations", json={"client": b, "consumer": "/B", "group": "all", "max": 2}).json()["id"]

            agent = start_agent(m, "h1", tmp_path / "h1", slots=2)  # back: it adopts the 5 processes
            granted_only_once_gone(c, act, [aid, bid])
    finally:
        agent.kill()
        m.proc.kill()
        reap()


def stubborn_on_h1(m, c) -> tuple[int, int]:
    """/A holds h1's 2 slots and runs STUBBORN there; -> (allocation, activity)."""
    wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
    _, aid = granted(c, "appA", "/A", 2, group="all")
    act = c.post(f"/v1/allocations/{aid}/activities", json={"host": "h1", "argv": STUBBORN, "slots": 2}).json()["id"]
    wait_until(lambda: len(processes_of(act)) == 5, 20, "5 processes of the activity")
    return aid, act


def granted_only_once_gone(c, act: int, aids: list[int]) -> None:
    """h1 (2 slots) is back while activity ``act``'s old processes live: nothing of it is granted
    to any of ``aids`` until they are gone, and then it is."""
    fenced_while_alive = 0
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline, "nobody granted h1's slots after its old processes went"
        h = host(c, "h1")
        held = sum(c.get(f"/v1/allocations/{x}").json()["held"] for x in aids)
        alive = processes_of(act)  # read after the grants: alive now, alive when granted
        if held or h["used"]:
            assert not alive, f"h1's slots granted while {len(alive)} old processes run: {h}"
            break
        if alive and h["state"] == "ok":
            fenced_while_alive += 1
            assert h["fenced"] == 2 and h["free"] == 0, h
        time.sleep(0.02)
    assert fenced_while_alive, "the old processes were gone before the host was back"
    assert host(c, "h1")["fenced"] == 0


def test_a_start_the_agent_never_wrote_down_stays_fenced_through_loss(tmp_path):
    """The agent is SIGKILLed after starting an activity and before writing it in its state file,
    and stays away past ``--host-lost-after``; the tenant gives the allocation up meanwhile. The
    agent that comes back does not find the activity in its file: it finds its processes by their
    tag (no cgroups here, as on hosts without them), lists them, and the master keeps the slots
    fenced until they are gone."""
    m = start_master(tmp_path / "m", PLAN, extra=["--host-lost-after", "2"])
    bare = ["--containment", "process-group"]
    agent = start_agent(m, "h1", tmp_path / "h1", slots=2, extra=bare)
    try:
        with m.http() as c:
            aid, act = stubborn_on_h1(m, c)
            agent.kill(signal.SIGKILL)
            statefile.save(reachable_workdir(tmp_path / "h1"), {})  # as it was before the start
            wait_until(lambda: host_state(m, "h1") == "down", 20, "h1 down")
            assert c.delete(f"/v1/allocations/{aid}").status_code in (200, 204)
            assert host(c, "h1")["fenced"] == 2
            b = c.post("/v1/clients", json={"name": "appB", "consumer": "/B"}).json()["id"]
            bid = c.post("/v1/allocations", json={"client": b, "consumer": "/B", "group": "all", "max": 2}).json()["id"]
            agent = start_agent(m, "h1", tmp_path / "h1", slots=2, extra=bare)
            granted_only_once_gone(c, act, [bid])
            assert "the state file did not list it" in agent.output()
    finally:
        agent.kill()
        m.proc.kill()
        reap()


def test_sigkill_of_the_agent_during_a_reclaims_grace_waits_for_the_processes(tmp_path):
    """/B's reclaim of a slot of /A is under way when h1's agent is SIGKILLed; the grace ends
    while the host is unreachable. /B is not granted the slot until /A's processes (which
    ignore SIGTERM) are gone, which the agent says once it is back."""
    m = start_master(tmp_path / "m", PLAN, extra=["--host-lost-after", "30"])
    agent = start_agent(m, "h1", tmp_path / "h1", slots=2)
    try:
        with m.http() as c:
            wait_until(lambda: host_state(m, "h1") == "ok", 20, "h1 up")
            a, aid = granted(c, "appA", "/A", 2, group="all")
            act = c.post(f"/v1/allocations/{aid}/activities",
                         json={"host": "h1", "argv": STUBBORN, "slots": 2}).json()["id"]
            wait_until(lambda: len(processes_of(act)) == 5, 20, "5 processes of the activity")
            b = c.post("/v1/clients", json={"name": "appB", "consumer": "/B"}).json()["id"]
            bid = c.post("/v1/allocations", json={"client": b, "consumer": "/B", "group": "all", "max": 1}).json()["id"]
            reclaim = wait_until(lambda: [e for e in events(c, a) if e["type"] == "reclaim"], 20, "a reclaim")[0]

            agent.kill(signal.SIGKILL)  # during the grace
            assert time.time() < reclaim["deadline"]
            wait_until(lambda: [e for e in events(c, a) if e["type"] == "removed"], 20, "the grace over")
            m.restart()  # an unreachable host, its fence and its pending stop are in the store
            assert c.get("/readyz").json()["quarantined"] == 0
            assert host_state(m, "h1") == "unreachable"
            assert c.get(f"/v1/activities/{act}").json()["stopping"] is True
            assert c.get(f"/v1/allocations/{bid}").json()["held"] == 0
            assert host(c, "h1")["fenced"] == 1

            agent = start_agent(m, "h1", tmp_path / "h1", slots=2)
            fenced_while_alive = 0
            deadline = time.monotonic() + 30
            while True:
                assert time.monotonic() < deadline, "/B never granted"
                held = c.get(f"/v1/allocations/{bid}").json()["held"]
                alive = processes_of(act)
                if held:
                    assert not alive, f"/B granted while {len(alive)} of /A's processes run"
                    break
                if alive and host_state(m, "h1") == "ok":
                    fenced_while_alive += 1
                time.sleep(0.02)
            assert fenced_while_alive, "the processes were gone before the agent was back"
            gone = c.get(f"/v1/activities/{act}").json()
            assert gone["state"] == "killed" and gone["signal"] == 9, gone
            assert not [e for e in events(c, a) if e["type"] == "lost"]
    finally:
        agent.kill()
        m.proc.kill()
        reap()


def _two_hosts_and_a_on_h1(m, c, slots: int) -> tuple[int, int]:
    """Once h1 and h2 are up: /A's client, and its allocation of ``slots`` held on h1."""
    wait_until(lambda: host_state(m, "h1") == "ok" and host_state(m, "h2") == "ok", 20, "hosts up")
    a = c.post("/v1/clients", json={"name": "appA", "consumer": "/A"}).json()["id"]
    aid = c.post("/v1/allocations", json={"client": a, "consumer": "/A", "group": "all", "max": slots,
                                          "requirement": "select(name == 'h1')"}).json()["id"]
    wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["hosts"] == {"h1": slots}, 20, "A on h1")
    return a, aid


def test_confirm_dead_frees_the_host_at_once_and_is_audited(tmp_path):
    m = start_master(tmp_path / "m", PLAN, extra=["--host-lost-after", "60"])
    agents = [start_agent(m, name, tmp_path / name, slots=2) for name in ("h1", "h2")]
    try:
        with m.http() as c:
            a, aid = _two_hosts_and_a_on_h1(m, c, 2)
            act, pid = running(c, aid, "h1", STUBBORN)

            r = apportion(m, "host", "confirm-dead", "h2")
            assert r.returncode == 1 and "409" in r.stderr and "h2 is ok" in r.stderr, r.stderr
            assert c.post("/v1/hosts/nope/confirm-dead").status_code == 404

            agents[0].kill(signal.SIGKILL)
            wait_until(lambda: host_state(m, "h1") == "unreachable", 20, "h1 unreachable")
            assert c.delete("/v1/hosts/h1").status_code == 409  # unreachable: it may come back
            h = host(c, "h1")
            assert h["lost_at"] == h["last_seen"] + 60 and h["unreachable_since"] >= h["last_seen"]

            listed = apportion(m, "host", "list").stdout
            row = [line for line in listed.splitlines() if line.split()[:1] == ["h1"]][0]  # plain columns into a pipe
            assert row.split(None, 1)[1].startswith("unreachable (down at"), listed
            r = apportion(m, "host", "confirm-dead", "h1", "--json")
            assert r.returncode == 0 and json.loads(r.stdout) == {"name": "h1", "state": "down"}, r.stderr
            h = host(c, "h1")
            assert (h["state"], h["fenced"], h["fenced_for"], h["lost_at"]) == ("down", 0, [], None), h
            assert c.get(f"/v1/activities/{act}").json()["state"] == "lost"
            lost = [e for e in events(c, a) if e["type"] == "lost"]
            assert sum(e["slots"] for e in lost) == 2
            rows = c.get("/v1/audit").json()["audit"]
            mine = [(x["method"], x["path"], x["status"], x["outcome"], x["objects"], x["kind"]) for x in rows
                    if x["path"].endswith("/confirm-dead") and x["path"] != "/v1/hosts/nope/confirm-dead"]
            assert mine[0][:3] == ("POST", "/v1/hosts/h2/confirm-dead", 409), mine
            assert mine[1] == ("POST", "/v1/hosts/h1/confirm-dead", 200, "done", {"hosts": "h1"}, "admin"), mine
            assert len(mine) == 2, mine
            assert c.delete("/v1/hosts/h1").status_code == 204  # nothing held, fenced or running there now
    finally:
        for agent in agents:
            agent.kill()
        m.proc.kill()
        reap()


def test_an_unreachable_host_keeps_its_work_and_gets_no_new_placements(tmp_path):
    m = start_master(tmp_path / "m", PLAN, extra=["--host-lost-after", "30"])
    agents = [start_agent(m, name, tmp_path / name, slots=2) for name in ("h1", "h2")]
    try:
        with m.http() as c:
            a, aid = _two_hosts_and_a_on_h1(m, c, 1)
            act, pid = running(c, aid, "h1")

            agents[0].kill(signal.SIGKILL)
            wait_until(lambda: host_state(m, "h1") == "unreachable", 20, "h1 unreachable")
            h = host(c, "h1")
            assert h["free"] == 0 and h["used"] == 1 and h["unreachable_since"] is not None, h
            b, bid = granted(c, "appB", "/B", 2, group="all")
            assert c.get(f"/v1/allocations/{bid}").json()["hosts"] == {"h2": 2}
            more = c.patch(f"/v1/allocations/{bid}", json={"max": 3})
            assert more.status_code == 200, more.text
            # a cycle or two later /B still has nothing on h1, though h1 has a free slot
            cycles = c.get("/readyz").json()["cycles"]
            wait_until(lambda: c.get("/readyz").json()["cycles"] >= cycles + 2, 10, "the master cycling")
            assert c.get(f"/v1/allocations/{bid}").json()["hosts"] == {"h2": 2}
            assert c.get(f"/v1/activities/{act}").json()["state"] == "running"
            assert c.get(f"/v1/allocations/{aid}").json()["hosts"] == {"h1": 1}

            agents[0] = start_agent(m, "h1", tmp_path / "h1", slots=2)
            wait_until(lambda: c.get(f"/v1/allocations/{bid}").json()["hosts"] == {"h1": 1, "h2": 2}, 20,
                       "/B's third slot on h1 once it answers")
            assert c.get(f"/v1/activities/{act}").json()["state"] == "running"
            assert psutil.pid_exists(pid)
            assert not [e for e in events(c, a) if e["type"] == "lost"]
    finally:
        for agent in agents:
            agent.kill()
        m.proc.kill()
        reap()
