"""Processes and process groups, as the runner needs to see them."""

from __future__ import annotations

import os
import signal

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


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send `sig` to every process of the group; a group that is gone is not an error."""
    if pgid <= 1:
        return  # never the agent's own group or every process
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """True while some process of the group runs (zombies waiting to be reaped do not count)."""
    if pgid <= 1:
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False
