"""The benchmark's workload generator: deterministic for a seed, and shaped as documented."""

from __future__ import annotations

import pytest

from apportion.bench.workload import MAX_SLOTS, Churn, WorkloadSpec, make_workload, tree_shape
from apportion.engine import ROOT

SMALL = WorkloadSpec(hosts=120, slots_per_host=8, leaves=40, requests=300, groups=4, seed=7)


def test_same_seed_same_workload():
    a, b = make_workload(SMALL), make_workload(SMALL)
    assert a.plan == b.plan
    assert a.requests == b.requests
    steps_a = [ch for step in Churn(a, 0.05).steps(4) for ch in step]
    steps_b = [ch for step in Churn(b, 0.05).steps(4) for ch in step]
    assert steps_a == steps_b and steps_a


def test_other_seed_other_workload():
    a = make_workload(SMALL)
    b = make_workload(WorkloadSpec(**{**_asdict(SMALL), "seed": 8}))
    assert a.requests != b.requests
    assert a.plan.consumers != b.plan.consumers


def _asdict(spec: WorkloadSpec) -> dict:
    return {k: getattr(spec, k) for k in ("hosts", "slots_per_host", "leaves", "requests", "groups", "seed")}


@pytest.mark.parametrize("leaves", [1, 8, 40, 1000])
def test_four_level_tree_with_every_leaf_at_depth_four(leaves):
    plan = make_workload(WorkloadSpec(hosts=8, leaves=leaves, requests=0, groups=2)).plan
    found = [c for c in plan.consumers if c.is_leaf]
    assert len(found) == leaves
    assert {c.depth for c in found} == {4}
    assert max(c.depth for c in plan.consumers) == 4
    index = {c.path: c.index for c in plan.consumers}
    assert all(c.parent == ROOT or index[c.parent] < c.index for c in plan.consumers)  # parents first
    assert len(tree_shape(leaves)) == 3


def test_hosts_split_among_groups_with_mixed_policies():
    wl = make_workload(SMALL)
    hosts = [h for g in wl.plan.groups for h in g.hosts]
    assert sorted(hosts) == sorted(h.name for h in wl.plan.hosts)  # each host in exactly one group
    assert {g.allocation_policy.value for g in wl.plan.groups} == {"stacked", "balanced"}


def test_ownership_nested_and_well_under_capacity():
    wl = make_workload(WorkloadSpec(hosts=400, leaves=200, requests=0, groups=4, seed=3))
    plan = wl.plan
    cmap = plan.consumer_map()
    cap = {g.name: len(g.hosts) * wl.spec.slots_per_host for g in plan.groups}
    for g in cap:
        tops = [c for c in plan.consumers if c.parent == ROOT and g in c.groups]
        assert 0 < sum(c.groups[g].owned for c in tops) <= cap[g] // 2
        for c in plan.consumers:
            if g in c.groups and c.children:
                kids = sum(cmap[k].groups[g].owned for k in c.children)
                assert kids <= c.groups[g].owned * 0.6 + 1
    settings = [s for c in plan.consumers for s in c.groups.values()]
    assert {s.share_ratio for s in settings} <= {1, 2, 3, 4}
    assert len({s.share_ratio for s in settings}) == 4
    lenders = [s for c in plan.consumers if c.is_leaf for s in c.groups.values() if s.lend]
    assert lenders and all(s.lend_limit is not None and 0 < s.lend_limit <= s.owned for s in lenders)
    assert any(c.is_leaf and s.owned and not s.lend for c in plan.consumers for s in c.groups.values())
    assert any(s.rank is not None for s in settings)
    assert any(s.priority is not None for s in settings)
    # a borrower may never outlast its lender's grace, or lending would never happen
    assert all(s.grace >= max(x.grace for x in settings) for s in lenders)


def test_requests_contend_for_the_cluster():
    wl = make_workload(SMALL)
    assert all(1 <= r.max <= MAX_SLOTS and r.max % r.order == 0 and r.min <= r.max for r in wl.requests)
    assert len({r.id for r in wl.requests}) == len(wl.requests)
    assert wl.demand > wl.capacity
    leaves = set(wl.leaves)
    assert all(r.consumer in leaves for r in wl.requests)


def test_churn_touches_the_fraction_and_keeps_the_count():
    wl = make_workload(WorkloadSpec(hosts=100, leaves=20, requests=1000, seed=2))
    churn = Churn(wl, 0.01)
    open_ids = {r.id for r in wl.requests}
    for step in churn.steps(5):
        kinds = [c.kind for c in step]
        assert kinds.count("release") + kinds.count("change") == 10
        assert kinds.count("submit") == kinds.count("release") > 0
        for c in step:
            if c.kind == "release":
                open_ids.remove(c.id)
            elif c.kind == "submit":
                assert c.request.id not in open_ids
                open_ids.add(c.request.id)
            else:
                assert c.id in open_ids and 1 <= c.max <= MAX_SLOTS
        assert open_ids == {r.id for r in churn.open}
    assert len(open_ids) == 1000


@pytest.mark.parametrize("bad", [{"hosts": 0}, {"leaves": 0}, {"groups": 5, "hosts": 4}, {"requests": -1}])
def test_spec_rejects_nonsense(bad):
    with pytest.raises(ValueError):
        WorkloadSpec(**{**_asdict(SMALL), **bad})
