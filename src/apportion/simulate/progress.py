"""The progress bar of a replay: simulated time against wall time, on stderr.

The replay calls back every few thousand cycles with where it is; this is the only
place a wall clock is read during a replay (to show the speed), and it changes
nothing in the replay.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from apportion.simulate.replay import Progress as Where


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    d, rest = divmod(int(seconds), 86_400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}d {h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


@contextmanager
def progress_bar(enabled: bool, jobs: int | None, label: str = "simulate") -> Iterator[Callable[[Where], None] | None]:
    """A callback for ``Replay(on_progress=...)`` that draws a rich progress bar on stderr
    (jobs arrived out of ``jobs`` when the trace says how many; simulated time and its
    speed against the wall clock), or None when disabled or stderr is not a terminal."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                   TextColumn("{task.fields[sim]}"), TimeElapsedColumn(), console=console, transient=True)
    started = time.perf_counter()
    with bar:
        task = bar.add_task(label, total=jobs, sim="")

        def update(w: Where) -> None:
            wall = max(1e-9, time.perf_counter() - started)
            bar.update(task, completed=w.arrived,
                       sim=f"simulated {_span(w.now)} ({w.now / wall:,.0f}x real time), "
                           f"{w.finished:,} jobs done, {w.cycles:,} cycles")

        yield update
