"""ducc.rm.* properties (defaults, files, overrides) and the user registry."""

from __future__ import annotations

import pytest

from apportion.importers.ducc import DuccProperties, User, load_ducc
from apportion.plan import PlanError
from apportion.plan.positions import parse_yaml

POOL = "Nodepool --default-- { share-quantum = 10 }\n"
CLASSES = POOL + """\
Class normal { policy = FAIR_SHARE; nodepool = --default-- }
Class fixed { policy = FIXED_SHARE; nodepool = --default--; max-allotment = 50 }
Class reserve { policy = RESERVE; nodepool = --default-- }
"""


def test_ducc_defaults():
    assert DuccProperties().to_ducc_keys() == {
        "ducc.rm.share.quantum": 1,
        "ducc.rm.fragmentation.threshold": 8,
        "ducc.rm.initialization.cap": 1,
        "ducc.rm.expand.by.doubling": True,
        "ducc.rm.prediction": True,
        "ducc.rm.prediction.fudge": 120_000,
        "ducc.rm.node.stability": 5,
        "ducc.rm.global_allotment": None,
    }


def test_properties_files_then_site_then_overrides(ducc_dir):
    root = ducc_dir({
        "ducc.classes": "Nodepool --default-- { }\n",
        "ducc.properties": "# shipped\nducc.rm.share.quantum = 15\nducc.rm.node.stability: 3\n"
                           "ducc.rm.prediction false\nducc.rm.jvm.args = -Xmx1G\nducc.head = somewhere\n"
                           "ducc.rm.fragmentation.threshold = 4\n",
        "site.ducc.properties": "ducc.rm.fragmentation.threshold = 2\nducc.rm.global_allotment = 360\n",
    })
    cfg = load_ducc(root, properties={"ducc.rm.node.stability": 9, "ducc.rm.initialization.cap": "2"})
    assert cfg.properties == DuccProperties(share_quantum=15, fragmentation_threshold=2, initialization_cap=2,
                                            expand_by_doubling=True, prediction=False, node_stability=9,
                                            global_allotment=360)
    assert cfg.quantum("--default--") == 15  # the top-level pool takes ducc.rm.share.quantum


def test_bad_property_values_and_unknown_override_keys(ducc_dir):
    root = ducc_dir({"ducc.classes": "Nodepool --default-- { }\n",
                     "ducc.properties": "ducc.rm.node.stability = 0\nducc.rm.prediction = maybe\n"
                                        "ducc.rm.share.quantum = ${x}\n"})
    doc = parse_yaml("ducc:\n  properties:\n    ducc.rm.expand.by.doubling: 1\n    ducc.rm.quantum: 3\n", "s.yaml")
    with pytest.raises(PlanError) as info:
        load_ducc(root, properties=doc.data["ducc"]["properties"], properties_source="s.yaml",
                  properties_positions=doc.positions, properties_path=("ducc", "properties"))
    got = [(p.file.rsplit("/", 1)[-1], p.line, p.field) for p in info.value.problems]
    assert got == [
        ("ducc.properties", 1, "ducc.rm.node.stability"),
        ("ducc.properties", 2, "ducc.rm.prediction"),
        ("ducc.properties", 3, "ducc.rm.share.quantum"),
        ("s.yaml", 3, "ducc.properties.ducc.rm.expand.by.doubling"),
        ("s.yaml", 4, "ducc.properties.ducc.rm.quantum"),
    ]


def test_users_in_ducc_users_and_in_ducc_classes(ducc_dir):
    root = ducc_dir({
        "ducc.classes": CLASSES + "User carol { max-allotment = 0 }\n",
        "ducc.users": "# registry\nUser bob { max-allotment = 400G; max-allotment.fixed = 35 }\n"
                      "User amy { max-allotment.reserve = 100 }\n",
    })
    cfg = load_ducc(root, properties={"ducc.rm.global_allotment": 1000})
    assert cfg.users == {
        "carol": User("carol", None, {}),
        "bob": User("bob", 400, {"fixed": 3}),  # 35 GB in a 10 GB pool: 3 quanta
        "amy": User("amy", None, {"reserve": 10}),
    }
    assert cfg.users["bob"].source.line == 2
    assert cfg.user_allotment_gb("bob") == 400 and cfg.user_allotment_gb("carol") == 1000
    assert cfg.class_allotment("bob", "fixed") == 3 and cfg.class_allotment("amy", "fixed") == 5
    assert cfg.class_allotment("amy", "reserve") == 10 and cfg.class_allotment("bob", "reserve") is None


def test_a_user_defined_twice(problems_of):
    problems = problems_of({"ducc.classes": CLASSES + "User bob { max-allotment = 10 }\n",
                            "ducc.users": "User bob { max-allotment = 20 }\n"})
    assert [(p.file.rsplit("/", 1)[-1], p.line, p.field) for p in problems] == [("ducc.users", 1, "User bob")]
    assert "already defined at" in problems[0].reason
