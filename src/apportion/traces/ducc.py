"""DUCC system-test workloads (``jobs.in/*.job`` with ``jobs.prepare``) as a trace.

The files are read by ``apportion.importers.ducc.workload`` (the reader ``apportion
solve`` uses, so both read a workload the same way: times compressed, submissions spread,
classes and memory drawn as ``jobs.prepare`` says); this module turns each job into a
``TraceJob`` with ``DuccWork``:

- ``id`` the job file's name (``mega-12``), ``submit`` its submission (seconds),
  ``user`` its user, ``queue`` its class (``group`` and ``partition`` are "");
- ``ducc``: ``memory`` (GB per process), ``threads``, ``items`` (work items),
  ``item_seconds`` (the mean of the job's items), ``cls``, ``max_processes``
  (``machines``; None: no cap);
- the rigid summary a non-DUCC consumer of the trace sees: ``slots`` 1 (one process),
  ``memory`` its GB, ``run`` the time one process takes, ceil(items / threads) x
  item_seconds.

The cluster comes from a node file: ``nodes=`` when given, else the only ``*.nodes``
file in the workload directory or, failing that, its parent (the shared traces keep
``52.simulated.nodes`` beside ``mega-15-min/``). Its hosts are ``TraceInfo.machines``
with their memory (``cpus`` 0: DUCC counts memory shares).

A job file that cannot be read is a bad line (its first problem, with file and line);
under ``skip_bad`` it is left out and counted. A bad ``jobs.prepare`` or node file stops
the reading.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

from apportion.importers.ducc.nodes import read_node_file
from apportion.importers.ducc.workload import JOBS_DIR, read_workload
from apportion.plan.errors import PlanError, Problem
from apportion.traces.record import BadLine, DuccWork, Machine, TraceInfo, TraceJob
from apportion.traces.textfile import TraceFile


def _bad(problems: list[Problem]) -> BadLine:
    first = problems[0]
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    return BadLine(first.file, first.line, first.field, first.reason + more)


def find_node_file(directory: Path) -> Path | None:
    """The only ``*.nodes`` file in ``directory``, else in its parent; None when there is
    no such file or more than one."""
    for place in (directory, directory.parent):
        found = sorted(place.glob("*.nodes"))
        if len(found) == 1:
            return found[0]
        if found:
            return None
    return None


def read_machines(path: str | os.PathLike[str]) -> tuple[Machine, ...]:
    """The hosts of a DUCC node file, with memory when the file gives it."""
    problems: list[Problem] = []
    nodes = read_node_file(Path(path), problems)
    if problems:
        raise _bad(problems)
    return tuple(Machine(n.name, 0, 0, None if n.memory is None else float(n.memory)) for n in nodes.hosts)


class DuccTrace(TraceFile):
    """A DUCC test workload directory; ``nodes`` names its node file (see the module)."""

    kind = "ducc"

    def __init__(self, path: str | os.PathLike[str], skip_bad: int = 0,
                 nodes: str | os.PathLike[str] | None = None) -> None:
        super().__init__(path, skip_bad)
        directory = Path(self.path)
        if not (directory / JOBS_DIR).is_dir():
            raise BadLine(self.path, None, "directory", f"no {JOBS_DIR}/ directory of DUCC job files here")
        node_file = Path(nodes) if nodes is not None else find_node_file(directory)
        machines = read_machines(node_file) if node_file is not None else ()
        self.nodes = os.fspath(node_file) if node_file is not None else None
        self.info = TraceInfo("ducc", self.path, hosts=len(machines) or None, machines=machines,
                              notes={"nodes": self.nodes} if self.nodes else {})

    def _jobs(self) -> Iterator[TraceJob]:
        def skip(problems: list[Problem]) -> None:
            self.skips.bad(_bad(problems))

        try:
            workload = read_workload(self.path, skip_file=skip)
        except PlanError as exc:
            raise _bad(exc.problems) from None
        for job in workload.jobs:
            work = DuccWork(float(job.memory), job.threads, job.items, job.seconds_per_item, job.cls or "",
                            job.max_processes)
            yield TraceJob(
                job.name, job.submit_s, math.ceil(job.items / job.threads) * job.seconds_per_item, 1,
                user=job.user, queue=job.cls or "", memory=float(job.memory), ducc=work,
            )
