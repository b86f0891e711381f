"""Alien processes, as DUCC's agent counts them: processes of non-system users (uid at or above the
policy's --min-uid, not one of the --allowed-system-users) that belong to no activity of this agent."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable

from apportion.agent.containment.procstat import all_pids, owner


def system_uids(names: Iterable[str]) -> frozenset[int]:
    out = set()
    for name in names:
        try:
            out.add(pwd.getpwnam(name).pw_uid)
        except (KeyError, ValueError):
            continue
    return frozenset(out)


def alien_pids(members: set[int], min_uid: int, system: frozenset[int]) -> set[int]:
    """Pids of non-system users' processes outside `members` (the activities' processes) and the agent."""
    me = os.getpid()
    out = set()
    for pid in all_pids():
        if pid == me or pid in members:
            continue
        uid = owner(pid)
        if uid is not None and uid >= min_uid and uid not in system:
            out.add(pid)
    return out
