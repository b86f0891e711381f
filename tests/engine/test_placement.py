"""Placement onto hosts: policies, requirements, closed and down hosts, min and order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apportion.engine import AllocationPolicy, Host, HostState, Request
from apportion.engine.placement import (GroupIndex, HostLedger, change_free, change_state, choose_hosts, fits,
                                        set_exclusive)

from .builders import Sim, make_plan


def _hosts(s: Sim, rid: str) -> dict[str, int]:
    return s.e.report().requests[rid]


def test_stacked_fills_hosts_in_group_order():
    s = Sim(make_plan({"/A": {}}, hosts=3, slots=4)).req("a", "/A", 6).settle()
    assert _hosts(s, "a") == {"h1": 4, "h2": 2}


def test_balanced_spreads_to_the_most_free_host():
    plan = make_plan({"/A": {}}, hosts=3, slots=4, alloc={"RG": AllocationPolicy.BALANCED})
    s = Sim(plan).req("a", "/A", 3, order=1).settle()
    # balanced places each instance on the emptiest host at that moment
    assert _hosts(s, "a") == {"h1": 1, "h2": 1, "h3": 1}
    s2 = Sim(plan)
    for i in range(3):
        s2.req(f"r{i}", "/A", 1)
    s2.settle()
    assert sorted(h for r in ("r0", "r1", "r2") for h in _hosts(s2, r)) == ["h1", "h2", "h3"]


def test_exclusive_policy_gives_a_host_to_one_consumer():
    plan = make_plan({"/A": {}, "/B": {}}, hosts=2, slots=4, alloc={"RG": AllocationPolicy.EXCLUSIVE})
    s = Sim(plan).req("a", "/A", 1).req("b", "/B", 1).settle()
    assert set(_hosts(s, "a")) != set(_hosts(s, "b"))


def test_exclusive_request_keeps_its_hosts_to_itself():
    s = Sim(make_plan({"/A": {}, "/B": {}}, hosts=2, slots=4))
    s.req("x", "/A", 2, exclusive=True).settle()
    s.req("y", "/B", 8).settle()
    assert _hosts(s, "x") == {"h1": 2} and _hosts(s, "y") == {"h2": 4}


def test_requirement_limits_hosts():
    hosts = [Host("h1", 4, attributes={"type": "win"}), Host("h2", 4, attributes={"type": "linux"})]
    s = Sim(make_plan({"/A": {}}, host_list=hosts))
    s.req("a", "/A", 8, requirement=lambda h: h.attributes.get("type") == "linux").settle()
    assert _hosts(s, "a") == {"h2": 4}


def test_order_places_whole_instances_on_one_host():
    hosts = [Host("h1", 3), Host("h2", 3), Host("h3", 4)]
    s = Sim(make_plan({"/A": {}}, host_list=hosts)).req("a", "/A", 8, order=2).settle()
    assert _hosts(s, "a") == {"h1": 2, "h2": 2, "h3": 4}


def test_min_is_all_or_nothing():
    s = Sim(make_plan({"/A": {}, "/B": {}}, hosts=2, slots=4)).req("b", "/B", 6).settle()
    s.req("a", "/A", 8, min=4).settle()
    # A deserves 4: the 2 idle slots are not its min, so it takes nothing until the
    # 2 reclaimed from B (grace 0) free up; then it takes all 4 at once
    first = [g for d in s.log for g in d.grants if g.request == "a"]
    assert {g.slots for g in first} and sum(g.slots for g in first) == 4
    assert s.holds("/A", "/B") == [4, 4]


def test_min_that_cannot_be_met_takes_nothing():
    s = Sim(make_plan({"/A": {}, "/B": {}}, hosts=2, slots=4)).req("b", "/B", 6).settle()
    s.req("a", "/A", 10, min=9).settle()
    # A deserves 4 and could start only with 9: nothing is reclaimed from B for it
    # (slots freed for a request that still cannot start would be wasted)
    assert s.holds("/A", "/B") == [0, 6]
    assert [x for d in s.log for x in d.reclaims] == []
    assert [x for d in s.log for x in d.grants if x.request == "a"] == []


def test_closed_host_keeps_its_work_and_takes_nothing_new():
    s = Sim(make_plan({"/A": {}}, hosts=2, slots=4)).req("a", "/A", 2).settle()
    s.e.set_host_state("h1", HostState.CLOSED)
    s.e.change("a", max=6)
    s.settle()
    assert _hosts(s, "a") == {"h1": 2, "h2": 4}


def test_host_down_loses_its_allocations_and_reports_them():
    s = Sim(make_plan({"/A": {}}, hosts=2, slots=4)).req("a", "/A", 8).settle()
    s.e.set_host_state("h1", HostState.DOWN)
    d = s.e.cycle(0)
    assert [(x.request, x.host, x.slots) for x in d.lost] == [("a", "h1", 4)]
    s.settle()
    assert _hosts(s, "a") == {"h2": 4}
    s.e.set_host_state("h1", HostState.OK)
    s.settle()
    assert _hosts(s, "a") == {"h1": 4, "h2": 4}


def test_overlapping_groups_never_give_a_slot_twice():
    hosts = [Host("h1", 4), Host("h2", 4)]
    plan = make_plan({"/A": {"only": ["G1"]}, "/B": {"only": ["G2"]}}, host_list=hosts,
                     groups={"G1": ["h1", "h2"], "G2": ["h2"]})
    s = Sim(plan).req("a", "/A", 8).req("b", "/B", 8).settle()
    used = {}
    for a in s.e.state.allocs.values():
        used[a.host] = used.get(a.host, 0) + a.slots
    assert all(used[h.name] <= h.slots for h in hosts)


def test_request_order_sorts_candidate_hosts():
    from apportion.plan import parse_requirement

    hosts = [Host("h1", 4, memory=16), Host("h2", 4, memory=64), Host("h3", 4, memory=32)]
    s = Sim(make_plan({"/A": {}}, host_list=hosts))
    req = parse_requirement("select(memory >= 16) order(-memory)")
    s.req("a", "/A", 6, requirement=req).settle()
    assert _hosts(s, "a") == {"h2": 4, "h3": 2}


def test_reclaim_for_a_multi_slot_instance_frees_one_host():
    # B holds both hosts in 1-slot pieces, granted alternately; A (ratio 1) asks for
    # one 6-slot instance: reclaiming 3 + 3 would be useless, so all 6 come off one host
    plan = make_plan({"/A": {}, "/B": {}}, hosts=2, slots=6, alloc={"RG": AllocationPolicy.BALANCED})
    s = Sim(plan)
    for i in range(12):
        s.req(f"b{i}", "/B", 1)
    s.settle()
    assert s.holds("/B") == [12]
    s.req("a", "/A", 6, order=6).settle()
    marked = {}
    for r in s.reclaims():
        marked[r.host] = marked.get(r.host, 0) + r.slots
    assert sorted(marked.values()) == [6]
    assert s.holds("/A", "/B") == [6, 6]
    assert len(_hosts(s, "a")) == 1


def test_best_fit_packs_the_smallest_host_that_takes_it():
    hosts = [Host("big", 8), Host("mid", 4), Host("small", 2)]
    plan = make_plan({"/A": {}}, host_list=hosts, alloc={"RG": AllocationPolicy.BEST_FIT})
    s = Sim(plan).req("r1", "/A", 2).req("r2", "/A", 3).req("r3", "/A", 6).settle()
    assert _hosts(s, "r1") == {"small": 2}  # the smallest space that fits
    assert _hosts(s, "r2") == {"mid": 3}
    assert _hosts(s, "r3") == {"big": 6}


@given(policy=st.sampled_from(list(AllocationPolicy)),
       moves=st.lists(st.tuples(st.integers(0, 5), st.integers(-4, 4), st.sampled_from(
           [None, None, None, HostState.CLOSED, HostState.OK]), st.integers(0, 6)), max_size=60))
def test_group_index_lists_open_hosts_in_policy_order(policy, moves):
    """The lazy heap behind ``candidates`` yields exactly the open hosts, in the
    policy's order, however free slots and states moved and however far an earlier
    iteration went before it was dropped."""
    hosts = [HostLedger(Host(f"h{i}", 4), i) for i in range(6)]
    g = GroupIndex("RG", policy, hosts)
    # a second group over some of the same hosts, in another order: each index keeps
    # a host at its own place
    other = GroupIndex("RG2", AllocationPolicy.STACKED, hosts[4:1:-1])
    for i, delta, state, look in moves:
        h = hosts[i]
        delta = max(-h.free, min(delta, h.host.slots - h.free))
        change_free(h, delta)
        if state is not None:
            change_state(h, state)
        it = g.candidates()
        for _ in zip(range(look), it):
            pass
        del it  # dropped part way: what it met goes back
        open_ = [h for h in hosts if h.free > 0 and h.takes_work]
        if policy is AllocationPolicy.BALANCED:
            open_.sort(key=lambda h: (-h.free, h.position))
        elif policy is AllocationPolicy.BEST_FIT:
            open_.sort(key=lambda h: (h.free, h.position))
        assert list(g.candidates()) == [h.host.name for h in open_]
        assert list(other.candidates()) == [h.host.name for h in hosts[4:1:-1] if h.free > 0 and h.takes_work]
        assert other.open_free == sum(h.free for h in hosts[2:5] if h.free > 0 and h.takes_work)
    assert len(g._heap) <= 2 * len(hosts) + 64


@given(frees=st.lists(st.integers(0, 8), min_size=1, max_size=12),
       held_by=st.lists(st.sampled_from([None, None, "r", "x"]), min_size=12, max_size=12),
       closed=st.sets(st.integers(0, 11)), order=st.integers(1, 3), instances=st.integers(1, 30),
       wide=st.booleans(), exclusive=st.booleans())
def test_stacked_choice_fills_the_open_hosts_in_order(frees, held_by, closed, order, instances, wide, exclusive):
    """``choose_hosts`` in a stacked group (read straight off the index) takes, host by
    host in the group's order, as many whole instances as each open host may take
    (``fits``), until it has them all; so does its bulk read for wide requests
    (``wide``: every request counts as wide, ``placement._WIDE``), which only a group
    where no host is held exclusively takes (``exclusive``: some may be)."""
    import pytest

    from apportion.engine import placement

    hosts = {f"h{i}": HostLedger(Host(f"h{i}", 8), i) for i in range(len(frees))}
    ledgers = list(hosts.values())
    g = GroupIndex("RG", AllocationPolicy.STACKED, ledgers)
    for h, free, owner in zip(ledgers, frees, held_by):
        change_free(h, free - h.free)
        set_exclusive(h, owner if exclusive else None)
        if h.position in closed:
            change_state(h, HostState.CLOSED)
    req = Request("r", "/A", max=instances * order, order=order)
    want, left = [], instances
    for h in ledgers:
        n = min(fits(h, req, "/A", g), left)
        if n > 0:
            want.append((h.host.name, n * order))
            left -= n
        if not left:
            break
    with pytest.MonkeyPatch.context() as mp:
        if wide:
            mp.setattr(placement, "_WIDE", 0)
        assert choose_hosts(hosts, g, req, "/A", instances) == want
    assert g.exclusive_on == sum(1 for h in ledgers if h.exclusive_for is not None)
