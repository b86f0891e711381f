"""The replay's figures against values worked out by hand, a plain FCFS queue, a 1:3 split
and a reclaim whose lost work is counted exactly."""

from __future__ import annotations

import random

import pytest

from apportion.service.master import Settings
from apportion.simulate.figures import distribution, fcfs_makespan, jain
from apportion.simulate.replay import DEFAULT_TICK, Replay, SimulationError, one_consumer
from apportion.traces.swf import SwfTrace
from tests.simulate.helpers import by_user, job, plan, run


def test_the_tick_is_the_masters():
    assert DEFAULT_TICK == Settings().tick


def test_figures_by_hand():
    # 4 slots, one consumer. j1 (2 slots, 10 s) starts at 0. j2 wants 4: it waits for j1.
    # j3 (2 slots) comes at 1 and waits behind j2 although 2 slots are free (arrival order).
    p = plan([{"path": "/A"}], 4)
    jobs = [job(1, 0, 10, 2), job(2, 0, 5, 4), job(3, 1, 3, 2)]
    r, res = run(p, jobs, one_consumer("/A"))
    a = res["consumers"]["/A"]
    # starts 0, 10, 15; ends 10, 15, 18; waits 0, 10, 14
    assert res["jobs"] == 3
    assert res["makespan"] == 18
    assert a["wait"] == {"mean": 8.0, "p50": 10.0, "p95": 14.0, "max": 14.0}
    # bounded slowdown: max(1, (w + r) / max(r, 10)): 10/10, 15/10, 17/10
    assert a["bounded_slowdown"]["mean"] == pytest.approx((1.0 + 1.5 + 1.7) / 3)
    assert a["bounded_slowdown"]["max"] == pytest.approx(1.7)
    # plain slowdown: 10/10, 15/5, 17/3
    assert a["slowdown"]["max"] == pytest.approx(17 / 3)
    # slot-seconds 2*10 + 4*5 + 2*3 = 46 over 4 slots x 18 s
    assert res["utilisation"] == pytest.approx(46 / 72)
    assert a["held_mean"] == pytest.approx(46 / 18)
    # alone it deserves what it wants (up to 4): 2 over [0,1), 2 [1,10), 4 [10,15), 2 [15,18)...
    # held equals deserved except while j3 waits behind j2 at 2 of 4 wanted
    assert a["reclaims"] == a["evictions"] == 0
    assert a["lost_slot_seconds"] == 0
    # entitled slice: the whole cluster; alone it runs the same way: ratio 1
    assert a["entitled"] == 4
    assert a["finish_time_fairness"] == pytest.approx(1.0)
    assert res["fairness"]["jain"] == pytest.approx(1.0)


def _fcfs_waits(jobs: list[tuple[float, float, int]], slots: int) -> list[float]:
    """A plain first-come-first-served queue on ``slots`` slots, second by second: at each
    second, finished jobs leave, then the queue's head starts while it fits (none overtakes)."""
    queue = list(range(len(jobs)))
    running: list[tuple[int, int]] = []  # (end, slots)
    waits = [0.0] * len(jobs)
    t = 0
    while queue or running:
        running = [(e, n) for e, n in running if e > t]
        free = slots - sum(n for _, n in running)
        while queue and jobs[queue[0]][0] <= t and jobs[queue[0]][2] <= free:
            i = queue.pop(0)
            free -= jobs[i][2]
            running.append((t + jobs[i][1], jobs[i][2]))
            waits[i] = t - jobs[i][0]
        t += 1
    return waits


def test_one_tenant_waits_equal_a_plain_fcfs_queue(tmp_path):
    rng = random.Random(7)
    lines = ["; Version: 2.2", "; MaxNodes: 16", "; MaxProcs: 16"]
    rows, t = [], 0
    for i in range(1, 301):
        t += rng.choice((0, 0, 1, 3, 7, 20))
        runtime = rng.choice((1, 5, 30, 60, 200))
        procs = rng.choice((1, 1, 2, 4, 8, 16))
        rows.append((t, runtime, procs))
        lines.append(f"{i} {t} -1 {runtime} {procs} -1 -1 {procs} -1 -1 1 {rng.randint(1, 5)} 1 -1 1 -1 -1 -1")
    path = tmp_path / "small.swf"
    path.write_text("\n".join(lines) + "\n")
    trace = SwfTrace(path)
    p = plan([{"path": "/Only"}], 16, hosts=4)
    r, res = run(p, trace.jobs(), one_consumer("/Only"))
    expected = _fcfs_waits(rows, 16)
    got = list(r.rec.c["/Only"].wait)
    assert len(got) == 300
    # the replay records jobs as they finish; match them by submit order through their ids
    assert sorted(got) == sorted(expected)
    assert res["consumers"]["/Only"]["wait"]["max"] == max(expected)
    assert sum(got) == pytest.approx(sum(expected))


def test_ratio_1_to_3_both_always_in_demand():
    p = plan([{"path": "/A", "share_ratio": 1}, {"path": "/B", "share_ratio": 3}], 40, hosts=4)
    jobs = []
    i = 0
    # both have work from 0 to the end: A 100 one-slot jobs, B 300, 100 s each
    for k in range(300):
        if k < 100:
            i += 1
            jobs.append(job(i, 0, 100, 1, user="a"))
        i += 1
        jobs.append(job(i, 0, 100, 1, user="b"))
    r, res = run(p, jobs, by_user({"a": "/A", "b": "/B"}))
    a, b = res["consumers"]["/A"], res["consumers"]["/B"]
    assert b["held_mean"] / a["held_mean"] == pytest.approx(3.0, rel=0.05)
    assert a["entitled"] == 10 and b["entitled"] == 30
    assert res["utilisation"] == pytest.approx(1.0, rel=0.02)


def _two(grace_a: float = 0):
    return plan([{"path": "/A", "share_ratio": 1, "grace": grace_a}, {"path": "/B", "share_ratio": 3}], 4)


def test_a_reclaim_loses_the_work_since_start():
    # A runs 4 slots from 0; B comes at 10 and deserves 3: A's job is reclaimed, stopped at
    # 10 (grace 0) and loses 10 s x 4 slots; B starts at the next tick, 11, ends at 61; A
    # runs again from 61 for its whole 100 s.
    jobs = [job(1, 0, 100, 4, user="a"), job(2, 10, 50, 3, user="b")]
    r, res = run(_two(), jobs, by_user({"a": "/A", "b": "/B"}))
    a, b = res["consumers"]["/A"], res["consumers"]["/B"]
    assert a["reclaims"] == 1 and a["evictions"] == 1
    assert a["lost_slot_seconds"] == 40.0
    assert b["wait"]["max"] == 1.0
    assert res["makespan"] == 161.0
    assert a["wait"]["max"] == 161.0 - 100.0  # turnaround less run: the lost 10 s and the wait
    assert res["lost_slot_seconds"] == 40.0


def test_a_checkpoint_keeps_work_and_grace_delays_the_stop():
    # grace 25: the reclaim at 10 stops A's job at 35; with a checkpoint every 15 s it keeps
    # 30 s and loses 5 s x 4 slots. The deadline is a change: the cycle at 35 gives B its
    # slots (35..85); A then runs its last 70 s: ends at 155
    jobs = [job(1, 0, 100, 4, user="a", checkpoint=15), job(2, 10, 50, 3, user="b")]
    r, res = run(_two(grace_a=25), jobs, by_user({"a": "/A", "b": "/B"}))
    a, b = res["consumers"]["/A"], res["consumers"]["/B"]
    assert a["evictions"] == 1
    assert a["lost_slot_seconds"] == 20.0
    assert b["wait"]["max"] == 25.0
    assert res["makespan"] == 155.0


def test_a_job_that_ends_within_its_grace_is_reclaimed_not_evicted():
    jobs = [job(1, 0, 20, 4, user="a"), job(2, 10, 50, 3, user="b")]
    r, res = run(_two(grace_a=30), jobs, by_user({"a": "/A", "b": "/B"}))
    a = res["consumers"]["/A"]
    assert a["reclaims"] == 1 and a["evictions"] == 0 and a["lost_slot_seconds"] == 0
    assert res["consumers"]["/B"]["wait"]["max"] == 10.0  # A ends at 20, B starts at 20


def test_a_job_mapped_to_a_parent_is_a_clear_error():
    p = plan([{"path": "/T"}, {"path": "/T/a"}], 4)
    with pytest.raises(SimulationError, match=r"job 1 .* maps to /T, which is not a leaf"):
        run(p, [job(1, 0, 1, 1)], one_consumer("/T"))
    with pytest.raises(SimulationError, match=r"maps to /Nope, which is not in the plan"):
        run(p, [job(1, 0, 1, 1)], one_consumer("/Nope"))


def test_a_job_wider_than_its_consumer_can_ever_get_is_counted_not_run():
    p = plan([{"path": "/A"}], 4)
    r, res = run(p, [job(1, 0, 5, 8), job(2, 0, 5, 2)], one_consumer("/A"))
    assert res["jobs"] == 1
    assert res["unrunnable"] == 1 and res["consumers"]["/A"]["unrunnable"] == 1


def test_cycles_run_only_when_something_changed():
    p = plan([{"path": "/A"}], 4)
    # two jobs a day apart: a handful of cycles, not one per second of the day
    r, res = run(p, [job(1, 0, 10, 1), job(2, 86_400, 10, 1)], one_consumer("/A"))
    assert res["cycles"] <= 8
    assert res["makespan"] == 86_410


def test_distribution_and_jain_and_fcfs_makespan():
    assert distribution([]) == {"mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
    d = distribution(range(1, 101))
    assert d == {"mean": 50.5, "p50": 50.0, "p95": 95.0, "max": 100.0}
    assert jain([1, 1, 1]) == 1.0
    assert jain([1, 0, 0, 0]) == pytest.approx(0.25)
    # 2 slots: (0, 10, 2) then (0, 5, 1) and (1, 5, 1) in order: 0-10, 10-15, 10-15
    assert fcfs_makespan([(0, 10, 2), (0, 5, 1), (1, 5, 1)], 2) == 15


def test_two_wide_jobs_that_each_need_more_than_their_share_run_in_turn():
    """Two tenants of ratio 1 on 8 slots, each with a first job of 6 (min = max): each deserves
    4 while the other wants. The first to come starts, and nothing is reclaimed from it for the
    second, which could not start on what it would free; the second is kept the slots as they
    come free and starts when the first ends. Neither is left never started."""
    from apportion.simulate.report import _answers

    p = plan([{"path": "/A"}, {"path": "/B"}], 8)
    _, res = run(p, [job(1, 0, 100, 6, "a"), job(2, 0, 100, 6, "b")], by_user({"a": "/A", "b": "/B"}))
    assert (res["never_started"], res["jobs"], res["unrunnable"]) == (0, 2, 0)
    waits = sorted(c["wait"]["max"] for c in res["consumers"].values() if c["jobs"])
    assert waits == [0.0, 100.0], res["consumers"]  # one after the other, with no work thrown away
    assert sum(c["reclaims"] + c["evictions"] for c in res["consumers"].values()) == 0
    assert not any("Never started" in a for a in _answers(res))


class _Starts(Replay):
    """A replay that notes when each job (first attempt) started."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.starts: dict[str, float] = {}

    def _decided(self, d, t: float) -> None:
        super()._decided(d, t)
        for j in self.by_rid.values():
            if j.start is not None:
                self.starts.setdefault(j.job.id, j.start)


@pytest.mark.parametrize("walltime", [50.0, None])
def test_a_job_backfills_a_reservation_only_with_its_requested_time(walltime):
    """One consumer on 8 slots: job 1 runs 6 slots for 100 s (requested 100 s); job 2
    needs all 8 and gets the reservation, planned to start at 100 s; job 3 needs 2 slots
    for 50 s. With its requested time (SWF field 9) the replay tells the engine it ends
    before the planned start, and it runs on the kept slots; without one it
    could delay the reservation, so it waits behind job 2. Job 2 starts at 100 s either way."""
    p = plan([{"path": "/A"}], 8)
    jobs = [job(1, 0, 100, 6, walltime=100.0), job(2, 0, 100, 8, walltime=100.0),
            job(3, 0, 50, 2, walltime=walltime)]
    r = _Starts(p, jobs, one_consumer("/A"))
    r.run()
    res = r.result()
    assert res["never_started"] == 0
    assert r.starts["1"] == 0.0
    assert r.starts["2"] == 100.0
    if walltime is not None:
        # backfilled at the next tick (job 2's planned start is known once job 1 has
        # started, as on the master's timer): it ends at 51 s, before 100 s
        assert r.starts["3"] == 1.0
    else:
        assert r.starts["3"] == 200.0  # after job 2: nothing is backfilled without an estimate


def test_a_requeued_job_asks_for_its_requested_time_less_what_its_checkpoints_kept():
    from apportion.simulate.replay import _Job, _walltime

    j = _Job(job(1, 0, 100, 2, walltime=120.0), "/A", (), 10.0)
    assert _walltime(j) == 120.0
    j.done = 30.0
    assert _walltime(j) == 90.0
    assert _walltime(_Job(job(2, 0, 100, 2), "/A", (), None)) is None
