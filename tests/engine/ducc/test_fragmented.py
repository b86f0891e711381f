"""Fair share on fragmented space (seed 001): How Much counts the space incumbents
hold, and a fragmented layout holds fewer processes of an order than its quanta
suggest. The places that exist are shared fairly; they are not all given to the
first job in line while a newcomer of the same class waits with a count of 0."""

from __future__ import annotations

from apportion.engine.ducc.api import DuccState, Process

from tests.engine.ducc.sim import Sim, config, fair, job, machines, pool


def counted(d) -> dict[str, int]:
    return {j: a.counted for j, a in d.jobs.items()}


def held(d) -> dict[str, int]:
    return {j: a.held - a.pending_removal for j, a in d.jobs.items()}


def test_a_newcomer_gets_its_share_of_a_fragmented_pool():
    # quantum 15 GB; four 47 GB machines (order 3: 12 quanta); 28 GB processes (order 2).
    # alice's job holds one process on each machine, so each machine has 1 quantum free
    # and bob's process fits nowhere. Fair share counts the space alice holds: 12 quanta,
    # but only four order-2 processes fit (one a machine), so 2 each.
    cfg = config([pool("p", ("m1", "m2", "m3", "m4"), quantum=15)], [fair("normal")], share_quantum=15)
    procs = tuple(Process(i + 1, "a", f"m{i + 1}", 2, True, 0.0, inv) for i, inv in enumerate((5.0, 1.0, 9.0, 3.0)))
    state = DuccState(machines(47, 47, 47, 47), (job("a", "ann", memory=28),), procs, next_share_id=5)
    sim = Sim(cfg, state)
    sim.now = 40.0
    d = sim.step()
    assert counted(d) == {"a": 4} and not d.evictions and not d.new

    sim.add(job("b", "bob", memory=28, at=50))
    d = sim.step()
    assert counted(d) == {"a": 2, "b": 2}
    assert {j: a.deserved for j, a in d.jobs.items()} == {"a": 2, "b": 2}
    # alice sheds the two processes with the least investment (1 on m2, 3 on m4), nothing
    # more; their space is still occupied, so bob starts nothing in this cycle
    assert [(e.share_id, e.machine, e.reason) for e in d.evictions] == [(2, "m2", "over-count"),
                                                                        (4, "m4", "over-count")]
    assert not d.new
    assert d.jobs["a"].held == 4 and d.jobs["a"].pending_removal == 2
    assert d.jobs["b"].held == 0 and d.jobs["b"].state == "waiting"

    d = sim.step()  # the evictions are confirmed gone: bob takes the freed space
    assert counted(d) == {"a": 2, "b": 2} and not d.evictions
    assert sorted((n.job, n.machine, n.order) for n in d.new) == [("b", "m2", 2), ("b", "m4", 2)]
    assert held(d) == {"a": 2, "b": 2} and d.jobs["b"].state == "running" and d.needy == ()
    assert sim.used() == {"m1": 2, "m2": 2, "m3": 2, "m4": 2}

    d = sim.step()  # and it stays so
    assert counted(d) == {"a": 2, "b": 2} and not d.evictions and not d.new


def test_a_newcomer_at_its_initialization_cap_gets_what_it_can_use():
    # the same pool with the default initialization cap of 1: bob can use 1 process now;
    # alice keeps the other 3 places (not 4, not 5 of 12 quanta)
    cfg = config([pool("p", ("m1", "m2", "m3", "m4"), quantum=15)], [fair("normal", init_cap=1)],
                 share_quantum=15)
    procs = tuple(Process(i + 1, "a", f"m{i + 1}", 2, True, 0.0, float(i + 1)) for i in range(4))
    sim = Sim(cfg, DuccState(machines(47, 47, 47, 47), (job("a", "ann", memory=28), job("b", "bob", memory=28, at=1)),
                             procs, next_share_id=5))
    d = sim.step()
    assert counted(d) == {"a": 3, "b": 1} and d.jobs["b"].cap == 1
    assert [(e.share_id, e.reason) for e in d.evictions] == [(1, "over-count")]
    d = sim.step()
    assert [(n.job, n.machine) for n in d.new] == [("b", "m1")] and held(d) == {"a": 3, "b": 1}


def test_mixed_orders_the_scarce_places_of_one_order_are_shared_fairly():
    # 1 GB quantum. Four order-3 machines and four order-1 machines: 16 quanta, but only
    # four places for an order-2 process (one on each order-3 machine).
    # alice (order 2) holds all four; carol's order-1 job can use 2; bob's order-2 job arrives.
    # In quanta: carol 2, alice and bob 7 each (3 processes each, 6 > 4 places). The four
    # order-2 places go 2 : 2 (not 3 to the first job in line and 1 to bob), carol's two
    # processes take two 1-quantum holes, and the rest (4 single quanta) fits nobody.
    cfg = config([pool("p", tuple(f"m{i}" for i in range(1, 9)))], [fair("normal")])
    procs = tuple(Process(i + 1, "a", f"m{i + 1}", 2, True, 0.0, float(10 - i)) for i in range(4))
    jobs = (job("a", "alice", memory=2), job("c", "carol", work=2, at=1))
    sim = Sim(cfg, DuccState(machines(3, 3, 3, 3, 1, 1, 1, 1), jobs, procs, next_share_id=5))
    d = sim.step()
    assert counted(d) == {"a": 4, "c": 2} and not d.evictions
    # best fit: carol's processes go in the holes alice leaves, before a whole machine
    assert [(n.job, n.machine) for n in d.new] == [("c", "m1"), ("c", "m2")]

    sim.add(job("b", "bob", memory=2, at=2))
    d = sim.step()
    assert counted(d) == {"a": 2, "b": 2, "c": 2}
    assert {j: a.deserved for j, a in d.jobs.items()} == {"a": 2, "b": 2, "c": 2}
    # least investment: the processes on m4 (7) and m3 (8)
    assert [(e.share_id, e.machine, e.reason) for e in d.evictions] == [(4, "m4", "over-count"),
                                                                        (3, "m3", "over-count")]
    assert not any(n.job == "b" for n in d.new)

    d = sim.step()
    assert sorted((n.job, n.machine) for n in d.new) == [("b", "m3"), ("b", "m4")]
    assert held(d) == {"a": 2, "b": 2, "c": 2} and not d.evictions
    assert sim.used() == {"m1": 3, "m2": 3, "m3": 2, "m4": 2}
