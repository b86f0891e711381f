"""Every configuration error the issue names, each reported as file:line: field: reason."""

from __future__ import annotations

import pytest

from apportion.importers.ducc import load_ducc
from apportion.plan import PlanError

POOL = "Nodepool --default-- { }\n"
FAIR = "Class normal { policy = FAIR_SHARE; nodepool = --default--; default = true }\n"


def test_circular_nodepool_parents(expect):
    files = {
        "ducc.classes": """\
            Nodepool --default-- { }
            Nodepool a { parent = c; nodefile = a.nodes }  # <-
            Nodepool b { parent = a; nodefile = b.nodes }
            Nodepool c { parent = b; nodefile = c.nodes }
            """,
        "a.nodes": "h1\n", "b.nodes": "h2\n", "c.nodes": "h3\n",
    }
    p = expect(files, "ducc.classes", "Nodepool a.parent", "circular nodepool parents")
    assert "a -> c -> b -> a" in p.reason


def test_nodepool_that_is_its_own_parent(expect):
    files = {"ducc.classes": POOL + "Nodepool a { parent = a; nodefile = a.nodes }  # <-\n", "a.nodes": "h1\n"}
    expect(files, "ducc.classes", "Nodepool a.parent", "a -> a")


def test_circular_class_parents(expect):
    files = {"ducc.classes": POOL + """\
        Class one two { weight = 1 }   # <-
        Class two three { weight = 2 }
        Class three one { policy = FAIR_SHARE; nodepool = --default-- }
        """}
    p = expect(files, "ducc.classes", "Class one.parent", "circular class parents")
    assert "one -> two -> three -> one" in p.reason


def test_circular_class_parents_through_the_parent_key(expect):
    files = {"ducc.classes": POOL + """\
        Class a { parent = b; policy = FAIR_SHARE; nodepool = --default-- }  # <-
        Class b { parent = a }
        """}
    expect(files, "ducc.classes", "Class a.parent", "a -> b -> a")


def test_duplicate_nodepools(expect):
    files = {"ducc.classes": """\
        Nodepool --default-- { }
        Nodepool big { nodefile = big.nodes }
        Nodepool big { nodefile = big.nodes }   # <-
        """, "big.nodes": "h1\n"}
    p = expect(files, "ducc.classes", "Nodepool big", "already defined")
    assert "ducc.classes:2" in p.reason


def test_duplicate_classes(expect):
    files = {"ducc.classes": POOL + FAIR + "Class normal { policy = FAIR_SHARE; nodepool = --default-- }  # <-\n"}
    expect(files, "ducc.classes", "Class normal", "class normal is already defined at")


def test_missing_parent_nodepool(expect):
    files = {"ducc.classes": POOL + "Nodepool sub { parent = --defualt--; nodefile = s.nodes }  # <-\n",
             "s.nodes": "h1\n"}
    p = expect(files, "ducc.classes", "Nodepool sub.parent", "parent nodepool --defualt-- is not defined")
    assert "did you mean --default--" in p.reason


def test_missing_parent_class(expect):
    files = {"ducc.classes": POOL + "Class low fair-bse { weight = 50 }  # <-\n"
             "Class fair-base { policy = FAIR_SHARE; nodepool = --default--; abstract = true }\n"}
    p = expect(files, "ducc.classes", "Class low.parent", "parent class fair-bse is not defined")
    assert "did you mean fair-base" in p.reason


def test_class_naming_a_nodepool_that_does_not_exist(expect):
    files = {"ducc.classes": POOL + """\
        Class normal {
            policy = FAIR_SHARE
            nodepool = gpu     # <-
        }
        """}
    expect(files, "ducc.classes", "Class normal.nodepool", "nodepool gpu is not defined")


def test_inherited_nodepool_that_does_not_exist_points_at_the_line_that_names_it(expect):
    files = {"ducc.classes": POOL + """\
        Class base { abstract = true; policy = FAIR_SHARE
                     nodepool = gone }   # <-
        Class child base { }
        """}
    expect(files, "ducc.classes", "Class base.nodepool", "nodepool gone is not defined")
    expect(files, "ducc.classes", "Class child.nodepool", "nodepool gone is not defined")


def test_two_nodepools_without_a_node_file(expect):
    files = {"ducc.classes": """\
        Nodepool --default-- { }
        Nodepool spare { search-order = 3 }   # <-
        """}
    p = expect(files, "ducc.classes", "Nodepool spare", "has no nodefile")
    assert "--default--" in p.reason and "only one nodepool" in p.reason


@pytest.mark.parametrize("value", ["lots", "-5", "10%", "5T", "1e3"])
def test_malformed_max_allotment_on_a_class(expect, value):
    files = {"ducc.classes": POOL + f"""\
        Class fixed {{ policy = FIXED_SHARE; nodepool = --default--
                      max-allotment = {value} }}   # <-
        """}
    expect(files, "ducc.classes", "Class fixed.max-allotment")


def test_malformed_max_allotment_on_a_user(expect):
    files = {"ducc.classes": POOL + FAIR, "ducc.users": "User bob { max-allotment = plenty }  # <-\n"}
    expect(files, "ducc.users", "User bob.max-allotment", "'plenty' is not a memory size")


@pytest.mark.parametrize(
    ("files", "file", "field"),
    [
        ({"ducc.classes": POOL + "Class f { policy = FIXED_SHARE; nodepool = --default--; "
          "max-allotment = 12.5 }  # <-\n"}, "ducc.classes", "Class f.max-allotment"),
        ({"ducc.classes": POOL + FAIR, "ducc.users": "User amy { max-allotment = 7.25G }  # <-\n"},
         "ducc.users", "User amy.max-allotment"),
        ({"ducc.classes": "Nodepool --default-- { share-quantum = 7.5 }  # <-\n" + FAIR},
         "ducc.classes", "Nodepool --default--.share-quantum"),
    ],
)
def test_memory_limit_that_is_not_an_integer(expect, files, file, field):
    p = expect(files, file, field, "not a whole number of GB")
    assert "memory limits are integers" in p.reason


def test_memory_property_that_is_not_an_integer(problems_of):
    # Java properties have no trailing comments, so no marker: the value is on line 2
    files = {"ducc.classes": POOL + FAIR, "ducc.properties": "# site settings\nducc.rm.share.quantum = 1.5\n"}
    (p,) = problems_of(files)
    assert (p.file.endswith("ducc.properties"), p.line, p.field) == (True, 2, "ducc.rm.share.quantum")
    assert "not a whole number of GB" in p.reason
    (p,) = problems_of({"ducc.classes": POOL + FAIR}, properties={"ducc.rm.share.quantum": 15.5})
    assert p.field == "ducc.rm.share.quantum" and "memory limits are integers" in p.reason


def test_user_limit_naming_an_unknown_class(expect):
    files = {"ducc.classes": POOL + FAIR + "Class fixed { policy = FIXED_SHARE; nodepool = --default-- }\n",
             "ducc.users": "User bob {\n  max-allotment.fixed = 40\n  max-allotment.fixd = 40   # <-\n}\n"}
    p = expect(files, "ducc.users", "User bob.max-allotment.fixd", "class fixd is not defined")
    assert "did you mean fixed" in p.reason


def test_user_limit_on_a_fair_share_or_abstract_class(problems_of):
    files = {"ducc.classes": POOL + FAIR + "Class fb { policy = FIXED_SHARE; nodepool = --default--; "
             "abstract = true }\n",
             "ducc.users": "User bob { max-allotment.normal = 40; max-allotment.fb = 40 }\n"}
    text = "\n".join(str(p) for p in problems_of(files))
    assert "ducc.users:1: User bob.max-allotment.normal: class normal is FAIR_SHARE" in text
    assert "ducc.users:1: User bob.max-allotment.fb: class fb is abstract" in text


def test_every_problem_is_reported_at_once_and_nothing_is_half_loaded(problems_of):
    files = {
        "ducc.classes": """\
            Nodepool --default-- { }
            Nodepool --default-- { }
            Nodepool extra { }
            Class a { policy = FAIR_SHARE; nodepool = nowhere }
            Class b c { }
            Class fixed { policy = FIXED_SHARE; nodepool = --default--; max-allotment = much }
            User u { max-allotment.zzz = 5 }
            """,
    }
    problems = problems_of(files)
    fields = {p.field for p in problems}
    assert {"Nodepool --default--", "Nodepool extra", "Class a.nodepool", "Class b.parent",
            "Class fixed.max-allotment", "User u.max-allotment.zzz"} <= fields
    assert all(p.file.endswith("ducc.classes") and p.line is not None for p in problems)


def test_a_broken_directory_raises_plan_error_not_a_partial_config(ducc_dir):
    root = ducc_dir({"ducc.classes": POOL + "Class x { policy = FAIR_SHARE; nodepool = nope }\n"})
    with pytest.raises(PlanError):
        load_ducc(root)


def test_missing_directory_and_missing_explicit_files(tmp_path):
    with pytest.raises(PlanError) as info:
        load_ducc(tmp_path / "nope")
    assert str(info.value) == f"{tmp_path / 'nope'}: directory: no such directory"
    with pytest.raises(PlanError) as info:
        load_ducc(classes=tmp_path / "missing.classes", nodes=[tmp_path / "missing.nodes"])
    text = str(info.value)
    assert "missing.classes: file: cannot read" in text and "missing.nodes: file: no such file" in text


def test_a_file_without_any_nodepool(problems_of):
    problems = problems_of({"ducc.classes": FAIR})
    assert any(p.field == "Nodepool" and "no nodepool is defined" in p.reason for p in problems)
