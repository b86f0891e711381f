"""The rigid policy's plan fields: a request's walltime, the policy's usage_half_life."""

from __future__ import annotations

from apportion.plan import load_scenario


def test_the_plan_file_sets_the_half_life_and_the_walltime(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("hosts: [{name: h1, slots: 8}]\nresource_groups: [{name: RG, hosts: [h1]}]\n"
                    "consumers: [{path: /A}]\npolicy: {usage_half_life: 600}\n"
                    "timeline: [{at: 0, requests: [{id: a, consumer: /A, min: 2, max: 2, walltime: 30.5}]}]\n")
    sc = load_scenario(path)
    assert sc.plan.policy.usage_half_life == 600.0
    assert sc.steps[0].requests[0].walltime == 30.5
