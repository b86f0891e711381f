"""The block language of ducc.classes: comments, optional '=' and ';', and every syntax mistake."""

from __future__ import annotations

from apportion.importers.ducc import load_ducc
from apportion.importers.ducc.stanzas import parse_stanzas


def test_optional_equals_and_semicolons_comments_and_layout():
    text = """\
# a comment
Nodepool --default-- { }   # trailing comment
Class a { policy FAIR_SHARE nodepool --default-- weight 3 }
Class b { policy = FAIR_SHARE; nodepool = --default--; weight = 4; }
Class c {
    policy=FAIR_SHARE
    nodepool=--default--    ; weight=5
}
Class d a { weight = 6 } Class e a { weight = 7 }
"""
    stanzas, problems = parse_stanzas(text, "f")
    assert problems == []
    assert [(s.kind, s.name, s.parent) for s in stanzas] == [
        ("Nodepool", "--default--", None), ("Class", "a", None), ("Class", "b", None), ("Class", "c", None),
        ("Class", "d", "a"), ("Class", "e", "a")]
    assert {k: (p.value, p.line) for k, p in stanzas[3].pairs.items()} == {
        "policy": ("FAIR_SHARE", 6), "nodepool": ("--default--", 7), "weight": ("5", 7)}
    assert [stanzas[i].pairs["weight"].value for i in (1, 2, 4, 5)] == ["3", "4", "6", "7"]


def test_weights_read_the_same_whatever_the_punctuation(ducc_dir):
    cfg = load_ducc(ducc_dir({"ducc.classes": """\
        Nodepool --default-- { }
        Class a { policy FAIR_SHARE nodepool --default-- weight 3 }
        Class b { policy = FAIR_SHARE; nodepool = --default--; weight = 3; }
        """}))
    a, b = cfg.classes["a"], cfg.classes["b"]
    assert a.weight == b.weight == 3 and a.policy == b.policy


def _problems(text: str) -> list[str]:
    _, problems = parse_stanzas(text, "f")
    return [str(p) for p in problems]


def test_unknown_block_type():
    assert _problems("Nodepool p { }\nclass x { policy = FAIR_SHARE }\n") == [
        "f:2: class: unknown block type; expected Nodepool, Class or User (did you mean Class?)"]


def test_a_block_that_is_never_closed():
    assert _problems("Nodepool p { }\nClass x { weight = 1\n") == [
        "f:2: Class x: the block opened at line 2 is never closed with '}'"]


def test_a_missing_close_brace_before_the_next_block_keeps_both_blocks():
    stanzas, problems = parse_stanzas("Class x { weight = 1\nClass y x { weight = 2 }\n", "f")
    assert [str(p) for p in problems] == [
        "f:1: Class x: the block opened at line 1 has no '}' before the Class block at line 2"]
    assert [(s.name, dict((k, v.value) for k, v in s.pairs.items())) for s in stanzas] == [
        ("x", {"weight": "1"}), ("y", {"weight": "2"})]


def test_a_key_without_a_value_and_a_key_given_twice():
    assert _problems("Class x {\n  weight =\n}\nClass y { weight = 1; weight = 2 }\n") == [
        "f:2: Class x.weight: has no value",
        "f:4: Class y.weight: given twice in one block (first at line 4)",
    ]


def test_missing_name_and_missing_open_brace():
    assert _problems("Class { }\nNodepool p x y\nClass z { }\n") == [
        "f:1: Class: Class has no name (write Class NAME { ... })",
        "f:2: Nodepool p: expected '{' to open the block, found 'y'",
    ]


def test_stray_punctuation():
    assert _problems("}\nClass x { = 3 }\n") == [
        "f:1: block: unexpected '}': a block starts with Nodepool, Class or User and a name",
        "f:2: Class x: '=' without a key before it",
    ]


def test_nested_braces_are_reported_and_skipped():
    stanzas, problems = parse_stanzas("Class x { a { b } weight = 2 }\n", "f")
    assert [str(p) for p in problems] == ["f:1: Class x: unexpected '{' inside a block (blocks do not nest)"]


def test_ducc_users_takes_only_user_blocks(problems_of):
    problems = problems_of({"ducc.classes": "Nodepool --default-- { }\n",
                            "ducc.users": "User a { max-allotment = 10 }\nClass b { }\n"})
    assert [(p.line, p.field) for p in problems] == [(2, "Class")]
    assert "expected User" in problems[0].reason


def test_unknown_settings_suggest_the_known_one(problems_of):
    problems = problems_of({"ducc.classes": """\
        Nodepool --default-- { nodfile = x.nodes }
        Class a { policy = FAIR_SHARE; nodepool = --default--; wieght = 2 }
        User u { max-alotment = 3 }
        """})
    text = "\n".join(str(p) for p in problems)
    assert "ducc.classes:1: Nodepool --default--.nodfile: unknown nodepool setting" in text
    assert "(did you mean nodefile?)" in text
    assert "ducc.classes:2: Class a.wieght: unknown class setting" in text and "(did you mean weight?)" in text
    assert "ducc.classes:3: User u.max-alotment: unknown user setting" in text


def test_bad_values(problems_of):
    problems = problems_of({"ducc.classes": """\
        Nodepool --default-- { search-order = first }
        Class a { policy = FAIR_SHARED; nodepool = --default-- }
        Class b { policy = FAIR_SHARE; nodepool = --default--; weight = 0; expand-by-doubling = yes }
        Class c { policy = FAIR_SHARE; nodepool = --default--; priority = -1; users = , }
        """})
    got = {(p.line, p.field): p.reason for p in problems}
    assert got[(1, "Nodepool --default--.search-order")] == "'first' is not a whole number"
    assert "did you mean FAIR_SHARE" in got[(2, "Class a.policy")]
    assert got[(3, "Class b.weight")] == "0 is below the least allowed value, 1"
    assert got[(3, "Class b.expand-by-doubling")] == "'yes' is not true or false"
    assert got[(4, "Class c.priority")] == "-1 is below the least allowed value, 0"
    assert "names no user" in got[(4, "Class c.users")]


def test_nodepools_do_not_inherit(problems_of):
    problems = problems_of({"ducc.classes": "Nodepool --default-- { }\nNodepool sub --default-- { nodefile = "
                            "s.nodes }\n", "s.nodes": "h1\n"})
    assert [(p.line, p.field) for p in problems] == [(2, "Nodepool sub")]
    assert "parent = --default--" in problems[0].reason


def test_policy_specific_settings(problems_of):
    problems = problems_of({"ducc.classes": """\
        Nodepool --default-- { }
        Class fair-base { policy = FAIR_SHARE; nodepool = --default--; weight = 5; abstract = true }
        Class odd fair-base { policy = RESERVE }
        Class r { policy = RESERVE; nodepool = --default--; max-processes = 3; initialization-cap = 2 }
        Class f { policy = FAIR_SHARE; nodepool = --default--; max-allotment = 30; enforce = false }
        """})
    got = {(p.line, p.field): p.reason for p in problems}
    assert got[(2, "Class odd.weight")] == ("applies only to FAIR_SHARE classes, and odd is RESERVE "
                                            "(inherited from class fair-base)")
    assert "applies only to FAIR_SHARE and FIXED_SHARE classes" in got[(4, "Class r.max-processes")]
    assert (4, "Class r.initialization-cap") in got
    assert "FIXED_SHARE and RESERVE" in got[(5, "Class f.max-allotment")]
    assert "RESERVE" in got[(5, "Class f.enforce")]
