"""Google cluster-data 2011 (ClusterData2011_2) task events as a trace, streamed.

The trace is a set of CSV shards without header rows (``#`` lines, as in the small
samples, are skipped); times are microseconds, and the trace window starts at 600 s
(time 0 is "before the window", 2^63 - 1 "after it").

Task events: 1 time, 2 missing info, 3 job id, 4 task index, 5 machine id,
6 event type (0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL, 6 LOST,
7 UPDATE_PENDING, 8 UPDATE_RUNNING), 7 user, 8 scheduling class, 9 priority,
10 CPU request, 11 memory request, 12 disk request (normalized to the largest machine),
13 different-machine constraint. Job events: 1 time, 2 missing info, 3 job id,
4 event type, 5 user, 6 scheduling class, 7 job name, 8 logical job name.

apportion's reading: a trace job is one run of one task (a job of one instance).

- It is submitted at the task's first SUBMIT (or SCHEDULE, when the SUBMIT is not in the
  trace), and its run time is from its last SCHEDULE to the FINISH, FAIL, KILL or LOST
  that ends it: what the task needed, as the trace recorded it.
- An EVICT sends the task back to pending: the run that was evicted is not counted (the
  replay decides its own evictions); the task keeps its submit time and its next
  SCHEDULE starts the run again.
- A task resubmitted after it ended (after a FAIL, typically) is a new job, ``JOB.TASK#2``.
- A task that ends before it ever ran is dropped ("ended before it ran"), as is one still
  pending at the end ("never ran in the trace"); one still running at the end is kept,
  cut at the last event time (counted in ``cut``).
- ``submit`` is seconds from the window's start: max(0, time - 600 s); a run that
  started before the window (time 0) counts from the window's start.
- ``slots`` = max(1, ceil(CPU request x ``cpu_slots``)), ``cpu_slots`` = 100 by default:
  a slot is 1% of the largest machine's CPUs; the latest request the task's events gave
  (an UPDATE may change it); 1 slot when no event gave one. Resource "cpu".
- ``user`` is the (hashed) user of the task events, or of the job events when the task's
  is empty; ``queue`` the priority (0-11, as text), ``partition`` the scheduling class
  (0-3), ``group`` the priority band: "free" (0-1), "batch" (2-8), "production" (9-11).

Order: a job is known when it ends, so jobs that end are held until no task still open
was submitted before them, then given out in submit order. A task running through the
whole trace holds back everything after its submit, so the memory used can grow to the
jobs of the trace (tens of bytes of a job a row).

Input: a directory with ``task_events/`` (and, when present, ``job_events/`` and
``machine_events/``), shards read in name order; or one task events file. Machine
events (time, machine id, event type, platform, CPU capacity, memory capacity) give
``TraceInfo.machines`` with ``cpus`` = round(capacity x ``cpu_slots``); the file is
``machine_events=``, the directory's ``machine_events/``, or, for a file named like
``*task-events*``, the same name with ``machine-events``.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Iterator
from pathlib import Path

from apportion.traces.record import Machine, TraceInfo, TraceJob
from apportion.traces.textfile import Interner, TraceFile, numbered_lines

WINDOW_START_US = 600_000_000
AFTER_END_US = 2**63 - 1
CPU_SLOTS = 100
TASK_FIELDS = 13
JOB_FIELDS = 8
MACHINE_FIELDS = 6
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING = range(9)
ENDS = (FAIL, FINISH, KILL, LOST)


def priority_band(priority: str) -> str:
    try:
        p = int(priority)
    except ValueError:
        return ""
    return "free" if p <= 1 else "production" if p >= 9 else "batch"


def _shards(path: Path, name: str) -> list[Path]:
    folder = path / name
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and (p.name.endswith(".csv") or p.name.endswith(".csv.gz")))


class _Open:
    __slots__ = ("submit", "start", "cpu", "user", "priority", "cls")

    def __init__(self, submit: int, cpu: float | None, user: str, priority: str, cls: str) -> None:
        self.submit = submit
        self.start: int | None = None
        self.cpu = cpu
        self.user = user
        self.priority = priority
        self.cls = cls


class GoogleTrace(TraceFile):
    """Google 2011 task events (a shard directory or one file); see the module."""

    kind = "google"

    def __init__(self, path: str | os.PathLike[str], skip_bad: int = 0, *, cpu_slots: int = CPU_SLOTS,
                 job_events: str | os.PathLike[str] | None = None,
                 machine_events: str | os.PathLike[str] | None = None) -> None:
        super().__init__(path, skip_bad)
        base = Path(self.path)
        self.cpu_slots = cpu_slots
        self.cut = 0
        if base.is_dir():
            self.task_files = _shards(base, "task_events")
            self.job_files = [Path(job_events)] if job_events else _shards(base, "job_events")
            machines = [Path(machine_events)] if machine_events else _shards(base, "machine_events")
        else:
            self.task_files = [base]
            self.job_files = [Path(job_events)] if job_events else []
            sibling = base.with_name(base.name.replace("task-events", "machine-events").replace(
                "task_events", "machine_events"))
            machines = [Path(machine_events)] if machine_events else (
                [sibling] if sibling != base and sibling.is_file() else [])
        self.machine_files = machines
        found = self._read_machines()
        self.info = TraceInfo("google", self.path, hosts=len(found) or None,
                              processors=sum(m.cpus for m in found) or None, machines=found,
                              notes={"cpu_slots": str(cpu_slots)})

    def _rows(self, files: list[Path], width: int, what: str) -> Iterator[tuple[str, int, list[str]]]:
        """(file, line, fields) of every row of ``files`` with ``width`` fields; other
        rows are bad lines; ``#`` lines and blank ones are skipped."""
        for file in files:
            source = os.fspath(file)
            for number, line in numbered_lines(file):
                if not line or line[0] == "#":
                    continue
                parts = line.split(",")
                if len(parts) != width:
                    self._bad(number, "line", f"{len(parts)} fields; {what} has {width}", source)
                    continue
                yield source, number, parts

    def _read_machines(self) -> tuple[Machine, ...]:
        capacity: dict[str, int] = {}
        for source, number, parts in self._rows(self.machine_files, MACHINE_FIELDS, "a machine event"):
            if parts[2] in ("0", "2") and parts[4]:
                try:
                    capacity[parts[1]] = max(1, round(float(parts[4]) * self.cpu_slots))
                except ValueError:
                    self._bad(number, "CPU capacity", f"{parts[4]!r} is not a number", source)
        return tuple(Machine(name, cpus) for name, cpus in capacity.items())

    def _job_users(self) -> dict[str, str]:
        users: dict[str, str] = {}
        for _source, _number, parts in self._rows(self.job_files, JOB_FIELDS, "a job event"):
            if parts[4]:
                users.setdefault(parts[2], parts[4])
        return users

    def _slots(self, cpu: float | None) -> int:
        if cpu is None:
            return 1
        return max(1, math.ceil(cpu * self.cpu_slots - 1e-9))

    def _jobs(self) -> Iterator[TraceJob]:
        self.cut = 0
        intern = Interner()
        job_users = self._job_users()
        open_tasks: dict[str, _Open] = {}
        runs: dict[str, int] = {}  # task -> runs ended so far (for JOB.TASK#2)
        pending: list[tuple[int, str]] = []  # (submit, task) of open tasks; stale entries skipped
        ready: list[tuple[int, int, TraceJob]] = []  # (submit, order, job) ended, not yet given out
        order = 0
        last_time = 0
        make = TraceJob

        def seconds(us: int) -> float:
            return max(0, us - WINDOW_START_US) / 1e6

        def emit(task: str, entry: _Open, end: int) -> None:
            nonlocal order
            count = runs.get(task, 0) + 1
            runs[task] = count
            job = make(
                task if count == 1 else f"{task}#{count}", seconds(entry.submit),
                max(0.0, (end - max(entry.start, WINDOW_START_US)) / 1e6),  # type: ignore[type-var]
                self._slots(entry.cpu),
                entry.user or job_users.get(task.partition(".")[0], ""),
                priority_band(entry.priority), entry.priority, entry.cls,
            )
            order += 1
            heapq.heappush(ready, (entry.submit, order, job))

        def watermark(now: int) -> int:
            while pending:
                submit, task = pending[0]
                entry = open_tasks.get(task)
                if entry is not None and entry.submit == submit:
                    return min(submit, now)
                heapq.heappop(pending)
            return now

        for source, number, parts in self._rows(self.task_files, TASK_FIELDS, "a task event"):
            try:
                time = int(parts[0])
            except ValueError:
                self._bad(number, "time", f"{parts[0]!r} is not a whole number of microseconds", source)
                continue
            try:
                event = int(parts[5])
            except ValueError:
                self._bad(number, "event type", f"{parts[5]!r} is not a whole number", source)
                continue
            if not 0 <= event <= UPDATE_RUNNING:
                self._bad(number, "event type", f"{event} is not one of 0-8", source)
                continue
            cpu: float | None = None
            if parts[9]:
                try:
                    cpu = float(parts[9])
                except ValueError:
                    self._bad(number, "CPU request", f"{parts[9]!r} is not a number", source)
                    continue
                if not 0 <= cpu <= 1:
                    self._bad(number, "CPU request", f"{cpu:g} is not between 0 and 1 (normalized)", source)
                    continue
            if time == AFTER_END_US:
                time = last_time
            elif self._out_of_order(number, "time", time, last_time, "event", source):
                continue
            last_time = max(last_time, time)
            task = parts[2] + "." + parts[3]
            entry = open_tasks.get(task)
            if event == SUBMIT or event == SCHEDULE:
                if entry is None:
                    entry = _Open(time, cpu, intern(parts[6]), intern(parts[8]), intern(parts[7]))
                    open_tasks[task] = entry
                    heapq.heappush(pending, (time, task))
                elif cpu is not None:
                    entry.cpu = cpu
                if event == SCHEDULE:
                    entry.start = time
            elif event == EVICT:
                if entry is not None:
                    entry.start = None
            elif event in ENDS:
                if entry is None:
                    self._drop("ended without a submit in the trace")
                    continue
                del open_tasks[task]
                if entry.start is None:
                    self._drop("ended before it ran")
                else:
                    emit(task, entry, time)
                    mark = watermark(time)
                    while ready and ready[0][0] <= mark:
                        yield heapq.heappop(ready)[2]
            elif entry is not None and cpu is not None:  # UPDATE_PENDING, UPDATE_RUNNING
                entry.cpu = cpu
        for task, entry in list(open_tasks.items()):
            if entry.start is None:
                self._drop("never ran in the trace")
            else:
                self.cut += 1
                emit(task, entry, last_time)
        open_tasks.clear()
        while ready:
            yield heapq.heappop(ready)[2]
