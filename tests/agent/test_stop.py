"""The runner's stop leaves nothing running, with real processes in real cgroups: setsid daemons die
with their activity (on a stop, and when the leader exits by itself), at the cgroup level and with
process tracking alone; an OOM kill at the memory limit; a fork loop held at the pids limit; usage
that grows; an agent restart that adopts a cgroup; processes that outlive SIGKILL reported
unkillable; starts that fail end "failed" and the next start goes on. Each runner's subtree is gone
after it closes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apportion.agent.containment.base import write
from apportion.agent.protocol import Start, StartLimits
from apportion.agent.runner import ProcessRunner
from tests.agent.containment_helpers import PY, cgroup_level, daemon_argv, gone, need_root, subtree_dirs
from tests.service.live import wait_until

SLEEPS = [PY, "-c", "import time; print('ready', flush=True); time.sleep(600)"]


def report(r: ProcessRunner, activity: int) -> dict:
    r.poll()
    return next(x for x in r.reports({})[0] if x["id"] == activity)


def ended(r: ProcessRunner, activity: int, timeout: float = 20.0) -> dict:
    return wait_until(lambda: (x := report(r, activity))["state"] != "running" and x, timeout,
                      f"activity {activity} ends")


def daemon_pid(r: ProcessRunner, activity: int) -> int:
    lines = wait_until(lambda: [x for x in report(r, activity).get("stdout", []) if x.startswith("daemon")], 20,
                       "the daemon's pid")
    return int(lines[0].split()[1])


def start(r: ProcessRunner, activity: int, argv: list[str], **kw) -> None:
    r.start(Start(activity=activity, argv=argv, allocation=1, **kw), "h1")


@pytest.fixture(params=["cgroup", "process-group"])
def runner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProcessRunner]:
    work = tmp_path / "work"
    if request.param == "cgroup":
        cgroup_level(work).close()  # skips without one
        r = ProcessRunner(work, unkillable_timeout=5)
    else:
        need_root()  # as root, activities run as nobody: as any user, the level works the same
        r = ProcessRunner(work, containment="process-group", unkillable_timeout=5)
    yield r
    r.close(kill=True)
    assert subtree_dirs(work) == [], "the agent's cgroup subtree is left behind"


@pytest.fixture
def cgroup_runner(tmp_path: Path) -> Iterator[ProcessRunner]:
    work = tmp_path / "work"
    cgroup_level(work).close()
    r = ProcessRunner(work, pids_limit=24, unkillable_timeout=0.5)
    yield r
    r.close(kill=True)
    assert subtree_dirs(work) == [], "the agent's cgroup subtree is left behind"


def test_a_setsid_daemon_dies_with_its_stopped_activity(runner: ProcessRunner) -> None:
    start(runner, 1, daemon_argv())
    daemon = daemon_pid(runner, 1)
    leader = runner.entries[1].pid
    assert os.getsid(daemon) != os.getsid(leader)  # it left the activity's session
    began = time.monotonic()
    runner.stop(1, kill_grace=30)
    end = ended(runner, 1)
    assert gone(daemon) and gone(leader), "reported ended while a process of it lives"
    assert (end["state"], end["signal"]) == ("killed", signal.SIGTERM)
    assert time.monotonic() - began < 20, "the daemon did not get the SIGTERM: it waited for the SIGKILL"


def test_what_an_exited_leader_leaves_is_killed_before_it_ends(runner: ProcessRunner) -> None:
    # The issue's `setsid sleep 97`: the leader exits 0 at once, a daemon stays.
    start(runner, 1, daemon_argv(leader_exits=True))
    end = ended(runner, 1)
    daemon = int(next(x for x in end["stdout"] if x.startswith("daemon")).split()[1])
    assert gone(daemon), "reported exited while its daemon runs"
    assert (end["state"], end["exit_code"]) == ("exited", 0)


def test_a_daemon_that_ignores_sigterm_is_killed_after_the_grace(runner: ProcessRunner) -> None:
    code = ("import os, signal, time\nif os.fork() == 0:\n os.setsid()\n signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            " print('daemon', os.getpid(), flush=True)\n while True: time.sleep(1)\ntime.sleep(600)")
    start(runner, 1, [PY, "-c", code])
    daemon = daemon_pid(runner, 1)
    runner.stop(1, kill_grace=0.3)
    end = ended(runner, 1)
    assert gone(daemon)
    assert end["state"] == "killed"


def test_usage_grows_while_it_runs(runner: ProcessRunner) -> None:
    start(runner, 1, [PY, "-c", "x = bytearray(20 << 20)\nprint('ready', flush=True)\nwhile True: pass"])
    runner._usage_at = -1e9  # read now, not a heartbeat later
    wait_until(lambda: "ready" in report(runner, 1).get("stdout", []), 20, "ready")

    def cpu() -> float:
        runner._usage_at = -1e9
        return report(runner, 1)["usage"]["cpu_seconds"]
    first = cpu()
    wait_until(lambda: cpu() > first + 0.3, 20, "CPU seconds growing")
    usage = report(runner, 1)["usage"]
    assert usage["memory"] >= 20 << 20 and usage["memory_peak"] >= usage["memory"]
    runner.stop(1, kill_grace=5)
    final = ended(runner, 1)["usage"]
    assert final["cpu_seconds"] >= first + 0.3


def test_user_and_limits_reported(runner: ProcessRunner) -> None:
    start(runner, 1, SLEEPS, limits=StartLimits(memory=256 << 20, cpu_weight=200), slots=2)
    r = wait_until(lambda: (x := report(runner, 1)).get("stdout") == ["ready"] and x, 20, "ready")
    assert (r["user"], r["uid"]) == ("nobody", 65534)
    assert os.stat(f"/proc/{r['pid']}").st_uid == 65534
    if runner.containment.level != "process-group":
        assert r["limits"] == {"memory": 256 << 20, "cpu_weight": 200, "pids": 4096}
    else:
        assert r["limits"] == {"memory": None, "cpu_weight": None, "pids": None}
    runner.stop(1, kill_grace=5)
    ended(runner, 1)


def test_starts_that_fail_end_failed_and_the_next_goes_on(runner: ProcessRunner, tmp_path: Path) -> None:
    start(runner, 1, [PY, "-c", "print('x')\0"])
    start(runner, 2, SLEEPS, env={"A": "b\0c"})
    start(runner, 3, SLEEPS, cwd=str(tmp_path / "nowhere"))
    start(runner, 4, SLEEPS, user="root")
    start(runner, 5, ["/nonexistent/program"])
    start(runner, 6, [PY, "-c", "print('fine')"])
    got = {r["id"]: r for r in runner.reports({})[0]}
    for a in (1, 2, 3, 4, 5):
        assert got[a]["state"] == "failed" and got[a]["reason"], got[a]
    assert "null byte" in got[1]["reason"] and "null byte" in got[2]["reason"]
    assert "nowhere" in got[3]["reason"]
    assert got[4]["reason"] == "user root refused on h1: banned user (--banned-users)"
    assert (ended(runner, 6)["exit_code"], report(runner, 6)["stdout"]) == (0, ["fine"])
    assert all(r["state"] != "running" for r in runner.known())


def test_out_of_memory_is_killed_with_oom(cgroup_runner: ProcessRunner) -> None:
    hog = [PY, "-c", "x = []\nwhile True: x.append(bytearray(1 << 20))"]
    start(cgroup_runner, 1, hog, limits=StartLimits(memory=48 << 20))
    start(cgroup_runner, 2, SLEEPS)  # a neighbour
    end = ended(cgroup_runner, 1)
    assert (end["state"], end["signal"], end.get("oom")) == ("killed", signal.SIGKILL, True), end
    assert end["reason"].startswith("out of memory: limit 48 MiB, peak ")
    assert 40 <= int(end["reason"].split("peak ")[1].split()[0]) <= 48
    assert report(cgroup_runner, 2)["state"] == "running"  # the neighbour and the agent go on
    start(cgroup_runner, 3, [PY, "-c", "print('after')"])
    assert ended(cgroup_runner, 3)["exit_code"] == 0


def test_a_fork_loop_stops_at_the_pids_limit(cgroup_runner: ProcessRunner) -> None:
    if cgroup_runner.entries is None or "pids" not in getattr(cgroup_runner.containment, "roots", {"pids": 1}):
        pytest.skip("no pids controller here")
    code = ("import os, time\nn = 1\nwhile True:\n try:\n  pid = os.fork()\n except OSError as e:\n"
            "  print('stopped at', n, e.errno, flush=True); break\n if pid == 0:\n  time.sleep(600)\n n += 1\n"
            "time.sleep(600)")
    start(cgroup_runner, 1, [PY, "-c", code])
    line = wait_until(lambda: [x for x in report(cgroup_runner, 1).get("stdout", []) if x.startswith("stopped")],
                      20, "the fork loop held")[0]
    n, errno = int(line.split()[2]), int(line.split()[3])
    assert n == 24 and errno == 11  # EAGAIN at the 25th process
    cgroup_runner.stop(1, kill_grace=5)
    ended(cgroup_runner, 1)


def test_a_restarted_agent_adopts_the_cgroup(tmp_path: Path) -> None:
    work = tmp_path / "work"
    cgroup_level(work).close()
    first = ProcessRunner(work)
    start(first, 1, daemon_argv(leader_exits=False))
    daemon = daemon_pid(first, 1)
    first.close()  # the agent stops, its activity runs on
    assert not gone(daemon) and subtree_dirs(work)
    second = ProcessRunner(work)
    try:
        assert second.known() == [{"id": 1, "state": "running", "pid": first.entries[1].pid}]
        assert daemon in second.live[1].box.procs()
        second.stop(1, kill_grace=5)
        ended(second, 1)
        assert gone(daemon)
        first.live[1].proc.wait(timeout=5)
    finally:
        second.close(kill=True)
    assert subtree_dirs(work) == []


def test_processes_that_outlive_sigkill_are_unkillable(cgroup_runner: ProcessRunner) -> None:
    box_dirs = None
    start(cgroup_runner, 1, SLEEPS)
    wait_until(lambda: report(cgroup_runner, 1).get("stdout") == ["ready"], 20, "ready")
    box = cgroup_runner.live[1].box
    box_dirs = getattr(box, "dirs", None)
    if not box_dirs or "freezer" not in box_dirs:
        pytest.skip("needs a cgroup v1 freezer (a process frozen below the activity's cgroup ignores SIGKILL)")
    # A process in a frozen cgroup below the activity's does not die of SIGKILL until it is thawed.
    stuck = box_dirs["freezer"] / "stuck"
    stuck.mkdir()
    pid = cgroup_runner.entries[1].pid
    write(stuck / "cgroup.procs", str(pid))
    write(stuck / "freezer.state", "FROZEN")
    cgroup_runner.stop(1, kill_grace=0)
    r = wait_until(lambda: (x := report(cgroup_runner, 1)).get("unkillable") and x, 20, "reported unkillable")
    assert r["state"] == "running"  # never reported gone while it lives
    write(stuck / "freezer.state", "THAWED")
    end = ended(cgroup_runner, 1)
    assert end["state"] == "killed" and end["unkillable"] is True
    assert gone(pid)
