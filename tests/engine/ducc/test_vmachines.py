"""Seed 001's machine tables, and their invariants under random allocations."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apportion.engine.ducc.vmachines import OrderTables


def test_the_seed_example():
    # machines by order [0 2 0 1 4], virtual [0 1 2 0 0] -> shares by order [0 26 11 5 4]
    t = OrderTables(4)
    t.machines[:] = [0, 2, 0, 1, 4]
    t.virtual[:] = [0, 1, 2, 0, 0]
    assert t.shares == [0, 26, 11, 5, 4]


def test_one_order_5_machine_offers_each_order_once_or_more():
    t = OrderTables.of([(5, 5)])
    assert t.shares == [0, 5, 2, 1, 1, 1]


def test_allocation_splits_a_machine_into_a_virtual_one():
    t = OrderTables.of([(5, 5)])
    left = t.allocate(5, 5, 3)  # an order-3 process on an order-5 machine
    assert left == 2
    assert t.machines == [0, 0, 0, 0, 0, 0] and t.virtual == [0, 0, 1, 0, 0, 0]
    assert t.shares == [0, 2, 1, 0, 0, 0]
    t.release(5, 2, 3)
    assert t.machines == [0, 0, 0, 0, 0, 1] and t.virtual == [0] * 6


def test_the_simulated_cluster_of_the_ducc_system_tests():
    # 52.simulated.nodes: 4 generators of 7 x 31, 5 x 47 and 1 x 79 GB (52 nodes),
    # "and this one", sys534 with 31 GB: 53 nodes. At a 15 GB quantum the orders
    # are 2, 3 and 5: the 52 give the 136 shares the DUCC tests quote, all 53 give 138.
    generated = [31 // 15] * 28 + [47 // 15] * 20 + [79 // 15] * 4
    t = OrderTables.of((o, o) for o in generated)
    assert t.machines[2:6] == [28, 20, 0, 4] and t.shares[1] == 136
    t.add_machine(31 // 15, 31 // 15)
    assert t.machines[2:6] == [29, 20, 0, 4] and t.shares[1] == 138


@st.composite
def histories(draw):
    orders = draw(st.lists(st.integers(1, 6), min_size=1, max_size=8))
    steps = draw(st.lists(st.tuples(st.integers(0, 7), st.integers(1, 6), st.booleans()), max_size=30))
    return orders, steps


@given(histories())
def test_tables_match_a_plain_count_of_free_space(h):
    orders, steps = h
    t = OrderTables.of(((o, o) for o in orders), max_order=6)
    free = list(orders)
    held: list[list[int]] = [[] for _ in orders]
    for i, size, give in steps:
        m = i % len(orders)
        if give and held[m]:
            size = held[m].pop()
            t.release(orders[m], free[m], size)
            free[m] += size
        elif size <= free[m]:
            t.allocate(orders[m], free[m], size)
            free[m] -= size
            held[m].append(size)
        # the tables always say what a direct count says
        for o in range(1, 7):
            assert t.machines[o] == sum(1 for k, f in zip(orders, free) if k == o and f == o)
            assert t.virtual[o] == sum(1 for k, f in zip(orders, free) if f == o and k != o)
            assert t.shares[o] == sum(f // o for f in free)
