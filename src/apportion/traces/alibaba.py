"""The Alibaba GPU cluster trace of 2023 (cluster-trace-gpu-v2023): a pod list and a node
list, CSV with a header row, read by column name.

Pod list columns: name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
pod_phase, creation_time, deletion_time, scheduled_time (times in seconds from the
trace's start). Node list: sn, cpu_milli, memory_mib, gpu, model.

apportion's reading, one trace job per pod:

- ``submit`` = creation_time, ``run`` = deletion_time - scheduled_time (pods still
  running at the end carry the trace's end as deletion time); pods never scheduled
  (pod_phase Pending, no scheduled_time) or with no time run are dropped and counted;
- a pod with GPUs (num_gpu > 0) asks for GPU slots in the "gpu" resource group:
  num_gpu when it takes whole GPUs (gpu_milli 1000), else ceil(num_gpu x gpu_milli /
  1000), so a pod sharing a GPU (gpu_milli 460) takes one GPU slot; its CPUs are not
  counted (the GPU is the scarce resource the trace is about);
- a pod without GPUs asks for ceil(cpu_milli / 1000) CPU slots (at least 1) in the "cpu"
  group;
- ``resources``: what each of those slots needs of each kind, the pod's CPU, memory and
  GPUs shared out over them: ``cores`` cpu_milli / 1000 / slots, ``memory`` memory_mib /
  1024 / slots (GB), ``gpus`` 1 for whole GPUs, gpu_milli / 1000 for a share of one (a pod
  asking for shares of several GPUs, none in the openb lists, asks num_gpu x gpu_milli /
  1000 / slots of a GPU a slot: its shares pooled on as few GPUs as hold them); a replay
  on hosts with resources (``simulate.cluster``) asks the engine for these vectors, all
  the pod's slots on one host, and Dominant Resource Fairness shares the cluster;
- ``queue`` is qos (LS, BE, Burstable, Guaranteed), ``partition`` gpu_spec (the GPU
  models it may run on, "" for any), ``user`` and ``group`` are "" (the trace has no
  users), ``memory`` memory_mib / 1024 / slots (GB per slot).

The node list gives ``TraceInfo.machines`` (``cpus`` = cpu_milli // 1000, ``cores`` =
cpu_milli / 1000 when that is not whole, ``gpus``, memory GB, GPU model), ``processors`` and ``gpus`` their sums. It is ``nodes=`` when
given, else the ``*node_list*`` file beside the pod list. A directory holding one
``*pod_list*`` file may be given instead of the file.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator
from pathlib import Path

from apportion.traces.record import BadLine, Machine, TraceInfo, TraceJob
from apportion.traces.textfile import Interner, TraceFile, open_text

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
               "creation_time", "deletion_time", "scheduled_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")


def find_pod_list(directory: Path) -> Path:
    found = sorted(p for p in directory.iterdir() if "pod_list" in p.name and ".csv" in p.name)
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise BadLine(os.fspath(directory), None, "directory",
                      f"{what} *pod_list*.csv files here; name the pod list to read")
    return found[0]


def find_node_list(pods: Path) -> Path | None:
    found = sorted(p for p in pods.parent.iterdir() if "node_list" in p.name and ".csv" in p.name)
    return found[0] if len(found) == 1 else None


def _rows(path: str, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row by column name) for a CSV file with a header naming ``columns``."""
    with open_text(path) as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise BadLine(path, 1, "header", "empty file; expected a header row") from None
        except csv.Error as exc:
            raise BadLine(path, 1, "header", str(exc)) from None
        names = [h.strip() for h in header]
        missing = [c for c in columns if c not in names]
        if missing:
            raise BadLine(path, 1, "header", f"no column {', '.join(missing)} (columns: {', '.join(names)})")
        index = {c: names.index(c) for c in columns}
        width = len(names)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise BadLine(path, reader.line_num, "line", str(exc)) from None
            if not row:
                continue
            if len(row) != width:
                yield reader.line_num, {"": f"{len(row)} fields; the header has {width}"}
                continue
            yield reader.line_num, {c: row[i].strip() for c, i in index.items()}


def _whole(text: str, field: str) -> int:
    try:
        value = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{field}:{text!r} is not a number") from None
        if not number.is_integer():
            raise ValueError(f"{field}:{text!r} is not a whole number") from None
        value = int(number)
    if value < 0:
        raise ValueError(f"{field}:{value} is below 0")
    return value


def read_nodes(path: str | os.PathLike[str]) -> tuple[Machine, ...]:
    source = os.fspath(path)
    machines = []
    for line, row in _rows(source, NODE_COLUMNS):
        if "" in row:
            raise BadLine(source, line, "line", row[""])
        try:
            milli = _whole(row["cpu_milli"], "cpu_milli")
            memory = _whole(row["memory_mib"], "memory_mib") / 1024
            gpus = _whole(row["gpu"], "gpu") if row["gpu"] else 0
        except ValueError as exc:
            field, _, reason = str(exc).partition(":")
            raise BadLine(source, line, field, reason) from None
        machines.append(Machine(row["sn"], milli // 1000, gpus, memory, row["model"],
                                cores=milli / 1000 if milli % 1000 else None))
    return tuple(machines)


class AlibabaTrace(TraceFile):
    """An Alibaba GPU 2023 pod list (and its node list); see the module."""

    kind = "alibaba"

    def __init__(self, path: str | os.PathLike[str], skip_bad: int = 0,
                 nodes: str | os.PathLike[str] | None = None) -> None:
        pods = Path(path)
        if pods.is_dir():
            pods = find_pod_list(pods)
        super().__init__(pods, skip_bad)
        node_file = Path(nodes) if nodes is not None else find_node_list(pods)
        machines = read_nodes(node_file) if node_file is not None else ()
        self.nodes = os.fspath(node_file) if node_file is not None else None
        self.info = TraceInfo(
            "alibaba", self.path, hosts=len(machines) or None,
            processors=sum(m.cpus for m in machines) or None,
            gpus=sum(m.gpus for m in machines) or None, machines=machines,
            notes={"nodes": self.nodes} if self.nodes else {},
        )

    def _jobs(self) -> Iterator[TraceJob]:
        intern = Interner()
        last = 0
        for line, row in _rows(self.path, POD_COLUMNS):
            if "" in row:
                self._bad(line, "line", row[""])
                continue
            try:
                created = _whole(row["creation_time"], "creation_time")
                cpu_milli = _whole(row["cpu_milli"], "cpu_milli")
                memory = _whole(row["memory_mib"], "memory_mib")
                gpus = _whole(row["num_gpu"], "num_gpu") if row["num_gpu"] else 0
                gpu_milli = _whole(row["gpu_milli"], "gpu_milli") if row["gpu_milli"] else 0
                scheduled = _whole(row["scheduled_time"], "scheduled_time") if row["scheduled_time"] else None
                deleted = _whole(row["deletion_time"], "deletion_time") if row["deletion_time"] else None
            except ValueError as exc:
                field, _, reason = str(exc).partition(":")
                self._bad(line, field, reason)
                continue
            if self._out_of_order(line, "creation_time", created, last, "pod"):
                continue
            last = created
            if scheduled is None:
                self._drop("never scheduled")
                continue
            if deleted is None or deleted <= scheduled:
                self._drop("no time run")
                continue
            if gpus > 0:
                resource = "gpu"
                whole = gpu_milli >= 1000 or gpu_milli == 0
                slots = gpus if whole else max(1, math.ceil(gpus * gpu_milli / 1000))
                per_gpu = 1.0 if whole else gpus * gpu_milli / 1000 / slots
            else:
                resource = "cpu"
                slots = max(1, math.ceil(cpu_milli / 1000))
                per_gpu = 0.0
            yield TraceJob(
                row["name"], float(created), float(deleted - scheduled), slots,
                queue=intern(row["qos"]), partition=intern(row["gpu_spec"]), resource=resource,
                memory=memory / 1024 / slots if memory else None,
                resources=pod_vector(cpu_milli, memory, per_gpu, slots),
            )


def pod_vector(cpu_milli: int, memory_mib: int, per_gpu: float, slots: int) -> tuple[tuple[str, float], ...]:
    """What each of a pod's ``slots`` needs: its cores and memory (GB) shared out over them,
    and ``per_gpu`` GPUs; kinds of 0 left out (a pod asking for nothing: ())."""
    kinds = (("cores", cpu_milli / 1000 / slots), ("gpus", per_gpu), ("memory", memory_mib / 1024 / slots))
    return tuple((k, a) for k, a in kinds if a > 0)
