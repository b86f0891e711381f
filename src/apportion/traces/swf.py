"""The Parallel Workloads Archive's Standard Workload Format (SWF), streamed.

An SWF file is a header of ``;`` lines (``; MaxNodes: 128``, ``; Queue: 1 batch``...)
and one job a line, 18 whitespace-separated fields, -1 meaning unknown:

 1 job id, 2 submit time (s), 3 wait time, 4 run time (s), 5 allocated processors,
 6 average CPU time, 7 used memory (KB per processor), 8 requested processors,
 9 requested time, 10 requested memory (KB per processor), 11 status, 12 user id,
 13 group id, 14 executable id, 15 queue, 16 partition, 17 preceding job, 18 think time.

apportion's reading:

- ``submit`` is field 2 less the first job's field 2: the replay starts with the first
  job (``TraceInfo.start`` is the header's UnixStartTime; ``SwfTrace.origin`` the first
  job's field 2, once read);
- ``run`` is field 4; ``slots`` field 5, or field 8 when 5 is unknown; resource "cpu";
- ``user``, ``group``, ``queue``, ``partition`` are fields 12, 13, 15, 16 as written
  ("12"), "" when unknown (negative); the header's names for queues and partitions are in
  ``TraceInfo.queues`` / ``partitions``;
- ``memory`` (GB per slot) is field 10, or field 7 when 10 is unknown;
- ``walltime`` is field 9, the requested time, when known (above 0);
- jobs that cannot be replayed are dropped and counted in ``dropped``, not reported as
  bad lines: a run time unknown or 0 (the archive's cleaned logs keep jobs cancelled
  before they ran, with run time 0 or -1: they never held a processor), and no processor
  count (both 5 and 8 unknown or 0);
- a bad line is a line without 18 fields, a field 2/4/5/8 that is not a number, an
  unknown submit time, or a submit time before the previous job's (SWF lists jobs in
  submit order, and the replay needs them so).

The header gives ``TraceInfo``: MaxNodes -> ``hosts``, MaxProcs -> ``processors``,
``slots_per_host`` = MaxProcs // MaxNodes when they divide evenly, MaxJobs -> ``jobs``,
``Queue:`` / ``Partition:`` lines -> the names, Computer / Installation / Note lines ->
``notes``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import closing

from apportion.traces.record import TraceInfo, TraceJob
from apportion.traces.textfile import Interner, TraceFile, numbered_lines

FIELDS = 18
_KB_PER_GB = 1024.0 * 1024.0
_HEADER = re.compile(r";\s*([A-Za-z][A-Za-z ]*?)\s*:\s*(.*?)\s*\Z")
_NOTES = ("Version", "Computer", "Installation", "Acknowledge", "Conversion", "StartTime", "EndTime",
          "TimeZoneString")
NUMBER_FIELDS = {1: "submit", 3: "run", 4: "allocated processors", 7: "requested processors"}


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return None
        return int(value) if value.is_integer() else None


def read_header(path: str | os.PathLike[str]) -> TraceInfo:
    """The ``;`` lines at the top of an SWF file, as a ``TraceInfo``."""
    with closing(numbered_lines(path)) as lines:
        return _header(path, lines)


def _header(path: str | os.PathLike[str], lines: Iterator[tuple[int, str]]) -> TraceInfo:
    values: dict[str, str] = {}
    queues: dict[str, str] = {}
    partitions: dict[str, str] = {}
    notes: dict[str, str] = {}
    for _number, line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith(";"):
            break
        m = _HEADER.match(stripped)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if key in ("Queue", "Partition"):
            number, _, name = value.partition(" ")
            (queues if key == "Queue" else partitions)[number] = name.strip()
        elif key == "Note":
            notes["Note"] = (notes["Note"] + " / " + value) if "Note" in notes else value
        else:
            values.setdefault(key, value)
            if key in _NOTES:
                notes[key] = value
    hosts = _int_or_none(values.get("MaxNodes", ""))
    procs = _int_or_none(values.get("MaxProcs", ""))
    per_host = procs // hosts if hosts and procs and procs % hosts == 0 else None
    start = _int_or_none(values.get("UnixStartTime", ""))
    return TraceInfo(
        "swf", os.fspath(path),
        hosts=hosts if hosts and hosts > 0 else None,
        slots_per_host=per_host,
        processors=procs if procs and procs > 0 else None,
        queues=queues, partitions=partitions,
        jobs=_int_or_none(values.get("MaxJobs", "")),
        start=float(start) if start is not None else None,
        notes=notes,
    )


class SwfTrace(TraceFile):
    """An SWF file (plain or gzip). ``info`` comes from its header; ``jobs()`` streams."""

    kind = "swf"

    def __init__(self, path: str | os.PathLike[str], skip_bad: int = 0) -> None:
        super().__init__(path, skip_bad)
        self.info = read_header(path)
        self.origin: float | None = None  # the first job's SWF submit time, once read

    def _jobs(self) -> Iterator[TraceJob]:
        intern = Interner()
        origin: float | None = None
        last = float("-inf")
        make = TraceJob
        for number, line in numbered_lines(self.path):
            parts = line.split()
            if not parts or parts[0][0] == ";":
                continue
            if len(parts) != FIELDS:
                self._bad(number, "line", f"{len(parts)} fields; an SWF job line has {FIELDS}")
                continue
            try:
                submit = float(parts[1])
                run = float(parts[3])
                slots = int(parts[4])
                if slots <= 0:
                    slots = int(parts[7])
            except ValueError:
                read = self._slow_numbers(parts)
                if isinstance(read, str):
                    self._bad(number, NUMBER_FIELDS[int(read.partition(":")[0])], read.partition(":")[2])
                    continue
                submit, run, slots = read
            if submit < 0:
                self._bad(number, "submit", f"unknown submit time ({parts[1]})")
                continue
            if self._out_of_order(number, "submit", submit, last, "job"):
                continue
            last = submit
            if origin is None:
                origin = self.origin = submit
            if run <= 0:
                self._drop("run time unknown or 0")
                continue
            if slots <= 0:
                self._drop("no processor count")
                continue
            memory = parts[9] if parts[9][0] != "-" else parts[6]
            asked = parts[8]
            yield make(
                parts[0], submit - origin, run, slots,
                "" if parts[11][0] == "-" else intern(parts[11]),
                "" if parts[12][0] == "-" else intern(parts[12]),
                "" if parts[14][0] == "-" else intern(parts[14]),
                "" if parts[15][0] == "-" else intern(parts[15]),
                "cpu",
                None if memory[0] == "-" else self._memory(memory),
                None, None,
                None if asked[0] == "-" or asked == "0" else self._seconds(asked),
            )

    @staticmethod
    def _seconds(text: str) -> float | None:
        try:
            s = float(text)
        except ValueError:
            return None
        return s if s > 0 else None

    @staticmethod
    def _memory(text: str) -> float | None:
        try:
            kb = float(text)
        except ValueError:
            return None
        return kb / _KB_PER_GB if kb > 0 else None

    @staticmethod
    def _slow_numbers(parts: list[str]) -> tuple[float, float, int] | str:
        """(submit, run, slots) from a line the fast path could not read (e.g. "128.0"),
        or "INDEX:reason" for the first field that is not a number."""
        times = []
        for index in (1, 3):
            try:
                times.append(float(parts[index]))
            except ValueError:
                return f"{index}:{parts[index]!r} is not a number"
        counts = []
        for index in (4, 7):
            value = _int_or_none(parts[index])
            if value is None:
                return f"{index}:{parts[index]!r} is not a whole number"
            counts.append(value)
        return times[0], times[1], counts[0] if counts[0] > 0 else counts[1]
