"""Rigid requests (min > 0): no reclaim is wasted on a request that cannot start."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine import Engine, Host, Policy, Request

from .builders import Sim, make_plan
from .test_properties import check_invariants


def _two_on_one_host(**policy) -> Sim:
    """Two consumers of ratio 1 on one 8-slot host, a grace of 30 s each."""
    plan = make_plan({"/A": {"share_ratio": 1, "grace": 30.0}, "/B": {"share_ratio": 1, "grace": 30.0}},
                     hosts=1, slots=8, policy=Policy(**policy))
    return Sim(plan)


def test_a_rigid_job_is_not_ended_for_one_that_still_could_not_start():
    # A's rigid 6 runs; B's rigid 6 deserves 4: reclaiming 2 of A's would end A's job
    # and leave B, holding 4, unable to start. Nothing is reclaimed: A runs on, and B
    # starts when A is done
    s = _two_on_one_host().req("a", "/A", 6, min=6).settle()
    s.at(10).req("b", "/B", 6, min=6).settle()
    assert s.reclaims() == []
    s.at(100)
    assert s.e.report().requests["a"] == {"h1": 6}
    assert s.e.report().requests["b"] == {}
    s.e.release("a")
    s.at(200)
    assert s.e.report().requests["b"] == {"h1": 6}
    assert [x for d in s.log for x in d.removals] == []


def test_a_rigid_request_still_reclaims_what_lets_it_start():
    # B's rigid 4 is its share: 2 idle + 2 reclaimed from A's elastic work start it
    s = _two_on_one_host().req("a", "/A", 6).settle()
    s.at(10).req("b", "/B", 4, min=4).settle()
    assert sum(r.slots for r in s.reclaims()) == 2
    s.at(50)
    assert s.e.report().requests["b"] == {"h1": 4}
    assert s.holds("/A", "/B") == [4, 4]


def test_marks_that_fall_short_once_placed_are_called_off():
    # B (rigid 4, its share 4) may run on h1 only. A and C each hold 2 more than their
    # share, A on h1 and C on h2: the excess adds up to 4, but only A's 2 would free
    # slots B can use, so B could not start: the marks made are called off at once
    plan = make_plan({"/A": {}, "/B": {}, "/C": {}}, hosts=2, slots=6)
    s = Sim(plan).req("a", "/A", 6).req("c", "/C", 6).settle()
    assert s.e.report().requests["a"] == {"h1": 6} and s.e.report().requests["c"] == {"h2": 6}
    s.at(1).req("b", "/B", 4, min=4, requirement=lambda h: h.name == "h1").settle()
    assert s.reclaims() == []
    assert not s.e.state.reclaiming and s.e.state.incoming.get("/B", 0) == 0
    assert s.holds("/A", "/B", "/C") == [6, 0, 6]


# -- reservations ---------------------------------------------------------------------


def test_two_wide_jobs_under_equal_shares_start_in_turn():
    # both consumers want 6 of 8 at once and deserve 4: under shares alone neither
    # could ever start. The first has the reservation, starts beyond its share, and
    # the other starts when it ends
    s = _two_on_one_host().req("a", "/A", 6, min=6).req("b", "/B", 6, min=6).settle()
    assert s.e.report().requests == {"a": {"h1": 6}, "b": {}}
    [r] = s.e.report().reservations
    assert (r.request, r.kept, r.planned_start) == ("b", {"h1": 2}, None)  # a has no walltime
    s.e.release("a")
    s.at(5)
    assert s.e.report().requests == {"b": {"h1": 6}}
    assert s.e.report().reservations == [] and s.reclaims() == []


def test_work_started_through_a_reservation_is_not_reclaimed_for_fairness():
    # a's end starts b through its reservation, beyond B's share (A still wants 6 with
    # a2: 4 each): A's elastic work that comes next waits for b to end instead of
    # ending it (it runs on the 2 slots kept for a2 meanwhile)
    s = _two_on_one_host().req("a", "/A", 6, min=6).req("b", "/B", 6, min=6).req("a2", "/A", 6, min=6).settle()
    s.e.release("a")
    s.at(5)
    assert s.e.report().requests["b"] == {"h1": 6}
    s.req("e", "/A", 8).at(6)
    s.at(100)
    assert s.reclaims() == [] and s.e.report().requests == {"b": {"h1": 6}, "a2": {}, "e": {"h1": 2}}
    s.e.release("b")
    s.at(101)
    assert s.e.report().requests == {"a2": {"h1": 6}, "e": {"h1": 2}}


def test_slots_are_kept_for_the_reservation_as_they_come_free():
    # B's rigid 6 waits while A's work runs: slots A gives back are kept for B, not
    # given to A's next rigid requests, until B can start
    s = _two_on_one_host(share_pool_reclaim=False).req("a", "/A", 8).settle()
    s.at(1).req("b", "/B", 6, min=6).settle()
    s.e.change("a", max=5)
    s.req("more", "/A", 3, min=3).at(2)
    assert s.e.report().requests["b"] == {} and s.e.report().requests["more"] == {}
    assert s.e.report().reservations[0].kept == {"h1": 3}
    s.e.change("a", max=2)
    s.at(3)
    assert s.e.report().requests["b"] == {"h1": 6} and s.e.report().requests["more"] == {}


def test_elastic_work_runs_on_kept_slots_and_gives_way_when_the_reservation_is_ready():
    s = _two_on_one_host(share_pool_reclaim=False).req("a", "/A", 8).settle()
    s.at(1).req("b", "/B", 6, min=6).settle()
    s.e.change("a", max=5)
    s.req("e", "/A", 8).at(2)
    assert s.e.report().requests["e"] == {"h1": 3}  # the 3 freed slots run A's elastic work
    assert s.reclaims() == []
    s.e.change("a", max=2)  # 3 more free: with e's 3, b's 6 are there
    s.at(3)
    assert [(r.request, r.slots, r.deadline, r.beneficiary) for r in s.reclaims()] == [("e", 3, 33.0, "/B")]
    assert s.e.report().requests["b"] == {}
    s.at(33)
    assert s.e.report().requests["b"] == {"h1": 6} and s.e.report().requests["e"] == {}


def test_the_planned_start_is_the_end_of_the_work_that_frees_enough():
    s = _two_on_one_host().req("a1", "/A", 3, min=3, walltime=50.0).req("a2", "/A", 3, min=3, walltime=80.0)
    s.settle().at(10).req("b", "/B", 8, min=8).settle()
    [r] = s.e.report().reservations
    # 2 idle now; a1's end (50) frees 3 more, a2's (80) the last 3
    assert (r.request, r.kept, r.planned_start) == ("b", {"h1": 2}, 80.0)


def test_a_cycle_says_when_the_next_may_decide_more_with_nothing_else_changed():
    # a (6, walltime 100) and b (8) come together: the cycle starts a, and b's planned
    # start is made of a's end only from the next cycle on; the engine says so
    # (Decisions.again), and that next cycle gives b its reservation, planned at 100,
    # and asks for no other
    plan = make_plan({"/A": {"share_ratio": 1}}, hosts=1, slots=8)
    e = Engine(plan)
    e.submit(Request("a", "/A", max=6, min=6, seq=1, walltime=100.0))
    e.submit(Request("b", "/A", max=8, min=8, seq=2, walltime=100.0))
    d = e.cycle(0.0)
    assert [g.request for g in d.grants] == ["a"] and d.again
    d = e.cycle(1.0)
    assert not d.grants and not d.again
    [r] = e.reservations()
    assert (r.request, r.planned_start) == ("b", 100.0)
    assert e.reservations() == e.report().reservations
    # nothing with a walltime started and no reservation was taken up: no other cycle
    e.submit(Request("c", "/A", max=2, min=2, seq=3))
    assert not e.cycle(2.0).again


def test_a_request_that_can_never_fit_has_no_reservation():
    s = _two_on_one_host().req("a", "/A", 4).req("b", "/B", 9, min=9).settle()
    assert s.e.report().reservations == []
    assert s.e.report().requests["a"] == {"h1": 4}


# -- backfill ---------------------------------------------------------------------------


def test_work_that_ends_before_the_planned_start_is_backfilled():
    s = _two_on_one_host().req("a", "/A", 6, min=6, walltime=100.0).settle()
    s.at(10).req("b", "/B", 7, min=7).settle()
    assert s.e.report().reservations[0].planned_start == 100.0
    s.at(20).req("late", "/A", 2, min=2, walltime=200.0).req("short", "/A", 2, min=2, walltime=50.0).settle()
    # late would end after 100: on the 2 kept slots it would delay b (b needs 7 of 8
    # at 100, when a frees 6: 1 extra slot only); short ends at 70
    held = s.e.report().requests
    assert held["short"] == {"h1": 2} and held["late"] == {}


def test_backfilled_work_runs_to_its_end_and_no_older_work_is_reclaimed_in_its_place():
    """A, B, C of ratio 1 on 14 slots. a1 (A, 6) and p1 (B, 6) run; c (C, 7) waits with
    the reservation, 2 slots kept, planned at 100. x (A, 2, walltime 30) is backfilled on
    them at 20: A now holds 8. At 30 p1 ends early: 6 idle, and 1 reclaimed from A would
    start c at once. That reclaim would end x, started because it does not delay c, or,
    x spared, end a1 (A's older job of 6): nothing is reclaimed, x runs to its end, and c
    starts when it does (its planned start is x's end)."""
    plan = make_plan({p: {"share_ratio": 1, "grace": 30.0} for p in ("/A", "/B", "/C")}, hosts=1, slots=14)
    s = Sim(plan).req("a1", "/A", 6, min=6, walltime=100.0).req("p1", "/B", 6, min=6, walltime=100.0).settle()
    s.at(10).req("c", "/C", 7, min=7, walltime=100.0).settle()
    assert [(r.request, r.planned_start) for r in s.e.report().reservations] == [("c", 100.0)]
    s.at(20).req("x", "/A", 2, min=2, walltime=30.0).settle()
    assert s.e.report().requests["x"] == {"h1": 2}
    s.e.release("p1")
    s.at(30).settle()
    assert s.reclaims() == [] and [x for d in s.log for x in d.removals] == []
    assert [(r.request, r.planned_start) for r in s.e.report().reservations] == [("c", 50.0)]
    s.e.release("x")
    s.at(50).settle()
    assert s.e.report().requests["c"] == {"h1": 7} and s.e.report().requests["a1"] == {"h1": 6}


def test_work_that_ends_later_may_use_the_extra_slots():
    # EASY's extra nodes: b needs 5; at a's end (100) 8 are free, 3 beyond b's 5: a
    # job of 2 that runs past 100 may start now on the 3 idle slots without delaying b
    s = _two_on_one_host().req("a", "/A", 5, min=5, walltime=100.0).settle()
    s.at(10).req("b", "/B", 5, min=5).settle()
    s.at(20).req("long", "/A", 2, min=2, walltime=500.0).req("long2", "/A", 2, min=2, walltime=500.0).settle()
    held = s.e.report().requests
    assert held["long"] == {"h1": 2} and held["long2"] == {}  # 3 extra: room for one of 2
    s.e.release("a")
    s.at(100)
    assert s.e.report().requests["b"] == {"h1": 5}


def test_without_a_planned_start_nothing_is_backfilled():
    s = _two_on_one_host().req("a", "/A", 6, min=6).settle()  # no walltime: no planned start
    s.at(10).req("b", "/B", 6, min=6).settle()
    s.at(20).req("short", "/A", 2, min=2, walltime=5.0).settle()
    assert s.e.report().requests["short"] == {}


# -- the fast paths ---------------------------------------------------------------------


@st.composite
def timed_cases(draw):
    """Leaves under the root sharing one group (the plainest plans, where cycles are
    cut short, and a parent now and then); rigid, elastic and timed requests; work
    that ends at its walltime or earlier."""
    n = draw(st.integers(1, 4))
    cons = {f"/l{i}": {"share_ratio": draw(st.integers(0, 3)), "grace": draw(st.sampled_from([0.0, 2.0]))}
            for i in range(n)}
    if draw(st.booleans()):
        cons["/l0"]["max"] = draw(st.integers(1, 8))
    plan = make_plan(cons, host_list=[Host(f"h{i}", draw(st.integers(1, 8))) for i in range(draw(st.integers(1, 3)))],
                     policy=Policy(share_pool_reclaim=draw(st.booleans()),
                                   adjust_share_to_workload=draw(st.booleans())))
    script = []
    for k in range(draw(st.integers(1, 25))):
        batch = []
        for j in range(draw(st.integers(0, 3))):
            order = draw(st.sampled_from([1, 1, 1, 2]))
            mx = max(order, draw(st.integers(1, 10)) // order * order)
            lo = draw(st.sampled_from([0, order, mx, mx]))
            wall = draw(st.sampled_from([None, None, 2.0, 5.0, 30.0]))
            batch.append(("submit", f"r{k}.{j}", draw(st.sampled_from(sorted(cons))), mx, lo, wall, order))
        if draw(st.booleans()):
            batch.append(("end", draw(st.integers(0, 1000))))
        script.append((draw(st.sampled_from([0.0, 1.0, 1.0, 3.0])), batch))
    return plan, script


def _play(plan, script, skip: bool, after=None):
    """The script played on an engine; ``after(engine)`` is called after each cycle."""
    e = Engine(plan, skip_quiet=skip)
    t, seq, log = 0.0, 0, []
    for dt, batch in script:
        t += dt
        for ev in batch:
            if ev[0] == "submit":
                e.submit(Request(ev[1], ev[2], max=ev[3], min=ev[4], seq=seq, walltime=ev[5],
                                 order=ev[6] if len(ev) > 6 else 1))
                seq += 1
            else:
                # work past its walltime ends; else one running request, chosen by the script
                due = sorted(rid for rid, t0 in e.state.started.items()
                             if t0 + e.state.requests[rid].spec.walltime <= t)
                full = sorted(rid for rid, rs in e.state.requests.items() if rs.held >= rs.max > 0)
                for rid in due or (full[ev[1] % len(full):][:1] if full else []):
                    e.release(rid)
        d = e.cycle(t)
        check_invariants(e)
        if after is not None:
            after(e)
        log.append((d.grants, d.reclaims, d.removals, d.cancelled))
        log.append(([(a.request, a.host, a.slots, a.source, a.reclaim is not None)
                     for a in sorted(e.state.allocs.values(), key=lambda a: a.id)], e.report()))
    return log, e


@settings(max_examples=200, deadline=None)
@given(timed_cases())
def test_skipping_quiet_cycles_decides_the_same_with_reservations_and_backfill(case):
    plan, script = case
    plain, _ = _play(plan, script, skip=False)
    quiet, _ = _play(plan, script, skip=True)
    assert plain == quiet


def _planned_start_by_hand(s, g, short):
    """Every running job with a walltime, its end and its slots in ``g``, sorted: when
    ``short`` slots will have come free, and how many more come free then."""
    ends = []
    for rid, t0 in s.started.items():
        rs = s.requests[rid]
        n = sum(a.slots for a in rs.allocs.values() if a.group == g and a.reclaim is None)
        if n:
            ends.append((t0 + rs.spec.walltime, n))
    ends.sort()
    freed = 0
    for i, (end, n) in enumerate(ends):
        freed += n
        if freed >= short:
            freed += sum(m for e2, m in ends[i + 1:] if e2 == end)  # every end at that time counts
            return end, freed - short
    return None, 0


@settings(max_examples=150, deadline=None)
@given(timed_cases())
def test_the_planned_start_from_the_book_of_ends_is_the_one_worked_out_by_hand(case):
    """The planned start reads a sorted book of ends kept across cycles (work ended
    dropped as it is met): after every cycle it answers as a sort of every running job."""
    from apportion.engine import reserve

    plan, script = case

    def check(e):
        s = e.state
        for g in s.group_names:
            for short in range(1, s.groups[g].slots_taking_work + 2):
                assert reserve.planned_start(s, g, short, 0) == _planned_start_by_hand(s, g, short), (g, short)

    _play(plan, script, skip=False, after=check)


def test_reservations_do_not_stop_cycles_being_cut_short():
    # the plainest plan: /b's wide job waits with a reservation while /a's timed work
    # runs and ends; cycles are still worked out with sums, and decide the same
    plan = make_plan({"/a": {}, "/b": {}}, hosts=2, slots=6, policy=Policy(share_pool_reclaim=False))
    script = [(0.0, [("submit", "a1", "/a", 8, 8, 10.0), ("submit", "a2", "/a", 2, 2, 10.0)]),
              (1.0, [("submit", "b1", "/b", 10, 10, None)]), (1.0, [("submit", "a3", "/a", 1, 1, None)]),
              (10.0, [("end", 0)]), (1.0, [])]
    plain, _ = _play(plan, script, skip=False)
    quiet, e = _play(plan, script, skip=True)
    assert plain == quiet
    assert e.cut_short + e.skipped >= 2
    granted = [{g.request for g in step[0]} for step in quiet[::2]]
    # a3 (no walltime) may not take the slots kept for b1: it starts beside b1 only
    assert granted[1] == granted[2] == set() and granted[3] == {"b1", "a3"}


# -- fair over time -------------------------------------------------------------------


def _turns(half_life):
    """A's wide job starts first (its request came first) and runs beyond A's share;
    then each asks wide again, A first: who has the next reservation?"""
    plan = make_plan({"/A": {}, "/B": {}}, hosts=1, slots=8, policy=Policy(usage_half_life=half_life))
    s = Sim(plan).req("a1", "/A", 6, min=6).req("b1", "/B", 6, min=6).settle()
    assert s.e.report().requests["a1"] == {"h1": 6}
    s.at(100)
    s.e.release("a1")
    s.req("a2", "/A", 6, min=6).at(101)  # b1 starts; a2 waits
    assert s.e.report().requests["b1"] == {"h1": 6}
    s.req("a3", "/A", 6, min=6).req("b2", "/B", 6, min=6).at(102)
    s.e.release("b1")
    s.at(103)
    return s


def test_use_beyond_the_share_is_repaid_with_a_half_life():
    # without it, a2 (first in arrival order, A and B equally below their share) is next
    s = _turns(None)
    assert s.e.report().requests["a2"] == {"h1": 6}
    # with it, A stood 2 slots above its share for 100 s (a1), B for 2 s (b1): B goes first
    s = _turns(3600.0)
    assert s.e.report().requests["b2"] == {"h1": 6} and s.e.report().requests["a2"] == {}
    assert s.e.state.debt["/A"] > s.e.state.debt["/B"] > 0


def test_twenty_consumers_each_asking_wider_than_its_share_all_finish():
    # 64 slots, 20 consumers of ratio 1 (a share of 3.2 each), each with two rigid jobs
    # of 10 slots that run 10 s: under shares alone none would ever start. With
    # reservations they start in turn, six at a time, and all finish
    leaves = {f"/t{i:02d}": {"share_ratio": 1} for i in range(20)}
    s = Sim(make_plan(leaves, hosts=4, slots=16))
    for leaf in leaves:
        for k in range(2):
            s.req(f"{leaf[1:]}.{k}", leaf, 10, min=10, walltime=10.0)
    s.settle()
    started: dict[str, float] = {}
    t = 0.0
    while len(started) < 40 and t < 200:
        for rid, t0 in s.e.state.started.items():
            started.setdefault(rid, t0)
        for rid, t0 in list(s.e.state.started.items()):
            if t0 + 10.0 <= t:
                s.e.release(rid)
        t += 1.0
        s.at(t)
    assert len(started) == 40, sorted(set(s.e.state.requests) - set(started))
    assert max(started.values()) <= 70.0  # 7 rounds of 10 s: 6 jobs of 10 fit in 64 slots
    assert s.reclaims() == []



def test_within_a_consumer_first_come_first_served_holds():
    # one consumer: a wide job waiting behind a narrow one has no reservation that
    # would keep the slots from it: when 4 slots free up, the narrow one starts first
    s = Sim(make_plan({"/A": {}}, hosts=1, slots=8))
    s.req("a1", "/A", 4, min=4).req("a2", "/A", 4, min=4).req("n1", "/A", 1, min=1).req("w", "/A", 6, min=6)
    s.settle()
    assert s.e.report().requests["n1"] == {} and s.e.report().reservations == []
    s.e.release("a1")
    s.at(1)
    assert s.e.report().requests["n1"] == {"h1": 1} and s.e.report().requests["w"] == {}
    assert [r.request for r in s.e.report().reservations] == ["w"]
