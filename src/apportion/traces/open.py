"""``open_trace(path)``: the reader for a trace, chosen by ``kind`` or worked out from the
path and the first line.

- a directory: ``jobs.in/`` -> "ducc"; ``task_events/`` -> "google"; a ``*pod_list*``
  CSV -> "alibaba";
- a file, by name: ``.swf`` / ``.swf.gz`` -> "swf"; ``.jsonl`` / ``.ndjson`` (``.gz``
  too) -> "jsonl"; ``pod_list`` in the name -> "alibaba"; ``task_events`` /
  ``task-events`` -> "google";
- ``synthetic:jobs=N,consumers=C,hosts=H,...`` -> a generated trace
  (``apportion.traces.synthetic``), no file;
- else by the first line that is not blank: ``;`` or 18 numbers -> "swf"; ``{`` ->
  "jsonl"; a header starting ``name,cpu_milli`` -> "alibaba"; 13 comma-separated fields
  -> "google".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from apportion.traces.alibaba import AlibabaTrace
from apportion.traces.ducc import DuccTrace
from apportion.traces.google import GoogleTrace
from apportion.traces.jsonl import JsonlTrace
from apportion.traces.record import BadLine, Trace
from apportion.traces.swf import FIELDS as SWF_FIELDS
from apportion.traces.swf import SwfTrace
from apportion.traces.sort import SORTABLE, SortedTrace
from apportion.traces.synthetic import PREFIX as SYNTHETIC
from apportion.traces.synthetic import SyntheticTrace, parse_spec
from apportion.traces.textfile import TraceFile, numbered_lines

READERS: dict[str, type[TraceFile]] = {
    "swf": SwfTrace,
    "ducc": DuccTrace,
    "google": GoogleTrace,
    "alibaba": AlibabaTrace,
    "jsonl": JsonlTrace,
}
KINDS = tuple(READERS)


def _by_name(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".swf"):
        return "swf"
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if "pod_list" in name:
        return "alibaba"
    if "task_events" in name or "task-events" in name:
        return "google"
    return None


def _by_content(path: Path) -> str | None:
    with closing(numbered_lines(path)) as lines:
        return _first_line_kind(lines)


def _first_line_kind(lines: Iterator[tuple[int, str]]) -> str | None:
    for _number, line in lines:
        text = line.strip()
        if not text or text.startswith("#"):  # the Google samples' comment header
            continue
        if text.startswith(";"):
            return "swf"
        if text.startswith("{"):
            return "jsonl"
        if text.startswith("name,cpu_milli"):
            return "alibaba"
        parts = text.split()
        if len(parts) == SWF_FIELDS and all(p.lstrip("-").replace(".", "", 1).isdigit() for p in parts):
            return "swf"
        if len(text.split(",")) == 13:
            return "google"
        return None
    return None


def detect_kind(path: str | os.PathLike[str]) -> str:
    """The kind of trace at ``path``; BadLine when it cannot be told."""
    where = Path(path)
    if where.is_dir():
        if (where / "jobs.in").is_dir():
            return "ducc"
        if (where / "task_events").is_dir():
            return "google"
        if any("pod_list" in p.name for p in where.iterdir()):
            return "alibaba"
        raise BadLine(os.fspath(where), None, "directory",
                      "not a trace directory: expected jobs.in/ (DUCC), task_events/ (Google) "
                      "or a *pod_list*.csv (Alibaba)")
    if not where.exists():
        raise BadLine(os.fspath(where), None, "file", "no such file or directory")
    kind = _by_name(where) or _by_content(where)
    if kind is None:
        raise BadLine(os.fspath(where), None, "file",
                      f"cannot tell the trace format; give the kind ({', '.join(KINDS)})")
    return kind


def open_trace(path: str | os.PathLike[str], kind: str | None = None, skip_bad: int = 0, sort: bool = False,
               **options) -> Trace:
    """The trace at ``path``, read by the reader for ``kind`` (worked out when None).

    ``skip_bad``: how many bad lines to skip (and count in ``trace.skips``) before one
    stops the reading. ``options`` go to the reader (``nodes=`` for DUCC and Alibaba,
    ``cpu_slots=``, ``job_events=``, ``machine_events=`` for Google); a path
    ``synthetic:NAME=VALUE,...`` is a generated trace. ``sort``: jobs in submission
    order whatever the file's (``traces.sort``: an external sort, bounded memory; SWF,
    JSONL and Alibaba). Raises BadLine
    when the trace cannot be opened, ValueError for an unknown kind."""
    if skip_bad < 0:
        raise ValueError("skip_bad must be 0 or more")
    if os.fspath(path).startswith(SYNTHETIC) and kind in (None, "synthetic"):
        return SyntheticTrace(parse_spec(os.fspath(path)))
    if kind is None:
        kind = detect_kind(path)
    reader = READERS.get(kind)
    if reader is None:
        raise ValueError(f"unknown trace kind {kind!r}; known: {', '.join(KINDS)}")
    if sort and kind not in SORTABLE:
        raise ValueError(f"--sort reads SWF, JSONL and Alibaba traces; a {kind} trace is read in its "
                         "events' order")
    trace = reader(path, skip_bad, **options)  # type: ignore[call-arg]
    return SortedTrace(trace) if sort else trace
