"""An activity directory's disk use, measured as the kubelet measures a pod's ephemeral storage: by
walking the directory, as `du` does (blocks allocated, each inode once), never following a link.

The walk runs in a thread of its own (a directory of many files takes a while to walk, and the
agent's heartbeats must not wait for it), every DISK_EVERY seconds, for the running activities
that have a limit. An activity over its limit is handed to the runner, which kills it and says
why. The directory belongs to the activity's user, who may change it while it is walked: every
directory is opened relative to its parent's descriptor and never through a link (os.fwalk).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

log = logging.getLogger("apportion.agent")

DISK_EVERY = 5.0  # seconds between two walks (the kubelet's housekeeping looks every 10 s)
GB = 2**30


def usage(path: Path, stop_at: int | None = None) -> int:
    """Bytes the tree at `path` takes on disk (st_blocks x 512); the count stops once past `stop_at`.

    A file gone while the walk runs is left out."""
    seen: set[tuple[int, int]] = set()
    total = 0
    try:
        total = os.lstat(path).st_blocks * 512
        for _, dirs, files, dirfd in os.fwalk(path, follow_symlinks=False):
            for name in dirs + files:
                try:
                    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1:  # a file with several links counts once
                    key = (st.st_dev, st.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                total += st.st_blocks * 512
                if stop_at is not None and total > stop_at:
                    return total
    except OSError:  # the directory is gone, or the walk ran out of descriptors: what was counted
        return total
    return total


class DiskWatch:
    """Walks the watched activities' directories in a thread; `over()` gives those past their limit."""

    def __init__(self, every: float | None = None) -> None:
        self.every = DISK_EVERY if every is None else every
        self._watched: dict[int, tuple[Path, int]] = {}
        self._over: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, activity: int, path: Path, limit: int) -> None:
        with self._lock:
            self._watched[activity] = (path, limit)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="apportion-disk", daemon=True)
            self._thread.start()

    def unwatch(self, activity: int) -> None:
        with self._lock:
            self._watched.pop(activity, None)
            self._over.pop(activity, None)

    def over(self) -> dict[int, int]:
        """Activities found over their limit since the last call, with the bytes they used."""
        with self._lock:
            out, self._over = self._over, {}
            return out

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            with self._lock:
                watched = list(self._watched.items())
            for activity, (path, limit) in watched:
                used = usage(path, stop_at=limit)
                if used > limit:
                    with self._lock:
                        if activity in self._watched:
                            self._over[activity] = used
