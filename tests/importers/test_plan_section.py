"""The plan's ducc: section: written by the importer, read back equal, and checked when written by hand."""

from __future__ import annotations

import pytest
import yaml

from apportion.importers.ducc import DuccConfig, Policy, load_ducc
from apportion.importers.ducc.to_plan import (
    CLASS_FIELDS,
    NODEPOOL_FIELDS,
    config_to_mapping,
    ducc_config_from_mapping,
    ducc_config_from_plan,
    dump_plan_yaml,
)
from apportion.plan import PlanError
from apportion.plan.positions import parse_yaml
from tests.importers.shared import TRACES, needs_traces

RICH = {
    "ducc.classes": """\
        Nodepool --default-- { share-quantum = 8; domain = lab.example }
        Nodepool gpu { parent = --default--; nodefile = gpu.regex; search-order = 3 }
        Nodepool jd { nodefile = jd.nodes; share-quantum = 2 }
        Class fair-base { policy = FAIR_SHARE; nodepool = --default--; abstract = true; debug = fixed }
        Class normal fair-base { default = true; users = ann,bo }
        Class gpu-jobs fair-base { nodepool = gpu; weight = 300; max-processes = 12; use-prediction = false }
        Class fixed { policy = FIXED_SHARE; nodepool = --default--; max-allotment = 64; default = true }
        Class JobDriver { policy = FIXED_SHARE; nodepool = jd; priority = 0 }
        Class reserve { policy = RESERVE; nodepool = --default--; max-machines = 2; enforce = false }
        User ann { max-allotment = 128; max-allotment.fixed = 16 }
        """,
    "gpu.regex": "g-[0-9]+\n",
    "jd.nodes": "jd1\n",
    "cluster.nodes": "nodes = c g\nmemory = 64 256\nc.64 = 3\ng.256 = 2\n",
}


def roundtrip(cfg: DuccConfig) -> DuccConfig:
    text = dump_plan_yaml(cfg, ["a header"])
    doc = parse_yaml(text, "plan.yaml")
    assert doc.problems == []
    return ducc_config_from_plan(doc.data, source="plan.yaml", positions=doc.positions)


@needs_traces
def test_round_trip_of_the_shipped_trace_configuration():
    cfg = load_ducc(TRACES, properties={"ducc.rm.share.quantum": 15})
    back = roundtrip(cfg)
    assert back == cfg
    assert back.hosts == cfg.hosts and list(back.hosts) == list(cfg.hosts)


def test_round_trip_of_a_configuration_using_every_feature(ducc_dir):
    cfg = load_ducc(ducc_dir(RICH), memory={"jd1": 16})
    assert cfg.nodepools["gpu"].nodes == ("g-4", "g-5") and cfg.hosts["g-4"] == 256
    assert cfg.classes["fixed"].max_allotment == 8 and cfg.users["ann"].class_max_allotment == {"fixed": 2}
    back = roundtrip(cfg)
    assert back == cfg and hash(back) == hash(cfg)
    assert back.classes["normal"].users == ("ann", "bo") and back.domain == "lab.example"


def test_the_section_spells_out_every_setting(ducc_dir):
    section = config_to_mapping(load_ducc(ducc_dir(RICH)))
    assert list(section) == ["properties", "domain", "nodepools", "classes", "users"]
    assert section["properties"]["ducc.rm.share.quantum"] == 1
    assert all(tuple(p) == NODEPOOL_FIELDS for p in section["nodepools"])
    assert all(tuple(c) == CLASS_FIELDS for c in section["classes"])
    assert section["users"] == [{"name": "ann", "max_allotment_gb": 128, "class_max_allotment": {"fixed": 2}}]
    gpu = next(c for c in section["classes"] if c["name"] == "gpu-jobs")
    assert gpu == {
        "name": "gpu-jobs", "policy": "FAIR_SHARE", "nodepool": "gpu", "priority": 10, "weight": 300,
        "expand_by_doubling": True, "initialization_cap": 1, "use_prediction": False, "prediction_fudge": 120000,
        "max_processes": 12, "max_machines": None, "enforce_memory": None, "max_allotment": None,
        "debug": "fixed", "users": None, "abstract": False, "default": False, "parent": "fair-base"}


def test_the_plan_file_is_plain_yaml_with_hosts_and_memory(ducc_dir):
    text = dump_plan_yaml(load_ducc(ducc_dir(RICH)), ["imported", ""])
    assert text.startswith("# imported\n#\nhosts:\n- {name: c-1, memory: 64}\n")
    assert "&" not in text and "*" not in text  # no anchors or aliases
    plan = yaml.safe_load(text)
    assert {"name": "jd1"} in plan["hosts"]  # memory not known: left out
    assert plan["ducc"]["nodepools"][0]["nodes"] == ["c-1", "c-2", "c-3"]


def test_a_minimal_hand_written_section_gets_the_same_defaults():
    section = {
        "properties": {"ducc.rm.initialization.cap": 2},
        "nodepools": [{"name": "all", "nodes": ["h[1-3]"]}],
        "classes": [
            {"name": "normal", "policy": "FAIR_SHARE", "nodepool": "all", "default": True},
            {"name": "fixed", "policy": "FIXED_SHARE", "nodepool": "all"},
            {"name": "reserve", "policy": "RESERVE", "nodepool": "all"},
        ],
    }
    cfg = ducc_config_from_mapping(section)
    assert dict(cfg.hosts) == {"h1": None, "h2": None, "h3": None}
    normal, fixed, reserve = (cfg.classes[n] for n in ("normal", "fixed", "reserve"))
    assert (normal.priority, normal.weight, normal.initialization_cap, normal.expand_by_doubling) == (10, 100, 2, True)
    assert (fixed.priority, fixed.weight, reserve.priority, reserve.enforce_memory) == (5, None, 1, True)
    assert cfg.quantum("all") == 1 and cfg.default_class(Policy.FAIR_SHARE) is normal
    same = load_ducc(classes=None, properties={"ducc.rm.initialization.cap": 2})
    assert same.classes["normal"].initialization_cap == normal.initialization_cap


BAD = """\
hosts:
  - {name: "h[1-3]", memory: 16}
ducc:
  properties: {ducc.rm.share.quantum: 4}
  nodepools:
    - {name: top, nodes: ["h[1-2]"], colour: blue}
    - {name: sub, parent: top, share_quantum: 2, nodes: [h2, h9]}
    - {name: loop1, parent: loop2}
    - {name: loop2, parent: loop1}
  classes:
    - {name: a, policy: FAIR_SHARE, nodepool: top, weight: 0}
    - {name: b, policy: FIXED_SHARE, nodepool: nope, max_allotment: 2}
    - {name: c, policy: RESERVE, nodepool: top, debug: zz}
    - {name: b, policy: RESERVE, nodepool: top}
    - {name: d, policy: FAIR_SHARE, nodepool: top, default: "yes", parent: e}
  users:
    - {name: u, class_max_allotment: {a: 1, zz: 2, c: 0}}
"""


def test_a_broken_section_reports_every_problem_with_its_line():
    doc = parse_yaml(BAD, "plan.yaml")
    with pytest.raises(PlanError) as info:
        ducc_config_from_plan(doc.data, source="plan.yaml", positions=doc.positions)
    got = {(p.line, p.field) for p in info.value.problems}
    assert got == {
        (6, "ducc.nodepools[0].colour"),
        (7, "ducc.nodepools[1].nodes[1]"),  # h9 is not a host of the plan
        (7, "ducc.nodepools[1].share_quantum"),  # only top-level pools have one
        (7, "ducc.nodepools[1].nodes"),  # h2 is in two pools
        (8, "ducc.nodepools[2].parent"),  # loop1 -> loop2 -> loop1
        (11, "ducc.classes[0].weight"),
        (12, "ducc.classes[1].nodepool"),
        (13, "ducc.classes[2].debug"),  # FAIR_SHARE only
        (14, "ducc.classes[3]"),  # b again
        (15, "ducc.classes[4].default"),  # not a boolean
        (17, "ducc.users[0].class_max_allotment.c"),  # 0 quanta
        (17, "ducc.users[0].class_max_allotment.zz"),
    }
    text = str(info.value)
    assert "plan.yaml:8: ducc.nodepools[2].parent: circular nodepool parents: loop1 -> loop2 -> loop1" in text
    assert "plan.yaml:17: ducc.users[0].class_max_allotment.zz: class zz is not defined" in text


def test_section_shape_mistakes():
    with pytest.raises(PlanError) as info:
        ducc_config_from_mapping(["not", "a", "mapping"])
    assert str(info.value) == "<ducc>: ducc: expected a mapping, got a list"
    with pytest.raises(PlanError) as info:
        ducc_config_from_mapping({"nodepools": [], "classes": [{"name": "x", "policy": "FAIR_SHARE",
                                                                "nodepool": "p", "parent": "y"}],
                                  "users": [{"name": "u", "class_max_allotment": {"x": 1}}]})
    text = str(info.value)
    assert "ducc.nodepools: at least one nodepool is needed" in text
    assert "ducc.classes[0].nodepool: nodepool p is not defined" in text
    assert "ducc.classes[0].parent: parent class y is not defined" in text
    assert "ducc.users[0].class_max_allotment.x: class x is FAIR_SHARE" in text
    with pytest.raises(PlanError) as info:
        ducc_config_from_plan({"hosts": [{"name": "h1"}]})
    assert "the plan has no ducc: section" in str(info.value)
