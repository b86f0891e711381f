"""A trace read in submission order whatever its own (``open_trace(..., sort=True)``,
``apportion simulate --sort``), in bounded memory.

Converted logs often list jobs by end time or by job id rather than by submission, and
a replay needs them in submission order. ``SortedTrace.jobs()`` reads the trace once,
its reader's order check off, in runs of ``chunk`` jobs: each run is sorted (by submit
time, then the order read, so that equal times keep the file's order) and, when the
trace has more than one run, written to a temporary file; the runs are then merged
(``heapq.merge``), holding one batch of each run at a time. Memory is therefore about
``chunk`` jobs plus a batch per run, whatever the trace's length; the files are removed
when the iterator ends or is closed. The times are shifted so that the earliest
submission is 0, as a reader's are.
"""

from __future__ import annotations

import heapq
import pickle
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from apportion.traces.record import SkipCounter, Trace, TraceInfo, TraceJob

CHUNK = 200_000  # jobs sorted in memory at a time
BATCH = 2_000  # jobs per pickle in a run's file (what a merge holds per run)
SORTABLE = ("swf", "jsonl", "alibaba")  # readers whose only order is their jobs'


class SortedTrace:
    """``inner`` read in submission order (see the module's text)."""

    def __init__(self, inner: Trace, chunk: int = CHUNK, tmpdir: str | None = None) -> None:
        if chunk < 1:
            raise ValueError("chunk must be 1 or more")
        self.inner = inner
        self.chunk = chunk
        self.tmpdir = tmpdir
        self.runs = 0  # runs written to disk by the latest jobs() (0: sorted in memory)

    @property
    def info(self) -> TraceInfo:
        return self.inner.info

    @property
    def skips(self) -> SkipCounter:
        return self.inner.skips

    @property
    def dropped(self) -> dict[str, int]:
        return self.inner.dropped

    def jobs(self) -> Iterator[TraceJob]:
        if getattr(self.inner, "kind", "") in SORTABLE and hasattr(self.inner, "check_order"):
            self.inner.check_order = False  # type: ignore[attr-defined]
        return self._sorted()

    def _sorted(self) -> Iterator[TraceJob]:
        buf: list[tuple[float, int, TraceJob]] = []
        with tempfile.TemporaryDirectory(prefix="apportion-sort-", dir=self.tmpdir) as where:
            files: list[Path] = []
            for i, job in enumerate(self.inner.jobs()):
                buf.append((job.submit, i, job))
                if len(buf) >= self.chunk:
                    files.append(_spill(Path(where), len(files), buf))
                    buf = []
            if files and buf:
                files.append(_spill(Path(where), len(files), buf))
                buf = []
            self.runs = len(files)
            if files:
                merged: Iterator[tuple[float, int, TraceJob]] = heapq.merge(*(_read(f) for f in files))
            else:
                buf.sort(key=lambda e: (e[0], e[1]))
                merged = iter(buf)
            origin: float | None = None
            for submit, _i, job in merged:
                if origin is None:
                    origin = submit
                yield job if origin == 0 else replace(job, submit=submit - origin)


def _spill(where: Path, n: int, buf: list[tuple[float, int, TraceJob]]) -> Path:
    buf.sort(key=lambda e: (e[0], e[1]))
    path = where / f"run-{n}.pickle"
    with path.open("wb") as f:
        for k in range(0, len(buf), BATCH):
            pickle.dump(buf[k:k + BATCH], f, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def _read(path: Path) -> Iterator[tuple[float, int, TraceJob]]:
    with path.open("rb") as f:
        while True:
            try:
                batch = pickle.load(f)
            except EOFError:
                return
            yield from batch
