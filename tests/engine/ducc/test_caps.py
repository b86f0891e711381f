"""Job caps (seed 001's initJobCap), step by step with exact numbers."""

from __future__ import annotations

from apportion.engine.ducc.caps import CapRules, JobNow, job_cap, projected_cap

NO_PREDICTION = CapRules(use_prediction=False)


def test_refused_and_completed():
    assert job_cap(JobNow(100, refused=True), NO_PREDICTION) == 0
    assert job_cap(JobNow(0, held=5, completed=True), NO_PREDICTION) == 5


def test_a_new_job_starts_at_the_initialization_cap():
    assert job_cap(JobNow(1000, threads=4), CapRules(initialization_cap=2, use_prediction=False)) == 2
    # with no initialization cap configured, it may take all its work needs
    assert job_cap(JobNow(1000, threads=4, held=1), CapRules(initialization_cap=None, use_prediction=False)) == 250


def test_expand_by_doubling_after_the_first_initialization():
    rules = CapRules(initialization_cap=1, use_prediction=False)
    caps = []
    held = 1
    for _ in range(5):
        cap = job_cap(JobNow(1000, threads=4, held=held, initialized=True), rules)
        caps.append(cap)
        held = cap
    assert caps == [2, 4, 8, 16, 32]
    off = CapRules(initialization_cap=1, expand_by_doubling=False, use_prediction=False)
    assert job_cap(JobNow(1000, threads=4, held=1, initialized=True), off) == 250


def test_remaining_work_and_max_processes_bound_the_cap():
    rules = CapRules(initialization_cap=None, expand_by_doubling=False, use_prediction=False)
    # 10 items left, 4 threads: 3 processes are all it can use
    assert job_cap(JobNow(10, threads=4, held=1, initialized=True), rules) == 3
    # ... but a job winding down keeps what it holds
    assert job_cap(JobNow(10, threads=4, held=6, initialized=True), rules) == 6
    assert job_cap(JobNow(1000, threads=4, held=1, initialized=True, max_processes=7), rules) == 7


def test_a_job_pushed_out_to_nothing_restarts_at_the_initialization_cap():
    rules = CapRules(initialization_cap=2, use_prediction=False)
    assert job_cap(JobNow(1000, threads=4, held=0, initialized=True), rules) == 2
    # within the base cap: 4 items on 4 threads is one process
    assert job_cap(JobNow(4, threads=4, held=0, initialized=True), rules) == 1


def test_prediction_stops_growth_that_would_come_too_late():
    rules = CapRules(initialization_cap=None, expand_by_doubling=False, prediction_fudge_s=0)
    # 4 processes x 2 threads, 10 s per item, 60 s to initialise a new process:
    # in those 60 s the 4 do 48 items; 100 left -> 52 after -> 26 more processes: 30
    job = JobNow(100, threads=2, held=4, initialized=True, init_seconds=60, seconds_per_item=10)
    assert projected_cap(job, rules) == 30
    assert job_cap(job, rules) == 30
    # 40 left: the 4 finish them before a new process is ready: no growth
    job = JobNow(40, threads=2, held=4, initialized=True, init_seconds=60, seconds_per_item=10)
    assert job_cap(job, rules) == 4
    # without timings, prediction knows nothing and the base cap stands
    assert job_cap(JobNow(40, threads=2, held=4, initialized=True), rules) == 20
