"""Rigid requests (min > 0): no reclaim is wasted on a request that cannot start."""

from __future__ import annotations

from apportion.engine import Policy

from .builders import Sim, make_plan


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
