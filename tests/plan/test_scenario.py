"""Scenario timelines compile to the engine's Request and the scenario's Step objects."""

import pytest

from apportion.engine.model import Host, Request
from apportion.plan import load_scenario, parse_requirement
from apportion.scenario.model import HostChanges, RequestChange, Step

SCENARIO_YAML = """\
hosts:
  - {name: "h[1-4]", slots: 4, attributes: {type: linux}}
  - {name: g1, slots: 8, attributes: {gpu: true}}
resource_groups:
  - {name: RG1, hosts: ["h[1-4]"]}
  - {name: GPU, hosts: [g1]}
consumers:
  - {path: /A, owned: 8, lend: true}
  - {path: /B, resource_groups: [RG1]}
timeline:
  - at: 0
    requests:
      - {id: b1, consumer: /B, max: 16}
      - id: 7
        consumer: /A
        group: [GPU, RG1]
        min: 2
        max: 8
        order: 2
        exclusive: true
        requirement: select(gpu || linux) order(-slots)
  - at: 10
  - at: 10
    requests:
      - {id: a2, consumer: /A, group: RG1, max: 1}
    change:
      b1: {max: 12}
      7: {min: 4}
  - at: 20.5
    release: [b1, "7"]
    hosts: {down: ["h[3-4]"], close: [g1]}
  - at: 30
    hosts: {up: ["h[3-4]"], open: [g1]}
"""

SCENARIO_TOML = """\
[[hosts]]
name = "h[1-4]"
slots = 4
attributes = { type = "linux" }

[[hosts]]
name = "g1"
slots = 8
attributes = { gpu = true }

[[resource_groups]]
name = "RG1"
hosts = ["h[1-4]"]

[[resource_groups]]
name = "GPU"
hosts = ["g1"]

[[consumers]]
path = "/A"
owned = 8
lend = true

[[consumers]]
path = "/B"
resource_groups = ["RG1"]

[[timeline]]
at = 0

[[timeline.requests]]
id = "b1"
consumer = "/B"
max = 16

[[timeline.requests]]
id = "7"
consumer = "/A"
group = ["GPU", "RG1"]
min = 2
max = 8
order = 2
exclusive = true
requirement = "select(gpu || linux) order(-slots)"

[[timeline]]
at = 10

[[timeline]]
at = 10
requests = [{ id = "a2", consumer = "/A", group = "RG1", max = 1 }]

[timeline.change]
b1 = { max = 12 }
7 = { min = 4 }

[[timeline]]
at = 20.5
release = ["b1", "7"]
hosts = { down = ["h[3-4]"], close = ["g1"] }

[[timeline]]
at = 30
hosts = { up = ["h[3-4]"], open = ["g1"] }
"""


def expected_steps() -> tuple[Step, ...]:
    requirement = parse_requirement("select(gpu || linux) order(-slots)")
    return (
        Step(
            at=0.0,
            requests=(
                Request("b1", "/B", max=16, seq=0),
                Request(
                    "7", "/A", max=8, min=2, groups=("GPU", "RG1"), order=2, exclusive=True,
                    requirement=requirement, requirement_text=requirement.text, seq=1,
                ),
            ),
        ),
        Step(at=10.0),
        Step(
            at=10.0,
            requests=(Request("a2", "/A", max=1, groups=("RG1",), seq=2),),
            change={"b1": RequestChange(max=12), "7": RequestChange(min=4)},
        ),
        Step(at=20.5, release=("b1", "7"), hosts=HostChanges(down=("h3", "h4"), close=("g1",))),
        Step(at=30.0, hosts=HostChanges(up=("h3", "h4"), open=("g1",))),
    )


def test_yaml_and_toml_timelines_compile_alike(write) -> None:
    from_yaml = load_scenario(write(SCENARIO_YAML, "s.yaml"))
    from_toml = load_scenario(write(SCENARIO_TOML, "s.toml"))
    assert from_yaml.steps == expected_steps()
    assert from_toml.steps == expected_steps()
    assert from_yaml.plan == from_toml.plan


def test_request_requirement_is_a_host_filter(write) -> None:
    request = load_scenario(write(SCENARIO_YAML)).steps[0].requests[1]
    assert request.requirement is not None
    assert request.requirement(Host("x", 1, attributes={"gpu": True}))
    assert not request.requirement(Host("y", 1, attributes={"type": "aix"}))
    assert request.requirement_text == "select(gpu || linux) order(-slots)"


def test_step_change_mapping_is_read_only(write) -> None:
    step = load_scenario(write(SCENARIO_YAML)).steps[2]
    assert dict(step.change) == {"b1": RequestChange(max=12), "7": RequestChange(min=4)}
    with pytest.raises(TypeError):
        step.change["b1"] = RequestChange(max=1)  # type: ignore[index]
