"""apportion bench soak: a real master under load, faults and hostile requests, then checks.

A master (SQLite, or PostgreSQL with ``db="postgres"``) and ``agents`` agents (four run
real short processes, the rest are light agents in one process), consumers' clients doing
mixed allocation and activity work, while:

- the master, the real agents and the activities' processes are SIGKILLed at random;
- with ``partitions``, every agent runs in a network namespace of its own (the light ones in one
  together), joined to the master's by a veth pair (bench/netns.py), and links are cut and healed
  at random: short cuts that heartbeats ride out, and longer ones past the master's missed-heartbeat
  limit and its ``--host-lost-after`` window where it has one;
- a corpus of hostile requests is sent.

At the end, from the store and from what the clients saw:

- ``slots``: no host was ever seen (nor is stored) with more slots held than it has;
- ``fencing``: at no moment did a host's live activity processes, as its agent's state file
  lists them, use slots the master had given to another allocation (bench/soak_live.py);
- ``lost``: every allocation created and not deleted is still there;
- ``reused``: no id (client, allocation, activity, token) was given twice, and each caller saw
  the ids it was given only go up;
- ``5xx``: no answer was a 5xx (a 503 while the master restarts is counted apart);
- ``events``: each client's event stream, as it read it, is exactly what the store holds
  for it: no gap, nothing twice, in order;
- ``memory``: the master's RSS grew at most ``rss_limit`` MB over an incarnation;
- ``audit``: every write answered 2xx has its audit row (by request id);
- ``hostile``: no hostile request was accepted.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

CLI = [sys.executable, "-m", "apportion.cli"]
REAL_AGENTS = 4
SLOTS = 4
WRITES = ("POST", "PUT", "PATCH", "DELETE")
PLAN = """
resource_groups:
  - {name: all, select: "select(slots > 0)"}
consumers:
%s
"""


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def server_options() -> str:
    """``apportion server --help`` as this installation prints it (to see which options it takes)."""
    r = subprocess.run([*CLI, "server", "--help"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"})
    return r.stdout


def _name(p: Any) -> str:
    import psutil

    try:
        return p.name()
    except psutil.Error:
        return ""


@dataclass
class Proc:
    args: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    popen: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "ab") as f:
            self.popen = subprocess.Popen(self.args, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                          env={**os.environ, **self.env})

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=30)


@dataclass
class Seen:
    """What the clients saw."""

    statuses: Counter = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    unavailable: int = 0  # 503 while starting, or no answer while the master was down
    ids: dict[str, list[int]] = field(default_factory=lambda: {"client": [], "allocation": [], "activity": [],
                                                               "token": []})
    deleted: set[int] = field(default_factory=set)
    last_id: dict[tuple[int, str], int] = field(default_factory=dict)  # (thread, kind) -> the last id it was given
    writes_ok: list[str] = field(default_factory=list)  # request ids of writes answered 2xx
    events: dict[int, list[int]] = field(default_factory=dict)
    hostile: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def violation(self, what: str) -> None:
        with self.lock:
            if len(self.violations) < 200:
                self.violations.append(what[:1500])


class Soak:
    def __init__(self, workdir: Path, minutes: float, db: str, agents: int, seed: int, rss_limit: float,
                 partitions: bool = False, host_lost_after: float | None = None) -> None:
        self.dir = workdir
        self.partitions = partitions
        self.host_lost_after = host_lost_after  # passed to the master only where it takes the option
        self.lost_after_used: float | None = None
        self.stopped_at = float("inf")  # when the run's stop was set
        self.net: Any = None  # bench/netns.Network with partitions
        self.cuts = Counter()
        self.longest_cut = 0.0
        self.live: Any = None  # bench/soak_live.LiveCheck
        # the real agents' work directories: where their execution users can reach them (0711), as a
        # root agent refuses to start in one under a directory they cannot pass (pytest's tmp_path)
        self.agents_dir = Path(tempfile.mkdtemp(prefix="apportion-soak-agents-"))
        os.chmod(self.agents_dir, 0o711)
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "agents").unlink(missing_ok=True)
        (workdir / "agents").symlink_to(self.agents_dir)  # where to look, from the soak's own folder
        self.minutes = minutes
        self.agents = max(agents, REAL_AGENTS)
        self.rng = random.Random(seed)
        self.rss_limit = rss_limit
        self.seen = Seen()
        self.stop = threading.Event()
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db_kind = db
        self.db = f"sqlite:///{workdir / 'soak.db'}" if db == "sqlite" else ""
        self.tag = f"soak-{uuid.uuid4().hex[:8]}"
        self.started = time.monotonic()
        self.consumers = [f"/T{i}" for i in range(4)]
        self.master: Proc | None = None
        self.real: list[Proc] = []
        self.light: Proc | None = None
        self.restarts = Counter()
        self.rss: list[tuple[int, float, float]] = []  # (master pid, seconds since its start, RSS MB)
        self.master_started = 0.0
        self.token = ""
        self._pg_name = ""

    # -- processes ---------------------------------------------------------------------------
    def _postgres(self) -> None:
        import psycopg

        self._pg_name = "apportion_soak_" + uuid.uuid4().hex[:10]
        with psycopg.connect("host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=5",
                             autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{self._pg_name}"')
        self.db = f"postgresql+psycopg://postgres@127.0.0.1:5432/{self._pg_name}"

    def _drop_postgres(self) -> None:
        if self._pg_name:
            import psycopg

            with psycopg.connect("host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=5",
                                 autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{self._pg_name}" WITH (FORCE)')

    def _start_master(self) -> None:
        assert self.master is not None
        self.master.start()
        self.master_started = time.monotonic()
        self._wait_ready(60)

    def _wait_ready(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"the master did not get ready in {timeout} s:\n" + self.master.log.read_text()[-2000:])

    def _network(self) -> None:
        """With partitions: the namespaces, and the master's URL on the address they reach."""
        from apportion.bench.netns import Network

        groups = [f"real{i}" for i in range(REAL_AGENTS)] + (["light"] if self.agents > REAL_AGENTS else [])
        self.net = Network(groups, rng=random.Random(self.rng.random())).create()
        self.port = _free_port(self.net.master)
        self.url = f"http://{self.net.master}:{self.port}"

    def _in(self, group: str) -> list[str]:
        """What runs an agent of ``group`` in its namespace (nothing without partitions)."""
        return self.net.prefix(group) if self.net is not None else []

    def setup(self) -> None:
        if self.partitions:
            self._network()
        if self.db_kind == "postgres":
            self._postgres()
        plan = self.dir / "plan.yaml"
        plan.write_text(PLAN % "\n".join(f"  - {{path: {c}}}" for c in self.consumers))
        token_file = self.dir / "admin.token"
        subprocess.run([*CLI, "server", "init", "--db", self.db, "--token-file", str(token_file)], check=True,
                       capture_output=True, timeout=120)
        self.token = token_file.read_text().strip()
        listen = f"{self.net.master if self.net is not None else '127.0.0.1'}:{self.port}"
        extra: list[str] = []
        if self.host_lost_after is not None and "--host-lost-after" in server_options():
            self.lost_after_used = self.host_lost_after
            extra = ["--host-lost-after", f"{self.host_lost_after:g}"]
        self.master = Proc([*CLI, "server", "--plan", str(plan), "--db", self.db, "--listen", listen,
                            "--heartbeat", "0.5", "--kill-grace", "1", "--log-level", "warning", *extra],
                           self.dir / "master.log")
        self._start_master()
        env = {"APPORTION_TOKEN": self.token, "APPORTION_SOAK": self.tag}
        for i in range(REAL_AGENTS):
            p = Proc([*self._in(f"real{i}"), *CLI, "agent", "--master", self.url, "--name", f"real{i}", "--slots", str(SLOTS),
                      "--workdir", str(self.agents_dir / f"real{i}"), "--heartbeat", "0.5", "--containment",
                      "process-group", "--log-level", "WARNING"], self.dir / f"real{i}.log", env)
            p.start()
            self.real.append(p)
        n = self.agents - REAL_AGENTS
        if n:
            self.light = Proc([*self._in("light"), *CLI, "agent", "--master", self.url, "--name", "light", "--count", str(n),
                               "--slots", str(SLOTS), "--light", "--workdir", str(self.dir / "light"),
                               "--heartbeat", "0.5", "--log-level", "WARNING"], self.dir / "light.log", env)
            self.light.start()
        end = time.monotonic() + 90
        while time.monotonic() < end:
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                hosts = httpx.get(self.url + "/v1/hosts", headers=self._auth(), timeout=5).json()["hosts"]
                if sum(h["state"] == "ok" for h in hosts) >= self.agents:
                    return
            time.sleep(0.2)
        raise RuntimeError("the agents did not all register")

    def teardown(self) -> list[str]:
        """Stop everything this run started and remove what it made; what could not be removed."""
        self._kill_tagged()
        for p in [*self.real, self.light, self.master]:
            if p is not None:
                p.kill()
        self._kill_tagged()
        left: list[str] = []
        if self.net is not None:  # after the processes: a namespace lives while a process is in it
            left = self.net.close()
        shutil.rmtree(self.agents_dir, ignore_errors=True)
        with contextlib.suppress(Exception):
            self._drop_postgres()
        return left

    def _activity_processes(self) -> list[Any]:
        """The processes the real agents run (their own process groups, so not killed with them)."""
        import psutil

        out = []
        for a in self.real:
            with contextlib.suppress(psutil.Error, AttributeError):
                out += psutil.Process(a.popen.pid).children(recursive=True)
        return out

    def _kill_tagged(self) -> None:
        import psutil

        for p in self._activity_processes():
            with contextlib.suppress(psutil.Error):
                p.kill()
        for p in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error):
                env = p.environ()
                # this run's agents, and its activities' processes (an agent SIGKILLed leaves them to init)
                if p.pid != os.getpid() and (env.get("APPORTION_SOAK") == self.tag
                                             or env.get("APPORTION_MASTER") == self.url):
                    p.kill()

    def _auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token}"}

    # -- calls -----------------------------------------------------------------------------
    def call(self, c: httpx.Client, method: str, path: str, **kw: Any) -> httpx.Response | None:
        try:
            r = c.request(method, path, **kw)
        except httpx.HTTPError:
            with self.seen.lock:
                self.seen.unavailable += 1
            time.sleep(0.2)
            return None
        with self.seen.lock:
            self.seen.statuses[r.status_code] += 1
        if r.status_code == 503:
            with self.seen.lock:
                self.seen.unavailable += 1
            time.sleep(0.2)
        elif r.status_code >= 500:
            self.seen.violation(f"5xx: {method} {path} -> {r.status_code} {r.text[:200]}")
        elif method in WRITES and r.status_code < 300 and "x-request-id" in r.headers:
            with self.seen.lock:
                self.seen.writes_ok.append(r.headers["x-request-id"])
        return r

    def _made(self, kind: str, r: httpx.Response | None) -> int | None:
        if r is None or r.status_code not in (200, 201):
            return None
        got = r.json().get("id")
        if isinstance(got, int):
            with self.seen.lock:
                self.seen.ids[kind].append(got)
                key = (threading.get_ident(), kind)
                last = self.seen.last_id.get(key)
                self.seen.last_id[key] = got
            if last is not None and got <= last:
                self.seen.violation(f"ids: a {kind} id went down: {got} after {last}, for the same caller")
        return got

    # -- the workload ----------------------------------------------------------------------
    def tenant(self, n: int) -> None:
        consumer = self.consumers[n % len(self.consumers)]
        rng = random.Random(self.rng.random())
        with httpx.Client(base_url=self.url, headers=self._auth(), timeout=15) as c:
            client = None
            while client is None and not self.stop.is_set():
                r = self.call(c, "POST", "/v1/clients", json={"name": f"soak-{n}", "consumer": consumer})
                if r is not None and r.status_code == 201:
                    client = r.json()["id"]
                    with self.seen.lock:
                        if client not in self.seen.ids["client"]:
                            self.seen.ids["client"].append(client)
            if client is None:
                return
            poller = threading.Thread(target=self.events, args=(client,), daemon=True)
            poller.start()
            mine: list[int] = []
            while not self.stop.is_set():
                self.step(c, rng, client, consumer, mine)
                time.sleep(rng.uniform(0.02, 0.15))
            poller.join(timeout=30)

    def step(self, c: httpx.Client, rng: random.Random, client: int, consumer: str, mine: list[int]) -> None:
        roll = rng.random()
        if not mine or (roll < 0.15 and len(mine) < 4):
            aid = self._made("allocation", self.call(c, "POST", "/v1/allocations", json={
                "client": client, "consumer": consumer, "max": rng.randint(1, 6)}))
            if aid is not None:
                mine.append(aid)
            return
        aid = rng.choice(mine)
        if roll < 0.25:
            self.call(c, "PATCH", f"/v1/allocations/{aid}", json={"max": rng.randint(0, 6)})
        elif roll < 0.3:
            r = self.call(c, "DELETE", f"/v1/allocations/{aid}")
            if r is not None and r.status_code in (204, 404):
                mine.remove(aid)
                if r.status_code == 204:
                    with self.seen.lock:
                        self.seen.deleted.add(aid)
        elif roll < 0.35:
            self.call(c, "POST", f"/v1/allocations/{aid}/release", json={})
            self.call(c, "PATCH", f"/v1/allocations/{aid}", json={"max": rng.randint(1, 6)})
        elif roll < 0.75:
            r = self.call(c, "GET", f"/v1/allocations/{aid}")
            if r is None or r.status_code != 200:
                if r is not None and r.status_code == 404:
                    mine.remove(aid)
                return
            hosts = [h for h, n in r.json()["hosts"].items() if n > 0]
            if hosts:
                host = rng.choice(hosts)
                argv = self._argv(rng) if host.startswith("real") else ["true"]
                self._made("activity", self.call(c, "POST", f"/v1/allocations/{aid}/activities",
                                                 json={"host": host, "argv": argv}))
        elif roll < 0.8:
            r = self.call(c, "GET", "/v1/activities", params={"allocation": aid, "state": "running"})
            if r is not None and r.status_code == 200 and r.json()["activities"]:
                act = rng.choice(r.json()["activities"])["id"]
                self.call(c, "POST", f"/v1/activities/{act}/kill")
        else:
            self.call(c, "GET", "/v1/hosts")

    @staticmethod
    def _argv(rng: random.Random) -> list[str]:
        """A real host's activity: mostly short; some run past a partition or a loss, and some of
        those ignore SIGTERM (they end at the kill grace's SIGKILL)."""
        roll = rng.random()
        if roll < 0.7:
            return ["sleep", f"{rng.uniform(0.2, 2.0):.2f}"]
        if roll < 0.9:
            return ["sleep", f"{rng.uniform(3, 12):.2f}"]
        return ["sh", "-c", f"trap '' TERM; exec sleep {rng.uniform(3, 12):.2f}"]

    def events(self, client: int) -> None:
        """Read the client's events as a client does (long poll), to the end."""
        seen = self.seen.events.setdefault(client, [])
        last = 0
        with httpx.Client(base_url=self.url, headers=self._auth(), timeout=15) as c:
            quiet = 0
            while quiet < 3:  # after the stop: until three empty polls in a row
                try:
                    r = c.get(f"/v1/clients/{client}/events", params={"after": last, "wait": 1})
                except httpx.HTTPError:
                    time.sleep(0.2)
                    continue
                if r.status_code != 200:
                    if r.status_code >= 500 and r.status_code != 503:
                        self.seen.violation(f"5xx: events of client {client} -> {r.status_code}")
                    time.sleep(0.2)
                    continue
                got = [e["id"] for e in r.json()["events"]]
                for i in got:
                    if i <= last:
                        self.seen.violation(f"events: client {client} got {i} after {last}")
                    last = max(last, i)
                seen.extend(got)
                # after the stop, and after a host cut or killed just before it can have been
                # declared lost (its activities' `lost` events come then): three empty polls
                settled = self.stop.is_set() and time.monotonic() > self.stopped_at + (self.lost_after_used or 0) + 2
                quiet = quiet + 1 if settled and not got else 0

    # -- faults and hostile requests --------------------------------------------------------------
    def chaos(self) -> None:
        import psutil

        end_master = time.monotonic() + self.rng.uniform(20, 40)
        end_agent = time.monotonic() + self.rng.uniform(8, 15)
        while not self.stop.wait(self.rng.uniform(1, 3)):
            now = time.monotonic()
            if now >= end_master:
                self.master.kill()
                self.restarts["master"] += 1
                try:
                    self._start_master()
                except RuntimeError as e:
                    self.seen.violation(f"restart: {e}")
                end_master = time.monotonic() + self.rng.uniform(40, 80)
            elif now >= end_agent:
                p = self.rng.choice(self.real)
                p.kill()
                p.start()
                self.restarts["agent"] += 1
                end_agent = time.monotonic() + self.rng.uniform(10, 20)
            else:  # an activity's process
                procs = [p for p in self._activity_processes() if _name(p) == "sleep"]
                if procs:
                    with contextlib.suppress(psutil.Error):
                        self.rng.choice(procs).kill()
                        self.restarts["process"] += 1

    def partition(self) -> None:
        """Cut a random namespace's link now and then, for a random time, and heal it; at most two
        cut at once. A third of the cuts are shorter than the missed-heartbeat limit (1.5 s here), a
        third go past it, a third past the master's --host-lost-after as the soak sets it."""
        healing: dict[str, float] = {}
        lost_after = self.lost_after_used or 6.0
        next_cut = time.monotonic() + self.rng.uniform(2, 5)
        while not self.stop.wait(0.1):
            now = time.monotonic()
            for g, at in list(healing.items()):
                if now >= at:
                    self._heal(g)
                    del healing[g]
            if now >= next_cut and len(healing) < 2:
                kind = self.rng.choice(["short", "missed", "lost"])
                free = [g for g in self.net.groups if g not in healing]
                busy = [g for g in free if g in self.live.hosts_running()]
                # a long cut goes where processes run, mostly: that is where a host coming back matters
                g = self.rng.choice(busy if busy and kind != "short" and self.rng.random() < 0.8 else free)
                seconds = {"short": self.rng.uniform(0.3, 1.0), "missed": self.rng.uniform(2.0, lost_after - 1),
                           "lost": self.rng.uniform(lost_after + 2, lost_after + 8)}[kind]
                try:
                    self.net.cut_link(g)
                except RuntimeError as e:
                    self.seen.violation(f"partitions: {e}")
                    continue
                self.cuts[kind] += 1
                self.longest_cut = max(self.longest_cut, seconds)
                healing[g] = now + seconds
                next_cut = now + self.rng.uniform(3, 8)
        for g in list(healing):
            self._heal(g)

    def _heal(self, group: str) -> None:
        try:
            self.net.heal(group)
        except RuntimeError as e:
            self.seen.violation(f"partitions: {e}")

    def check_live(self) -> None:
        """The live-process check (bench/soak_live.py), a few times a second to the end."""
        with httpx.Client(base_url=self.url, headers=self._auth(), timeout=10) as c:
            while not self.stop.wait(0.25):
                self.live.sample(c)

    def watch(self) -> None:
        """The master's memory, and every host's slots as the API shows them."""
        import psutil

        with httpx.Client(base_url=self.url, headers=self._auth(), timeout=10) as c:
            while not self.stop.wait(2):
                with contextlib.suppress(psutil.Error, AttributeError):
                    pid = self.master.popen.pid
                    self.rss.append((pid, time.monotonic() - self.master_started,
                                     psutil.Process(pid).memory_info().rss / 2**20))
                if self.rng.random() < 0.2:  # an administrator makes a token and revokes it
                    tid = self._made("token", self.call(c, "POST", "/v1/tokens", json={
                        "kind": "consumer", "consumer": self.rng.choice(self.consumers)}))
                    if tid is not None:
                        self.call(c, "DELETE", f"/v1/tokens/{tid}")
                r = self.call(c, "GET", "/v1/hosts")
                if r is not None and r.status_code == 200:
                    for h in r.json()["hosts"]:
                        if h["used"] > h["slots"]:
                            self.seen.violation(f"slots: host {h['name']} has {h['used']} of {h['slots']} held")

    def hostile(self) -> None:
        from apportion.bench import soak_corpus

        with httpx.Client(base_url=self.url, timeout=30) as c:
            cases = soak_corpus.cases()
            while not self.stop.wait(0.3):
                name, method, path, kw, token = self.rng.choice(cases)
                if token == "admin":
                    kw = {**kw, "headers": {**kw.get("headers", {}), **self._auth()}}
                try:
                    r = c.request(method, path, **kw) if name != "chunked" else soak_corpus.chunked(
                        self.port, self.token, host=self.url.split("//")[1].rsplit(":", 1)[0])
                except httpx.HTTPError:
                    continue
                status = r if isinstance(r, int) else r.status_code
                with self.seen.lock:
                    self.seen.hostile += 1
                    self.seen.statuses[status] += 1
                if status >= 500 and status != 503:
                    self.seen.violation(f"5xx: hostile {name} -> {status}")
                elif 200 <= status < 300:
                    self.seen.violation(f"hostile: {name} was accepted ({status})")

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        from apportion.bench.soak_live import LiveCheck

        started = time.monotonic()
        self.live = LiveCheck({f"real{i}": self.agents_dir / f"real{i}" for i in range(REAL_AGENTS)},
                              {f"real{i}": SLOTS for i in range(REAL_AGENTS)}, self.url)
        threads = [threading.Thread(target=self.tenant, args=(i,), daemon=True) for i in range(8)]
        jobs = [self.chaos, self.watch, self.hostile, self.check_live] + ([self.partition] if self.net else [])
        threads += [threading.Thread(target=f, daemon=True) for f in jobs]
        for t in threads:
            t.start()
        self.stop.wait(self.minutes * 60)
        self.stopped_at = time.monotonic()
        self.stop.set()
        for t in threads:
            t.join(timeout=120)
        with contextlib.suppress(RuntimeError):
            self._wait_ready(60)
        return self.check(time.monotonic() - started)

    def check(self, seconds: float) -> dict[str, Any]:
        from sqlalchemy import create_engine, text

        s = self.seen
        engine = create_engine(self.db)
        with engine.connect() as c:
            over = c.execute(text("SELECT h.name, h.slots, SUM(x.slots) FROM holdings x JOIN hosts h ON h.name = x.host "
                                  "GROUP BY h.name, h.slots HAVING SUM(x.slots) > h.slots")).all()
            for name, slots, held in over:
                s.violation(f"slots: the store holds {held} on {name}, which has {slots}")
            allocs = {r[0] for r in c.execute(text("SELECT id FROM allocations"))}
            # a DELETE whose answer was lost (the master killed between its commit and the
            # answer) is in the audit, written with the deletion: deleted, not lost
            deleted = {int(p.rsplit("/", 1)[1]) for (p,) in c.execute(text(
                "SELECT path FROM audit WHERE method = 'DELETE' AND outcome = 'done' "
                "AND path LIKE '/v1/allocations/%'")) if p.rsplit("/", 1)[1].isdigit()}
            for aid in s.ids["allocation"]:
                if aid not in allocs and aid not in s.deleted and aid not in deleted:
                    s.violation(f"lost: allocation {aid} was created, never deleted, and is gone")
            for client, got in s.events.items():
                stored = [r[0] for r in c.execute(text("SELECT id FROM events WHERE client = :c ORDER BY id"),
                                                  {"c": client})]
                if got != stored:
                    missing = sorted(set(stored) - set(got))[:5]
                    s.violation(f"events: client {client} read {len(got)} events, the store has {len(stored)} "
                                f"(missing e.g. {missing})")
            audited = {r[0] for r in c.execute(text("SELECT request_id FROM audit"))}
            absent = [x for x in s.writes_ok if x not in audited]
            if absent:
                s.violation(f"audit: {len(absent)} writes answered 2xx have no audit row (e.g. {absent[:3]})")
            audit_rows = len(audited)
        engine.dispose()
        if self.live is not None:
            for v in self.live.finish():
                s.violation(v)
        for kind, ids in s.ids.items():
            if len(ids) != len(set(ids)):
                dup = [i for i, n in Counter(ids).items() if n > 1][:5]
                s.violation(f"reused: {kind} ids given twice: {dup}")
        growth = self._rss_growth()
        if growth > self.rss_limit:
            s.violation(f"memory: the master's RSS grew {growth:.1f} MB in one run (limit {self.rss_limit:g})")
        five = sum(n for code, n in s.statuses.items() if code >= 500 and code != 503)
        return {
            "minutes": round(seconds / 60, 2), "db": self.db_kind, "agents": self.agents,
            "requests": sum(s.statuses.values()), "hostile": s.hostile, "5xx": five,
            "unavailable": s.unavailable, "statuses": {str(k): v for k, v in sorted(s.statuses.items())},
            "restarts": dict(self.restarts), "ids": {k: len(v) for k, v in s.ids.items()},
            "partitions": ({"cuts": dict(self.cuts), "longest_s": round(self.longest_cut, 1),
                            "host_lost_after": self.lost_after_used} if self.net is not None else None),
            "live": self.live.figures() if self.live is not None else None,
            "events_checked": sum(len(v) for v in s.events.values()), "writes_audited": len(s.writes_ok),
            "audit_rows": audit_rows, "rss_mb_max": round(max((r[2] for r in self.rss), default=0.0), 1),
            "rss_growth_mb": round(growth, 1), "violations": s.violations,
        }

    def _rss_growth(self) -> float:
        """The most one master incarnation grew after its first 20 s (the start's own allocations)."""
        by_pid: dict[int, list[tuple[float, float]]] = {}
        for pid, age, mb in self.rss:
            by_pid.setdefault(pid, []).append((age, mb))
        growth = 0.0
        for samples in by_pid.values():
            warm = [mb for age, mb in samples if age >= 20]
            if len(warm) >= 2:
                growth = max(growth, max(warm) - warm[0])
        return growth


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_soak(minutes: float, db: str = "sqlite", agents: int = 20, seed: int = 18, rss_limit: float = 50.0,
             workdir: Path | None = None, partitions: bool = False,
             host_lost_after: float | None = 6.0) -> dict[str, Any]:
    """The soak (module docstring); its figures and every violation found.

    With ``partitions`` it needs root and ``ip`` (bench/netns.Unavailable says why not). SIGTERM
    and SIGHUP end it as Ctrl-C does: every process it started is stopped and every namespace,
    veth pair and address it made is removed. ``host_lost_after`` goes to the master only where
    ``apportion server`` takes that option."""
    if partitions:
        from apportion.bench.netns import Unavailable, unavailable

        why = unavailable()
        if why:
            raise Unavailable(why)
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, _interrupted) for s in (signal.SIGTERM, signal.SIGHUP)} if main else {}
    try:
        with tempfile.TemporaryDirectory(prefix="apportion-soak-") as tmp:
            soak = Soak(Path(workdir or tmp), minutes, db, agents, seed, rss_limit, partitions=partitions,
                        host_lost_after=host_lost_after)
            result: dict[str, Any] = {}
            try:
                soak.setup()
                result = soak.run()
            finally:
                for s in old:  # a second signal does not stop the cleaning up
                    signal.signal(s, signal.SIG_IGN)
                soak.stop.set()
                left = soak.teardown()
                if left and result:
                    result["violations"].append(f"cleanup: left behind: {left}")
            return result
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def render(console: Any, machine: dict[str, Any], r: dict[str, Any]) -> None:
    """The soak's figures and verdict, for a terminal."""
    console.print(f"[bold]apportion bench soak[/]: {r['minutes']} min on {r['db']}, {r['agents']} agents "
                  f"({machine.get('logical_cpus', '?')} CPUs)", highlight=False)
    console.print(f"requests {r['requests']:,} ({r['hostile']:,} hostile), 5xx {r['5xx']}, unavailable while "
                  f"restarting {r['unavailable']:,}; kills {r['restarts']}", highlight=False)
    console.print(f"ids given {r['ids']}; events checked {r['events_checked']:,}; writes audited "
                  f"{r['writes_audited']:,} ({r['audit_rows']:,} audit rows)", highlight=False)
    console.print(f"master RSS max {r['rss_mb_max']} MB, growth {r['rss_growth_mb']} MB", highlight=False)
    if r.get("partitions"):
        p = r["partitions"]
        lost = f"{p['host_lost_after']:g} s" if p["host_lost_after"] is not None else "not an option of this master"
        console.print(f"partitions: cuts {p['cuts']}, longest {p['longest_s']} s; --host-lost-after {lost}",
                      highlight=False)
    if r.get("live"):
        v = r["live"]
        console.print(f"live processes checked against holdings: {v['samples']:,} samples, {v['processes']:,} "
                      f"processes (at most {v['most_at_once']} at once, {v['not_in_state_file']} not in their "
                      f"agent's state file{', e.g. ' if v['not_in_state_file_e_g'] else ''}"
                      f"{'; '.join(v['not_in_state_file_e_g'][:3])})", highlight=False)
    if r["violations"]:
        console.print(f"[red]{len(r['violations'])} violation(s)[/]:")
        for v in r["violations"]:
            console.print(f"  {v}", markup=False, highlight=False)
    else:
        console.print("[green]0 violations[/]")


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run_soak(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0), indent=2))
