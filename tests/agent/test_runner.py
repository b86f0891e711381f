"""The process runner with real processes and real signals."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.agent import statefile
from apportion.agent.groups import is_alive, process_create_time
from apportion.agent.protocol import Start
from apportion.agent.runner import ProcessRunner
from tests.service.live import wait_until

PY = sys.executable
# A child that says it is ready only once its SIGTERM handler is in place.
IGNORES_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
EXITS_7_ON_TERM = ("import signal, sys, time\n"
                   "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\nprint('ready', flush=True)\ntime.sleep(60)")
SLEEPS = "import time; print('ready', flush=True); time.sleep(60)"


@pytest.fixture
def runner(tmp_path: Path):
    r = ProcessRunner(tmp_path / "work")
    yield r
    r.close(kill=True)


def report(r: ProcessRunner, activity: int) -> dict:
    r.poll()
    return next(x for x in r.reports({})[0] if x["id"] == activity)


def ended(r: ProcessRunner, activity: int, timeout: float = 10.0) -> dict:
    return wait_until(lambda: (x := report(r, activity))["state"] != "running" and x, timeout, f"activity {activity} ends")


def ready(r: ProcessRunner, activity: int) -> None:
    wait_until(lambda: "ready" in report(r, activity).get("stdout", []), what=f"activity {activity} is ready")


def start(r: ProcessRunner, activity: int, code: str, **kw) -> None:
    r.start(Start(activity=activity, argv=[PY, "-c", code], allocation=kw.pop("allocation", 9), **kw), "h1")


def test_exit_code_env_and_cwd(runner: ProcessRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPORTION_TOKEN", "secret-of-the-agent")
    code = ("import os, sys\nfor k in ('APPORTION_ALLOCATION', 'APPORTION_HOST', 'APPORTION_SLOTS', "
            "'APPORTION_ACTIVITY', 'MINE', 'APPORTION_TOKEN'):\n print(k, os.environ.get(k))\n"
            "print('cwd', os.getcwd())\nsys.exit(3)")
    start(runner, 1, code, env={"MINE": "x"}, slots=2)
    end = ended(runner, 1)
    assert (end["state"], end["exit_code"], end["signal"]) == ("exited", 3, None)
    assert end["stdout"] == ["APPORTION_ALLOCATION 9", "APPORTION_HOST h1", "APPORTION_SLOTS 2",
                             "APPORTION_ACTIVITY 1", "MINE x", "APPORTION_TOKEN None",
                             f"cwd {runner.activity_dir(1)}"]


def test_given_cwd(runner: ProcessRunner, tmp_path: Path) -> None:
    start(runner, 1, "import os; print(os.getcwd())", cwd=str(tmp_path))
    assert ended(runner, 1)["stdout"] == [str(tmp_path)]


def test_stop_sigterm(runner: ProcessRunner) -> None:
    start(runner, 1, SLEEPS)
    ready(runner, 1)
    assert report(runner, 1)["pid"] > 0
    runner.stop(1, kill_grace=30)
    end = ended(runner, 1)
    assert (end["state"], end["exit_code"], end["signal"]) == ("killed", None, signal.SIGTERM)


def test_sigkill_after_grace_when_sigterm_is_ignored(runner: ProcessRunner) -> None:
    start(runner, 1, IGNORES_TERM)
    ready(runner, 1)
    began = time.monotonic()
    runner.stop(1, kill_grace=0.3)
    runner.stop(1, kill_grace=0.3)  # the master repeats stop: the grace does not start again
    end = ended(runner, 1)
    assert time.monotonic() - began >= 0.3
    assert (end["state"], end["signal"]) == ("killed", signal.SIGKILL)


def test_exit_code_after_handling_sigterm(runner: ProcessRunner) -> None:
    start(runner, 1, EXITS_7_ON_TERM)
    ready(runner, 1)
    runner.stop(1, kill_grace=30)
    end = ended(runner, 1)
    assert (end["state"], end["exit_code"], end["signal"]) == ("exited", 7, None)


def _child_pid(r: ProcessRunner, activity: int) -> int:
    lines = wait_until(lambda: [x for x in report(r, activity).get("stdout", []) if x.startswith("child")],
                  what="the child's pid")
    return int(lines[0].split()[1])


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_stop_takes_the_whole_group(runner: ProcessRunner) -> None:
    code = ("import subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print('child', c.pid, flush=True)\ntime.sleep(60)")
    start(runner, 1, code)
    child = _child_pid(runner, 1)
    runner.stop(1, kill_grace=30)
    assert ended(runner, 1)["signal"] == signal.SIGTERM
    assert _gone(child)


def test_stop_waits_for_a_child_that_ignores_sigterm(runner: ProcessRunner) -> None:
    # The leader exits on SIGTERM, its child ignores it: the stop ends with the child's SIGKILL.
    code = (f"import subprocess, sys, time\nc = subprocess.Popen([sys.executable, '-c', {IGNORES_TERM!r}])\n"
            "time.sleep(0.2)\nprint('child', c.pid, flush=True)\ntime.sleep(60)")
    start(runner, 1, code)
    child = _child_pid(runner, 1)
    began = time.monotonic()
    runner.stop(1, kill_grace=0.4)
    end = ended(runner, 1)
    assert time.monotonic() - began >= 0.4
    assert (end["state"], end["signal"]) == ("killed", signal.SIGTERM)  # the leader's own end
    assert _gone(child)


def test_output_tails_and_marks(runner: ProcessRunner) -> None:
    code = "import sys\nfor i in range(150):\n print('out', i)\n print('err', i, file=sys.stderr)"
    start(runner, 1, code)
    end = ended(runner, 1)
    assert end["stdout"] == [f"out {i}" for i in range(50, 150)]
    assert end["stderr"] == [f"err {i}" for i in range(50, 150)]
    reports, marks = runner.reports({})
    again, new = runner.reports(marks)
    assert "stdout" not in again[0] and "stderr" not in again[0] and new == {}


def test_a_start_that_cannot_run(runner: ProcessRunner) -> None:
    runner.start(Start(activity=5, argv=["/nonexistent/program"]), "h1")
    end = ended(runner, 5)
    assert (end["state"], end["exit_code"]) == ("failed", None)
    assert "/nonexistent/program" in end["reason"] and "h1" in end["reason"]
    assert "/nonexistent/program" in end["stderr"][0]


def test_start_is_idempotent_and_forget_clears(runner: ProcessRunner) -> None:
    start(runner, 1, SLEEPS)
    pid = report(runner, 1)["pid"]
    start(runner, 1, SLEEPS)
    assert runner.known() == [{"id": 1, "state": "running", "pid": pid}]
    runner.forget(1)  # only an end is forgotten
    assert runner.known() == [{"id": 1, "state": "running", "pid": pid}]
    runner.stop(1, kill_grace=30)
    ended(runner, 1)
    runner.forget(1)
    assert runner.reports({})[0] == []
    assert statefile.load(runner.workdir) == {}
    # its directory stays for the retention (test_activity_dirs.py), then goes
    assert runner.activity_dir(1).exists() and set(statefile.load_removals(runner.workdir)) == {1}


def test_stop_of_an_unknown_activity_reports_it_ended(runner: ProcessRunner) -> None:
    runner.stop(4, kill_grace=1)
    assert runner.reports({})[0] == [{"id": 4, "state": "exited", "exit_code": None, "signal": None}]


def test_restart_adopts_live_processes_and_reports_gone_ones(tmp_path: Path) -> None:
    first = ProcessRunner(tmp_path / "work")
    start(first, 1, SLEEPS)
    start(first, 2, SLEEPS)
    start(first, 3, "pass")
    ended(first, 3)
    ready(first, 1)
    pid1, pid2 = first.entries[1].pid, first.entries[2].pid
    # Activity 2 dies while no agent watches it.
    os.killpg(pid2, signal.SIGKILL)
    first.live[2].proc.wait()
    # The agent restarts: a new runner on the same work directory.
    second = ProcessRunner(tmp_path / "work")
    try:
        # What register lists: the ends too, so that the master hears their exit codes.
        assert second.known() == [{"id": 1, "state": "running", "pid": pid1}, {"id": 2, "state": "exited"},
                                  {"id": 3, "state": "exited"}]
        got = {r["id"]: r for r in second.reports({})[0]}
        assert {k: got[2][k] for k in ("id", "state", "exit_code", "signal", "user")} == {
            "id": 2, "state": "exited", "exit_code": None, "signal": None, "user": got[1]["user"]}
        assert (got[3]["state"], got[3]["exit_code"]) == ("exited", 0)
        assert got[1]["state"] == "running"
        # The master does not know activity 1: it says stop, and the adopted process goes.
        second.stop(1, kill_grace=5)
        end = ended(second, 1)
        assert (end["state"], end["exit_code"], end["signal"]) == ("killed", None, signal.SIGTERM)
        first.live[1].proc.wait(timeout=5)
    finally:
        first.close(kill=True)
        second.close(kill=True)


@pytest.mark.parametrize("level", ["auto", "process-group"])
def test_a_process_the_state_file_never_listed_is_adopted_not_forgotten(tmp_path: Path, level: str) -> None:
    """An agent SIGKILLed after it started a process and before it wrote that down: the next
    agent finds the process (by its cgroup, or by its tag without cgroups) and lists it running,
    so that the master keeps its slots fenced and can stop it."""
    work = tmp_path / "work"
    first = ProcessRunner(work, containment=level)
    second = None
    try:
        start(first, 5, IGNORES_TERM, allocation=41, slots=2)
        ready(first, 5)
        pid = first.entries[5].pid
        statefile.save(work, {})  # the file as it was before the start
        second = ProcessRunner(work, containment=level)
        assert second.known() == [{"id": 5, "state": "running", "pid": pid}]
        e = second.entries[5]
        assert (e.allocation, e.uid, e.box) == (41, first.entries[5].uid, first.entries[5].box)
        assert statefile.load(work)[5].pid == pid  # written down at once: a third agent knows it too
        second.stop(5, kill_grace=0.2)  # the master does not know it: it says stop
        end = ended(second, 5)
        assert (end["state"], end["signal"]) == ("killed", signal.SIGKILL)
        first.live[5].proc.wait(timeout=5)
    finally:
        first.close(kill=True)
        if second is not None:
            second.close(kill=True)


def test_a_reused_pid_is_not_adopted(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    me = os.getpid()
    assert is_alive(me, process_create_time(me) or 0.0)
    statefile.save(work, {1: statefile.Entry(allocation=1, pid=me, create_time=1.0, state="running")})
    r = ProcessRunner(work)
    assert r.known() == [{"id": 1, "state": "exited"}]
    assert r.reports({})[0][0]["state"] == "exited"
    r.close()


def test_output_waits_for_the_next_heartbeat_beyond_the_budget(runner: ProcessRunner,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("apportion.agent.runner.OUTPUT_BUDGET", 10)
    for activity in (1, 2):
        start(runner, activity, "print('x' * 50)")
        ended(runner, activity)
    first, marks = runner.reports({})
    assert "stdout" in first[0] and "stdout" not in first[1]
    second, _ = runner.reports(marks)
    assert "stdout" not in second[0] and second[1]["stdout"] == ["x" * 50]


_entries = st.builds(
    statefile.Entry, allocation=st.none() | st.integers(1, 10**9), pid=st.integers(0, 2**22),
    create_time=st.floats(0, 2e9, allow_nan=False), state=st.sampled_from(["running", "exited", "killed", "failed"]),
    exit_code=st.none() | st.integers(-255, 255), signal=st.none() | st.integers(1, 64),
    reason=st.none() | st.text(max_size=50), box=st.none() | st.sampled_from(["cgroup-v1/a1", "process-group/x:1"]),
    user=st.none() | st.sampled_from(["nobody", "alice"]), uid=st.none() | st.integers(0, 2**32 - 1),
    limits=st.none() | st.fixed_dictionaries({"memory": st.none() | st.integers(0, 2**40),
                                             "cpu_weight": st.none() | st.integers(1, 10000),
                                             "pids": st.none() | st.integers(1, 4096)}),
    usage=st.none() | st.fixed_dictionaries({"cpu_seconds": st.floats(0, 1e6, allow_nan=False),
                                            "memory": st.integers(0, 2**40), "memory_peak": st.integers(0, 2**40)}),
    oom=st.booleans(), unkillable=st.booleans())


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.dictionaries(st.integers(1, 10**6), _entries, max_size=5))
def test_the_state_file_keeps_every_field_and_ignores_a_newer_agents(tmp_path: Path, entries: dict) -> None:
    statefile.save(tmp_path, entries)
    assert statefile.load(tmp_path) == entries
    raw = json.loads((tmp_path / statefile.STATE_FILE).read_text())
    for v in raw["activities"].values():
        v["from_a_newer_agent"] = 1
    (tmp_path / statefile.STATE_FILE).write_text(json.dumps(raw))
    assert statefile.load(tmp_path) == entries


def test_the_state_file_is_readable_by_the_agent_only(tmp_path):
    """It names every activity's user, limits and pid; the work directory is 0711 so that
    execution users reach their own directories, so the file itself must be 0600."""
    import stat as _stat

    from apportion.agent import statefile

    (tmp_path / statefile.STATE_FILE).write_text('{"activities": {}}')
    (tmp_path / statefile.STATE_FILE).chmod(0o644)  # left by an older agent
    statefile.save(tmp_path, {})
    assert _stat.S_IMODE((tmp_path / statefile.STATE_FILE).stat().st_mode) == 0o600


def test_a_state_file_that_cannot_be_read_never_keeps_the_agent_from_starting(tmp_path):
    from apportion.agent import statefile

    (tmp_path / statefile.STATE_FILE).write_text('{"activities": {"1": {"pid"')  # cut short by a host crash
    assert statefile.load(tmp_path) == {}
    assert (tmp_path / "state.bad").exists() and not (tmp_path / statefile.STATE_FILE).exists()
    (tmp_path / statefile.STATE_FILE).write_text('{"activities": {"x": 3}}')
    assert statefile.load(tmp_path) == {}
