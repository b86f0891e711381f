"""What the engine keeps for the live master (none of it used by `solve`): the journal of
changed allocations, slots fenced while processes still run on them, and restore."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine import Engine, Request
from apportion.engine.state import PendingReclaim
from apportion.plan import compile_plan

PLAN = yaml.safe_load("""
hosts: [{name: h1, slots: 6}, {name: h2, slots: 4}]
resource_groups: [{name: G, hosts: [h1, h2]}]
consumers:
  - {path: /Ops, owned: 2, grace: 30}
  - {path: /Apps}
  - {path: /Apps/batch, share_ratio: 1, grace: 5}
  - {path: /Apps/web, share_ratio: 2, grace: 10}
""")


def engine() -> Engine:
    e = Engine(compile_plan(PLAN))
    e.state.changed = set()
    return e


def held(e: Engine, rid: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in e.state.requests[rid].allocs.values():
        out[a.host] = out.get(a.host, 0) + a.slots
    return out


def test_fenced_slots_stay_counted_in_their_pool_until_the_processes_are_gone():
    e = engine()
    e.submit(Request("b", "/Apps/batch", max=8))
    e.cycle(0)
    assert sum(held(e, "b").values()) == 8
    for host, n in held(e, "b").items():
        e.state.set_in_use("b", host, n)  # a process on every slot
    e.submit(Request("w", "/Apps/web", max=8))
    d = e.cycle(1)
    reclaimed = sum(r.slots for r in d.reclaims)
    assert reclaimed > 0 and not d.grants
    d = e.cycle(6)  # batch's grace has passed
    assert sum(r.slots for r in d.removals) == reclaimed
    assert not d.grants, "the beneficiary was served while the processes still ran"
    assert sum(e.state.fences.values()) == reclaimed
    assert sum(b[2] for b in e.state.fence_pool.values()) == reclaimed
    # the processes on the slots batch lost go: the fenced slots are free, and web is served
    for host in ("h1", "h2"):
        e.state.set_in_use("b", host, held(e, "b").get(host, 0))
    assert not e.state.fences and not e.state.fence_pool
    d = e.cycle(7)
    assert sum(g.slots for g in d.grants) == reclaimed
    assert sum(h.free for h in e.state.hosts.values()) + sum(a.slots for a in e.state.allocs.values()) == 10


def test_a_host_going_down_drops_its_fences():
    e = engine()
    e.submit(Request("b", "/Apps/batch", max=4, groups=("G",)))
    e.cycle(0)
    host = next(iter(held(e, "b")))
    e.state.set_in_use("b", host, held(e, "b")[host])
    e.release_hosts("b", [host])
    assert e.state.fences[("b", host)] == 4 - sum(n for h, n in held(e, "b").items() if h == host)
    from apportion.engine import HostState

    e.set_host_state(host, HostState.DOWN)
    assert not e.state.fences and not e.state.fence_pool
    assert all(v >= 0 for here in e.state.pool_used.values() for v in here.values())


def test_a_host_down_whose_processes_may_run_keeps_them_fenced_until_they_are_gone():
    """A host that stopped answering is declared down, but what ran there may still run: with
    ``keep_in_use`` the slots of the allocations lost with it stay fenced, through its return,
    until ``set_in_use`` says the processes are gone."""
    from apportion.engine import HostState

    e = engine()
    e.submit(Request("b", "/Apps/batch", max=8, groups=("G",)))
    e.cycle(0)
    assert held(e, "b") == {"h1": 6, "h2": 2}
    e.state.set_in_use("b", "h1", 5)  # processes of 5 of its 6 slots on h1
    lost = e.set_host_state("h1", HostState.DOWN, keep_in_use=True)
    assert sum(r.slots for r in lost) == 6 and held(e, "b") == {"h2": 2}
    assert e.state.fences == {("b", "h1"): 5}
    e.set_host_state("h1", HostState.OK)  # back: 1 slot is free, 5 are fenced
    assert e.state.hosts["h1"].free == 1 and e.state.fences == {("b", "h1"): 5}
    e.submit(Request("w", "/Apps/web", max=6, groups=("G",)))
    e.cycle(1)
    assert sum(a.slots for a in e.state.by_host["h1"].values()) == 1  # only the free one is given
    assert e.state.set_in_use("b", "h1", 0) == 5  # the agent reports them gone
    assert not e.state.fences and not e.state.fence_pool and e.state.hosts["h1"].free == 5
    e.cycle(2)
    assert sum(a.slots for a in e.state.by_host["h1"].values()) == 6
    assert all(v >= 0 for here in e.state.pool_used.values() for v in here.values())


def test_an_unreachable_host_moves_no_share():
    """A silent host keeps its work and takes nothing new, as a closed one, but its idle slots
    still count: /Ops' 2 owned slots idle on h2 do not squeeze batch's share while h2's agent
    is away (closed, the pool shrinks and batch's slots are reclaimed for it)."""
    from apportion.engine import HostState

    for state, reclaimed in ((HostState.UNREACHABLE, 0), (HostState.CLOSED, 2)):
        e = engine()
        e.submit(Request("b", "/Apps/batch", max=8, groups=("G",)))
        e.cycle(0)
        assert held(e, "b") == {"h1": 6, "h2": 2}
        e.set_host_state("h2", state)
        d = e.cycle(1)
        assert sum(r.slots for r in d.reclaims) == reclaimed, (state, d.reclaims)
        assert held(e, "b") == {"h1": 6, "h2": 2}


def snapshot(e: Engine):
    """What the service stores: requests and their allocations, with ids."""
    reqs = []
    for rid, rs in e.state.requests.items():
        allocs = [(a.id, a.group, a.host, a.slots, a.source,
                   None if a.reclaim is None else PendingReclaim(a.reclaim.deadline, a.reclaim.beneficiary,
                                                                 a.reclaim.reason))
                  for a in sorted(rs.allocs.values(), key=lambda a: a.id)]
        spec = rs.spec
        reqs.append((Request(spec.id, spec.consumer, max=rs.max, min=rs.min, groups=spec.groups, order=spec.order,
                             seq=spec.seq), allocs))
    return sorted(reqs, key=lambda r: r[0].seq)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["/Ops", "/Apps/batch", "/Apps/web"]), st.integers(1, 8),
                          st.integers(0, 6)), min_size=1, max_size=8),
       st.integers(1, 4))
def test_restore_from_the_journal_gives_the_same_next_decisions(arrivals, steps):
    """A master that keeps only the rows the journal names, and restores from them, decides
    the next cycle exactly as the engine it replaces would have."""
    e = engine()
    rows: dict[int, object] = {}
    t = 0.0
    for i, (consumer, mx, at) in enumerate(arrivals):
        e.submit(Request(f"r{i}", consumer, max=mx, seq=i))
        t += at
        e.cycle(t)
        for aid in e.state.changed:
            rows[aid] = e.state.allocs.get(aid)
        e.state.changed = set()
    assert {aid for aid, a in rows.items() if a is not None} == set(e.state.allocs)
    fresh = engine()
    for req, allocs in snapshot(e):
        fresh.restore(req, allocs)
    assert {a.id: (a.request, a.host, a.slots, a.source) for a in fresh.state.allocs.values()} == \
        {a.id: (a.request, a.host, a.slots, a.source) for a in e.state.allocs.values()}
    for k in range(steps):
        t += 3
        assert fresh.cycle(t) == e.cycle(t)


def test_release_some_slots_gives_back_the_reclaimed_ones_first():
    e = engine()
    e.submit(Request("b", "/Apps/batch", max=8))
    e.cycle(0)
    e.submit(Request("w", "/Apps/web", max=8))
    d = e.cycle(1)
    host = d.reclaims[0].host
    marked = sum(r.slots for r in d.reclaims if r.host == host)
    before = held(e, "b")[host]
    assert e.release_hosts("b", (), slots={host: marked}) == marked
    assert held(e, "b").get(host, 0) == before - marked
    # what was given back is what was being reclaimed: nothing there is marked any more
    assert not [a for a in e.state.requests["b"].allocs.values() if a.host == host and a.reclaim is not None]
    assert e.state.requests["b"].max == 8  # the demand stays
