"""What the live master asks of the vector books (engine/drf.py): one id namespace with the
slot books, the allocations changed since it last looked, giving back on hosts, the fence on
what processes still use once it is taken, and a restore that puts everything back as it was;
slot work takes a host's cores and memory, never its GPUs."""

from __future__ import annotations

from apportion.engine import Consumer, Engine, GroupSettings, Host, Plan, Request, ResourceGroup
from apportion.engine.drf import FENCE


def kinds(**amounts: float) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, float(v)) for k, v in amounts.items()))


def engine(hosts: dict[str, tuple], slots: int = 4) -> Engine:
    hs = tuple(Host(n, slots, resources=r) for n, r in hosts.items())
    plan = Plan(hosts=hs, groups=(ResourceGroup("g", tuple(hosts)),),
                consumers=(Consumer("/A", "/", (), 0, {"g": GroupSettings()}),
                           Consumer("/B", "/", (), 1, {"g": GroupSettings()})))
    e = Engine(plan)
    e.state.changed = set()
    e.kinds.changed = set()
    return e


def test_ids_are_one_namespace_and_changes_are_told() -> None:
    e = engine({"h": kinds(cores=4, memory=16, gpus=2)})
    e.submit(Request("s", "/A", max=1))
    e.submit(Request("v", "/B", max=2, resources=kinds(gpus=1)))
    e.cycle(0)
    slot_ids = set(e.state.allocs)
    vector_ids = set(e.kinds.allocs)
    assert slot_ids and vector_ids and not slot_ids & vector_ids
    assert e.kinds.changed == vector_ids
    e.kinds.changed = set()
    assert e.kinds.release_on(e.state, "v", {"h"}, {"h": 1}) == 1
    assert e.kinds.held_on("v", "h") == 1 and e.kinds.changed  # the shrunk (or dropped) one is told


def test_slot_work_takes_no_gpus() -> None:
    """A host of 4 slots, 4 cores and 2 GPUs, full of plain slots: a GPU-only request still fits."""
    e = engine({"h": kinds(cores=4, memory=16, gpus=2)})
    e.submit(Request("s", "/A", max=4))
    e.cycle(0)
    e.submit(Request("v", "/B", max=2, resources=kinds(gpus=1)))
    e.cycle(1)
    assert e.kinds.held_on("v", "h") == 2
    assert e.state.fences.get((FENCE, "h"), 0) == 0  # no cores or memory held: no slot taken


def test_what_processes_still_use_stays_off_the_host_until_they_are_gone() -> None:
    e = engine({"h": kinds(cores=4, gpus=2)})
    e.submit(Request("v", "/A", max=2, resources=kinds(cores=1, gpus=1)))
    e.cycle(0)
    e.kinds.set_in_use(e.state, "v", "h", 2)  # its processes use both slots
    e.release("v")
    assert e.kinds.fenced[("v", "h")][0] == 2
    e.submit(Request("w", "/B", max=2, resources=kinds(gpus=1)))
    e.cycle(1)
    assert e.kinds.held_on("w", "h") == 0  # both GPUs still in use
    assert e.kinds.set_in_use(e.state, "v", "h", 1) == 1
    e.cycle(2)
    assert e.kinds.held_on("w", "h") == 1
    e.kinds.set_in_use(e.state, "v", "h", 0)
    e.cycle(3)
    assert e.kinds.held_on("w", "h") == 2 and not e.kinds.fenced


def test_a_restore_puts_everything_back() -> None:
    hosts = {"h1": kinds(cores=9, memory=18), "h2": kinds(cores=4, memory=8, gpus=2)}
    e = engine(hosts)
    a = Request("a", "/A", max=100, resources=kinds(cores=1, memory=4))
    b = Request("b", "/B", max=100, resources=kinds(cores=3, memory=1))
    g = Request("g", "/B", max=3, resources=kinds(gpus=1))
    for r in (a, b, g):
        e.submit(r)
    e.cycle(0)
    held = {rid: sorted((x.id, x.group, x.host, x.slots, x.source, x.reclaim) for x in kr.allocs.values())
            for rid, kr in e.kinds.requests.items()}
    free = {h: e.kinds.free_on(e.state, h) for h in hosts}

    again = engine(hosts)
    for r in (a, b, g):
        again.kinds.restore(again.state, r, held[r.id])
    assert {rid: sorted((x.id, x.group, x.host, x.slots, x.source, x.reclaim) for x in kr.allocs.values())
            for rid, kr in again.kinds.requests.items()} == held
    assert {h: again.kinds.free_on(again.state, h) for h in hosts} == free
    assert again.state._next_id > max(x for v in held.values() for x, *_ in v)
    assert not again.cycle(1).grants  # nothing more fits, as before
    assert again.kinds.gpu_free["h2"] == [0, 0]
