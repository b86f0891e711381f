"""Placing tasks that ask for CPU, memory and GPUs (whole or a fraction of one) on the hosts of
a GPU cluster: random, best-fit, and fragmentation gradient descent (FGD).

FGD follows Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent" (USENIX ATC '23). A host's *fragmentation* is the GPU
capacity it has left that a typical task cannot use, in expectation over the workload's
task types weighted by how common they are:

- a type that asks for no GPU cannot use any of the host's free GPU capacity;
- a type the host cannot run (not enough free CPU or memory, not enough GPUs with enough
  free capacity, or a GPU model it does not accept) cannot use any of it either;
- a type the host can run cannot use the free capacity of the GPUs that each have less
  free than the type asks of one GPU.

FGD puts each task on the host, and the GPU(s), whose fragmentation grows least. Growths
are compared in steps of a tenth of a GPU, and among hosts in the least step the first
(lowest index) wins, so the same hosts keep being filled and whole hosts stay free for
large tasks; the paper's own simulator has the same effect, as it scores hosts on a coarse
integer scale and breaks ties by host name. Two departures from the paper, both measured
to allocate more of the cluster on its Alibaba trace: a type includes memory (the paper
checks only CPU and GPUs, yet many of those hosts run out of memory before their GPUs), and
every type of the workload counts (the paper keeps the most common that make up 95%).

This module is pure: arrays in, a choice out, no I/O and no clock; the random policy takes
its random generator from the caller. A host's GPUs are a row of free capacity in
thousandths of a GPU ("milli", 1000 = a whole GPU); a host with fewer GPUs than the widest
has its row padded with GPUs of capacity 0. A task asks for ``num_gpu`` GPUs with
``gpu_milli`` of each: a whole-GPU task (``gpu_milli`` 1000) takes GPUs that are wholly
free; a fraction (``num_gpu`` 1, ``gpu_milli`` < 1000) shares one GPU with others.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

MILLI = 1000
POLICIES = ("random", "bestfit", "fgd")
RESOLUTION = 100.0  # fgd: growths of fragmentation closer than this (thousandths of a GPU) tie


@dataclass(frozen=True)
class Task:
    """What one task asks for: CPU in thousandths of a core, memory in MiB, ``num_gpu`` GPUs
    with ``gpu_milli`` thousandths of each, and the GPU model codes it accepts (None: any)."""

    cpu: int
    memory: int = 0
    num_gpu: int = 0
    gpu_milli: int = 0
    models: frozenset[int] | None = None

    def __post_init__(self) -> None:
        if self.cpu < 0 or self.memory < 0 or self.num_gpu < 0:
            raise ValueError(f"negative request: {self}")
        if self.num_gpu and not 0 < self.gpu_milli <= MILLI:
            raise ValueError(f"gpu_milli:{self.gpu_milli} must be in 1..{MILLI} when num_gpu > 0")

    @property
    def gpu_total(self) -> int:
        """Thousandths of a GPU asked for in all."""
        return self.num_gpu * self.gpu_milli if self.num_gpu else 0


@dataclass(frozen=True)
class Placement:
    node: int
    gpus: tuple[int, ...]


class Cluster:
    """The hosts' free resources, as arrays (changed in place by ``place``)."""

    def __init__(self, cpu: Sequence[int], memory: Sequence[int], gpus: Sequence[int],
                 models: Sequence[int] | None = None) -> None:
        n = len(cpu)
        if not (len(memory) == len(gpus) == n) or (models is not None and len(models) != n):
            raise ValueError("cpu, memory, gpus and models need one entry per host")
        self.cpu_cap = np.asarray(cpu, dtype=np.int64).copy()
        self.mem_cap = np.asarray(memory, dtype=np.int64).copy()
        self.ngpu = np.asarray(gpus, dtype=np.int64).copy()
        if (self.cpu_cap < 0).any() or (self.mem_cap < 0).any() or (self.ngpu < 0).any():
            raise ValueError("a host's cpu, memory and gpus cannot be negative")
        self.model = (np.full(n, -1, dtype=np.int64) if models is None
                      else np.asarray(models, dtype=np.int64).copy())
        width = max(1, int(self.ngpu.max()) if n else 1)
        self.gpu_cap = np.where(np.arange(width)[None, :] < self.ngpu[:, None], MILLI, 0).astype(np.int64)
        self.cpu = self.cpu_cap.copy()
        self.mem = self.mem_cap.copy()
        self.gpu = self.gpu_cap.copy()
        # scales of the best-fit score: the largest host's CPU and GPUs
        self.cpu_scale = float(max(1, int(self.cpu_cap.max()) if n else 1))
        self.gpu_scale = float(max(1, int(self.ngpu.max()) * MILLI if n else 1))

    def __len__(self) -> int:
        return len(self.cpu)

    @property
    def total_gpu_milli(self) -> int:
        return int(self.ngpu.sum()) * MILLI

    @property
    def used_gpu_milli(self) -> int:
        return int((self.gpu_cap - self.gpu).sum())

    def model_ok(self, models: frozenset[int] | None) -> np.ndarray:
        if models is None:
            return np.ones(len(self), dtype=bool)
        return np.isin(self.model, np.fromiter(models, dtype=np.int64, count=len(models)))

    def feasible(self, task: Task) -> np.ndarray:
        """Which hosts can take ``task`` now (bool per host)."""
        ok = (self.cpu >= task.cpu) & (self.mem >= task.memory)
        if task.num_gpu:
            ok &= (self.gpu >= task.gpu_milli).sum(axis=1) >= task.num_gpu
            if task.models is not None:
                ok &= self.model_ok(task.models)
        return ok

    def place(self, task: Task, where: Placement) -> None:
        """Take ``task``'s resources on ``where``; ValueError (nothing changed) if they are not free."""
        n = where.node
        if len(where.gpus) != task.num_gpu or len(set(where.gpus)) != len(where.gpus):
            raise ValueError(f"{task} needs {task.num_gpu} distinct GPUs, given {where.gpus}")
        if self.cpu[n] < task.cpu or self.mem[n] < task.memory:
            raise ValueError(f"host {n} has not the CPU or memory for {task}")
        for g in where.gpus:
            if not 0 <= g < self.ngpu[n] or self.gpu[n, g] < task.gpu_milli:
                raise ValueError(f"GPU {g} of host {n} has not {task.gpu_milli} free")
        if task.num_gpu and task.models is not None and int(self.model[n]) not in task.models:
            raise ValueError(f"host {n}'s GPU model is not one {task} accepts")
        self.cpu[n] -= task.cpu
        self.mem[n] -= task.memory
        for g in where.gpus:
            self.gpu[n, g] -= task.gpu_milli


def _whole_gpus(free: np.ndarray, k: int) -> tuple[int, ...]:
    """The first ``k`` wholly free GPUs of one host's row."""
    return tuple(int(g) for g in np.flatnonzero(free >= MILLI)[:k])


def _tightest_gpus(free: np.ndarray, milli: int, k: int) -> tuple[int, ...]:
    """``k`` GPUs with at least ``milli`` free, those with least free first (lowest index on ties)."""
    fit = np.flatnonzero(free >= milli)
    order = fit[np.argsort(free[fit], kind="stable")]
    return tuple(int(g) for g in order[:k])


def default_gpus(cluster: Cluster, task: Task, node: int) -> tuple[int, ...]:
    """The GPUs a task takes on ``node`` when the policy has no view on which: wholly free ones
    for whole-GPU tasks; the tightest that fit for fractions."""
    if not task.num_gpu:
        return ()
    row = cluster.gpu[node]
    if task.gpu_milli >= MILLI:
        return _whole_gpus(row, task.num_gpu)
    return _tightest_gpus(row, task.gpu_milli, task.num_gpu)


def bestfit_score(cluster: Cluster, task: Task, nodes: np.ndarray) -> np.ndarray:
    """What is left on each host after the task, CPU and GPU weighted alike, each over the
    largest host's: lower is a tighter fit."""
    gpu_left = cluster.gpu[nodes].sum(axis=1) - task.gpu_total
    return 0.5 * (cluster.cpu[nodes] - task.cpu) / cluster.cpu_scale + 0.5 * gpu_left / cluster.gpu_scale


# --- the workload's typical tasks and the fragmentation measure -------------------------------

@dataclass(frozen=True)
class TaskMix:
    """Task types with their weights (summing to 1): per type its CPU, memory, GPUs, thousandths
    of each GPU and accepted GPU models."""

    cpu: np.ndarray         # per type
    memory: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    models: tuple[frozenset[int] | None, ...]
    weight: np.ndarray

    def __len__(self) -> int:
        return len(self.weight)


def typical_mix(tasks: Iterable[Task], popularity: float = 1.0, memory: bool = True) -> TaskMix:
    """The most common task types that together make up at least ``popularity`` of ``tasks``,
    weighted by their counts (renormalised to 1). With ``memory`` False, a type's memory is
    left out (0), as in the paper."""
    if not 0 < popularity <= 1:
        raise ValueError(f"popularity:{popularity} must be in (0, 1]")
    counts = Counter((t.cpu, t.num_gpu if t.num_gpu else 0, t.gpu_milli if t.num_gpu else 0, t.models,
                      t.memory if memory else 0) for t in tasks)
    if not counts:
        raise ValueError("no tasks to take a mix from")
    total = sum(counts.values())
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], -kv[0][0], -kv[0][2], -kv[0][1],
                                                     sorted(kv[0][3]) if kv[0][3] is not None else []))
    kept, cum = [], 0
    for key, c in ordered:
        kept.append((key, c))
        cum += c
        if cum >= popularity * total:
            break
    w = np.array([c for _, c in kept], dtype=float)
    return TaskMix(cpu=np.array([k[0] for k, _ in kept], dtype=np.int64),
                   memory=np.array([k[4] for k, _ in kept], dtype=np.int64),
                   num_gpu=np.array([k[1] for k, _ in kept], dtype=np.int64),
                   gpu_milli=np.array([k[2] for k, _ in kept], dtype=np.int64),
                   models=tuple(k[3] for k, _ in kept), weight=w / w.sum())


class Fragmentation:
    """The FGD measure over a cluster, kept up to date host by host.

    Types asking for GPUs are grouped into *classes* of the same (gpu_milli, num_gpu); per
    host and class it keeps how many GPUs have at least gpu_milli free (``cnt``) and the free
    capacity of those that have less (``part``), so that a hypothetical placement is scored
    from those counts without rebuilding the host."""

    def __init__(self, cluster: Cluster, mix: TaskMix, before: Fragmentation | None = None) -> None:
        """``before``: this cluster's measure over other task types, up to date; its per-class
        counts are taken over where the classes are the same (they depend on the GPUs alone)."""
        self.cluster = cluster
        self.mix = mix
        gpu_types = np.flatnonzero(mix.num_gpu > 0)
        classes = sorted({(int(mix.gpu_milli[t]), int(mix.num_gpu[t])) for t in gpu_types})
        self.class_milli = np.array([c[0] for c in classes], dtype=np.int64)
        self.class_k = np.array([c[1] for c in classes], dtype=np.int64)
        index = {c: i for i, c in enumerate(classes)}
        # GPU types in class order; each class's types are a run starting at class_start
        cls = np.array([index[(int(mix.gpu_milli[t]), int(mix.num_gpu[t]))] for t in gpu_types], dtype=np.int64)
        order = np.argsort(cls, kind="stable")
        gpu_types, cls = gpu_types[order], cls[order]
        self.class_start = np.searchsorted(cls, np.arange(len(classes)))
        self.t_cpu = mix.cpu[gpu_types]
        self.t_mem = mix.memory[gpu_types]
        self.t_weight = mix.weight[gpu_types]
        # which hosts accept each GPU type's model (hosts x types)
        self.t_model_ok = np.stack([cluster.model_ok(mix.models[t]) for t in gpu_types], axis=1) \
            if len(gpu_types) else np.zeros((len(cluster), 0), dtype=bool)
        if (before is not None and before.cluster is cluster and np.array_equal(before.class_milli, self.class_milli)
                and np.array_equal(before.class_k, self.class_k)):
            self.cnt, self.part = before.cnt, before.part
        else:
            self.cnt, self.part = self._counts(cluster.gpu)
        self.frag = self._value(cluster.gpu.sum(axis=1),
                                self._weights(cluster.cpu, cluster.mem, self.t_model_ok), self.cnt, self.part)

    def _counts(self, gpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(cnt, part) for rows of GPUs: (rows x classes) each."""
        m = self.class_milli[None, None, :]
        g = gpu[:, :, None]
        enough = g >= m
        return enough.sum(axis=1), np.where(enough, 0, g).sum(axis=1)

    def _weights(self, cpu: np.ndarray, mem: np.ndarray, model_ok: np.ndarray) -> np.ndarray:
        """Per host and class, the weight of the class's types whose CPU and memory the host has
        and whose GPU model it is (hosts x classes)."""
        if not len(self.class_start):
            return np.zeros((len(cpu), 0))
        runs = (cpu[:, None] >= self.t_cpu[None, :]) & (mem[:, None] >= self.t_mem[None, :]) & model_ok
        return np.add.reduceat(np.where(runs, self.t_weight[None, :], 0.0), self.class_start, axis=1)

    def _value(self, total: np.ndarray, w: np.ndarray, cnt: np.ndarray, part: np.ndarray) -> np.ndarray:
        """Fragmentation from the free GPU capacity, the class weights a host can run, and the
        per-class counts (rows x classes)."""
        usable = (cnt >= self.class_k) * (total[:, None] - part)      # capacity a class can use
        return total - (w * usable).sum(axis=1)

    def refresh(self, node: int) -> None:
        """Recompute one host after a change to it."""
        c = self.cluster
        one = slice(node, node + 1)
        cnt, part = self._counts(c.gpu[one])
        self.cnt[node], self.part[node] = cnt[0], part[0]
        w = self._weights(c.cpu[one], c.mem[one], self.t_model_ok[one])
        self.frag[node] = self._value(c.gpu[one].sum(axis=1), w, cnt, part)[0]

    def total(self) -> float:
        """The cluster's fragmented GPU capacity, in thousandths of a GPU."""
        return float(self.frag.sum())

    def after(self, task: Task, nodes: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Fragmentation of each of ``nodes`` once ``task`` is on it: one value per host, and
        None. For a fraction, one value per candidate (host, GPU), and the candidates as
        (position in ``nodes``, GPU, its free capacity): one per distinct free capacity on a
        host (the lowest-numbered such GPU), as GPUs with the same free capacity are alike."""
        c = self.cluster
        total = c.gpu[nodes].sum(axis=1)
        cnt, part = self.cnt[nodes], self.part[nodes]
        w = self._weights(c.cpu[nodes] - task.cpu, c.mem[nodes] - task.memory, self.t_model_ok[nodes])
        k, m = task.num_gpu, task.gpu_milli
        if not k:
            return self._value(total, w, cnt, part), None
        if m >= MILLI:  # k wholly free GPUs go to 0: each stops counting in every class
            return self._value(total - k * MILLI, w, cnt - k, part), None
        if k == 1:      # a fraction on one GPU: per distinct (host, free capacity) that fits
            free = c.gpu[nodes]
            at, gpu = np.nonzero(free >= m)
            f = free[at, gpu]
            _, first = np.unique(at * (MILLI + 1) + f, return_index=True)
            at, gpu, f = at[first], gpu[first], f[first]
            f1, f2 = f[:, None], (f - m)[:, None]
            cm = self.class_milli[None, :]
            cnt2 = cnt[at] - (f1 >= cm) + (f2 >= cm)
            part2 = part[at] - np.where(f1 < cm, f1, 0) + np.where(f2 < cm, f2, 0)
            return self._value(total[at] - m, w[at], cnt2, part2), (at, gpu, f)
        # several fractional GPUs: build each host's row after the tightest fit
        rows = c.gpu[nodes].copy()
        for i, n in enumerate(nodes):
            for g in _tightest_gpus(c.gpu[n], m, k):
                rows[i, g] -= m
        cnt2, part2 = self._counts(rows)
        return self._value(rows.sum(axis=1), w, cnt2, part2), None


# --- the policies ---------------------------------------------------------------------------

def _first_min(keys: Sequence[np.ndarray]) -> int:
    """Index of the lexicographic minimum of parallel key arrays (first key first; the lowest
    index on full ties)."""
    return int(np.lexsort(tuple(reversed(keys)))[0])


def _steps(grow: np.ndarray, resolution: float) -> np.ndarray:
    """Growth in whole steps of ``resolution`` (rounding noise removed first)."""
    return np.floor(np.round(grow, 6) / resolution) if resolution > 0 else np.round(grow, 6)


def choose(cluster: Cluster, task: Task, policy: str, *, frag: Fragmentation | None = None,
           rng: np.random.Generator | None = None, resolution: float = RESOLUTION) -> Placement | None:
    """Where ``task`` goes under ``policy`` (``random``, ``bestfit`` or ``fgd``), or None when no
    host can take it. ``fgd`` needs ``frag`` (built on this cluster); ``random`` needs ``rng``.

    ``fgd`` compares the growth of fragmentation in steps of ``resolution`` thousandths of a
    GPU and, among hosts in the least step, takes the first: growths that differ by less
    than a tenth of a GPU count as equal, and the same hosts keep being filled first, so
    whole hosts stay free for large tasks. A task that asks for no GPU goes where the
    growth is least exactly, then to the best fit (a host without GPUs when one has room)."""
    if policy not in POLICIES:
        raise ValueError(f"policy:{policy!r} is not one of {', '.join(POLICIES)}")
    nodes = np.flatnonzero(cluster.feasible(task))
    if not len(nodes):
        return None
    if policy == "random":
        if rng is None:
            raise ValueError("the random policy needs a random generator")
        node = int(nodes[rng.integers(len(nodes))])
        if task.num_gpu == 1 and task.gpu_milli < MILLI:
            fits = np.flatnonzero(cluster.gpu[node] >= task.gpu_milli)
            return Placement(node, (int(fits[rng.integers(len(fits))]),))
        return Placement(node, default_gpus(cluster, task, node))
    if policy == "bestfit":
        node = int(nodes[_first_min([bestfit_score(cluster, task, nodes)])])
        return Placement(node, default_gpus(cluster, task, node))
    if policy == "fgd":
        if frag is None or frag.cluster is not cluster:
            raise ValueError("the fgd policy needs the cluster's Fragmentation")
        after, free = frag.after(task, nodes)
        if not task.num_gpu:
            # no GPU asked: where it costs the GPUs least, exactly; then the best fit
            grow = np.round(after - frag.frag[nodes], 6)
            node = int(nodes[_first_min([grow, bestfit_score(cluster, task, nodes)])])
            return Placement(node, ())
        if free is None:
            step = _steps(after - frag.frag[nodes], resolution)
            node = int(nodes[_first_min([step])])
            return Placement(node, default_gpus(cluster, task, node))
        # a fraction: least growth, then the first host, then its GPU with least free
        at, gpu, f = free
        step = _steps(after - frag.frag[nodes][at], resolution)
        i = _first_min([step, at, f, gpu])
        return Placement(int(nodes[at[i]]), (int(gpu[i]),))
    raise AssertionError(policy)
