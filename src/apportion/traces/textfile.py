"""Reading a trace file line by line, gzip or plain (told apart by the gzip magic bytes, not
the name), never whole; and the pieces every reader shares: a base class holding ``info``,
the skip counter and the dropped-job counts, and a string interner."""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterator
from pathlib import Path

from apportion.traces.record import BadLine, SkipCounter, TraceInfo, TraceJob, as_written
from apportion.traces.sort import SORTABLE

GZIP_MAGIC = b"\x1f\x8b"
_BUFFER = 1 << 20


def is_gzip(path: str | os.PathLike[str]) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def open_text(path: str | os.PathLike[str]) -> io.TextIOBase:
    """``path`` opened for reading text (UTF-8, bad bytes replaced), gunzipped if it is gzip.
    Raises BadLine(file, None, "file", reason) when it cannot be opened."""
    try:
        raw = open(path, "rb", buffering=_BUFFER)  # noqa: SIM115 - handed to the wrapper
    except OSError as exc:
        raise BadLine(os.fspath(path), None, "file", f"cannot read: {exc.strerror or exc}") from None
    if raw.peek(2)[:2] == GZIP_MAGIC:
        # GzipFile leaves a file object it was given open: it gets the file by name, and
        # closes what it opened
        raw.close()
        stream: io.BufferedIOBase = gzip.open(path, "rb")
        return io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=None)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)


def numbered_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its end) for every line of ``path``."""
    source = os.fspath(path)
    with open_text(path) as f:
        number = 0
        try:
            for number, line in enumerate(f, 1):  # noqa: B007 - number is read after the loop
                yield number, line.rstrip("\r\n")
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise BadLine(source, number + 1, "file", f"cannot read on: {exc}") from None


class Interner:
    """One str object per distinct value (users, groups...): a million jobs share a few
    hundred strings instead of holding a million copies."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        return self._seen.setdefault(text, text)


class TraceFile:
    """The common part of the readers: ``info``, ``skips`` and ``dropped``; ``jobs()``
    resets both counters and calls ``_jobs()``."""

    kind = ""
    check_order = True  # False while a sorter reads the trace (traces.sort)

    def __init__(self, path: str | os.PathLike[str], skip_bad: int = 0) -> None:
        self.path = os.fspath(path)
        self.skip_bad = skip_bad
        self.skips = SkipCounter(skip_bad)
        self.dropped: dict[str, int] = {}
        self.info: TraceInfo = TraceInfo(self.kind, self.path)

    def jobs(self) -> Iterator[TraceJob]:
        self.skips = SkipCounter(self.skip_bad)
        self.dropped = {}
        return self._jobs()

    def _jobs(self) -> Iterator[TraceJob]:  # pragma: no cover - every reader defines it
        raise NotImplementedError

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def _bad(self, line: int | None, field: str, reason: str, file: str | None = None) -> None:
        """A bad line: raised, or skipped and counted under ``skip_bad``."""
        self.skips.bad(BadLine(file or self.path, line, field, reason))

    def _out_of_order(self, line: int, field: str, value: float, last: float, what: str,
                      file: str | None = None) -> bool:
        """True, after reporting a bad line, when ``value`` comes before ``last``: the
        trace lists its ``what``s in time order, and the replay needs them so."""
        if value >= last or not self.check_order:
            return False
        hint = " (--sort reads it in time order)" if self.kind in SORTABLE else ""
        self._bad(line, field, f"{as_written(value)} is before the previous {what}'s {as_written(last)}; "
                               f"the trace lists them in time order{hint}", file)
        return True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {Path(self.path).name}>"
