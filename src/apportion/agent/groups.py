"""Processes, as the runner needs to see them: is this pid still the process it started?"""

from __future__ import annotations

import psutil

# psutil's create times are computed from clock ticks since boot: the same process gives the
# same value to within a tick, a later process with the same pid a different one.
_SAME_START = 0.05


def process_create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def is_alive(pid: int, create_time: float) -> bool:
    """True if `pid` is still the process that started at `create_time`, and not a zombie."""
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - create_time) < _SAME_START and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
