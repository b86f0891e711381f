"""What a replay on hosts with resources measures per kind (cores, memory, GPUs, ...), beside
the slot figures of ``figures.Recorder``: the JSON's ``kinds`` (docs/simulate.md, "The
figures").

- **utilisation per kind**: the time integral of what running jobs hold of the kind over
  (the cluster's total of it x the run);
- **dominant share per consumer**: at each moment the largest, over the kinds, of weight x
  held / total (Dominant Resource Fairness, Ghodsi et al., NSDI 2011; the plan's
  ``policy.weights``), its mean over the run and its largest;
- **GPU fragmentation**: the measure of the FGD paper (Weng et al., "Beware of
  Fragmentation", USENIX ATC '23), as ``engine.gpupack.Fragmentation`` computes it: per
  host, the free GPU capacity a typical task of the workload cannot use (a type asking for
  no GPU can use none; a type the host cannot run, for want of cores, memory or GPUs with
  enough free, none; a type it can run, none of the GPUs with less free than it asks of
  one), over the types of the replayed jobs weighted by how often they occur
  (``workload_mix``). Each host is worked out again whenever a job starts or ends on it,
  from what the engine's book says it has free and on which GPU, so the integral is exact.

Everything is a running integral of a piecewise-constant quantity, updated per job start and
end: O(kinds) per event, plus one host's fragmentation.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from apportion.engine import Plan
from apportion.engine import gpupack

GPUS = "gpus"
MILLI = gpupack.MILLI

FreeOf = Callable[[str], tuple[Mapping[str, float], list[int] | None]]
"""host -> (what it has free of each kind, thousandths free per GPU or None: all free)."""


def task_of(need: Iterable[tuple[str, float]], slots: int) -> gpupack.Task:
    """A job as the FGD measure sees it: its cores (thousandths), memory (MiB) and GPUs, from
    what each of its ``slots`` needs (``TraceJob.resources``)."""
    v = dict(need)
    g = v.get(GPUS, 0.0)
    if g <= 0:
        num, milli = 0, 0
    elif g < 1:
        num, milli = slots, max(1, round(g * MILLI))
    else:
        num, milli = round(g * slots), MILLI
    return gpupack.Task(max(0, round(v.get("cores", 0.0) * slots * MILLI)),
                        max(0, round(v.get("memory", 0.0) * slots * 1024)), num, milli)


def workload_mix(jobs: Iterable[tuple[Iterable[tuple[str, float]], int]]) -> gpupack.TaskMix | None:
    """The task types of (resources, slots) jobs, weighted by how often each occurs (every
    type counts, memory included: the measure of ``--inflate``); None without jobs."""
    tasks = [task_of(need, slots) for need, slots in jobs if need]
    return gpupack.typical_mix(tasks) if tasks else None


def kind_totals(plan: Plan) -> dict[str, float]:
    """What the plan's hosts have of each kind, in all."""
    out: dict[str, float] = {}
    for h in plan.hosts:
        for k, a in h.resources:
            out[k] = out.get(k, 0.0) + a
    return out


def engine_free(engine) -> FreeOf:
    """``FreeOf`` read from an engine's book of vector work (``engine.drf.KindBook``)."""
    book, state = engine.kinds, engine.state

    def free_of(host: str) -> tuple[Mapping[str, float], list[int] | None]:
        return book.free_on(state, host), book.gpu_free.get(host)

    return free_of


class _Use:
    """One consumer's (or the cluster's) holding of each kind, integrated over time."""

    __slots__ = ("used", "integral", "last", "dom", "dom_int", "dom_max", "series", "most")

    def __init__(self, kinds: Iterable[str], t: float, series: bool = False) -> None:
        self.used = {k: 0.0 for k in kinds}
        self.integral = dict.fromkeys(self.used, 0.0)
        self.last = t
        self.dom = 0.0
        self.dom_int = 0.0
        self.dom_max = 0.0
        self.most = dict.fromkeys(self.used, 0.0)  # the most held at once, per kind
        # t, held on every change, per kind (the cluster's only: the report's plot)
        self.series: dict[str, array] | None = {k: array("d") for k in self.used} if series else None

    def advance(self, t: float) -> None:
        dt = t - self.last
        if dt > 0:
            for k, a in self.used.items():
                self.integral[k] += a * dt
            self.dom_int += self.dom * dt
            self.last = t


class KindRecorder:
    """Per-kind figures of one replay; ``figures.Recorder`` calls ``start``/``stop`` with each
    job's vector and host, and puts ``result`` in its JSON as ``kinds``."""

    def __init__(self, plan: Plan, free_of: FreeOf | None = None, mix: gpupack.TaskMix | None = None) -> None:
        self.totals = kind_totals(plan)
        self.weights = dict(plan.policy.weights)
        self.kinds = sorted(self.totals)
        self.start_t: float | None = None
        self.cluster = _Use(self.kinds, 0.0, series=True)
        self.by: dict[str, _Use] = {}
        self.free_of = free_of
        self.frag: gpupack.Fragmentation | None = None
        self.index: dict[str, int] = {}
        self.frag_now = self.frag_int = self.frag_max = 0.0
        self.free_int = 0.0  # integral of the free GPU capacity (thousandths)
        self.frag_last = 0.0
        self.frag_series = array("d")
        self.peak = (0.0, 0.0, 0.0)  # (time, GPUs held, fragmentation) when the most GPUs were held
        hosts = gpu_hosts(plan)
        if mix is not None and free_of is not None and hosts:
            self.index = {h.name: i for i, h in enumerate(hosts)}
            gpus = _packing_view(hosts)
            self.frag = gpupack.Fragmentation(gpus, mix)
            self.frag_now = self.frag.total()
            self.frag_max = self.frag_now
            self.gpu_capacity = float(gpus.total_gpu_milli)

    # --- events ---------------------------------------------------------------
    def begin(self, t: float) -> None:
        """The run starts at ``t`` (the first submission): the integrals start there."""
        if self.start_t is None:
            self.start_t = t
            self.cluster.last = t
            self.frag_last = t
            self.frag_series.extend((t, self.frag_now))

    def _use(self, path: str, t: float) -> _Use:
        u = self.by.get(path)
        if u is None:
            u = self.by[path] = _Use(self.kinds, self.start_t if self.start_t is not None else t)
        return u

    def _change(self, u: _Use, t: float, need: Iterable[tuple[str, float]], n: float) -> None:
        u.advance(t)
        series = u.series
        for k, a in need:
            if k in u.used:
                u.used[k] += a * n
                if u.used[k] > u.most[k]:
                    u.most[k] = u.used[k]
                if series is not None:
                    series[k].extend((t, u.used[k]))
        totals, w = self.totals, self.weights
        u.dom = max((w.get(k, 1.0) * a / totals[k] for k, a in u.used.items() if totals[k] > 0), default=0.0)
        u.dom_max = max(u.dom_max, u.dom)

    def start(self, path: str, t: float, need: Iterable[tuple[str, float]], slots: int, host: str | None) -> None:
        """A job of ``path`` holding ``slots`` x ``need`` on ``host`` from ``t`` on."""
        self._held(path, t, tuple(need), slots, host)

    def stop(self, path: str, t: float, need: Iterable[tuple[str, float]], slots: int, host: str | None) -> None:
        """That job's hold ends at ``t`` (it ended, or was stopped)."""
        self._held(path, t, tuple(need), -slots, host)

    def _held(self, path: str, t: float, need: tuple[tuple[str, float], ...], n: int, host: str | None) -> None:
        if self.frag is not None:
            self._advance_frag(t)  # over what was free until now
        self._change(self.cluster, t, need, n)
        self._change(self._use(path, t), t, need, n)
        self._host(host, t)

    def _host(self, host: str | None, t: float) -> None:
        """``host``'s fragmentation from what the engine says it has free now."""
        frag = self.frag
        if frag is None or host is None or host not in self.index:
            return
        i = self.index[host]
        _set_free(frag.cluster, i, *self.free_of(host))  # type: ignore[misc]
        before = frag.frag[i]
        frag.refresh(i)
        self.frag_now += float(frag.frag[i] - before)
        self.frag_max = max(self.frag_max, self.frag_now)
        self.frag_series.extend((t, self.frag_now))
        held = self.cluster.used.get(GPUS, 0.0)
        if held > self.peak[1] or (held == self.peak[1] and t == self.peak[0]):
            self.peak = (t, held, self.frag_now)

    def _advance_frag(self, t: float) -> None:
        dt = t - self.frag_last
        if dt > 0:
            self.frag_int += self.frag_now * dt
            self.free_int += (self.gpu_capacity - self.cluster.used.get(GPUS, 0.0) * MILLI) * dt
            self.frag_last = t

    # --- the figures ------------------------------------------------------------
    def result(self, start: float, end: float, consumers: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the run's ``kinds``, consumer path -> its ``kinds``) over [start, end]."""
        span = end - start
        totals = self.totals
        self.cluster.advance(end)

        def mean(x: float) -> float:
            return x / span if span > 0 else 0.0

        run: dict[str, Any] = {
            "totals": {k: totals[k] for k in self.kinds},
            "used_mean": {k: mean(self.cluster.integral[k]) for k in self.kinds},
            "utilisation": {k: mean(self.cluster.integral[k]) / totals[k] if totals[k] > 0 else 0.0
                            for k in self.kinds},
            "utilisation_max": {k: self.cluster.most[k] / totals[k] if totals[k] > 0 else 0.0 for k in self.kinds},
            "weights": {k: self.weights.get(k, 1.0) for k in self.kinds},
            "gpu_fragmentation": None,
        }
        if self.frag is not None:
            self._advance_frag(end)
            cap = self.gpu_capacity
            run["gpu_fragmentation"] = {
                "mean": mean(self.frag_int) / cap if cap else 0.0,
                "max": self.frag_max / cap if cap else 0.0,
                "gpus_mean": mean(self.frag_int) / MILLI,
                "of_free": self.frag_int / self.free_int if self.free_int > 0 else 0.0,
                # when the most GPUs were held: the time, the share of the GPUs held, the share fragmented
                "at_peak": {"time": self.peak[0], "gpus_allocated": self.peak[1] * MILLI / cap if cap else 0.0,
                            "fragmentation": self.peak[2] / cap if cap else 0.0},
                "task_types": len(self.frag.mix),
            }
        per: dict[str, Any] = {}
        for path in consumers:
            u = self.by.get(path)
            if u is None:
                u = _Use(self.kinds, start)
            u.advance(end)
            per[path] = {
                "used_mean": {k: mean(u.integral[k]) for k in self.kinds},
                "share_mean": {k: mean(u.integral[k]) / totals[k] if totals[k] > 0 else 0.0 for k in self.kinds},
                "dominant_share_mean": mean(u.dom_int),
                "dominant_share_max": u.dom_max,
            }
        return run, per

    def series(self, edges: list[float], binned: Callable[[array, list[float], float], list[float]]) -> dict[str, Any]:
        """Per kind, utilisation in the bins ``edges`` (``figures.binned``); GPU fragmentation
        as a share of the GPU capacity, when measured; per consumer, its dominant share is not
        kept over time (only its mean and largest)."""
        out: dict[str, Any] = {"utilisation": {}}
        held = self.cluster.series or {}
        for k in self.kinds:
            tot = self.totals[k]
            out["utilisation"][k] = [x / tot if tot > 0 else 0.0 for x in binned(held[k], edges, 0)]
        if self.frag is not None and self.gpu_capacity:
            first = self.frag_series[1] if len(self.frag_series) > 1 else self.frag_now
            out["gpu_fragmentation"] = [x / self.gpu_capacity for x in binned(self.frag_series, edges, first)]
        return out


def gpu_hosts(plan: Plan) -> list:
    """The plan's hosts with GPUs (the others have no GPU capacity to fragment)."""
    return [h for h in plan.hosts if dict(h.resources).get(GPUS, 0.0) > 0]


def _packing_view(hosts: list) -> gpupack.Cluster:
    """``hosts`` as engine.gpupack sees them, all free: cores in thousandths, memory in MiB."""
    caps = [dict(h.resources) for h in hosts]
    return gpupack.Cluster([round(c.get("cores", 0.0) * MILLI) for c in caps],
                           [round(c.get("memory", 0.0) * 1024) for c in caps],
                           [int(c[GPUS] + 1e-9) for c in caps])


def _set_free(c: gpupack.Cluster, i: int, free: Mapping[str, float], row: list[int] | None) -> None:
    """Host ``i`` of ``c`` has ``free`` of each kind, and ``row`` free on its GPUs (None: all)."""
    c.cpu[i] = max(0, int(free.get("cores", 0.0) * MILLI + 1e-6))
    c.mem[i] = max(0, int(free.get("memory", 0.0) * 1024 + 1e-6))
    if row is not None:
        c.gpu[i, :len(row)] = row


def fragmentation_now(plan: Plan, free_of: FreeOf, mix: gpupack.TaskMix) -> float:
    """The cluster's GPU fragmentation now, as a share of its GPU capacity, worked out afresh
    from ``free_of`` for every GPU host (a check on ``KindRecorder``'s running value)."""
    hosts = gpu_hosts(plan)
    c = _packing_view(hosts)
    for i, h in enumerate(hosts):
        _set_free(c, i, *free_of(h.name))
    cap = c.total_gpu_milli
    return gpupack.Fragmentation(c, mix).total() / cap if cap else 0.0


__all__ = ["KindRecorder", "engine_free", "fragmentation_now", "kind_totals", "task_of", "workload_mix"]
