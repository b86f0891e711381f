"""The float water-fill of large pools against the rationals: where it answers at all,
it must give exactly the whole slots the exact division gives."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apportion.engine import fastshares
from apportion.engine.shares import ShareTree, _planned_memo, divide_pool
from tests.engine.test_shares import tree_of


@pytest.fixture(autouse=True)
def every_size(monkeypatch):
    """The fast path is taken for any number of leaves here, not only for large pools."""
    monkeypatch.setattr(fastshares, "MIN_LEAVES", 1)


def both(t: ShareTree, size: int, need: dict[str, int], parent_mode: bool):
    fast = divide_pool(t, "/", size, need, parent_mode, True)
    exact = divide_pool(t, "/", size, need, parent_mode, True, fast=False)
    return fast, exact


def test_seed_004_whole_numbers_by_coincidence_go_to_the_rationals():
    # a2 gets 10 + 5 (leaf mode) or all of /L1's 20 (parent mode): whole numbers the
    # floats cannot tell from a near miss, so the fast path declines and the exact
    # division answers, with the seed's figures
    t = tree_of({"/L1": 1, "/L1/a1": 1, "/L1/a2": 1, "/L2": 1, "/L2/a3": 1, "/L2/a4": 1})
    need = {"/L1/a2": 100, "/L2/a3": 100, "/L2/a4": 100}
    planned = {"/L1/a1": 10, "/L1/a2": 10, "/L2/a3": 10, "/L2/a4": 10}
    for parent_mode, want in ((False, {"/L1/a2": 15, "/L2/a3": 13, "/L2/a4": 12}),
                              (True, {"/L1/a2": 20, "/L2/a3": 10, "/L2/a4": 10})):
        assert fastshares.divide(t, "/", 40, need, parent_mode, {} if parent_mode else planned) is None
        assert divide_pool(t, "/", 40, need, parent_mode, True)[0] == want


def test_twins_at_the_cut_go_by_plan_order():
    # 3 slots, two equal siblings wanting 5 each: 1.5 and 1.5, the spare slot to the first
    t = tree_of({"/A": 1, "/B": 1, "/C": 2})
    need = {"/A": 5, "/B": 5}
    fast, exact = both(t, 3, need, True)
    assert fast[0] == {"/A": 2, "/B": 1} and fast[1].get("/A") == fast[1].get("/B") == 1.5
    assert fast[0] == exact[0]


def test_whole_shares_by_construction_are_not_taken_for_float_noise():
    # 1:2:3 of 18 is 3, 6, 9 exactly; /A is filled to its need of 2, the rest spread
    t = tree_of({"/A": 1, "/B": 2, "/C": 3})
    fast, exact = both(t, 18, {"/A": 2, "/B": 100, "/C": 100}, False)
    assert fast[0] == exact[0] == {"/A": 2, "/B": 6, "/C": 10}


def test_a_tie_between_cousins_made_equal_by_construction_is_kept():
    # /X/a and /Y/b are each the only taker below equal siblings: 1.5 slots each by
    # construction, so plan order breaks the tie without the rationals
    t = tree_of({"/X": 1, "/X/a": 1, "/Y": 1, "/Y/b": 1})
    got = fastshares.divide(t, "/", 3, {"/X/a": 5, "/Y/b": 5}, True, {})
    assert got is not None and got[0] == {"/X/a": 2, "/Y/b": 1}
    assert got[0] == divide_pool(t, "/", 3, {"/X/a": 5, "/Y/b": 5}, True, True, fast=False)[0]


def test_a_tie_no_rule_of_the_fill_explains_is_settled_in_rationals():
    # a = 9 * 2/3 * 1/4 and b = 9 * 1/3 * 1/2: equal shares that no rule of the fill
    # makes equal, all four at the rounding cut: the close leaves' shares are worked
    # out exactly along their paths, and plan order breaks the exact tie
    t = tree_of({"/X": 2, "/X/a": 1, "/X/c": 3, "/Y": 1, "/Y/b": 1, "/Y/d": 1})
    need = {"/X/a": 100, "/X/c": 100, "/Y/b": 100, "/Y/d": 100}
    got = fastshares.divide(t, "/", 9, need, True, {})
    assert got is not None and got[0] == {"/X/a": 2, "/X/c": 5, "/Y/b": 1, "/Y/d": 1}
    assert got[0] == divide_pool(t, "/", 9, need, True, True, fast=False)[0]


@st.composite
def big_pools(draw, ratio=st.integers(0, 4), need=st.integers(1, 60)):
    """Three-level trees of up to 60 leaves, ratios 0-4, a few priority bands."""
    ratios: dict[str, int] = {}
    prios: dict[str, int | None] = {}
    for i in range(draw(st.integers(1, 4))):
        top = f"/T{i}"
        ratios[top] = draw(ratio)
        prios[top] = draw(st.sampled_from([None, None, 1, 2]))
        for j in range(draw(st.integers(0, 4))):
            mid = f"{top}/m{j}"
            ratios[mid] = draw(ratio)
            prios[mid] = draw(st.sampled_from([None, None, None, 1]))
            for k in range(draw(st.integers(0, 5))):
                ratios[f"{mid}/l{k}"] = draw(ratio)
    t = tree_of(ratios, prios)
    leaves = [p for p in ratios if not t.children.get(p)]
    needs = {leaf: draw(need) for leaf in leaves if draw(st.integers(0, 3))}
    return t, needs, draw(st.integers(1, 400)), draw(st.booleans())


@given(big_pools())
def test_floats_round_exactly_as_the_rationals(pool):
    t, need, size, parent_mode = pool
    fast, exact = both(t, size, need, parent_mode)
    assert fast[0] == exact[0]
    assert sum(fast[0].values()) == sum(exact[0].values())
    for leaf, share in exact[1].items():
        assert abs(float(fast[1][leaf]) - float(share)) <= 1e-9 * size


@given(big_pools(ratio=st.sampled_from([1, 1, 2]), need=st.integers(40, 60)))
def test_ties_at_the_cut_are_settled_as_the_rationals_settle_them(pool):
    # equal ratios and needs above every share: many leaves share a fractional part
    t, need, size, parent_mode = pool
    fast, exact = both(t, size, need, parent_mode)
    assert fast[0] == exact[0]


def test_the_fast_path_answers_for_most_large_pools():
    """Not a vacuous check: on a realistic tree it does the work most of the time."""
    import random

    rng = random.Random(7)
    ratios = {}
    for i in range(5):
        ratios[f"/T{i}"] = rng.randint(1, 4)
        for j in range(5):
            ratios[f"/T{i}/m{j}"] = rng.randint(1, 4)
            for k in range(5):
                ratios[f"/T{i}/m{j}/l{k}"] = rng.randint(1, 4)
    t = tree_of(ratios)
    leaves = [p for p in ratios if p.count("/") == 3]
    answered = 0
    for _ in range(40):
        need = {leaf: rng.randint(1, 80) for leaf in leaves if rng.random() < 0.7}
        size = rng.randint(500, 3000)
        exact = divide_pool(t, "/", size, need, False, True, fast=False)
        got = fastshares.divide(t, "/", size, need, False, _planned_memo(t, "/", size))
        if got is not None:
            answered += 1
            assert got[0] == exact[0]
    assert answered >= 30
