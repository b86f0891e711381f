"""`apportion bench activities`: what running activities under containment costs, end to end.

A real master on SQLite and real agents (`apportion agent`, each its own process) on this machine,
run as the user who runs the bench (as root, the agents start activities as `nobody`).

1. Start: N activities (`sleep`) started through the API, one after the other, spread over the
   agents; for each, from the API call to the master's "running" event for it (read from the
   client's event stream). Once with the agents' containment on (their auto level: cgroup-v2 or
   cgroup-v1), once with it off (`--containment process-group`), side by side; and once with
   `--light` agents, which start no process, for what the master and the protocol cost alone.
2. Stop: a tree of 100 processes, 20 of them setsid double-forked daemons, from the SIGKILL moment
   to an empty box, for each level (activity_tree.measure_stop). Then the same tree as a real
   activity whose allocation is deleted while a beneficiary waits for its slots: when its last
   process went, when the activity was reported ended, and when the beneficiary was granted the
   slots (the master may not grant them while a process of the tree lives).
3. Overhead: one agent running M activities (sleepers); the CPU of the agent's own process over a
   fixed window, as a share of one core.

Every process the bench starts is stopped before it returns, and it checks that none is left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from apportion.bench.activity_tree import measure_stop, tree_argv
from apportion.bench.engine_bench import percentile
from apportion.bench.machine import source_revision
from apportion.bench.service_bench import CLI, Proc, _free_port, run_dir, wait_for_state

TARGETS = {"start_p50_s": 0.025, "start_p99_s": 0.100, "stop_s": 0.5, "overhead_core": 0.05}
SLEEPER = ["sleep", "86400"]  # any execution user can run it; stopped by the bench
OFF = "process-group"
WAVE = 10  # the busy agent's activities are started this many at a time
LIGHT = "light"  # an agent that starts no process (--light): what the master and the protocol cost alone


@dataclass(frozen=True)
class ActivitiesBenchSpec:
    activities: int = 500
    agents: int = 10
    tree: int = 100  # processes in the stop tree
    daemons: int = 20  # of them setsid double-forked daemons
    stop_repeat: int = 5
    busy: int = 200  # activities running on the agent whose overhead is measured
    window: float = 30.0  # seconds the overhead is measured over
    heartbeat: float = 1.0  # the master's heartbeat interval (its default)
    containment: str = "auto"  # the level "on" means; "off" is always process-group
    keep: bool = False

    def __post_init__(self) -> None:
        for name in ("activities", "agents", "tree", "stop_repeat", "busy"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not 0 <= self.daemons < self.tree:
            raise ValueError("daemons must be fewer than the tree's processes")
        if self.window <= 0 or self.heartbeat <= 0:
            raise ValueError("window and heartbeat must be more than 0")
        if self.containment == OFF:
            raise ValueError(f"containment: the level to compare with {OFF}, not {OFF} itself")


# -- a master and its agents ----------------------------------------------------------------
SECTIONS = ("start-on", "start-off", "start-light", "tree", "busy-on", "busy-off")  # each its own agents and group
TICK = 1.0  # the master's cycle (apportion server --tick, its default)
PLAN = "hosts: []\nresource_groups:\n" + "".join(
    f"  - {{name: {s}, select: \"select(section == '{s}')\"}}\n" for s in SECTIONS) + """\
consumers:
  - {path: /bench}
  - {path: /bench/run, share_ratio: 1, grace: 30}
  - {path: /bench/owner, share_ratio: 1, grace: 30}
  - {path: /bench/beneficiary, share_ratio: 1, grace: 30}
"""


class Cluster:
    """A master on SQLite and agents, each its own process, in `workdir`. Each section of the bench
    has agents of its own (attribute section=NAME) and a resource group of that name taking them in.
    `close` stops every activity through the master, then the agents and the master, then checks
    nothing is left."""

    def __init__(self, workdir: Path, heartbeat: float, say: Callable[[str], None]) -> None:
        self.workdir, self.say = workdir, say
        workdir.mkdir(parents=True, exist_ok=True)
        db = f"sqlite:///{workdir / 'apportion.db'}"
        (workdir / "plan.yaml").write_text(PLAN)
        token_file = workdir / "admin.token"
        subprocess.run([*CLI, "server", "init", "--db", db, "--token-file", str(token_file)], check=True,
                       capture_output=True, timeout=120)
        self.token = token_file.read_text().strip()
        self.url = f"http://127.0.0.1:{_free_port()}"
        self.master = Proc([*CLI, "server", "--plan", str(workdir / "plan.yaml"), "--db", db, "--listen",
                            self.url.removeprefix("http://"), "--heartbeat", str(heartbeat), "--tick", str(TICK),
                            "--kill-grace", "0",
                            "--log-level", "warning"], workdir / "master.log")
        self.agents: dict[str, Proc] = {}
        self.allocations: dict[int, str] = {}  # id -> section
        self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        self.master.start()
        wait_for_state(lambda: self._ready() or not self.master.alive, 60, "the master to be ready")
        if not self.master.alive:
            raise RuntimeError(f"the master exited:\n{self.master.tail()}")

    def _ready(self) -> bool:
        return self.http.get("/readyz").status_code == 200

    def add_agents(self, section: str, count: int, slots: int, containment: str) -> dict[str, str]:
        """Start `count` agents for `section` and wait until all report; -> each host's containment
        level as it reported it."""
        names = [f"{section}-{i}" for i in range(count)]
        for name in names:
            how = ["--light"] if containment == LIGHT else ["--containment", containment]
            p = Proc([*CLI, "agent", "--master", self.url, "--name", name, "--slots", str(slots), "--workdir",
                      str(self.workdir / "agents" / name), *how, "--log-level", "WARNING",
                      "--attribute", f"section={section}"],
                     self.workdir / f"agent-{name}.log", env={"APPORTION_TOKEN": self.token})
            p.start()
            self.agents[name] = p

        def reported() -> dict[str, str] | None:
            dead = [n for n, p in self.agents.items() if not p.alive]
            if dead:
                raise RuntimeError(f"agent {dead[0]} exited:\n{self.agents[dead[0]].tail()}")
            hosts = {h["name"]: h for h in self.get("/v1/hosts")["hosts"]}
            if all(hosts.get(n, {}).get("state") == "ok" for n in names):
                return {n: hosts[n].get("containment") or (LIGHT if containment == LIGHT else "unknown")
                        for n in names}
            return None

        return wait_for_state(reported, 60, f"{len(names)} agents to report")

    def end_section(self, section: str) -> None:
        """Stop the section's activities (its allocations deleted) and then its agents."""
        mine = [a for a, s in self.allocations.items() if s == section]
        for a in mine:
            self.delete(a)
        wait_for_state(lambda: not any(self.running(a) for a in mine), 120, f"{section}'s activities to stop")
        for name in [n for n in self.agents if n.startswith(section + "-")]:
            self.agents.pop(name).stop(grace=10)

    def get(self, path: str, **params: Any) -> Any:
        r = self.http.get(path, params=params)
        r.raise_for_status()
        return r.json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        r = self.http.post(path, json=body)
        r.raise_for_status()
        return r.json()

    def client(self, name: str, consumer: str) -> int:
        return self.post("/v1/clients", {"name": name, "consumer": consumer})["id"]

    def allocate(self, client: int, consumer: str, section: str, min_: int, max_: int) -> int:
        a = self.post("/v1/allocations", {"client": client, "consumer": consumer, "group": section,
                                          "min": min_, "max": max_})["id"]
        self.allocations[a] = section
        return a

    def held(self, allocation: int) -> int:
        return self.get(f"/v1/allocations/{allocation}")["held"]

    def running(self, allocation: int) -> list[dict[str, Any]]:
        return [a for a in self.get("/v1/activities", allocation=allocation)["activities"] if a["state"] in
                ("starting", "running")]

    def delete(self, allocation: int) -> None:
        r = self.http.delete(f"/v1/allocations/{allocation}")
        if r.status_code not in (200, 204, 404):
            r.raise_for_status()

    def close(self) -> int:
        """Stop everything; -> the number of processes found still running afterwards (killed)."""
        try:
            if self.master.alive:
                for a in self.allocations:
                    self.delete(a)
                wait_for_state(lambda: not any(self.running(a) for a in self.allocations), 120,
                               "every activity to stop")
        except (RuntimeError, httpx.HTTPError) as e:
            self.say(f"stopping through the master failed ({e}); killing what is left")
        finally:
            for p in self.agents.values():
                p.stop(grace=10)
            self.master.stop(grace=10)
            self.http.close()
        left = leftovers(self.url)
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(left, timeout=10)
        return len(left)


def leftovers(url: str) -> list[psutil.Process]:
    """Processes still running that were started for the master at `url` (agents tell it to each
    activity; the bench's own agents and master have it on their command line)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.pid == os.getpid():
                continue
            if p.environ().get("APPORTION_MASTER") == url or url.removeprefix("http://") in " ".join(p.cmdline()):
                out.append(p)
        except psutil.Error:
            continue
    return out


class EventTimes:
    """A client's event stream read by a thread, with the moment each event arrived."""

    def __init__(self, c: Cluster, client: int) -> None:
        from apportion.client import Client

        self.api = Client(c.url, token=c.token)
        self.stream = self.api.events(client, after=0)
        self.running: dict[int, float] = {}  # activity -> arrival (perf_counter) of its "running"
        self.ended: dict[int, tuple[str, float]] = {}  # activity -> end state, arrival
        self.granted: list[tuple[str, int, float]] = []  # host, slots, arrival
        self.changed = threading.Condition()
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            self._take()
        except Exception as e:  # noqa: BLE001 - said by wait() when it gives up
            self.error = e

    def _take(self) -> None:
        with contextlib.suppress(StopIteration):
            for e in self.stream:
                now = time.perf_counter()
                with self.changed:
                    if e.get("type") == "activity":
                        if e.get("state") == "running":
                            self.running.setdefault(e["activity"], now)
                        elif e.get("state") in ("exited", "killed", "failed"):
                            self.ended.setdefault(e["activity"], (e["state"], now))
                    elif e.get("type") == "granted":
                        self.granted.append((e.get("host"), e.get("slots"), now))
                    self.changed.notify_all()

    def wait(self, check: Callable[[], Any], timeout: float, what: str) -> Any:
        end = time.monotonic() + timeout
        with self.changed:
            while True:
                got = check()
                if got:
                    return got
                left = end - time.monotonic()
                if left <= 0:
                    why = f" (the event stream failed: {self.error!r})" if self.error else ""
                    raise RuntimeError(f"waited {timeout:g} s for {what}{why}")
                self.changed.wait(left)

    def close(self) -> None:
        self.stream.close()
        self.api.close()


# -- the figures ------------------------------------------------------------------------------
def _stats(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"n": 0, "p50_s": None, "p99_s": None, "mean_s": None, "max_s": None}
    return {"n": len(xs), "p50_s": percentile(xs, 50), "p99_s": percentile(xs, 99), "mean_s": statistics.fmean(xs),
            "max_s": max(xs)}


def starts(spec: ActivitiesBenchSpec, c: Cluster, mode: str, containment: str,
           say: Callable[[str], None]) -> dict[str, Any]:
    """Start latency: API call to the "running" event, each activity started after the last runs."""
    section = f"start-{mode}"
    per_host = -(-spec.activities // spec.agents)
    levels = c.add_agents(section, spec.agents, per_host, containment)
    names = sorted(levels)
    say(f"start ({mode}): {spec.agents} agents up ({', '.join(sorted(set(levels.values())))}); "
        f"{spec.activities} activities")
    client = c.client(f"bench-{section}", "/bench/run")
    alloc = c.allocate(client, "/bench/run", section, 0, per_host * spec.agents)
    wait_for_state(lambda: c.held(alloc) == per_host * spec.agents, 60, "the allocation's grant")
    ev = EventTimes(c, client)
    try:
        took: list[float] = []
        failed: list[str] = []
        for i in range(spec.activities):
            host = names[i % spec.agents]
            began = time.perf_counter()
            aid = c.post(f"/v1/allocations/{alloc}/activities", {"host": host, "argv": SLEEPER})["id"]
            state = ev.wait(lambda aid=aid: ("running" if aid in ev.running else None)
                            or (ev.ended[aid][0] if aid in ev.ended else None), 60, f"activity {aid} to run")
            if state != "running":
                failed.append(f"activity {aid} {state}: {c.get(f'/v1/activities/{aid}').get('stop_reason')}")
                continue
            took.append(ev.running[aid] - began)
        sample = c.get(f"/v1/activities/{aid}")
        say(f"start ({mode}): {len(took)} running; stopping them")
        t0 = time.perf_counter()
        c.delete(alloc)
        wait_for_state(lambda: not c.running(alloc), 120, "every activity to be reported ended", every=0.01)
        stop_all = time.perf_counter() - t0
    finally:
        ev.close()
    c.end_section(section)
    return {"containment": sorted(set(levels.values())), "agents": spec.agents, **_stats(took),
            "failed": failed[:5], "failed_count": len(failed), "stop_all_s": stop_all,
            "sample": {k: sample.get(k) for k in ("user", "uid", "limits")}}


def _tree_pids(url: str, activity: int) -> list[psutil.Process]:
    """The processes of one activity of the master at `url` (activity ids are per master)."""
    out = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            env = p.environ()
            if env.get("APPORTION_ACTIVITY") == str(activity) and env.get("APPORTION_MASTER") == url:
                out.append(p)
    return out


def stop_live(spec: ActivitiesBenchSpec, c: Cluster, containment: str) -> dict[str, Any]:
    """The tree as an activity on a 2-slot host; its allocation deleted while a beneficiary waits."""
    level = c.add_agents("tree", 1, 2, containment)["tree-0"]
    owner = c.client("bench-owner", "/bench/owner")
    a = c.allocate(owner, "/bench/owner", "tree", 2, 2)
    wait_for_state(lambda: c.held(a) == 2, 60, "the owner's grant")
    argv = tree_argv(spec.tree, spec.daemons)
    act = c.post(f"/v1/allocations/{a}/activities", {"host": "tree-0", "argv": argv, "slots": 2})["id"]

    def tree_ready() -> bool:
        out = c.get(f"/v1/activities/{act}/output")
        got = c.get(f"/v1/activities/{act}")
        if got["state"] not in ("starting", "running"):
            raise RuntimeError(f"the tree ended: {got.get('stop_reason')} {out}")
        return any(line.startswith("ready") for line in out.get("stdout", []))

    wait_for_state(tree_ready, 60, "the tree to run")
    procs = _tree_pids(c.url, act)
    beneficiary = c.client("bench-beneficiary", "/bench/beneficiary")
    ev = EventTimes(c, beneficiary)
    try:
        b = c.allocate(beneficiary, "/bench/beneficiary", "tree", 1, 2)
        gone_at: list[float] = []
        alive_at_grant: list[int] = []

        def watch() -> None:  # when the last process of the tree went
            waiting = list(procs)
            while waiting:
                waiting = [p for p in waiting if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
                if ev.granted and not alive_at_grant:
                    alive_at_grant.append(len(waiting))
                time.sleep(0.0005)
            gone_at.append(time.perf_counter())

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        t0 = time.perf_counter()
        c.delete(a)
        ended_at = wait_for_state(lambda: c.get(f"/v1/activities/{act}")["state"] not in ("starting", "running")
                                  and time.perf_counter(), 60, "the tree's activity to end", every=0.002)
        ev.wait(lambda: ev.granted, 60, "the beneficiary's grant")
        granted_at = ev.granted[0][2]
        watcher.join(30)
        end = c.get(f"/v1/activities/{act}")
        held = c.held(b)
    finally:
        ev.close()
    c.end_section("tree")
    last_gone = gone_at[0] if gone_at else None
    return {"containment": level, "processes_seen": len(procs), "end_state": end["state"],
            "delete_to_last_gone_s": None if last_gone is None else last_gone - t0,
            "delete_to_ended_s": ended_at - t0, "delete_to_granted_s": granted_at - t0,
            "last_gone_to_granted_s": None if last_gone is None else granted_at - last_gone,
            "alive_when_granted": alive_at_grant[0] if alive_at_grant else 0,
            "beneficiary_held": held, "cycle_s": TICK}


def overhead(spec: ActivitiesBenchSpec, c: Cluster, mode: str, containment: str,
             say: Callable[[str], None]) -> dict[str, Any]:
    """CPU of one agent process running `busy` activities, over `window` seconds."""
    section = f"busy-{mode}"
    level = c.add_agents(section, 1, spec.busy, containment)[f"{section}-0"]
    client = c.client(f"bench-{section}", "/bench/run")
    a = c.allocate(client, "/bench/run", section, spec.busy, spec.busy)
    wait_for_state(lambda: c.held(a) == spec.busy, 60, "the busy agent's grant")
    for first in range(0, spec.busy, WAVE):  # a burst of hundreds of starts at once is another figure
        n = min(WAVE, spec.busy - first)
        for _ in range(n):
            c.post(f"/v1/allocations/{a}/activities", {"host": f"{section}-0", "argv": SLEEPER})
        wait_for_state(lambda n=first + n: _running_or_say(c, a, n), 120, f"{first + n} activities running")
    say(f"overhead: {spec.busy} activities run on one agent ({level}); measuring {spec.window:g} s")
    agent = psutil.Process(c.agents[f"{section}-0"].pid)
    wait_for_state(lambda: _usage_reported(c, a), 30, "usage reported", every=0.2)
    t = agent.cpu_times()
    began_cpu, began = t.user + t.system, time.perf_counter()
    time.sleep(spec.window)  # the measuring window itself: the agent is left alone meanwhile
    t = agent.cpu_times()
    cpu, wall = t.user + t.system - began_cpu, time.perf_counter() - began
    rss = agent.memory_info().rss
    c.end_section(section)
    return {"containment": level, "activities": spec.busy, "window_s": wall, "cpu_s": cpu,
            "core_share": cpu / wall, "rss_mib": rss / 2**20}


def _running_or_say(c: Cluster, allocation: int, n: int) -> bool:
    """True once `n` activities run; an error naming how any that ended did."""
    acts = c.get("/v1/activities", allocation=allocation)["activities"]
    ended = [x for x in acts if x["state"] not in ("starting", "running")]
    if ended:
        raise RuntimeError(f"{len(ended)} of the busy agent's activities ended: {ended[0]['state']} "
                           f"{ended[0].get('stop_reason') or ''}")
    return sum(x["state"] == "running" for x in acts) >= n


def _usage_reported(c: Cluster, allocation: int) -> bool:
    acts = c.running(allocation)
    return bool(acts) and all(x.get("usage") for x in acts)


def check_execution_user_can_run(python: str = sys.executable) -> str | None:
    """As root, activities run as `nobody`: the stop tree is a Python program, so `nobody` must be able to
    run this interpreter. -> why not, or None."""
    from apportion.agent.users import UserPolicy, popen_kwargs, resolve

    if os.geteuid() != 0:
        return None
    run_as = resolve(None, UserPolicy(), "this host")
    try:
        subprocess.run([python, "-c", "pass"], check=True, capture_output=True, cwd="/", timeout=60,
                       **popen_kwargs(run_as))
    except (OSError, subprocess.CalledProcessError) as e:
        return (f"the execution user {run_as.name} cannot run {python} ({e}): install apportion where execution "
                "users can run it, or let them through its directories (chmod o+x)")
    return None


def run(spec: ActivitiesBenchSpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every figure; every process the bench starts is stopped before it returns."""
    say = progress or (lambda _m: None)
    why = check_execution_user_can_run()
    if why:
        raise RuntimeError(why)
    workdir = run_dir("apportion-bench-activities-")
    revision = source_revision(whole=True)
    result: dict[str, Any] = {"spec": asdict(spec), "revision": revision, "start": {}, "stop": {}, "overhead": {}}
    try:
        c = Cluster(workdir / "cluster", spec.heartbeat, say)
        try:
            for mode, level in (("on", spec.containment), ("off", OFF), ("light", LIGHT)):
                s = result["start"][mode] = starts(spec, c, mode, level, say)
                say(f"start ({mode}, {', '.join(s['containment'])}): p50 {_fmt(s['p50_s'])}, p99 {_fmt(s['p99_s'])}")
            for mode, level in (("on", spec.containment), ("off", OFF)):
                used, times = measure_stop(level, spec.tree, spec.daemons, spec.stop_repeat, workdir / f"tree-{mode}")
                result["stop"][mode] = {"containment": used, "times_s": times, "median_s": statistics.median(times),
                                        "max_s": max(times)}
                say(f"stop ({mode}, {used}): median {_fmt(statistics.median(times))}, max {_fmt(max(times))}")
            result["stop"]["live"] = stop_live(spec, c, spec.containment)
            for mode, level in (("on", spec.containment), ("off", OFF)):
                o = result["overhead"][mode] = overhead(spec, c, mode, level, say)
                say(f"overhead ({mode}, {o['containment']}): {o['core_share']:.1%} of a core")
        finally:
            result["left_running"] = c.close()
        result["targets"] = _targets(result)
        return result
    finally:
        if spec.keep:
            say(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.1f} ms"


def _met(value: float | None, target: float) -> dict[str, Any]:
    return {"value": value, "target": target, "met": value is not None and value <= target}


def _targets(r: dict[str, Any]) -> dict[str, Any]:
    on = r["start"]["on"]
    live = r["stop"]["live"]
    return {"start_p50_s": _met(on["p50_s"], TARGETS["start_p50_s"]),
            "start_p99_s": _met(on["p99_s"], TARGETS["start_p99_s"]),
            "stop_s": _met(r["stop"]["on"]["max_s"], TARGETS["stop_s"]),
            "granted_after_gone": {"value": live["alive_when_granted"], "target": 0,
                                   "met": live["alive_when_granted"] == 0},
            "granted_within_cycle_s": _met(live["last_gone_to_granted_s"], live["cycle_s"]),
            "overhead_core": _met(r["overhead"]["on"]["core_share"], TARGETS["overhead_core"]),
            "left_running": {"value": r["left_running"], "target": 0, "met": r["left_running"] == 0}}


# -- rendering ------------------------------------------------------------------------------------
def render(console, machine: dict, r: dict) -> None:  # noqa: ANN001 - a rich Console
    from rich.table import Table
    from apportion.cli.tables import print_table

    from apportion.bench.service_bench import machine_line

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x * 1000:,.1f} ms"

    def met(key: str) -> str:
        return "[green]met[/]" if r["targets"][key]["met"] else "[red]not met[/]"

    def table(title: str, *columns: str) -> Table:
        """A table of figures: a measure, value columns, the target, and whether it is met."""
        t = Table(title=title)
        t.add_column("measure")
        for c in (*columns, "target"):
            t.add_column(c, justify="right")
        t.add_column("")
        return t

    sp = r["spec"]
    console.print(f"[bold]machine[/]: {machine_line(machine)}")
    rev = r["revision"]
    console.print(f"[bold]revision[/]: {rev.get('commit') or 'unknown'}"
                  + (" with local edits" if rev.get("source_dirty") else ""))
    on, off, light = r["start"]["on"], r["start"]["off"], r["start"]["light"]
    t = table(f"apportion bench activities: start ({sp['activities']} activities on {sp['agents']} agents, "
              "API call to running reported)", f"containment on ({', '.join(on['containment'])})",
              f"off ({', '.join(off['containment'])})", "no process (--light)")
    t.add_row("p50", ms(on["p50_s"]), ms(off["p50_s"]), ms(light["p50_s"]), ms(TARGETS["start_p50_s"]),
              met("start_p50_s"))
    t.add_row("p99", ms(on["p99_s"]), ms(off["p99_s"]), ms(light["p99_s"]), ms(TARGETS["start_p99_s"]),
              met("start_p99_s"))
    t.add_row("mean", ms(on["mean_s"]), ms(off["mean_s"]), ms(light["mean_s"]), "", "")
    t.add_row("max", ms(on["max_s"]), ms(off["max_s"]), ms(light["max_s"]), "", "")
    t.add_row("failed to start", str(on["failed_count"]), str(off["failed_count"]), str(light["failed_count"]),
              "0", "")
    t.add_row("stop all (delete the allocation)", ms(on["stop_all_s"]), ms(off["stop_all_s"]),
              ms(light["stop_all_s"]), "", "")
    t.add_row("run as", f"{on['sample']['user']} (uid {on['sample']['uid']})",
              f"{off['sample']['user']} (uid {off['sample']['uid']})", "-", "", "")
    print_table(console, t)

    s_on, s_off, live = r["stop"]["on"], r["stop"]["off"], r["stop"]["live"]
    t = table(f"stop: a tree of {sp['tree']} processes, {sp['daemons']} of them setsid daemons",
              f"on ({s_on['containment']})", f"off ({s_off['containment']})")
    t.add_row(f"SIGKILL to empty, median of {len(s_on['times_s'])}", ms(s_on["median_s"]), ms(s_off["median_s"]),
              "", "")
    t.add_row("SIGKILL to empty, max", ms(s_on["max_s"]), ms(s_off["max_s"]), ms(TARGETS["stop_s"]), met("stop_s"))
    print_table(console, t)
    t = table(f"stop, live ({live['containment']}): the tree's allocation deleted while a beneficiary waits", "value")
    t.add_row("processes of the tree seen", str(live["processes_seen"]), str(sp["tree"]), "")
    t.add_row("delete to the last process gone", ms(live["delete_to_last_gone_s"]), "", "")
    t.add_row("delete to the activity ended", ms(live["delete_to_ended_s"]), "", "")
    t.add_row("delete to the beneficiary's grant", ms(live["delete_to_granted_s"]), "", "")
    t.add_row("last process gone to the grant", ms(live["last_gone_to_granted_s"]),
              f"<= one cycle ({live['cycle_s']:g} s)", met("granted_within_cycle_s"))
    t.add_row("tree processes alive at the grant", str(live["alive_when_granted"]), "0", met("granted_after_gone"))
    print_table(console, t)

    o_on, o_off = r["overhead"]["on"], r["overhead"]["off"]
    t = table(f"overhead: one agent with {sp['busy']} running activities, {o_on['window_s']:.0f} s window",
              f"on ({o_on['containment']})", f"off ({o_off['containment']})")
    t.add_row("agent CPU, share of one core", f"{o_on['core_share']:.2%}", f"{o_off['core_share']:.2%}",
              f"{TARGETS['overhead_core']:.0%}", met("overhead_core"))
    t.add_row("agent resident memory", f"{o_on['rss_mib']:.0f} MiB", f"{o_off['rss_mib']:.0f} MiB", "", "")
    print_table(console, t)
    console.print(f"processes left running afterwards: {r['left_running']}"
                  + ("" if r["targets"]["left_running"]["met"] else " [red](killed; a bug)[/]"))
