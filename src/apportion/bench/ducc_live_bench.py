"""`apportion bench ducc-live`: DUCC's system test mega-15-min on the live master, end to end.

What runs, all on this machine and as a user meets it:

- a real master (``apportion server --plan``) on a fresh SQLite store in a temporary
  directory, with a DUCC plan of the trace's own class configuration
  (``ducc.classes`` beside the traces) and a 15 GB share quantum, the quantum the
  traces are written for (``jobs.prepare``: "136 15-G shares"; example 11 replays the
  same workload with it). The plan names no node: the machines are the agents;
- real agents (``apportion agent --count N --memory GB``, one process per memory
  size) with the memory sizes ``52.simulated.nodes`` gives, as apportion's importer
  reads it (29 of 31 GB, 20 of 47 GB and 4 of 79 GB: the file describes 53 nodes,
  "52 below and this one"); they start real processes;
- the workload's jobs, submitted through the HTTP API by the SDK
  (``Client.submit_job``) at the workload's submission times divided by ``scale``
  (100). Submission times, classes and memory are the importer's reading of
  ``jobs.prepare`` (spread over 920 s, class ``normal``, 28 or 37 GB drawn with its
  seed); each job's work items are its own ``elapsed`` times, one item each, divided by
  the file's ``compression`` (96) and then by ``scale``. Threads, users and
  ``machines`` (most processes) are the job file's;
- every job's processes are real Python processes running
  ``serve(lambda seconds: time.sleep(seconds))``, ``threads`` items at a time.

The bench waits (bounded, by state) until every job has ended and every process has
left its machine, stops everything it started, and checks the store the master wrote:
every job ``done``; every work item done exactly once (one ``job_items`` row per item
submitted, each ``done``, none failed, holding the time submitted); no machine above
its order (floor(memory / quantum)) at any cycle the master ran; and the master's
cycle times (``cycles.seconds``: the engine's schedule call): median (target 50 ms),
p90 and max.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from apportion.bench.engine_bench import percentile
from apportion.bench.machine import source_revision
from apportion.bench.service_bench import CLI, Masters, Proc, run_dir, wait_for_state

MIB = 1 << 20
QUANTUM = 15
TARGETS = {"cycle_median_s": 0.050}
NODES_FILE = "52.simulated.nodes"
CLASSES_FILE = "ducc.classes"
TAG_VAR = "APPORTION_BENCH_DUCC_LIVE"  # in the agents' environment, so in their processes': to find leftovers
WORKER = [sys.executable, "-c", "import time\nfrom apportion.client import serve\n"
          "serve(lambda seconds: time.sleep(seconds))"]


def default_traces() -> Path:
    """../shared/traces/ducc beside the repository (absent in a user's clone)."""
    import apportion

    return Path(apportion.__file__).resolve().parents[3] / "shared" / "traces" / "ducc"


@dataclass(frozen=True, slots=True)
class DuccLiveSpec:
    traces: str = ""  # the DUCC traces directory (ducc.classes, 52.simulated.nodes, mega-*); "": default_traces()
    workload: str = "mega-15-min"
    scale: float = 100.0  # times divided by this, on top of jobs.prepare's compression
    jobs: int | None = None  # the first N jobs in submission order; None: all
    max_items: int | None = None  # each job's first N items; None: all
    machines: int | None = None  # N machines, the memory sizes in the file's proportions; None: all
    heartbeat: float = 1.0  # the agents' heartbeat (the master's --heartbeat)
    tick: float = 1.0  # the master's --tick
    timeout: float = 900.0  # for every job to end, from the first submission
    keep: bool = False  # keep the work directory (logs, store)

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise ValueError("scale must be more than 0")
        for name in ("jobs", "max_items", "machines"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"{name} must be at least 1")
        if not self.heartbeat > 0 or not self.tick > 0 or not self.timeout > 0:
            raise ValueError("heartbeat, tick and timeout must be more than 0")

    @property
    def traces_dir(self) -> Path:
        return Path(self.traces) if self.traces else default_traces()


# -- the workload and the cluster, as the importers read them ---------------------------------------
@dataclass(frozen=True, slots=True)
class LiveJob:
    name: str
    submit_s: float  # after the bench's start of submissions (already divided by scale)
    user: str
    cls: str | None
    memory: float
    threads: int
    max_processes: int | None
    items: tuple[float, ...]  # seconds each item sleeps
    items_in_trace: int


def read_jobs(spec: DuccLiveSpec) -> tuple[list[LiveJob], dict[str, Any]]:
    from apportion.importers.ducc.workload import read_job_file, read_workload
    from apportion.plan import PlanError

    w = read_workload(spec.traces_dir / spec.workload)
    comp = w.prepare.compression
    chosen = w.jobs[: spec.jobs] if spec.jobs is not None else w.jobs
    out = []
    for tj in chosen:
        problems: list = []
        raw = read_job_file(Path(tj.file), problems)
        if raw is None:
            raise PlanError(problems)
        times = [round(ms / comp / 1000.0 / spec.scale, 6) for ms in raw.elapsed]
        kept = times[: spec.max_items] if spec.max_items is not None else times
        out.append(LiveJob(tj.name, tj.submit_s / spec.scale, tj.user, tj.cls, float(tj.memory), tj.threads,
                           tj.max_processes, tuple(kept), len(times)))
    info = {
        "directory": str(spec.traces_dir / spec.workload),
        "jobs_in_trace": len(w.jobs), "jobs": len(out),
        "items_of_these_jobs_in_trace": sum(j.items_in_trace for j in out),
        "items": sum(len(j.items) for j in out),
        "item_seconds": round(sum(sum(j.items) for j in out), 3),
        "users": sorted({j.user for j in out}),
        "classes": dict(Counter(j.cls or "(default)" for j in out)),
        "memory_gb": dict(Counter(f"{j.memory:g}" for j in out)),
        "threads": dict(Counter(str(j.threads) for j in out)),
        "submission_span_s": round(max((j.submit_s for j in out), default=0.0), 3),
        "compression": comp, "scale": spec.scale, "full": spec.jobs is None and spec.max_items is None,
    }
    return out, info


def read_cluster(spec: DuccLiveSpec) -> dict[float, int]:
    """Memory (GB) -> how many machines of it: the simulated cluster, or ``machines`` of it
    in the same proportions (each size at least once while there are enough)."""
    from apportion.importers.ducc.nodes import read_node_file
    from apportion.plan import PlanError

    problems: list = []
    nodes = read_node_file(spec.traces_dir / NODES_FILE, problems)
    if problems:
        raise PlanError(problems)
    sizes = Counter(float(h.memory) for h in nodes.hosts if h.memory is not None)
    total = sum(sizes.values())
    if spec.machines is None or spec.machines >= total:
        return dict(sorted(sizes.items()))
    n = spec.machines
    keys = sorted(sizes)
    # largest remainder, at least one of each size while n allows (small clusters keep the big machines)
    base = {k: (1 if n >= len(keys) else 0) for k in keys}
    left = n - sum(base.values())
    want = {k: sizes[k] / total * left for k in keys}
    for k in keys:
        base[k] += int(want[k])
    rest = n - sum(base.values())
    for k in sorted(keys, key=lambda k: (-(want[k] - int(want[k])), -k))[:rest]:
        base[k] += 1
    if n < len(keys):
        base = {k: 0 for k in keys}
        for k in sorted(keys, reverse=True)[:n]:
            base[k] = 1
    return {k: v for k, v in sorted(base.items()) if v}


def plan_text(spec: DuccLiveSpec) -> str:
    classes = (spec.traces_dir / CLASSES_FILE).resolve()
    return (f"ducc:\n  classes: {classes}\n  properties: {{ducc.rm.share.quantum: {QUANTUM}}}\n"
            "  accounts: {'*': nobody}\n")  # the workload's users have no OS accounts here


# -- the store's view, and its checks ---------------------------------------------------------------
def check_store(db: str, expected: dict[int, tuple[float, ...]], quantum: int) -> dict[str, Any]:
    """Read the SQLite store the master wrote; ``expected``: job id -> the item times submitted."""
    from sqlalchemy import create_engine, text

    eng = create_engine(db)
    try:
        with eng.connect() as c:
            jobs = {r[0]: (r[1], r[2], r[3]) for r in c.execute(
                text("SELECT id, kind, state, reason FROM jobs"))}
            items = list(c.execute(text("SELECT job, idx, state, attempts, share, item FROM job_items")))
            shares = list(c.execute(text('SELECT id, job, host, "order", cycle, gone_cycle, evicted, activity '
                                         "FROM shares")))
            cycles = list(c.execute(text("SELECT id, seconds FROM cycles ORDER BY id")))
            hosts = {r[0]: r[1] for r in c.execute(text("SELECT name, memory FROM hosts"))}
            acts = list(c.execute(text("SELECT state, exit_code, signal FROM activities WHERE job IS NOT NULL")))
    finally:
        eng.dispose()

    import json as _json

    # jobs
    states = Counter(jobs[j][1] if j in jobs else "missing" for j in expected)
    not_done = {j: (jobs[j][1], jobs[j][2]) if j in jobs else ("missing", "") for j in expected
                if j not in jobs or jobs[j][1] != "done"}
    # items: one row per item submitted, each done once (the store keeps one row per (job, idx))
    by_job: dict[int, list[tuple]] = {}
    for r in items:
        by_job.setdefault(r[0], []).append(r)
    item_states: Counter[str] = Counter(r[2] for r in items)
    wrong_rows = []
    for jid, times in expected.items():
        rows = sorted(by_job.get(jid, []), key=lambda r: r[1])
        if [r[1] for r in rows] != list(range(len(times))):
            wrong_rows.append(f"job {jid}: {len(rows)} item rows for {len(times)} items")
            continue
        for r in rows:
            data = _json.loads(r[5]) if isinstance(r[5], str) else r[5]
            if r[2] != "done" or r[4] is None:
                wrong_rows.append(f"job {jid} item {r[1]}: {r[2]} (share {r[4]})")
            elif data != times[r[1]]:  # items are stored as JSON text: exactly what was submitted
                wrong_rows.append(f"job {jid} item {r[1]}: holds {data!r}, submitted {times[r[1]]!r}")
    retried = sum(1 for r in items if r[3] > 1)
    # no machine above its order at any cycle: shares with cycle <= c < gone_cycle
    order = {h: int(math.floor(mem / quantum)) for h, mem in hosts.items()}
    per_host: dict[str, list[tuple[int, int | None, int]]] = {}
    for s in shares:
        per_host.setdefault(s[2], []).append((s[4], s[5], s[3]))
    cycle_ids = [c_[0] for c_ in cycles]
    over: list[dict[str, Any]] = []
    peak_used: dict[str, int] = {}
    for host, spans in per_host.items():
        deltas: Counter[int] = Counter()
        for start, gone, o in spans:
            deltas[start] += o
            if gone is not None:
                deltas[gone] -= o
        points = sorted(deltas)
        used, k = 0, 0
        top = 0
        for cid in cycle_ids:
            while k < len(points) and points[k] <= cid:
                used += deltas[points[k]]
                k += 1
            top = max(top, used)
            if used > order.get(host, 0):
                over.append({"cycle": cid, "host": host, "used": used, "order": order.get(host, 0)})
        peak_used[host] = top
    unknown_hosts = sorted(set(per_host) - set(order))
    secs = [c_[1] for c_ in cycles]
    evictions = Counter(s[6] for s in shares if s[6] is not None)
    return {
        "jobs": {"submitted": len(expected), "states": dict(states), "not_done": {str(k): v for k, v in
                                                                                 list(not_done.items())[:20]}},
        "items": {"expected": sum(len(t) for t in expected.values()), "rows": len(items),
                  "states": dict(item_states), "wrong": len(wrong_rows), "wrong_samples": wrong_rows[:10],
                  "attempts_above_one": retried},
        "shares": len(shares),
        "processes_started": sum(1 for s in shares if s[7] is not None),
        "process_ends": dict(Counter(a[0] for a in acts)),
        "evictions": sum(evictions.values()),
        "evictions_by_reason": dict(evictions),
        "machines": {"count": len(hosts), "capacity_quanta": sum(order.values()),
                     "peak_quanta_used": sum(peak_used.values())},
        "over_order": len(over), "over_order_samples": over[:10], "shares_on_unknown_hosts": unknown_hosts,
        "cycles": {"count": len(secs), "median_s": statistics.median(secs) if secs else None,
                   "p90_s": percentile(secs, 90) if secs else None, "max_s": max(secs) if secs else None,
                   "mean_s": statistics.fmean(secs) if secs else None},
    }


# -- the run ----------------------------------------------------------------------------------------
class _Sampler(threading.Thread):
    """The master's resident memory, sampled every half second (its peak is what is reported)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.sample()
            self.halt.wait(0.5)

    def sample(self) -> None:
        with contextlib.suppress(Exception):
            self.peak = max(self.peak, self.proc.memory_info().rss)


def _cpu_s(pid: int) -> float | None:
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except psutil.Error:
        return None


def _reap(tag: str) -> int:
    """Kill the job processes the agents of this run left behind (they run in their own
    sessions, so stopping an agent leaves them): those whose environment holds this run's tag."""
    import psutil

    n = 0
    for p in psutil.process_iter(["pid"]):
        try:
            if p.pid != os.getpid() and p.environ().get(TAG_VAR) == tag:
                p.kill()
                n += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return n


def _submit(url: str, token: str, jobs: list[LiveJob]) -> tuple[dict[int, LiveJob], list[float], float, float]:
    """Each job submitted by the SDK at its time after the first (on a pool of threads, so
    that a slow submission of a big job does not hold back the next ones): -> ids, how late
    each submission was sent, the moment of the first (monotonic), seconds from it to the
    last answer."""
    from concurrent.futures import ThreadPoolExecutor

    from apportion.client import Client

    local = threading.local()
    clients: list[Any] = []
    lock = threading.Lock()
    t0 = time.monotonic() + 0.2

    def one(j: LiveJob) -> tuple[int, float]:
        c = getattr(local, "client", None)
        if c is None:
            c = local.client = Client(url, token=token, timeout=120)
            with lock:
                clients.append(c)
        wait = t0 + j.submit_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # the workload's own pace of submission
        got = c.submit_job(list(j.items), WORKER, memory=j.memory, cls=j.cls, max_processes=j.max_processes,
                           threads=j.threads, user=j.user)
        return got["id"], max(0.0, -wait)

    try:
        with ThreadPoolExecutor(max_workers=min(16, max(1, len(jobs)))) as pool:
            answers = list(pool.map(one, jobs))
    finally:
        for c in clients:
            c.close()
    return ({jid: j for (jid, _), j in zip(answers, jobs, strict=True)}, [lt for _, lt in answers], t0,
            time.monotonic() - t0)


def run(spec: DuccLiveSpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The whole figure; every process it starts is stopped before it returns."""
    import psutil

    from apportion.client import Client

    say = progress or (lambda _m: None)
    t_start = time.monotonic()
    revision = source_revision(whole=True)
    jobs, workload = read_jobs(spec)
    cluster = read_cluster(spec)
    workdir = run_dir("apportion-bench-ducc-live-")
    tag = uuid.uuid4().hex
    agents: list[Proc] = []
    masters: Masters | None = None
    keep = spec.keep
    left_behind = 0
    try:
        db = f"sqlite:///{workdir / 'apportion.db'}"
        plan = workdir / "plan.yaml"
        plan.write_text(plan_text(spec))
        masters = Masters(workdir, db, plan, extra=["--tick", f"{spec.tick:g}", "--heartbeat", f"{spec.heartbeat:g}",
                                                     "--kill-grace", "2", "--log-level", "warning"])
        masters.start(0)
        url, token = masters.urls[0], masters.token
        mpid = masters.procs[0].pid
        say(f"master on {url} (SQLite in {workdir})")
        n_machines = sum(cluster.values())
        for gb, n in cluster.items():
            name = f"m{gb:g}"
            args = [*CLI, "agent", "--master", url, "--name", name, "--memory", f"{gb:g}", "--count", str(n),
                    "--workdir", str(workdir / name), "--log-level", "WARNING"]
            p = Proc(args, workdir / f"agents-{name}.log", env={"APPORTION_TOKEN": token, TAG_VAR: tag})
            p.start()
            agents.append(p)
        with Client(url, token=token, timeout=60) as client:
            wait_for_state(lambda: sum(1 for h in client.hosts() if h["state"] == "ok") >= n_machines
                           or any(not a.alive for a in agents), 120, f"{n_machines} machines reported", every=0.2)
            dead = [a for a in agents if not a.alive]
            if dead:
                raise RuntimeError(f"an agent process exited:\n{dead[0].tail()}")
            setup_s = time.monotonic() - t_start
            say(f"{n_machines} machines ({', '.join(f'{n} x {gb:g} GB' for gb, n in cluster.items())}) in "
                f"{len(agents)} agent processes; submitting {len(jobs)} jobs, {workload['items']:,} items over "
                f"{workload['submission_span_s']:g} s")
            sampler = _Sampler(mpid)
            sampler.start()
            cpu0, cpu_t0 = psutil.cpu_times(), time.monotonic()
            master_cpu0 = _cpu_s(mpid) or 0.0
            ids, late, t0, submitted_s = _submit(url, token, jobs)
            total_items = workload["items"]
            last_say = [time.monotonic()]
            end_state: dict[str, Any] = {}

            def all_ended() -> bool:
                listed = [x for x in client.jobs() if x["id"] in ids]
                done = sum(x["items"]["done"] for x in listed)
                ended = [x for x in listed if x["state"] in ("done", "failed", "cancelled")]
                if time.monotonic() - last_say[0] >= 10:
                    last_say[0] = time.monotonic()
                    running = sum(sum(x["processes"].values()) for x in listed)
                    say(f"  {time.monotonic() - t0:5.0f} s: {len(ended)}/{len(ids)} jobs ended, "
                        f"{done:,}/{total_items:,} items done, {running} processes")
                if len(ended) == len(ids):
                    end_state["ended_at"] = max(x["ended_at"] for x in listed)
                    end_state["submitted_at"] = min(x["submitted_at"] for x in listed)
                    return True
                return False

            ended_in_time = True
            try:
                wait_for_state(all_ended, max(1.0, spec.timeout - (time.monotonic() - t0)), "every job to end",
                               every=0.25)
            except RuntimeError as e:
                ended_in_time = False
                say(str(e))
            run_s = time.monotonic() - t0
            # the processes leave their machines by themselves once their job has no more work
            drained = True
            try:
                wait_for_state(lambda: all(not m["shares"] for m in client.occupancy()), 60,
                               "every process gone from its machine", every=0.25)
            except RuntimeError:
                drained = False
            cpu1, cpu_t1 = psutil.cpu_times(), time.monotonic()
            master_cpu = (_cpu_s(mpid) or master_cpu0) - master_cpu0
            sampler.halt.set()
            sampler.sample()
            say("stopping the agents and the master; checking the store")
        for a in agents:
            a.stop(grace=5.0)
        masters.stop()
        left_behind = _reap(tag)
        expected = {jid: j.items for jid, j in ids.items()}
        store = check_store(db, expected, QUANTUM)
        busy = (sum(cpu1) - sum(cpu0)) - ((cpu1.idle - cpu0.idle) + (getattr(cpu1, "iowait", 0.0)
                                                                     - getattr(cpu0, "iowait", 0.0)))
        cyc = store["cycles"]
        checks = {
            "every_job_done": ended_in_time and store["jobs"]["states"] == {"done": len(ids)},
            "every_item_done_once": store["items"]["wrong"] == 0 and store["items"]["rows"] == total_items
            and store["items"]["states"] == {"done": total_items},
            "never_above_order": store["over_order"] == 0 and not store["shares_on_unknown_hosts"],
            "cycle_median": {"target": TARGETS["cycle_median_s"], "measured": cyc["median_s"],
                             "met": cyc["median_s"] is not None and cyc["median_s"] <= TARGETS["cycle_median_s"]},
        }
        ok = checks["every_job_done"] and checks["every_item_done_once"] and checks["never_above_order"]
        keep = keep or not ok
        span = (end_state["ended_at"] - end_state["submitted_at"]) if end_state else None
        return {
            "spec": {**asdict(spec), "traces": str(spec.traces_dir)},
            "revision": revision,
            "workload": workload,
            "cluster": {"machines": n_machines, "by_memory_gb": {f"{gb:g}": n for gb, n in cluster.items()},
                        "quantum_gb": QUANTUM, "capacity_quanta": store["machines"]["capacity_quanta"],
                        "agent_processes": len(agents)},
            "settings": {"heartbeat_s": spec.heartbeat, "tick_s": spec.tick, "kill_grace_s": 2.0,
                         "plan": plan_text(spec)},
            "setup_s": setup_s,
            "submitting_s": submitted_s,
            "submission_late_s": {"max": max(late, default=0.0),
                                  "median": statistics.median(late) if late else 0.0},
            "run_s": run_s,
            "first_submit_to_last_end_s": span,
            "wall_s": time.monotonic() - t_start,
            "ended_in_time": ended_in_time,
            "drained": drained,
            "jobs": len(ids),
            "items": total_items,
            "store": store,
            "processes_started": store["processes_started"],
            "evictions": store["evictions"],
            "cycles": cyc,
            "master": {"peak_rss_mib": sampler.peak / MIB, "cpu_s": master_cpu},
            "machine_cpu_busy_s": busy,
            "machine_cpu_window_s": cpu_t1 - cpu_t0,
            "cores": os.cpu_count(),
            "processes_left_behind": left_behind,
            "checks": checks,
            "ok": ok,
            "workdir": str(workdir) if keep else None,
        }
    finally:
        for a in agents:
            a.stop(grace=3.0)
        if masters is not None:
            masters.stop()
        _reap(tag)
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


# -- rendering --------------------------------------------------------------------------------------
def machine_line(m: dict) -> str:
    return (f"{m['cpu']}, {m['logical_cpus']} logical CPUs ({m['physical_cores']} cores), "
            f"{m['ram_gib']} GiB RAM, {m['python']}, {m['platform']}")


def render(console, machine: dict, r: dict) -> None:  # noqa: ANN001 - a rich Console
    from rich.table import Table
    from apportion.cli.tables import print_table

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x * 1000:,.1f} ms"

    def s(x: float | None) -> str:
        return "-" if x is None else f"{x:,.1f} s"

    ok, bad = "[green]ok[/]", "[red]FAILED[/]"
    wl, cl, st, ck = r["workload"], r["cluster"], r["store"], r["checks"]
    console.print(f"[bold]machine[/]: {machine_line(machine)}", highlight=False)
    rev = r["revision"]
    console.print("[bold]revision[/]: " + (f"commit {rev['commit']}" + (" with local edits"
                                                                        if rev.get("source_dirty") else "")
                                           if rev.get("commit") else "unknown"), highlight=False)
    what = "the full workload" if wl["full"] else "a reduced workload"
    console.print(f"[bold]workload[/]: {wl['directory']} ({what}): {wl['jobs']} of {wl['jobs_in_trace']} jobs, "
                  f"{wl['items']:,} items ({wl['item_seconds']:,.0f} item-seconds), users "
                  f"{', '.join(wl['users'])}; submitted over {wl['submission_span_s']:g} s; times / "
                  f"{wl['compression']:g} (jobs.prepare) / {wl['scale']:g}", highlight=False)
    console.print(f"[bold]cluster[/]: {cl['machines']} agents (" + ", ".join(
        f"{n} x {gb} GB" for gb, n in cl["by_memory_gb"].items()) + f") in {cl['agent_processes']} agent "
                  f"processes, quantum {cl['quantum_gb']} GB, {cl['capacity_quanta']} quanta; heartbeat "
                  f"{r['settings']['heartbeat_s']:g} s, tick {r['settings']['tick_s']:g} s", highlight=False)
    t = Table(title="apportion bench ducc-live")
    for col, j in (("measure", "left"), ("value", "right"), ("target", "right"), ("", "left")):
        t.add_column(col, justify=j)
    t.add_row("wall time (start to every job ended, checks done)", s(r["wall_s"]), "", "")
    t.add_row("  setup (master and agents up)", s(r["setup_s"]), "", "")
    t.add_row("  first submission to every job ended", s(r["run_s"]), "", "ok" if r["ended_in_time"] else bad)
    lt = r["submission_late_s"]
    t.add_row("  submissions sent late, median / max", f"{lt['median']:.2f} s / {lt['max']:.2f} s", "", "")
    t.add_row("jobs done", f"{st['jobs']['states'].get('done', 0)} / {r['jobs']}", str(r["jobs"]),
              ok if ck["every_job_done"] else bad)
    it = st["items"]
    t.add_row("items done once", f"{it['states'].get('done', 0):,} / {r['items']:,}", f"{r['items']:,}",
              ok if ck["every_item_done_once"] else bad)
    t.add_row("  items failed / rows wrong", f"{it['states'].get('failed', 0)} / {it['wrong']}", "0", "")
    t.add_row("processes started", f"{r['processes_started']:,}", "", "")
    t.add_row("evictions", f"{r['evictions']:,}" + (" (" + ", ".join(
        f"{k} {v}" for k, v in st["evictions_by_reason"].items()) + ")" if st["evictions_by_reason"] else ""),
              "", "")
    t.add_row("(cycle, machine) above its order", str(st["over_order"]), "0",
              ok if ck["never_above_order"] else bad)
    c = r["cycles"]
    t.add_row(f"master cycle, median of {c['count']:,}", ms(c["median_s"]), ms(ck["cycle_median"]["target"]),
              "[green]met[/]" if ck["cycle_median"]["met"] else "[red]not met[/]")
    t.add_row("  p90 / max", f"{ms(c['p90_s'])} / {ms(c['max_s'])}", "", "")
    t.add_row("master peak RSS / CPU", f"{r['master']['peak_rss_mib']:,.0f} MiB / {s(r['master']['cpu_s'])}",
              "", "")
    t.add_row("machine CPU busy over the run", f"{r['machine_cpu_busy_s'] / max(r['machine_cpu_window_s'], 1e-9):.2f} of "
              f"{r['cores']} cores", "", "")
    print_table(console, t)
    if r.get("workdir"):
        console.print(f"logs and the store kept in {r['workdir']}", highlight=False)


__all__ = ["DuccLiveSpec", "check_store", "read_cluster", "read_jobs", "render", "run"]
