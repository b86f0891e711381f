"""Every plan check reports the field and the line it is about."""

import pytest

from tests.plan.texts import scenario_text as s

# --- shape (schema) -----------------------------------------------------------


def test_valid_base_loads(write) -> None:
    from apportion.plan import load_scenario

    scenario = load_scenario(write(s()))
    assert [c.path for c in scenario.plan.consumers] == ["/A", "/A/a1", "/A/a2", "/B"]


def test_unknown_top_level_key(expect_problem) -> None:
    expect_problem(
        "hosts: []\nresourcegroups: []   # <-\n",
        "resourcegroups",
        "did you mean 'resource_groups'",
    )


def test_unknown_host_field(expect_problem) -> None:
    expect_problem(s(hosts="- name: x\n  colour: red   # <-"), "hosts[1].colour", "unknown field")


@pytest.mark.parametrize(
    ("value", "reason"),
    [("-1", "at least 0"), ("1.5", "whole number"), ("true", "whole number"), ('"4"', "whole number")],
)
def test_host_slots_must_be_whole_and_not_negative(expect_problem, value: str, reason: str) -> None:
    expect_problem(s(hosts=f"- name: x\n  slots: {value}   # <-"), "hosts[1].slots", reason)


def test_host_state_and_attributes(expect_problem) -> None:
    expect_problem(s(hosts="- name: x\n  state: broken   # <-"), "hosts[1].state", "must be one of")
    expect_problem(
        s(hosts="- name: x\n  attributes:\n    tags: [a, b]   # <-"), "hosts[1].attributes.tags", "got a list"
    )


def test_missing_required_field(expect_problem) -> None:
    expect_problem(s(hosts="- slots: 2   # <-"), "hosts[1].name", "is required")


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("owned", "-1", "at least 0"),
        ("owned", "1.5", "whole number"),
        ("owned", "true", "whole number"),
        ("share_ratio", "-2", "at least 0"),
        ("share_ratio", "0.5", "whole number"),
        ("rank", "0", "at least 1"),
        ("rank", "1.5", "whole number"),
        ("priority", "-1", "at least 0"),
        ("max", "2.5", "whole number"),
        ("lend_limit", "-3", "at least 0"),
        ("lend_limit", "false", "whole number"),
        ("borrow_limit", "-1", "at least 0"),
        ("grace", "-5", "at least 0"),
        ("lend", "maybe", "true or false"),
    ],
)
def test_consumer_numbers(expect_problem, field: str, value: str, reason: str) -> None:
    expect_problem(s(consumers=f"- path: /C\n  {field}: {value}   # <-"), f"consumers[4].{field}", reason)


def test_per_group_numbers(expect_problem) -> None:
    text = s(consumers="- path: /C\n  groups:\n    RG1:\n      owned: -1   # <-")
    expect_problem(text, "consumers[4].groups.RG1.owned", "at least 0")


def test_policy_values(expect_problem) -> None:
    expect_problem(
        s(policy="reclaim_before_borrow: 1   # <-"),
        "policy.reclaim_before_borrow",
        "true or false",
    )
    expect_problem(s(policy="share_enforcement_x: leaf   # <-"), "policy.share_enforcement_x", "did you mean")


# --- hosts and groups ---------------------------------------------------------


def test_duplicate_host_through_overlapping_ranges(expect_problem) -> None:
    expect_problem(s(hosts="- name: h[4-5]   # <-"), "hosts[1].name", "h4 already defined by hosts[0]")


def test_malformed_host_pattern(expect_problem) -> None:
    expect_problem(s(hosts='- name: "x[10-01]"   # <-'), "hosts[1].name", "backwards")


def test_group_unknown_host(expect_problem) -> None:
    expect_problem(
        s(groups='- name: G\n  hosts: [h1, "z[1-2]"]   # <-'),
        "resource_groups[2].hosts[1]",
        "unknown host z1, z2",
    )


def test_duplicate_group_name(expect_problem) -> None:
    expect_problem(
        s(groups="- name: RG1   # <-\n  hosts: [h3]"),
        "resource_groups[2].name",
        "already defined",
    )


def test_group_needs_exactly_one_of_hosts_and_select(expect_problem) -> None:
    expect_problem(s(groups="- name: G   # <-"), "resource_groups[2]", "needs hosts")
    expect_problem(
        s(groups="- name: G\n  hosts: [h1]\n  select: select(linux)   # <-"), "resource_groups[2].select", "not both"
    )


def test_group_requirement_errors(expect_problem) -> None:
    expect_problem(
        s(groups='- name: G\n  select: "select(a &&)"   # <-'),
        "resource_groups[2].select",
        "position 12",
    )
    expect_problem(
        s(groups="- name: G\n  hosts: [h1]\n  order: select(a)   # <-"), "resource_groups[2].order", "only an order"
    )


def test_base_quota_needs_adjust_share(expect_problem) -> None:
    text = s(policy="base_quota: true   # <-\nadjust_share_to_workload: false")
    expect_problem(text, "policy.base_quota", "needs adjust_share_to_workload")


# --- consumers ------------------------------------------------------------------


def test_duplicate_consumer(expect_problem) -> None:
    expect_problem(
        s(consumers="- path: /A/a1   # <-"),
        "consumers[4].path",
        "already defined at consumers[1]",
    )


def test_missing_parent(expect_problem) -> None:
    expect_problem(s(consumers="- path: /X/y   # <-"), "consumers[4].path", "parent /X is not in the plan")


def test_parent_after_child(expect_problem) -> None:
    expect_problem(
        s(consumers="- path: /X/y   # <-\n- path: /X"),
        "consumers[4].path",
        "listed after its child",
    )


@pytest.mark.parametrize("path", ["/A/1bad", "/A/b c", "A", "/A//b", "/", "/A/" + "x" * 129])
def test_bad_consumer_names(expect_problem, path: str) -> None:
    expect_problem(s(consumers=f'- path: "{path}"   # <-'), "consumers[4].path")


def test_tree_deeper_than_five(expect_problem) -> None:
    chain = ["/B/c", "/B/c/d", "/B/c/d/e", "/B/c/d/e/f"]
    text = s(consumers="\n".join(f"- path: {p}" for p in chain) + "\n- path: /B/c/d/e/f/g   # <-")
    expect_problem(text, "consumers[8].path", "at most 5 levels")


def test_parent_owns_less_than_children(expect_problem) -> None:
    expect_problem(s(consumers="- path: /A/a3\n  owned: 1").replace("    owned: 4", "    owned: 4   # <-"),
                   "consumers[0].owned", "/A owns 4 in RG1, less than its children own together (5")


def test_parent_owns_less_in_one_group(expect_problem) -> None:
    text = s(
        consumers="- path: /B/b1\n  groups:\n    RG2: {owned: 3}\n- path: /B/b2\n  groups:\n    RG2: {owned: 1}",
    )
    text = text.replace("  - path: /B\n", "  - path: /B\n    groups:\n      RG2: {owned: 3}   # <-\n")
    expect_problem(
        text,
        "consumers[3].groups.RG2.owned",
        "/B owns 3 in RG2, less than its children own together (4",
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("lend", "true"),
        ("lend_limit", "1"),
        ("lend_to", "siblings"),
        ("borrow", "false"),
        ("borrow_limit", "2"),
        ("borrow_preference", "[/B]"),
    ],
)
def test_lending_settings_only_on_leaves(expect_problem, field: str, value: str) -> None:
    wide = s().replace("    owned: 4\n", f"    owned: 4\n    {field}: {value}   # <-\n", 1)
    expect_problem(wide, f"consumers[0].{field}", "leaf consumers only")
    per_group = s().replace(
        "    owned: 4\n",
        f"    owned: 4\n    groups:\n      RG1:\n        {field}: {value}   # <-\n",
        1,
    )
    expect_problem(per_group, f"consumers[0].groups.RG1.{field}", "leaf consumers only")


def test_lend_limit_above_owned_in_a_group(expect_problem, problems_in) -> None:
    text = s(
        consumers="- path: /C\n  owned: 4\n  lend: true\n  lend_limit: 3\n  groups:\n    RG2: {owned: 2}",
    )
    # the offending value is the consumer-wide lend_limit, but the group override of owned
    # is what breaks it; the problem points at the lend_limit that applies in RG2
    problems = [p for p in problems_in(text) if "lend_limit 3 is above" in p.reason]
    line = text.splitlines().index("    lend_limit: 3") + 1
    assert [(p.field, p.line) for p in problems] == [("consumers[4].lend_limit", line)]
    assert "in RG2 (2)" in problems[0].reason
    text = s(consumers="- path: /C\n  owned: 4\n  groups:\n    RG1:\n      lend_limit: 5   # <-")
    expect_problem(
        text,
        "consumers[4].groups.RG1.lend_limit",
        "lend_limit 5 is above what /C owns in RG1 (4)",
    )


def test_max_below_owned(expect_problem) -> None:
    text = s(consumers="- path: /C\n  owned: 4\n  groups:\n    RG1:\n      max: 3   # <-")
    expect_problem(text, "consumers[4].groups.RG1.max", "max 3 is below what /C owns in RG1 (4)")


def test_lend_to_and_borrow_preference_name_known_consumers(expect_problem) -> None:
    expect_problem(
        s(consumers="- path: /C\n  lend_to: [/A/a1, /nobody]   # <-"),
        "consumers[4].lend_to[1]",
        "unknown consumer /nobody",
    )
    text = s(consumers="- path: /C\n  borrow_preference:\n    - /A/a1\n    - /ghost   # <-")
    expect_problem(text, "consumers[4].borrow_preference[1]", "unknown consumer /ghost")
    expect_problem(s(consumers="- path: /C\n  lend_to: []   # <-"), "consumers[4].lend_to", "lends to nobody")
    expect_problem(s(consumers="- path: /C\n  lend_to: [/C]   # <-"), "consumers[4].lend_to[0]", "itself")
    expect_problem(
        s(consumers="- path: /C\n  lend_to: 3   # <-"),
        "consumers[4].lend_to",
        "'siblings' or a list",
    )


def test_unknown_groups_named_by_consumers(expect_problem) -> None:
    expect_problem(
        s(consumers="- path: /C\n  resource_groups: [RG1, RG9]   # <-"),
        "consumers[4].resource_groups[1]",
        "unknown resource group RG9",
    )
    expect_problem(
        s(consumers="- path: /C\n  groups:\n    RG9: {owned: 1}   # <-"),
        "consumers[4].groups.RG9",
        "unknown resource group RG9",
    )


def test_resource_groups_subset_of_parent(expect_problem) -> None:
    text = s(consumers="- path: /C\n  resource_groups: [RG1]\n- path: /C/c1\n  resource_groups: [RG2]   # <-")
    expect_problem(text, "consumers[5].resource_groups[0]", "its parent /C is not")


def test_per_group_settings_only_where_planned(expect_problem) -> None:
    text = s(consumers="- path: /C\n  resource_groups: [RG1]\n  groups:\n    RG2: {owned: 1}   # <-")
    expect_problem(text, "consumers[4].groups.RG2", "not planned in RG2")
    inherited = s(
        consumers="- path: /C\n  resource_groups: [RG1]\n- path: /C/c1\n  groups:\n    RG2: {owned: 1}   # <-",
    )
    expect_problem(inherited, "consumers[5].groups.RG2", "its parent /C is not planned there")


# --- timeline -----------------------------------------------------------------------


def test_steps_in_time_order(expect_problem) -> None:
    expect_problem(
        s(timeline="- at: 10\n- at: 5   # <-"),
        "timeline[2].at",
        "before the previous step's at 10",
    )
    expect_problem(s(timeline="- at: -1   # <-"), "timeline[1].at", "at least 0")
    expect_problem(s(timeline="- requests: []   # <-"), "timeline[1].at", "is required")


def test_duplicate_request_id(expect_problem) -> None:
    text = s(timeline="- at: 1\n  requests:\n    - {id: base, consumer: /B, max: 1}   # <-")
    expect_problem(text, "timeline[1].requests[0].id", "already used at timeline[0].requests[0]")


def test_request_consumer_must_exist_and_be_a_leaf(expect_problem) -> None:
    expect_problem(
        s(timeline="- at: 1\n  requests:\n    - {id: r, consumer: /Z, max: 1}   # <-"),
        "timeline[1].requests[0].consumer",
        "unknown consumer /Z",
    )
    expect_problem(
        s(timeline="- at: 1\n  requests:\n    - {id: r, consumer: /A, max: 1}   # <-"),
        "timeline[1].requests[0].consumer",
        "not a leaf",
    )


def test_request_groups(expect_problem) -> None:
    expect_problem(
        s(timeline="- at: 1\n  requests:\n    - {id: r, consumer: /B, max: 1, group: RG7}   # <-"),
        "timeline[1].requests[0].group",
        "unknown resource group RG7",
    )
    text = s(
        consumers="- path: /C\n  resource_groups: [RG1]",
        timeline="- at: 1\n  requests:\n    - id: r\n      consumer: /C\n      max: 1\n"
        "      group:\n        - RG1\n        - RG2   # <-",
    )
    expect_problem(text, "timeline[1].requests[0].group[1]", "/C is not planned in RG2")


def test_request_numbers_and_requirement(expect_problem) -> None:
    expect_problem(
        s(timeline="- at: 1\n  requests:\n    - {id: r, consumer: /B, max: 2, min: 3}   # <-"),
        "timeline[1].requests[0].min",
        "min 3 is above max 2",
    )
    expect_problem(
        s(timeline="- at: 1\n  requests:\n    - {id: r, consumer: /B, max: 0}   # <-"),
        "timeline[1].requests[0].max",
        "at least 1",
    )
    expect_problem(
        s(timeline="- at: 1\n  requests:\n    - {id: r, consumer: /B, max: 1, order: 0}   # <-"),
        "timeline[1].requests[0].order",
        "at least 1",
    )
    text = s(
        timeline='- at: 1\n  requests:\n    - {id: r, consumer: /B, max: 1, requirement: "select(>)"}   # <-',
    )
    expect_problem(text, "timeline[1].requests[0].requirement", "expected a condition")
    expect_problem(
        s(timeline="- at: 1\n  requests:\n    - {id: r, consumer: /B, max: 1, prio: 2}   # <-"),
        "timeline[1].requests[0].prio",
        "unknown field",
    )


def test_change_and_release_need_a_live_request(expect_problem) -> None:
    expect_problem(
        s(timeline="- at: 1\n  change:\n    ghost: {max: 2}   # <-"),
        "timeline[1].change.ghost",
        "not submitted",
    )
    expect_problem(
        s(timeline="- at: 1\n  release: [ghost]   # <-"),
        "timeline[1].release[0]",
        "not submitted",
    )
    text = s(timeline="- at: 1\n  release: [base]\n- at: 2\n  change:\n    base: {max: 3}   # <-")
    expect_problem(text, "timeline[2].change.base", "released at timeline[1]")
    text = s(timeline="- at: 1\n  release:\n    - base\n    - base   # <-")
    expect_problem(text, "timeline[1].release[1]", "released at timeline[1]")
    text = s(timeline="- at: 1\n  change:\n    base:\n      min: 5   # <-")
    expect_problem(text, "timeline[1].change.base.min", "min 5 above max 2")


def test_same_step_may_submit_change_and_release(write) -> None:
    from apportion.plan import load_scenario

    text = s(
        timeline="- at: 1\n  requests:\n    - {id: r, consumer: /B, max: 2}\n"
        "  change:\n    r: {max: 4}\n  release: [r]",
    )
    assert load_scenario(write(text)).steps[1].release == ("r",)


def test_host_events_name_known_hosts(expect_problem) -> None:
    expect_problem(
        s(timeline='- at: 1\n  hosts:\n    down: ["h[4-5]"]   # <-'),
        "timeline[1].hosts.down[0]",
        "unknown host h5",
    )
    expect_problem(
        s(timeline="- at: 1\n  hosts:\n    down: [h1]\n    up: [h1]   # <-"),
        "timeline[1].hosts.up[0]",
        "also in hosts.down",
    )
    expect_problem(
        s(timeline="- at: 1\n  hosts:\n    reboot: [h1]   # <-"),
        "timeline[1].hosts.reboot",
        "unknown field",
    )
