"""A tree of processes as a stop must handle it: N processes, D of them `setsid` double-forked daemons
that have left the leader's session and process group, all in one activity's containment.

`tree_argv` is the command (the leader prints `ready N` once every process runs); `spawn_tree`
starts it in a box of a containment and waits for that line; `time_kill` measures from the SIGKILL
moment to the box being empty; `measure_stop` does it all `repeat` times for a containment level
(the figure in docs/performance.md: 100 processes, 20 daemons, <= 0.5 s). Used by tests and by `apportion bench`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from apportion.agent.containment import Box, Containment, Limits, choose

TREE = """
import os, sys, time
n, d = int(sys.argv[1]), int(sys.argv[2])
r, w = os.pipe()
for i in range(n - 1):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        if i < d:
            os.setsid()
            if os.fork() > 0:
                os._exit(0)
        os.write(w, b"x")
        os.close(w)
        while True:
            time.sleep(3600)
    elif i < d:
        os.waitpid(pid, 0)
os.close(w)
got = 0
while got < n - 1:
    chunk = os.read(r, 4096)
    if not chunk:
        break
    got += len(chunk)
print("ready", got + 1, flush=True)
while True:
    time.sleep(3600)
"""


def tree_argv(processes: int = 100, daemons: int = 20, python: str = sys.executable) -> list[str]:
    if not 1 <= processes or not 0 <= daemons < processes:
        raise ValueError("a tree is at least its leader, and its daemons are fewer than its processes")
    return [python, "-c", TREE, str(processes), str(daemons)]


def spawn_tree(containment: Containment, box: Box, processes: int = 100, daemons: int = 20,
               timeout: float = 30.0) -> subprocess.Popen[bytes]:
    """Start the tree in `box` and return once all of it runs."""
    proc = subprocess.Popen(tree_argv(processes, daemons), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=dict(os.environ) | box.env(), start_new_session=True,
                            preexec_fn=box.enter if box.joins else None)
    box.started(proc.pid)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = proc.stdout.readline().decode()
    if not line.startswith("ready") or time.monotonic() > deadline:
        proc.kill()
        raise RuntimeError(f"the tree did not start: {line!r}")
    containment.refresh([box], force=True)
    return proc


def time_kill(containment: Containment, box: Box, proc: subprocess.Popen[bytes] | None = None,
              timeout: float = 30.0) -> float:
    """Seconds from the SIGKILL to an empty box (the leader, this process's child, reaped meanwhile)."""
    began = time.perf_counter()
    box.kill()
    while True:
        if proc is not None:
            proc.poll()
        containment.refresh([box], force=True)
        if box.empty():
            return time.perf_counter() - began
        if time.perf_counter() - began > timeout:
            raise RuntimeError(f"{len(box.procs())} processes outlive SIGKILL by {timeout} s")
        time.sleep(0.0005)


def measure_stop(level: str = "auto", processes: int = 100, daemons: int = 20, repeat: int = 5,
                 workdir: Path | None = None) -> tuple[str, list[float]]:
    """(the level used, seconds from SIGKILL to empty for each of `repeat` trees)."""
    with tempfile.TemporaryDirectory(prefix="apportion-tree-") as tmp:
        containment = choose(level, workdir or Path(tmp))
        times = []
        try:
            for i in range(repeat):
                box = containment.create(i + 1, Limits(pids=processes + 16))
                try:
                    proc = spawn_tree(containment, box, processes, daemons)
                    times.append(time_kill(containment, box, proc))
                    proc.wait()
                finally:
                    box.remove()
        finally:
            containment.close()
        return containment.level, times
