"""GPU allocation as the workload grows: the method of the FGD paper (Weng et al., USENIX ATC '23,
"Beware of Fragmentation"), on a GPU trace's own hosts.

For each seed, a stream of tasks is drawn: the trace's own pods, topped up with pods drawn
from it with replacement until their GPU requests reach the largest percentage asked of the
cluster's GPUs, all in a random order (the seed's). Tasks arrive one by one and never leave;
each goes where the placement policy (engine/gpupack.py) puts it, and a task that fits on
no host is not placed. When the GPUs asked for so far first reach each percentage, the share
of the cluster's GPU capacity that is allocated and the share that is fragmented (the FGD
measure, over the trace's typical tasks) are recorded. The figures are the mean over the
seeds, with the lowest and highest allocation.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from apportion.engine.gpupack import POLICIES, Cluster, Fragmentation, Task, TaskMix, choose, typical_mix
from apportion.traces.alibaba import NODE_COLUMNS, find_node_list, find_pod_list
from apportion.traces.record import BadLine
from apportion.traces.textfile import open_text

POD_FIELDS = ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")


@dataclass(frozen=True)
class GpuTrace:
    """A GPU trace's tasks and hosts, as the packing policies see them."""

    tasks: tuple[Task, ...]
    cpu: np.ndarray        # per host, thousandths of a core
    memory: np.ndarray     # MiB
    gpus: np.ndarray
    models: np.ndarray     # code per host, -1 for none
    model_names: tuple[str, ...]

    def cluster(self) -> Cluster:
        return Cluster(self.cpu, self.memory, self.gpus, self.models)


def _csv(path: Path, columns: Sequence[str]):
    source = os.fspath(path)
    with open_text(path) as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            raise BadLine(source, 1, "header", f"no column {', '.join(missing)}")
        for row in reader:
            yield source, reader.line_num, row


def _count(source: str, line: int, row: dict, field: str) -> int:
    text = (row.get(field) or "").strip()
    if not text:
        return 0
    try:
        value = float(text)
    except ValueError:
        raise BadLine(source, line, field, f"{text!r} is not a number") from None
    if value < 0 or not value.is_integer():
        raise BadLine(source, line, field, f"{text!r} is not a whole number >= 0")
    return int(value)


def read_gpu_trace(trace: str | os.PathLike[str], nodes: str | os.PathLike[str] | None = None) -> GpuTrace:
    """An Alibaba GPU 2023 pod list (or its directory) and its node list (``nodes``, else the
    ``*node_list*`` file beside it)."""
    pods = Path(trace)
    if pods.is_dir():
        pods = find_pod_list(pods)
    node_file = Path(nodes) if nodes is not None else find_node_list(pods)
    if node_file is None:
        raise BadLine(os.fspath(pods), None, "nodes", "no *node_list* file beside the pod list: the GPU "
                      "hosts are needed")
    cpu, mem, gpus, model_of = [], [], [], []
    for source, line, row in _csv(node_file, NODE_COLUMNS):
        cpu.append(_count(source, line, row, "cpu_milli"))
        mem.append(_count(source, line, row, "memory_mib"))
        gpus.append(_count(source, line, row, "gpu"))
        model_of.append((row.get("model") or "").strip())
    if not cpu:
        raise BadLine(os.fspath(node_file), None, "nodes", "no hosts in the node list")
    names = tuple(sorted({m for m in model_of if m}))
    code = {m: i for i, m in enumerate(names)}
    tasks = []
    for source, line, row in _csv(pods, POD_FIELDS):
        num = _count(source, line, row, "num_gpu")
        milli = min(_count(source, line, row, "gpu_milli"), 1000) if num else 0
        if num and not milli:
            raise BadLine(source, line, "gpu_milli", "0 with num_gpu > 0")
        spec = [s for s in (row.get("gpu_spec") or "").split("|") if s.strip()]
        models = frozenset(code.get(s.strip(), -2) for s in spec) if spec and num else None
        tasks.append(Task(cpu=_count(source, line, row, "cpu_milli"), memory=_count(source, line, row, "memory_mib"),
                          num_gpu=num, gpu_milli=milli, models=models))
    if not tasks:
        raise BadLine(os.fspath(pods), None, "pods", "no pods in the pod list")
    return GpuTrace(tuple(tasks), np.array(cpu, dtype=np.int64), np.array(mem, dtype=np.int64),
                    np.array(gpus, dtype=np.int64),
                    np.array([code.get(m, -1) for m in model_of], dtype=np.int64), names)


def stream(requests: np.ndarray, target: float, rng: np.random.Generator) -> np.ndarray:
    """Task indices in arrival order: every task once, plus tasks drawn with replacement until
    the GPU requests reach ``target``, shuffled."""
    n = len(requests)
    total = float(requests.sum())
    if total <= 0:
        raise ValueError("the trace asks for no GPUs")
    extra: list[int] = []
    while total < target:
        draws = rng.integers(n, size=max(16, n // 4))
        cum = total + np.cumsum(requests[draws])
        stop = int(np.searchsorted(cum, target, side="left"))
        if stop < len(draws):
            extra.extend(draws[:stop + 1].tolist())
            break
        extra.extend(draws.tolist())
        total = float(cum[-1])
    return rng.permutation(np.concatenate([np.arange(n), np.asarray(extra, dtype=np.int64)]))


def run_seed(trace: GpuTrace, mix: TaskMix, percents: Sequence[float], policy: str, seed: int
             ) -> list[tuple[float, float]]:
    """(allocation, fragmentation) at each of ``percents`` (ascending) for one seed."""
    rng = np.random.default_rng(seed)
    cluster = trace.cluster()
    frag = Fragmentation(cluster, mix)
    capacity = cluster.total_gpu_milli
    requests = np.array([t.gpu_total for t in trace.tasks], dtype=np.int64)
    marks = [p / 100 * capacity for p in percents]
    order = stream(requests, marks[-1], rng)
    out: list[tuple[float, float]] = []
    arrived = 0
    for i in order:
        task = trace.tasks[i]
        arrived += int(requests[i])
        where = choose(cluster, task, policy, frag=frag, rng=rng)
        if where is not None:
            cluster.place(task, where)
            frag.refresh(where.node)
        while len(out) < len(marks) and arrived >= marks[len(out)]:
            out.append((cluster.used_gpu_milli / capacity, frag.total() / capacity))
        if len(out) == len(marks):
            break
    return out


def inflate(trace: GpuTrace, percents: Sequence[float], seeds: int = 10, policy: str = "fgd",
            first_seed: int = 0) -> dict:
    """The figures for ``percents`` over ``seeds`` seeds (first_seed, first_seed + 1, ...)."""
    if policy not in POLICIES:
        raise ValueError(f"policy:{policy!r} is not one of {', '.join(POLICIES)}")
    if seeds < 1:
        raise ValueError(f"seeds:{seeds} must be at least 1")
    ps = sorted(set(float(p) for p in percents))
    if not ps or ps[0] <= 0:
        raise ValueError("inflate: percentages must be above 0")
    if trace.gpus.sum() == 0:
        raise ValueError("inflate: the cluster has no GPUs")
    start, cpu0 = time.perf_counter(), time.process_time()
    mix = typical_mix(trace.tasks)
    runs = [run_seed(trace, mix, ps, policy, first_seed + s) for s in range(seeds)]
    steps = []
    for j, p in enumerate(ps):
        alloc = [r[j][0] for r in runs]
        steps.append({"percent": int(p) if p.is_integer() else p,
                      "gpu_allocation": float(np.mean(alloc)),
                      "gpu_allocation_min": float(min(alloc)), "gpu_allocation_max": float(max(alloc)),
                      "fragmentation": float(np.mean([r[j][1] for r in runs]))})
    return {"inflate": steps,
            "inflate_run": {"policy": policy, "seeds": seeds, "first_seed": first_seed,
                            "tasks": len(trace.tasks), "hosts": len(trace.cpu), "gpus": int(trace.gpus.sum()),
                            "typical_types": len(mix),
                            "wall_seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu0}}


def parse_percents(text: str) -> list[float]:
    """``10,20,...,100`` (an ellipsis continues the step of the two numbers before it) or a
    plain list ``25,50,100``."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    out: list[float] = []
    i = 0
    while i < len(parts):
        if parts[i] in ("...", "…"):
            if len(out) < 2 or i + 1 >= len(parts):
                raise ValueError(f"inflate:{text!r}: '...' needs two numbers before it and one after")
            step, end = out[-1] - out[-2], _number(parts[i + 1], text)
            if step <= 0:
                raise ValueError(f"inflate:{text!r}: the numbers before '...' must increase")
            x = out[-1] + step
            while x < end - 1e-9:
                out.append(round(x, 9))
                x += step
            i += 1
            continue
        out.append(_number(parts[i], text))
        i += 1
    if not out or any(p <= 0 for p in out):
        raise ValueError(f"inflate:{text!r}: give percentages above 0, e.g. 10,20,...,100")
    return out


def _number(part: str, text: str) -> float:
    try:
        return float(part)
    except ValueError:
        raise ValueError(f"inflate:{text!r}: {part!r} is not a number") from None


def render_inflate(console, result: dict) -> None:
    """The inflation figures as a table (``console``: a rich Console)."""
    from rich.table import Table

    run = result["inflate_run"]
    t = Table(title=f"GPU allocation as the workload grows: {run['policy']}, {run['seeds']} seeds, "
                    f"{run['hosts']:,} hosts, {run['gpus']:,} GPUs")
    for col in ("GPUs requested", "allocated", "min", "max", "fragmented"):
        t.add_column(col, justify="right")
    for s in result["inflate"]:
        t.add_row(f"{s['percent']}%", f"{s['gpu_allocation']:.1%}", f"{s['gpu_allocation_min']:.1%}",
                  f"{s['gpu_allocation_max']:.1%}", f"{s['fragmentation']:.1%}")
    console.print(t)
    console.print(f"{run['wall_seconds']:.1f} s ({run['cpu_seconds']:.1f} s CPU)")
