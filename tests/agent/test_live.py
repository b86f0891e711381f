"""End to end: a real master, the agent as a real process, real activities; then the agent is
SIGKILLed and restarted, and reconciles with the master."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from apportion.agent import statefile
from apportion.agent.groups import is_alive, process_create_time, signal_group
from apportion.client import Client
from tests.agent.helpers import until
from tests.agent.live_master import live_master, spawn_agent

PY = sys.executable
SLEEPS = "import time; print('hello', flush=True); time.sleep(60)"


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _cleanup(agents: list[subprocess.Popen[bytes]], workdir: Path) -> None:
    for a in agents:
        if a.poll() is None:
            a.send_signal(signal.SIGTERM)
        a.communicate(timeout=10)
    for entry in statefile.load(workdir).values():
        if entry.state == "running" and is_alive(entry.pid, entry.create_time):
            signal_group(entry.pid, signal.SIGKILL)


@pytest.mark.timeout(120)
def test_real_master_agent_restart_reconciles(tmp_path: Path) -> None:
    # Heartbeat 2 s: the host is declared down after 6 s without one, longer than the agent's restart.
    with live_master(tmp_path, "--heartbeat", "2", "--kill-grace", "2") as master:
        workdir = tmp_path / "agent"
        agents = [spawn_agent(master, "h1", workdir, "--slots", "2", "-a", "ssd=true")]
        stray: subprocess.Popen[bytes] | None = None
        try:
            api = Client(master.url, token=master.token)
            until(lambda: any(h["name"] == "h1" and h["state"] == "ok" for h in api.hosts()),
                  20, "host h1 reported")
            client = api.register("e2e", "/A")
            alloc = api.allocate("/A", "RG1", 2, 2, client=client)["id"]
            until(lambda: api.allocation(alloc)["hosts"] == {"h1": 2}, 20, "2 slots granted on h1")

            keep = api.start_activity(alloc, "h1", [PY, "-c", SLEEPS])["id"]
            lose = api.start_activity(alloc, "h1", [PY, "-c", SLEEPS])["id"]
            for act in (keep, lose):
                until(lambda: api.activity(act)["state"] == "running", 20, f"activity {act} running")
            until(lambda: api.activity_output(keep)["stdout"] == ["hello"], 20, "its output")
            pid_keep, pid_lose = api.activity(keep)["pid"], api.activity(lose)["pid"]

            # The agent dies without a word; its activities live on.
            agents[0].kill()
            agents[0].wait()
            assert not _gone(pid_keep) and not _gone(pid_lose)
            # While it is away, one activity dies, and a process the master never heard of
            # appears in the state file.
            signal_group(pid_lose, signal.SIGKILL)
            until(lambda: _gone(pid_lose), what="the lost activity's process gone")
            stray = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], start_new_session=True)
            entries = statefile.load(workdir)
            entries[10_000] = statefile.Entry(allocation=alloc, pid=stray.pid,
                                              create_time=process_create_time(stray.pid) or 0.0, state="running")
            statefile.save(workdir, entries)

            agents.append(spawn_agent(master, "h1", workdir, "--slots", "2", "-a", "ssd=true"))
            until(lambda: api.activity(lose)["state"] == "exited", 20, "the lost activity reported exited")
            assert api.activity(lose)["exit_code"] is None
            stray.wait(timeout=20)  # the master said stop: the agent killed it
            assert stray.returncode == -signal.SIGTERM
            until(lambda: 10_000 not in statefile.load(workdir), 20, "the stray forgotten")
            a = api.activity(keep)
            assert (a["state"], a["pid"]) == ("running", pid_keep)
            assert not _gone(pid_keep)

            api.kill_activity(keep)
            until(lambda: api.activity(keep)["state"] == "killed", 20, "the kept activity killed")
            assert api.activity(keep)["signal"] == signal.SIGTERM
            until(lambda: _gone(pid_keep), what="its process gone")
        finally:
            if stray is not None and stray.poll() is None:
                stray.kill()
                stray.wait()
            _cleanup(agents, workdir)
