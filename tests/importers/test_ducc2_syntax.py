"""DUCC 2's reading of ducc.classes (a value runs to the end of its line or to ';', words
joined, commas as white space), a class's users in scenarios, and a node named twice."""

from __future__ import annotations

import pytest

from apportion.importers.ducc import load_ducc
from apportion.importers.ducc.stanzas import parse_stanzas
from apportion.plan.ducc_scenario import load_ducc_scenario
from apportion.scenario.ducc_runner import run

PRIVATE = """\
Nodepool --default-- { }
Class normal { policy = FAIR_SHARE; nodepool = --default--; default = true }
Class private.spaces {
    policy = FAIR_SHARE
    nodepool = --default--
    users = alice bob
}
Class private.commas { policy = FAIR_SHARE; nodepool = --default--; users = alice, bob }
Class private.mixed { policy = FAIR_SHARE
                      users = alice,bob   carol ,dave   # a comment ends the value too
                      nodepool = --default-- }
"""


def test_space_and_comma_separated_user_lists(ducc_dir):
    cfg = load_ducc(ducc_dir({"ducc.classes": PRIVATE}))
    assert cfg.classes["private.spaces"].users == ("alice", "bob")
    assert cfg.classes["private.commas"].users == ("alice", "bob")
    assert cfg.classes["private.mixed"].users == ("alice", "bob", "carol", "dave")
    assert cfg.classes["normal"].users is None


def test_a_value_runs_to_the_end_of_its_line_or_to_a_semicolon_or_brace():
    stanzas, problems = parse_stanzas(
        "Class a {\n  users = ann  bob\tcy\n  weight = 3 ; priority = 4\n}\nClass b { users = x y }\n", "f")
    assert problems == []
    a, b = ({k: (p.value, p.line) for k, p in s.pairs.items()} for s in stanzas)
    assert a == {"users": ("ann bob cy", 2), "weight": ("3", 3), "priority": ("4", 3)}
    assert b == {"users": ("x y", 5)}


def test_a_second_key_on_the_line_of_a_value_is_named():
    stanzas, problems = parse_stanzas("Class a { users = ann bob weight = 3 }\n", "f")
    assert [str(p) for p in problems] == [
        "f:1: Class a.users: a value runs to the end of its line: end it with ';' before weight =, or start "
        "a new line"]
    assert {k: p.value for k, p in stanzas[0].pairs.items()} == {"users": "ann bob", "weight": "3"}


def test_a_multi_word_value_where_one_word_is_wanted_says_so(problems_of):
    problems = problems_of({"ducc.classes": "Nodepool --default-- { }\n"
                            "Class a { policy = FAIR_SHARE; nodepool = --default--\n weight = 3 4 }\n"})
    assert [(p.line, p.field) for p in problems] == [(3, "Class a.weight")]
    assert "'3 4'" in problems[0].reason


def _scenario(tmp_path, jobs: str):
    (tmp_path / "ducc.classes").write_text(PRIVATE, encoding="utf-8")
    path = tmp_path / "s.yaml"
    path.write_text("ducc: {classes: ducc.classes, properties: {ducc.rm.share.quantum: 4}}\n"
                    "hosts:\n  - {name: m1, memory: 16}\n"
                    "timeline:\n  - at: 0\n    jobs:\n" + jobs, encoding="utf-8")
    return load_ducc_scenario(path)


def test_a_job_from_a_user_not_in_the_class_list_is_deferred_with_the_reason(tmp_path):
    sc = _scenario(tmp_path, "      - {id: ok, user: bob, class: private.commas, memory: 4, work_items: 10}\n"
                             "      - {id: refused, user: eve, class: private.spaces, memory: 4, work_items: 10}\n")
    jobs = run(sc)[0]["jobs"]
    assert jobs["ok"]["state"] == "running" and jobs["ok"]["held"] >= 1
    assert jobs["refused"]["state"] == "deferred" and jobs["refused"]["held"] == 0
    assert "eve" in jobs["refused"]["reason"] and "private.spaces" in jobs["refused"]["reason"]


NODEPOOL_ONLY = "Nodepool --default-- { }\nClass normal { policy = FAIR_SHARE; nodepool = --default-- }\n"


def test_a_node_in_two_node_files_names_both_places(problems_of):
    problems = problems_of({"ducc.classes": NODEPOOL_ONLY, "a.nodes": "h1\nh2\n", "b.nodes": "# rack b\nh3\nh2\n"})
    assert len(problems) == 1
    p = problems[0]
    assert (p.file.rsplit("/", 1)[-1], p.line, p.field) == ("b.nodes", 3, "host")
    assert p.reason.startswith("h2 is named twice: here and at ") and p.reason.split(" at ")[1].startswith(
        str(p.file).rsplit("/", 1)[0] + "/a.nodes:2")


def test_a_node_twice_in_one_node_file(problems_of):
    problems = problems_of({"ducc.classes": NODEPOOL_ONLY, "ducc.nodes": "h1\nh[1-2]\n"})
    assert [(p.line, p.field) for p in problems] == [(2, "host")]
    assert "h1 is named twice" in problems[0].reason and "ducc.nodes:1" in problems[0].reason


@pytest.mark.parametrize("import_line", ["import more.nodes", "import ./more.nodes"])
def test_a_node_file_imported_and_found_in_the_directory_is_not_a_repeat(ducc_dir, import_line):
    cfg = load_ducc(ducc_dir({"ducc.classes": NODEPOOL_ONLY, "ducc.nodes": f"h1\n{import_line}\n",
                              "more.nodes": "h2\n"}))
    assert list(cfg.hosts) == ["h1", "h2"]


def test_a_node_in_the_master_list_and_a_nodepool_file_is_normal(ducc_dir):
    cfg = load_ducc(ducc_dir({"ducc.classes": "Nodepool --default-- { }\n"
                              "Nodepool a { parent = --default--; nodefile = a.nodes }\n"
                              "Class normal { policy = FAIR_SHARE; nodepool = --default-- }\n",
                              "ducc.nodes": "h1\nh2\n", "a.nodes": "h2\n"}))
    assert cfg.nodepools["a"].nodes == ("h2",) and cfg.nodepools["--default--"].nodes == ("h1",)
