"""A double-forked setsid daemon dies with its activity on a kill, on a reclaim and on a release, with
a real master, a real agent (in its cgroups, as root, and with process tracking alone) and real
processes; each time the slot goes to the beneficiary only after the daemon is gone. The agent
reports its containment level. A memory hog is OOM-killed and a fork loop held, the host going on."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.agent.containment_helpers import cgroup_level, daemon_argv, gone, subtree_dirs
from tests.service.live import SLEEPER, events, reap, start_agent, start_master, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /A, grace: 1}
  - {path: /B, grace: 1}
"""


@pytest.fixture(autouse=True)
def _reap() -> Iterator[None]:
    yield
    reap()


def _running_daemon(c: httpx.Client, alloc: int) -> tuple[int, int]:
    """Start a daemonizing activity on h1: (activity id, the daemon's pid)."""
    act = c.post(f"/v1/allocations/{alloc}/activities", json={"host": "h1", "argv": daemon_argv()}).json()["id"]
    lines = wait_until(lambda: [x for x in c.get(f"/v1/activities/{act}/output").json()["stdout"]
                                if x.startswith("daemon")], 20, f"activity {act}'s daemon")
    return act, int(lines[0].split()[1])


def _ended(c: httpx.Client, client: int, act: int) -> dict:
    return wait_until(lambda: next((e for e in events(c, client) if e["type"] == "activity" and e["activity"] == act
                                    and e["state"] not in ("starting", "running")), None), 20, f"activity {act} ends")


def _granted(c: httpx.Client, client: int, n: int) -> dict:
    return wait_until(lambda: (g := [e for e in events(c, client) if e["type"] == "granted"])[n - 1:] and g[n - 1],
                      20, f"grant {n} of client {client}")


@pytest.mark.parametrize("containment", ["auto", "process-group"])
def test_a_daemon_dies_on_kill_reclaim_and_release(tmp_path: Path, containment: str) -> None:
    cgroup_level(tmp_path / "probe").close()  # skips without root and a writable cgroup
    m = start_master(tmp_path / "m", PLAN)
    agent_dir = tmp_path / "h1"
    agent = start_agent(m, "h1", agent_dir, slots=2, extra=["--unkillable-timeout", "5", "--containment", containment])
    try:
        with m.http() as c:
            host = wait_until(lambda: next((h for h in c.get("/v1/hosts").json()["hosts"] if h["state"] == "ok"),
                                           None), 20, "h1 up")
            assert host["containment"] in (("cgroup-v1", "cgroup-v2") if containment == "auto" else (containment,))
            a = c.post("/v1/clients", json={"name": "appA", "consumer": "/A"}).json()["id"]
            b = c.post("/v1/clients", json={"name": "appB", "consumer": "/B"}).json()["id"]
            alloc_a = c.post("/v1/allocations", json={"client": a, "consumer": "/A", "group": "all", "max": 2}).json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{alloc_a}").json()["hosts"] == {"h1": 2}, 20, "A granted 2")

            # A kill: ended only once the daemon is gone.
            act, daemon = _running_daemon(c, alloc_a)
            c.post(f"/v1/activities/{act}/kill").raise_for_status()
            assert _ended(c, a, act)["state"] == "killed"
            assert gone(daemon), "reported killed while its daemon runs"

            # A reclaim: B asks for both slots, and gets one (equal shares) at A's deadline, when the
            # master stops A's newest activity; the slot is B's only after that daemon is gone.
            older, older_daemon = _running_daemon(c, alloc_a)
            newest, newest_daemon = _running_daemon(c, alloc_a)
            c.post("/v1/allocations", json={"client": b, "consumer": "/B", "group": "all", "max": 2}).raise_for_status()
            grant = _granted(c, b, 1)
            assert gone(newest_daemon), "B was granted the slot while the reclaimed activity's daemon ran"
            assert grant["id"] > _ended(c, a, newest)["id"]
            assert not gone(older_daemon)

            # A release: A gives back everything, its last activity is stopped, and B gets the second
            # slot once that daemon is gone.
            c.post(f"/v1/allocations/{alloc_a}/release").raise_for_status()
            grant = _granted(c, b, 2)
            assert gone(older_daemon), "B was granted the slot while the released activity's daemon ran"
            assert grant["id"] > _ended(c, a, older)["id"]
            done = c.get(f"/v1/activities/{older}").json()
            # no execution user in the plan: a uid of the consumer's own (--dynamic-users)
            assert done["user"] == f"dynamic-{done['uid']}" and done["usage"]["cpu_seconds"] >= 0
    finally:
        agent.kill(15)
        m.proc.kill()
    assert "agent stopped" in agent.output()
    assert subtree_dirs(agent_dir) == [], "the agent left its cgroup subtree behind"


HOG = [sys.executable, "-c", "x = []\nwhile True: x.append(bytearray(1 << 20))"]
FORK_LOOP = [sys.executable, "-c", "import os, time\nn = 1\nwhile True:\n try:\n  pid = os.fork()\n except OSError:\n"
             "  print('stopped at', n, flush=True); break\n if pid == 0:\n  time.sleep(600)\n n += 1\ntime.sleep(600)"]


def test_a_memory_hog_and_a_fork_loop_are_held_while_the_host_goes_on(tmp_path: Path) -> None:
    cgroup_level(tmp_path / "probe").close()
    m = start_master(tmp_path / "m", PLAN)
    # 0.25 GB and 4 slots: an activity of one slot may use 64 MiB; 16 processes at most.
    agent = start_agent(m, "h1", tmp_path / "h1", slots=4, extra=["--memory", "0.25", "--pids-limit", "16"])
    try:
        with m.http() as c:
            wait_until(lambda: any(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]), 20, "h1 up")
            a = c.post("/v1/clients", json={"name": "appA", "consumer": "/A"}).json()["id"]
            alloc = c.post("/v1/allocations", json={"client": a, "consumer": "/A", "group": "all", "max": 4}).json()["id"]
            wait_until(lambda: c.get(f"/v1/allocations/{alloc}").json()["held"] == 4, 20, "A granted 4")

            def start(argv: list[str]) -> int:
                return c.post(f"/v1/allocations/{alloc}/activities", json={"host": "h1", "argv": argv}).json()["id"]
            neighbour = start(SLEEPER)
            forks = start(FORK_LOOP)
            hog = start(HOG)
            end = wait_until(lambda: (x := c.get(f"/v1/activities/{hog}").json())["state"] not in ("starting", "running")
                             and x, 30, "the hog ends")
            assert (end["state"], end["oom"]) == ("killed", True), end
            assert end["stop_reason"].startswith("out of memory: limit 64 MiB, peak "), end
            assert end["limits"]["memory"] == 64 << 20 and end["usage"]["memory_peak"] > 32 << 20
            held = wait_until(lambda: [x for x in c.get(f"/v1/activities/{forks}/output").json()["stdout"]
                                       if x.startswith("stopped at")], 20, "the fork loop held")
            assert held == ["stopped at 16"]
            assert c.get(f"/v1/activities/{forks}").json()["limits"]["pids"] == 16
            assert c.get(f"/v1/activities/{neighbour}").json()["state"] == "running"
            host = c.get("/v1/hosts").json()["hosts"][0]
            assert host["state"] == "ok" and host["containment"] in ("cgroup-v1", "cgroup-v2")
            again = start([sys.executable, "-c", "print('still here')"])
            wait_until(lambda: c.get(f"/v1/activities/{again}").json()["state"] == "exited", 20, "a start after")
    finally:
        agent.kill(15)
        m.proc.kill()
