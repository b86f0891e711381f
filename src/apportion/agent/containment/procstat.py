"""Reading /proc cheaply: one small read of /proc/PID/stat gives what process tracking needs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache


@cache
def ticks_per_second() -> int:
    return os.sysconf("SC_CLK_TCK")


@cache
def page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Stat:
    pid: int
    ppid: int
    pgrp: int
    sid: int
    zombie: bool
    cpu: int  # utime + stime, in clock ticks
    start: int  # clock ticks after boot: with the pid, names one process for good
    rss: int  # pages


def read_stat(pid: int) -> Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        rest = data[data.rindex(b")") + 2:].split()
        return Stat(pid=pid, ppid=int(rest[1]), pgrp=int(rest[2]), sid=int(rest[3]), zombie=rest[0] in (b"Z", b"X"),
                    cpu=int(rest[11]) + int(rest[12]), start=int(rest[19]), rss=int(rest[21]))
    except (ValueError, IndexError):
        return None


def cpu_ticks_of(pid: int) -> int | None:
    st = read_stat(pid)
    return None if st is None else st.cpu


def all_pids() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def environ_value(pid: int, name: str) -> str | None:
    """The value of `name` in the process's initial environment, if it can be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    prefix = name.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace")
    return None


def owner(pid: int) -> int | None:
    """The process's effective uid (its /proc directory's owner)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
