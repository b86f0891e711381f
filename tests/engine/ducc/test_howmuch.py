"""How Much for fair share: exact counts for the cases issue 3 lists."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apportion.engine.ducc.howmuch import FairClass, JobAsk, how_much
from apportion.engine.ducc.vmachines import OrderTables


def machines(*orders: int) -> OrderTables:
    return OrderTables.of(((o, o) for o in orders), max_order=max(orders))


def test_equal_split_between_two_users():
    # 10 machines of order 2 = 20 quanta; one class; two users with one order-1 job each
    r = how_much([FairClass("normal")],
                 [JobAsk("a", "alice", "normal", 1, 100), JobAsk("b", "bob", "normal", 1, 100, submitted=1)],
                 machines(*[2] * 10))
    assert r.counts == {"a": 10, "b": 10}
    assert r.pure_fair_share == {"a": 10, "b": 10}


def test_class_weights():
    # weights 1 : 3 on 16 quanta
    r = how_much([FairClass("low", weight=1), FairClass("high", weight=3)],
                 [JobAsk("l", "u", "low", 1, 100), JobAsk("h", "u", "high", 1, 100)],
                 machines(*[4] * 4))
    assert r.counts == {"l": 4, "h": 12}


def test_users_then_jobs_inside_a_class():
    # alice has two jobs, bob one: users split 12 quanta 6 : 6, alice's jobs 3 : 3
    r = how_much([FairClass("normal")],
                 [JobAsk("a1", "alice", "normal", 1, 100), JobAsk("a2", "alice", "normal", 1, 100, submitted=1),
                  JobAsk("b1", "bob", "normal", 1, 100, submitted=2)],
                 machines(*[3] * 4))
    assert r.counts == {"a1": 3, "a2": 3, "b1": 6}


def test_a_job_capped_by_its_remaining_work_leaves_the_rest_to_others():
    r = how_much([FairClass("normal")],
                 [JobAsk("small", "alice", "normal", 1, 3), JobAsk("big", "bob", "normal", 1, 100)],
                 machines(*[2] * 10))
    assert r.counts == {"small": 3, "big": 17}
    # a job that can run 3 processes deserves 3, not half of 20
    assert r.pure_fair_share["small"] == 3


def test_a_better_priority_class_is_served_first():
    r = how_much([FairClass("urgent", priority=5), FairClass("normal", priority=10)],
                 [JobAsk("n", "bob", "normal", 1, 100), JobAsk("u", "alice", "urgent", 1, 14)],
                 machines(*[4] * 5))
    assert r.counts == {"u": 14, "n": 6}


def test_mixed_orders_a_small_job_is_not_starved_by_a_large_one():
    # two order-4 machines = 8 quanta; an order-4 job and an order-1 job share them
    # 4 : 4 in quanta: one big process and four small ones
    r = how_much([FairClass("normal")],
                 [JobAsk("big", "alice", "normal", 4, 10), JobAsk("small", "bob", "normal", 1, 10, submitted=1)],
                 machines(4, 4))
    assert r.counts == {"big": 1, "small": 4}


def test_processes_must_fit_a_machine():
    # order-3 processes on order-2 machines never fit: the order-1 job takes everything
    r = how_much([FairClass("normal")],
                 [JobAsk("big", "alice", "normal", 3, 10), JobAsk("small", "bob", "normal", 1, 10, submitted=1)],
                 machines(2, 2, 2))
    assert r.counts == {"big": 0, "small": 6}


def test_leftover_quanta_go_as_bonus_to_who_can_use_them():
    # 5 quanta on one order-5 machine; two order-2 jobs: 2.5 quanta each is 1 process
    # each in the fair round, and the fifth quantum fits nobody: 1 left over
    r = how_much([FairClass("normal")],
                 [JobAsk("a", "alice", "normal", 2, 10), JobAsk("b", "bob", "normal", 2, 10, submitted=1)],
                 machines(5))
    assert r.counts == {"a": 1, "b": 1} and r.quanta_left == 1
    # with an order-1 job beside them, it takes the spare quantum as a bonus
    r = how_much([FairClass("normal")],
                 [JobAsk("a", "alice", "normal", 2, 10), JobAsk("b", "bob", "normal", 2, 10, submitted=1),
                  JobAsk("c", "carol", "normal", 1, 10, submitted=2)],
                 machines(6))
    assert sum(r.counts[j] * o for j, o in (("a", 2), ("b", 2), ("c", 1))) == 6 and r.quanta_left == 0


def test_fragmented_space_shares_the_places_that_exist():
    # four order-3 machines: 12 quanta but only four places for an order-2 process.
    # Two users, 6 quanta each, is 3 processes each in quanta; the four places go 2 : 2,
    # not 3 to the first job in line and 1 to the next
    r = how_much([FairClass("normal")],
                 [JobAsk("a", "ann", "normal", 2, 100), JobAsk("b", "bob", "normal", 2, 100, submitted=1)],
                 machines(3, 3, 3, 3))
    assert r.counts == {"a": 2, "b": 2} and r.pure_fair_share == {"a": 2, "b": 2}
    assert r.quanta_left == 4 and r.free.shares[2] == 0
    # bob can use 1 process now: ann is owed 10 quanta (5 processes), but only 3 places are
    # left for her; bob is not left with nothing because ann came first
    r = how_much([FairClass("normal")],
                 [JobAsk("a", "ann", "normal", 2, 100), JobAsk("b", "bob", "normal", 2, 1, submitted=1)],
                 machines(3, 3, 3, 3))
    assert r.counts == {"a": 3, "b": 1} and r.pure_fair_share == {"a": 3, "b": 1}


def test_fragmented_space_is_shared_by_class_weight():
    # weights 3 : 1 on 12 quanta (9 : 3, 4 and 1 processes in quanta); the four order-2
    # places are shared 3 : 1 (6 and 2 quanta of the 8 they hold)
    r = how_much([FairClass("high", weight=3), FairClass("low", weight=1)],
                 [JobAsk("h", "u", "high", 2, 100), JobAsk("l", "v", "low", 2, 100)],
                 machines(3, 3, 3, 3))
    assert r.counts == {"h": 3, "l": 1}


@st.composite
def cases(draw):
    orders = draw(st.lists(st.integers(1, 6), min_size=1, max_size=8))
    classes = [FairClass(f"c{i}", weight=draw(st.integers(1, 4)), priority=draw(st.sampled_from([1, 5, 10])))
               for i in range(draw(st.integers(1, 3)))]
    jobs = [JobAsk(f"j{k}", f"u{draw(st.integers(0, 3))}", draw(st.sampled_from(classes)).name,
                   draw(st.integers(1, 4)), draw(st.integers(0, 12)), submitted=k)
            for k in range(draw(st.integers(1, 8)))]
    return orders, classes, jobs


@given(cases())
def test_counts_fit_the_machines_and_stay_within_caps(case):
    orders, classes, jobs = case
    t = machines(*orders)
    before = (list(t.machines), list(t.virtual))
    r = how_much(classes, jobs, t)
    assert (t.machines, t.virtual) == before  # the caller's tables are not touched
    assert sum(r.counts[j.id] * j.order for j in jobs if j.cap > 0) + r.quanta_left == sum(orders)
    for j in jobs:
        assert 0 <= r.counts.get(j.id, 0) <= j.cap
        assert r.pure_fair_share.get(j.id, 0) <= r.counts.get(j.id, 0)
    # nothing that still wants a process could have had one in the space left
    assert not any(r.counts.get(j.id, 0) < j.cap and j.order <= r.free.max_order and r.free.shares[j.order] > 0
                   for j in jobs)
    # same input, same output
    assert how_much(classes, jobs, t) == r


def test_leftover_ties_go_by_user_name_not_by_arrival():
    # 3 quanta, two users with one order-1 job each: the odd quantum goes to alice
    # (users by name), although bob's job came first
    r = how_much([FairClass("c")], [JobAsk("jb", "bob", "c", 1, 10), JobAsk("ja", "alice", "c", 1, 10, submitted=1)],
                 machines(3))
    assert r.counts == {"jb": 1, "ja": 2}
