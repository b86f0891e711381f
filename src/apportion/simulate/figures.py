"""What a replay measures, as it goes, and the figures made of it at the end.

The replay tells a ``Recorder`` what happens, in time order: a job arrives, starts,
ends, is reclaimed or evicted, and what each consumer deserves (read after every cycle
that changed it, and held until the next: the engine decides only at cycles, so the
integral is exact). Jobs still waiting when the replay ends are told too, and count as
censored: their wait is at least the end of the run less their submission.
Everything is kept as running integrals of piecewise-constant quantities, so a
figure costs O(1) per event, plus per-job numbers in flat arrays for the
distributions. ``Recorder.result()`` gives the JSON contract (docs/simulate.md):

``{"jobs", "makespan", "utilisation", "fairness": {"jain", "max_deviation",
"mean_deviation"}, "consumers": {PATH: {"jobs", "wait", "bounded_slowdown", ...}}}``
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apportion.simulate.kindfigures import KindRecorder

BSLD_BOUND = 10.0  # seconds: bounded slowdown's floor on the run time
SERIES_POINTS = 400  # points per series in the result (time-weighted means over bins)


def distribution(values: Iterable[float]) -> dict[str, float]:
    """mean, p50, p95 and max (nearest rank); zeros when there is nothing."""
    xs = sorted(values)
    n = len(xs)
    if not n:
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}

    def rank(p: float) -> float:
        return float(xs[max(0, math.ceil(p * n) - 1)])

    return {"mean": math.fsum(xs) / n, "p50": rank(0.50), "p95": rank(0.95), "max": float(xs[-1])}


def jain(xs: list[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n at worst."""
    sq = math.fsum(x * x for x in xs)
    if not xs or sq == 0:
        return 1.0
    return math.fsum(xs) ** 2 / (len(xs) * sq)


def fcfs_makespan(jobs: list[tuple[float, float, int]], slots: int) -> float:
    """Time from the first submit to the last finish of ``jobs`` (submit, run, slots), run
    first come first served, none overtaking, on ``slots`` slots alone."""
    if not jobs:
        return 0.0
    free = slots
    ends: list[tuple[float, int]] = []
    t = 0.0
    first = jobs[0][0]
    last = first
    for submit, run, need in jobs:
        t = max(t, submit)
        while free < need:
            end, n = heapq.heappop(ends)
            t = max(t, end)
            free += n
        while ends and ends[0][0] <= t:
            free += heapq.heappop(ends)[1]
        free -= need
        heapq.heappush(ends, (t + run, need))
        last = max(last, t + run)
    return last - first


class _Consumer:
    __slots__ = ("path", "held", "deserved", "queued", "last", "held_int", "des_int", "dev_int",
                 "short_s", "starved_s", "demand_s", "reclaims", "evictions", "lost",
                 "wait", "turn", "run", "submit", "slots", "series", "des_series", "first", "final", "open")

    def __init__(self, path: str) -> None:
        self.path = path
        self.held = 0  # slots held now
        self.deserved = 0  # since the last cycle that changed it
        self.queued = 0  # slots of jobs waiting
        self.last = 0.0
        self.held_int = 0.0  # slot-seconds
        self.des_int = 0.0
        self.dev_int = 0.0  # integral of |held - deserved|
        self.short_s = 0.0  # seconds below deserved while jobs wait
        self.starved_s = 0.0  # seconds with nothing held while jobs wait
        self.demand_s = 0.0  # seconds with jobs waiting
        self.reclaims = 0
        self.evictions = 0
        self.lost = 0.0  # slot-seconds of work thrown away
        self.wait = array("d")
        self.turn = array("d")
        self.run = array("d")
        self.submit = array("d")
        self.slots = array("l")
        self.series = array("d")  # t, held, t, held, ... on every change
        self.des_series = array("d")  # t, deserved on every cycle that moved it
        self.first = math.inf  # first submit
        self.final = 0.0  # last finish
        self.open: list[tuple[float, float, float, int]] = []  # (submit, run, left, slots): never finished

    def advance(self, t: float) -> None:
        dt = t - self.last
        if dt > 0:
            h, d = self.held, self.deserved
            self.held_int += h * dt
            self.des_int += d * dt
            self.dev_int += abs(h - d) * dt
            if self.queued > 0:
                self.demand_s += dt
                if h < d:
                    self.short_s += dt
                if h == 0:
                    self.starved_s += dt
            self.last = t


class Recorder:
    """Per consumer and overall, as the replay goes. Time must never go back."""

    def __init__(self, capacity: int, leaves: Iterable[str], entitlement: dict[str, int] | None = None) -> None:
        self.capacity = capacity
        self.c: dict[str, _Consumer] = {p: _Consumer(p) for p in leaves}
        self.entitlement = dict(entitlement or {})
        self.held = 0
        self.held_int = 0.0
        self.last = 0.0
        self.start: float | None = None
        self.end = 0.0
        self.total = array("d")  # t, held (whole cluster) on every change
        self.jobs = 0
        self.unrunnable: dict[str, int] = {}
        self.samples = 0  # updates of what consumers deserve
        self._deserving: list[str] = []  # leaves the last deserved() gave something
        # per-kind figures (simulate.kindfigures.KindRecorder) when jobs hold resource vectors
        self.kinds: KindRecorder | None = None

    def _consumer(self, path: str) -> _Consumer:
        c = self.c.get(path)
        if c is None:
            c = self.c[path] = _Consumer(path)
            c.last = self.last
        return c

    def _held(self, c: _Consumer, t: float, delta: int) -> None:
        c.advance(t)
        c.held += delta
        c.series.append(t)
        c.series.append(c.held)
        if t > self.last:
            self.held_int += self.held * (t - self.last)
            self.last = t
        self.held += delta
        self.total.append(t)
        self.total.append(self.held)

    # --- events ---------------------------------------------------------------
    def arrive(self, path: str, t: float, slots: int) -> None:
        if self.start is None:
            self.start = t
            self.last = t
            for c in self.c.values():
                c.last = t
            if self.kinds is not None:
                self.kinds.begin(t)
        c = self._consumer(path)
        c.advance(t)
        c.queued += slots
        c.first = min(c.first, t)

    def unrunnable_job(self, path: str) -> None:
        self.unrunnable[path] = self.unrunnable.get(path, 0) + 1

    def start_job(self, path: str, t: float, slots: int, need: tuple[tuple[str, float], ...] = (),
                  host: str | None = None) -> None:
        """A job of ``path`` starts at ``t`` on ``slots`` slots, each holding ``need`` of each
        kind (on ``host``) when it asks by kind."""
        c = self._consumer(path)
        c.advance(t)
        c.queued -= slots
        self._held(c, t, slots)
        if need and self.kinds is not None:
            self.kinds.start(path, t, need, slots, host)

    def stop_job(self, path: str, t: float, slots: int, requeued: bool, need: tuple[tuple[str, float], ...] = (),
                 host: str | None = None) -> None:
        c = self._consumer(path)
        self._held(c, t, -slots)
        if requeued:
            c.queued += slots
        if need and self.kinds is not None:
            self.kinds.stop(path, t, need, slots, host)

    def set_state(self, path: str, t: float, held: int, queued: int) -> None:
        """What ``path`` holds and whether it waits, from ``t`` on (elastic work, DUCC)."""
        c = self._consumer(path)
        if held != c.held:
            self._held(c, t, held - c.held)
        if queued != c.queued:
            c.advance(t)
            c.queued = queued

    def finish(self, path: str, submit: float, run: float, slots: int, finished: float) -> None:
        c = self._consumer(path)
        turn = finished - submit
        c.wait.append(max(0.0, turn - run))
        c.turn.append(turn)
        c.run.append(run)
        c.submit.append(submit)
        c.slots.append(slots)
        c.final = max(c.final, finished)
        self.end = max(self.end, finished)
        self.jobs += 1

    def unfinished(self, path: str, submit: float, run: float, left: float, slots: int) -> None:
        """A job of ``path`` still waiting when the replay ends, with ``left`` of its
        ``run`` still to do: a censored wait (``result()``)."""
        self._consumer(path).open.append((submit, run, left, slots))

    def reclaimed(self, path: str) -> None:
        self._consumer(path).reclaims += 1

    def evicted(self, path: str, lost_slot_seconds: float) -> None:
        c = self._consumer(path)
        c.evictions += 1
        c.lost += lost_slot_seconds

    def deserved_changes(self, t: float, changed: Iterable[tuple[str, int]]) -> None:
        """What the leaves named deserve from ``t`` on (the others: as before)."""
        self.samples += 1
        cs = self.c
        for path, d in changed:
            c = cs.get(path)
            if c is None:
                c = self._consumer(path)
            c.advance(t)
            c.deserved = d
            c.des_series.append(t)
            c.des_series.append(d)

    def deserved(self, t: float, by_leaf: dict[str, int]) -> None:
        """What each leaf deserves from ``t`` on (leaves not named: 0)."""
        self.samples += 1
        cs = self.c
        for path, d in by_leaf.items():
            c = cs.get(path)
            if c is None:
                c = self._consumer(path)
            if d != c.deserved:
                c.advance(t)
                c.deserved = d
                c.des_series.append(t)
                c.des_series.append(d)
        for path in [p for p in self._deserving if p not in by_leaf]:
            c = cs[path]
            c.advance(t)
            c.deserved = 0
            c.des_series.append(t)
            c.des_series.append(0)
        self._deserving = [p for p, d in by_leaf.items() if d]

    # --- the figures -----------------------------------------------------------
    def result(self, until: float | None = None) -> dict[str, Any]:
        """The figures; ``until``: when the replay ended, if later than the last end (jobs
        left waiting then count as censored at that time)."""
        start = self.start if self.start is not None else 0.0
        end = max(self.end, self.last, until if until is not None and until > -math.inf else 0.0)
        span = end - start
        if end > self.last:
            self.held_int += self.held * (end - self.last)
        consumers: dict[str, Any] = {}
        ratios, devs = [], []
        all_waits: list[float] = []
        all_bsld: list[float] = []
        for path in sorted(self.c):
            c = self.c[path]
            c.advance(end)
            held_mean = c.held_int / span if span > 0 else 0.0
            des_mean = c.des_int / span if span > 0 else 0.0
            dev = c.dev_int / span if span > 0 else 0.0
            n = len(c.turn)
            hours = span / 3600.0
            waits, turns, runs = c.wait, c.turn, c.run
            if c.open:  # censored: waiting until the end at least, then their run left
                turns = [*turns, *(end - s + left for s, _r, left, _n in c.open)]
                runs = [*runs, *(r for _s, r, _l, _n in c.open)]
                waits = [*waits, *(max(0.0, end - s + left - r) for s, r, left, _n in c.open)]
            bsld = [max(1.0, t / max(r, BSLD_BOUND)) for t, r in zip(turns, runs, strict=True)]
            sld = [t / max(r, 1.0) for t, r in zip(turns, runs, strict=True)]
            all_waits.extend(waits)
            all_bsld.extend(bsld)
            line = {
                "jobs": n,
                "wait": distribution(waits),
                "bounded_slowdown": distribution(bsld),
                "slowdown": distribution(sld),
                "turnaround": distribution(turns),
                "held_mean": held_mean,
                "deserved_mean": des_mean,
                "entitled": self.entitlement.get(path, 0),
                "deviation_mean": dev,
                "shortfall_seconds": c.short_s,
                "starved_seconds": c.starved_s,
                "demand_seconds": c.demand_s,
                "reclaims": c.reclaims,
                "evictions": c.evictions,
                "reclaims_per_hour": c.reclaims / hours if hours > 0 else 0.0,
                "evictions_per_hour": c.evictions / hours if hours > 0 else 0.0,
                "lost_slot_seconds": c.lost,
                "finish_time_fairness": self._ftf(c, end),
                "unrunnable": self.unrunnable.get(path, 0),
                "never_started": len(c.open),
            }
            consumers[path] = line
            if des_mean > 0:
                ratios.append(held_mean / des_mean)
                devs.append(dev / self.capacity if self.capacity else 0.0)
        kinds: dict[str, Any] | None = None
        if self.kinds is not None:
            kinds, per = self.kinds.result(start, end, consumers)
            for path, line in consumers.items():
                line["kinds"] = per[path]
        return {
            "jobs": self.jobs,
            "makespan": span,
            "start": start,
            "end": end,
            "capacity": self.capacity,
            "wait": distribution(all_waits),
            "bounded_slowdown": distribution(all_bsld),
            "utilisation": self.held_int / (self.capacity * span) if span > 0 and self.capacity else 0.0,
            "fairness": {
                "jain": jain(ratios),
                "max_deviation": max(devs, default=0.0),
                "mean_deviation": math.fsum(devs) / len(devs) if devs else 0.0,
            },
            "reclaims": sum(c.reclaims for c in self.c.values()),
            "evictions": sum(c.evictions for c in self.c.values()),
            "lost_slot_seconds": math.fsum(c.lost for c in self.c.values()),
            "unrunnable": sum(self.unrunnable.values()),
            "never_started": sum(len(c.open) for c in self.c.values()),
            "deserved_samples": self.samples,
            "consumers": consumers,
            **({"kinds": kinds} if kinds is not None else {}),
        }

    def _ftf(self, c: _Consumer, end: float) -> float | None:
        """Finish-time fairness: the consumer's span (first submit to last finish) under
        sharing, over its span run first come first served on its entitled slice alone
        (at least its widest job). A job that never finished ends at the earliest at the
        end of the run plus the run it has left (a lower bound). None without jobs or
        without an entitlement."""
        n = len(c.turn)
        share = self.entitlement.get(c.path, 0)
        if not (n or c.open) or share <= 0:
            return None
        jobs = [(c.submit[i], c.run[i], c.slots[i]) for i in range(n)]
        jobs += [(s, r, k) for s, r, _left, k in c.open]
        jobs.sort(key=lambda j: j[0])
        alone = fcfs_makespan(jobs, max(share, max(k for _s, _r, k in jobs)))
        final = max([c.final, *(end + left for _s, _r, left, _k in c.open)])
        first = min([c.first, *(s for s, _r, _l, _k in c.open)])
        shared = final - first
        return shared / alone if alone > 0 else None

    def series(self, points: int = SERIES_POINTS) -> dict[str, Any]:
        """Held and deserved per consumer, and utilisation, as time-weighted means over
        ``points`` equal bins of the run: for the CSV files and the plots."""
        start = self.start if self.start is not None else 0.0
        end = max(self.end, self.last, start)
        edges = [start + (end - start) * i / points for i in range(points + 1)]
        out = {"t": edges[:-1], "utilisation": [], "held": {}, "deserved": {}}
        total = binned(self.total, edges, 0)
        out["utilisation"] = [x / self.capacity if self.capacity else 0.0 for x in total]
        for path, c in sorted(self.c.items()):
            out["held"][path] = binned(c.series, edges, 0)
            out["deserved"][path] = binned(c.des_series, edges, 0)
        if self.kinds is not None:
            out["kinds"] = self.kinds.series(edges, binned)
        return out


def binned(changes: array, edges: list[float], initial: float) -> list[float]:
    """Time-weighted means over the bins ``edges`` of a step function given as flat
    (t, value) changes in time order (``initial`` before the first)."""
    n = len(edges) - 1
    out = [0.0] * n
    if n <= 0:
        return out
    value = initial
    t = edges[0]
    k = 0
    i = 0
    m = len(changes)
    while k < n:
        nxt = changes[i] if i < m else math.inf
        bin_end = edges[k + 1]
        if nxt <= bin_end and i < m:
            if nxt > t:
                out[k] += value * (nxt - t)
                t = nxt
            value = changes[i + 1]
            i += 2
        else:
            out[k] += value * (bin_end - t)
            t = bin_end
            k += 1
    for k in range(n):
        w = edges[k + 1] - edges[k]
        out[k] = out[k] / w if w > 0 else value
    return out


@dataclass
class SimRun:
    """A finished simulation: its figures (the JSON contract) and, worked out when first
    asked (``--out``, not ``--json``), the series behind the plots and CSV files."""

    result: dict[str, Any]
    recorder: Recorder | None = None
    points: int = SERIES_POINTS
    _series: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def series(self) -> dict[str, Any]:
        if self._series is None:
            self._series = self.recorder.series(self.points) if self.recorder is not None else {}
        return self._series
