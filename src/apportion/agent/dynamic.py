"""Distinct default identities, in the spirit of systemd's DynamicUser=.

When the master names no execution user for an activity (its consumer's plan has no
`execution_user` on its path), a root agent runs it under a uid of its own for that consumer,
taken from the range it is given (`--dynamic-users`, default 61184-65519, systemd's range for
dynamic users). No passwd entry is needed: the uid's primary group is the gid of the same number,
and it has no other group; HOME is the activity's directory.

The uid is stable per consumer path: the first pick is a hash of the path into the range, so the
same consumer gets the same uid on every host where nothing else holds it; a uid already given to
another consumer, one the passwd or group database names, or one that owns a running process is
skipped (the next free one in the range, wrapping round). What was given is kept in
STATE_DIR/dynamic-users.json (written whole, then renamed; mode 0600), so an agent restarted keeps
every consumer's uid, and a uid, once given to a consumer, is never given to another one by this
agent: files such a uid left behind (in /tmp, /dev/shm) never reach another tenant. A full range
refuses the start, naming the consumer.

Two agents on one host each keep their own file: give them disjoint ranges.
"""

from __future__ import annotations

import grp
import hashlib
import json
import logging
import os
import pwd
from pathlib import Path

from apportion.agent.containment.procstat import all_pids, owner

log = logging.getLogger("apportion.agent")

DEFAULT_RANGE = (61184, 65519)  # systemd's DynamicUser range
UID_MAX = 2**31 - 2  # the largest uid the kernel and every tool take (2^32 - 1 is "no uid")
FILE = "dynamic-users.json"
NAME_PREFIX = "dynamic-"  # the name an activity reports (and USER, LOGNAME): dynamic-UID


def parse_range(text: str) -> tuple[int, int] | None:
    """`LO-HI` (inclusive) or `off`; raises ValueError saying what is wrong."""
    text = text.strip()
    if text.lower() in ("off", "none", "no"):
        return None
    lo_text, sep, hi_text = text.partition("-")
    try:
        if not sep:
            raise ValueError
        lo, hi = int(lo_text), int(hi_text)
    except ValueError:
        raise ValueError(f"{text!r} is not LO-HI (two uids) or off") from None
    if not 1 <= lo <= hi <= UID_MAX:
        raise ValueError(f"{text!r}: want 1 <= LO <= HI <= {UID_MAX}")
    return lo, hi


def name_of(uid: int) -> str:
    return f"{NAME_PREFIX}{uid}"


def _named(uid: int) -> bool:
    """Does the passwd or group database know this number (a real account or group)?"""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            continue
    return False


def _busy_uids() -> set[int]:
    """The uids that own a running process now."""
    out = set()
    for pid in all_pids():
        uid = owner(pid)
        if uid is not None:
            out.add(uid)
    return out


class DynamicUsers:
    """The consumer -> uid assignments of one agent (or of the agents one process runs)."""

    def __init__(self, state_dir: Path, lo: int, hi: int) -> None:
        self.path = state_dir / FILE
        self.lo, self.hi = lo, hi
        self.assigned: dict[str, int] = self._load()

    @property
    def size(self) -> int:
        return self.hi - self.lo + 1

    def first_pick(self, consumer: str) -> int:
        """Where the search for a consumer's uid starts: a hash of its path into the range."""
        digest = hashlib.sha256(consumer.encode("utf-8", errors="surrogatepass")).digest()
        return self.lo + int.from_bytes(digest[:8], "big") % self.size

    def uid_for(self, consumer: str) -> int | None:
        """The consumer's uid (given now if it has none); None when every uid of the range is taken."""
        uid = self.assigned.get(consumer)
        if uid is not None:
            return uid
        taken = set(self.assigned.values())
        busy: set[int] | None = None
        start = self.first_pick(consumer) - self.lo
        for i in range(self.size):
            uid = self.lo + (start + i) % self.size
            if uid in taken or _named(uid):
                continue
            if busy is None:
                busy = _busy_uids()  # read once, only when a uid is about to be given
            if uid in busy:
                continue
            self.assigned[consumer] = uid
            self._save()
            log.info("consumer %s: dynamic uid %d", consumer, uid)
            return uid
        return None

    def _load(self) -> dict[str, int]:
        try:
            raw = json.loads(self.path.read_text())
            users = raw["users"]
            if not isinstance(users, dict):
                raise TypeError("users: not an object")
        except FileNotFoundError:
            return {}
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            aside = self.path.with_suffix(".bad")
            os.replace(self.path, aside)
            log.warning("%s cannot be read (%s): set aside as %s; consumers get their uids again", self.path, e,
                        aside)
            return {}
        out: dict[str, int] = {}
        seen: set[int] = set()
        for consumer, uid in sorted(users.items()):
            # outside the range now (the operator changed it), or a second consumer on one uid: given again
            if isinstance(uid, int) and not isinstance(uid, bool) and self.lo <= uid <= self.hi and uid not in seen:
                out[str(consumer)] = uid
                seen.add(uid)
        return out

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        data = {"range": [self.lo, self.hi], "users": dict(sorted(self.assigned.items()))}
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            os.fchmod(f.fileno(), 0o600)
            json.dump(data, f)
        os.replace(tmp, self.path)
