"""How many processes a fair-share job can use right now (DUCC's RM documentation: initJobCap).

Start from the largest meaningful number and whittle it down by DUCC's rules:

1. a refused job gets 0; a completed one keeps what it has;
2. remaining work items / threads per process, but never below what it holds
   (a job winding down must not be shrunk early) ...
3. ... and never above ``max_processes``: the **base cap**;
4. the **projected cap** from prediction (when on, and when timings are known),
   else the base cap; the **potential cap** is the larger of it and what it holds;
5. still initialising: at most the class's initialization cap (when set);
   initialised: at most twice what it holds with expand-by-doubling;
6. pushed out to nothing: restart with the initialization cap, within the base cap.

Prediction is apportion's reading (the documentation leaves it open): a new process is of
use only for work still left when it has initialised. During the initialisation
time (plus the prediction fudge) the processes the job holds keep working; the
projected cap is what it holds plus enough new processes, ``threads`` items each,
for the work left after that.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil


@dataclass(frozen=True, slots=True)
class CapRules:
    """The class's (or the site's) rules for growing a job."""

    initialization_cap: int | None = 1  # None: no cap while initialising
    expand_by_doubling: bool = True
    use_prediction: bool = True
    prediction_fudge_s: float = 120.0


@dataclass(frozen=True, slots=True)
class JobNow:
    remaining_items: int
    threads: int = 1
    max_processes: int | None = None  # None: no limit
    held: int = 0  # processes allocated now
    initialized: bool = False  # at least one process has finished initialising
    refused: bool = False
    completed: bool = False
    init_seconds: float | None = None  # average initialisation time, once known
    seconds_per_item: float | None = None  # average time per work item, once known


def projected_cap(job: JobNow, rules: CapRules) -> int:
    """0 when nothing is known yet (the documentation: "we know nothing")."""
    if not rules.use_prediction or job.init_seconds is None or not job.seconds_per_item:
        return 0
    wait = job.init_seconds + rules.prediction_fudge_s
    done_meanwhile = job.held * job.threads * wait / job.seconds_per_item
    left_after = max(0.0, job.remaining_items - done_meanwhile)
    return job.held + ceil(left_after / job.threads)


def job_cap(job: JobNow, rules: CapRules) -> int:
    if job.refused:
        return 0
    if job.completed:
        return job.held
    return cap_of(job.remaining_items, job.threads, job.max_processes, job.held, job.initialized,
                  job.init_seconds, job.seconds_per_item, rules)


def cap_of(remaining_items: int, threads: int, max_processes: int | None, held: int, initialized: bool,
           init_seconds: float | None, seconds_per_item: float | None, rules: CapRules) -> int:
    """``job_cap`` for a job neither refused nor completed, from plain values (the
    scheduling cycle calls it for thousands of jobs)."""
    c = ceil(remaining_items / max(1, threads))
    c = max(c, held)
    base = c if max_processes is None else min(max_processes, c)
    projected = 0
    if rules.use_prediction and init_seconds is not None and seconds_per_item:
        wait = init_seconds + rules.prediction_fudge_s
        left_after = max(0.0, remaining_items - held * threads * wait / seconds_per_item)
        projected = held + ceil(left_after / threads)
    potential = max(projected or base, held)
    if not initialized:
        actual = potential if rules.initialization_cap is None else min(potential, rules.initialization_cap)
    elif rules.expand_by_doubling:
        actual = min(potential, held * 2)
    else:
        actual = potential
    if held == 0:
        actual = min(base, max(1, rules.initialization_cap or 1))
    return actual
