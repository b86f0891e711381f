"""Every slot-plan rule of POLICY-NOTES sections 2-7, with exact expected numbers."""

from __future__ import annotations

from apportion.engine import Host, HostState, Policy, ShareEnforcement

from .builders import Sim, make_plan

# -- ownership -------------------------------------------------------------------


def test_owned_slots_are_kept_for_their_owner_even_when_idle():
    # 18 slots; A owns 6 and does not lend: B may use only the other 12
    s = Sim(make_plan({"/A": {"owned": 6}, "/B": {}})).req("b", "/B", 100).settle()
    assert s.holds("/A", "/B") == [0, 12]
    s.req("a", "/A", 6).settle()
    assert s.holds("/A", "/B") == [6, 12]
    assert s.line("/A").owned == 6 and s.line("/B").shared == 12
    # wanting more, A also deserves half the public pool of 12: it reclaims 6 from B
    s.e.change("a", max=100)
    s.settle()
    assert s.holds("/A", "/B") == [12, 6]


def test_overallocation_is_honoured_in_rank_order_as_hosts_appear():
    # A (rank 2) and B (rank 1) each own 12, but only 12 slots exist at first
    plan = make_plan({"/A": {"owned": 12, "rank": 2}, "/B": {"owned": 12, "rank": 1}},
                     host_list=[Host("h1", 6), Host("h2", 6), Host("h3", 6, state=HostState.DOWN),
                                Host("h4", 6, state=HostState.DOWN)])
    s = Sim(plan).req("a", "/A", 100).req("b", "/B", 100).settle()
    assert s.holds("/A", "/B") == [0, 12]
    assert s.line("/A").planned_owned == 0 and s.line("/B").planned_owned == 12
    s.e.set_host_state("h3", HostState.OK)
    s.settle()
    assert s.holds("/A", "/B") == [6, 12]
    s.e.set_host_state("h4", HostState.OK)
    s.settle()
    assert s.holds("/A", "/B") == [12, 12]


def test_parent_private_pool_serves_only_its_children():
    # P owns 10, its children own 2 + 2: 6 slots are P's private pool; Q gets the public 8
    plan = make_plan({"/P": {"owned": 10}, "/P/a": {"owned": 2}, "/P/b": {"owned": 2}, "/Q": {}})
    s = Sim(plan).req("q", "/Q", 100).settle()
    assert s.holds("/Q") == [8]
    s.req("a", "/P/a", 100).settle()
    # a: 2 owned + the whole private pool of 6 + 3 of the public 8 (its planned 2,
    # plus half of b's unused 2, spread over both branches: leaf enforcement)
    assert s.holds("/P/a", "/P/b", "/Q") == [11, 0, 5]
    s.req("b", "/P/b", 100).settle()
    # the private pool of 6 is split 1:1 between a and b, each on top of its own 2,
    # and the public 8 is split P:Q = 4:4, P's 4 as 2 + 2
    assert s.holds("/P/a", "/P/b", "/Q") == [7, 7, 4]
    assert s.line("/P").owned == 10 and s.line("/P").shared == 4 and s.line("/Q").shared == 4


def test_nearest_pool_first_then_public():
    # /P owns 4, child /P/a owns 0: a takes P's private pool before the public one
    plan = make_plan({"/P": {"owned": 4}, "/P/a": {}, "/Q": {}}, hosts=2, slots=6)
    s = Sim(plan).req("a", "/P/a", 6).settle()
    u = s.e.state.use("/P/a", "RG")
    assert u.pools == {"/P": 4, "/": 2}


# -- lending and borrowing ---------------------------------------------------------


def test_lend_limit_reserves_the_rest():
    plan = make_plan({"/A": {"owned": 18, "lend": True, "lend_limit": 4}, "/B": {}})
    s = Sim(plan).req("b", "/B", 100).settle()
    assert s.holds("/B") == [4]
    assert s.line("/A").lent == 4 and s.line("/B").borrowed == 4


def test_lent_slots_go_to_the_best_ranked_borrower_first():
    plan = make_plan({"/A": {"owned": 18, "lend": True, "lend_limit": 5},
                      "/B": {"rank": 2}, "/C": {"rank": 1}})
    s = Sim(plan).req("b", "/B", 4).req("c", "/C", 3).settle()
    # C (rank 1) is served first even though B asked first
    assert s.holds("/B", "/C") == [2, 3]


def test_borrowing_is_first_come_first_served_once_held():
    plan = make_plan({"/A": {"owned": 18, "lend": True, "lend_limit": 5},
                      "/B": {"rank": 2}, "/C": {"rank": 1}})
    s = Sim(plan).req("b", "/B", 10).settle()
    assert s.holds("/B") == [5]
    s.req("c", "/C", 10).settle()
    assert s.holds("/B", "/C") == [5, 0]  # a later borrower waits, it does not displace


def test_borrow_limit_caps_borrowing():
    plan = make_plan({"/A": {"owned": 18, "lend": True}, "/B": {"borrow_limit": 7}})
    s = Sim(plan).req("b", "/B", 100).settle()
    assert s.holds("/B") == [7]


def test_borrowing_off_means_owned_plus_pool_only():
    plan = make_plan({"/A": {"owned": 12, "lend": True}, "/B": {"owned": 2, "borrow": False}})
    s = Sim(plan).req("b", "/B", 100).settle()
    assert s.holds("/B") == [6]  # 2 owned + the 4 public slots, nothing borrowed
    assert s.line("/B").borrowed == 0


def test_borrow_preference_orders_lenders():
    plan = make_plan({"/L1": {"owned": 6, "lend": True}, "/L2": {"owned": 6, "lend": True},
                      "/B": {"borrow_preference": ("/L2",)}}, hosts=2)
    s = Sim(plan).req("b", "/B", 4).settle()
    assert s.e.state.use("/B", "RG").borrowed == {"/L2": 4}


def test_siblings_before_cousins():
    plan = make_plan({"/X": {"owned": 6}, "/X/lender": {"owned": 6, "lend": True}, "/X/sib": {},
                      "/Y": {"owned": 6}, "/Y/lender": {"owned": 6, "lend": True}}, hosts=2)
    s = Sim(plan).req("r", "/X/sib", 8).settle()
    assert s.e.state.use("/X/sib", "RG").borrowed == {"/X/lender": 6, "/Y/lender": 2}


def test_lend_to_siblings_only():
    plan = make_plan({"/X": {"owned": 6}, "/X/lender": {"owned": 6, "lend": True, "lend_to": ("siblings",)},
                      "/X/sib": {}, "/Y": {}, "/Y/cousin": {}}, hosts=1)
    s = Sim(plan).req("c", "/Y/cousin", 6).settle()
    assert s.holds("/Y/cousin") == [0]
    s.req("s", "/X/sib", 6).settle()
    assert s.holds("/X/sib") == [6]


def test_borrower_grace_must_not_exceed_lender_grace():
    plan = make_plan({"/A": {"owned": 6, "lend": True, "grace": 30},
                      "/B": {"grace": 60}, "/C": {"grace": 30}}, hosts=1)
    s = Sim(plan).req("b", "/B", 6).settle()
    assert s.holds("/B") == [0]
    s.req("c", "/C", 6).settle()
    assert s.holds("/C") == [6]


def test_owner_reclaims_lent_slots_worst_rank_first_after_grace():
    plan = make_plan({"/A": {"owned": 12, "lend": True, "grace": 60},
                      "/B": {"rank": 1, "grace": 20}, "/C": {"rank": 2, "grace": 10}}, hosts=2)
    s = Sim(plan).req("b", "/B", 6).req("c", "/C", 6).settle()
    assert s.holds("/A", "/B", "/C") == [0, 6, 6]
    s.req("a", "/A", 8).settle()
    # C (worst rank) gives back first, all 6; then 2 of B's
    rec = sorted((r.consumer, r.slots, r.deadline) for r in s.reclaims())
    assert rec == [("/B", 2, 20.0), ("/C", 6, 10.0)]
    # during the grace period the slots stay with their holders
    assert s.holds("/A", "/B", "/C") == [0, 6, 6]
    s.at(10)
    assert s.holds("/A", "/B", "/C") == [6, 6, 0]
    s.at(20)
    assert s.holds("/A", "/B", "/C") == [8, 4, 0]


def test_a_lender_at_its_max_does_not_take_back_what_it_could_not_use():
    # A owns 12 but may hold 8: 4 of its owned slots stay idle and are lent to B. A
    # wanting more must not reclaim them: with grace 0 they would go back and forth
    # for ever at one instant (as at 100k hosts in the benchmark)
    plan = make_plan({"/A": {"owned": 12, "lend": True, "max": 8}, "/B": {}}, hosts=2)
    s = Sim(plan).req("a", "/A", 8).settle()
    s.req("b", "/B", 4).settle()
    assert s.holds("/A", "/B") == [8, 4] and s.line("/B").borrowed == 4
    s.req("a2", "/A", 10).settle()
    assert s.holds("/A", "/B") == [8, 4] and s.reclaims() == []


def test_a_lender_below_its_max_takes_back_only_the_room_it_has():
    # A (borrow-only for pools: ratio 0) owns 8, may hold 6 and holds 4; its 4 idle
    # owned slots are lent to B. Wanting 10 more, it takes back 2: what its max allows
    plan = make_plan({"/A": {"owned": 8, "lend": True, "max": 6, "share_ratio": 0}, "/B": {}}, hosts=2)
    s = Sim(plan).req("a", "/A", 4).settle()
    s.req("b", "/B", 8).settle()
    assert s.holds("/A", "/B") == [4, 8] and s.line("/B").borrowed == 4
    s.req("a2", "/A", 10).settle()
    assert [(r.consumer, r.slots, r.reason) for r in s.reclaims()] == [("/B", 2, "owner reclaims lent slots")]
    assert s.holds("/A", "/B") == [6, 6]


def test_reclaim_before_borrow_takes_own_lent_slots_first():
    base = {"/A": {"owned": 6, "lend": True}, "/B": {}, "/L": {"owned": 6, "lend": True}}
    for switch, expect in ((False, {"/L": 6}), (True, {})):
        plan = make_plan(base, hosts=2, policy=Policy(reclaim_before_borrow=switch))
        s = Sim(plan).req("b", "/B", 6, groups=()).settle()
        # B borrowed from A first (rank/plan order) ... make sure it holds A's slots
        assert s.e.state.use("/B", "RG").borrowed.get("/A", 0) > 0
        s.req("a", "/A", 6).settle()
        assert s.e.state.use("/A", "RG").borrowed == expect


# -- share ratios -------------------------------------------------------------------


def _abc(policy=Policy()):
    return make_plan({"/A": {"share_ratio": 1}, "/B": {"share_ratio": 2}, "/C": {"share_ratio": 3}},
                     policy=policy)


def test_dynamic_quota_1_2_3_on_18_slots():
    s = Sim(_abc()).req("a", "/A", 100).settle()
    assert s.holds("/A") == [18] and s.line("/A").deserved == 18
    s.req("b", "/B", 100).settle()
    assert s.holds("/A", "/B") == [6, 12]
    s.req("c", "/C", 100).settle()
    assert s.holds("/A", "/B", "/C") == [3, 6, 9]


def test_static_quota_without_adjust_share_to_workload():
    # static quota 3:6:9; above it first come first served and no reclaim
    s = Sim(_abc(Policy(adjust_share_to_workload=False))).req("a", "/A", 100).settle()
    assert s.holds("/A") == [18] and s.line("/A").deserved == 3
    s.req("b", "/B", 100).settle()
    # B is below its static quota 6: it reclaims 6 from A, who is over its quota 3
    assert s.holds("/A", "/B") == [12, 6]
    s.req("c", "/C", 100).settle()
    assert s.holds("/A", "/B", "/C") == [3, 6, 9]


def test_share_ratio_zero_never_holds_pool_slots():
    plan = make_plan({"/A": {"share_ratio": 0}, "/B": {"owned": 6, "lend": True}}, hosts=2)
    s = Sim(plan).req("a", "/A", 100).settle()
    assert s.holds("/A") == [6]  # borrowed from B only; the 6 idle public slots stay idle
    assert s.line("/A").shared == 0 and s.line("/A").borrowed == 6


def test_max_caps_everything_held():
    plan = make_plan({"/A": {"owned": 4, "max": 10}, "/B": {}})
    s = Sim(plan).req("a", "/A", 100).settle()
    assert s.holds("/A") == [10]


def test_priority_band_takes_all_it_can_use_first():
    plan = make_plan({"/A": {"priority": 1}, "/B": {"priority": 2, "share_ratio": 10}})
    s = Sim(plan).req("b", "/B", 100).req("a", "/A", 12).settle()
    assert s.holds("/A", "/B") == [12, 6]


def test_equal_ratios_reclaim_for_fairness():
    s = Sim(make_plan({"/A": {}, "/B": {}})).req("a", "/A", 100).settle()
    assert s.holds("/A") == [18]
    s.req("b", "/B", 100).settle()
    assert s.holds("/A", "/B") == [9, 9]


def test_share_pool_reclaim_off_waits_for_release():
    s = Sim(make_plan({"/A": {}, "/B": {}}, policy=Policy(share_pool_reclaim=False)))
    s.req("a1", "/A", 12).req("a2", "/A", 6).settle()
    s.req("b", "/B", 100).settle()
    assert s.holds("/A", "/B") == [18, 0]
    s.e.release("a2")
    s.settle()
    assert s.holds("/A", "/B") == [12, 6]


# -- enforcement (seed 004) ---------------------------------------------------------


def _lobs(mode):
    return make_plan({"/LOB1": {}, "/LOB1/app1": {}, "/LOB1/app2": {},
                      "/LOB2": {}, "/LOB2/app3": {}, "/LOB2/app4": {}},
                     hosts=4, slots=10, policy=Policy(share_enforcement=mode))


def test_leaf_enforcement_spreads_unused_share_over_all_branches():
    s = Sim(_lobs(ShareEnforcement.LEAF))
    for leaf in ("app2", "app3", "app4"):
        s.req(leaf, f"/LOB{1 if leaf == 'app2' else 2}/{leaf}", 100)
    s.settle()
    # 10 each planned; app1's 10 go 5 to LOB1, 5 to LOB2 (12.5 each: the tie to app3)
    assert s.holds("/LOB1/app2", "/LOB2/app3", "/LOB2/app4") == [15, 13, 12]


def test_parent_enforcement_gives_unused_share_to_siblings_first():
    s = Sim(_lobs(ShareEnforcement.PARENT))
    for leaf in ("app2", "app3", "app4"):
        s.req(leaf, f"/LOB{1 if leaf == 'app2' else 2}/{leaf}", 100)
    s.settle()
    assert s.holds("/LOB1/app2", "/LOB2/app3", "/LOB2/app4") == [20, 10, 10]


def test_unused_share_never_flows_to_a_leaf_without_demand():
    # app2 alone holds all 40; app1 arrives: LOB2 has no demand, so in both modes
    # all 40 stay in LOB1 and app1 reclaims half from its sibling
    for mode, expect in ((ShareEnforcement.LEAF, [20, 20, 0, 0]), (ShareEnforcement.PARENT, [20, 20, 0, 0])):
        s = Sim(_lobs(mode)).req("x2", "/LOB1/app2", 100).settle()
        assert s.holds("/LOB1/app2") == [40]
        s.req("x1", "/LOB1/app1", 100).settle()
        assert s.holds("/LOB1/app1", "/LOB1/app2", "/LOB2/app3", "/LOB2/app4") == expect, mode


def test_parent_enforcement_reclaims_through_the_branch():
    # app1 and app2 hold 20 each; app3 arrives in LOB2 wanting 100. Leaf: planned 10
    # each, app4's unused 10 spread 5/5 over the branches -> 12.5, 12.5, 15 (rounded
    # 13, 12, 15), taken straight from the leaves. Parent: LOB2 deserves 20, all to app3.
    for mode, expect in ((ShareEnforcement.LEAF, [13, 12, 15]), (ShareEnforcement.PARENT, [10, 10, 20])):
        s = Sim(_lobs(mode)).req("x1", "/LOB1/app1", 100).req("x2", "/LOB1/app2", 100).settle()
        assert s.holds("/LOB1/app1", "/LOB1/app2") == [20, 20]
        s.req("x3", "/LOB2/app3", 100).settle()
        assert s.holds("/LOB1/app1", "/LOB1/app2", "/LOB2/app3") == expect, mode


# -- base quota across groups (seed 003) ---------------------------------------------


def test_base_quota_takes_static_quota_in_every_group_first():
    # seed 003: RG1 and RG2 of 20 slots, A, B, C ratio 1. A comes first wanting 14.
    groups = {"RG1": ["h1", "h2"], "RG2": ["h3", "h4"]}
    cons = {"/A": {}, "/B": {}, "/C": {}}
    hosts = [Host(f"h{i}", 10) for i in range(1, 5)]
    results = {}
    for base in (False, True):
        plan = make_plan(cons, host_list=hosts, groups=groups, policy=Policy(base_quota=base))
        s = Sim(plan).req("a", "/A", 14).settle()
        first = (s.held("/A", "RG1"), s.held("/A", "RG2"))
        s.req("b", "/B", 30).req("c", "/C", 30).at(100)
        results[base] = (first, sum(r.slots for r in s.reclaims()),
                         [s.held(p, "RG1") + s.held(p, "RG2") for p in ("/A", "/B", "/C")])
    # without base quota A fills RG1 first (its dynamic quota there is all 20)
    assert results[False][0] == (14, 0)
    # with it, A takes its static quota (20/3, rounded to 7) in each group first
    assert results[True][0] == (7, 7)
    # ... so when B and C come, A is within its static quota everywhere: no reclaim
    # (without it, 7 are reclaimed from A in RG1, and A in turn reclaims 7 in RG2)
    assert (results[False][1], results[True][1]) == (14, 0)
    # same end either way; the 6.5/6.5 ties of B and C go to B, earlier in the plan
    assert results[False][2] == results[True][2] == [14, 14, 12]


# -- grace -----------------------------------------------------------------------


def test_grace_zero_means_the_next_cycle_and_reclaimed_slots_stay_until_deadline():
    s = Sim(make_plan({"/A": {"grace": 45}, "/B": {}})).req("a", "/A", 100).settle()
    s.req("b", "/B", 100).settle()
    assert s.holds("/A", "/B") == [18, 0]
    rec = s.reclaims()
    assert sum(r.slots for r in rec) == 9 and {r.deadline for r in rec} == {45.0}
    s.at(44.9)
    assert s.holds("/A", "/B") == [18, 0]
    s.at(45)
    assert s.holds("/A", "/B") == [9, 9]


def test_lend_to_named_consumers_only():
    plan = make_plan({"/A": {"owned": 6, "lend": True, "lend_to": ("/C",)}, "/B": {}, "/C": {}},
                     hosts=1)
    s = Sim(plan).req("b", "/B", 6).settle()
    assert s.holds("/B") == [0]
    s.req("c", "/C", 6).settle()
    assert s.holds("/C") == [6]
    assert s.line("/A").lent == 6


def test_a_reclaim_is_called_off_when_its_beneficiary_leaves():
    # docs/policies.md, section 12: A (grace 60) holds 18; B asks, 9 are marked with
    # deadline 60; at t=20 B's request ends: the 9 are called off, A keeps all 18
    s = Sim(make_plan({"/A": {"grace": 60}, "/B": {}})).req("a", "/A", 100).settle()
    s.req("b", "/B", 100).settle()
    assert sum(r.slots for r in s.reclaims()) == 9
    assert {r.deadline for r in s.reclaims()} == {60.0}
    s.at(20)
    s.e.release("b")
    s.settle()
    cancelled = [c for d in s.log for c in d.cancelled]
    assert sum(c.slots for c in cancelled) == 9
    assert s.e.state.reclaiming == {}
    s.at(100)
    assert s.holds("/A", "/B") == [18, 0]


def test_shortfall_is_held_below_the_guarantee_while_demand_is_unmet():
    # A owns 12 and lends them; B borrows all 12; A asks for 8 and B's grace is 30:
    # until the deadline A is 8 short of its guarantee, B none; then nobody is short
    plan = make_plan({"/A": {"owned": 12, "lend": True, "grace": 60}, "/B": {"grace": 30}}, hosts=2)
    s = Sim(plan).req("b", "/B", 12).settle()
    assert s.line("/A").shortfall == 0  # owns 12 but wants nothing
    s.req("a", "/A", 8).settle()
    assert (s.line("/A").shortfall, s.line("/B").shortfall) == (8, 0)
    s.at(30)
    assert (s.line("/A").shortfall, s.holds("/A", "/B")) == (0, [8, 4])
