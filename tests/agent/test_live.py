"""End to end with a real master (tests/service/live.py): the agent as a real process, activities
started through the API; the agent SIGKILLed and restarted reconciles; light agents under --count;
the agent follows a failover to the standby (PostgreSQL)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from apportion.agent import statefile
from apportion.agent.groups import process_create_time
from apportion.client import Client
from tests.service.live import Master, host_state, postgres_url, reap, start_agent, start_master, wait_until

PY = sys.executable
PLAN = """
resource_groups:
  - {name: RG1, select: "select(ssd)"}
consumers:
  - {path: /A, owned: 2}
  - {path: /B}
"""
SHOWS_ENV = ("import os, time\nfor k in ('APPORTION_ALLOCATION', 'APPORTION_HOST', 'APPORTION_SLOTS', "
             "'APPORTION_ACTIVITY', 'APPORTION_TOKEN'):\n print(k, os.environ.get(k), flush=True)\ntime.sleep(60)")


@pytest.fixture(autouse=True)
def _reap() -> Iterator[None]:
    yield
    reap()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _granted(master: Master, hosts: set[str], slots: int) -> tuple[Client, int, str]:
    api = Client(master.url, token=master.token)
    wait_until(lambda: all(host_state(master, h) == "ok" for h in hosts), 20, f"{hosts} up")
    client = api.register("agent-e2e", "/A")
    alloc = api.allocate("/A", "RG1", slots, slots, client=client)["id"]
    held = wait_until(lambda: api.allocation(alloc)["hosts"], 20, "slots granted")
    return api, alloc, next(iter(held))


def _ended(api: Client, activity: int) -> dict:
    return wait_until(lambda: (a := api.activity(activity))["state"] not in ("starting", "running") and a, 20,
                      f"activity {activity} ended")


def test_activities_and_an_agent_restart(tmp_path: Path) -> None:
    # Heartbeat 2 s: the host is down only after 6 s without one, longer than the agent's restart.
    m = start_master(tmp_path / "m", PLAN, extra=["--heartbeat", "2", "--kill-grace", "2"])
    agent_dir = tmp_path / "h1"
    agent = start_agent(m, "h1", agent_dir, slots=2, extra=["-a", "ssd=true", "--heartbeat", "2"])
    stray: subprocess.Popen[bytes] | None = None
    try:
        api, alloc, _ = _granted(m, {"h1"}, 2)

        # What an activity sees, its exit code, a start that cannot run.
        shows = api.start_activity(alloc, "h1", [PY, "-c", SHOWS_ENV])["id"]
        wait_until(lambda: len(api.activity_output(shows)["stdout"]) == 5, 20, "its output")
        assert api.activity_output(shows)["stdout"] == [
            f"APPORTION_ALLOCATION {alloc}", "APPORTION_HOST h1", "APPORTION_SLOTS 1",
            f"APPORTION_ACTIVITY {shows}", "APPORTION_TOKEN None"]
        fails = api.start_activity(alloc, "h1", [PY, "-c", "import sys; print('no', file=sys.stderr); sys.exit(3)"])
        assert (_ended(api, fails["id"])["state"], api.activity(fails["id"])["exit_code"]) == ("exited", 3)
        assert api.activity_output(fails["id"])["stderr"] == ["no"]
        bad = api.start_activity(alloc, "h1", ["/nonexistent/program"])["id"]
        assert (_ended(api, bad)["state"], api.activity(bad)["exit_code"]) == ("failed", None)
        assert "/nonexistent/program" in api.activity_output(bad)["stderr"][0]
        pid = api.activity(shows)["pid"]

        # The agent dies without a word; its activity lives on. While it is away, a process the
        # master never heard of appears in its state file.
        agent.kill(signal.SIGKILL)
        assert not _gone(pid)
        stray = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], start_new_session=True)
        entries = statefile.load(agent_dir)
        entries[1_000_000] = statefile.Entry(allocation=alloc, pid=stray.pid,
                                             create_time=process_create_time(stray.pid) or 0.0, state="running")
        statefile.save(agent_dir, entries)

        agent = start_agent(m, "h1", agent_dir, slots=2, extra=["-a", "ssd=true", "--heartbeat", "2"])
        stray.wait(timeout=20)  # the master answered stop: the agent killed it
        assert stray.returncode == -signal.SIGTERM
        wait_until(lambda: 1_000_000 not in statefile.load(agent_dir), 20, "the stray reported and forgotten")
        a = api.activity(shows)
        assert (a["state"], a["pid"]) == ("running", pid) and not _gone(pid)
        assert host_state(m, "h1") == "ok"

        api.kill_activity(shows)
        a = _ended(api, shows)
        assert (a["state"], a["signal"]) == ("killed", signal.SIGTERM)
        wait_until(lambda: _gone(pid), 20, "its process gone")
    finally:
        if stray is not None and stray.poll() is None:
            stray.kill()
            stray.wait()
        agent.kill()
        m.proc.kill()


def test_light_agents_in_one_process(tmp_path: Path) -> None:
    m = start_master(tmp_path / "m", PLAN)
    agents = start_agent(m, "l", tmp_path / "l", slots=2, extra=["-a", "ssd=true", "--light", "--count", "4"])
    try:
        api, alloc, host = _granted(m, {f"l-{i}" for i in range(4)}, 2)
        act = api.start_activity(alloc, host, [PY, "-c", "pass"])["id"]
        wait_until(lambda: api.activity(act)["state"] == "running", 20, "a light start")
        api.kill_activity(act)
        a = _ended(api, act)
        assert (a["state"], a["signal"]) == ("killed", signal.SIGTERM)
        assert len(psutil.Process(agents.popen.pid).children()) == 0  # it started no process
    finally:
        agents.kill()
        m.proc.kill()


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from postgres_url()


def _role(m: Master) -> str | None:
    return httpx.get(m.url + "/healthz", timeout=2).json().get("role")


def test_agent_follows_a_failover(tmp_path: Path, pg_url: str) -> None:
    first = start_master(tmp_path / "m1", PLAN, db=pg_url, extra=["--heartbeat", "1", "--kill-grace", "2"])
    second = start_master(tmp_path / "m2", PLAN, db=pg_url, token=first.token, wait=False,
                          extra=["--heartbeat", "1", "--kill-grace", "2"])
    agent = start_agent(f"{first.url},{second.url}", "h1", tmp_path / "h1", slots=2, token=first.token,
                        extra=["-a", "ssd=true", "--heartbeat", "1"])
    try:
        wait_until(lambda: _role(second) == "standby", 30, "the second master standing by")
        api, alloc, _ = _granted(first, {"h1"}, 2)
        act = api.start_activity(alloc, "h1", [PY, "-c", "import time; time.sleep(60)"])["id"]
        wait_until(lambda: api.activity(act)["state"] == "running", 20, "the activity running")
        pid = api.activity(act)["pid"]

        first.proc.kill(signal.SIGKILL)  # the leader dies; the standby takes over; the agent follows
        wait_until(second.ready, 30, "the standby leading")
        after = Client(second.url, token=first.token)
        wait_until(lambda: host_state(second, "h1") == "ok" and after.activity(act)["state"] == "running", 30,
                   "the agent heard by the new leader, its activity running")
        assert after.activity(act)["pid"] == pid and not _gone(pid)
        after.kill_activity(act)
        assert (_ended(after, act)["state"], after.activity(act)["signal"]) == ("killed", signal.SIGTERM)
    finally:
        agent.kill()
        first.proc.kill()
        second.proc.kill()
