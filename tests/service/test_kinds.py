"""Usage per resource kind (service/kinds.py) on its own: what a held slot counts, and that the
figures add up: the hosts' usage is the leaves' usage, a parent's is its children's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.service import kinds
from apportion.service.published import AllocationPub, HoldingPub, HostPub

LEAVES = ("/A", "/B/x", "/B/y")


def host(name: str, slots: int = 4, **res: Any) -> HostPub:
    return HostPub(name, slots, 32.0, "Linux", {}, "ok", False, resources=res or None)


def alloc(aid: int, consumer: str, per_slot_gb: float | None = None, **res: Any) -> AllocationPub:
    """``per_slot_gb``: the allocation's own ``memory``; ``res``: its ``resources``."""
    return AllocationPub(aid, 1, consumer, ["g"], 0, 8, 1, False, None, [], aid, 0.0, per_slot_gb,
                         resources=res or None)


def master(hosts: list[HostPub], allocs: list[AllocationPub], held: list[tuple[int, str, int]]) -> Any:
    holdings = {i: HoldingPub(a, "g", h, n, "pool") for i, (a, h, n) in enumerate(held)}
    return SimpleNamespace(hosts={h.name: h for h in hosts}, allocations={a.id: a for a in allocs},
                           holdings=holdings, live_on={})


def test_what_one_slot_counts() -> None:
    h = host("h", slots=8, cores=32, memory=64.0, gpus=2, custom={"fpga": 1})
    assert kinds.host_total(h) == {"slots": 8, "cores": 32, "memory": 64, "gpus": 2, "fpga": 1}
    # asked for: as asked; not named: its part of the host; GPUs only when asked
    assert kinds.per_slot(alloc(1, "/A", cores=2, gpus=0.5), h) == {"slots": 1, "cores": 2, "memory": 8, "gpus": 0.5}
    assert kinds.per_slot(alloc(1, "/A"), h) == {"slots": 1, "cores": 4, "memory": 8, "gpus": 0}
    assert kinds.per_slot(alloc(1, "/A", per_slot_gb=3.0), h)["memory"] == 3  # the allocation's memory per slot
    assert kinds.per_slot(alloc(1, "/A", per_slot_gb=3.0, memory=5), h)["memory"] == 5
    # a host whose agent reported no vector: its slots and memory, no cores or GPUs known
    assert kinds.host_total(host("old")) == {"slots": 4, "cores": 0, "memory": 32, "gpus": 0}


def test_a_parent_counts_its_subtree() -> None:
    m = master([host("h", cores=8, memory=32.0, gpus=2)],
               [alloc(1, "/B/x", gpus=1), alloc(2, "/B/y")], [(1, "h", 2), (2, "h", 1)])
    by = kinds.used_by_consumer(m)
    assert by[("/B/x", "g")] == {"slots": 2, "cores": 4, "memory": 16, "gpus": 2}
    assert by[("/B", "g")] == {"slots": 3, "cores": 6, "memory": 24, "gpus": 2}
    assert kinds.used_by_host(m)["h"] == by[("/B", "g")]


holding = st.tuples(st.integers(1, 6), st.sampled_from(["h1", "h2"]), st.integers(1, 4))
need = st.fixed_dictionaries({}, optional={"cores": st.integers(0, 8), "memory": st.integers(0, 16),
                                           "gpus": st.sampled_from([0, 0.25, 0.5, 1, 2])})


@settings(max_examples=60, deadline=None)
@given(st.lists(need, min_size=6, max_size=6), st.lists(st.sampled_from(LEAVES), min_size=6, max_size=6),
       st.lists(holding, max_size=12))
def test_the_figures_add_up(needs: list[dict], owners: list[str], held: list[tuple[int, str, int]]) -> None:
    m = master([host("h1", 4, cores=16, memory=64.0, gpus=4), host("h2", 8, cores=8, memory=16.0)],
               [alloc(i + 1, owners[i], **needs[i]) for i in range(6)], held)
    by_host, by_consumer = kinds.used_by_host(m), kinds.used_by_consumer(m)
    for kind in kinds.KINDS:
        on_hosts = sum(v[kind] for v in by_host.values())
        leaves = sum(by_consumer.get((c, "g"), {}).get(kind, 0.0) for c in LEAVES)
        assert abs(on_hosts - leaves) < 1e-6
        children = sum(by_consumer.get((c, "g"), {}).get(kind, 0.0) for c in ("/B/x", "/B/y"))
        assert abs(by_consumer.get(("/B", "g"), {}).get(kind, 0.0) - children) < 1e-6
    assert sum(v["slots"] for v in by_host.values()) == sum(n for _, _, n in held)
