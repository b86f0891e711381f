"""The cycle's side of multidimensional ownership (seed 000): own work on owned
hosts first, lent slots on the lender's hosts, preference levels between groups
and reclaim_for_preference."""

from __future__ import annotations

from dataclasses import replace

from apportion.engine import Policy, Request
from tests.engine.builders import Sim, make_plan


def _hosts_of(sim: Sim, rid: str) -> dict[str, int]:
    return dict(sim.e.report().requests[rid])


def with_hosts(plan, ownership):
    return replace(plan, host_ownership=ownership)


def test_own_work_goes_to_the_owned_hosts_first():
    # stacked order would put the work on h1; /a owns h3 (6 slots), so it runs there
    plan = make_plan({"/a": {"owned": 6}, "/b": {}}, hosts=3, slots=6)
    plan = with_hosts(plan, {"RG": {"/a": {"h3": 6}}})
    sim = Sim(plan).req("r", "/a", max=4).settle()
    assert _hosts_of(sim, "r") == {"h3": 4}


def test_own_work_beyond_the_owned_hosts_spills_in_group_order():
    plan = make_plan({"/a": {"owned": 6}, "/b": {}}, hosts=3, slots=6)
    plan = with_hosts(plan, {"RG": {"/a": {"h3": 6}}})
    # 8 wanted: 6 owned on h3, then 2 from the public pool in stacked order (h1)
    sim = Sim(plan).req("r", "/a", max=8).settle()
    assert _hosts_of(sim, "r") == {"h3": 6, "h1": 2}


def test_lent_slots_run_on_the_lenders_hosts():
    plan = make_plan({"/a": {"owned": 6, "lend": True}, "/b": {"share_ratio": 0, "borrow": True}},
                     hosts=3, slots=6)
    plan = with_hosts(plan, {"RG": {"/a": {"h2": 6}}})
    sim = Sim(plan).req("r", "/b", max=6).settle()
    assert _hosts_of(sim, "r") == {"h2": 6}
    assert sim.line("/b").borrowed == 6


def test_without_host_ownership_placement_is_unchanged():
    plan = make_plan({"/a": {"owned": 6}, "/b": {}}, hosts=3, slots=6)
    sim = Sim(plan).req("r", "/a", max=4).settle()
    assert _hosts_of(sim, "r") == {"h1": 4}


def _two_groups(policy: Policy, pref_a: int | None, pref_b: int | None):
    return make_plan(
        {"/o": {"groups": {"A": {"owned": 4, "lend": True, "preference": pref_a},
                           "B": {"owned": 4, "lend": True, "preference": pref_b}}},
         "/x": {"share_ratio": 0, "borrow": True}},
        hosts=2, slots=4, groups={"A": ["h1"], "B": ["h2"]}, policy=policy)


def test_preference_orders_the_groups_a_request_uses():
    # B is preferred (1 < 2): 3 slots come from B although A is first in the plan
    sim = Sim(_two_groups(Policy(), 2, 1)).req("r", "/o", max=3).settle()
    assert sim.holds("/o", group="B") == [3]
    assert sim.holds("/o", group="A") == [0]


def test_equal_preference_keeps_plan_order():
    sim = Sim(_two_groups(Policy(), 1, 1)).req("r", "/o", max=3).settle()
    assert sim.holds("/o", group="A") == [3]


def _lent_then_wanted(policy: Policy):
    # /x borrows all of /o's preferred group A; then /o wants 3 slots
    sim = Sim(_two_groups(policy, 1, 2))
    sim.e.submit(Request("x", "/x", max=4, groups=("A",), seq=0))
    sim.settle()
    assert sim.line("/x", "A").borrowed == 4
    sim.req("o", "/o", max=3).settle()
    return sim


def test_without_reclaim_for_preference_idle_owned_slots_elsewhere_are_used():
    sim = _lent_then_wanted(Policy())
    assert sim.holds("/o", group="B") == [3]
    assert sim.reclaims() == []


def test_reclaim_for_preference_takes_the_preferred_group_back():
    sim = _lent_then_wanted(Policy(reclaim_for_preference=True))
    assert [(r.consumer, r.group, r.slots) for r in sim.reclaims()] == [("/x", "A", 3)]
    assert sim.holds("/o", group="A") == [3]
    assert sim.holds("/o", group="B") == [0]
    assert sim.line("/x", "A").borrowed == 1


def test_a_sibling_borrows_a_lent_host_before_a_better_ranked_cousin():
    # /P/lender lends its 6 slots; /Q/cousin has the better rank, /P/sib is the
    # lender's sibling: lending goes to the parent's pool first, so /P/sib gets them
    plan = make_plan({
        "/P": {"share_ratio": 0, "owned": 6}, "/P/lender": {"owned": 6, "lend": True, "share_ratio": 0},
        "/P/sib": {"share_ratio": 0, "borrow": True, "rank": 5},
        "/Q": {"share_ratio": 0}, "/Q/cousin": {"share_ratio": 0, "borrow": True, "rank": 1},
    }, hosts=1, slots=6)
    plan = with_hosts(plan, {"RG": {"/P": {"h1": 6}, "/P/lender": {"h1": 6}}})
    sim = Sim(plan).req("c", "/Q/cousin", max=6).req("s", "/P/sib", max=6)
    sim.settle()
    assert sim.holds("/P/sib", "/Q/cousin") == [6, 0]


def test_report_splits_pool_use_into_private_and_public():
    # /P owns 6 of 12 slots, /P/a owns none: /P/a asks for 9 and takes the 6 of
    # /P's private pool first, then 3 from the public pool
    plan = make_plan({"/P": {"owned": 6}, "/P/a": {}, "/Q": {}}, hosts=2, slots=6)
    sim = Sim(plan).req("r", "/P/a", max=9).settle()
    line = sim.line("/P/a")
    assert (line.held, line.private_pool, line.public_pool) == (9, 6, 3)
