"""Process tracking without cgroups: each activity is a new session (process group), and its
environment carries APPORTION_ACTIVITY_TAG=<agent id>:<activity>, which every descendant inherits.

One scan of /proc per poll serves every activity: a process belongs to an activity if it is in its
leader's process group or session, carries its tag, or is a child of a process that belongs to it.
A `setsid` double-forked daemon keeps the tag, so it is found and stopped. What this level cannot
do: limit memory, CPU or processes; stop a process that cleared its environment and left the
session before a scan saw it; see the kernel's OOM kills. Usage is summed from /proc over the
processes seen (memory is the sum of their resident sets, the peak the largest sum seen).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

from apportion.agent.containment.base import Box, Containment, Limits, Stray, Usage, kill_all
from apportion.agent.containment.procstat import (Stat, all_pids, environ_value, page_size, read_stat,
                                                  ticks_per_second)

TAG_VAR = "APPORTION_ACTIVITY_TAG"
SCAN_EVERY = 1.0  # seconds between scans when no activity is being stopped or ending


class ProcessGroup(Containment):
    level = "process-group"

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self._tags: dict[tuple[int, int], str | None] = {}  # (pid, start) -> its tag, read once
        self._scanned_at = -1e9
        self.stats: dict[int, Stat] = {}

    def create(self, activity: int, limits: Limits) -> GroupBox:
        return GroupBox(self, activity)

    def adopt(self, activity: int, key: str, pid: int) -> GroupBox:
        box = GroupBox(self, activity, key)
        if pid > 0:
            box.started(pid)
        return box

    def strays(self, known: set[str]) -> list[Stray]:
        """Processes carrying this agent's tag for an activity no known box has (the tag survives
        ``setsid`` and the agent's own death), the oldest of each activity first seen."""
        mine = f"{self.agent_id}:"
        found: dict[str, tuple[int, int]] = {}  # tag -> (start, pid) of its oldest process
        for pid in all_pids():
            st = read_stat(pid)
            if st is None or st.zombie:
                continue
            tag = environ_value(pid, TAG_VAR)
            if tag is None or not tag.startswith(mine) or tag in known or not tag[len(mine):].isdigit():
                continue
            if tag not in found or st.start < found[tag][0]:
                found[tag] = (st.start, pid)
        return [Stray(int(tag[len(mine):]), tag, pid) for tag, (_, pid) in sorted(found.items())]

    def refresh(self, boxes: Iterable[Box], force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._scanned_at < SCAN_EVERY:
            return
        self._scanned_at = now
        self.scan([b for b in boxes if isinstance(b, GroupBox) and b.owner is self])

    def scan(self, boxes: list[GroupBox]) -> None:
        stats: dict[int, Stat] = {}
        me = os.getpid()
        for pid in all_pids():
            if pid == me:
                continue
            st = read_stat(pid)
            if st is not None:
                stats[pid] = st
        self.stats = stats
        tags: dict[tuple[int, int], str | None] = {}
        for st in stats.values():
            k = (st.pid, st.start)
            tags[k] = self._tags[k] if k in self._tags else environ_value(st.pid, TAG_VAR)
        self._tags = tags
        by_tag = {b.tag: b for b in boxes}
        members: dict[GroupBox, dict[int, int]] = {b: {} for b in boxes}
        owner_of: dict[int, GroupBox] = {}
        leaders = {b.leader: b for b in boxes if b.leader}
        for st in sorted(stats.values(), key=lambda s: s.start):  # parents before their children
            if st.zombie:
                continue
            box = by_tag.get(tags[(st.pid, st.start)] or "")
            if box is None:
                box = leaders.get(st.pgrp) or leaders.get(st.sid)
                if box is not None and st.start < box.leader_start:
                    box = None  # an older process whose group number happens to match
            if box is None:
                box = owner_of.get(st.ppid)
            if box is not None:
                members[box][st.pid] = st.start
                owner_of[st.pid] = box
        for b in boxes:
            b.seen(members[b], stats)


class GroupBox(Box):
    def __init__(self, owner: ProcessGroup, activity: int, key: str | None = None) -> None:
        self.owner = owner
        self.tag = key or f"{owner.agent_id}:{activity}"
        self.key = self.tag
        self.leader = 0
        self.leader_start = 0
        self.members: dict[int, int] = {}  # pid -> start, as the last scan saw them
        self._cpu: dict[tuple[int, int], int] = {}  # ticks, per process ever seen
        self._memory = 0
        self._peak = 0

    def env(self) -> dict[str, str]:
        return {TAG_VAR: self.tag}

    def started(self, pid: int) -> None:
        self.leader = pid
        st = read_stat(pid)
        self.leader_start = st.start if st is not None else 0
        self.members = {pid: self.leader_start}

    def seen(self, members: dict[int, int], stats: dict[int, Stat]) -> None:
        self.members = members
        memory = 0
        for pid, start in members.items():
            st = stats[pid]
            self._cpu[(pid, start)] = st.cpu
            memory += st.rss
        self._memory = memory * page_size()
        self._peak = max(self._peak, self._memory)

    def procs(self) -> set[int]:
        return set(self.members)

    def signal(self, sig: int) -> None:
        self.owner.scan([self])  # what runs now, not at the last scan
        if self.leader > 1:
            try:
                os.killpg(self.leader, sig)
            except (ProcessLookupError, PermissionError):
                pass
        # Only processes still the ones the scan saw (a pid reused since is someone else's).
        kill_all([pid for pid, start in self.members.items()
                  if (st := read_stat(pid)) is not None and st.start == start], sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def empty(self) -> bool:
        # The runner refreshed the scan this poll; a member seen then is looked at again now.
        for pid, start in self.members.items():
            st = read_stat(pid)
            if st is not None and st.start == start and not st.zombie:
                return False
        return True

    def usage(self) -> Usage:
        return Usage(cpu_seconds=sum(self._cpu.values()) / ticks_per_second(), memory=self._memory,
                     memory_peak=self._peak)

    def applied(self) -> dict[str, int | None]:
        return {"memory": None, "cpu_weight": None, "pids": None}

    def remove(self) -> None:
        self.members = {}
