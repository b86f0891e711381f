"""Closing a request removes its allocations together (ClusterState._remove_all): every
book ends as removing them one by one leaves it, order included (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.engine import Host
from apportion.engine.state import ClusterState

from .builders import Sim, make_plan


def _books(s: ClusterState) -> dict:
    """Everything the engine reads of the state after a close, as lists (orders kept)."""
    def usage(u):
        return (u.own, list(u.pools.items()), list(u.borrowed.items()), list(u.lent.items()), u.held,
                list(u.incoming.items()), list(u.marked.items()))
    return {
        "allocs": [(a.id, a.host, a.slots, a.source, a.reclaim is not None) for a in s.allocs.values()],
        "by_host": {h: list(d) for h, d in s.by_host.items()},
        "by_source": {k: list(d) for k, d in s.by_source.items()},
        "source_hosts": {k: list(s.source_hosts[k].items()) for k in s.by_source},
        "source_multi": {k: sorted(s.source_multi.get(k, ())) for k in s.by_source},
        "usage": {g: [(leaf, usage(u)) for leaf, u in here.items()] for g, here in s.usage_in.items()},
        "pool_used": {g: list(d.items()) for g, d in s.pool_used.items()},
        "subtree": {g: list(d.items()) for g, d in s.subtree_held.items()},
        "unmet": list(s.unmet.items()),
        "unmet_in": {g: list(d.items()) for g, d in s.unmet_in.items()},
        "touched": {g: list(x) for g, x in s.touched.items()},
        "dirty": list(s.reclaim_dirty),
        "with_free": list(s.with_free),
        "hosts": [(n, h.free, list(h.users.items()), h.exclusive_for) for n, h in s.hosts.items()],
        "groups": [(n, g.open_free, list(g.candidates())) for n, g in s.groups.items()],
        "wanting": {leaf: list(b) for leaf, b in s.wanting_of.items()},
        "released": list(s.released_marked),
        "reclaim_for": {b: list(d) for b, d in s.reclaim_for.items()},
        "incoming": list(s.incoming.items()),
        "reclaiming": list(s.reclaiming),
    }


def _sim(widths: list[int], grace: float, rigid: bool) -> Sim:
    plan = make_plan({"/A": {"share_ratio": 1, "grace": grace}, "/B": {"share_ratio": 1, "grace": grace},
                      "/C": {"share_ratio": 2, "grace": grace}},
                     host_list=[Host(f"h{i}", 3) for i in range(1, 9)])
    s = Sim(plan)
    for i, w in enumerate(widths):
        leaf = ("/A", "/B", "/C")[i % 3]
        s.req(f"r{i}", leaf, w, min=w if rigid and i % 2 else 0, exclusive=(i == 3))
        if i % 2:
            _cycles(s, float(i))  # a later arrival may mark earlier grants for reclaim (grace)
    return _cycles(s, float(len(widths)))


def _cycles(s: Sim, now: float) -> Sim:
    """A few cycles at ``now`` (not ``settle``: some of these plans never come to rest)."""
    for _ in range(4):
        s.e.cycle(now)
    return s


@settings(max_examples=60, deadline=None)
@given(widths=st.lists(st.integers(1, 20), min_size=1, max_size=7), grace=st.sampled_from([0.0, 30.0]),
       rigid=st.booleans(), which=st.integers(0, 6))
def test_closing_a_request_leaves_the_books_as_removing_one_by_one(widths, grace, rigid, which):
    rid = f"r{which % len(widths)}"
    together, one_by_one = _sim(widths, grace, rigid), _sim(widths, grace, rigid)
    s = one_by_one.e.state
    rs = s.requests[rid]
    for a in list(rs.allocs.values()):
        if a.reclaim is not None:
            s.released_marked.append((a.group, a.reclaim.beneficiary, a.slots))
        s.remove(a)
    s.close_request(rid)
    together.e.state.close_request(rid)
    assert _books(together.e.state) == _books(s)
    # and after, both decide alike
    _cycles(together, 50.0)
    _cycles(one_by_one, 50.0)
    assert _books(together.e.state) == _books(one_by_one.e.state)
    # the per-host totals, kept since first read, are what the allocations add up to
    st = together.e.state
    for key, index in st.by_source.items():
        on: dict[str, int] = {}
        for a in index.values():
            on[a.host] = on.get(a.host, 0) + a.slots
        assert st.source_hosts[key] == on
        assert st.source_multi[key] == {h for h, n in on.items() if n >= 2}
