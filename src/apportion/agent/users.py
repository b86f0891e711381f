"""Who an activity runs as: the agent's user policy, in the spirit of YARN's container-executor.cfg.

A root agent switches to the activity's execution user (uid, gid, supplementary groups, HOME)
before anything of the activity runs. The user is the one the master names; where it names none,
a uid of the consumer's own from the --dynamic-users range (dynamic.py), or, with that range off
(or no consumer named), the agent's --default-user. A named user must pass the policy: a banned
user is always refused, uid 0 is always refused, and a uid below --min-uid is refused unless the
name is one of the --allowed-system-users. A non-root agent cannot switch: it runs work only as itself, and
refuses any other user.

A refusal names the user, the host and the rule, so the master can give it as the activity's
stop reason.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from apportion.agent.dynamic import DEFAULT_RANGE, DynamicUsers, name_of

OUTPUT_STREAMS = ("stdout", "stderr")


@dataclass(frozen=True)
class UserPolicy:
    default_user: str = "nobody"
    min_uid: int = 1000
    banned_users: frozenset[str] = frozenset({"root"})
    allowed_system_users: frozenset[str] = frozenset({"nobody"})
    # uids given to consumers that name no execution user (None: they run as default_user)
    dynamic: tuple[int, int] | None = DEFAULT_RANGE


@dataclass(frozen=True)
class RunAs:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]  # supplementary groups
    home: str
    dynamic: bool = False  # a consumer's uid from --dynamic-users (no passwd entry)


class Refused(Exception):
    """The policy refuses the user: nothing of the activity may run."""

    def __init__(self, user: str, host: str, rule: str, uid: int | None = None) -> None:
        self.user, self.host, self.rule, self.uid = user, host, rule, uid
        who = f"user {user}" if uid is None else f"user {user} (uid {uid})"
        super().__init__(f"{who} refused on {host}: {rule}")


def is_root() -> bool:
    """Can this agent switch users?"""
    return os.geteuid() == 0


def _run_as(entry: pwd.struct_passwd) -> RunAs:
    try:
        groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid))))
    except OSError:
        groups = (entry.pw_gid,)
    return RunAs(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid, groups=groups, home=entry.pw_dir)


def agent_identity() -> RunAs:
    """The user the agent runs as (a uid missing from the passwd database is named by its number)."""
    uid = os.geteuid()
    try:
        return _run_as(pwd.getpwuid(uid))
    except KeyError:
        return RunAs(name=str(uid), uid=uid, gid=os.getegid(), groups=tuple(sorted(set(os.getgroups()))),
                     home="/")


def run_as_json() -> dict[str, Any]:
    """The register body's "run_as": can this agent switch users, and whom it runs as itself."""
    return {"root": is_root(), "user": agent_identity().name}


def parse_names(text: str, flag: str) -> frozenset[str]:
    """A comma-separated list of user names (a flag's value); raises ValueError naming the flag."""
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    for n in names:
        if any(c.isspace() or c in ":/\x00" for c in n):
            raise ValueError(f"{flag}: {n!r} is not a user name")
    return names


def account_name(uid: int | None) -> str | None:
    """The name of ``uid``: its passwd entry's, or a dynamic user's (no entry)."""
    if uid is None:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return name_of(uid)


def dynamic_identity(uid: int, home: str = "/") -> RunAs:
    """A dynamic user: no passwd entry, its primary group the gid of the same number, no other group."""
    return RunAs(name=name_of(uid), uid=uid, gid=uid, groups=(uid,), home=home, dynamic=True)


def resolve(requested: str | None, policy: UserPolicy, host: str, consumer: str | None = None,
            dynamic: DynamicUsers | None = None) -> RunAs:
    """The user an activity runs as; raises Refused naming the user, the host and the rule.

    `consumer` is the activity's consumer path, for a uid of its own when no user is named (a
    root agent with `dynamic` assignments)."""
    if not is_root():
        me = agent_identity()
        if requested is None or requested == me.name:
            return me
        raise Refused(requested, host, f"the agent runs as {me.name} without root: cannot run as {requested}")
    if requested is None and consumer is not None and dynamic is not None:
        uid = dynamic.uid_for(consumer)
        if uid is None:
            raise Refused(f"(none named for {consumer})", host,
                          f"every uid of --dynamic-users {dynamic.lo}-{dynamic.hi} is taken")
        return dynamic_identity(uid)
    name = policy.default_user if requested is None else requested
    if name in policy.banned_users:
        raise Refused(name, host, "banned user (--banned-users)")
    try:
        entry = pwd.getpwnam(name)
    except (KeyError, ValueError):  # ValueError: a NUL byte in the name
        raise Refused(name, host, "no such user") from None
    if entry.pw_uid == 0:
        raise Refused(name, host, "uid 0 never runs work", uid=0)
    if entry.pw_uid < policy.min_uid and name not in policy.allowed_system_users:
        raise Refused(name, host, f"uid below --min-uid {policy.min_uid} (not in --allowed-system-users)",
                      uid=entry.pw_uid)
    return _run_as(entry)


def switches(run_as: RunAs) -> bool:
    """Does starting a process as run_as change user (the agent is root and run_as is someone else)?"""
    return is_root() and run_as.uid != os.geteuid()


def popen_kwargs(run_as: RunAs) -> dict[str, Any]:
    """subprocess.Popen's arguments that make the child run_as: uid, gid and exactly its supplementary
    groups (the agent's own groups are dropped); nothing when the agent does not switch."""
    if not switches(run_as):
        return {}
    return {"user": run_as.uid, "group": run_as.gid, "extra_groups": list(run_as.groups)}


def prepare_dir(path: Path, run_as: RunAs) -> None:
    """Make the activity's directory (mode 0700) and its empty stdout and stderr files, all owned
    by the user. Its parent must be the agent's own (not writable by any execution user)."""
    path.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{path} is not a directory")
    for stream in OUTPUT_STREAMS:
        fd = os.open(path / stream, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        try:
            if switches(run_as):
                os.fchown(fd, run_as.uid, run_as.gid)
        finally:
            os.close(fd)
    os.chmod(path, 0o700)
    if switches(run_as):
        os.chown(path, run_as.uid, run_as.gid, follow_symlinks=False)


def open_output(path: Path) -> BinaryIO:
    """An activity's stdout or stderr file opened for appending, never through a symlink: the
    directory belongs to the activity's user, who may have replaced the file with a link to a file
    only the agent can write."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, "ab")


def open_for_reading(path: Path) -> BinaryIO:
    """An activity's output file opened to read its tail, never through a symlink and only if it is
    a regular file (a user's link or FIFO there must not make the agent read or block on something else)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise

