"""Owned hosts (seed 000): who owns which host, on a new plan and under change.

Exact owners, host by host. The pure function (engine/ownership.py) first, then
through the engine (compiled `owned`, host down and back, apply_plan), then
hypothesis properties over sequences of plan changes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine import Engine, Host, HostState, Request
from apportion.engine.ownership import (
    COUNT,
    NAMES,
    PER_HOST,
    assign,
    deepest_parts,
    host_kind,
    moves_between,
    prepared,
    redistribute,
)

from .builders import Sim, make_plan


def owners(a, group: str = "RG") -> dict[str, dict[str, int]]:
    """consumer -> host -> slots, without the consumers that own nothing."""
    got = a.owners if hasattr(a, "owners") else a.host_ownership
    return {c: dict(parts) for c, parts in got.get(group, {}).items() if parts}


def hosts_of(a, consumer: str, group: str = "RG") -> list[str]:
    return list(owners(a, group).get(consumer, {}))


def load(**per_host: dict[str, int]) -> dict:
    """A workload for group RG: load(h1={"/A": 4}) -> {"RG": {"h1": {"/A": 4}}}."""
    return {"RG": per_host}


# -- a new plan: rank order ----------------------------------------------------------


def test_whole_hosts_are_assigned_in_rank_order():
    plan = make_plan({
        "/A": {"owned_hosts": 2, "rank": 2},
        "/B": {"owned_hosts": 2, "rank": 1},
        "/C": {"owned_hosts": 2, "rank": 3},
    }, hosts=5, slots=4)
    a = assign(plan)
    # B (rank 1) first, then A, then C, which gets the one host left
    assert owners(a) == {"/B": {"h1": 4, "h2": 4}, "/A": {"h3": 4, "h4": 4}, "/C": {"h5": 4}}
    assert a.short == {"RG": {"/C": 1}}
    # the engine's aggregate guarantee is the slots of the hosts assigned
    p = prepared(plan)
    assert {c.path: c.groups["RG"].owned for c in p.consumers} == {"/A": 8, "/B": 8, "/C": 4}
    assert p.host_ownership["RG"]["/C"] == {"h5": 4}


def test_unset_rank_comes_after_every_set_rank_and_ties_go_to_plan_order():
    plan = make_plan({"/X": {"owned_hosts": 1}, "/Y": {"owned_hosts": 1}, "/Z": {"owned_hosts": 1, "rank": 5}},
                     hosts=3, slots=2)
    assert owners(assign(plan)) == {"/Z": {"h1": 2}, "/X": {"h2": 2}, "/Y": {"h3": 2}}


def test_named_hosts_and_others_keep_off_them():
    plan = make_plan({
        "/A": {"owned_hosts": 2, "rank": 1},
        "/B": {"owned_hosts": ("h1", "h3"), "rank": 2},
    }, hosts=4, slots=4)
    # A, though better ranked, leaves the hosts B names while it has a choice
    assert owners(assign(plan)) == {"/A": {"h2": 4, "h4": 4}, "/B": {"h1": 4, "h3": 4}}


def test_overallocation_at_the_top_level_is_honoured_in_rank_order():
    plan = make_plan({"/A": {"owned_hosts": 3, "rank": 2}, "/B": {"owned_hosts": 2, "rank": 1}}, hosts=4, slots=4)
    a = assign(plan)
    assert owners(a) == {"/B": {"h1": 4, "h2": 4}, "/A": {"h3": 4, "h4": 4}}
    assert a.short == {"RG": {"/A": 1}}


# -- partial hosts -------------------------------------------------------------------


def test_owned_per_host_and_a_whole_host_owner_taking_what_is_left():
    plan = make_plan({
        "/P": {"owned_per_host": 3, "rank": 1},
        "/W": {"owned_hosts": 1, "rank": 2},
        "/V": {"owned_hosts": 1, "rank": 3},
    }, hosts=2, slots=8)
    a = assign(plan)
    # P owns 3 of each host; W wanted a whole host, none is left, so it takes the rest
    # of the first (seed 000: "it still takes the partial host if an alternative is not
    # available"), and V the rest of the second
    assert owners(a) == {"/P": {"h1": 3, "h2": 3}, "/W": {"h1": 5}, "/V": {"h2": 5}}
    p = prepared(plan)
    assert [c.groups["RG"].owned for c in p.consumers] == [6, 5, 5]
    # nobody owns a host whole
    e = Engine(plan)
    assert {path: line.groups["RG"].owned_hosts for path, line in e.report().consumers.items()} == {
        "/P": [], "/W": [], "/V": []}


@pytest.mark.parametrize(("partial", "expected"), [
    (False, {"/C": {"h1": 4, "h3": 4}, "/P": {"h2": 2}}),  # a whole host first
    (True, {"/C": {"h1": 4, "h2": 2}, "/P": {"h2": 2, "h3": 2}}),  # the first host with room
])
def test_partial_lets_a_part_of_a_host_count_like_a_whole_one(partial, expected):
    hl = [Host("h1", 4), Host("h2", 4), Host("h3", 4, state=HostState.DOWN)]
    before = assign(make_plan({"/C": {"owned_hosts": 1, "rank": 1}, "/P": {"owned_per_host": 2, "rank": 2}},
                              host_list=hl))
    assert owners(before) == {"/C": {"h1": 4}, "/P": {"h2": 2}}
    # h3 is back and C now wants two hosts: h3 whole, or the free half of h2
    after = make_plan({"/C": {"owned_hosts": 2, "rank": 1, "partial": partial},
                       "/P": {"owned_per_host": 2, "rank": 2}}, host_list=hl)
    assert owners(assign(after, before.owners, {}, down=())) == expected


# -- children and the parent's private pool -----------------------------------------


def test_children_own_out_of_their_parent_and_the_rest_is_its_private_pool():
    plan = make_plan({
        "/P": {"owned_hosts": 3, "rank": 1},
        "/P/a": {"owned_hosts": 1},
        "/P/b": {"owned_hosts": ("h3",)},
        "/P/c": {},
        "/Q": {},
        "/Q/d": {},
    }, hosts=5, slots=4)
    a = assign(plan)
    # P takes the host its child names first; a gets the first of P's others
    assert owners(a) == {"/P": {"h1": 4, "h2": 4, "h3": 4}, "/P/a": {"h1": 4}, "/P/b": {"h3": 4}}
    assert deepest_parts(a.owners["RG"]) == {"h1": {"/P/a": 4}, "h2": {"/P": 4}, "h3": {"/P/b": 4}}
    # h2 is P's private pool: only P's children draw from it. c and d share the public
    # 8 (h4, h5) by leaf enforcement (P's idle leaves' planned shares are spread again):
    # c = private 4 + 2.67, d = 5.33, rounded 7 and 5. d never gets a slot of h2.
    s = Sim(plan).req("c", "/P/c", 100).req("d", "/Q/d", 100).settle()
    assert s.holds("/P/c", "/Q/d") == [7, 5]
    assert s.line("/P").held == 7 and s.line("/P").owned == 4  # seen from P, its private pool is its own
    assert s.line("/P").owned_hosts == ["h1", "h2", "h3"]
    assert s.line("/P/a").owned_hosts == ["h1"] and s.line("/P/b").owned_hosts == ["h3"]


def test_a_child_owning_a_share_of_each_of_its_parents_hosts():
    plan = make_plan({"/P": {"owned_hosts": 2}, "/P/x": {"owned_per_host": 1}, "/P/y": {"owned_hosts": 1}},
                     hosts=3, slots=4)
    a = assign(plan)
    assert owners(a) == {"/P": {"h1": 4, "h2": 4}, "/P/x": {"h1": 1, "h2": 1}, "/P/y": {"h1": 3}}


def test_children_borrow_a_siblings_lent_host_before_a_cousin_does():
    # P owns h1 and h2, all of it owned by its child a, which lends. b (a's sibling,
    # rank 2) and c (a cousin, rank 1) ask in the same cycle: lending goes to the
    # parent's pool first (seed 000), so b borrows a's 8 although c ranks better.
    plan = make_plan({
        "/P": {"owned_hosts": 2}, "/P/a": {"owned_hosts": 2, "lend": True}, "/P/b": {"rank": 2},
        "/Q": {}, "/Q/c": {"rank": 1},
    }, hosts=2, slots=4)
    s = Sim(plan).req("c", "/Q/c", 8).req("b", "/P/b", 8).settle()
    assert s.holds("/P/b", "/Q/c") == [8, 0]
    assert s.line("/P/b").borrowed == 8


# -- a plan change: the four steps ------------------------------------------------------


BUSY = load(h1={"/A": 4}, h2={"/A": 1}, h3={"/A": 4}, h4={"/B": 4}, h5={"/B": 4})


def test_step_1_what_is_no_longer_owned_is_dropped_and_the_least_used_goes_first():
    plan = make_plan({"/A": {"owned_hosts": 3, "rank": 1}, "/B": {"owned_hosts": 2, "rank": 2}}, hosts=6, slots=4)
    before = assign(plan)
    assert owners(before) == {"/A": {"h1": 4, "h2": 4, "h3": 4}, "/B": {"h4": 4, "h5": 4}}
    # A now owns 2 hosts: it drops h2, where its own work is least (1 slot), not h3
    smaller = make_plan({"/A": {"owned_hosts": 2, "rank": 1}, "/B": {"owned_hosts": 2, "rank": 2}},
                        hosts=6, slots=4)
    after = assign(smaller, before.owners, BUSY)
    assert owners(after) == {"/A": {"h1": 4, "h3": 4}, "/B": {"h4": 4, "h5": 4}}
    assert moves_between(before.owners, after.owners) == [_move("h2", "/A", None, 4)]
    # named hosts: B names h5 and h6 now; h4 is no longer B's, h6 is added
    named = make_plan({"/A": {"owned_hosts": 3, "rank": 1}, "/B": {"owned_hosts": ("h5", "h6"), "rank": 2}},
                      hosts=6, slots=4)
    after = assign(named, before.owners, BUSY)
    assert owners(after) == {"/A": {"h1": 4, "h2": 4, "h3": 4}, "/B": {"h5": 4, "h6": 4}}


def test_step_1_idle_owned_hosts_stay_with_their_owner():
    plan = make_plan({"/A": {"owned_hosts": 2, "rank": 2}, "/B": {"owned_hosts": 1, "rank": 1}}, hosts=4, slots=4)
    before = assign(plan)
    assert owners(before) == {"/B": {"h1": 4}, "/A": {"h2": 4, "h3": 4}}
    # nothing runs anywhere; a new plan that changes nothing for them moves nothing
    after = assign(plan, before.owners, {})
    assert after.owners == before.owners


def _move(host, src, dst, slots, group="RG"):
    from apportion.engine.ownership import Move
    return Move(group, host, src, dst, slots)


def test_step_2_the_short_take_public_hosts_least_workload_first():
    plan = make_plan({"/A": {"owned_hosts": 1, "rank": 1}}, hosts=4, slots=4)
    before = assign(plan)
    assert owners(before) == {"/A": {"h1": 4}}
    # public hosts h2, h3, h4 run 3, 1 and 2 slots of others' work; A grows to 3 hosts
    work = load(h2={"/Z": 3}, h3={"/Z": 1}, h4={"/Z": 2})
    grown = make_plan({"/A": {"owned_hosts": 3, "rank": 1}}, hosts=4, slots=4)
    assert owners(assign(grown, before.owners, work)) == {"/A": {"h1": 4, "h3": 4, "h4": 4}}


def test_step_2_a_host_where_the_consumer_itself_runs_costs_nothing():
    plan = make_plan({"/A": {"owned_hosts": 1, "rank": 1}, "/Z": {}}, hosts=3, slots=4)
    before = assign(plan)
    # A already runs 4 slots on h3 (from the pool); h2 is idle: h3 is taken, nobody's
    # work is in the way there
    work = load(h3={"/A": 4})
    grown = make_plan({"/A": {"owned_hosts": 2, "rank": 1}, "/Z": {}}, hosts=3, slots=4)
    assert owners(assign(grown, before.owners, work)) == {"/A": {"h1": 4, "h3": 4}}


def test_step_2_then_hosts_of_the_worst_ranked_owner_least_workload_first():
    spec = {"/A": {"owned_hosts": 1, "rank": 1}, "/B": {"owned_hosts": 2, "rank": 2},
            "/C": {"owned_hosts": 2, "rank": 3}}
    plan = make_plan(spec, hosts=5, slots=4)
    before = assign(plan)
    assert owners(before) == {"/A": {"h1": 4}, "/B": {"h2": 4, "h3": 4}, "/C": {"h4": 4, "h5": 4}}
    work = load(h4={"/C": 4}, h5={"/C": 2})
    grown = make_plan({**spec, "/A": {"owned_hosts": 2, "rank": 1}}, hosts=5, slots=4)
    after = assign(grown, before.owners, work)
    # no public host is left: A takes from C (the worst rank), the host with less work;
    # B is not touched, and C is now short
    assert owners(after) == {"/A": {"h1": 4, "h5": 4}, "/B": {"h2": 4, "h3": 4}, "/C": {"h4": 4}}
    assert after.short == {"RG": {"/C": 1}}
    assert moves_between(before.owners, after.owners) == [_move("h5", "/C", "/A", 4)]


def test_step_2_a_part_of_a_host_taken_by_a_better_rank():
    spec = {"/P": {"owned_per_host": 1, "rank": 1}, "/W": {"owned_hosts": 1, "rank": 2}}
    plan = make_plan(spec, hosts=2, slots=4)
    # P owns 1 slot of each host; W, wanting a whole host, takes the rest of one
    assert owners(assign(plan)) == {"/P": {"h1": 1, "h2": 1}, "/W": {"h1": 3}}


def test_step_3_a_host_down_trims_the_over_owner_by_its_own_workload():
    spec = {"/A": {"owned_hosts": 2, "rank": 1}, "/B": {"owned_hosts": 2, "rank": 2}}
    plan = make_plan(spec, hosts=4, slots=4)
    before = assign(plan)
    assert owners(before) == {"/A": {"h1": 4, "h2": 4}, "/B": {"h3": 4, "h4": 4}}
    # h1 goes down: 3 hosts, A (rank 1) is entitled to 2 and B to 1. B gives back the
    # host its own work uses least (h4), whatever A would like; A takes it.
    work = load(h2={"/A": 4}, h3={"/B": 4}, h4={"/B": 1})
    after = assign(plan, before.owners, work, down={"h1"})
    assert owners(after) == {"/A": {"h2": 4, "h4": 4}, "/B": {"h3": 4}}
    assert after.trimmed == [("RG", "/B", "h4")]
    assert after.short == {"RG": {"/B": 1}}


def test_step_3_a_trimmed_host_nobody_better_takes_goes_back():
    # A names h1 only; h1 is down, so A is short of nothing it can have. B was
    # trimmed on paper, but its host is back with it: nobody better could use it.
    spec = {"/A": {"owned_hosts": ("h1", "h2"), "rank": 1}, "/B": {"owned_hosts": 2, "rank": 2}}
    plan = make_plan(spec, hosts=4, slots=4)
    before = assign(plan)
    assert owners(before) == {"/A": {"h1": 4, "h2": 4}, "/B": {"h3": 4, "h4": 4}}
    after = assign(plan, before.owners, {}, down={"h1"})
    assert owners(after) == {"/A": {"h2": 4}, "/B": {"h3": 4, "h4": 4}}
    assert after.trimmed == []


def test_step_3_free_owned_hosts_are_collected_and_redistributed_by_rank():
    spec = {"/A": {"owned_hosts": 1, "rank": 1}, "/B": {"owned_hosts": 1, "rank": 2}, "/Z": {}}
    plan = make_plan(spec, hosts=3, slots=4)
    before = assign(plan)
    assert owners(before) == {"/A": {"h1": 4}, "/B": {"h2": 4}}
    # A now owns 2 hosts. Z runs on h3, the only public host; B's h2 is idle.
    grown = make_plan({**spec, "/A": {"owned_hosts": 2, "rank": 1}}, hosts=3, slots=4)
    work = load(h3={"/Z": 4})
    # the plan change itself takes the public host (step 2: public first)
    assert owners(assign(grown, before.owners, work)) == {"/A": {"h1": 4, "h3": 4}, "/B": {"h2": 4}}
    # the periodic pass collects idle owned hosts: A (rank 1) gets idle h2, B the busy h3
    assert owners(redistribute(grown, before.owners, work)) == {"/A": {"h1": 4, "h2": 4}, "/B": {"h3": 4}}


def test_a_parent_losing_a_host_takes_it_from_its_children():
    spec = {"/P": {"owned_hosts": 2, "rank": 1}, "/P/a": {"owned_hosts": 1, "rank": 2},
            "/P/b": {"owned_hosts": 1, "rank": 1}}
    plan = make_plan(spec, hosts=2, slots=4)
    before = assign(plan)
    assert owners(before) == {"/P": {"h1": 4, "h2": 4}, "/P/b": {"h1": 4}, "/P/a": {"h2": 4}}
    # h1 is down: P owns h2 only; b (rank 1) lost h1 with it and takes h2 from a
    after = assign(plan, before.owners, {}, down={"h1"})
    assert owners(after) == {"/P": {"h2": 4}, "/P/b": {"h2": 4}}
    assert after.short == {"RG": {"/P": 1, "/P/a": 1}}
    # with ranks the other way round, a keeps h2 and b stays short
    spec = {**spec, "/P/a": {"owned_hosts": 1, "rank": 1}, "/P/b": {"owned_hosts": 1, "rank": 2}}
    plan = make_plan(spec, hosts=2, slots=4)
    after = assign(plan, assign(plan).owners, {}, down={"h1"})
    assert owners(after) == {"/P": {"h2": 4}, "/P/a": {"h1": 4}} or owners(after) == {"/P": {"h2": 4}, "/P/a": {"h2": 4}}


# -- through the engine ------------------------------------------------------------------


def _engine_plan(hosts: list[Host] | None = None, **changes):
    spec = {"/A": {"owned_hosts": 2, "rank": 1, "grace": 10}, "/B": {"owned_hosts": 2, "rank": 2, "grace": 10},
            "/Z": {"grace": 10}}
    for k, v in changes.items():
        spec["/" + k] = {**spec["/" + k], **v}
    return make_plan(spec, host_list=hosts or [Host(f"h{i}", 4) for i in range(1, 6)])


def test_engine_a_host_down_trims_and_the_owned_slots_follow():
    s = Sim(_engine_plan()).req("a", "/A", 8, order=4).req("b", "/B", 8, order=4).settle()
    e = s.e
    assert owners(e.plan) == {"/A": {"h1": 4, "h2": 4}, "/B": {"h3": 4, "h4": 4}}
    e.set_host_state("h1", HostState.DOWN)
    # A short of one host takes the public h5 (no work there): B keeps both of its own
    assert owners(e.plan) == {"/A": {"h2": 4, "h5": 4}, "/B": {"h3": 4, "h4": 4}}
    assert {c.path: c.groups["RG"].owned for c in e.plan.consumers} == {"/A": 8, "/B": 8, "/Z": 0}
    s.settle()
    assert s.holds("/A", "/B") == [8, 8]
    assert [x.host for d in s.log for x in d.lost] == ["h1"]
    # h2 goes down too: 3 hosts left; B (rank 2) is trimmed to 1: of its two hosts,
    # equally used by its own work, the first in the group's order goes to A
    e.set_host_state("h2", HostState.DOWN)
    assert owners(e.plan) == {"/A": {"h3": 4, "h5": 4}, "/B": {"h4": 4}}
    assert s.line("/A").owned_hosts == ["h3", "h5"]
    assert s.line("/B").owned_hosts == ["h4"]


def test_engine_a_group_growing_gives_the_short_their_hosts():
    hl = [Host(f"h{i}", 4) for i in range(1, 4)] + [Host("h4", 4, state=HostState.DOWN)]
    s = Sim(_engine_plan(hosts=hl)).req("b", "/B", 4).settle()
    assert owners(s.e.plan) == {"/A": {"h1": 4, "h2": 4}, "/B": {"h3": 4}}
    s.e.set_host_state("h4", HostState.OK)
    assert owners(s.e.plan) == {"/A": {"h1": 4, "h2": 4}, "/B": {"h3": 4, "h4": 4}}
    assert s.line("/B").owned_hosts == ["h3", "h4"]


def test_engine_apply_plan_moves_only_the_hosts_it_must():
    s = Sim(_engine_plan()).req("a", "/A", 8, order=4).req("b", "/B", 8, order=4).req("z", "/Z", 4).settle()
    before = s.e.plan.host_ownership
    assert owners(s.e.plan) == {"/A": {"h1": 4, "h2": 4}, "/B": {"h3": 4, "h4": 4}}
    # B shrinks to one host, A grows to three. B drops a host (both run 4 of its slots:
    # the later one, h4) to the pool; A, short, takes a pool host, least workload
    # first: h4 (B's 4 slots) and h5 (Z's 4) are equal, and a host just given up goes
    # first, so the change moves one host, straight from B to A
    removed = s.e.apply_plan(_engine_plan(A={"owned_hosts": 3}, B={"owned_hosts": 1}))
    assert removed == []
    after = s.e.plan.host_ownership
    assert owners(s.e.plan) == {"/A": {"h1": 4, "h2": 4, "h4": 4}, "/B": {"h3": 4}}
    assert moves_between(before, after) == [_move("h4", "/B", "/A", 4)]
    assert {c.path: c.groups["RG"].owned for c in s.e.plan.consumers} == {"/A": 12, "/B": 4, "/Z": 0}


def test_engine_report_lists_whole_hosts_owned():
    s = Sim(_engine_plan())
    rep = s.e.report()
    assert rep.consumers["/A"].groups["RG"].owned_hosts == ["h1", "h2"]
    assert rep.consumers["/Z"].groups["RG"].owned_hosts == []


def test_engine_without_host_ownership_is_unchanged():
    plan = make_plan({"/A": {"owned": 6}, "/B": {}})
    e = Engine(plan)
    assert e.plan is plan and plan.host_ownership is None
    e.set_host_state("h1", HostState.DOWN)
    assert e.plan is plan


# -- properties ------------------------------------------------------------------------------

HOSTS = [f"h{i}" for i in range(1, 7)]


@st.composite
def specs(draw):
    """A valid plan spec: top-level consumers owning hosts in some form, children within."""
    spec: dict[str, dict] = {}
    n_top = draw(st.integers(1, 3))
    for i in range(n_top):
        top = f"/T{i}"
        kind = draw(st.sampled_from([COUNT, COUNT, NAMES, PER_HOST, None]))
        s = {"rank": draw(st.one_of(st.none(), st.integers(1, 3)))}
        if kind == COUNT:
            s["owned_hosts"] = draw(st.integers(0, 4))
            s["partial"] = draw(st.booleans())
        elif kind == NAMES:
            s["owned_hosts"] = tuple(draw(st.lists(st.sampled_from(HOSTS), min_size=1, max_size=3, unique=True)))
        elif kind == PER_HOST:
            s["owned_per_host"] = draw(st.integers(0, 3))
        spec[top] = s
        if kind is None:
            continue
        for j in range(draw(st.integers(0, 2))):
            c: dict = {"rank": draw(st.one_of(st.none(), st.integers(1, 2)))}
            if kind == COUNT and s["owned_hosts"]:
                c["owned_hosts"] = draw(st.integers(0, s["owned_hosts"] // 2))
            elif kind == NAMES:
                c["owned_hosts"] = tuple(draw(st.lists(st.sampled_from(s["owned_hosts"]), max_size=1)))
            elif kind == PER_HOST and s["owned_per_host"]:
                c["owned_per_host"] = draw(st.integers(0, s["owned_per_host"] // 2))
            spec[f"{top}/c{j}"] = c
    return spec


def _plan(spec):
    return make_plan(spec, host_list=[Host(h, 4) for h in HOSTS])


def _check_consistent(plan, a, down):
    slots = {h.name: h.slots for h in plan.hosts}
    got = a.owners.get("RG", {})
    parents = {c.path: c.parent for c in plan.consumers}
    per_level: dict[tuple[str, str], int] = {}
    for c, parts in got.items():
        for h, n in parts.items():
            assert h not in down, (c, h)
            assert 0 < n <= slots[h]
            parent = parents[c]
            key = (parent, h)
            per_level[key] = per_level.get(key, 0) + n
            if parent != "/":
                # children's ownership is within the parent's
                assert got.get(parent, {}).get(h, 0) >= n, (c, h)
    for (parent, h), n in per_level.items():
        cap = slots[h] if parent == "/" else got[parent][h]
        assert n <= cap, (parent, h)  # a host's slots are never owned twice at one level


@settings(deadline=None)
@given(st.lists(specs(), min_size=2, max_size=4), st.data())
def test_property_plan_changes_keep_ownership_sound_and_move_only_what_they_must(seq, data):
    work = {"RG": {h: {"/W": data.draw(st.integers(0, 4), label=f"load {h}")} for h in HOSTS}}
    current = None
    for spec in seq:
        plan = _plan(spec)
        down = set(data.draw(st.lists(st.sampled_from(HOSTS), max_size=2, unique=True), label="down"))
        a = assign(plan, current, work, down)
        _check_consistent(plan, a, down)
        # the same inputs again: nothing moves (the assignment is a fixed point)
        assert assign(plan, a.owners, work, down).owners == a.owners
        if current is not None:
            _check_minimal(plan, current.get("RG", {}), a.owners.get("RG", {}), down, work)
        # the periodic pass keeps ownership sound too, and a second pass moves nothing
        r = redistribute(plan, a.owners, work, down)
        _check_consistent(plan, r, down)
        assert redistribute(plan, r.owners, work, down).owners == r.owners
        current = a.owners


def _check_minimal(plan, before, after, down, work):
    """No host changes owner unless the change requires it: a consumer loses a part it
    could still hold only to a better-ranked sibling or to bring its count down to its
    target; it gains hosts only when it is short."""
    cons = {c.path: c for c in plan.consumers}
    from apportion.engine.index import rank_key
    for c, parts in before.items():
        if c not in cons or host_kind(cons[c].groups["RG"]) is None:
            continue
        con = cons[c]
        s = con.groups["RG"]
        scope = None if con.parent == "/" else after.get(con.parent, {})
        now = after.get(c, {})
        valid = {h: n for h, n in parts.items()
                 if h not in down and (scope is None or h in scope)
                 and (host_kind(s) != NAMES or h in s.owned_hosts)}
        better = [k for k in after if k in cons and cons[k].parent == con.parent and k != c
                  and rank_key(cons[k].groups["RG"], cons[k].index) < rank_key(s, con.index)]
        lost_unexplained = 0
        for h, n in valid.items():
            if now.get(h, 0) >= n:
                continue
            if scope is not None and scope.get(h, 0) < n:
                continue  # the parent holds less of it now
            if host_kind(s) == PER_HOST and n > s.owned_per_host:
                continue  # its share per host went down
            if any(after.get(k, {}).get(h, 0) > before.get(k, {}).get(h, 0) for k in better):
                continue  # a better rank took it
            lost_unexplained += 1
        if host_kind(s) == COUNT:
            assert lost_unexplained <= max(0, len(valid) - s.owned_hosts), (c, valid, now)
            gained = [h for h in now if h not in parts]
            if gained:  # only when what it kept was short of its count
                assert len(now) - len(gained) < s.owned_hosts, (c, gained)
        else:
            assert lost_unexplained == 0, (c, valid, now)
