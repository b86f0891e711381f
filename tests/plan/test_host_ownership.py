"""Owned hosts in a plan file (seed 000): the fields, their checks with lines, the compiled plan."""

from __future__ import annotations

import pytest

from apportion.plan import load_plan

HEAD = """\
hosts:
  - {name: "h[1-4]", slots: 4}
  - {name: "g[1-2]", slots: 8}
resource_groups:
  - {name: RG1, hosts: ["h[1-4]"]}
  - {name: GPU, hosts: ["g[1-2]"]}
consumers:
"""


def _owners(plan, group="RG1"):
    return {c: dict(p) for c, p in plan.host_ownership[group].items() if p}


def test_every_form_compiles_and_owned_is_the_slots_of_the_hosts(write):
    plan = load_plan(write(HEAD + """\
  - path: /A
    owned_hosts: 2
    rank: 1
    groups:
      GPU: {owned_per_host: 2}
  - path: /A/x
    owned_hosts: ["h[1-1]"]
    preference: 1
    groups:
      GPU: {owned: 2}
  - path: /B
    owned_hosts: 1
    partial: true
    rank: 2
    resource_groups: [RG1]
"""))
    assert _owners(plan) == {"/A": {"h1": 4, "h2": 4}, "/A/x": {"h1": 4}, "/B": {"h3": 4}}
    assert _owners(plan, "GPU") == {"/A": {"g1": 2, "g2": 2}}
    by = plan.consumer_map()
    a, x, b = by["/A"], by["/A/x"], by["/B"]
    assert (a.groups["RG1"].owned, a.groups["RG1"].owned_hosts) == (8, 2)
    assert (a.groups["GPU"].owned, a.groups["GPU"].owned_per_host, a.groups["GPU"].owned_hosts) == (4, 2, None)
    assert x.groups["RG1"].owned_hosts == ("h1",) and x.groups["RG1"].owned == 4
    assert x.groups["RG1"].preference == 1 and x.groups["GPU"].preference == 1
    # a per-group owned replaces the consumer-wide owned_hosts as a whole
    assert (x.groups["GPU"].owned, x.groups["GPU"].owned_hosts) == (2, None)
    assert b.groups["RG1"].partial is True and b.groups["RG1"].owned == 4


def test_defaults_leave_plans_without_owned_hosts_as_they_were(write):
    plan = load_plan(write(HEAD + "  - {path: /A, owned: 4}\n"))
    gs = plan.consumers[0].groups["RG1"]
    assert (gs.owned_hosts, gs.owned_per_host, gs.partial, gs.preference) == (None, None, False, None)
    assert plan.host_ownership is None


def test_top_level_overallocation_of_hosts_is_allowed(write):
    plan = load_plan(write(HEAD + "  - {path: /A, owned_hosts: 6, resource_groups: [RG1]}\n"))
    assert _owners(plan) == {"/A": {"h1": 4, "h2": 4, "h3": 4, "h4": 4}}
    assert plan.consumers[0].groups["RG1"].owned == 16


def test_down_hosts_are_not_assigned(write):
    text = HEAD.replace('{name: "h[1-4]", slots: 4}', '{name: "h[1-3]", slots: 4}\n  - {name: h4, slots: 4, '
                                                      'state: down}')
    plan = load_plan(write(text + "  - {path: /A, owned_hosts: 2, resource_groups: [RG1]}\n"
                                  "  - {path: /B, owned_hosts: 2, resource_groups: [RG1]}\n"))
    assert _owners(plan) == {"/A": {"h1": 4, "h2": 4}, "/B": {"h3": 4}}


@pytest.mark.parametrize(("consumers", "field", "reason"), [
    ("  - {path: /A, owned_hosts: -1}   # <-\n", "consumers[0].owned_hosts", "at least 0"),
    ("  - {path: /A, owned_hosts: 1.5}   # <-\n", "consumers[0].owned_hosts", "a number of hosts or a list"),
    ("  - {path: /A, owned_hosts: [h1, 3]}   # <-\n", "consumers[0].owned_hosts", "a number of hosts or a list"),
    ("  - {path: /A, owned_per_host: true}   # <-\n", "consumers[0].owned_per_host", "whole number"),
    ("  - {path: /A, preference: -1}   # <-\n", "consumers[0].preference", "at least 0"),
    ("  - {path: /A, partial: 1}   # <-\n", "consumers[0].partial", "true or false"),
    ("  - {path: /A, owned_hosts: [h1, h9], resource_groups: [RG1]}   # <-\n",
     "consumers[0].owned_hosts[1]", "unknown host h9"),
    ("  - {path: /A, owned_hosts: [g1], resource_groups: [RG1]}   # <-\n",
     "consumers[0].owned_hosts[0]", "host g1 is not in resource group RG1"),
    ("  - {path: /A, owned_hosts: [h1, \"h[1-2]\"], resource_groups: [RG1]}   # <-\n",
     "consumers[0].owned_hosts[1]", "host h1 named twice"),
    ("  - {path: /A, owned_hosts: [\"h[2-1]\"], resource_groups: [RG1]}   # <-\n",
     "consumers[0].owned_hosts[0]", ""),
    ("  - {path: /A, owned_hosts: 2, owned: 4}   # <-\n", "consumers[0].owned_hosts",
     "give one of owned, owned_hosts and owned_per_host (owned is given here too)"),
    ("  - {path: /A, owned_per_host: 2, partial: true}   # <-\n", "consumers[0].partial",
     "partial applies to owned_hosts: N"),
    ("  - {path: /A, owned_per_host: 5, resource_groups: [RG1]}   # <-\n", "consumers[0].owned_per_host",
     "owned_per_host 5 is more than any host of RG1 has (the largest has 4 slots)"),
    ("  - {path: /A, owned_hosts: 1, resource_groups: [RG1], max: 3}   # <-\n", "consumers[0].max",
     "below what /A owns in RG1 (4 slots with owned_hosts: 1)"),
])
def test_problems_with_their_lines(expect_problem, consumers, field, reason):
    expect_problem(HEAD + consumers, field, reason)


def test_lend_limit_is_checked_against_the_hosts(expect_problem):
    expect_problem(HEAD + "  - {path: /A, owned_hosts: [h1], lend: true, lend_limit: 5, resource_groups: [RG1]}"
                          "   # <-\n", "consumers[0].lend_limit", "above what /A owns in RG1 (4 slots with owned_hosts: [h1])")


def test_a_child_owns_hosts_only_out_of_its_parents(expect_problem):
    expect_problem(HEAD + """\
  - {path: /A, owned: 8}
  - {path: /A/x, owned_hosts: 1}   # <-
""", "consumers[1].owned_hosts", "its parent /A owns no hosts there")
    expect_problem(HEAD + """\
  - {path: /A, owned_hosts: [h1, h2]}
  - {path: /A/x, owned_hosts: [h3]}   # <-
""", "consumers[1].owned_hosts", "host h3 is not among /A's hosts in RG1")
    expect_problem(HEAD + """\
  - {path: /A, owned_per_host: 2}
  - {path: /A/x, owned_per_host: 3}   # <-
""", "consumers[1].owned_per_host", "more than /A owns of each host")


def test_children_together_own_no_more_hosts_than_the_parent(expect_problem):
    expect_problem(HEAD + """\
  - {path: /A, owned_hosts: 2}   # <-
  - {path: /A/x, owned_hosts: 1}
  - {path: /A/y, owned_hosts: [h4, h3]}
""", "consumers[0].owned_hosts", "/A owns 2 hosts in RG1, fewer than its children own together (3: /A/x 1, /A/y 2)")
    expect_problem(HEAD + """\
  - {path: /A, owned_per_host: 2}   # <-
  - {path: /A/x, owned_per_host: 1}
  - {path: /A/y, owned_per_host: 2}
""", "consumers[0].owned_per_host", "fewer than its children together (3: /A/x 1, /A/y 2)")
    # aggregate children of a host-owning parent: against the most its hosts can give
    expect_problem(HEAD + """\
  - {path: /A, owned_hosts: 1, resource_groups: [RG1]}   # <-
  - {path: /A/x, owned: 5}
""", "consumers[0].owned_hosts", "/A owns at most 4 slots in RG1 (owned_hosts: 1), less than its children")


def test_a_timeline_plan_with_owned_hosts_is_checked_like_the_first(problems_in):
    problems = problems_in(HEAD + """\
  - {path: /A, owned_hosts: 1}
timeline:
  - at: 10
    plan:
      consumers:
        - {path: /A, owned_hosts: [h7]}
""")
    assert [(p.field, p.line, p.reason) for p in problems] == [
        ("timeline[0].plan.consumers[0].owned_hosts[0]", 13, "unknown host h7")]
