"""The agent's small state file: what it started, so a restarted agent knows what still runs.

One JSON object in WORKDIR/state.json, written whole to a temporary file and renamed over the
old one, so a crash of the agent leaves either the old file or the new one. It is not synced to
disk: what it describes are processes, and a crash of the host that could lose the file's last
write ends them too. A file that cannot be read (a host crash mid-write) is set aside and the
agent starts with none. What still runs in its containment for an activity the file does not
list (that, or an agent stopped between starting a process and writing it here) is then found
by its cgroup or its tag and adopted as running: the host lists it, and the master stops it if
it does not know it, keeping its slots fenced until it is gone.

Beside the activities, "removals" holds when each forgotten activity's directory is due to go
(Unix time): the retention outlives an agent restart.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, fields
from typing import Any
from pathlib import Path

STATE_FILE = "state.json"
log = logging.getLogger("apportion.agent")


@dataclass
class Entry:
    """One activity as the state file keeps it."""

    allocation: int | None
    pid: int
    create_time: float  # psutil's, to tell this process from a later one with the same pid
    state: str  # "running", "exited", "killed" or "failed"
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None  # why it failed, or ran out of memory
    box: str | None = None  # its containment's key (cgroup name or tag), to adopt it after a restart
    user: str | None = None
    uid: int | None = None
    limits: dict[str, Any] | None = None  # what the agent applied
    disk: int | None = None  # bytes its directory may take (--disk-per-slot x slots); None: no limit
    usage: dict[str, Any] | None = None  # the last usage read
    oom: bool = False
    unkillable: bool = False


def load(workdir: Path) -> dict[int, Entry]:
    path = workdir / STATE_FILE
    try:
        raw = json.loads(path.read_text())
        names = {f.name for f in fields(Entry)}  # a key this agent does not know (a newer one wrote it) is left out
        return {int(k): Entry(**{n: x for n, x in v.items() if n in names})
                for k, v in raw.get("activities", {}).items()}
    except FileNotFoundError:
        return {}
    except (ValueError, TypeError, AttributeError) as e:  # never a reason for the agent not to start
        aside = path.with_suffix(".bad")
        os.replace(path, aside)
        log.warning("%s cannot be read (%s): set aside as %s; starting with no activities", path, e, aside)
        return {}


def load_removals(workdir: Path) -> dict[int, float]:
    """Activity directories due to be removed, and when (Unix time); none from a file that cannot be read."""
    try:
        raw = json.loads((workdir / STATE_FILE).read_text()).get("removals", {})
        return {int(k): float(v) for k, v in raw.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def save(workdir: Path, entries: dict[int, Entry], removals: dict[int, float] | None = None) -> None:
    path = workdir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    data: dict[str, Any] = {"activities": {str(k): asdict(v) for k, v in sorted(entries.items())}}
    if removals:
        data["removals"] = {str(k): v for k, v in sorted(removals.items())}
    # 0600: it names every activity's user, limits and pid, and the work directory is 0711
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        os.fchmod(f.fileno(), 0o600)  # a file left by an older agent keeps its mode otherwise
        json.dump(data, f)
    os.replace(tmp, path)
