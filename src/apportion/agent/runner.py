"""Activities as real processes, each held by the agent's containment (containment/): a cgroup
(v2 or v1) or, without one, its process group and an environment tag.

A start resolves the execution user through the agent's policy (users.py), gives the activity a
clean environment (environment.py) and its own directory, makes its cgroup with its limits, and
starts the process as that user inside it. Anything that goes wrong on the way (a refused user, a
NUL byte, a program that does not exist, a cgroup that cannot be made) ends that activity
"failed" with the reason; nothing of it runs and the agent goes on.

An activity ends only once every process of it is gone: when its first process exits, what it
left behind is killed; a stop signals every process (SIGTERM, SIGKILL after kill_grace), with the
cgroup frozen meanwhile so nothing forks away. Processes that outlive SIGKILL by the unkillable
timeout make the activity report "unkillable". The kernel's OOM kill in its cgroup ends it
"killed" with "oom". Output goes to WORKDIR/activities/ID/stdout and stderr; that directory is also
the activity's working directory unless the master names one. The state file (statefile.py) keeps
what runs, so a runner made again on the same work directory (after the agent restarted) adopts
what still runs there, and reports the others as exited with no code.

An activity's directory goes, with whatever its processes left there, `retention` seconds after
the master forgot the activity (it holds the output's tail by then). With a disk limit per slot,
a running activity whose directory grows past it is killed, and says why (disk.py).

GPUs and cores: the start names the GPU indices an activity holds (`gpus`) and, where the agent
pins cores, its CPUs (`cpus`). It gets CUDA_VISIBLE_DEVICES with exactly its indices (empty:
none visible) and CUDA_DEVICE_ORDER=PCI_BUS_ID; under cgroup v1 the devices controller denies
the host's other GPU nodes; its cores are its cpuset (cgroup v1) or, elsewhere, the leader's CPU
affinity, set as it starts. Its reported limits say which (`devices`, `cpu_pinning`).
"""

from __future__ import annotations

import logging
import os
import signal
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from apportion.agent import statefile, tails, users
from apportion.agent.containment import Box, Containment, Limits, choose
from apportion.agent.containment.base import Stray
from apportion.agent.containment.alien import alien_pids, system_uids
from apportion.agent.containment.procgroup import ProcessGroup
from apportion.agent.containment.procstat import environ_value, owner
from apportion.agent.disk import DiskWatch
from apportion.agent.dynamic import DynamicUsers
from apportion.agent.environment import SAFE_PATH, clean_env
from apportion.agent.groups import is_alive, process_create_time
from apportion.agent.protocol import Json, OutputMark, Start
from apportion.agent.resources import HostResources, device_nodes, shared_nodes
from apportion.agent.statefile import Entry
from apportion.agent.users import UserPolicy

log = logging.getLogger("apportion.agent")

# Output characters one heartbeat carries at most (beyond the one activity that crosses the line);
# the master takes bodies of up to 1 MiB.
OUTPUT_BUDGET = 256 * 1024
DEFAULT_PIDS_LIMIT = 4096
DEFAULT_UNKILLABLE_TIMEOUT = 60.0  # as Slurm's UnkillableStepTimeout
USAGE_EVERY = 1.0  # seconds between two reads of an activity's usage
ALIEN_EVERY = 5.0  # seconds between two counts of alien processes
KILL_AGAIN = 0.2  # seconds between two SIGKILLs to what is still there
ADOPTED_EVERY = 0.5  # seconds between two looks at a leader adopted after a restart
DEFAULT_RETENTION = 600.0  # seconds an activity's directory stays after the master forgot it
REMOVE_EVERY = 1.0  # seconds between two looks for directories due to go
GONE = ".gone-"  # activities/.gone-ID-N: a directory being removed


@dataclass
class _Live:
    """What the runner knows of a running activity beyond its state-file entry."""

    proc: subprocess.Popen[bytes] | None  # None for a process adopted after a restart
    box: Box
    kill_at: float | None = None  # monotonic time the SIGKILL is due, once a stop came or the leader ended
    stopping: bool = False  # a stop came (else an end is the leader's own)
    sent: int | None = None  # the last signal a stop sent
    killed_at: float | None = None  # the first SIGKILL
    last_kill: float = 0.0
    leader_status: tuple[str, int | None, int | None] | None = None  # the leader's end, once reaped
    next_look: float = 0.0  # an adopted leader: when to look whether it still runs
    evicted: str | None = None  # why the agent killed it (its directory over the disk limit)


def mib(n: int | None) -> str:
    return "none" if n is None else f"{n / 2**20:.0f}"


class ProcessRunner:
    def __init__(self, workdir: Path, masters: list[str] | None = None, policy: UserPolicy | None = None,
                 containment: str | Containment = "auto", pids_limit: int | None = DEFAULT_PIDS_LIMIT,
                 cpu_cap: float | None = None, unkillable_timeout: float = DEFAULT_UNKILLABLE_TIMEOUT,
                 dynamic: DynamicUsers | None = None, retention: float = DEFAULT_RETENTION,
                 disk_per_slot: int | None = None, disk_every: float | None = None,
                 resources: HostResources | None = None, dev_dir: Path = Path("/dev"),
                 path: str = SAFE_PATH) -> None:
        """`cpu_cap`: cores per slot an activity may use at most (None: no hard cap, only weights).
        `dynamic`: the consumers' uids (default: kept in `workdir`, from the policy's range, when
        root). `retention`: seconds an activity's directory stays once forgotten. `disk_per_slot`:
        bytes its directory may take per slot (None: no limit). `resources`: the host's GPUs (their
        nodes in `dev_dir` are the ones the devices cgroup keeps apart) and whether cores are pinned."""
        self.workdir = workdir
        self.masters = list(masters or [])  # told to the processes (APPORTION_MASTER): DUCC's work loop calls it
        self.policy = policy or UserPolicy()
        self.retention = max(0.0, retention)
        self.disk_per_slot = disk_per_slot
        self.disk = DiskWatch(disk_every)
        self.pids_limit = pids_limit
        self.cpu_cap = cpu_cap
        self.unkillable_timeout = unkillable_timeout
        self.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)  # output may hold secrets
        if dynamic is None and self.policy.dynamic is not None and users.is_root():
            dynamic = DynamicUsers(workdir, *self.policy.dynamic)
        self.dynamic = dynamic
        self.resources = resources
        self.dev_dir = dev_dir
        self.path = path  # the PATH its activities get (--path)
        pin = resources is not None and resources.pin_cores
        self.containment = containment if isinstance(containment, Containment) else \
            choose(containment, workdir, cpuset=pin)
        log.info("containment: %s", self.containment.level)
        self._system_uids = system_uids(self.policy.allowed_system_users)
        self._usage_at = -1e9
        self._alien_at = -1e9
        self._alien = 0
        self.removals: dict[int, float] = statefile.load_removals(workdir)  # activity -> when its directory goes
        self._remove_at = -1e9
        self._remover: threading.Thread | None = None
        self._gone_left = True  # activities/.gone-* may be there (a removal an earlier agent did not finish)
        self.entries: dict[int, Entry] = statefile.load(workdir)
        self.live: dict[int, _Live] = {}
        self._legacy: ProcessGroup | None = None  # for what an agent with another containment started
        boxes: dict[int, tuple[Box, bool]] = {}
        for aid, e in self.entries.items():
            if e.state == "running":
                alive = is_alive(e.pid, e.create_time)  # else its pid may be someone else's by now
                boxes[aid] = (self._adopt(aid, e, e.pid if alive else 0), alive)
        self._refresh([b for b, _ in boxes.values()], force=True)
        for aid, (box, alive) in boxes.items():
            e = self.entries[aid]
            if alive or not box.empty():
                self.live[aid] = _Live(proc=None, box=box)
                self._watch_disk(aid, e.disk)
                log.info("activity %d: adopted pid %d", aid, e.pid)
            else:
                e.state, e.exit_code, e.signal = "exited", None, None
                box.remove()
                log.info("activity %d: pid %d is gone", aid, e.pid)
        known = {live.box.key for live in self.live.values()}
        for stray in self.containment.strays(known):
            if stray.activity not in self.entries:  # one the file says ended goes with the sweep
                self._adopt_stray(stray)
                known.add(stray.key)
        self.containment.sweep(known)
        self._orphans()
        self._save()

    def _adopt_stray(self, stray: Stray) -> None:
        """Processes of an activity the state file does not list: the agent stopped after it
        started them and before it wrote that down. They are adopted as running, so that the
        host lists them: the master, which may have declared them lost, keeps their slots
        fenced until they are gone, and says stop if it does not know them any more."""
        pid = stray.pid
        alloc = environ_value(pid, "APPORTION_ALLOCATION") or ""
        slots = environ_value(pid, "APPORTION_SLOTS") or ""
        uid = owner(pid)
        box = self.containment.adopt(stray.activity, stray.key, pid)
        disk = None if self.disk_per_slot is None else self.disk_per_slot * max(1, int(slots) if slots.isdigit() else 1)
        self.entries[stray.activity] = Entry(
            allocation=int(alloc) if alloc.isdigit() else None, pid=pid, create_time=process_create_time(pid) or 0.0,
            state="running", box=f"{self.containment.level}/{stray.key}", user=users.account_name(uid), uid=uid,
            limits=dict(box.applied()), disk=disk)
        self.live[stray.activity] = _Live(proc=None, box=box)
        self._watch_disk(stray.activity, disk)
        log.warning("activity %d: pid %d runs here but the state file did not list it (the agent stopped "
                    "before it recorded the start): adopted", stray.activity, pid)

    def _adopt(self, aid: int, e: Entry, pid: int) -> Box:
        level, _, key = (e.box or "").partition("/")
        if level == self.containment.level:
            return self.containment.adopt(aid, key, pid)
        # Started by an agent with another containment (or none): its process group and tag, if any.
        if self._legacy is None:
            self._legacy = ProcessGroup(self.containment.level + "-legacy")
        return self._legacy.adopt(aid, key or f"legacy:{aid}", pid)

    def activity_dir(self, activity: int) -> Path:
        return self.workdir / "activities" / str(activity)

    def describe(self) -> Json:
        return {"containment": self.containment.level,
                "run_as": {"root": users.is_root(), "user": users.agent_identity().name}}

    def host_report(self) -> Json:
        now = time.monotonic()
        if now - self._alien_at >= ALIEN_EVERY:
            self._alien_at = now
            members = self.containment.members(live.box for live in self.live.values())
            self._alien = len(alien_pids(members, self.policy.min_uid, self._system_uids))
        return {"alien": self._alien}

    def known(self) -> list[Json]:
        return [{"id": aid, "state": e.state} | ({"pid": e.pid} if e.state == "running" else {})
                for aid, e in sorted(self.entries.items())]

    def start(self, cmd: Start, host: str) -> None:
        if cmd.activity in self.entries:
            return  # start is idempotent
        try:
            self._start(cmd, host)
        except users.Refused as e:
            self._failed(cmd.activity, str(e))
        except Exception as e:  # noqa: BLE001 - whatever it was, this activity fails and the agent goes on
            if isinstance(e, subprocess.SubprocessError) and "preexec" in str(e):
                why = "it could not join its cgroup"
            else:
                why = f"{type(e).__name__}: {e}" if not isinstance(e, OSError) else str(e)
            self._failed(cmd.activity, f"cannot start {cmd.argv[0]!r} on {host}: {why}")

    def _start(self, cmd: Start, host: str) -> None:
        run_as = users.resolve(cmd.user, self.policy, host, cmd.consumer, self.dynamic)
        adir = self.activity_dir(cmd.activity)
        if run_as.dynamic:
            run_as = replace(run_as, home=str(adir))  # no passwd entry, no home of its own: its directory
        adir.parent.mkdir(mode=0o711, parents=True, exist_ok=True)  # users pass through to their own only
        users.prepare_dir(adir, run_as)
        gpus = self.resources.gpus if self.resources is not None else ()
        unknown = sorted(set(cmd.gpus) - {g.index for g in gpus})
        if unknown and gpus:
            raise users.Refused(f"GPU {unknown[0]} is not one of this host's ({', '.join(str(g.index) for g in gpus)})")
        nodes = device_nodes(self.dev_dir, gpus)
        pinned = cmd.cpus if self.resources is not None and self.resources.pin_cores else None
        limits = Limits(memory=cmd.limits.memory, swap=cmd.limits.swap, cpu_weight=cmd.limits.cpu_weight,
                        cpu_cap=None if self.cpu_cap is None else self.cpu_cap * cmd.slots, pids=self.pids_limit,
                        devices_deny=tuple(n for i, n in sorted(nodes.items()) if i not in cmd.gpus),
                        devices_allow=tuple([nodes[i] for i in cmd.gpus if i in nodes] + shared_nodes(self.dev_dir)),
                        cpus=pinned)
        disk = None if self.disk_per_slot is None else self.disk_per_slot * max(1, cmd.slots)
        box = self.containment.create(cmd.activity, limits)
        try:
            told = {"APPORTION_ALLOCATION": "" if cmd.allocation is None else str(cmd.allocation),
                    "APPORTION_HOST": host, "APPORTION_SLOTS": str(cmd.slots), "APPORTION_ACTIVITY": str(cmd.activity)}
            if self.masters:
                told["APPORTION_MASTER"] = ",".join(self.masters)
            cuda = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, cmd.gpus)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
            env = clean_env(cmd.env, told | box.env(), run_as, enforced=cuda, path=self.path)
            with users.open_output(adir / "stdout") as out, users.open_output(adir / "stderr") as err:
                proc = subprocess.Popen(cmd.argv, cwd=cmd.cwd or adir, env=env, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=err, start_new_session=True,
                                        preexec_fn=box.enter if box.joins else None, **users.popen_kwargs(run_as))
        except BaseException:
            box.close_enter()
            box.remove()
            raise
        box.started(proc.pid)
        applied: dict[str, object] = dict(box.applied())
        isolation = box.isolation()
        if gpus or cmd.gpus:
            applied |= {"gpus": list(cmd.gpus), "devices": isolation["devices"]}
        if pinned:
            applied |= {"cpus": list(pinned), "cpu_pinning": isolation["cpus"]}
            if isolation["cpus"] == "affinity":
                try:  # what it started from here on inherits it
                    os.sched_setaffinity(proc.pid, pinned)
                except OSError as e:
                    log.warning("activity %d: cannot pin it to CPUs %s: %s", cmd.activity, list(pinned), e)
        self.entries[cmd.activity] = Entry(
            allocation=cmd.allocation, pid=proc.pid, create_time=process_create_time(proc.pid) or 0.0,
            state="running", box=f"{self.containment.level}/{box.key}", user=run_as.name, uid=run_as.uid,
            limits=applied, usage=None, disk=disk)
        self.live[cmd.activity] = _Live(proc=proc, box=box)
        self._watch_disk(cmd.activity, disk)
        log.info("activity %d: started pid %d as %s", cmd.activity, proc.pid, run_as.name)
        try:
            self._save()
        except OSError as e:  # it runs all the same: the next change saves it
            log.warning("activity %d: the state file could not be written: %s", cmd.activity, e)

    def fail(self, activity: int, message: str) -> None:
        if activity not in self.entries:
            self._failed(activity, message)

    def _failed(self, activity: int, reason: str) -> None:
        adir = self.activity_dir(activity)
        try:
            adir.mkdir(mode=0o700, parents=True, exist_ok=True)
            with users.open_output(adir / "stderr") as err:
                err.write(f"apportion agent: {reason}\n".encode(errors="replace"))
        except OSError:
            pass  # the reason goes to the master all the same
        reason = reason[:1000]  # what the master keeps of it
        self.entries[activity] = Entry(allocation=None, pid=0, create_time=0.0, state="failed", reason=reason)
        log.warning("activity %d: failed: %s", activity, reason)
        try:
            self._save()
        except OSError as e:
            log.warning("activity %d: the state file could not be written: %s", activity, e)

    def stop(self, activity: int, kill_grace: float) -> None:
        e = self.entries.get(activity)
        if e is None:
            # Never started here (or forgotten): say it ended, so the master stops asking.
            self.entries[activity] = Entry(allocation=None, pid=0, create_time=0.0, state="exited")
            self._save()
            return
        live = self.live.get(activity)
        if e.state != "running" or live is None or live.stopping:
            return  # ended already, or being stopped: a repeated stop changes nothing
        now = time.monotonic()
        live.stopping = True
        live.kill_at = min(live.kill_at or float("inf"), now + max(0.0, kill_grace))
        live.sent = signal.SIGTERM
        live.box.signal(signal.SIGTERM)
        log.info("activity %d: SIGTERM to every process, SIGKILL in %gs", activity, kill_grace)

    def forget(self, activity: int) -> None:
        e = self.entries.get(activity)
        if e is None or e.state == "running":
            return  # only an end is forgotten: a process that runs stays known until it is stopped
        del self.entries[activity]
        self.removals[activity] = time.time() + self.retention  # its output's tail is in the master's store
        self._save()
        if self.retention == 0:
            self._remove_due(force=True)

    def _orphans(self) -> None:
        """Activity directories nothing here knows of (a state file lost, an older agent's leftovers)
        go after the retention too."""
        try:
            names = os.listdir(self.workdir / "activities")
        except OSError:
            return
        due = time.time() + self.retention
        for name in names:
            if name.isdigit() and int(name) not in self.entries and int(name) not in self.removals:
                self.removals[int(name)] = due
        self._remove_due(force=True)

    def _remove_due(self, force: bool = False) -> None:
        """Move the directories whose retention ran out aside (activities/.gone-ID-N, at once) and
        remove them in a thread (a big tree takes a while; heartbeats must not wait)."""
        now = time.monotonic()
        if not force and now - self._remove_at < REMOVE_EVERY:
            return
        self._remove_at = now
        wall = time.time()
        due = [aid for aid, at in self.removals.items() if at <= wall and aid not in self.entries]
        for aid in due:
            try:
                os.rename(self.activity_dir(aid), self.workdir / "activities" / f"{GONE}{aid}-{time.time_ns()}")
            except FileNotFoundError:
                pass
            except OSError as e:  # said once: it is not tried again
                log.warning("activity %d: its directory cannot be moved aside to be removed: %s", aid, e)
            del self.removals[aid]
            self._gone_left = True
        if due:
            try:
                self._save()
            except OSError as e:
                log.warning("the state file could not be written: %s", e)
        if self._gone_left and (self._remover is None or not self._remover.is_alive()):
            self._gone_left = False
            try:
                gone = [n for n in os.listdir(self.workdir / "activities") if n.startswith(GONE)]
            except OSError:
                gone = []
            if gone:
                self._remover = threading.Thread(target=self._remove_gone, args=(gone,), name="apportion-remove",
                                                 daemon=True)
                self._remover.start()

    def _remove_gone(self, names: list[str]) -> None:
        for name in names:
            # rmtree opens each directory relative to its parent and never follows a link: the tree
            # was the activity's user's to shape
            shutil.rmtree(self.workdir / "activities" / name,
                          onerror=lambda f, p, e: log.warning("cannot remove %s: %s", p, e[1]))
            log.info("removed %s", name)

    def _watch_disk(self, aid: int, limit: int | None) -> None:
        if limit is not None:
            self.disk.watch(aid, self.activity_dir(aid), int(limit))

    def _evict(self, now: float) -> None:
        """Kill each activity whose directory went over its disk limit, saying why."""
        for aid, used in self.disk.over().items():
            live, e = self.live.get(aid), self.entries.get(aid)
            if live is None or e is None or live.evicted is not None:
                continue
            limit = e.disk
            live.evicted = e.reason = (f"disk: its directory {self.activity_dir(aid)} uses {mib(used)} MiB, over its "
                                       f"limit {mib(limit)} MiB (--disk-per-slot)")
            live.stopping, live.sent, live.kill_at = True, signal.SIGKILL, now
            log.warning("activity %d: killed: %s", aid, live.evicted)

    def _refresh(self, boxes: list[Box] | None = None, force: bool = False) -> None:
        if boxes is None:
            boxes = [live.box for live in self.live.values()]
        self.containment.refresh(boxes, force)
        if self._legacy is not None:
            self._legacy.refresh(boxes, force)

    def _children_ended(self) -> bool:
        """Has any child of the agent ended (and not been reaped)? Asked once, not once per activity."""
        try:
            return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return False

    def poll(self) -> bool:
        changed = False
        now = time.monotonic()
        self._evict(now)
        self._remove_due()
        # A leader this runner started ends as a child of the agent; an adopted one is looked at each time.
        children_ended = self._children_ended()
        for aid, live in self.live.items():
            if live.proc is not None and not children_ended:
                continue
            if live.proc is None and live.kill_at is None:
                if now < live.next_look:
                    continue  # an adopted leader is looked at less often: psutil costs more than waitid
                live.next_look = now + ADOPTED_EVERY
            if live.leader_status is None:
                live.leader_status = self._leader_end(self.entries[aid], live)
                if live.leader_status is not None and live.kill_at is None:
                    live.kill_at = now  # the activity's first process ended: what it left goes now
        ending = [live for live in self.live.values() if live.kill_at is not None]
        self._refresh(force=bool(ending))
        for aid, live in list(self.live.items()):
            if live.kill_at is None:
                continue
            e = self.entries[aid]
            if not live.box.empty():
                if now >= live.kill_at and now - live.last_kill >= KILL_AGAIN:
                    live.box.kill()
                    live.last_kill = now
                    if live.killed_at is None:
                        live.killed_at = now
                        log.info("activity %d: SIGKILL to every process", aid)
                    if live.stopping:
                        live.sent = signal.SIGKILL
                if live.killed_at is not None and not e.unkillable and now - live.killed_at >= self.unkillable_timeout:
                    e.unkillable = True
                    changed = True
                    log.error("activity %d: processes %s outlive SIGKILL by %gs: unkillable", aid,
                              sorted(live.box.procs()), self.unkillable_timeout)
                continue
            if live.leader_status is None:
                live.leader_status = self._leader_end(e, live)
                if live.leader_status is None:
                    continue
            self._end(aid, live)
            changed = True
        if changed:
            self._save()
        return changed

    def _end(self, aid: int, live: _Live) -> None:
        e = self.entries[aid]
        box = live.box
        assert live.leader_status is not None
        e.state, e.exit_code, e.signal = live.leader_status
        e.usage = box.usage().as_json()
        self.disk.unwatch(aid)
        if live.evicted is not None:
            e.state, e.exit_code, e.signal = "killed", None, int(signal.SIGKILL)
        elif box.oom():
            e.state, e.exit_code, e.signal, e.oom = "killed", None, int(signal.SIGKILL), True
            limit = (e.limits or {}).get("memory")
            e.reason = f"out of memory: limit {mib(limit)} MiB, peak {mib(e.usage['memory_peak'])} MiB"
        box.remove()
        del self.live[aid]
        log.info("activity %d: %s (exit code %s, signal %s)%s", aid, e.state, e.exit_code, e.signal,
                 f": {e.reason}" if e.reason else "")

    def _leader_end(self, e: Entry, live: _Live) -> tuple[str, int | None, int | None] | None:
        if live.proc is None:
            # Not this runner's child: its wait status is not ours to read. Gone after a signal
            # from us, it counts as killed by the last one; gone by itself, as exited, code unknown.
            if is_alive(e.pid, e.create_time):
                return None
            return ("exited", None, None) if live.sent is None else ("killed", None, int(live.sent))
        code = live.proc.poll()
        if code is None:
            return None
        return ("killed", None, -code) if code < 0 else ("exited", code, None)

    def _read_usage(self) -> None:
        now = time.monotonic()
        if now - self._usage_at < USAGE_EVERY or not self.live:
            return
        self._usage_at = now
        self._refresh(force=True)
        for aid, live in self.live.items():
            self.entries[aid].usage = live.box.usage().as_json()

    def reports(self, sent: dict[int, OutputMark]) -> tuple[list[Json], dict[int, OutputMark]]:
        self._read_usage()
        out: list[Json] = []
        marks: dict[int, OutputMark] = {}
        budget = OUTPUT_BUDGET  # what is left waits for the next heartbeat: its mark is not taken
        for aid, e in sorted(self.entries.items()):
            r: Json = {"id": aid, "state": e.state}
            if e.state == "running":
                r["pid"] = e.pid
            else:
                r["exit_code"], r["signal"] = e.exit_code, e.signal
            if e.reason is not None:
                r["reason"] = e.reason
            if e.user is not None:
                r["user"], r["uid"] = e.user, e.uid
            if e.limits is not None:
                r["limits"] = e.limits
            if e.usage is not None:
                r["usage"] = e.usage
            if e.oom:
                r["oom"] = True
            if e.unkillable:
                r["unkillable"] = True
            adir = self.activity_dir(aid)
            mark = (tails.size(adir / "stdout"), tails.size(adir / "stderr"))
            if sent.get(aid) != mark and mark != (-1, -1) and budget > 0:
                r["stdout"] = tails.last_lines(adir / "stdout")
                r["stderr"] = tails.last_lines(adir / "stderr")
                marks[aid] = mark
                budget -= sum(len(line) for line in r["stdout"] + r["stderr"])
            out.append(r)
        return out, marks

    def close(self, kill: bool = False, timeout: float = 10.0) -> None:
        """Let go of the processes (they keep running in their cgroups, the state file remembers
        them), or kill them and wait until every one is gone. The agent's subtree goes if it is empty."""
        if kill:
            deadline = time.monotonic() + timeout
            for live in self.live.values():
                live.box.kill()
            for aid, live in list(self.live.items()):
                while time.monotonic() < deadline:
                    self._refresh(force=True)
                    if live.box.empty():
                        break
                    live.box.kill()
                    time.sleep(0.01)
                if live.proc is not None:
                    try:
                        live.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
                if live.box.empty():
                    live.box.remove()
            self.live.clear()
        else:
            for live in self.live.values():
                live.box.close_enter()
        self.disk.close()
        self.containment.close()

    def _save(self) -> None:
        statefile.save(self.workdir, self.entries, self.removals)
