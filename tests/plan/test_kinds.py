"""Plans with resources of several kinds: host vectors, slot expressions, per-kind ownership,
limits, lending and weights, requests with resources; every problem names its field."""

from __future__ import annotations

import pytest

from apportion.plan import load_scenario
from apportion.plan.slot_expression import slots_of
from tests.plan.texts import scenario_text as s


def test_host_resources_slots_default_to_whole_cores_and_memory_follows(write) -> None:
    plan = load_scenario(write(s(hosts="- name: k1\n  resources: {cores: 9.5, memory: 18, gpus: 0}"))).plan
    k1 = next(h for h in plan.hosts if h.name == "k1")
    assert k1.slots == 9
    assert k1.memory == 18.0
    assert dict(k1.resources) == {"cores": 9.5, "memory": 18.0, "gpus": 0.0}
    # a host without resources is as before
    h1 = next(h for h in plan.hosts if h.name == "h1")
    assert (h1.slots, h1.memory, h1.resources) == (4, 32.0, ())


def test_host_slots_as_an_expression(write) -> None:
    plan = load_scenario(write(s(hosts='- name: k1\n  slots: "min(cores, memory / 4)"\n'
                                       '  resources: {cores: 16, memory: 36}'))).plan
    assert next(h for h in plan.hosts if h.name == "k1").slots == 9


@pytest.mark.parametrize(("text", "value"), [
    ("min(cores, memory / 4)", 4), ("max(cores, 2) * 2 - 1", 15), ("floor(memory / 3)", 5),
    ("-(-cores) + (1 + 2) * 2", 14), ("cores / 3", 2), (".5 * cores", 4),
])
def test_slot_expressions(text: str, value: int) -> None:
    assert slots_of(text, {"cores": 8.0, "memory": 16.0}) == value


@pytest.mark.parametrize(("text", "reason"), [
    ("min(cores, mem / 4)", "mem not among the host's resources"),
    ("__import__('os')", "unexpected"),
    ("cores +", "ends too early"),
    ("cores / 0", "division by zero"),
    ("pow(cores, 2)", "unknown function 'pow'"),
    ("cores - 100", "below 0"),
    ("(cores", "expected ')'"),
])
def test_bad_slot_expressions_say_why(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        slots_of(text, {"cores": 8.0, "memory": 16.0})
    assert reason in str(info.value)


def test_expression_problems_name_the_field(expect_problem) -> None:
    expect_problem(s(hosts='- name: k1\n  slots: "min(cores, mem)"   # <-\n  resources: {cores: 4}'),
                   "hosts[1].slots", "mem not among")
    expect_problem(s(hosts='- name: k1\n  slots: "cores"   # <-'), "hosts[1].slots", "needs the host's resources")


@pytest.mark.parametrize(("value", "reason"), [
    ("{cores: -1}", "cores must be at least 0"), ("{cores: x}", "cores must be a number"),
    ("[1, 2]", "must be a mapping of resource kinds"), ("{}", "must be a mapping of resource kinds"),
    ("{cores: true}", "cores must be a number"),
])
def test_bad_host_resources(expect_problem, value: str, reason: str) -> None:
    expect_problem(s(hosts=f"- name: k1\n  resources: {value}   # <-"), "hosts[1].resources", reason)


def test_per_kind_ownership_limits_lending_and_weights(write) -> None:
    text = s(hosts="- name: g[1-2]\n  resources: {cores: 32, memory: 256, gpus: 8}",
             groups="- name: GPU\n  hosts: ['g[1-2]']\n  packing: fgd",
             policy="weights: {gpus: 4}",
             consumers="- path: /C\n  resource_groups: [RG1, GPU]\n  owned: 2\n"
                       "  groups:\n    GPU: {owned: {gpus: 16, cores: 8}, max: {cores: 48}, lend: [gpus]}")
    plan = load_scenario(write(text)).plan
    c = plan.consumer_map()["/C"]
    gpu = c.groups["GPU"]
    assert dict(gpu.owned_kinds) == {"gpus": 16.0, "cores": 8.0}
    assert gpu.owned == 0  # per-kind ownership replaces the slots in that group
    assert dict(gpu.max_kinds) == {"cores": 48.0} and gpu.max is None
    assert gpu.lend and gpu.lend_kinds == ("gpus",)
    assert c.groups["RG1"].owned == 2 and c.groups["RG1"].owned_kinds == ()  # a plain number: slots
    assert dict(plan.policy.weights) == {"gpus": 4.0}
    assert next(g for g in plan.groups if g.name == "GPU").packing == "fgd"


def test_bad_per_kind_settings_name_the_field(expect_problem) -> None:
    expect_problem(s(consumers="- path: /C\n  owned: {gpus: -2}   # <-"), "consumers[4].owned", "gpus must be at least 0")
    expect_problem(s(consumers="- path: /C\n  owned: 1.5   # <-"), "consumers[4].owned", "whole number of slots")
    expect_problem(s(consumers="- path: /C\n  lend: [1]   # <-"), "consumers[4].lend", "list of resource kinds")
    expect_problem(s(policy="weights: {gpus: 0}   # <-"), "policy.weights", "gpus must be above 0")
    expect_problem(s(groups="- name: G\n  hosts: [h1]\n  packing: tight   # <-"), "resource_groups[2].packing",
                   "must be one of")


def test_requests_with_resources(write, expect_problem) -> None:
    sc = load_scenario(write(s(timeline="- at: 1\n  requests:\n    - {id: r, consumer: /B, max: 3, "
                                        "resources: {cores: 1, memory: 4, gpus: 0.5}}")))
    reqs = [r for step in sc.steps for r in step.requests]
    r = next(r for r in reqs if r.id == "r")
    assert dict(r.resources) == {"cores": 1.0, "memory": 4.0, "gpus": 0.5}
    assert next(r for r in reqs if r.id == "base").resources == ()
    expect_problem(s(timeline="- at: 1\n  requests:\n    - id: r\n      consumer: /B\n      max: 1\n"
                              "      resources: {cores: 0}   # <-"), "timeline[1].requests[0].resources",
                   "above 0 of at least one kind")
    expect_problem(s(timeline="- at: 1\n  requests:\n    - id: r\n      consumer: /B\n      max: 1\n"
                              "      resources: {cores: -1}   # <-"), "timeline[1].requests[0].resources",
                   "cores must be at least 0")
