"""`apportion bench dask`: an ApportionCluster on a live master, end to end.

A real master on an SQLite file and real agents (``apportion agent``, each its own
process, 8 x 4 slots by default) on this machine. This process runs the Dask scheduler
(``ApportionCluster``) and Dask's client, and submits a workload of short tasks
before turning adaptive scaling on.

Figures:

1. **Scale-up**: from ``adapt(minimum=0, maximum=32)`` until 32 workers are connected to
   the scheduler, with the times the master granted the slots, the agents ran the
   processes, and the first / half / all workers connected; and the CPU each worker
   process had used by then (what starting a worker costs, under the contention of 32
   starting at once).
2. **Reclaim**: a second consumer with a larger share asks for 16 slots; /dask's grace is
   10 s. From that request until the rival holds its 16 slots, with when the cluster heard
   of the reclaim and released the slots; and the /dask workers stopped by force (a
   signal from the master at the deadline, or from the cluster: the target is 0).
3. The workload's results are checked (every task's value), so the figures are those of
   a computation that went through both without loss.

``worker_starts`` (``--worker-start``) measures what starting a worker costs, without
the master: N processes of each way to start one, all at once against a scheduler in
this process, until all are connected; the CPU each used by then, and what N idle
workers cost afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TARGETS = {"scale_up_s": 10.0, "forced": 0}
CLI = [sys.executable, "-m", "apportion.cli"]


def slow_square(i: int, seconds: float) -> int:
    """The workload's task (run on the workers, which import it from here)."""
    time.sleep(seconds)
    return i * i


@dataclass(frozen=True, slots=True)
class DaskBenchSpec:
    agents: int = 8
    slots_per_agent: int = 4
    workers: int = 32  # adapt(maximum=...)
    reclaim: int = 16  # slots the rival asks for (it gets them all: its share is larger)
    grace: float = 10.0  # /dask's grace period
    tasks: int = 1280
    task_seconds: float = 0.25
    heartbeat: float = 1.0  # the master's agent heartbeat
    keep: bool = False

    def __post_init__(self) -> None:
        for name in ("agents", "slots_per_agent", "workers", "tasks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more")
        if self.workers > self.agents * self.slots_per_agent:
            raise ValueError(f"workers ({self.workers}) must fit on agents x slots "
                             f"({self.agents * self.slots_per_agent})")
        if not 0 < self.reclaim <= self.workers:
            raise ValueError("reclaim must be between 1 and workers")
        if self.grace <= 0 or self.task_seconds < 0:
            raise ValueError("grace must be more than 0 and task_seconds 0 or more")


def plan_text(spec: DaskBenchSpec) -> str:
    return ("hosts: []\nresource_groups:\n  - {name: Bench, select: select(slots > 0)}\nconsumers:\n"
            f"  - {{path: /dask, share_ratio: 1, grace: {spec.grace:g}}}\n"
            "  - {path: /rival, share_ratio: 3, grace: 30}\n")


class Clock:
    """Wall times of a run as seconds from its start."""

    def __init__(self) -> None:
        self.t0 = time.time()

    def since(self, t: float | None) -> float | None:
        return None if t is None else round(t - self.t0, 3)


def _first_reaching(points: list[tuple[float, int]], n: int) -> float | None:
    total = 0
    for at, k in sorted(points):
        total += k
        if total >= n:
            return at
    return None


def run(spec: DaskBenchSpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The whole measurement; every process it starts is stopped before it returns."""
    import httpx
    import psutil
    from distributed import Client

    from apportion.bench.machine import source_revision
    from apportion.bench.service_bench import Masters, Proc, run_dir, wait_for_state
    from apportion.dask import ApportionCluster

    say = progress or (lambda _m: None)
    for name in ("distributed", "apportion.dask"):
        logging.getLogger(name).setLevel(logging.WARNING)
    workdir = run_dir("apportion-bench-dask-")
    revision = source_revision(whole=True)
    agents: list[Proc] = []
    masters: Masters | None = None
    pids: set[int] = set()
    try:
        plan = workdir / "plan.yaml"
        plan.write_text(plan_text(spec))
        masters = Masters(workdir, f"sqlite:///{workdir / 'apportion.db'}", plan,
                          extra=["--heartbeat", str(spec.heartbeat)])
        masters.start(0)
        url, token = masters.urls[0], masters.token
        for i in range(spec.agents):
            p = Proc([*CLI, "agent", "--master", url, "--name", f"h{i}", "--slots", str(spec.slots_per_agent),
                      "--workdir", str(workdir / f"h{i}"), "--log-level", "WARNING"], workdir / f"h{i}.log",
                     env={"APPORTION_TOKEN": token})
            p.start()
            agents.append(p)
        api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        stack = contextlib.ExitStack()
        stack.callback(api.close)
        with stack:
            wait_for_state(lambda: sum(h["state"] == "ok" for h in api.get("/v1/hosts").json()["hosts"])
                           == spec.agents, 60, f"{spec.agents} agents up")
            say(f"master on {url} (SQLite), {spec.agents} agents x {spec.slots_per_agent} slots")
            with ApportionCluster("/dask", "Bench", master=url, token=token) as cluster, \
                    Client(cluster) as client:
                try:
                    result = _measure(spec, cluster, client, api, psutil, wait_for_state, say)
                finally:
                    _all_ended(api, cluster.allocation_id, pids)
            result["close_ended_all"] = all(a["state"] not in ("starting", "running") for a in
                                            wait_for_state(lambda: _all_ended(api, cluster.allocation_id, pids), 30,
                                                           "every worker gone after close()"))
    finally:
        for pid in pids:  # a run cut short leaves no worker behind (agents leave their processes running)
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.environ().get("APPORTION_ACTIVITY") and "apportion.dask.worker" in proc.cmdline():
                    proc.kill()
        for p in agents:
            p.stop(grace=3.0)
        if masters is not None:
            masters.stop()
        if not spec.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result.update(spec=asdict(spec), revision=revision, workdir=str(workdir) if spec.keep else None)
    return result


def _all_ended(api: Any, aid: int, pids: set[int]) -> list[dict[str, Any]] | None:
    acts = api.get("/v1/activities", params={"allocation": aid}).json()["activities"]
    pids.update(a["pid"] for a in acts if a.get("pid"))
    return acts if all(a["state"] not in ("starting", "running") for a in acts) else None


def _measure(spec: DaskBenchSpec, cluster: Any, client: Any, api: Any, psutil: Any, wait_for_state: Any,
             say: Callable[[str], None]) -> dict[str, Any]:
    aid, cid = cluster.allocation_id, cluster.client_id
    scheduler = cluster.scheduler
    futures = client.map(slow_square, range(spec.tasks), seconds=spec.task_seconds, pure=False)
    wait_for_state(lambda: len(scheduler.tasks) >= spec.tasks, 30, "the workload at the scheduler")

    # 1. scale-up: adapt under the workload until every worker is connected
    say(f"adapt(minimum=0, maximum={spec.workers}) with {spec.tasks} tasks of {spec.task_seconds:g} s waiting")
    clock = Clock()
    cluster.adapt(minimum=0, maximum=spec.workers)
    connected: list[float] = []  # when the scheduler first saw 1, 2, ... workers
    end = time.monotonic() + 120
    while len(connected) < spec.workers and time.monotonic() < end:
        n = len(scheduler.workers)
        while len(connected) < n:
            connected.append(time.time())
        time.sleep(0.01)
    scaled = len(connected) >= spec.workers
    acts = api.get("/v1/activities", params={"allocation": aid}).json()["activities"]
    cpu = []
    for a in acts:
        with contextlib.suppress(psutil.Error, TypeError):
            t = psutil.Process(a["pid"]).cpu_times()
            cpu.append(t.user + t.system)
    events = api.get(f"/v1/clients/{cid}/events", params={"after": 0, "wait": 0}).json()["events"]
    granted = [(e["at"], e["slots"]) for e in events if e["type"] == "granted"]
    running = [(e["at"], 1) for e in events if e["type"] == "activity" and e["state"] == "running"]
    up = {
        "workers": len(connected),
        "scale_up_s": clock.since(connected[spec.workers - 1]) if scaled else None,
        "granted_all_s": clock.since(_first_reaching(granted, spec.workers)),
        "first_worker_s": clock.since(connected[0]) if connected else None,
        "half_workers_s": clock.since(connected[spec.workers // 2 - 1]) if len(connected) >= spec.workers // 2
        and spec.workers >= 2 else None,
        "processes_running_s": clock.since(_first_reaching(running, spec.workers)),
        "worker_cpu_mean_s": round(sum(cpu) / len(cpu), 3) if cpu else None,
        "worker_cpu_max_s": round(max(cpu), 3) if cpu else None,
        "workers_measured": len(cpu),
    }
    say(f"{len(connected)} workers connected in {up['scale_up_s']} s")

    # 2. reclaim: a rival with a larger share asks for half of the slots
    done_before = sum(f.done() for f in futures)
    clock2 = Clock()
    rival = api.post("/v1/clients", json={"name": "rival", "consumer": "/rival"}).json()["id"]
    rid = api.post("/v1/allocations", json={"client": rival, "consumer": "/rival", "max": spec.reclaim}).json()["id"]
    wait_for_state(lambda: api.get(f"/v1/allocations/{rid}").json()["held"] == spec.reclaim, spec.grace + 60,
                   f"the rival granted {spec.reclaim} slots", every=0.02)
    complete = time.time()
    say(f"the rival holds its {spec.reclaim} slots after {complete - clock2.t0:.2f} s")
    results = client.gather(futures)
    right = results == [i * i for i in range(spec.tasks)]
    workload_end = time.time()
    acts = api.get("/v1/activities", params={"allocation": aid}).json()["activities"]
    forced = [a["id"] for a in acts if a["state"] == "killed" or a["signal"] is not None or a["stop_reason"]]
    events = api.get(f"/v1/clients/{cid}/events", params={"after": 0, "wait": 0}).json()["events"]
    reclaims = [e for e in events if e["type"] == "reclaim"]
    removed = [e for e in events if e["type"] == "removed"]
    recs = cluster.reclaims
    reclaim = {
        "asked": spec.reclaim,
        "complete_s": clock2.since(complete),
        "reclaim_events": len(reclaims),
        "reclaimed_slots": sum(e["slots"] for e in reclaims),
        "first_reclaim_s": clock2.since(min((e["at"] for e in reclaims), default=None)),
        "heard_s": clock2.since(min((r.received_at for r in recs), default=None)),
        "released_s": clock2.since(max((r.released_at or 0 for r in recs), default=None)) if recs else None,
        "released_in_time": bool(recs) and all(r.in_time for r in recs),
        "min_margin_s": round(min(r.deadline - (r.released_at or r.deadline) for r in recs), 3) if recs else None,
        "workers_retired": sum(len(r.workers) for r in recs),
        "forced": len(forced),
        "removed_events": len(removed),
        "workers_after": len(scheduler.workers),
    }
    workload = {"tasks": spec.tasks, "task_seconds": spec.task_seconds, "right": right,
                "done_before_reclaim": done_before, "ended_s": clock.since(workload_end)}
    targets = {
        "scale_up_s": {"target": TARGETS["scale_up_s"], "value": up["scale_up_s"],
                       "met": up["scale_up_s"] is not None and up["scale_up_s"] <= TARGETS["scale_up_s"]},
        "forced": {"target": TARGETS["forced"], "value": len(forced), "met": len(forced) <= TARGETS["forced"]},
    }
    return {"scale_up": up, "reclaim": reclaim, "workload": workload, "targets": targets,
            "ok": right and scaled}


WORKER_KINDS: dict[str, tuple[list[str], bool]] = {
    # name: (argv after the interpreter, ADDR and NAME filled in; whether LEAN_WORKER_ENV is set)
    "dask worker (nanny)": (["-m", "distributed.cli.dask_worker", "ADDR", "--nthreads", "1", "--no-dashboard",
                             "--name", "NAME"], False),
    "dask worker --no-nanny": (["-m", "distributed.cli.dask_worker", "ADDR", "--nthreads", "1", "--no-dashboard",
                                "--no-nanny", "--name", "NAME"], False),
    "python -m apportion.dask.worker": (["-m", "apportion.dask.worker", "ADDR", "--name-prefix", "NAME"], True),
}


def worker_starts(n: int = 32, idle_s: float = 3.0, progress: Callable[[str], None] | None = None
                  ) -> dict[str, Any]:
    """Start ``n`` workers of each kind at once; -> per kind: seconds until all connected,
    CPU seconds per worker process tree by then, and the idle CPU of the ``n`` (% of a core)."""
    import asyncio
    import os
    import subprocess

    import psutil
    from distributed import Scheduler

    from apportion.bench.machine import source_revision
    from apportion.dask.cluster import LEAN_WORKER_ENV

    say = progress or (lambda _m: None)
    logging.getLogger("distributed").setLevel(logging.ERROR)

    def tree_cpu(procs: list[subprocess.Popen[bytes]]) -> list[float]:
        out = []
        for p in procs:
            with contextlib.suppress(psutil.Error):
                top = psutil.Process(p.pid)
                out.append(sum(sum(q.cpu_times()[:2]) for q in [top, *top.children(recursive=True)]))
        return out

    async def one(kind: str, argv: list[str], lean: bool) -> dict[str, Any]:
        env = {**os.environ, **(LEAN_WORKER_ENV if lean else {})}
        async with Scheduler(host="127.0.0.1", port=0, dashboard=False, dashboard_address="127.0.0.1:0") as s:
            scratch = Path(tempfile.mkdtemp(prefix="apportion-bench-worker-"))
            started = time.monotonic()
            procs = [subprocess.Popen([sys.executable, *[a.replace("ADDR", s.address).replace("NAME", f"w{i}")
                                                         for a in argv]], env=env, cwd=scratch,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                     for i in range(n)]
            try:
                while len(s.workers) < n and time.monotonic() - started < 120:
                    await asyncio.sleep(0.01)
                connected = len(s.workers)
                all_s = time.monotonic() - started
                cpu = tree_cpu(procs)
                await asyncio.sleep(idle_s)
                idle = (sum(tree_cpu(procs)) - sum(cpu)) / idle_s
                await s.retire_workers(close_workers=True, remove=True)
                for p in procs:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        await asyncio.to_thread(p.wait, 20)
            finally:
                for p in procs:
                    if p.poll() is None:
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(p.pid, 9)
                shutil.rmtree(scratch, ignore_errors=True)
        return {"kind": kind, "workers": connected, "all_connected_s": round(all_s, 3) if connected == n else None,
                "cpu_per_worker_s": round(sum(cpu) / len(cpu), 3) if cpu else None,
                "idle_cpu_percent": round(100 * idle, 1)}

    rows = []
    for kind, (argv, lean) in WORKER_KINDS.items():
        say(f"{n} x {kind}")
        rows.append(asyncio.run(one(kind, argv, lean)))
    return {"workers": n, "idle_s": idle_s, "kinds": rows, "revision": source_revision(whole=True)}


def render_worker_starts(console: Any, machine: dict, r: dict) -> None:
    from rich.table import Table
    from apportion.cli.tables import print_table

    from apportion.bench.service_bench import machine_line

    console.print(f"[bold]machine[/]: {machine_line(machine)}", highlight=False)
    console.print(f"[bold]revision[/]: {r['revision'].get('commit') or 'unknown'}", highlight=False)
    t = Table(title=f"apportion bench dask --worker-start: {r['workers']} workers started at once")
    for col in ("worker", "all connected", "CPU per worker", f"{r['workers']} idle workers"):
        t.add_column(col, justify="left" if col == "worker" else "right")
    for k in r["kinds"]:
        t.add_row(k["kind"], "-" if k["all_connected_s"] is None else f"{k['all_connected_s']:.2f} s",
                  "-" if k["cpu_per_worker_s"] is None else f"{k['cpu_per_worker_s']:.2f} s",
                  f"{k['idle_cpu_percent']:.0f}% of a core")
    print_table(console, t)


def render(console: Any, machine: dict, r: dict) -> None:
    from rich.table import Table
    from apportion.cli.tables import print_table

    from apportion.bench.service_bench import machine_line

    sp, up, rc, wl, tg = r["spec"], r["scale_up"], r["reclaim"], r["workload"], r["targets"]
    rev = r["revision"]
    console.print(f"[bold]machine[/]: {machine_line(machine)}", highlight=False)
    console.print(f"[bold]revision[/]: {rev.get('commit') or 'unknown'}"
                  + (" with local edits" if rev.get("source_dirty") else ""), highlight=False)
    console.print(f"[bold]setup[/]: 1 master on SQLite, {sp['agents']} agents x {sp['slots_per_agent']} slots "
                  f"(real processes); ApportionCluster with the scheduler in this process; workload "
                  f"{sp['tasks']:,} tasks of {sp['task_seconds']:g} s; rival share 3 : 1, /dask grace "
                  f"{sp['grace']:g} s", highlight=False)

    def s(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} s"

    def met(t: dict) -> str:
        return "[green]met[/]" if t["met"] else "[red]not met[/]"

    t = Table(title="apportion bench dask")
    for col, j in (("measure", "left"), ("value", "right"), ("target", "right"), ("", "left")):
        t.add_column(col, justify=j)
    n = sp["workers"]
    t.add_row(f"adapt(0, {n}) to {n} workers connected", s(up["scale_up_s"]), s(tg["scale_up_s"]["target"]),
              met(tg["scale_up_s"]))
    t.add_row(f"  all {n} slots granted", s(up["granted_all_s"]), "", "")
    t.add_row(f"  all {n} processes running", s(up["processes_running_s"]), "", "")
    t.add_row("  first worker connected", s(up["first_worker_s"]), "", "")
    t.add_row(f"  {n // 2} workers connected", s(up["half_workers_s"]), "", "")
    t.add_row("  CPU per worker process (mean / max)", f"{s(up['worker_cpu_mean_s'])} / {s(up['worker_cpu_max_s'])}",
              "", "")
    t.add_row(f"reclaim of {rc['asked']} slots to the rival holding them", s(rc["complete_s"]), "", "")
    t.add_row("  reclaim decided / heard by the cluster", f"{s(rc['first_reclaim_s'])} / {s(rc['heard_s'])}", "", "")
    t.add_row("  slots released", f"{s(rc['released_s'])}, {rc['min_margin_s']} s before the deadline"
              if rc["released_s"] is not None else "-", "", "")
    t.add_row("  workers retired (data moved, exit 0)", str(rc["workers_retired"]), "", "")
    t.add_row("  workers stopped by force", str(rc["forced"]), str(tg["forced"]["target"]), met(tg["forced"]))
    t.add_row("  slots taken at the deadline (removed)", str(rc["removed_events"]), "0", "")
    t.add_row("  workers left", str(rc["workers_after"]), "", "")
    t.add_row("workload results", "right" if wl["right"] else "WRONG", "right",
              "[green]ok[/]" if wl["right"] else "[red]BUG[/]")
    t.add_row("  tasks done before the reclaim", f"{wl['done_before_reclaim']:,} of {wl['tasks']:,}", "", "")
    print_table(console, t)
