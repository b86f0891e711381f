"""``apportion run`` stopped by SIGTERM (``timeout``, a service manager) or SIGHUP (its terminal
closed) does what Ctrl-C does: it stops its command, releases its allocation, deletes its
client, and exits 128 + the signal's number. A real master, a real agent, real signals."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time

import psutil
import pytest

from tests.service.live import CLI, one_host, wait_until

PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
  - {path: /Apps, grace: 2}
"""
# prints its pid, then runs until stopped
SLEEPER = "import os, time\nprint('ready', os.getpid(), flush=True)\nwhile True: time.sleep(0.05)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with one_host(tmp_path_factory.mktemp("runsig"), PLAN, "s1", 1) as m:
        yield m


def _command(m) -> list[str]:
    return [*CLI, "run", "--master", m.url, "--consumer", "/Apps", "--", sys.executable, "-c", SLEEPER]


def _env(m) -> dict[str, str]:
    return {**os.environ, "APPORTION_TOKEN": m.token}


def _everything_released(m, pid: int) -> None:
    """The command's process is gone, no allocation and no run- client left."""
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, 20,
               f"the command's process {pid} gone")
    with m.http() as c:
        assert not c.get("/v1/allocations").json()["allocations"]
        assert not [x for x in c.get("/v1/clients").json()["clients"] if x["name"].startswith("run-")]


@pytest.mark.timeout(120)
def test_sigterm_stops_the_command_releases_and_exits_143(cluster):
    p = subprocess.Popen(_command(cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=_env(cluster))
    line = p.stdout.readline()
    assert line.startswith("[s1] ready "), (line, p.stderr.read() if p.poll() is not None else "")
    pid = int(line.split()[-1])
    assert psutil.pid_exists(pid)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, (out, err)
    assert "SIGTERM received: stopping the commands" in err
    _everything_released(cluster, pid)


@pytest.mark.timeout(120)
def test_a_closed_terminal_sighup_stops_the_command_releases_and_exits_129(cluster):
    # `apportion run` in a session of its own whose controlling terminal is a pseudo-terminal;
    # closing the terminal's master side makes the kernel send SIGHUP, and later writes fail (EIO)
    main, sub = pty.openpty()

    def own_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen(_command(cluster), stdin=sub, stdout=sub, stderr=sub, env=_env(cluster),
                         start_new_session=True, preexec_fn=own_terminal)
    os.close(sub)
    seen = b""
    deadline = time.monotonic() + 60
    while b"[s1] ready " not in seen or not seen.rstrip(b"\r").endswith(b"\n"):
        assert time.monotonic() < deadline and p.poll() is None, seen
        if select.select([main], [], [], 1)[0]:
            seen += os.read(main, 4096)
    pid = int(seen.split(b"[s1] ready ")[1].split()[0])
    assert psutil.pid_exists(pid)
    os.close(main)  # the terminal hangs up
    assert p.wait(timeout=60) == 128 + signal.SIGHUP
    _everything_released(cluster, pid)

