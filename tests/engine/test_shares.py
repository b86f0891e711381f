"""The share arithmetic on its own: seed examples, and the rule that lets a cycle reuse
last cycle's division of a pool."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apportion.engine.shares import ShareTree, divide_pool


def tree_of(ratios: dict[str, int], prios: dict[str, int | None] | None = None) -> ShareTree:
    children: dict[str, list[str]] = {"/": []}
    for p in ratios:
        parent = p.rsplit("/", 1)[0] or "/"
        children.setdefault(parent, []).append(p)
    index = {p: i for i, p in enumerate(["/"] + list(ratios))}
    prio = {"/": None, **{p: None for p in ratios}, **(prios or {})}
    return ShareTree(children, {"/": 1, **ratios}, prio, index)


def test_seed_004_leaf_and_parent():
    t = tree_of({"/L1": 1, "/L1/a1": 1, "/L1/a2": 1, "/L2": 1, "/L2/a3": 1, "/L2/a4": 1})
    need = {"/L1/a2": 100, "/L2/a3": 100, "/L2/a4": 100}
    assert divide_pool(t, "/", 40, need, parent_mode=False, dynamic=True)[0] == {
        "/L1/a2": 15, "/L2/a3": 13, "/L2/a4": 12}
    assert divide_pool(t, "/", 40, need, parent_mode=True, dynamic=True)[0] == {
        "/L1/a2": 20, "/L2/a3": 10, "/L2/a4": 10}


def test_seed_003_one_two_three():
    t = tree_of({"/A": 1, "/B": 2, "/C": 3})
    assert divide_pool(t, "/", 18, {"/A": 100, "/B": 100}, False, True)[0] == {"/A": 6, "/B": 12}
    assert divide_pool(t, "/", 18, {"/A": 100, "/B": 100, "/C": 100}, False, False)[0] == {
        "/A": 3, "/B": 6, "/C": 9}


@st.composite
def pools(draw):
    ratios, prios = {}, {}
    for i in range(draw(st.integers(1, 3))):
        top = f"/T{i}"
        ratios[top] = draw(st.integers(0, 3))
        prios[top] = draw(st.sampled_from([None, 1, 2]))
        for j in range(draw(st.integers(0, 3))):
            ratios[f"{top}/c{j}"] = draw(st.integers(0, 3))
            prios[f"{top}/c{j}"] = draw(st.sampled_from([None, 1]))
    t = tree_of(ratios, prios)
    leaves = [p for p in ratios if not t.children.get(p)]
    need = {leaf: draw(st.integers(1, 40)) for leaf in leaves if draw(st.booleans())}
    return t, leaves, need, draw(st.integers(1, 60)), draw(st.booleans()), draw(st.booleans())


@given(pools(), st.data())
def test_needs_above_an_unsaturated_share_do_not_change_the_division(pool, data):
    t, leaves, need, size, parent_mode, dynamic = pool
    if not need:
        return
    got, exact = divide_pool(t, "/", size, need, parent_mode, dynamic)
    moved = dict(need)
    for leaf, n in need.items():
        share = exact.get(leaf, 0)
        if share < n and data.draw(st.booleans()):
            # any other need that still stands above the share
            moved[leaf] = data.draw(st.integers(int(share) + 1, 80))
    assert divide_pool(t, "/", size, moved, parent_mode, dynamic)[0] == got


@st.composite
def flat_divisions(draw):
    """A one-level tree (every child of / a leaf: ratios 0-4, a few priority bands),
    the needs of some of its leaves, a pool size, the enforcement mode."""
    n = draw(st.integers(1, 12))
    ratios = {f"/x{i}": draw(st.integers(0, 4)) for i in range(n)}
    prios = {p: draw(st.sampled_from([None, None, 1, 2])) for p in ratios}
    need = {p: draw(st.integers(0, 40)) for p in ratios if draw(st.booleans())}
    return ratios, prios, need, draw(st.integers(1, 120)), draw(st.booleans()), draw(st.booleans())


@given(flat_divisions())
def test_a_flat_division_in_whole_numbers_is_the_rationals_to_the_slot(case):
    ratios, prios, need, size, parent_mode, dynamic = case
    t = tree_of(ratios, prios)
    got, exact = divide_pool(t, "/", size, need, parent_mode, dynamic)
    want, want_exact = divide_pool(t, "/", size, need, parent_mode, dynamic, fast=False)
    assert got == want
    assert {k: v for k, v in exact.items() if v} == {k: v for k, v in want_exact.items() if v}


def test_a_flat_division_of_many_leaves_breaks_ties_by_plan_order():
    # 7 equal leaves share 100 slots: 14 each and 2 over, to the first two in the plan
    t = tree_of({f"/x{i}": 1 for i in range(7)})
    got, _ = divide_pool(t, "/", 100, {f"/x{i}": 50 for i in range(7)}, False, True)
    assert got == {"/x0": 15, "/x1": 15, **{f"/x{i}": 14 for i in range(2, 7)}}
