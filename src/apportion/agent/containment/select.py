"""Which containment this agent uses, decided once at start (`--containment auto|cgroup-v2|cgroup-v1|process-group`).

auto takes the first that works: cgroup v2 if memory and pids are delegated to the agent's own v2
cgroup; else cgroup v1 if a memory hierarchy is writable under the agent's own v1 cgroup (with
pids, freezer, cpu and cpuacct where they are writable too); else process tracking. A level named
on the command line that cannot work is an error that says why (the agent does not start).

The agent's subtree is `apportion-<agent id>` in its own cgroup, the id a hash of its work
directory: agents on one machine never share one, and a restarted agent finds its own again.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from apportion.agent.containment.base import LEVELS, Containment, ContainmentUnavailable
from apportion.agent.containment.cgroup_v1 import CgroupV1
from apportion.agent.containment.cgroup_v2 import CgroupV2
from apportion.agent.containment.procgroup import ProcessGroup

log = logging.getLogger("apportion.agent")
CHOICES = ("auto", *LEVELS)


def agent_id(workdir: Path) -> str:
    return hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:12]


@dataclass
class Cgroups:
    """Where this process's cgroups are: v1 controller -> directory; the v2 directory, if any."""

    v1: dict[str, Path] = field(default_factory=dict)
    v2: Path | None = None


def _unescape(path: str) -> str:
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def own_cgroups(proc_cgroup: str = "/proc/self/cgroup", mountinfo: str = "/proc/self/mountinfo") -> Cgroups:
    """Read /proc/self/cgroup and /proc/self/mountinfo: the directories of this process's own cgroups."""
    own_v1: dict[str, str] = {}
    own_v2: str | None = None
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return Cgroups()
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            own_v2 = parts[2]
        else:
            for c in parts[1].split(","):
                own_v1[c] = parts[2]
    out = Cgroups()
    try:
        mounts = Path(mountinfo).read_text().splitlines()
    except OSError:
        return out
    for line in mounts:
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        root, mountpoint, fstype = _unescape(fields[3]), Path(_unescape(fields[4])), rfields[0]
        if fstype == "cgroup2" and own_v2 is not None and out.v2 is None:
            out.v2 = _below(mountpoint, root, own_v2)
        elif fstype == "cgroup":
            for c in rfields[2].split(","):
                if c in own_v1 and c not in out.v1:
                    d = _below(mountpoint, root, own_v1[c])
                    if d is not None:
                        out.v1[c] = d
    return out


def _below(mountpoint: Path, root: str, own: str) -> Path | None:
    """The directory of cgroup `own` in a hierarchy mounted at `mountpoint` from `root` (None if not visible)."""
    if root != "/" and not (own == root or own.startswith(root.rstrip("/") + "/")):
        return None
    rel = own[len(root):] if root != "/" else own
    return mountpoint / rel.lstrip("/")


def choose(level: str, workdir: Path, cgroups: Cgroups | None = None, cpuset: bool = False) -> Containment:
    """The containment to use; raises ContainmentUnavailable when a named level cannot work.
    `cpuset`: activities are pinned to their cores (cgroup v1 uses its cpuset hierarchy)."""
    if level not in CHOICES:
        raise ContainmentUnavailable(f"--containment {level!r}: one of {', '.join(CHOICES)}")
    ident = agent_id(workdir)
    cg = cgroups or own_cgroups()
    reasons: list[str] = []
    if level in ("auto", "cgroup-v2"):
        try:
            if cg.v2 is None:
                raise ContainmentUnavailable("cgroup v2: this process is in no v2 cgroup")
            return CgroupV2(cg.v2, ident, cpuset=cpuset)
        except ContainmentUnavailable as e:
            if level != "auto":
                raise
            reasons.append(str(e))
    if level in ("auto", "cgroup-v1"):
        try:
            return CgroupV1(cg.v1, ident, cpuset=cpuset)
        except ContainmentUnavailable as e:
            if level != "auto":
                raise
            reasons.append(str(e))
    if reasons:
        log.warning("containment: no cgroup can be made (%s): falling back to process tracking, which limits "
                    "nothing", "; ".join(reasons))
    return ProcessGroup(ident)


def discard(workdir: Path, cgroups: Cgroups | None = None) -> int:
    """Kill every process of the agent on `workdir` (at any level) and remove its cgroup subtree: after
    an agent that will not come back (tests, an operator tidying a host). Returns the processes found."""
    from apportion.agent.containment.cgroup_v1 import subtree_name
    from apportion.agent.containment.procgroup import TAG_VAR
    from apportion.agent.containment.procstat import all_pids, environ_value
    from apportion.agent.containment.base import kill_all

    ident = agent_id(workdir)
    cg = cgroups or own_cgroups()
    found = 0
    holders: list[CgroupV1 | CgroupV2] = []
    if cg.v2 is not None and (cg.v2 / subtree_name(ident)).is_dir():
        holders.append(CgroupV2(cg.v2, ident, required=(), enable=False))
    if any((d / subtree_name(ident)).is_dir() for d in cg.v1.values()):
        try:
            holders.append(CgroupV1(cg.v1, ident, cpuset="cpuset" in cg.v1 and
                                    (cg.v1["cpuset"] / subtree_name(ident)).is_dir()))
        except ContainmentUnavailable:
            pass
    for holder in holders:
        found += len(holder.members(holder.boxes()))
        holder.sweep(set())
        holder.close()
    tagged = [pid for pid in all_pids() if (environ_value(pid, TAG_VAR) or "").startswith(ident + ":")]
    kill_all(tagged, 9)
    return found + len(tagged)
