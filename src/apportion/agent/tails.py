"""The last lines of an activity's stdout or stderr file, read again only when the file grew."""

from __future__ import annotations

import os
from pathlib import Path

from apportion.agent.users import open_for_reading

TAIL_LINES = 100
LINE_CHARS = 2000  # a longer line is cut to this, so one report stays well under the master's body limit
_CHUNK = 64 * 1024
_MAX_READ = 1024 * 1024  # never read more than this from the end of a file, however long its lines


def last_lines(path: Path, count: int = TAIL_LINES) -> list[str]:
    """The last `count` lines of a file (the unfinished last line included), decoded leniently.

    The file is in a directory its activity's user owns: a link or anything but a regular file
    there gives no lines (a root agent must not read, and report, a file the link points to)."""
    try:
        with open_for_reading(path) as f:
            end = f.seek(0, os.SEEK_END)
            start = end
            data = b""
            while start > 0 and data.count(b"\n") <= count and end - start < _MAX_READ:
                start = max(0, start - _CHUNK)
                f.seek(start)
                data = f.read(end - start)
    except OSError:  # missing, a link, not a regular file
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if start > 0 and lines:
        lines = lines[1:]  # the first one is cut
    return [line[:LINE_CHARS] for line in lines[-count:]]


def size(path: Path) -> int:
    """The file's size, the cheap test of whether its tail may have changed; -1 when it is missing."""
    try:
        return os.lstat(path).st_size  # the link's own, never its target's
    except FileNotFoundError:
        return -1
