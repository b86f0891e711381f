"""The agent's ground, checked before it registers: can the execution users reach their directories?

Each activity runs in WORKDIR/activities/ID, its directory and its HOME when its user is a dynamic
one. A process finds its files there by path (a Dask worker makes its scratch space under its
working directory's path), so every directory above must let the execution user pass. A work
directory under a directory only root may enter (a 0700 home, a mkdtemp) would start every
activity, and each would fail with no reason; instead the agent stops at start, naming the
directory that bars the way.

The check is a real one: a process started as the execution user enters the directory (so ACLs
and the like count too); the message names the first directory whose mode bars that user.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from apportion.agent import users
from apportion.agent.environment import SAFE_PATH
from apportion.agent.users import RunAs, UserPolicy


class GroundProblem(Exception):
    """The agent cannot do its work here: the message says what and where."""


def _passes(st: os.stat_result, run_as: RunAs) -> bool:
    """May run_as search a directory of this mode and owner (by its mode bits)?"""
    if st.st_uid == run_as.uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in run_as.groups or st.st_gid == run_as.gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _bar(path: Path, run_as: RunAs) -> Path:
    """The first directory from / down to `path` that run_as may not pass through (else `path`)."""
    for d in [*reversed(path.parents), path]:
        try:
            if not _passes(os.stat(d), run_as):
                return d
        except OSError:
            return d
    return path


def unreachable(directory: Path, run_as: RunAs) -> str | None:
    """None when run_as can enter `directory`; else why, naming the directory that bars the way."""
    real = directory.resolve()
    try:
        probe = subprocess.run(["/bin/sh", "-c", 'cd -- "$1"', "sh", str(real)], cwd="/", env={"PATH": SAFE_PATH},
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=30, **users.popen_kwargs(run_as))
        entered = probe.returncode == 0
    except FileNotFoundError:  # no /bin/sh: the mode bits tell
        entered = _bar(real, run_as) == real and _passes(os.stat(real), run_as)
    if entered:
        return None
    bar = _bar(real, run_as)
    try:
        st = os.stat(bar)
        how = f" (mode {stat.S_IMODE(st.st_mode):04o}, uid {st.st_uid})"
    except OSError as e:
        how = f" ({e.strerror})"
    return (f"execution users cannot reach the work directory: {bar}{how} does not let {run_as.name} "
            f"(uid {run_as.uid}) through to {real}; give the agent a --workdir they can reach (as "
            f"/var/lib/apportion-agent, 0711, is) or let them through (chmod o+x {bar})")


def identities(policy: UserPolicy) -> list[RunAs]:
    """Whom a root agent runs work as when the plan names nobody: a dynamic uid (any of the range:
    none of them owns anything above the work directory), and the --default-user."""
    out = []
    if policy.dynamic is not None:
        out.append(users.dynamic_identity(policy.dynamic[0]))
    try:
        out.append(users.resolve(None, policy, "this host"))
    except users.Refused:
        pass  # a default user that does not exist here refuses its starts, with that reason
    return out


def check(activities: Path, policy: UserPolicy) -> None:
    """Raise GroundProblem when an execution user cannot reach `activities` (a root agent only:
    without root, work runs as the agent itself, which made the directory)."""
    if not users.is_root():
        return
    for run_as in identities(policy):
        why = unreachable(activities, run_as)
        if why is not None:
            raise GroundProblem(why)
