"""Which processes a shrinking job gives up, and which jobs are needy (DUCC's RM documentation).

Preempting a process loses the work it has done, so a job that must shed
processes sheds those with the **least investment** first:

1. a process still initialising before any that has finished;
2. among initialising ones, the shortest initialisation so far first;
3. among initialised ones, the lowest investment (work done) first;
4. then the one in the most deeply nested nodepool (the Java original compared a
   depth that was always equal: apportion uses the real depth, apportion's reading, docs/policies.md section 16);
5. then the youngest.

A job is **needy** when it holds fewer processes than the smaller of its pure fair
share (what How Much gave it before bonuses, already capped by what it can use
now) and the fragmentation threshold: it may then take space from the richest
users' jobs (defragmentation), as long as none of those becomes needy itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Process:
    id: str | int  # ties: the lower id first
    initialized: bool
    init_seconds: float = 0.0  # time spent initialising (so far, or in total once done)
    investment: float = 0.0  # work done since initialisation (e.g. seconds of work items)
    nodepool_depth: int = 0  # 0 = a top-level nodepool
    started: float = 0.0  # when the process was allocated


def investment_key(p: Process) -> tuple:
    if not p.initialized:
        return (0, p.init_seconds, 0.0, -p.nodepool_depth, -p.started, p.id)
    return (1, 0.0, p.investment, -p.nodepool_depth, -p.started, p.id)


def shed(processes: Iterable[Process], count: int) -> list[Process]:
    """The ``count`` processes to preempt, least investment first."""
    return sorted(processes, key=investment_key)[:max(0, count)]


def needy(allocated: int, pure_fair_share: int, fragmentation_threshold: int) -> bool:
    """``allocated`` counts processes held plus expansions on the way, less those
    already being preempted."""
    return allocated < min(pure_fair_share, fragmentation_threshold)
