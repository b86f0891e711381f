"""cgroup v1: a cgroup per activity in each writable hierarchy (memory required; pids, freezer, cpu,
cpuacct where present), under `apportion-<agent id>` inside the agent's own cgroup of that hierarchy.

Limits: memory.limit_in_bytes (and memory.memsw.limit_in_bytes = memory + swap where swap
accounting exists), cpu.shares = cpu_weight * 1024 / 100, a CFS quota for a hard cap, pids.max.
Devices (where the devices hierarchy is writable): `c MAJOR:MINOR rwm` in devices.deny for each
GPU node that is not the activity's, and in devices.allow for its own and the nodes every GPU
process needs (nvidiactl, nvidia-uvm), as Slurm's ConstrainDevices does. Pinned cores (with
`cpuset`, the agent's --pin-cores): the activity's cgroup in the cpuset hierarchy gets exactly
its CPUs in cpuset.cpus, and the memory nodes of the agent's own cpuset.
A stop freezes the freezer cgroup, signals every process in it and thaws it, so nothing forks
away in between. The kernel's OOM kill shows in memory.oom_control's oom_kill counter (kernels
before 4.13 lack it: memory.failcnt then says the limit was hit).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from apportion.agent.containment.base import (CgroupBox, Containment, ContainmentUnavailable, Limits, Stray, Usage,
                                              cgroup_strays, keyed, kill_until_empty, pids_in, read_int,
                                              read_text, write)
from apportion.agent.containment.procstat import cpu_ticks_of, ticks_per_second

log = logging.getLogger("apportion.agent")

REQUIRED = ("memory",)
OPTIONAL = ("pids", "freezer", "cpu", "cpuacct", "devices")
CFS_PERIOD_US = 100_000
FREEZE_WAIT = 1.0  # seconds a freeze may take before the signal goes anyway


def subtree_name(agent_id: str) -> str:
    return f"apportion-{agent_id}"


class CgroupV1(Containment):
    level = "cgroup-v1"

    def __init__(self, own: dict[str, Path], agent_id: str, cpuset: bool = False) -> None:
        """`own`: controller -> the agent's own cgroup directory in that controller's hierarchy.
        `cpuset`: pin activities to their cores (the cpuset hierarchy is then used where writable)."""
        missing = [c for c in REQUIRED if c not in own]
        if missing:
            raise ContainmentUnavailable(f"cgroup v1: no {', '.join(missing)} hierarchy")
        self.roots: dict[str, Path] = {}
        self.mems = ""
        for c in REQUIRED + OPTIONAL + (("cpuset",) if cpuset else ()):
            if c not in own:
                continue
            root = own[c] / subtree_name(agent_id)
            try:
                root.mkdir(exist_ok=True)
            except OSError as e:
                if c in REQUIRED:
                    self._drop_roots()
                    raise ContainmentUnavailable(f"cgroup v1: cannot make {root}: {e.strerror}") from None
                log.info("cgroup v1: %s not used: cannot make %s: %s", c, root, e.strerror)
                continue
            if c == "cpuset" and not self._cpuset_root(own[c], root):
                continue
            self.roots[c] = root

    def _cpuset_root(self, parent: Path, root: Path) -> bool:
        """A new cpuset cgroup has no CPUs and no memory nodes: the subtree gets its parent's."""
        try:
            cpus = read_text(parent / "cpuset.cpus").strip()
            self.mems = read_text(parent / "cpuset.mems").strip()
            if not read_text(root / "cpuset.cpus").strip():
                write(root / "cpuset.cpus", cpus)
            if not read_text(root / "cpuset.mems").strip():
                write(root / "cpuset.mems", self.mems)
            return True
        except OSError as e:
            log.warning("cgroup v1: cpuset not used (cores are pinned by affinity): %s", e.strerror)
            try:
                root.rmdir()
            except OSError:
                pass
            return False

    def controllers(self) -> list[str]:
        return sorted(self.roots)

    def create(self, activity: int, limits: Limits) -> V1Box:
        box = V1Box(self, activity)
        box.make(limits)
        return box

    def adopt(self, activity: int, key: str, pid: int) -> V1Box:
        return V1Box(self, activity, key)

    def boxes(self) -> list[V1Box]:
        """A box for each activity cgroup in the subtree (of any hierarchy)."""
        names = {d.name for root in self.roots.values() if root.is_dir() for d in root.iterdir()
                 if d.is_dir() and d.name.startswith("a")}
        return [V1Box(self, -1, name) for name in sorted(names)]

    def strays(self, known: set[str]) -> list[Stray]:
        return cgroup_strays(self.boxes(), known)

    def sweep(self, known: set[str]) -> None:
        for box in self.boxes():
            if box.key not in known:
                if not box.empty():
                    log.warning("cgroup v1: %s holds processes of no known activity: killing them", box.key)
                    kill_until_empty(box)
                box.remove()

    def close(self) -> None:
        self._drop_roots()

    def _drop_roots(self) -> None:
        for root in self.roots.values():
            try:
                root.rmdir()
            except OSError:
                pass  # activities still run in it (an agent that stops without killing them)


class V1Box(CgroupBox):
    def __init__(self, owner: CgroupV1, activity: int, key: str | None = None) -> None:
        super().__init__()
        self.key = key or f"a{activity}"
        self.owner_root = owner.roots
        self.dirs = {c: root / self.key for c, root in owner.roots.items()}
        # The directory that lists its processes: the freezer's (stops read it frozen), or the memory one.
        self.procs_dir = self.dirs.get("freezer", self.dirs["memory"])
        self.limits: dict[str, int | None] = {"memory": None, "cpu_weight": None, "pids": None}
        self._cpu_seen: dict[int, int] = {}  # without cpuacct: ticks seen per pid
        if key is not None:  # adopted: read back what is in force
            self.limits = self._read_limits()

    def limit(self, limits: Limits) -> None:
        mem = self.dirs["memory"]
        if limits.memory is not None:
            write(mem / "memory.limit_in_bytes", str(limits.memory))
            memsw = mem / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                write(memsw, str(limits.memory + (limits.swap or 0)))
            self.limits["memory"] = limits.memory
        cpu = self.dirs.get("cpu")
        if cpu is not None and limits.cpu_weight is not None:
            write(cpu / "cpu.shares", str(max(2, limits.cpu_weight * 1024 // 100)))
            self.limits["cpu_weight"] = limits.cpu_weight
        if cpu is not None and limits.cpu_cap is not None:
            write(cpu / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            write(cpu / "cpu.cfs_quota_us", str(max(1000, int(limits.cpu_cap * CFS_PERIOD_US))))
        pids = self.dirs.get("pids")
        if pids is not None and limits.pids is not None:
            write(pids / "pids.max", str(limits.pids))
            self.limits["pids"] = limits.pids
        dev = self.dirs.get("devices")
        if dev is not None:
            for major, minor in limits.devices_deny:
                write(dev / "devices.deny", f"c {major}:{minor} rwm")
            for major, minor in limits.devices_allow:
                try:
                    write(dev / "devices.allow", f"c {major}:{minor} rwm")
                except OSError:
                    pass  # the agent's own cgroup does not allow it either: nothing to give
        cpuset = self.dirs.get("cpuset")
        if cpuset is not None:
            cpus = limits.cpus if limits.cpus else None
            # Unpinned (no cores named): the agent's whole set, as if it were not in a cpuset at all.
            write(cpuset / "cpuset.cpus", ",".join(map(str, cpus)) if cpus else
                  read_text(self.owner_root["cpuset"] / "cpuset.cpus").strip())
            write(cpuset / "cpuset.mems", read_text(self.owner_root["cpuset"] / "cpuset.mems").strip())

    def isolation(self) -> dict[str, str]:
        return {"devices": "cgroup-v1" if "devices" in self.dirs else "environment",
                "cpus": "cpuset" if "cpuset" in self.dirs else "affinity"}

    def _read_limits(self) -> dict[str, int | None]:
        mem = read_int(self.dirs["memory"] / "memory.limit_in_bytes", 0)
        shares = read_int(self.dirs["cpu"] / "cpu.shares", 0) if "cpu" in self.dirs else 0
        pids = read_text(self.dirs["pids"] / "pids.max").strip() if "pids" in self.dirs else ""
        return {"memory": mem if 0 < mem < 2**62 else None,
                "cpu_weight": shares * 100 // 1024 if shares and shares != 1024 else None,
                "pids": int(pids) if pids.isdigit() else None}

    def cgroup_dirs(self) -> list[Path]:
        return sorted(set(self.dirs.values()))

    def freeze(self, on: bool) -> bool:
        fz = self.dirs.get("freezer")
        if fz is None:
            return False
        try:
            write(fz / "freezer.state", "FROZEN" if on else "THAWED")
        except OSError:
            return False
        if on:
            deadline = time.monotonic() + FREEZE_WAIT
            while read_text(fz / "freezer.state").strip() != "FROZEN" and time.monotonic() < deadline:
                time.sleep(0.001)
        return True

    def empty(self) -> bool:
        # Cheap while nothing runs below: one read of its cgroup.procs; the walk only if that is empty.
        if pids_in(self.procs_dir / "cgroup.procs"):
            return False
        return not self.procs()

    def usage(self) -> Usage:
        mem = str(self.dirs["memory"])
        acct = self.dirs.get("cpuacct")
        if acct is not None:
            cpu = read_int(f"{acct}/cpuacct.usage") / 1e9
        else:
            for pid in self.procs():
                ticks = cpu_ticks_of(pid)
                if ticks is not None:
                    self._cpu_seen[pid] = max(ticks, self._cpu_seen.get(pid, 0))
            cpu = sum(self._cpu_seen.values()) / ticks_per_second()
        return Usage(cpu_seconds=cpu, memory=read_int(f"{mem}/memory.usage_in_bytes"),
                     memory_peak=read_int(f"{mem}/memory.max_usage_in_bytes"))

    def oom(self) -> bool:
        mem = self.dirs["memory"]
        control = keyed(read_text(mem / "memory.oom_control"))
        if "oom_kill" in control:
            return control["oom_kill"] > 0
        return read_int(mem / "memory.failcnt") > 0

    def applied(self) -> dict[str, int | None]:
        return dict(self.limits)
