"""`apportion bench plan-change` at a small size: the figures add up."""

from __future__ import annotations

import pytest

from apportion.bench.plan_change_bench import PlanChangeSpec, run


def test_a_small_plan_change_moves_one_host_per_grower_and_reclaims_the_minimum():
    r = run(PlanChangeSpec(hosts=400, leaves=40, parents=4, change_fraction=0.2))
    assert r["change"] == {"leaves_altered": 8, "growers": 4, "shrinkers": 4}
    assert r["cluster"]["allocations"] == r["cluster"]["allocations_on_own_hosts"] == 400
    assert r["moved_hosts"] == r["moves"] == 4 and r["removed"] == 0
    assert r["reclaims"] == r["minimum_reclaims"] == r["reclaims_on_moved_hosts"] == 4
    assert r["growers_still_short_slots"] == 0


def test_specs_that_do_not_divide_are_refused():
    with pytest.raises(ValueError):
        PlanChangeSpec(hosts=1000, leaves=300, parents=20)
    with pytest.raises(ValueError):
        PlanChangeSpec(hosts=1000, leaves=1000)
