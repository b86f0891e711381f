"""A new plan under running work (Engine.apply_plan)."""

from __future__ import annotations

from apportion.engine import Host

from .builders import Sim, make_plan


def test_a_new_ratio_takes_effect_with_grace_and_nothing_is_lost():
    s = Sim(make_plan({"/A": {"grace": 30}, "/B": {"grace": 30}})).req("a", "/A", 100).req("b", "/B", 100).settle()
    assert s.holds("/A", "/B") == [9, 9]
    removed = s.e.apply_plan(make_plan({"/A": {"share_ratio": 2, "grace": 30}, "/B": {"grace": 30}}))
    assert removed == []
    s.settle()
    # B is now over its share (6 of 18): 3 of its slots are reclaimed, with its grace
    assert s.holds("/A", "/B") == [9, 9]
    assert sorted({r.deadline for r in s.reclaims()}) == [30.0]
    s.at(30)
    assert s.holds("/A", "/B") == [12, 6]


def test_allocations_the_new_plan_cannot_hold_are_removed_and_reported():
    s = Sim(make_plan({"/A": {}, "/B": {}}, hosts=2, slots=4)).req("a", "/A", 4).req("b", "/B", 4).settle()
    hosts_of_b = set(s.e.report().requests["b"])
    # /B disappears, and h2 leaves the plan
    removed = s.e.apply_plan(make_plan({"/A": {}}, host_list=[Host("h1", 4)]))
    assert {r.request for r in removed} >= {"b"}
    assert sum(r.slots for r in removed if r.request == "b") == 4
    assert "b" not in s.e.state.requests
    assert all(a.host == "h1" for a in s.e.state.allocs.values())
    assert hosts_of_b  # it did hold something before


def test_ownership_that_shrinks_is_given_back_after_grace():
    s = Sim(make_plan({"/A": {"owned": 12, "grace": 10}, "/B": {}})).req("a", "/A", 12).req("b", "/B", 100).settle()
    assert s.holds("/A", "/B") == [12, 6]
    s.e.apply_plan(make_plan({"/A": {"owned": 4, "grace": 10}, "/B": {}}))
    s.settle()
    # A keeps 4 owned and deserves half of the public 14 (7): 1 slot goes back to B
    assert s.holds("/A", "/B") == [12, 6]
    s.at(10)
    assert s.holds("/A", "/B") == [11, 7]


def test_apply_plan_is_atomic():
    s = Sim(make_plan({"/A": {}})).req("a", "/A", 6).settle()
    before = s.e.state

    class Broken(Exception):
        pass

    import apportion.engine.replan as rp

    original = rp.ClusterState.add

    def boom(self, *a, **k):
        raise Broken()

    rp.ClusterState.add = boom
    try:
        try:
            s.e.apply_plan(make_plan({"/A": {}, "/B": {}}))
        except Broken:
            pass
    finally:
        rp.ClusterState.add = original
    assert s.e.state is before and s.holds("/A") == [6]
