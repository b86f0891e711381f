"""A seeded synthetic trace, streamed: N rigid jobs over C consumers on H hosts.

For the simulator's large benchmark (a million jobs on 10,000 hosts for 1,000
consumers) and for tests that need a trace of a given size. The jobs are a pure
function of the parameters and the seed, made one at a time (nothing is held), so a
trace of any length costs the same memory.

The shape (``SyntheticSpec``):

- arrivals are a Poisson process whose rate makes the offered work ``load`` times the
  cluster's capacity (load 1.0: as much work as the slots can run, on average);
- a job's size is 2^k slots with k geometric (half the jobs 1 slot, a quarter 2, ...),
  at most ``max_slots`` (capped by one host's worth times 8);
- its run time is drawn from an exponential of mean ``mean_run`` seconds, at least 1 s;
- its consumer is drawn with Zipf weights of exponent ``skew`` (0: all alike), and
  written as ``group`` ``"g<i>"`` (and ``user`` ``"u<i>"``), so ``synthetic_mapping``
  (or ``apportion simulate map --by group``) gives one consumer per group.

``TraceInfo``: ``hosts`` H, ``slots_per_host`` S, ``processors`` H x S.
``write_jsonl(path, SyntheticTrace(spec).jobs(), trace.info)`` writes it to a file;
``open_trace("synthetic:jobs=1000,consumers=10,hosts=100")`` opens one without a file.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from apportion.traces.mapping import Mapping, Rule
from apportion.traces.record import SkipCounter, TraceInfo, TraceJob


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    jobs: int = 1_000_000
    consumers: int = 1_000
    hosts: int = 10_000
    slots_per_host: int = 8
    load: float = 0.9
    mean_run: float = 1800.0
    max_slots: int = 64
    skew: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("jobs", "consumers", "hosts", "slots_per_host", "max_slots"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not self.load > 0 or not self.mean_run > 0 or self.skew < 0:
            raise ValueError("load and mean_run must be above 0, skew 0 or more")

    @property
    def capacity(self) -> int:
        return self.hosts * self.slots_per_host

    def size_weights(self) -> tuple[list[int], list[float]]:
        """The job sizes (powers of two up to the cap) and their cumulative weights."""
        cap = min(self.max_slots, self.slots_per_host * 8, self.capacity)
        sizes = [1 << k for k in range(cap.bit_length()) if 1 << k <= cap]
        return sizes, list(itertools.accumulate(0.5 ** (k + 1) for k in range(len(sizes))))

    def mean_slots(self) -> float:
        sizes, cumulative = self.size_weights()
        weights = [b - a for a, b in zip([0.0] + cumulative, cumulative, strict=False)]
        return sum(s * w for s, w in zip(sizes, weights, strict=True)) / cumulative[-1]

    def arrival_rate(self) -> float:
        """Jobs a second such that slots x run time offered = load x capacity."""
        return self.load * self.capacity / (self.mean_slots() * self.mean_run)


PREFIX = "synthetic:"


def group_name(index: int) -> str:
    return f"g{index}"


class SyntheticTrace:
    """The trace of a ``SyntheticSpec``: ``info`` and ``jobs()`` (the same jobs every call)."""

    kind = "synthetic"

    def __init__(self, spec: SyntheticSpec | None = None, **values) -> None:
        self.spec = spec if spec is not None else SyntheticSpec(**values)
        s = self.spec
        self.path = f"synthetic:{s.jobs}x{s.consumers}@{s.hosts}"
        self.info = TraceInfo("synthetic", self.path, hosts=s.hosts, slots_per_host=s.slots_per_host,
                              processors=s.capacity, jobs=s.jobs,
                              notes={"seed": str(s.seed), "load": str(s.load)})
        self.skips = SkipCounter(0)
        self.dropped: dict[str, int] = {}

    def jobs(self) -> Iterator[TraceJob]:
        s = self.spec
        rng = random.Random(s.seed)
        sizes, size_cumulative = s.size_weights()
        size_total = size_cumulative[-1]
        consumer_cumulative = list(itertools.accumulate(1.0 / (i + 1) ** s.skew for i in range(s.consumers)))
        consumer_total = consumer_cumulative[-1]
        groups = [group_name(i) for i in range(s.consumers)]
        users = [f"u{i}" for i in range(s.consumers)]
        rate = s.arrival_rate()
        mean_run = s.mean_run
        random_ = rng.random
        expovariate = rng.expovariate
        find = bisect.bisect_right
        last_size = len(sizes) - 1
        last_consumer = s.consumers - 1
        now = 0.0
        for number in range(s.jobs):
            if number:
                now += expovariate(rate)
            size = sizes[min(find(size_cumulative, random_() * size_total), last_size)]
            who = min(find(consumer_cumulative, random_() * consumer_total), last_consumer)
            run = float(max(1, math.ceil(expovariate(1.0 / mean_run))))
            yield TraceJob(str(number + 1), round(now, 3), run, size, users[who], groups[who])


def parse_spec(text: str) -> SyntheticSpec:
    """``synthetic:jobs=1000000,consumers=1000,hosts=10000,seed=3`` (any of
    ``SyntheticSpec``'s fields, the rest default) as a spec; ValueError names a bad one."""
    body = text.removeprefix(PREFIX)
    values: dict[str, int | float] = {}
    known = SyntheticSpec.__dataclass_fields__
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in known:
            raise ValueError(f"{item!r}: expected NAME=VALUE with NAME one of {', '.join(known)}")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{key}: {value.strip()!r} is not a number") from None
        if known[key].type in ("int", int):
            if not number.is_integer():
                raise ValueError(f"{key}: {value.strip()!r} is not a whole number")
            values[key] = int(number)
        else:
            values[key] = number
    return SyntheticSpec(**values)  # type: ignore[arg-type]


def synthetic_mapping(consumers: int, prefix: str = "") -> Mapping:
    """One consumer ``PREFIX/g<i>`` per synthetic group, matched exactly."""
    return Mapping(tuple(Rule((("group", group_name(i)),), f"{prefix}/{group_name(i)}") for i in range(consumers)),
                   f"{prefix}/Other")
