"""Requests with resource vectors: Dominant Resource Fairness across kinds, placement where
every dimension fits, per-kind ownership with reclaim, lending and limits per kind."""

from __future__ import annotations

import pytest

from apportion.engine import Consumer, Engine, GroupSettings, Host, HostState, Plan, Policy, Request, ResourceGroup
from apportion.engine.drf import gpu_shape


def kinds(**amounts: float) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, float(v)) for k, v in amounts.items()))


def plan_of(hosts, consumers: dict[str, GroupSettings], packing: str = "first", weights=(), slots=None) -> Plan:
    hs = tuple(Host(n, slots if slots is not None else int(dict(r).get("cores", 1)), resources=r)
               for n, r in hosts)
    return Plan(hosts=hs, groups=(ResourceGroup("g", tuple(h.name for h in hs), packing=packing),),
                consumers=tuple(Consumer(p, "/", (), i, {"g": gs}) for i, (p, gs) in enumerate(consumers.items())),
                policy=Policy(weights=weights))


def held(e: Engine, consumer: str) -> int:
    return sum(kr.held for kr in e.kinds.requests.values() if kr.spec.consumer == consumer)


def test_the_papers_example() -> None:
    """<9 CPU, 18 GB>; A's tasks <1, 4>, B's <3, 1>: A gets 3 tasks, B 2 (Ghodsi et al.)."""
    e = Engine(plan_of([("m", kinds(cores=9, memory=18))], {"/A": GroupSettings(), "/B": GroupSettings()}))
    e.submit(Request("a", "/A", max=100, resources=kinds(cores=1, memory=4)))
    e.submit(Request("b", "/B", max=100, resources=kinds(cores=3, memory=1)))
    d = e.cycle(0)
    assert (held(e, "/A"), held(e, "/B")) == (3, 2)
    assert sum(g.slots for g in d.grants) == 5
    rep = e.kinds.report(e.state)["g"]["consumers"]
    assert rep["/A"]["dominant_share"] == pytest.approx(2 / 3) and rep["/B"]["dominant_share"] == pytest.approx(2 / 3)
    assert rep["/A"]["used"] == {"cores": 3.0, "memory": 12.0}


def test_weights_count_a_kind_more() -> None:
    """With GPUs weighing 4, a GPU user's share grows four times as fast."""
    hosts = [("m", kinds(cores=16, gpus=4))]
    both = {"/A": GroupSettings(), "/B": GroupSettings()}
    plain = Engine(plan_of(hosts, both))
    weighed = Engine(plan_of(hosts, both, weights=kinds(gpus=4)))
    for e in (plain, weighed):
        e.submit(Request("a", "/A", max=100, resources=kinds(cores=1, gpus=1)))
        e.submit(Request("b", "/B", max=100, resources=kinds(cores=1)))
        e.cycle(0)
    assert held(plain, "/A") == 4  # GPUs run out: shares 1 and ~0.75
    assert held(weighed, "/A") < held(plain, "/A")
    assert held(weighed, "/B") > held(plain, "/B")


def test_every_dimension_fits_on_one_host() -> None:
    """Two hosts of 4 cores: an instance of 3 slots of 2 cores fits on neither."""
    e = Engine(plan_of([("h1", kinds(cores=4, memory=8)), ("h2", kinds(cores=4, memory=8))], {"/A": GroupSettings()}))
    e.submit(Request("big", "/A", max=3, order=3, resources=kinds(cores=2)))
    e.submit(Request("mem", "/A", max=2, resources=kinds(cores=1, memory=8)))
    d = e.cycle(0)
    assert sorted((g.request, g.host, g.slots) for g in d.grants) == [("mem", "h1", 1), ("mem", "h2", 1)]


def test_fractions_of_a_gpu_share_a_device_only_where_it_has_room() -> None:
    e = Engine(plan_of([("g1", kinds(cores=8, gpus=2))], {"/A": GroupSettings()}))
    e.submit(Request("half", "/A", max=4, resources=kinds(cores=1, gpus=0.5)))
    e.cycle(0)
    assert held(e, "/A") == 4 and e.kinds.gpu_free["g1"] == [0, 0]
    e2 = Engine(plan_of([("g1", kinds(cores=8, gpus=2))], {"/A": GroupSettings()}))
    e2.submit(Request("sixty", "/A", max=4, resources=kinds(cores=1, gpus=0.6)))
    e2.cycle(0)
    assert held(e2, "/A") == 2 and e2.kinds.gpu_free["g1"] == [400, 400]
    assert gpu_shape(0.25) == (1, 250) and gpu_shape(2) == (2, 1000)
    with pytest.raises(ValueError, match="whole or a fraction"):
        gpu_shape(1.5)


def test_slot_work_and_vector_work_share_a_host() -> None:
    """A host of 8 slots and 8 cores: 4 plain slots take half of it, vector work the rest,
    and what vector work holds is off the slot books (the slot cycle does not hand it out)."""
    e = Engine(plan_of([("h", kinds(cores=8, memory=16))], {"/A": GroupSettings(), "/B": GroupSettings()}))
    e.submit(Request("slots", "/A", max=4))
    e.cycle(0)
    e.submit(Request("vec", "/B", max=10, resources=kinds(cores=1, memory=1)))
    e.cycle(1)
    assert held(e, "/B") == 4
    e.submit(Request("more", "/A", max=4))
    d = e.cycle(2)
    assert not d.grants and e.state.hosts["h"].free == 0
    e.release("vec")
    d = e.cycle(3)
    assert sum(g.slots for g in d.grants if g.request == "more") == 4


def test_per_kind_ownership_is_reclaimed_and_lending_is_per_kind() -> None:
    hosts = [("g1", kinds(cores=32, gpus=8)), ("g2", kinds(cores=32, gpus=8))]
    owner = GroupSettings(owned_kinds=kinds(gpus=8, cores=8), lend=True, lend_kinds=("gpus",))
    other = GroupSettings(grace=5.0)
    e = Engine(plan_of(hosts, {"/O": owner, "/B": other}))
    e.submit(Request("b", "/B", max=100, resources=kinds(cores=2, gpus=1)))
    e.cycle(0)
    # the owner's 8 GPUs are lent (it lends GPUs), its 8 cores are not: /B gets 16 GPUs
    assert held(e, "/B") == 16
    e.submit(Request("o", "/O", max=8, resources=kinds(cores=1, gpus=1)))
    d = e.cycle(1)
    assert not d.grants
    assert sum(r.slots for r in d.reclaims) == 8 and {r.beneficiary for r in d.reclaims} == {"/O"}
    assert {r.deadline for r in d.reclaims} == {6.0}
    assert not e.cycle(2).reclaims  # nothing reclaimed twice
    d = e.cycle(6)
    assert sum(r.slots for r in d.removals) == 8
    assert sum(g.slots for g in d.grants if g.consumer == "/O") == 8
    assert all(g.source == "own" for g in d.grants if g.consumer == "/O")
    assert held(e, "/B") == 8


def test_kinds_not_lent_stay_with_their_owner() -> None:
    hosts = [("g1", kinds(cores=8, gpus=8))]
    e = Engine(plan_of(hosts, {"/O": GroupSettings(owned_kinds=kinds(gpus=6)), "/B": GroupSettings()}))
    e.submit(Request("b", "/B", max=100, resources=kinds(cores=1, gpus=1)))
    e.cycle(0)
    assert held(e, "/B") == 2  # 6 GPUs kept for the owner, who does not lend
    lends = Engine(plan_of(hosts, {"/O": GroupSettings(owned_kinds=kinds(gpus=6), lend=True), "/B": GroupSettings()}))
    lends.submit(Request("b", "/B", max=100, resources=kinds(cores=1, gpus=1)))
    lends.cycle(0)
    assert held(lends, "/B") == 8


def test_a_reclaim_is_called_off_when_the_owner_no_longer_wants() -> None:
    hosts = [("g1", kinds(cores=8, gpus=4))]
    e = Engine(plan_of(hosts, {"/O": GroupSettings(owned_kinds=kinds(gpus=4), lend=True), "/B": GroupSettings(grace=10)}))
    e.submit(Request("b", "/B", max=4, resources=kinds(gpus=1)))
    e.cycle(0)
    e.submit(Request("o", "/O", max=2, resources=kinds(gpus=1)))
    assert sum(r.slots for r in e.cycle(1).reclaims) == 2
    e.release("o")
    d = e.cycle(2)
    assert sum(r.slots for r in d.cancelled) == 2
    assert not e.cycle(20).removals and held(e, "/B") == 4


def test_per_kind_max() -> None:
    e = Engine(plan_of([("h", kinds(cores=16, memory=64))], {"/A": GroupSettings(max_kinds=kinds(memory=10))}))
    e.submit(Request("a", "/A", max=100, resources=kinds(cores=1, memory=4)))
    e.cycle(0)
    assert held(e, "/A") == 2


def test_min_is_all_or_nothing_and_release_frees() -> None:
    e = Engine(plan_of([("h", kinds(cores=4))], {"/A": GroupSettings()}))
    e.submit(Request("a", "/A", max=5, min=5, resources=kinds(cores=1)))
    d = e.cycle(0)
    assert not d.grants and held(e, "/A") == 0
    e.change("a", min=2)
    assert sum(g.slots for g in e.cycle(1).grants) == 4
    e.change("a", max=3)
    assert held(e, "/A") == 3
    e.release("a")
    assert not e.kinds.allocs and e.state.hosts["h"].free == 4


def test_a_host_going_down_loses_its_vector_work() -> None:
    e = Engine(plan_of([("h1", kinds(cores=2)), ("h2", kinds(cores=2))], {"/A": GroupSettings()}))
    e.submit(Request("a", "/A", max=4, resources=kinds(cores=1)))
    e.cycle(0)
    lost = e.set_host_state("h1", HostState.DOWN)
    assert sum(r.slots for r in lost) == 2 and held(e, "/A") == 2
    assert e.kinds.report(e.state)["g"]["totals"] == {"cores": 2.0}


@pytest.mark.parametrize("packing", ["bestfit", "fgd"])
def test_packers_place_on_a_host_where_it_fits(packing: str) -> None:
    hosts = [("g1", kinds(cores=8, memory=64, gpus=2)), ("g2", kinds(cores=8, memory=64, gpus=8))]
    e = Engine(plan_of(hosts, {"/A": GroupSettings()}, packing=packing))
    e.submit(Request("half", "/A", max=1, resources=kinds(cores=1, memory=4, gpus=0.5)))
    e.submit(Request("eight", "/A", max=1, resources=kinds(cores=4, memory=4, gpus=8)))
    d = e.cycle(0)
    where = {g.request: g.host for g in d.grants}
    assert where == {"half": "g1", "eight": "g2"}  # the whole 8-GPU host is kept whole for the big task


def test_request_ids_are_one_namespace() -> None:
    e = Engine(plan_of([("h", kinds(cores=2))], {"/A": GroupSettings()}))
    e.submit(Request("a", "/A", max=1, resources=kinds(cores=1)))
    with pytest.raises(ValueError, match="already open"):
        e.submit(Request("a", "/A", max=1))
    with pytest.raises(ValueError, match="whole or a fraction"):
        e.submit(Request("b", "/A", max=1, resources=kinds(gpus=1.5)))


def test_looking_for_what_to_reclaim_leaves_a_hosts_free_space_as_it_is() -> None:
    """Working out whether reclaims on a host would make room adds the victims' amounts to a
    scratch copy of its free space, never to the free space the book keeps for the host."""
    hosts = [("g1", kinds(cores=8, gpus=4)), ("g2", kinds(cores=8, gpus=4))]
    e = Engine(plan_of(hosts, {"/O": GroupSettings(owned_kinds=kinds(gpus=4), lend=True),
                               "/B": GroupSettings(grace=10)}))
    e.submit(Request("b", "/B", max=8, resources=kinds(cores=1, gpus=1)))
    e.cycle(0)
    assert held(e, "/B") == 8  # the owner lends its 4 GPUs
    e.submit(Request("o", "/O", max=4, resources=kinds(cores=1, gpus=1)))
    assert sum(r.slots for r in e.cycle(1).reclaims) == 4
    book = e.kinds
    for name, cap in hosts:
        used: dict[str, float] = {}
        for a in book.on_host.get(name, {}).values():
            for k, x in a.amount.items():
                used[k] = used.get(k, 0.0) + x
        assert book.free_on(e.state, name) == {k: v - used.get(k, 0.0) for k, v in cap}
