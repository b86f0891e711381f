"""Real masters and agents for end-to-end tests: each is its own process on loopback.

``start_master`` runs ``apportion server init`` and ``apportion server`` exactly as a
user would; ``start_agent`` runs ``apportion agent``. ``wait_until`` waits for a state
with a bound instead of sleeping. ``postgres_url`` gives a fresh PostgreSQL database
on the machine's server (127.0.0.1:5432), or skips with the reason when none answers.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from apportion.bench.service_bench import wait_for_state

SLEEPER = [sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"]  # a process that runs until stopped
TAG = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"  # in the environment of every agent (and its processes) started here
PG_ADMIN = "host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3"
CLI = [sys.executable, "-m", "apportion.cli"]
AGENT_WORKDIRS: list[Path] = []  # of the agents start_agent started: reap() kills what runs in their cgroups


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check: Callable[[], Any], timeout: float = 20.0, what: str = "the expected state",
               every: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    return wait_for_state(check, timeout, what, every, error=AssertionError)


@dataclass
class Proc:
    args: list[str]
    log: Path
    popen: subprocess.Popen | None = None

    def start(self, env: dict[str, str] | None = None) -> None:
        f = open(self.log, "ab")  # noqa: SIM115 - the child keeps it
        self.popen = subprocess.Popen(self.args, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                      start_new_session=True)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, sig) if sig == signal.SIGKILL else self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=5)

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Master:
    db: str
    workdir: Path
    port: int
    token: str
    plan: Path
    proc: Proc
    extra: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def http(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token or self.token}"},
                            timeout=30)

    def ready(self) -> bool:
        try:
            return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def restart(self, wait: bool = True) -> None:
        self.proc.kill(signal.SIGKILL)
        self.proc.start()
        if wait:
            wait_until(self.ready, 30, f"master on {self.url} ready again:\n{self.proc.output()[-3000:]}")


def start_master(workdir: Path, plan_text: str, db: str | None = None, extra: list[str] | None = None,
                 wait: bool = True, port: int | None = None, token: str | None = None) -> Master:
    workdir.mkdir(parents=True, exist_ok=True)
    db = db or f"sqlite:///{workdir / 'apportion.db'}"
    plan = workdir / "plan.yaml"
    plan.write_text(plan_text)
    if token is None:
        token_file = workdir / "admin.token"
        subprocess.run([*CLI, "server", "init", "--db", db, "--token-file", str(token_file)], check=True,
                       capture_output=True, timeout=60)
        token = token_file.read_text().strip()
    port = port or free_port()
    args = [*CLI, "server", "--plan", str(plan), "--db", db, "--listen", f"127.0.0.1:{port}",
            "--heartbeat", "0.3", "--kill-grace", "1", "--host-lost-after", "2", *(extra or [])]
    proc = Proc(args, workdir / f"master-{port}.log")
    proc.start()
    m = Master(db, workdir, port, token, plan, proc, extra or [])
    if wait:
        wait_until(lambda: m.ready() or not proc.alive, 30, "the master to be ready")
        assert proc.alive, proc.output()[-3000:]
    return m


_AGENTS_BASE: list[Path] = []


def reachable_workdir(workdir: Path) -> Path:
    """An agent's work directory that its activities' execution users can reach by its path.

    As root, agents run activities as `nobody`, which must reach its activity's directory inside the
    agent's work directory (as under /var/lib/apportion-agent, 0711): a Dask worker uses its cwd's
    path, a process opens files beside it. pytest's tmp_path lies under a directory only root may
    enter, so the directory is made in a base others may pass through (0711, no listing) and
    `workdir` is a link to it: the test reads the agent's files through the link as before."""
    if os.geteuid() != 0 or workdir.is_symlink() or workdir.exists():
        workdir.mkdir(parents=True, exist_ok=True)  # an agent started again keeps its directory
        return workdir
    if not _AGENTS_BASE:
        base = Path(tempfile.mkdtemp(prefix="apportion-test-agents-"))
        os.chmod(base, 0o711)
        atexit.register(shutil.rmtree, base, True)
        _AGENTS_BASE.append(base)
    real = Path(tempfile.mkdtemp(prefix=f"{workdir.name}-", dir=_AGENTS_BASE[0]))
    os.chmod(real, 0o711)
    workdir.parent.mkdir(parents=True, exist_ok=True)
    workdir.symlink_to(real, target_is_directory=True)
    return workdir


def start_agent(master: Master | str, name: str, workdir: Path, slots: int = 4, token: str | None = None,
                extra: list[str] | None = None) -> Proc:
    url = master if isinstance(master, str) else master.url
    token = token or (master.token if isinstance(master, Master) else None)
    workdir = reachable_workdir(workdir)
    args = [*CLI, "agent", "--master", url, "--name", name, "--slots", str(slots), "--workdir", str(workdir),
            "--heartbeat", "0.3", *(extra or [])]
    proc = Proc(args, workdir / "agent.log")
    proc.start(env={"APPORTION_TOKEN": token or "", "APPORTION_E2E": TAG})
    AGENT_WORKDIRS.append(workdir)
    return proc


@contextlib.contextmanager
def one_host(workdir: Path, plan_text: str, host: str, slots: int, extra: list[str] | None = None
             ) -> Iterator[Master]:
    """A master on ``plan_text`` and one agent ``host`` (``extra``: its flags), up; both killed,
    and what they left reaped, at the end."""
    m = start_master(workdir / "m", plan_text)
    agent = start_agent(m, host, workdir / host, slots=slots, extra=extra)
    try:
        with m.http() as c:
            wait_until(lambda: [h["state"] for h in c.get("/v1/hosts").json()["hosts"]] == ["ok"], 30,
                       f"{host} up")
        yield m
    finally:
        agent.kill()
        m.proc.kill()
        reap()


def hosts_up(c: httpx.Client, n: int, timeout: float = 30) -> None:
    """Wait until ``n`` hosts are up (their agents registered and heartbeating)."""
    wait_until(lambda: sum(h["state"] == "ok" for h in c.get("/v1/hosts").json()["hosts"]) == n, timeout,
               f"{n} hosts up")


def reap() -> int:
    """Kill every process that agents started by this test process left behind (they run in their
    own process groups, so killing an agent leaves them, as it should). They are found among this
    process's descendants (tests/conftest.py makes it a child subreaper, so even a daemon that left
    its agent stays one) by the APPORTION_ACTIVITY every activity has in its environment, or by the
    tag of the agents started here; the agents themselves stay."""
    import psutil

    from apportion.agent.containment.select import discard

    # Activities run with a clean environment (no APPORTION_E2E): they are found in their agent's
    # cgroups (or by its activity tag), and those cgroups go too.
    n = sum(discard(w) for w in AGENT_WORKDIRS)
    AGENT_WORKDIRS.clear()
    for p in psutil.Process().children(recursive=True):
        try:
            env = p.environ()
            if ("APPORTION_ACTIVITY" in env or env.get("APPORTION_E2E") == TAG) \
                    and "apportion.cli" not in " ".join(p.cmdline()):
                p.kill()
                n += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return n


def events(c: httpx.Client, client: int, after: int = 0) -> list[dict[str, Any]]:
    """A client's stored events after ``after``, at once (the long poll with no wait)."""
    return c.get(f"/v1/clients/{client}/events", params={"after": after, "wait": 0}).json()["events"]


def granted(c: httpx.Client, name: str, consumer: str, max: int, **body: Any) -> tuple[int, int]:
    """Register client ``name`` under ``consumer``, ask for ``max`` slots and wait until all are
    granted: (client id, allocation id)."""
    client = c.post("/v1/clients", json={"name": name, "consumer": consumer}).json()["id"]
    aid = c.post("/v1/allocations", json={"client": client, "consumer": consumer, "max": max, **body}).json()["id"]
    wait_until(lambda: c.get(f"/v1/allocations/{aid}").json()["held"] == max, 20, f"{consumer} granted {max}")
    return client, aid


def running(c: httpx.Client, aid: int, host: str, argv: list[str] | None = None) -> tuple[int, int]:
    """Start an activity of allocation ``aid`` on ``host`` and wait until its agent runs it:
    (activity id, pid)."""
    act = c.post(f"/v1/allocations/{aid}/activities", json={"host": host, "argv": argv or SLEEPER}).json()["id"]
    got = wait_until(lambda: (x := c.get(f"/v1/activities/{act}").json())["state"] == "running" and x, 20,
                     f"activity {act} running")
    return act, got["pid"]


def host_state(m: Master, name: str) -> str | None:
    with m.http() as c:
        for h in c.get("/v1/hosts").json()["hosts"]:
            if h["name"] == name:
                return h["state"]
    return None


def postgres_url() -> Iterator[str]:
    """A fresh database on the local PostgreSQL for one test, dropped afterwards."""
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN, autocommit=True)
    except Exception as e:  # noqa: BLE001 - any failure to connect means no server here
        pytest.skip(f"no PostgreSQL server answers at 127.0.0.1:5432 ({e.__class__.__name__}: {e})")
    name = "apportion_" + uuid.uuid4().hex[:12]
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
