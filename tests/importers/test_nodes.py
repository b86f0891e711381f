"""Node files: hosts per nodepool, imports, regular expressions, simulated clusters, overlaps."""

from __future__ import annotations

import pytest

from apportion.importers.ducc import load_ducc

NESTED = """\
Nodepool --default-- { domain = example.org }
Nodepool intel { parent = --default--; nodefile = intel.nodes; search-order = 20 }
Nodepool power { parent = --default--; nodefile = power.nodes; search-order = 10 }
Nodepool nightly { parent = intel; nodefile = nightly.nodes }
Nodepool jd { nodefile = jd.nodes; share-quantum = 2 }
Class normal { policy = FAIR_SHARE; nodepool = --default-- }
"""


def test_nested_pools_imports_comments_and_leftover_hosts(ducc_dir):
    root = ducc_dir({
        "ducc.classes": NESTED,
        "intel.nodes": "# intel frames\nimport frames/f1.nodes\ni9   # the odd one\n",
        "frames/f1.nodes": "domain example.org\ni[01-03]\n",
        "power.nodes": "p1\np2\n",
        "nightly.nodes": "n1\n",
        "jd.nodes": "jd1\n",
        "ducc.nodes": "import intel.nodes\nimport power.nodes\nextra1\n",
    })
    cfg = load_ducc(root, memory={"m1": 64})
    assert {n: p.nodes for n, p in cfg.nodepools.items()} == {
        "--default--": ("extra1", "m1"),
        "intel": ("i01", "i02", "i03", "i9"),
        "power": ("p1", "p2"),
        "nightly": ("n1",),
        "jd": ("jd1",),
    }
    assert [p.name for p in cfg.subpools("--default--")] == ["power", "intel"]  # lower search-order first
    assert cfg.pool_hosts("--default--") == ["extra1", "m1", "p1", "p2", "i01", "i02", "i03", "i9", "n1"]
    assert cfg.pool_hosts("intel", recursive=False) == ["i01", "i02", "i03", "i9"]
    assert (cfg.quantum("nightly"), cfg.quantum("jd")) == (1, 2)
    assert cfg.nodepools["nightly"].share_quantum is None and cfg.top_pool("nightly").name == "--default--"
    assert cfg.nodepool_of("n1") == "nightly" and cfg.nodepool_of("zz") is None
    assert cfg.hosts["m1"] == 64 and cfg.hosts["i01"] is None
    assert list(cfg.hosts)[:3] == ["i01", "i02", "i03"]  # ducc.nodes is read first
    assert cfg.domain == "example.org"


def test_hosts_go_to_the_first_top_level_pool_when_every_pool_has_a_node_file(ducc_dir):
    root = ducc_dir({"ducc.classes": "Nodepool a { nodefile = a.nodes }\nNodepool b { nodefile = b.nodes }\n",
                     "a.nodes": "a1\n", "b.nodes": "b1\n", "more.nodes": "x1\n"})
    cfg = load_ducc(root)
    assert cfg.nodepools["a"].nodes == ("a1", "x1") and cfg.nodepools["b"].nodes == ("b1",)


def test_regex_node_files(ducc_dir):
    root = ducc_dir({
        "ducc.classes": "Nodepool --default-- { }\nNodepool gpu { parent = --default--; nodefile = gpu.regex }\n"
                        "Nodepool fat { nodefile = fat.nodes }\n",
        "gpu.regex": "# every gpu node\ngpu[0-9]+\n",
        "fat.nodes": "gpu99\n",
        "cluster.nodes": "c1\ngpu1\ngpu2\ngpux\n",
    })
    cfg = load_ducc(root)
    assert cfg.nodepools["gpu"].nodes == ("gpu1", "gpu2")  # gpu99 is named by fat.nodes: a name wins
    assert cfg.nodepools["--default--"].nodes == ("c1", "gpux")
    assert cfg.nodepools["fat"].nodes == ("gpu99",)


def test_a_host_matching_two_regex_pools(problems_of):
    problems = problems_of({
        "ducc.classes": "Nodepool --default-- { }\nNodepool a { nodefile = a.regex }\nNodepool b { nodefile = b.regex }\n",
        "a.regex": "h.*\n", "b.regex": "# b\n.*1\n", "cluster.nodes": "h1\nh2\n",
    })
    assert [(p.file.rsplit("/", 1)[-1], p.line, p.field) for p in problems] == [("b.regex", 2, "regex")]
    assert "host h1 matches the node files of both nodepool a" in problems[0].reason


def test_bad_regex(expect):
    expect({"ducc.classes": "Nodepool --default-- { }\nNodepool a { nodefile = a.regex }\n",
            "a.regex": "ok.*\nbad[   # <-\n"}, "a.regex", "regex", "is not a regular expression")


def test_a_host_in_two_nodepools(expect):
    files = {"ducc.classes": "Nodepool --default-- { }\nNodepool a { nodefile = a.nodes }\n"
                             "Nodepool b { nodefile = b.nodes }\n",
             "a.nodes": "h1\nh2\n", "b.nodes": "h3\nh2   # <-\n"}
    p = expect(files, "b.nodes", "host", "h2 is already in nodepool a")
    assert "a.nodes:2" in p.reason and "may not overlap" in p.reason


def test_a_host_listed_twice_for_one_pool(expect):
    files = {"ducc.classes": "Nodepool --default-- { }\nNodepool a { nodefile = a.nodes }\n",
             "a.nodes": "h1\nimport more.nodes\n", "more.nodes": "h2\nh1   # <-\n"}
    expect(files, "more.nodes", "host", "h1 is listed twice for nodepool a")


def test_circular_imports(expect):
    files = {"ducc.classes": "Nodepool --default-- { }\nNodepool a { nodefile = a.nodes }\n",
             "a.nodes": "h1\nimport b.nodes\n", "b.nodes": "h2\nimport a.nodes   # <-\n"}
    p = expect(files, "b.nodes", "import", "circular import")
    assert "a.nodes -> b.nodes -> a.nodes" in p.reason


def test_missing_node_files(expect):
    files = {"ducc.classes": "Nodepool --default-- { }\nNodepool a { nodefile = gone.nodes }   # <-\n"}
    expect(files, "ducc.classes", "Nodepool a.nodefile", "gone.nodes: no such file")
    files = {"ducc.classes": "Nodepool --default-- { }\nNodepool a { nodefile = a.nodes }\n",
             "a.nodes": "import gone.nodes   # <-\n"}
    expect(files, "a.nodes", "import", "gone.nodes: no such file")


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ("h1 h2   # <-\n", "host", "one host name per line"),
        ("h1\ndomain x   # <-\n", "domain", "must be the first line"),
        ("import   # <-\n", "import", "write `import FILE`"),
        ("h[3-1]   # <-\n", "host", "runs backwards"),
    ],
)
def test_node_list_mistakes(expect, text, field, reason):
    files = {"ducc.classes": "Nodepool --default-- { }\nNodepool a { nodefile = a.nodes }\n", "a.nodes": text}
    expect(files, "a.nodes", field, reason)


SIM = """\
# two real machines pretending to be five
nodes = big small
memory = 16 64
big.64 = 2
big.16 = 1
small.16 = 2
"""


def test_simulated_cluster_files(ducc_dir):
    cfg = load_ducc(ducc_dir({"ducc.classes": "Nodepool --default-- { }\n", "five.simulated.nodes": SIM}))
    # numbered across the file in `nodes` order, then `memory` order, as DUCC's simulator names its agents
    assert dict(cfg.hosts) == {"big-1": 16, "big-2": 64, "big-3": 64, "small-4": 16, "small-5": 16}
    cfg = load_ducc(ducc_dir({"ducc.classes": "Nodepool --default-- { }\n",
                              "five.simulated.nodes": SIM + "index.small = 10\n"}), memory={"small-11": 32})
    assert dict(cfg.hosts) == {"big-1": 16, "big-2": 64, "big-3": 64, "small-10": 16, "small-11": 32}


def test_simulated_cluster_as_a_nodepool_node_file(ducc_dir):
    cfg = load_ducc(ducc_dir({"ducc.classes": "Nodepool --default-- { }\nNodepool sim { nodefile = s.nodes }\n",
                              "s.nodes": SIM}))
    assert cfg.nodepools["sim"].nodes == ("big-1", "big-2", "big-3", "small-4", "small-5")


def test_simulated_cluster_mistakes(problems_of):
    problems = problems_of({"ducc.classes": "Nodepool --default-- { }\n", "bad.nodes": """\
        nodes = a b
        memory = 16 lots
        a.16 = two
        c.16 = 1
        a.32 = 1
        index.b = 0
        just-a-host
        """})
    got = {(p.line, p.field) for p in problems}
    assert got == {(2, "memory"), (3, "a.16"), (4, "c.16"), (5, "a.32"), (6, "index.b"), (7, "line")}


def test_memory_that_disagrees_between_files(problems_of):
    problems = problems_of({"ducc.classes": "Nodepool --default-- { }\n",
                            "a.nodes": "nodes = h\nmemory = 16\nh.16 = 1\n",
                            "b.nodes": "nodes = h\nmemory = 32\nh.32 = 1\n"})
    assert [(p.file.rsplit("/", 1)[-1], p.line, p.field) for p in problems] == [("b.nodes", 3, "host")]
    assert "h-1 has 32 GB here but 16 GB at" in problems[0].reason


def test_bad_memory_given_by_the_caller(problems_of):
    problems = problems_of({"ducc.classes": "Nodepool --default-- { }\n"}, memory={"h1": -3, "h2": "x"})
    assert [str(p) for p in problems] == ["<memory>: memory.h1: memory -3 is negative",
                                          "<memory>: memory.h2: 'x' is not a number of GB"]
