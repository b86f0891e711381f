"""One interface for holding an activity's processes, as Slurm's proctrack plugins do: an
implementation each for cgroup v2, cgroup v1 and plain process tracking, chosen when the agent
starts (select.py) and named in what the host reports.

A `Containment` is the agent's subtree (or, without cgroups, its process table scan); a `Box` is
one activity in it. The runner's use of a box, in order:

1. `Containment.create(activity, limits)` before the process starts (makes the cgroup, writes limits);
2. `box.enter` in the child between fork and exec (puts it in the cgroup), `box.env()` in its
   environment, `box.started(pid)` once it runs;
3. while it runs: `box.usage()`, `box.applied()`;
4. a stop: `box.signal(SIGTERM)`, later `box.kill()`; `box.empty()` says when every process is gone
   (only then does the activity end); `box.oom()` whether the kernel OOM-killed something in it;
5. `box.remove()` at the end. After an agent restart, `Containment.adopt(activity, key, pid)` finds
   the box again from what the state file kept (`box.key`).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from apportion.agent.containment.procstat import read_stat

log = logging.getLogger("apportion.agent")
LEVELS = ("cgroup-v2", "cgroup-v1", "process-group")


class ContainmentUnavailable(Exception):
    """The containment level asked for cannot work here; the message says why."""


@dataclass(frozen=True)
class Limits:
    """What an activity's processes may use together; None is no limit."""

    memory: int | None = None  # bytes
    swap: int | None = None  # bytes of swap beyond memory
    cpu_weight: int | None = None  # 100 per slot (cgroup v2's cpu.weight scale)
    cpu_cap: float | None = None  # cores: a hard cap (CFS quota / cpu.max)
    pids: int | None = None
    # device nodes (major, minor) its processes may not open, and those they may (cgroup v1 devices)
    devices_deny: tuple[tuple[int, int], ...] = ()
    devices_allow: tuple[tuple[int, int], ...] = ()
    cpus: tuple[int, ...] | None = None  # the CPUs it is pinned to (cgroup v1 cpuset); None: not pinned


@dataclass
class Usage:
    cpu_seconds: float = 0.0
    memory: int = 0  # bytes now
    memory_peak: int = 0  # the most it held

    def as_json(self) -> dict[str, float | int]:
        return asdict(self) | {"cpu_seconds": round(self.cpu_seconds, 3)}


class Box(ABC):
    """One activity's processes."""

    key: str  # what the state file keeps to adopt it after a restart
    joins = False  # does the child need `enter` (a cgroup to join) between fork and exec?

    def enter(self) -> None:
        """Run in the child between fork and exec: join the box. Nothing here but os.write calls."""

    def env(self) -> dict[str, str]:
        """Variables the activity's environment must carry for the box to find its processes."""
        return {}

    def started(self, pid: int) -> None:
        """The activity's first process runs; the parent closes what `enter` needed."""

    def close_enter(self) -> None:
        """The start failed or is done: let go of what `enter` needed."""

    @abstractmethod
    def procs(self) -> set[int]:
        """Pids of every process in the box now."""

    @abstractmethod
    def signal(self, sig: int) -> None:
        """Send `sig` to every process, with nothing forking away meanwhile where the level allows."""

    def kill(self) -> None:
        """SIGKILL every process."""
        self.signal(signal.SIGKILL)

    @abstractmethod
    def empty(self) -> bool:
        """True once no process of the box lives (zombies do not count)."""

    @abstractmethod
    def usage(self) -> Usage: ...

    def oom(self) -> bool:
        """Did the kernel OOM-kill a process of the box?"""
        return False

    @abstractmethod
    def applied(self) -> dict[str, int | None]:
        """The limits in force: {"memory", "cpu_weight", "pids"}."""

    def isolation(self) -> dict[str, str]:
        """How its GPUs and cores are held apart from the others': {"devices": "cgroup-v1" or
        "environment", "cpus": "cpuset" or "affinity"} (what this box enforces itself)."""
        return {"devices": "environment", "cpus": "affinity"}

    @abstractmethod
    def remove(self) -> None:
        """Let go of the box (its cgroup is removed); only once it is empty."""


class CgroupBox(Box):
    """What the v1 and v2 boxes share: joining, listing, signalling frozen, removing."""

    joins = True
    procs_dir: Path  # the cgroup whose tree lists the processes

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._step: Callable[[], None] | None = None

    @abstractmethod
    def cgroup_dirs(self) -> list[Path]:
        """The box's cgroup in each hierarchy it uses."""

    @abstractmethod
    def limit(self, limits: Limits) -> None:
        """Write the limits into the box's cgroups."""

    @abstractmethod
    def freeze(self, on: bool) -> bool:
        """Freeze (or thaw) the box; False where it cannot be frozen."""

    def make(self, limits: Limits) -> None:
        """Make the box's cgroups, write its limits and open them for the process to join;
        on any failure, leave nothing behind."""
        try:
            for d in self.cgroup_dirs():
                d.mkdir(exist_ok=True)
            self.limit(limits)
            self.open_enter()
        except OSError:
            self.close_enter()
            self.remove()
            raise

    def open_enter(self) -> None:
        self._fds, self._step = enter_fds(d / "cgroup.procs" for d in self.cgroup_dirs())

    def enter(self) -> None:
        if self._step is not None:
            self._step()

    def started(self, pid: int) -> None:
        self.close_enter()

    def close_enter(self) -> None:
        close_fds(self._fds)
        self._step = None

    def procs(self) -> set[int]:
        out: set[int] = set()
        if self.procs_dir.is_dir():
            for d in tree_dirs(self.procs_dir):
                out |= pids_in(d / "cgroup.procs")
        return out

    def signal(self, sig: int) -> None:
        frozen = self.freeze(True)
        try:
            kill_all(self.procs(), sig)
        finally:
            if frozen:
                self.freeze(False)

    def remove(self) -> None:
        self.close_enter()
        self.freeze(False)
        for top in self.cgroup_dirs():
            if not top.is_dir():
                continue
            for d in tree_dirs(top):
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as e:
                    log.warning("cannot remove cgroup %s: %s", d, e.strerror)


@dataclass(frozen=True)
class Stray:
    """Processes of activity ``activity`` found in box ``key``; ``pid``: the oldest of them."""
    activity: int
    key: str
    pid: int


def oldest(pids: Iterable[int]) -> int:
    """Of ``pids``, the one that started first (0: none readable): an adopted box's leader."""
    best, when = 0, None
    for pid in pids:
        st = read_stat(pid)
        if st is not None and not st.zombie and (when is None or st.start < when):
            best, when = pid, st.start
    return best


def cgroup_strays(boxes: Iterable[CgroupBox], known: set[str]) -> list[Stray]:
    """The cgroup levels' strays: activity cgroups (``aN``) no known box owns, with processes."""
    out = []
    for box in boxes:
        if box.key in known or not box.key[1:].isdigit():
            continue
        pid = oldest(box.procs())
        if pid:
            out.append(Stray(int(box.key[1:]), box.key, pid))
    return out


class Containment(ABC):
    level: str

    @abstractmethod
    def create(self, activity: int, limits: Limits) -> Box: ...

    @abstractmethod
    def adopt(self, activity: int, key: str, pid: int) -> Box:
        """The box of an activity a previous agent on this work directory started."""

    def refresh(self, boxes: Iterable[Box], force: bool = False) -> None:
        """Once per poll, before boxes are asked about their processes (process tracking scans here)."""

    def members(self, boxes: Iterable[Box]) -> set[int]:
        """Pids in any of `boxes` (for counting alien processes)."""
        out: set[int] = set()
        for b in boxes:
            out |= b.procs()
        return out

    def strays(self, known: set[str]) -> list[Stray]:
        """At start, before ``sweep``: activities whose processes run here in no known box, as an
        agent stopped between starting a process and recording it leaves them. The runner adopts
        them, so that its host lists what runs there and the master keeps their slots fenced."""
        return []

    def sweep(self, known: set[str]) -> None:
        """At start: kill and remove what is in the subtree but belongs to no known box."""

    def close(self) -> None:
        """The agent exits: remove the subtree if nothing runs in it."""


def kill_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        if pid <= 1 or pid == os.getpid():
            continue
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_until_empty(box: Box, timeout: float = 2.0) -> None:
    """SIGKILL a box's processes until it is empty, for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not box.empty() and time.monotonic() < deadline:
        box.kill()
        time.sleep(0.01)


def read_text(path: Path | str, default: str = "") -> str:
    """A small cgroup or /proc file, read with plain system calls (this runs for every activity)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return default
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return default
    finally:
        os.close(fd)


def read_int(path: Path | str, default: int = 0) -> int:
    try:
        return int(read_text(path).strip())
    except ValueError:
        return default


def keyed(text: str) -> dict[str, int]:
    """`name value` lines (memory.events, cpu.stat, memory.oom_control) as a dict."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        try:
            out[name] = int(value)
        except ValueError:
            continue
    return out


def write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def pids_in(procs_file: Path) -> set[int]:
    return {int(x) for x in read_text(procs_file).split() if x.isdigit()}


def tree_dirs(top: Path) -> list[Path]:
    """`top` and every cgroup below it, deepest first (the order rmdir needs)."""
    found: list[Path] = []
    for root, dirs, _ in os.walk(top):
        found.extend(Path(root) / d for d in dirs)
    return sorted(found, key=lambda p: len(p.parts), reverse=True) + [top]


def enter_fds(procs_files: Iterable[Path]) -> tuple[list[int], Callable[[], None]]:
    """File descriptors on cgroup.procs files, opened by the agent, and the child's step that writes
    "0" (itself) to each: opened before the fork, the child may write them after it switched users."""
    fds = [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in procs_files]

    def step() -> None:
        for fd in fds:
            os.write(fd, b"0")
    return fds, step


def close_fds(fds: list[int]) -> None:
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass
