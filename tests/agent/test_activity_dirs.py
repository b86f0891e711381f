"""Activity directories: removed, with what their processes left, once the retention after the
master forgot them ran out (kept across an agent restart); and an optional disk limit per slot that
kills an activity whose directory grows past it, saying why, as the kubelet evicts a pod."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from apportion.agent import statefile
from apportion.agent.disk import usage
from apportion.agent.protocol import Start
from apportion.agent.runner import ProcessRunner
from tests.service.live import wait_until

PY = sys.executable
MIB = 2**20
LEAVES = ("import os\nos.makedirs('deep/er', exist_ok=True)\nopen('deep/er/file', 'w').write('x' * 100000)\n"
          "os.symlink(os.environ['TARGET'], 'link-to-outside')\nprint('left', flush=True)")


def _report(r: ProcessRunner, activity: int) -> dict:
    r.poll()
    return next(x for x in r.reports({})[0] if x["id"] == activity)


def _ended(r: ProcessRunner, activity: int, timeout: float = 20) -> dict:
    return wait_until(lambda: (x := _report(r, activity))["state"] != "running" and x, timeout,
                      f"activity {activity} ends")


def _gone(r: ProcessRunner, activity: int, timeout: float = 20) -> None:
    def check() -> bool:
        r.poll()
        return not r.activity_dir(activity).exists() and not any(
            n.startswith(".gone-") for n in os.listdir(r.workdir / "activities"))
    wait_until(check, timeout, f"activity {activity}'s directory removed")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory of the agent's outside the work directory, that a link in an activity's directory
    points to: removing the activity's directory must leave it alone."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "keep").write_text("keep")
    return d


def test_a_directory_stays_for_the_retention_then_goes_with_what_was_left(tmp_path: Path, outside: Path) -> None:
    r = ProcessRunner(tmp_path / "work", containment="process-group", retention=1.5)
    try:
        r.start(Start(activity=1, argv=[PY, "-c", LEAVES], allocation=1, env={"TARGET": str(outside)}), "h1")
        end = _ended(r, 1)
        assert end["exit_code"] == 0 and end["stdout"] == ["left"], end  # the tail the master stores
        adir = r.activity_dir(1)
        r.forget(1)
        assert (adir / "deep" / "er" / "file").exists()  # within the retention: still there
        assert statefile.load_removals(r.workdir).keys() == {1}
        _gone(r, 1)
        assert (outside / "keep").read_text() == "keep"  # a link in it is removed, not followed
        assert statefile.load_removals(r.workdir) == {}
    finally:
        r.close(kill=True)


def test_the_retention_outlives_an_agent_restart_and_orphans_go_too(tmp_path: Path) -> None:
    work = tmp_path / "work"
    first = ProcessRunner(work, containment="process-group", retention=600)
    first.start(Start(activity=1, argv=[PY, "-c", "open('left', 'w').write('x')"], allocation=1), "h1")
    _ended(first, 1)
    first.forget(1)
    due = first.removals[1]
    first.close()
    # a directory nothing knows of: an older agent's, or one whose state file was lost
    orphan = work / "activities" / "77"
    orphan.mkdir()
    (orphan / "old").write_text("old")
    second = ProcessRunner(work, containment="process-group", retention=0)
    try:
        _gone(second, 77)
        # activity 1 keeps the deadline it was given: the restart neither forgot nor hastened it
        assert second.removals == {1: due} and (second.activity_dir(1) / "left").exists()
    finally:
        second.close(kill=True)


def test_forgetting_with_no_retention_removes_at_once(tmp_path: Path) -> None:
    r = ProcessRunner(tmp_path / "work", containment="process-group", retention=0)
    try:
        r.start(Start(activity=1, argv=[PY, "-c", "open('left', 'w').write('x')"], allocation=1), "h1")
        _ended(r, 1)
        r.forget(1)
        _gone(r, 1, timeout=10)
    finally:
        r.close(kill=True)


# -- the disk limit ----------------------------------------------------------------------------------
FILLS = ("import os, sys, time\nwith open('big', 'wb') as f:\n    f.write(os.urandom(int(sys.argv[1])))\n"
         "    f.flush()\n    os.fsync(f.fileno())\nprint('written', flush=True)\ntime.sleep(60)")


def test_usage_counts_blocks_once_and_follows_no_link(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "a").write_bytes(os.urandom(MIB))
    os.link(d / "a", d / "hardlink")
    big_outside = tmp_path / "outside"
    big_outside.write_bytes(os.urandom(4 * MIB))
    (d / "link").symlink_to(big_outside)
    (d / "sparse").open("wb").truncate(10 * 2**30)  # 10 GiB long, no block
    used = usage(d)
    assert MIB <= used < 2 * MIB, used
    assert usage(d, stop_at=1000) > 1000  # stops early, past the bound


def test_an_activity_over_its_disk_limit_is_killed_with_the_reason(tmp_path: Path) -> None:
    r = ProcessRunner(tmp_path / "work", containment="process-group", disk_per_slot=MIB, disk_every=0.1)
    try:
        # 2 slots: 2 MiB. One writes 512 KiB and runs on; the other writes 6 MiB and is killed.
        r.start(Start(activity=1, argv=[PY, "-c", FILLS, str(512 * 1024)], allocation=1, slots=2), "h1")
        r.start(Start(activity=2, argv=[PY, "-c", FILLS, str(6 * MIB)], allocation=1, slots=2), "h1")
        end = _ended(r, 2)
        assert (end["state"], end["exit_code"], end["signal"]) == ("killed", None, signal.SIGKILL), end
        assert end["reason"].startswith(f"disk: its directory {r.activity_dir(2)} uses "), end
        assert end["reason"].endswith("over its limit 2 MiB (--disk-per-slot)"), end
        assert r.entries[2].disk == 2 * MIB and "disk" not in end["limits"]  # the master's schema has no such limit
        one = _report(r, 1)
        assert one["state"] == "running" and "reason" not in one, one
    finally:
        r.close(kill=True)


def test_no_limit_by_default(tmp_path: Path) -> None:
    r = ProcessRunner(tmp_path / "work", containment="process-group")
    try:
        r.start(Start(activity=1, argv=[PY, "-c", "print('hi')"], allocation=1), "h1")
        _ended(r, 1)
        assert r.entries[1].disk is None
        assert r.disk._thread is None  # nothing is walked
    finally:
        r.close(kill=True)
