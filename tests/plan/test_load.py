"""Whole files: a valid plan in YAML and TOML, file-level errors, and how problems are reported."""

from pathlib import Path

import pytest

from apportion.engine.model import (
    AllocationPolicy,
    Consumer,
    GroupSettings,
    Host,
    HostState,
    Plan,
    Policy,
    ResourceGroup,
    ShareEnforcement,
)
from apportion.plan import PlanError, Problem, compile_plan, compile_scenario, load_plan, load_scenario
from apportion.plan.positions import parse_yaml

PLAN_YAML = """\
hosts:
  - name: c[01-03]
    slots: 4
    memory: 64
    attributes: {type: linux, rack: r1}
  - name: big
    slots: 16
    memory: 512.5
    attributes: {type: linux, gpu: true}
    state: closed
resource_groups:
  - name: Compute
    hosts: [big, "c[01-03]"]
    order: order(slots)
  - name: Large
    select: select(memory > 100 || rack == r1) order(-memory)
    allocation_policy: exclusive
policy:
  share_enforcement: parent
  reclaim_before_borrow: true
consumers:
  - path: /LOB1
    owned: 10
    share_ratio: 2
  - path: /LOB1/app1
    owned: 6
    lend: true
    lend_limit: 4
    grace: 30
    rank: 1
    lend_to: siblings
    groups:
      Large:
        owned: 2
        lend_limit: 1
        max: 8
  - path: /LOB1/app2
    owned: 4
    borrow_preference: [/LOB1/app1]
    priority: 1
  - path: /LOB2
    resource_groups: [Large]
  - path: /LOB2/batch
    borrow_limit: 3
    lend_to: [/LOB1/app2]
"""

PLAN_TOML = """\
[[hosts]]
name = "c[01-03]"
slots = 4
memory = 64
attributes = { type = "linux", rack = "r1" }

[[hosts]]
name = "big"
slots = 16
memory = 512.5
attributes = { type = "linux", gpu = true }
state = "closed"

[[resource_groups]]
name = "Compute"
hosts = ["big", "c[01-03]"]
order = "order(slots)"

[[resource_groups]]
name = "Large"
select = "select(memory > 100 || rack == r1) order(-memory)"
allocation_policy = "exclusive"

[policy]
share_enforcement = "parent"
reclaim_before_borrow = true

[[consumers]]
path = "/LOB1"
owned = 10
share_ratio = 2

[[consumers]]
path = "/LOB1/app1"
owned = 6
lend = true
lend_limit = 4
grace = 30
rank = 1
lend_to = "siblings"

[consumers.groups.Large]
owned = 2
lend_limit = 1
max = 8

[[consumers]]
path = "/LOB1/app2"
owned = 4
borrow_preference = ["/LOB1/app1"]
priority = 1

[[consumers]]
path = "/LOB2"
resource_groups = ["Large"]

[[consumers]]
path = "/LOB2/batch"
borrow_limit = 3
lend_to = ["/LOB1/app2"]
"""


def expected_plan() -> Plan:
    linux = {"type": "linux", "rack": "r1"}
    hosts = tuple(Host(f"c0{i}", 4, 64.0, linux) for i in (1, 2, 3)) + (
        Host("big", 16, 512.5, {"type": "linux", "gpu": True}, HostState.CLOSED),
    )
    groups = (
        ResourceGroup("Compute", ("c01", "c02", "c03", "big")),  # listed order, then order(slots), stable
        ResourceGroup("Large", ("big", "c01", "c02", "c03"), AllocationPolicy.EXCLUSIVE),
    )
    app1 = dict(lend=True, grace=30.0, rank=1, lend_to=("siblings",))
    consumers = (
        Consumer("/LOB1", "/", ("/LOB1/app1", "/LOB1/app2"), 0,
                 {"Compute": GroupSettings(owned=10, share_ratio=2), "Large": GroupSettings(owned=10, share_ratio=2)}),
        Consumer("/LOB1/app1", "/LOB1", (), 1, {
            "Compute": GroupSettings(owned=6, lend_limit=4, **app1),
            "Large": GroupSettings(owned=2, lend_limit=1, max=8, **app1),
        }),
        Consumer("/LOB1/app2", "/LOB1", (), 2, {
            g: GroupSettings(owned=4, borrow_preference=("/LOB1/app1",), priority=1) for g in ("Compute", "Large")
        }),
        Consumer("/LOB2", "/", ("/LOB2/batch",), 3, {"Large": GroupSettings()}),
        Consumer("/LOB2/batch", "/LOB2", (), 4, {"Large": GroupSettings(borrow_limit=3, lend_to=("/LOB1/app2",))}),
    )
    policy = Policy(share_enforcement=ShareEnforcement.PARENT, reclaim_before_borrow=True)
    return Plan(hosts, groups, consumers, policy)


@pytest.mark.parametrize(
    ("name", "text"), [("plan.yaml", PLAN_YAML), ("plan.yml", PLAN_YAML), ("plan.toml", PLAN_TOML)]
)
def test_full_plan_compiles_to_expected_objects(write, name: str, text: str) -> None:
    plan = load_plan(write(text, name))
    expected = expected_plan()
    assert plan.hosts == expected.hosts
    assert plan.groups == expected.groups
    assert plan.policy == expected.policy
    for got, want in zip(plan.consumers, expected.consumers, strict=True):
        assert (got.path, got.parent, got.children, got.index) == (want.path, want.parent, want.children, want.index)
        assert list(got.groups) == list(want.groups)  # plan group order
        assert dict(got.groups) == dict(want.groups), got.path
    assert plan == expected


def test_inheritance_in_detail(write) -> None:
    plan = load_plan(write(PLAN_YAML))
    consumers = plan.consumer_map()
    app1 = consumers["/LOB1/app1"]
    assert app1.groups["Compute"].owned == 6  # consumer-wide value
    assert app1.groups["Large"].owned == 2  # per-group override
    assert app1.groups["Large"].grace == 30.0  # consumer-wide value kept where not overridden
    assert list(consumers["/LOB2/batch"].groups) == ["Large"]  # resource_groups inherited from /LOB2
    assert list(consumers["/LOB1/app2"].groups) == ["Compute", "Large"]  # top level: every group
    assert consumers["/LOB1"].groups["Large"].owned == 10  # parent owns 10 >= children 2 + 4


def test_plan_ignores_timeline_and_scenario_without_timeline_has_no_steps(write) -> None:
    assert load_plan(write(PLAN_YAML + "timeline: not even a list\n")) == expected_plan()
    scenario = load_scenario(write(PLAN_YAML))
    assert scenario.steps == () and scenario.plan == expected_plan()
    assert scenario.source.endswith("plan.yaml")


def test_compile_without_positions_has_no_lines() -> None:
    data = parse_yaml(PLAN_YAML).data
    assert compile_plan(data) == expected_plan()
    data["consumers"][1]["lend_limit"] = 9
    with pytest.raises(PlanError) as info:
        compile_plan(data, source="inline")
    assert [str(p) for p in info.value.problems] == [
        "inline: consumers[1].lend_limit: lend_limit 9 is above what /LOB1/app1 owns in Compute (6)"
    ]


def test_toml_problem_lines(problems_in) -> None:
    text = PLAN_TOML.replace("lend_limit = 1\n", "lend_limit = 3\n").replace(
        'state = "closed"',
        'state = "gone"',
    )
    problems = problems_in(text, "plan.toml")
    lines = text.splitlines()
    by_field = {p.field: p for p in problems}
    assert by_field["hosts[1].state"].line == lines.index('state = "gone"') + 1
    lend = by_field["consumers[1].groups.Large.lend_limit"]
    assert lend.line == lines.index("lend_limit = 3") + 1
    assert "lend_limit 3 is above what /LOB1/app1 owns in Large (2)" in lend.reason


def test_toml_positions_in_inline_and_multiline_arrays(problems_in) -> None:
    text = PLAN_TOML.replace('hosts = ["big", "c[01-03]"]', 'hosts = [\n  "big",\n  "nope",\n]')
    problem = next(p for p in problems_in(text, "plan.toml") if "nope" in p.reason)
    assert (problem.field, problem.line) == ("resource_groups[0].hosts[1]", text.splitlines().index('  "nope",') + 1)


@pytest.mark.parametrize(
    ("name", "text", "line", "field", "reason"),
    [
        ("bad.yaml", "hosts:\n  - name: a\n   slots: 2\n", 3, "yaml", ""),
        ("bad.yaml", "hosts: [a, b\nconsumers: []\n", 2, "yaml", ""),
        ("bad.toml", "[[hosts]]\nname = 'a'\nslots = = 2\n", 3, "toml", "Invalid value"),
        ("bad.toml", "[policy]\nbase_quota = true\n[policy]\n", 3, "toml", ""),
        ("dup.yaml", "policy:\n  base_quota: true\n  base_quota: false\n", 3, "policy.base_quota", "given twice"),
        ("list.yaml", "- a\n- b\n", 1, "document", "must be a mapping"),
    ],
)
def test_file_level_errors(problems_in, name: str, text: str, line: int, field: str, reason: str) -> None:
    problems = problems_in(text, name)
    assert problems[0].line == line and problems[0].field == field and reason in problems[0].reason


@pytest.mark.parametrize("name", ["empty.yaml", "empty.toml"])
def test_empty_file(problems_in, name: str) -> None:
    assert "empty" in problems_in("# nothing\n", name)[0].reason


def test_unknown_extension_and_unreadable_file(tmp_path: Path, write) -> None:
    with pytest.raises(PlanError, match=r"plan\.json: file: unknown file type '\.json'"):
        load_plan(write("{}", "plan.json"))
    with pytest.raises(PlanError, match=r"missing\.yaml: file: cannot read"):
        load_plan(tmp_path / "missing.yaml")
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(PlanError, match="not UTF-8"):
        load_plan(tmp_path / "binary.yaml")


def test_every_problem_is_reported_together_schema_first(problems_in) -> None:
    text = PLAN_YAML.replace("    owned: 4\n", "    owned: 4.5\n").replace(
        "    borrow_limit: 3\n", "    borrow_limit: 3\n    colour: blue\n"
    ).replace("lend_to: [/LOB1/app2]", "lend_to: [/nobody]").replace("hosts: [big,", "hosts: [ghost, big,")
    text = text.replace("  - path: /LOB1\n    owned: 10\n", "  - path: /LOB1\n    owned: 1\n")
    problems = problems_in(text)
    fields = [p.field for p in problems]
    assert fields == [
        "consumers[2].owned",  # shape problems first, in file order
        "consumers[4].colour",
        "resource_groups[0].hosts[0]",  # then meaning, in file order
        "consumers[0].owned",  # short in Compute...
        "consumers[0].owned",  # ...and in Large, even with /LOB1/app2's owned unreadable
        "consumers[4].lend_to[0]",
    ]
    assert "(at least 6: /LOB1/app1 6)" in problems[3].reason
    assert all(isinstance(p, Problem) and p.line for p in problems)


def test_error_text_is_one_problem_per_line_without_traceback(problems_in, write) -> None:
    text = PLAN_YAML.replace("rank: 1", "rank: 0").replace("priority: 1", "priority: -1")
    path = write(text)
    with pytest.raises(PlanError) as info:
        load_plan(path)
    message = str(info.value)
    assert message.splitlines() == [str(p) for p in info.value.problems]
    assert len(message.splitlines()) == 2
    assert "Traceback" not in message and "pydantic" not in message and "errors.pydantic.dev" not in message
    line = text.splitlines().index("    rank: 0") + 1
    assert message.splitlines()[0] == f"{path}:{line}: consumers[1].rank: must be at least 1 (got 0)"


def test_problem_str() -> None:
    assert str(Problem("p.yaml", 3, "hosts[0].slots", "bad")) == "p.yaml:3: hosts[0].slots: bad"
    assert str(Problem("p.yaml", None, "hosts[0].slots", "bad")) == "p.yaml: hosts[0].slots: bad"


def test_nothing_is_half_loaded() -> None:
    data = parse_yaml(PLAN_YAML).data
    data["hosts"].append({"name": "c01"})
    with pytest.raises(PlanError):
        compile_scenario(data)
