"""Class inheritance, defaults from properties and policies, and the default configuration."""

from __future__ import annotations

from apportion.importers.ducc import DuccClass, Policy, load_ducc

CLASSES = """\
Nodepool --default-- { share-quantum = 15 }
Nodepool big { parent = --default--; nodefile = big.nodes; search-order = 5 }

Class base {
    abstract = true
    policy = FAIR_SHARE
    nodepool = --default--
    priority = 10
    weight = 100
    debug = dbg
    use-prediction = false
}
Class middle base { weight = 50; initialization-cap = 4; abstract = true }
Class leaf middle { weight = 7; default = true; users = alice,bob }
Class sibling { parent = middle }
Class bigjobs base { nodepool = big; expand-by-doubling = false; prediction-fudge = 5000; max-processes = 0 }

Class dbg { policy = FIXED_SHARE; nodepool = --default--; max-processes = 2; max-allotment = 100G }
Class fixed-big { policy = FIXED_SHARE; nodepool = big; max-allotment = 45 }
Class res { policy = RESERVE; nodepool = big; max-machines = 1; enforce = false; default = true }
"""


def load(ducc_dir, **kwargs):
    return load_ducc(ducc_dir({"ducc.classes": CLASSES, "big.nodes": "b1\nb2\n"}), **kwargs)


def test_three_levels_of_inheritance(ducc_dir):
    cfg = load(ducc_dir)
    leaf = cfg.classes["leaf"]
    assert leaf == DuccClass(
        name="leaf", policy=Policy.FAIR_SHARE, nodepool="--default--", priority=10, weight=7,
        expand_by_doubling=True, initialization_cap=4, use_prediction=False, prediction_fudge=120_000,
        max_processes=None, debug="dbg", users=("alice", "bob"), abstract=False, default=True, parent="middle")
    assert leaf.source is not None and leaf.source.line == 14


def test_abstract_and_default_are_not_inherited(ducc_dir):
    cfg = load(ducc_dir)
    assert cfg.classes["base"].abstract and cfg.classes["middle"].abstract
    sibling = cfg.classes["sibling"]  # parent given as `parent = middle`
    assert (sibling.abstract, sibling.default, sibling.weight, sibling.initialization_cap) == (False, False, 50, 4)
    assert sibling.parent == "middle"
    assert [c.name for c in cfg.schedulable_classes()] == ["leaf", "sibling", "bigjobs", "dbg", "fixed-big", "res"]


def test_a_child_overrides_what_it_inherits(ducc_dir):
    big = load(ducc_dir).classes["bigjobs"]
    assert (big.nodepool, big.expand_by_doubling, big.prediction_fudge, big.weight) == ("big", False, 5000, 100)
    assert big.max_processes is None  # 0 means no cap


def test_settings_not_written_come_from_the_properties(ducc_dir):
    cfg = load(ducc_dir, properties={"ducc.rm.expand.by.doubling": False, "ducc.rm.initialization.cap": 3,
                                     "ducc.rm.prediction": True, "ducc.rm.prediction.fudge": 999})
    sibling, big = cfg.classes["sibling"], cfg.classes["bigjobs"]
    assert sibling.expand_by_doubling is False  # from the property
    assert sibling.initialization_cap == 4  # written in `middle`: the class wins over the property
    assert sibling.use_prediction is False  # written in `base`
    assert sibling.prediction_fudge == 999
    assert big.initialization_cap == 3 and big.expand_by_doubling is False


def test_policy_defaults_and_non_applicable_settings(ducc_dir):
    cfg = load(ducc_dir)
    dbg, fixed_big, res = cfg.classes["dbg"], cfg.classes["fixed-big"], cfg.classes["res"]
    assert (dbg.priority, fixed_big.priority, res.priority) == (5, 5, 1)
    assert dbg.weight is dbg.expand_by_doubling is dbg.initialization_cap is dbg.use_prediction is None
    assert dbg.max_processes == 2 and dbg.enforce_memory is None and dbg.max_machines is None
    assert (res.max_machines, res.enforce_memory, res.max_processes, res.default) == (1, False, None, True)


def test_max_allotment_is_converted_to_quanta_of_the_class_nodepool(ducc_dir):
    cfg = load(ducc_dir)
    # 100 GB in a 15 GB pool: 6 quanta (90 GB), never more than the limit
    assert cfg.classes["dbg"].max_allotment == 6
    # `big` is a subpool of --default--, so it uses the 15 GB quantum too
    assert cfg.quantum("big") == 15 and cfg.classes["fixed-big"].max_allotment == 3
    assert cfg.classes["res"].max_allotment is None


def test_max_allotment_below_one_quantum(problems_of):
    problems = problems_of({"ducc.classes": "Nodepool --default-- { share-quantum = 15 }\n"
                            "Class f { policy = FIXED_SHARE; nodepool = --default--; max-allotment = 10 }\n"})
    assert [(p.line, p.field) for p in problems] == [(2, "Class f.max-allotment")]
    assert "less than one quantum (15 GB)" in problems[0].reason


def test_default_classes(ducc_dir):
    cfg = load(ducc_dir)
    assert cfg.default_class(Policy.FAIR_SHARE).name == "leaf"
    assert cfg.default_class(Policy.RESERVE).name == "res"
    assert cfg.default_class(Policy.FIXED_SHARE) is None


def test_one_default_per_policy_and_no_abstract_default(problems_of):
    problems = problems_of({"ducc.classes": """\
        Nodepool --default-- { }
        Class a { policy = FAIR_SHARE; nodepool = --default--; default = true }
        Class b { policy = FAIR_SHARE; nodepool = --default--; default = true }
        Class t { policy = FIXED_SHARE; nodepool = --default--; default = true; abstract = true }
        Class f { policy = FIXED_SHARE; nodepool = --default--; default = true }
        Class r { policy = RESERVE; nodepool = --default--; default = true }
        """})
    assert [(p.line, p.field) for p in problems] == [(3, "Class b.default"), (4, "Class t.default")]
    assert "both the default FAIR_SHARE class" in problems[0].reason


def test_debug_class_must_exist_and_not_be_a_template(problems_of):
    problems = problems_of({"ducc.classes": """\
        Nodepool --default-- { }
        Class t { policy = FIXED_SHARE; nodepool = --default--; abstract = true }
        Class a { policy = FAIR_SHARE; nodepool = --default--; debug = dbug }
        Class b { policy = FAIR_SHARE; nodepool = --default--; debug = t }
        """})
    assert [(p.line, p.field) for p in problems] == [(3, "Class a.debug"), (4, "Class b.debug")]


def test_a_class_without_policy_or_nodepool(problems_of):
    problems = problems_of({"ducc.classes": "Nodepool --default-- { }\nClass a { weight = 3 }\n"
                            "Class b { policy = RESERVE }\n"})
    assert [(p.line, p.field) for p in problems] == [(2, "Class a"), (3, "Class b")]
    assert "no policy" in problems[0].reason and "no nodepool" in problems[1].reason


def test_header_parent_and_parent_key_must_agree(problems_of):
    problems = problems_of({"ducc.classes": """\
        Nodepool --default-- { }
        Class a { policy = FAIR_SHARE; nodepool = --default-- }
        Class b { policy = FAIR_SHARE; nodepool = --default-- }
        Class c a { parent = b }
        """})
    assert [(p.line, p.field) for p in problems] == [(4, "Class c.parent")]


def test_the_default_configuration_when_no_ducc_classes_is_given(ducc_dir):
    cfg = load_ducc(ducc_dir({"cluster.nodes": "n[1-3]\n"}))
    assert list(cfg.nodepools) == ["--default--"]
    assert cfg.nodepools["--default--"].nodes == ("n1", "n2", "n3")
    assert cfg.quantum("--default--") == 1
    fair = {c.name: c.weight for c in cfg.schedulable_classes() if c.policy is Policy.FAIR_SHARE}
    assert fair == {"background": 1, "low": 50, "normal": 100, "high": 200, "weekly": 100, "urgent": 400,
                    "standalone": 150}
    assert {c.name: c.priority for c in cfg.schedulable_classes() if c.policy is not Policy.FAIR_SHARE} == {
        "fixed": 5, "debug": 7, "JobDriver": 9, "reserve": 1}
    assert [cfg.default_class(p).name for p in Policy] == ["normal", "fixed", "reserve"]
    assert cfg.classes["high"].debug == "debug" and cfg.classes["standalone"].debug is None
    assert load_ducc() == load_ducc(classes=None) and load_ducc().hosts == {}


def test_a_class_file_may_be_named_instead_of_its_directory(ducc_dir):
    root = ducc_dir({"site.classes": CLASSES, "big.nodes": "b1\n", "ducc.classes": "this file is not read"})
    cfg = load_ducc(root / "site.classes")
    assert cfg.nodepools["big"].nodes == ("b1",) and "leaf" in cfg.classes
