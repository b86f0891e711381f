"""The suite's own guard (tests/conftest.py): a process a test leaves running, even one that
daemonized itself out of its parent's reach (setsid and a double fork), fails the run, is named,
and is killed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.service.live import wait_until

pytest_plugins = ["pytester"]
CONFTEST = Path(__file__).with_name("conftest.py")

LEAKY = f'''
import subprocess, sys
from pathlib import Path

def test_leaves_a_daemon(tmp_path):
    pidfile = Path({{pidfile!r}})
    code = ("import os, sys, time\\n"
            "if os.fork(): sys.exit(0)\\n"
            "os.setsid()\\n"
            "if os.fork(): sys.exit(0)\\n"
            "open(sys.argv[1], 'w').write(str(os.getpid()))\\n"
            "time.sleep(120)\\n")
    subprocess.run([{sys.executable!r}, "-c", code, str(pidfile)], check=True)
'''

CLEAN = '''
import subprocess

def test_waits_for_its_child():
    subprocess.run(["true"], check=True)
'''


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["alone", "xdist"])
def test_a_daemon_left_running_fails_the_run_and_is_killed(pytester: pytest.Pytester, tmp_path: Path,
                                                           xdist: list[str]) -> None:
    pidfile = tmp_path / "daemon.pid"
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_leaky=LEAKY.format(pidfile=str(pidfile)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *xdist)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "1 passed" in out  # the test itself passed: the guard failed the run
    assert "processes left running by the suite" in out
    pid = int(pidfile.read_text())
    assert f"pid {pid} " in out
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
               10, f"the leaked daemon {pid} is killed")


def test_a_clean_run_passes(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_clean=CLEAN)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "processes left running" not in result.stdout.str()


def test_a_daemon_forked_as_the_tree_is_read_is_still_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The race that once let a daemon slip past the guard under load: the tree is read
    while the daemon's parent forks it and exits, so the first read holds the parent
    (a zombie by the time it is looked at) and not yet the daemon."""
    import os

    import tests.conftest as guard

    class Seen:
        def __init__(self, pid: int, status: str, ppid: int) -> None:
            self.pid, self._status, self._ppid = pid, status, ppid

        def status(self) -> str:
            return self._status

        def ppid(self) -> int:
            return self._ppid

    parent = Seen(4_000_001, psutil.STATUS_ZOMBIE, 1)  # not this process's child: not reaped here
    daemon = Seen(4_000_002, psutil.STATUS_SLEEPING, os.getpid())
    reads = iter([[parent], [parent, daemon], [parent, daemon]])

    class Me:
        def children(self, recursive: bool) -> list[Seen]:
            return next(reads)

    monkeypatch.setattr(guard.psutil, "Process", lambda *a: Me())
    assert guard.session_leftovers() == [daemon]


HANGING = f'''
import subprocess, time
from pathlib import Path

def test_starts_a_daemon_then_hangs():
    code = ("import os, sys, time\\n"
            "if os.fork(): sys.exit(0)\\n"
            "os.setsid()\\n"
            "if os.fork(): sys.exit(0)\\n"
            "open(sys.argv[1], 'w').write(str(os.getpid()))\\n"
            "time.sleep(300)\\n")
    subprocess.run([{sys.executable!r}, "-c", code, {{pidfile!r}}], check=True)
    time.sleep(300)
'''


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["alone", "xdist"])
def test_a_run_stopped_by_a_signal_leaves_nothing_running(pytester: pytest.Pytester, tmp_path: Path,
                                                          xdist: list[str], signum: int) -> None:
    """A run stopped from outside (`timeout`, a closed terminal, Ctrl-C sent to the runner alone)
    takes its daemons with it instead of leaving them to init."""
    pidfile = tmp_path / "daemon.pid"
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_hanging=HANGING.format(pidfile=str(pidfile)))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *xdist],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), 60, "the test's daemon starts")
        pid = int(pidfile.read_text())
        assert psutil.pid_exists(pid)
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, out.decode(errors="replace")
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
               15, f"the daemon {pid} goes with the run")
