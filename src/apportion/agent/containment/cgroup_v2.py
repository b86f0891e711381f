"""cgroup v2: a cgroup per activity under `apportion-<agent id>` inside the agent's own cgroup, with
the memory, pids (and cpu, where delegated) controllers enabled for it.

cgroup v2 lets a cgroup enable controllers for its children only while no process sits in it, so
an agent whose own cgroup (a systemd unit with Delegate=yes) holds only itself moves itself into
`apportion-<id>/agent` first. Limits: memory.max, memory.swap.max, cpu.weight, cpu.max, pids.max;
with `cpuset` (the agent's --pin-cores) and the cpuset controller delegated, cpuset.cpus holds
exactly the activity's cores. cgroup v2 has no devices files: GPUs are kept apart by the
environment only (an eBPF device program would be needed, which the agent does not load).
A stop freezes the cgroup (cgroup.freeze), signals every process and thaws it; SIGKILL is
cgroup.kill, which leaves nothing to fork away. Empty is cgroup.events' `populated 0`; an OOM kill
is memory.events' oom_kill counter.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

from apportion.agent.containment.base import (CgroupBox, Containment, ContainmentUnavailable, Limits, Stray, Usage,
                                              cgroup_strays, keyed, kill_until_empty, pids_in, read_int,
                                              read_text, write)
from apportion.agent.containment.cgroup_v1 import CFS_PERIOD_US, FREEZE_WAIT, subtree_name

log = logging.getLogger("apportion.agent")

REQUIRED = ("memory", "pids")
OPTIONAL = ("cpu",)


class CgroupV2(Containment):
    level = "cgroup-v2"

    def __init__(self, own: Path, agent_id: str, required: Sequence[str] = REQUIRED, enable: bool = True,
                 cpuset: bool = False) -> None:
        """`own`: the agent's own cgroup directory. `required`: controllers without which this level
        refuses (tests of the stop alone pass none, on a v2 hierarchy that delegates none).
        `enable`: False to only look at an existing subtree (select.discard)."""
        self.own = own
        self.root = own / subtree_name(agent_id)
        available = set(read_text(own / "cgroup.controllers").split())
        missing = [c for c in required if c not in available]
        if missing:
            raise ContainmentUnavailable(f"cgroup v2: {', '.join(missing)} not delegated to {own}")
        wanted = (*REQUIRED, *OPTIONAL, *(("cpuset",) if cpuset else ()))
        self.controllers = [c for c in wanted if c in available and enable]
        self.moved_self = False
        try:
            self.root.mkdir(exist_ok=True)
            try:
                self._enable()
            except OSError as e:
                if "cpuset" not in self.controllers:
                    raise
                # pinned cores are then the leader's affinity: not a reason to give up the cgroup
                log.warning("cgroup v2: cannot enable cpuset (%s): cores are pinned by affinity", e.strerror or e)
                self.controllers.remove("cpuset")
                self._enable()
        except OSError as e:
            self.close()
            raise ContainmentUnavailable(f"cgroup v2: cannot set up {self.root}: {e.strerror or e}") from None

    def _enable(self) -> None:
        if not self.controllers:
            return
        line = " ".join(f"+{c}" for c in self.controllers)
        try:
            write(self.own / "cgroup.subtree_control", line)
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            # Processes in our own cgroup: if they are only this agent, it moves into a leaf of its subtree.
            if pids_in(self.own / "cgroup.procs") - {os.getpid()}:
                raise ContainmentUnavailable(f"cgroup v2: {self.own} holds other processes than the agent, "
                                             "so it cannot delegate controllers (run the agent as a systemd "
                                             "unit with Delegate=yes)") from None
            leaf = self.root / "agent"
            leaf.mkdir(exist_ok=True)
            write(leaf / "cgroup.procs", str(os.getpid()))
            self.moved_self = True
            write(self.own / "cgroup.subtree_control", line)
        write(self.root / "cgroup.subtree_control", line)

    def create(self, activity: int, limits: Limits) -> V2Box:
        box = V2Box(self, activity)
        box.make(limits)
        return box

    def adopt(self, activity: int, key: str, pid: int) -> V2Box:
        return V2Box(self, activity, key)

    def boxes(self) -> list[V2Box]:
        """A box for each activity cgroup in the subtree."""
        return [V2Box(self, -1, d.name) for d in sorted(self.root.iterdir()) if self.root.is_dir()
                and d.is_dir() and d.name.startswith("a") and d.name != "agent"]

    def strays(self, known: set[str]) -> list[Stray]:
        return cgroup_strays(self.boxes(), known)

    def sweep(self, known: set[str]) -> None:
        for box in self.boxes():
            if box.key not in known:
                if not box.empty():
                    log.warning("cgroup v2: %s holds processes of no known activity: killing them", box.key)
                    kill_until_empty(box)
                box.remove()

    def close(self) -> None:
        if any(d.is_dir() and d.name != "agent" for d in self.root.iterdir()) if self.root.is_dir() else False:
            return  # activities still run in it
        if self.moved_self:
            try:
                off = " ".join(f"-{c}" for c in self.controllers)
                write(self.root / "cgroup.subtree_control", off)  # below first: a parent's may go only then
                write(self.own / "cgroup.subtree_control", off)
                write(self.own / "cgroup.procs", str(os.getpid()))
                (self.root / "agent").rmdir()
                self.moved_self = False
            except OSError as e:
                log.info("cgroup v2: the agent stays in %s: %s", self.root / "agent", e.strerror)
                return
        try:
            self.root.rmdir()
        except OSError:
            pass


class V2Box(CgroupBox):
    def __init__(self, owner: CgroupV2, activity: int, key: str | None = None) -> None:
        super().__init__()
        self.key = key or f"a{activity}"
        self.dir = self.procs_dir = owner.root / self.key
        self.limits: dict[str, int | None] = {"memory": None, "cpu_weight": None, "pids": None}
        self._peak = 0
        if key is not None:
            self.limits = self._read_limits()

    def limit(self, limits: Limits) -> None:
        d = self.dir
        if limits.memory is not None and (d / "memory.max").exists():
            write(d / "memory.max", str(limits.memory))
            if (d / "memory.swap.max").exists():
                write(d / "memory.swap.max", str(limits.swap or 0))
            self.limits["memory"] = limits.memory
        if limits.cpu_weight is not None and (d / "cpu.weight").exists():
            write(d / "cpu.weight", str(min(10000, max(1, limits.cpu_weight))))
            self.limits["cpu_weight"] = limits.cpu_weight
        if limits.cpu_cap is not None and (d / "cpu.max").exists():
            write(d / "cpu.max", f"{max(1000, int(limits.cpu_cap * CFS_PERIOD_US))} {CFS_PERIOD_US}")
        if limits.pids is not None and (d / "pids.max").exists():
            write(d / "pids.max", str(limits.pids))
            self.limits["pids"] = limits.pids
        if limits.cpus and (d / "cpuset.cpus").exists():
            write(d / "cpuset.cpus", ",".join(map(str, limits.cpus)))

    def isolation(self) -> dict[str, str]:
        return {"devices": "environment", "cpus": "cpuset" if (self.dir / "cpuset.cpus").exists() else "affinity"}

    def _read_limits(self) -> dict[str, int | None]:
        def number(name: str) -> int | None:
            text = read_text(self.dir / name).strip()
            return int(text) if text.isdigit() else None
        return {"memory": number("memory.max"), "cpu_weight": number("cpu.weight"), "pids": number("pids.max")}

    def cgroup_dirs(self) -> list[Path]:
        return [self.dir]

    def freeze(self, on: bool) -> bool:
        try:
            write(self.dir / "cgroup.freeze", "1" if on else "0")
        except OSError:
            return False
        if on:
            deadline = time.monotonic() + FREEZE_WAIT
            while keyed(read_text(self.dir / "cgroup.events")).get("frozen") != 1 and time.monotonic() < deadline:
                time.sleep(0.001)
        return True

    def kill(self) -> None:
        try:
            write(self.dir / "cgroup.kill", "1")
        except OSError:  # before Linux 5.14
            super().kill()

    def empty(self) -> bool:
        events = keyed(read_text(self.dir / "cgroup.events"))
        return events.get("populated", 0) == 0

    def usage(self) -> Usage:
        cpu = keyed(read_text(self.dir / "cpu.stat")).get("usage_usec", 0) / 1e6
        memory = read_int(self.dir / "memory.current")
        peak = read_int(self.dir / "memory.peak", -1)
        self._peak = max(self._peak, memory, peak)
        return Usage(cpu_seconds=cpu, memory=memory, memory_peak=self._peak)

    def oom(self) -> bool:
        return keyed(read_text(self.dir / "memory.events")).get("oom_kill", 0) > 0

    def applied(self) -> dict[str, int | None]:
        return dict(self.limits)
