import ctypes
import os
import signal
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, settings

# Bounded profiles keep the whole suite within minutes on a 2-core machine.
settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


# ---------------------------------------------------------------------------------------------
# The suite leaves no process running, and execution users can run the test interpreter.
#
# Every pytest process (the controller, each xdist worker) makes itself a child subreaper, so a
# process the suite started that daemonizes (setsid, double fork) or outlives its agent stays a
# descendant of the session instead of going to init. When the session ends, any descendant
# still alive is a leak: it is listed, killed, and the run fails.
# ---------------------------------------------------------------------------------------------

_PR_SET_CHILD_SUBREAPER = 36
_LEAK_GRACE = 10.0  # seconds a process being stopped when the session ends has to go
_made_traversable: list[str] = []
_leaks: list[str] = []


def _become_subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _let_execution_users_run_the_interpreter() -> None:
    """As root, activities run as an execution user (`nobody` by default), and the tests start them
    with this interpreter. When it lies under a directory only root may enter (a pyenv in /root),
    give others the right to pass through that directory (o+x: no listing), as an operator installs
    apportion where its execution users can run it."""
    if os.geteuid() != 0:
        return
    for exe in {Path(sys.executable), Path(sys.executable).resolve()}:
        for d in reversed(exe.parents):
            st = d.stat()
            if st.st_uid == 0 and not st.st_mode & stat.S_IXOTH:
                os.chmod(d, stat.S_IMODE(st.st_mode) | stat.S_IXOTH)
                _made_traversable.append(str(d))


class _FailOnLeaks:
    """Fails the run when processes were left, after every other sessionfinish (xdist's controller
    hears of a worker's leaks as the worker goes, which may be while xdist's own sessionfinish runs)."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        yield
        if _leaks:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _kill_the_tree(grace: float = 3.0) -> list[str]:
    """Every process this one started, however deep, is stopped: SIGTERM, then SIGKILL.
    Returns what was found running. Each pytest process is a subreaper, so the orphans of
    its tests are its descendants until it goes."""
    found: list[str] = []
    end = time.monotonic() + 10.0
    while time.monotonic() < end:
        left = [p for p in session_leftovers() if p.pid != os.getpid()]
        if not left:
            break
        found.extend(_describe(p) for p in left)
        for p in left:
            try:
                p.terminate()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(left, timeout=grace)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=grace)
    return found


def _stop_on(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP (a `timeout`, a closed terminal, a CI runner giving up): the
    whole tree of masters, agents and workers goes with the run, not to init."""
    signal.signal(signum, signal.SIG_DFL)
    found = _kill_the_tree()
    sys.stderr.write(f"\ntests: stopped by signal {signum}: {len(found)} processes of the run stopped\n")
    sys.stderr.flush()
    os._exit(128 + signum)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_FailOnLeaks(), "apportion-fail-on-leaks")
    _become_subreaper()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_on)
    if not hasattr(config, "workerinput"):  # the controller, before any worker starts
        _let_execution_users_run_the_interpreter()


def pytest_unconfigure(config: pytest.Config) -> None:
    """The last word of every pytest process, even after Ctrl-C: nothing it started runs on."""
    _kill_the_tree()


# ---------------------------------------------------------------------------------------------
# How xdist shares the tests out (`make test`: -n 3 --dist loadgroup).
#
# A module whose tests share a module- or session-scoped fixture of the suite's own (a master and
# its agents, a browser, a fresh venv) runs on one worker: spread over two, each would start its
# own copy. The tests marked slow start first, so that none of them is what the run waits on at
# its end.
# ---------------------------------------------------------------------------------------------


def _shares_a_costly_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        fd = defs[-1] if defs else None
        if (fd is not None and fd.scope in ("module", "package", "session") and fd.baseid
                and not getattr(fd, "_autouse", False)):  # the suite's own, not pytest's (tmp_path_factory)
            return True
    return False


@pytest.hookimpl(tryfirst=True)  # before xdist's worker names each item's group in its id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _shares_a_costly_fixture(item) and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the rest keep their order


def pytest_report_header(config: pytest.Config) -> list[str]:
    if _made_traversable:
        return [f"made {', '.join(_made_traversable)} traversable by others (o+x) so that execution users "
                "can run the test interpreter"]
    return []


def _describe(p: psutil.Process) -> str:
    try:
        return f"pid {p.pid} ({p.username()}): {' '.join(p.cmdline())[:200]}"
    except psutil.Error:
        return f"pid {p.pid}"


def session_leftovers() -> list[psutil.Process]:
    """Processes started by this session (its descendants) that still run; zombies are reaped.

    A process that exited since the tree was read may have forked first: its child came
    to this process (a subreaper) after the read, so it is missing from that tree. Each
    zombie found means the tree is read again (a daemonizing fork then exit, caught
    between the two, once slipped past the guard under load)."""
    seen: set[int] = set()  # processes found exited: the tree is read again for each new one
    while True:
        out = []
        exited = False
        for p in psutil.Process().children(recursive=True):
            try:
                if p.status() == psutil.STATUS_ZOMBIE:
                    exited = exited or p.pid not in seen
                    seen.add(p.pid)
                    if p.ppid() == os.getpid():
                        os.waitpid(p.pid, os.WNOHANG)
                    continue
            except psutil.NoSuchProcess:
                exited = exited or p.pid not in seen  # gone since the tree was read
                seen.add(p.pid)
                continue
            except (psutil.Error, ChildProcessError):
                continue
            out.append(p)
        if not exited:
            return out


def _check_nothing_left_running() -> list[str]:
    end = time.monotonic() + _LEAK_GRACE
    left = session_leftovers()
    while left and time.monotonic() < end:  # something being stopped right now gets a moment to go
        psutil.wait_procs(left, timeout=0.5)
        left = session_leftovers()
    found = [_describe(p) for p in left]
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=5)
    session_leftovers()  # reap what was killed
    return found


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.pluginmanager.has_plugin("dsession"):
        return  # the xdist controller runs no test: its workers check theirs (pytest_testnodedown)
    found = _check_nothing_left_running()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports it
        workeroutput["apportion_leaks"] = found
        return
    _leaks.extend(found)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # noqa: ANN001 - xdist's hook
    _leaks.extend(getattr(node, "workeroutput", {}).get("apportion_leaks", []))


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001
    if _leaks:
        terminalreporter.section("processes left running by the suite (killed now)", red=True, bold=True)
        for line in _leaks:
            terminalreporter.line(line, red=True)
        terminalreporter.line("FAILED: the suite must leave no process running", red=True, bold=True)
