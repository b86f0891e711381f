"""The agent as a real process against a tiny in-test master: register, start, report, stop, forget,
an extra heartbeat on exit, restart reconciliation, leader redirects, registering again, --light."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.agent.fake_master import TOKEN, FakeMaster
from tests.service.live import Proc, reap, start_agent, wait_until

PY = sys.executable
SLEEPS = "import time; print('hello', flush=True); time.sleep(60)"


@pytest.fixture
def master() -> Iterator[FakeMaster]:
    with FakeMaster() as m:
        yield m


class Agents:
    """Agent processes started by a test (tests/service/live.py's start_agent), stopped after it."""

    def __init__(self) -> None:
        self.procs: list[Proc] = []

    def start(self, masters: str, name: str, workdir: Path, *extra: str) -> Proc:
        p = start_agent(masters, name, workdir, token=TOKEN, extra=list(extra))
        self.procs.append(p)
        return p

    def stop_all(self) -> str:
        for p in self.procs:
            p.kill(signal.SIGTERM)
        return "".join(p.output() for p in self.procs)


@pytest.fixture
def agents() -> Iterator[Agents]:
    a = Agents()
    yield a
    a.stop_all()
    reap()  # whatever a failed test left running


def start_cmd(activity: int, code: str, allocation: int = 7) -> dict:
    return {"op": "start", "activity": activity, "allocation": allocation, "argv": [PY, "-c", code],
            "env": {"GREETING": "hi"}, "cwd": None, "slots": 1}


def state_of(master: FakeMaster, host: str, activity: int) -> str | None:
    r = master.report(host, activity)
    return None if r is None else r["state"]


def test_register_start_report_stop_forget(master: FakeMaster, agents: Agents, tmp_path: Path) -> None:
    agents.start(master.url, "h1", tmp_path / "w", "--slots", "3", "--memory", "2.5", "-a", "rack=r1",
                 "-a", "gpu=2", "-a", "fast=true")
    wait_until(lambda: master.registers, what="a register")
    host, facts = master.registers[0]
    assert host == "h1"
    assert facts["slots"] == 3 and facts["memory"] == 2.5 and facts["activities"] == []
    assert facts["attributes"] == {"rack": "r1", "gpu": 2, "fast": True} and facts["os"]

    master.send("h1", start_cmd(1, "import os, time; print('hello', os.environ['GREETING'], "
                                   "os.environ['APPORTION_ACTIVITY'], flush=True); time.sleep(60)"))
    wait_until(lambda: state_of(master, "h1", 1) == "running", what="activity 1 running")
    pid = master.report("h1", 1)["pid"]
    assert psutil.pid_exists(pid)
    wait_until(lambda: master.output.get(1, {}).get("stdout") == ["hello hi 1"], what="activity 1's output")

    # An exit is heard at once (an extra heartbeat), not at the end of the long poll.
    master.send("h1", start_cmd(2, "import sys; print('bye', file=sys.stderr); sys.exit(4)"))
    wait_until(lambda: state_of(master, "h1", 2) == "exited", what="activity 2 exited")
    r2 = master.report("h1", 2)
    assert (r2["exit_code"], r2["signal"]) == (4, None)
    assert master.output[2]["stderr"] == ["bye"]

    master.send("h1", {"op": "stop", "activity": 1, "kill_grace": 5.0})
    wait_until(lambda: state_of(master, "h1", 1) == "killed", what="activity 1 killed")
    assert master.report("h1", 1)["signal"] == signal.SIGTERM

    master.send("h1", {"op": "forget", "activity": 1})
    master.send("h1", {"op": "forget", "activity": 2})
    wait_until(lambda: master.reports["h1"] == {}, what="both forgotten")
    logs = agents.stop_all()
    assert TOKEN not in logs
    assert "registered" in logs


def test_restart_reconciles(master: FakeMaster, agents: Agents, tmp_path: Path) -> None:
    first = agents.start(master.url, "h1", tmp_path / "w")
    for activity in (1, 2):
        master.send("h1", start_cmd(activity, SLEEPS))
    wait_until(lambda: state_of(master, "h1", 1) == state_of(master, "h1", 2) == "running", what="both running")
    pids = {a: master.report("h1", a)["pid"] for a in (1, 2)}
    first.kill(signal.SIGKILL)  # the agent leaves no word; its activities keep running
    assert all(psutil.pid_exists(p) for p in pids.values())
    master.known.discard(1)  # the master has no record of activity 1: it will say stop

    agents.start(master.url, "h1", tmp_path / "w")
    wait_until(lambda: len(master.registers) >= 2, what="the second register")
    assert master.registers[1][1]["activities"] == [{"id": 1, "state": "running", "pid": pids[1]},
                                                    {"id": 2, "state": "running", "pid": pids[2]}]
    wait_until(lambda: state_of(master, "h1", 1) == "killed", what="activity 1 stopped")
    wait_until(lambda: not psutil.pid_exists(pids[1]) or psutil.Process(pids[1]).status() == "zombie",
          what="activity 1's process gone")
    assert state_of(master, "h1", 2) == "running"
    master.send("h1", {"op": "stop", "activity": 2, "kill_grace": 5.0})
    wait_until(lambda: state_of(master, "h1", 2) == "killed", what="activity 2 stopped")


def test_follows_the_leader_and_registers_again(master: FakeMaster, agents: Agents, tmp_path: Path) -> None:
    dead = "http://127.0.0.1:9"  # nothing listens there: the agent moves on
    with FakeMaster(leader=master.url) as standby:
        agents.start(f"{dead},{standby.url}", "h1", tmp_path / "w")
        wait_until(lambda: master.registers, what="a register with the leader")
        wait_until(lambda: master.heartbeats >= 2, what="heartbeats to the leader")
        assert standby.registers == []
    master.forget_hosts()  # a master that answers 404: the agent registers again
    wait_until(lambda: len(master.registers) >= 2, what="a second register")


def test_keeps_running_across_a_master_restart(agents: Agents, tmp_path: Path) -> None:
    with FakeMaster() as first:
        port = first.server.servers[0].sockets[0].getsockname()[1]
        agents.start(first.url, "h1", tmp_path / "w")
        first.send("h1", start_cmd(1, SLEEPS))
        wait_until(lambda: state_of(first, "h1", 1) == "running", what="activity 1 running")
        pid = first.report("h1", 1)["pid"]
    # The master is gone (the agent's long poll breaks) and comes back on the same port.
    second = FakeMaster(port=port)
    second.known.add(1)  # before it listens: the agent may register at once
    with second:
        wait_until(lambda: second.registers, what="a register with the new master")
        assert second.registers[0][1]["activities"] == [{"id": 1, "state": "running", "pid": pid}]
        wait_until(lambda: state_of(second, "h1", 1) == "running", what="activity 1 reported again")
        second.send("h1", {"op": "stop", "activity": 1, "kill_grace": 5.0})
        wait_until(lambda: state_of(second, "h1", 1) == "killed", what="activity 1 killed")


def test_light_agents_in_one_process(master: FakeMaster, agents: Agents, tmp_path: Path) -> None:
    agents.start(master.url, "l", tmp_path / "w", "--light", "--count", "3")
    wait_until(lambda: len(master.registers) == 3, what="three registers")
    assert sorted(h for h, _ in master.registers) == ["l-0", "l-1", "l-2"]
    master.send("l-2", start_cmd(1, SLEEPS))
    wait_until(lambda: state_of(master, "l-2", 1) == "running", what="a light start")
    assert master.report("l-2", 1)["pid"] == 0
    master.send("l-2", {"op": "stop", "activity": 1, "kill_grace": 5.0})
    wait_until(lambda: state_of(master, "l-2", 1) == "killed", what="a light stop")
    assert master.report("l-2", 1)["signal"] == signal.SIGTERM
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["agent.log"]  # no state, no output
