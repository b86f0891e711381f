"""What the containment tests share: the levels this machine offers (or why a test skips), a
daemonizing command, and whether a process is gone."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from apportion.agent.containment import Containment, ContainmentUnavailable, choose
from apportion.agent.containment.cgroup_v2 import CgroupV2
from apportion.agent.containment.select import agent_id, own_cgroups

PY = sys.executable
# Double-forks a `setsid` daemon that prints its pid, then the leader sleeps (or exits with `leader_exits`).
DAEMON = ("import os, sys, time\nr, w = os.pipe()\nif os.fork() == 0:\n os.setsid()\n if os.fork() == 0:\n"
          "  os.write(w, str(os.getpid()).encode()); os.close(w)\n  while True: time.sleep(1)\n os._exit(0)\n"
          "os.close(w)\nprint('daemon', os.read(r, 64).decode(), flush=True)\n"
          "if 'exit' not in sys.argv: time.sleep(600)\n")


def daemon_argv(leader_exits: bool = False) -> list[str]:
    return [PY, "-c", DAEMON] + (["exit"] if leader_exits else [])


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("cgroups and user switching need root (CI runs as root)")


def cgroup_level(workdir: Path) -> Containment:
    """The cgroup level `auto` picks here; skips when there is none (not root, no writable cgroup)."""
    need_root()
    c = choose("auto", workdir)
    if c.level == "process-group":
        c.close()
        pytest.skip("no writable cgroup (v2 with memory and pids delegated, or a v1 memory hierarchy) here")
    return c


def v2_stop_only(workdir: Path) -> Containment:
    """cgroup v2 without controllers (the stop, freeze, kill and emptiness work all the same), where
    this machine has a v2 hierarchy (hybrid hosts mount one at /sys/fs/cgroup/unified)."""
    need_root()
    own = own_cgroups().v2
    if own is None:
        pytest.skip("this process is in no cgroup v2 hierarchy")
    try:
        c = CgroupV2(own, agent_id(workdir), required=())
    except ContainmentUnavailable as e:
        pytest.skip(str(e))
    if not (c.root / "cgroup.kill").exists():
        c.close()
        pytest.skip("cgroup v2 without cgroup.kill (Linux before 5.14)")
    return c


def subtree_dirs(workdir: Path) -> list[Path]:
    """Every directory of the agent's subtree that exists, in any hierarchy."""
    cg = own_cgroups()
    name = f"apportion-{agent_id(workdir)}"
    return [d / name for d in [*cg.v1.values(), *([cg.v2] if cg.v2 else [])] if (d / name).exists()]
