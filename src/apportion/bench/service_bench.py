"""`apportion bench service`: the live service end to end, as users meet it.

Everything runs as its own process on loopback: a real master (``apportion server``, on
an SQLite file or a fresh PostgreSQL database), light agents (``apportion agent --light
--count N``: they register and heartbeat but start no processes), and load-generator
processes (``apportion.bench.service_load``), each running many clients on one event
loop. Each client loops: create an allocation (max 1), wait for its ``granted`` event,
delete it; with ``--resources`` each allocation says what each slot needs (cores, memory,
GPUs), as a multi-resource request does.

Figures: allocations per second created, granted and released (a request counts once
released, the whole round done) over the timed window; request-to-grant latency (create
sent to ``granted`` received); failures; the CPU each process tree used over the window
(master, agents, load, the machine); the master's resident memory.

Checks, against the store once the master has stopped (``service_check``): no slot
granted twice, no allocation lost, every committed grant still held, every client's
event stream without gap or duplicate.

Variants: ``kill`` SIGKILLs the master N times at random moments of the window and
restarts it; ``failover`` (PostgreSQL) runs two masters and SIGKILLs the leader,
timing until the standby serves; ``run_scale`` fills a store with 10,000 hosts, 1,000
consumers and 20,000 allocations and times a restart to ``/readyz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from apportion.bench.engine_bench import percentile
from apportion.bench.machine import source_revision
from apportion.bench.service_check import check, read_store
from apportion.bench.service_load import A_CREATED, A_DEL_SENT, A_DELETED, A_GRANTED, A_SENT
from apportion.client import resources_of

CLI = [sys.executable, "-m", "apportion.cli"]
PG_ADMIN = "host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3"
GROUP = "Bench"
TARGETS = {
    "sqlite": {"rate": 1000.0, "p50_s": 0.020, "p99_s": 0.100},
    "postgres": {"rate": 500.0, "p50_s": 0.020, "p99_s": 0.100},
    "failover_s": 5.0,
    "restart_s": 2.0,
    "rss_mib": 500.0,
}
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class ServiceBenchSpec:
    db: str = "sqlite"  # sqlite | postgres
    seconds: float = 60.0
    agents: int = 100
    agents_per_process: int = 100
    slots_per_agent: int = 4
    clients: int = 200
    load_processes: int = 4
    consumers: int = 4
    rate: float | None = None  # allocations per second over all clients; None: as fast as they go
    events: str = "sse"  # sse (as the SDK reads events) | poll (long poll)
    kill: int = 0
    failover: bool = False
    seed: int = 1
    heartbeat: float = 1.0
    pg_admin: str = PG_ADMIN
    keep: bool = False  # keep the work directory (logs, SQLite file)
    resources: dict[str, Any] | None = None  # what each slot of every allocation needs; None: plain slots

    def __post_init__(self) -> None:
        if self.resources is not None:
            object.__setattr__(self, "resources", resources_of(self.resources))
        if self.db not in ("sqlite", "postgres"):
            raise ValueError("db must be sqlite or postgres")
        if self.events not in ("poll", "sse"):
            raise ValueError("events must be poll or sse")
        for name in ("seconds", "agents", "agents_per_process", "slots_per_agent", "clients", "load_processes",
                     "consumers"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be more than 0")
        if self.kill < 0:
            raise ValueError("kill must be 0 or more")
        if self.failover and self.db != "postgres":
            raise ValueError("failover needs --db postgres (two masters share one database)")
        if self.failover and self.kill:
            raise ValueError("give --kill or --failover, not both")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be more than 0")


# -- processes ------------------------------------------------------------------------------
@dataclass
class Proc:
    """A child in its own process group, its output in a log file."""

    args: list[str]
    log: Path
    popen: subprocess.Popen | None = None
    stdin: bool = False
    env: dict[str, str] | None = None
    started_at: float = 0.0

    def start(self) -> None:
        f = open(self.log, "ab")  # noqa: SIM115 - the child keeps it
        self.started_at = time.time()
        self.popen = subprocess.Popen(self.args, stdout=f if not self.stdin else subprocess.PIPE,
                                      stderr=f, stdin=subprocess.PIPE if self.stdin else subprocess.DEVNULL,
                                      start_new_session=True, text=self.stdin,
                                      env={**os.environ, **self.env} if self.env else None)
        f.close()

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        if self.popen is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)

    def stop(self, grace: float = 8.0) -> None:
        """SIGTERM to the group, SIGKILL after ``grace`` seconds."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        for s in (self.popen.stdin, self.popen.stdout):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()

    def tail(self, n: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def wait_for_state(check: Callable[[], Any], timeout: float, what: str, every: float = 0.02,
                   error: type[Exception] = RuntimeError) -> Any:
    """Poll ``check`` until it returns something truthy (HTTP and OS errors count as not
    yet); raise ``error`` naming ``what`` and the last thing seen after ``timeout`` seconds.
    The bench and the end-to-end tests wait for a state this way, never by sleeping."""
    end = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < end:
        try:
            last = check()
        except (httpx.HTTPError, OSError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(every)
    raise error(f"waited {timeout:g} s for {what}; last saw {last!r}")


def run_dir(prefix: str) -> Path:
    """A new temporary directory for a bench's master and agents that execution users may pass
    through (0711, no listing): as root, agents run activities as `nobody`, which must reach its
    activity's directory inside an agent's work directory by its path."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(workdir, 0o711)
    return workdir


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_database(admin_dsn: str = PG_ADMIN) -> Iterator[str]:
    """A fresh database apportion_bench_<random> on the local PostgreSQL, dropped afterwards."""
    import psycopg

    admin = psycopg.connect(admin_dsn, autocommit=True)
    name = "apportion_bench_" + uuid.uuid4().hex[:10]
    admin.execute(f'CREATE DATABASE "{name}"')
    info = admin.info
    try:
        yield f"postgresql+psycopg://{info.user}@{info.host}:{info.port}/{name}"
    finally:
        with contextlib.suppress(Exception):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@contextlib.contextmanager
def store(kind: str, workdir: Path, admin_dsn: str = PG_ADMIN) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{workdir / 'apportion.db'}"
    else:
        with postgres_database(admin_dsn) as url:
            yield url


def plan_text(consumers: int, parents: int = 0, grace: int = 30) -> str:
    """One select() group taking in every reported host, and leaves sharing it equally
    (under ``parents`` parents when more than 0, else under /bench)."""
    lines = ["hosts: []", "resource_groups:", f"  - name: {GROUP}", "    select: select(slots > 0)",
             "consumers:"]
    if parents <= 0:
        lines.append("  - {path: /bench}")
        lines += [f"  - {{path: /bench/c{i}, share_ratio: 1, grace: {grace}}}" for i in range(consumers)]
    else:
        for p in range(parents):
            lines.append(f"  - {{path: /p{p}}}")
        lines += [f"  - {{path: /p{i % parents}/c{i}, share_ratio: 1, grace: {grace}}}" for i in range(consumers)]
    return "\n".join(lines) + "\n"


def leaves(consumers: int, parents: int = 0) -> list[str]:
    return [f"/bench/c{i}" for i in range(consumers)] if parents <= 0 else \
        [f"/p{i % parents}/c{i}" for i in range(consumers)]


class Masters:
    """One master (or two on one database, for failover), started as a user would."""

    def __init__(self, workdir: Path, db: str, plan: Path, count: int = 1, extra: list[str] | None = None) -> None:
        self.workdir, self.db, self.plan = workdir, db, plan
        self.ports = [_free_port() for _ in range(count)]
        self.procs = [Proc(self.args(p, extra or []), workdir / f"master-{p}.log") for p in self.ports]
        token_file = workdir / "admin.token"
        subprocess.run([*CLI, "server", "init", "--db", db, "--token-file", str(token_file)], check=True,
                       capture_output=True, timeout=120)
        self.token = token_file.read_text().strip()

    def args(self, port: int, extra: list[str]) -> list[str]:
        return [*CLI, "server", "--plan", str(self.plan), "--db", self.db, "--listen", f"127.0.0.1:{port}", *extra]

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.ports]

    def ready(self, i: int) -> bool:
        try:
            return httpx.get(self.urls[i] + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def role(self, i: int) -> str | None:
        try:
            return httpx.get(self.urls[i] + "/healthz", timeout=2).json().get("role")
        except (httpx.HTTPError, ValueError):
            return None

    def start(self, i: int, timeout: float = 60.0) -> float:
        """Start master ``i``; seconds from process start to ``/readyz`` 200."""
        p = self.procs[i]
        p.start()
        wait_for_state(lambda: self.ready(i) or not p.alive, timeout, f"master {self.urls[i]} ready", every=0.01)
        if not p.alive:
            raise RuntimeError(f"master {self.urls[i]} exited:\n{p.tail()}")
        return time.time() - p.started_at

    def stop(self) -> None:
        for p in self.procs:
            p.stop()


class CpuMeter:
    """CPU seconds of process trees by role, sampled; a process's last sample counts when it dies."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        self.roles: dict[str, list[Proc]] = {}
        self.seen: dict[int, tuple[str, float]] = {}  # pid -> role, cpu seconds (own + its children)
        self.base: dict[int, float] = {}
        self.rss: dict[str, float] = {}

    def watch(self, role: str, procs: list[Proc]) -> None:
        self.roles[role] = procs

    def sample(self) -> None:
        ps = self.psutil
        for role, procs in self.roles.items():
            for p in procs:
                if not p.alive:
                    continue
                try:
                    top = ps.Process(p.pid)
                    tree = [top, *top.children(recursive=True)]
                except ps.Error:
                    continue
                rss = 0.0  # of one process tree (one master)
                for q in tree:
                    try:
                        t = q.cpu_times()
                        self.seen[q.pid] = (role, t.user + t.system)
                        rss += q.memory_info().rss
                    except ps.Error:
                        continue
                self.rss[role] = max(self.rss.get(role, 0.0), rss)

    def mark(self) -> None:
        self.sample()
        self.base = {pid: cpu for pid, (_, cpu) in self.seen.items()}
        self.rss = {}
        self.sys_base = self.psutil.cpu_times()

    def used(self) -> dict[str, float]:
        out: dict[str, float] = {r: 0.0 for r in self.roles}
        for pid, (role, cpu) in self.seen.items():
            out[role] += cpu - self.base.get(pid, 0.0)
        return out

    def machine(self) -> dict[str, float]:
        a, b = self.sys_base, self.psutil.cpu_times()
        total = sum(b) - sum(a)
        idle = (b.idle - a.idle) + (getattr(b, "iowait", 0.0) - getattr(a, "iowait", 0.0))
        return {"busy_s": total - idle, "idle_s": idle, "total_s": total,
                "others_s": max(0.0, total - idle - sum(self.used().values()))}


def _ms_stats(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"n": 0, "p50_s": None, "p95_s": None, "p99_s": None, "max_s": None, "mean_s": None}
    return {"n": len(xs), "p50_s": percentile(xs, 50), "p95_s": percentile(xs, 95), "p99_s": percentile(xs, 99),
            "max_s": max(xs), "mean_s": statistics.fmean(xs)}


def _load_config(spec: ServiceBenchSpec, urls: list[str], token: str, names: list[tuple[str, str]], out: Path,
                 rate: float | None) -> dict[str, Any]:
    return {"urls": urls, "token": token, "group": GROUP, "events": spec.events, "out": str(out),
            "resources": spec.resources,
            "clients": [{"name": n, "consumer": c} for n, c in names], "rate": rate,
            "poll_wait": 5.0, "grant_timeout": 30.0, "drain": 20.0,
            "retry_for": 60.0 if (spec.kill or spec.failover) else 20.0}


def _read_line(f: IO[str], timeout: float) -> str:
    """One line from a child's stdout, or '' after ``timeout`` seconds."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(f, selectors.EVENT_READ)
    try:
        if sel.select(timeout):
            return f.readline()
        return ""
    finally:
        sel.close()


def run(spec: ServiceBenchSpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The whole measurement; every process it starts is stopped before it returns."""
    say = progress or (lambda _m: None)
    workdir = Path(tempfile.mkdtemp(prefix="apportion-bench-service-"))
    procs: list[Proc] = []
    masters: Masters | None = None
    keep = spec.keep
    revision = source_revision()  # the code the processes start from

    def stop_all() -> None:
        for p in procs:
            p.stop(grace=3.0)
        if masters is not None:
            for p in masters.procs:
                p.stop(grace=3.0)

    try:
        with contextlib.ExitStack() as stack:
            db = stack.enter_context(store(spec.db, workdir, spec.pg_admin))
            stack.callback(stop_all)  # before the database is dropped
            plan = workdir / "plan.yaml"
            plan.write_text(plan_text(spec.consumers))
            masters = Masters(workdir, db, plan, count=2 if spec.failover else 1,
                              extra=["--heartbeat", str(spec.heartbeat)])
            say(f"master on {masters.urls[0]} ({spec.db})")
            masters.start(0)
            if spec.failover:
                masters.procs[1].start()
                wait_for_state(lambda: masters.role(1) == "standby", 60, "the second master to stand by")
            urls = masters.urls
            token = masters.token

            # agents
            agents: list[Proc] = []
            left, k = spec.agents, 0
            while left > 0:
                n = min(left, spec.agents_per_process)
                wd = workdir / f"agents-{k}"
                # a core a slot, whatever this machine has: what --resources asks for fits as slots do
                args = [*CLI, "agent", "--master", ",".join(urls), "--name", f"h{k}", "--slots",
                        str(spec.slots_per_agent), "--cores", str(spec.slots_per_agent), "--workdir", str(wd),
                        "--light", "--count", str(n), "--log-level", "WARNING"]
                if n == 1:
                    args[args.index("--name") + 1] = f"h{k}-0"
                p = Proc(args, workdir / f"agents-{k}.log", env={"APPORTION_TOKEN": token})
                p.start()
                agents.append(p)
                left -= n
                k += 1
            procs += agents
            say(f"{spec.agents} light agents in {len(agents)} process(es)")

            def hosts_up() -> bool:
                leader = next((u for i, u in enumerate(urls) if masters.role(i) == "leader"), urls[0])
                r = httpx.get(leader + "/v1/hosts", headers={"Authorization": f"Bearer {token}"}, timeout=5)
                return sum(1 for h in r.json()["hosts"] if h["state"] == "ok") >= spec.agents

            wait_for_state(hosts_up, 120, f"{spec.agents} hosts reported", every=0.2)

            # load
            names = [(f"bench-{i}", leaves(spec.consumers)[i % spec.consumers]) for i in range(spec.clients)]
            nproc = min(spec.load_processes, spec.clients)
            loads: list[Proc] = []
            outs: list[Path] = []
            for j in range(nproc):
                mine = names[j::nproc]
                out = workdir / f"load-{j}.json"
                cfg = _load_config(spec, urls, token, mine, out, None if spec.rate is None else spec.rate / nproc)
                cfg_path = workdir / f"load-{j}.config.json"
                cfg_path.write_text(json.dumps(cfg))
                p = Proc([sys.executable, "-m", "apportion.bench.service_load", str(cfg_path)],
                         workdir / f"load-{j}.log", stdin=True)
                p.start()
                loads.append(p)
                outs.append(out)
            procs += loads
            for p in loads:
                line = _read_line(p.popen.stdout, 120)
                if line.strip() != "ready":
                    raise RuntimeError(f"a load process did not get ready ({line!r}):\n{p.tail()}")
            say(f"{spec.clients} clients in {nproc} load processes; running {spec.seconds:g} s")

            meter = CpuMeter()
            meter.watch("master", masters.procs)
            meter.watch("agents", agents)
            meter.watch("load", loads)
            t_go = time.time() + 0.5
            t_end = t_go + spec.seconds
            for p in loads:
                p.popen.stdin.write(f"go {t_go} {t_end}\n")
                p.popen.stdin.flush()
            rng = random.Random(spec.seed)
            kills = sorted(t_go + spec.seconds * rng.uniform(0.1, 0.9) for _ in range(spec.kill))
            failover_at = t_go + spec.seconds * rng.uniform(0.3, 0.6) if spec.failover else None
            restarts: list[dict[str, float]] = []
            failover: dict[str, Any] | None = None
            marked = False
            cpu: dict[str, float] = {}
            machine_cpu: dict[str, float] = {}
            master_rss: list[float] = []
            while True:
                now = time.time()
                if not marked and now >= t_go:
                    meter.mark()
                    marked = True
                if kills and now >= kills[0]:
                    kills.pop(0)
                    meter.sample()
                    t_kill = time.time()
                    masters.procs[0].kill()
                    say(f"master SIGKILLed at {t_kill - t_go:.1f} s; restarting")
                    ready_s = masters.start(0)
                    restarts.append({"at_s": t_kill - t_go, "restart_to_ready_s": ready_s,
                                     "down_s": time.time() - t_kill})
                if failover_at is not None and now >= failover_at:
                    failover_at = None
                    failover = _failover(masters, say)
                    failover["at_s"] -= t_go
                if marked:
                    meter.sample()
                    master_rss.append(meter.rss.get("master", 0.0))
                if now >= t_end:
                    cpu = meter.used()
                    machine_cpu = meter.machine()
                    break
                time.sleep(min(0.25, max(0.0, t_end - time.time())))
            say("window over; the clients finish their last round")
            results = []
            for p, out in zip(loads, outs, strict=True):
                line = _read_line(p.popen.stdout, 90)
                if line.strip() != "done" or not out.exists():
                    raise RuntimeError(f"a load process did not finish ({line!r}):\n{p.tail()}")
                results.append(json.loads(out.read_text()))
            for p in agents:
                p.stop()
            masters.stop()
            say("checking the store")
            view = read_store(db)
            clients = [c for r in results for c in r["clients"]]
            findings = check(view, clients)
            figures = _figures(spec, clients, t_go, t_end)
            for x in restarts:
                x["clients_granted_again_s"] = _first_after(clients, t_go + x["at_s"])
            if failover is not None:
                failover["clients_granted_again_s"] = _first_after(clients, t_go + failover["at_s"])
            targets = TARGETS[spec.db]
            out = {
                "spec": asdict(spec),
                "revision": revision,
                "window_s": spec.seconds,
                **figures,
                "cpu": {"master_s": cpu.get("master", 0.0), "agents_s": cpu.get("agents", 0.0),
                        "load_s": cpu.get("load", 0.0), **{f"machine_{k}": v for k, v in machine_cpu.items()},
                        "cores": os.cpu_count()},
                "master_cpu_per_round_ms": (1000 * cpu.get("master", 0.0) / figures["rate"]["released"]
                                            if figures["rate"]["released"] else None),
                "master_rss_mib": {"peak": max(master_rss, default=0.0) / MIB,
                                   "last": (master_rss[-1] if master_rss else 0.0) / MIB},
                # the master runs at its default --log-level (info): its access log is on, as in
                # production, unless APPORTION_ACCESS_LOG=0; the audit is always on
                "access_log": os.environ.get("APPORTION_ACCESS_LOG") != "0",
                "restarts": restarts,
                "failover": failover,
                "unfinished_clients": sum(r["unfinished"] for r in results),
                "check": findings.summary(),
                "store_events": len(view.events),
            }
            # a failed check keeps the logs, the store and what each client saw, to look into
            keep = keep or not findings.summary()["ok"] or figures["errors"]["total"] > 0
            out["workdir"] = str(workdir) if keep else None
            out["targets"] = {
                "rate": {"target": targets["rate"], "met": figures["rate"]["released_per_s"] >= targets["rate"]},
                "p50_s": {"target": targets["p50_s"], "met": _le(figures["grant_latency"]["p50_s"],
                                                                  targets["p50_s"])},
                "p99_s": {"target": targets["p99_s"], "met": _le(figures["grant_latency"]["p99_s"],
                                                                  targets["p99_s"])},
            }
            if failover is not None:
                out["targets"]["failover_s"] = {"target": TARGETS["failover_s"],
                                                "met": _le(failover.get("standby_serves_s"), TARGETS["failover_s"])}
            return out
    finally:
        stop_all()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _first_after(clients: list[dict[str, Any]], t: float) -> float | None:
    """Seconds from ``t`` until a client first heard of a grant for an allocation it created after ``t``."""
    got = [rec[A_GRANTED] for c in clients for rec in c["allocs"]
           if rec[A_GRANTED] is not None and rec[A_SENT] >= t]
    return min(got) - t if got else None


def _le(x: float | None, limit: float) -> bool:
    return x is not None and x <= limit


def _failover(masters: Masters, say: Callable[[str], None]) -> dict[str, Any]:
    """SIGKILL the leader; time until the other answers an API call."""
    lead = next((i for i in range(len(masters.procs)) if masters.role(i) == "leader"), 0)
    other = 1 - lead
    t_kill = time.time()
    masters.procs[lead].kill()
    say(f"leader {masters.urls[lead]} SIGKILLed; waiting for {masters.urls[other]}")
    headers = {"Authorization": f"Bearer {masters.token}"}

    def serves() -> bool:
        return httpx.get(masters.urls[other] + "/v1/hosts", headers=headers, timeout=2).status_code == 200

    wait_for_state(serves, 60, "the standby to serve", every=0.01)
    return {"at_s": t_kill, "standby_serves_s": time.time() - t_kill, "killed": masters.urls[lead],
            "new_leader": masters.urls[other]}


def _figures(spec: ServiceBenchSpec, clients: list[dict[str, Any]], t_go: float, t_end: float) -> dict[str, Any]:
    created = granted = released = adopted = 0
    lat: list[float] = []
    create_lat: list[float] = []
    delete_lat: list[float] = []
    per_s: Counter[int] = Counter()
    for c in clients:
        for rec in c["allocs"]:
            if rec[6]:
                adopted += 1
                continue
            if rec[A_CREATED] is not None and t_go <= rec[A_CREATED] < t_end:
                created += 1
            if rec[A_GRANTED] is not None and t_go <= rec[A_GRANTED] < t_end:
                granted += 1
            if rec[A_DELETED] is not None and t_go <= rec[A_DELETED] < t_end:
                released += 1
                per_s[int(rec[A_DELETED] - t_go)] += 1
            if t_go <= rec[A_SENT] < t_end:
                if rec[A_GRANTED] is not None:
                    lat.append(rec[A_GRANTED] - rec[A_SENT])
                if rec[A_CREATED] is not None:
                    create_lat.append(rec[A_CREATED] - rec[A_SENT])
                if rec[A_DELETED] is not None and rec[A_DEL_SENT] is not None:
                    delete_lat.append(rec[A_DELETED] - rec[A_DEL_SENT])
    secs = max(1, int(spec.seconds))
    buckets = [per_s.get(i, 0) for i in range(secs)]
    window = min(5, secs)
    lows = [sum(buckets[i:i + window]) / window for i in range(0, secs - window + 1)]
    errors: Counter[str] = Counter()
    retries: Counter[str] = Counter()
    samples: list[str] = []
    for c in clients:
        errors.update(c["errors"])
        retries.update(c["retries"])
        samples += c["samples"]
    return {
        "rate": {"created_per_s": created / spec.seconds, "granted_per_s": granted / spec.seconds,
                 "released_per_s": released / spec.seconds, "lowest_5s_per_s": min(lows, default=0.0),
                 "created": created, "granted": granted, "released": released, "adopted": adopted},
        "grant_latency": _ms_stats(lat),
        "create_latency": _ms_stats(create_lat),
        "delete_latency": _ms_stats(delete_lat),
        "errors": {"total": sum(errors.values()), "by_kind": dict(errors), "samples": samples[:10]},
        "retries": {"total": sum(retries.values()), "by_kind": dict(retries)},
    }


# -- scale: restart time and memory at 10,000 hosts ------------------------------------------------
@dataclass(frozen=True, slots=True)
class ScaleSpec:
    db: str = "sqlite"
    hosts: int = 10_000
    slots_per_host: int = 16
    consumers: int = 1_000
    parents: int = 20
    allocations: int = 20_000
    restarts: int = 3
    seed: int = 1
    pg_admin: str = PG_ADMIN
    keep: bool = False

    def __post_init__(self) -> None:
        if self.db not in ("sqlite", "postgres"):
            raise ValueError("db must be sqlite or postgres")
        for name in ("hosts", "slots_per_host", "consumers", "parents", "restarts"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be more than 0")
        if self.allocations < 0:
            raise ValueError("allocations must be 0 or more")
        if self.allocations > self.hosts * self.slots_per_host:
            raise ValueError("more allocations than slots")


def _write_hosts(db: str, hosts: int, slots: int) -> None:
    """Hosts as if their agents had reported (state ok), written straight into the store."""
    from sqlalchemy import create_engine, insert

    from apportion.service.store.models import HostRow

    engine = create_engine(db)
    now = time.time()
    rows = [{"name": f"s{i:05d}", "slots": slots, "memory": 64.0, "os": "Linux", "attributes": {"rack": i // 40},
             "state": "ok", "closed": False, "last_seen": now} for i in range(hosts)]
    try:
        with engine.begin() as c:
            for i in range(0, len(rows), 2000):
                c.execute(insert(HostRow), rows[i:i + 2000])
    finally:
        engine.dispose()


async def _fill(url: str, token: str, consumers: list[str], allocations: int, seed: int) -> dict[str, Any]:
    """1 client per consumer, then ``allocations`` allocations of 1 slot spread over them, by the API."""
    from apportion.bench.service_http import Http

    rng = random.Random(seed)
    sem = asyncio.Semaphore(64)
    conns = [Http([url], token) for _ in range(64)]
    free = list(conns)
    ids: dict[str, int] = {}
    failures: Counter[int] = Counter()

    async def call(method: str, path: str, body: Any) -> tuple[int, Any]:
        async with sem:
            h = free.pop()
            try:
                return await h.call(method, path, body, timeout=120)
            finally:
                free.append(h)

    async def reg(i: int, consumer: str) -> None:
        st, v = await call("POST", "/v1/clients", {"name": f"scale-{i}", "consumer": consumer})
        if st != 201:
            raise RuntimeError(f"register: {st} {v}")
        ids[consumer] = v["id"]

    await asyncio.gather(*(reg(i, c) for i, c in enumerate(consumers)))

    async def alloc(_k: int) -> None:
        c = rng.choice(consumers)
        st, v = await call("POST", "/v1/allocations",
                           {"client": ids[c], "consumer": c, "group": GROUP, "min": 1, "max": 1})
        if st != 201:
            failures[st] += 1

    t0 = time.time()
    await asyncio.gather(*(alloc(k) for k in range(allocations)))
    for h in conns:
        h.close()
    return {"fill_s": time.time() - t0, "failures": dict(failures)}


def run_scale(spec: ScaleSpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Fill a store, then time restarts of the master from process start to /readyz, and its memory."""
    import psutil

    say = progress or (lambda _m: None)
    revision = source_revision()
    workdir = Path(tempfile.mkdtemp(prefix="apportion-bench-scale-"))
    masters: Masters | None = None
    try:
        with contextlib.ExitStack() as stack:
            db = stack.enter_context(store(spec.db, workdir, spec.pg_admin))
            stack.callback(lambda: masters is not None and masters.stop())  # before the database is dropped
            plan = workdir / "plan.yaml"
            plan.write_text(plan_text(spec.consumers, parents=spec.parents))
            # a long heartbeat: the hosts have no agents here, and must stay up while measured
            masters = Masters(workdir, db, plan, extra=["--heartbeat", "600"])
            say(f"writing {spec.hosts:,} hosts")
            _write_hosts(db, spec.hosts, spec.slots_per_host)
            first_ready = masters.start(0, timeout=300)
            say(f"master ready in {first_ready:.2f} s; {spec.consumers:,} clients and "
                f"{spec.allocations:,} allocations by the API")
            fill = asyncio.run(_fill(masters.urls[0], masters.token, leaves(spec.consumers, spec.parents),
                                     spec.allocations, spec.seed))
            headers = {"Authorization": f"Bearer {masters.token}"}

            def held() -> int:
                r = httpx.get(masters.urls[0] + "/v1/allocations", headers=headers, timeout=60)
                return sum(a["held"] for a in r.json()["allocations"])

            granted = wait_for_state(lambda: (n := held()) >= spec.allocations and n, 300, "every allocation granted",
                            every=0.5)
            proc = psutil.Process(masters.procs[0].pid)
            time.sleep(2.0)
            running_rss = proc.memory_info().rss / MIB
            say(f"{granted:,} slots held; master RSS {running_rss:,.0f} MiB; restarting {spec.restarts} times")
            restarts = []
            for _ in range(spec.restarts):
                masters.procs[0].kill()
                ready_s = masters.start(0, timeout=300)
                rss_ready = psutil.Process(masters.procs[0].pid).memory_info().rss / MIB
                time.sleep(3.0)  # a few cycles
                rss_after = psutil.Process(masters.procs[0].pid).memory_info().rss / MIB
                restarts.append({"ready_s": ready_s, "rss_at_ready_mib": rss_ready, "rss_after_3s_mib": rss_after})
                say(f"  restart to /readyz {ready_s:.2f} s, RSS {rss_ready:,.0f} -> {rss_after:,.0f} MiB")
            served = held()
            masters.stop()
            peak = max([running_rss, *(r["rss_after_3s_mib"] for r in restarts),
                        *(r["rss_at_ready_mib"] for r in restarts)])
            median_ready = statistics.median(r["ready_s"] for r in restarts)
            return {
                "spec": asdict(spec),
                "revision": revision,
                "first_start_s": first_ready,
                "fill": fill,
                "held_slots": granted,
                "held_after_restarts": served,
                "running_rss_mib": running_rss,
                "restarts": restarts,
                "restart_median_s": median_ready,
                "restart_max_s": max(r["ready_s"] for r in restarts),
                "rss_peak_mib": peak,
                "targets": {
                    "restart_s": {"target": TARGETS["restart_s"],
                                  "met": max(r["ready_s"] for r in restarts) <= TARGETS["restart_s"]},
                    "rss_mib": {"target": TARGETS["rss_mib"], "met": peak <= TARGETS["rss_mib"]},
                },
            }
    finally:
        if masters is not None:
            masters.stop()
        if not spec.keep:
            shutil.rmtree(workdir, ignore_errors=True)


# -- rendering --------------------------------------------------------------------------------------
def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:,.1f} ms"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def _met(t: dict | None) -> str:
    if t is None:
        return ""
    return "[green]met[/]" if t["met"] else "[red]not met[/]"


def machine_line(m: dict) -> str:
    return (f"{m['cpu']}, {m['logical_cpus']} logical CPUs ({m['physical_cores']} cores), "
            f"{m['ram_gib']} GiB RAM, {m['python']}, {m['platform']}")


def _resources_text(res: dict[str, Any]) -> str:
    return ",".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in res.items())


def render(console, machine: dict, r: dict) -> None:  # noqa: ANN001 - a rich Console
    from rich.table import Table
    from apportion.cli.tables import print_table

    sp, tg = r["spec"], r["targets"]
    console.print(f"[bold]machine[/]: {machine_line(machine)}", highlight=False)
    rev = r["revision"]
    console.print(f"[bold]revision[/]: {rev.get('commit') or 'unknown'}", highlight=False)
    mode = "SSE" if sp["events"] == "sse" else "long poll"
    console.print(f"[bold]load[/]: 1 master on {sp['db']}, {sp['agents']} light agents x {sp['slots_per_agent']} "
                  f"slots, {sp['clients']} clients in {sp['load_processes']} processes ({mode}), "
                  f"{sp['consumers']} consumers; rate {'as fast as possible' if sp['rate'] is None else sp['rate']}"
                  + (f"; each slot {_resources_text(sp['resources'])}" if sp.get("resources") else "")
                  + f"; {sp['seconds']:g} s" + (f"; master SIGKILLed {sp['kill']} times" if sp["kill"] else "")
                  + ("; failover" if sp["failover"] else "") + "; audit on, access log "
                  + ("on" if r.get("access_log", True) else "off (APPORTION_ACCESS_LOG=0)"), highlight=False)
    t = Table(title="apportion bench service")
    for col, j in (("measure", "left"), ("value", "right"), ("target", "right"), ("", "left")):
        t.add_column(col, justify=j)
    ra, gl = r["rate"], r["grant_latency"]
    t.add_row("released (full rounds) per s", f"{ra['released_per_s']:,.0f}", f"{tg['rate']['target']:,.0f}",
              _met(tg["rate"]))
    t.add_row("  created / granted per s", f"{ra['created_per_s']:,.0f} / {ra['granted_per_s']:,.0f}", "", "")
    t.add_row("  lowest 5 s window per s", f"{ra['lowest_5s_per_s']:,.0f}", "", "")
    t.add_row("request-to-grant p50", _ms(gl["p50_s"]), _ms(tg["p50_s"]["target"]), _met(tg["p50_s"]))
    t.add_row("request-to-grant p95", _ms(gl["p95_s"]), "", "")
    t.add_row("request-to-grant p99", _ms(gl["p99_s"]), _ms(tg["p99_s"]["target"]), _met(tg["p99_s"]))
    t.add_row("request-to-grant max", _ms(gl["max_s"]), "", "")
    t.add_row("create answered p50 / p99", f"{_ms(r['create_latency']['p50_s'])} / "
              f"{_ms(r['create_latency']['p99_s'])}", "", "")
    t.add_row("delete answered p50 / p99", f"{_ms(r['delete_latency']['p50_s'])} / "
              f"{_ms(r['delete_latency']['p99_s'])}", "", "")
    er = r["errors"]
    t.add_row("failures", f"{er['total']:,}", "0", "[green]ok[/]" if er["total"] == 0 else "[red]see JSON[/]")
    t.add_row("retried (connection, 503)", f"{r['retries']['total']:,}", "", "")
    cpu, w = r["cpu"], r["window_s"]
    t.add_row("CPU: master", f"{cpu['master_s'] / w:.2f} cores", "", "")
    per = r.get("master_cpu_per_round_ms")
    if per:
        t.add_row("  master CPU per round", f"{per:.2f} ms (one core: {1000 / per:,.0f} rounds/s)", "", "")
    t.add_row("CPU: load (clients)", f"{cpu['load_s'] / w:.2f} cores", "", "")
    t.add_row("CPU: agents", f"{cpu['agents_s'] / w:.2f} cores", "", "")
    t.add_row("CPU: everything else on the machine", f"{cpu['machine_others_s'] / w:.2f} cores", "", "")
    t.add_row("CPU: machine busy", f"{cpu['machine_busy_s'] / w:.2f} of {cpu['cores']} cores", "", "")
    t.add_row("master RSS peak (one master)", f"{r['master_rss_mib']['peak']:,.0f} MiB", "", "")
    for i, x in enumerate(r["restarts"]):
        t.add_row(f"kill {i + 1} at {x['at_s']:.1f} s", f"ready again in {x['restart_to_ready_s']:.2f} s", "", "")
        t.add_row("  a client granted again after", _s(x.get("clients_granted_again_s")), "", "")
    if r["failover"]:
        f = r["failover"]
        t.add_row("failover: standby serves after", f"{f['standby_serves_s']:.2f} s", "5.00 s", _met(tg["failover_s"]))
        t.add_row("  a client granted again after", _s(f.get("clients_granted_again_s")), "", "")
    ck = r["check"]
    ok = "[green]ok[/]"
    bad = "[red]FAILED[/]"
    t.add_row("store: slots granted twice", str(ck["slots_granted_twice"]), "0",
              ok if ck["slots_granted_twice"] == 0 else bad)
    t.add_row("store: allocations lost", str(ck["allocations_lost"]), "0", ok if ck["allocations_lost"] == 0 else bad)
    t.add_row("store: event gaps / duplicates / unstored",
              f"{ck['event_gaps']} / {ck['event_order']} / {ck['event_unstored']}", "0",
              ok if not (ck["event_gaps"] or ck["event_order"] or ck["event_unstored"]) else bad)
    t.add_row("store: checked", f"{ck['grants_replayed']:,} grants replayed, {ck['allocations_checked']:,} "
              f"allocations, {ck['events_checked']:,} events received", "", ok if ck["ok"] else bad)
    print_table(console, t)
    if r.get("workdir"):
        console.print(f"logs, store and the clients' records kept in {r['workdir']}", highlight=False)


def render_scale(console, machine: dict, r: dict) -> None:  # noqa: ANN001
    from rich.table import Table
    from apportion.cli.tables import print_table

    sp, tg = r["spec"], r["targets"]
    console.print(f"[bold]machine[/]: {machine_line(machine)}", highlight=False)
    console.print(f"[bold]store[/]: {sp['db']}, {sp['hosts']:,} hosts x {sp['slots_per_host']} slots, "
                  f"{sp['consumers']:,} consumers, {sp['allocations']:,} allocations "
                  f"(filled by the API in {r['fill']['fill_s']:.1f} s)", highlight=False)
    t = Table(title="apportion bench service --scale")
    for col, j in (("measure", "left"), ("value", "right"), ("target", "right"), ("", "left")):
        t.add_column(col, justify=j)
    t.add_row("restart to /readyz, median", f"{r['restart_median_s']:.2f} s", "", "")
    t.add_row("restart to /readyz, max", f"{r['restart_max_s']:.2f} s", f"{tg['restart_s']['target']:.2f} s",
              _met(tg["restart_s"]))
    t.add_row("master RSS, running (filled)", f"{r['running_rss_mib']:,.0f} MiB", "", "")
    for i, x in enumerate(r["restarts"]):
        t.add_row(f"  restart {i + 1}", f"{x['ready_s']:.2f} s, {x['rss_at_ready_mib']:,.0f} -> "
                  f"{x['rss_after_3s_mib']:,.0f} MiB", "", "")
    t.add_row("master RSS, peak", f"{r['rss_peak_mib']:,.0f} MiB", f"{tg['rss_mib']['target']:,.0f} MiB",
              _met(tg["rss_mib"]))
    t.add_row("slots held before / after restarts", f"{r['held_slots']:,} / {r['held_after_restarts']:,}", "",
              "[green]ok[/]" if r["held_slots"] == r["held_after_restarts"] else "[red]differs[/]")
    print_table(console, t)


__all__ = ["ScaleSpec", "ServiceBenchSpec", "render", "render_scale", "run", "run_scale"]
