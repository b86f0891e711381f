"""A real `apportion server` on loopback (SQLite in a temporary directory), for the agent's end-to-end test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.agent.helpers import until

PLAN = """\
resource_groups:
  - {name: RG1, select: "select(ssd)"}
consumers:
  - {path: /A, owned: 2}
  - {path: /B}
"""


def apportion(*args: str) -> list[str]:
    return [sys.executable, "-m", "apportion.cli", *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveMaster:
    url: str
    token_file: Path
    proc: subprocess.Popen[bytes]

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def live_master(tmp: Path, *server_args: str) -> Iterator[LiveMaster]:
    db = f"sqlite:///{tmp / 'apportion.db'}"
    token_file = tmp / "admin.token"
    (tmp / "plan.yaml").write_text(PLAN)
    subprocess.run(apportion("server", "init", "--db", db, "--token-file", str(token_file)), check=True,
                   stdout=subprocess.DEVNULL)
    port = free_port()
    log = open(tmp / "server.log", "wb")
    proc = subprocess.Popen(apportion("server", "--plan", str(tmp / "plan.yaml"), "--db", db, "--listen",
                                      f"127.0.0.1:{port}", *server_args), stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        until(lambda: proc.poll() is not None or _healthy(url), 30, "the master serves")
        assert proc.poll() is None, (tmp / "server.log").read_text()
        yield LiveMaster(url, token_file, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def spawn_agent(master: LiveMaster, name: str, workdir: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(apportion("agent", "--master", master.url, "--token-file", str(master.token_file),
                                      "--name", name, "--workdir", str(workdir), *extra),
                            env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
