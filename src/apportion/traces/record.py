"""What every trace reader yields: one ``TraceJob`` per job, a ``TraceInfo`` for the cluster,
and ``BadLine`` for a line that cannot be read.

The simulator (``apportion.simulate``) consumes only these types, whatever the trace's
format, so a reader's whole job is to turn its file into them:

- ``TraceJob.submit`` is seconds from the trace's start (the reader's first submit, or the
  format's own origin), ``run`` seconds of work;
- ``slots`` is what the job asks for, rigid (min = max), in the resource group
  ``resource`` ("cpu" or "gpu");
- ``user``, ``group``, ``queue`` and ``partition`` are what a mapping
  (``apportion.traces.mapping``) matches to choose the job's consumer; a field the trace
  does not have is "";
- ``ducc`` is set for elastic DUCC work (work items run by processes of ``threads``
  threads); such a job's ``slots`` and ``run`` are the reader's summary (one process's
  threads; items x item_seconds) and the simulator grows and shrinks it instead.

Reading stops at the first bad line (``BadLine``: ``file:line: field: reason``) unless the
reader was given ``skip_bad=N``: then up to N bad lines are skipped and counted in a
``SkipCounter`` (``skipped``, ``first``), and the N+1st stops the reading.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

RESOURCES = ("cpu", "gpu")
"""The resource group kinds a trace job can ask for."""

MATCH_FIELDS = ("user", "group", "queue", "partition")
"""The job fields a mapping rule can match."""


@dataclass(frozen=True, slots=True)
class DuccWork:
    """Elastic DUCC work: ``items`` work items of ``item_seconds`` each, run by processes of
    ``threads`` threads and ``memory`` GB; at most ``max_processes`` processes (None: no cap)."""

    memory: float  # GB per process
    threads: int
    items: int
    item_seconds: float
    cls: str  # the DUCC scheduling class ("" when the job names none)
    max_processes: int | None = None


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace.

    ``submit``: seconds from the trace's start; ``run``: seconds of work; ``slots``: the
    slots it asks for (rigid: min = max) in resource group kind ``resource``; ``memory``: GB
    per slot (per process for DUCC) if the trace says; ``checkpoint``: seconds between checkpoints if the trace says (a
    reclaimed job loses only the work since its last one); ``walltime``: the run time the
    job asked for (SWF's requested time), if the trace says: a batch scheduler's estimate
    (EASY backfilling plans with it); ``resources``: what each of its slots needs of each
    kind (cores, memory in GB, gpus: whole or a fraction below 1 of one), as sorted
    (kind, amount) pairs, when the trace says (Alibaba's pods): a replay on hosts with
    ``resources`` asks the engine for that vector, its slots together on one host;
    () when the trace gives slots only."""

    id: str
    submit: float
    run: float
    slots: int
    user: str = ""
    group: str = ""
    queue: str = ""
    partition: str = ""
    resource: str = "cpu"
    memory: float | None = None
    checkpoint: float | None = None
    ducc: DuccWork | None = None
    walltime: float | None = None
    resources: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Machine:
    """One host a trace names (Alibaba's node list, DUCC's node file, Google's machine
    events): its name, CPU slots (0 when the trace does not say, as DUCC's node files,
    whose hosts are counted in memory shares), GPUs and memory (GB, None when unknown);
    ``cores``: its cores exactly (Alibaba's cpu_milli / 1000) where ``cpus`` rounds a
    fraction down, None when ``cpus`` is exact or the trace does not say."""

    name: str
    cpus: int
    gpus: int = 0
    memory: float | None = None
    model: str = ""
    cores: float | None = None


@dataclass(frozen=True, slots=True)
class TraceInfo:
    """What a trace says of its cluster; every field is None / empty when it does not say.

    - ``kind``: the reader ("swf", "ducc", "google", "alibaba", "jsonl");
    - ``source``: the path read;
    - ``hosts`` and ``slots_per_host``: SWF's MaxNodes and MaxProcs / MaxNodes;
    - ``processors``: total CPU slots (SWF MaxProcs, or the sum over ``machines``);
    - ``gpus``: total GPU slots (Alibaba's node list);
    - ``machines``: the hosts one by one, when the trace lists them;
    - ``queues`` / ``partitions``: number (as written in the trace) -> name from the header;
    - ``jobs``: the header's job count if it gives one (not the number read);
    - ``start``: the trace's start as an absolute time (e.g. SWF UnixStartTime), if given;
    - ``notes``: header lines kept for the report (e.g. SWF's Computer, Installation)."""

    kind: str
    source: str
    hosts: int | None = None
    slots_per_host: int | None = None
    processors: int | None = None
    gpus: int | None = None
    machines: tuple[Machine, ...] = ()
    queues: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, str] = field(default_factory=dict)
    jobs: int | None = None
    start: float | None = None
    notes: dict[str, str] = field(default_factory=dict)


class BadLine(ValueError):
    """A line of a trace that cannot be read: ``str()`` is ``file:line: field: reason``."""

    def __init__(self, file: str, line: int | None, field: str, reason: str) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.reason = reason
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}: {self.reason}"

    def __reduce__(self):  # picklable (sweeps send errors between processes)
        return (BadLine, (self.file, self.line, self.field, self.reason))


def as_written(x: float) -> str:
    """A time or count as a trace file writes it: whole numbers in full (1672510000, not
    1.67251e+09), others as Python writes floats (0.5)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e18:
        return str(int(x))
    return repr(x) if isinstance(x, float) else str(x)


KEEP_FIRST = 5
"""How many skipped lines a ``SkipCounter`` keeps for the report."""


class SkipCounter:
    """The ``--skip-bad N`` rule: up to ``limit`` bad lines are skipped and counted; the
    next one is raised. ``skipped`` counts them, ``first`` keeps the first few."""

    __slots__ = ("limit", "skipped", "first")

    def __init__(self, limit: int = 0) -> None:
        if limit < 0:
            raise ValueError("skip_bad must be 0 or more")
        self.limit = limit
        self.skipped = 0
        self.first: list[BadLine] = []

    def bad(self, error: BadLine) -> None:
        """Skip ``error`` when the limit allows, else raise it (saying that the limit is
        spent when there was one)."""
        if self.skipped >= self.limit:
            if self.limit:
                raise BadLine(error.file, error.line, error.field,
                              f"{error.reason} (--skip-bad {self.limit} is spent: {self.skipped} bad lines "
                              "were skipped before this one)")
            raise error
        self.skipped += 1
        if len(self.first) < KEEP_FIRST:
            self.first.append(error)


@runtime_checkable
class Trace(Protocol):
    """An opened trace: ``info`` (read from headers / node files when opened) and ``jobs()``,
    a fresh iterator over the jobs in submit order each call, streamed from the file.
    ``skips`` counts the lines skipped under ``skip_bad`` by the latest ``jobs()``;
    ``dropped`` counts, by reason, the well-formed jobs left out by the reader's rules
    (e.g. an SWF job whose run time is unknown), also for the latest ``jobs()``."""

    info: TraceInfo
    skips: SkipCounter
    dropped: dict[str, int]

    def jobs(self) -> Iterator[TraceJob]: ...
