"""Deeply nested EGO files and plans: a clear problem naming the file, the line and the limit,
never a traceback, and one problem a branch rather than one for each consumer in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from apportion.importers.ego import import_ego
from apportion.plan import PlanError
from tests.importers.ego_texts import HOSTS, RESOURCE_GROUPS, write_ego

CLI = [sys.executable, "-m", "apportion.cli"]
MAX_NESTING = 64  # the deepest element nesting read, as docs/ego-import.md states
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<ConsumerTrees xmlns="http://www.platform.com/ego/2005/05/schema">\n'


def nested(n: int) -> str:
    """``n`` consumers each inside the one before, on one line."""
    return "".join(f'<Consumer ConsumerName="c{i}">' for i in range(n)) + "</Consumer>" * n


def ego_dir(root: Path, trees: str) -> Path:
    return write_ego(root, {"ConsumerTrees.xml": trees, "ResourceGroups.xml": RESOURCE_GROUPS, "hosts.yaml": HOSTS})


def problems(d: Path) -> list[str]:
    with pytest.raises(PlanError) as e:
        import_ego([d])
    return [str(p) for p in e.value.problems]


@pytest.mark.parametrize("where", ["hierarchy", "tree"])
def test_two_thousand_nested_consumers_are_one_clear_problem(tmp_path, where):
    body = (f"<ConsumerHierarchy>\n{nested(2000)}\n</ConsumerHierarchy>\n" if where == "hierarchy" else
            f"<DistributionTree><ResourceGroupName>ComputeHosts</ResourceGroupName>\n{nested(2000)}\n"
            "</DistributionTree>\n")
    d = ego_dir(tmp_path / "ego", HEAD + body + "</ConsumerTrees>\n")
    r = subprocess.run([*CLI, "import", "ego", str(d), "-o", str(tmp_path / "plan.yaml")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr + r.stdout
    assert f"{d / 'ConsumerTrees.xml'}:4: <Consumer>: refused: elements nested more than {MAX_NESTING} " \
           "levels deep" in r.stderr, r.stderr[-2000:]
    assert len(r.stderr) < 2000
    assert not (tmp_path / "plan.yaml").exists()


def test_the_nesting_limit_is_exact(tmp_path):
    # ConsumerTrees > ConsumerHierarchy > unknown elements: MAX_NESTING levels in all are read
    # (the unknown elements are notes), one more is refused at the line of the first too deep
    # (line 3 is <ConsumerHierarchy>, 4 the consumer, and the first <X> on line 5 is level 3)
    def trees(levels: int) -> str:
        inner = levels - 2
        return (HEAD + '<ConsumerHierarchy>\n<Consumer ConsumerName="A"/>\n'
                + "<X>\n" * inner + "</X>\n" * inner + "</ConsumerHierarchy>\n</ConsumerTrees>\n")

    result = import_ego([ego_dir(tmp_path / "ok", trees(MAX_NESTING))])
    assert [c["path"] for c in result.plan["consumers"]] == ["/A"]
    [refused] = problems(ego_dir(tmp_path / "deep", trees(MAX_NESTING + 1)))
    assert refused.startswith(f"{tmp_path / 'deep' / 'ConsumerTrees.xml'}:{MAX_NESTING + 3}: <X>: refused: "
                              f"elements nested more than {MAX_NESTING} levels deep")


@pytest.mark.parametrize("hierarchy", [True, False])
def test_consumers_deeper_than_a_plan_allows_are_one_problem_at_the_first(tmp_path, hierarchy):
    chain = "\n".join(f'{"  " * i}<Consumer ConsumerName="c{i}">' for i in range(9)) + "\n" + "</Consumer>" * 9
    body = (f"<ConsumerHierarchy>\n{chain}\n</ConsumerHierarchy>\n" if hierarchy else "")
    body += f"<DistributionTree><ResourceGroupName>ComputeHosts</ResourceGroupName>\n{chain}\n</DistributionTree>\n"
    d = ego_dir(tmp_path / "ego", HEAD + body + "</ConsumerTrees>\n")
    got = problems(d)
    assert got == [f"{d / 'ConsumerTrees.xml'}:9: <Consumer>: consumer /c0/c1/c2/c3/c4/c5 is 6 levels deep; a plan "
                   "allows at most 5 levels below the root (the 3 consumer(s) below it are not read)"], got


def test_export_of_a_plan_two_thousand_levels_deep_names_it_once(tmp_path):
    lines = ["resource_groups:", '  - {name: all, select: "select(slots > 0)"}', "consumers:"]
    path = ""
    for i in range(2000):
        path += f"/c{i}"
        lines.append(f"  - {{path: {path}}}")
    plan = tmp_path / "deep.yaml"
    plan.write_text("\n".join(lines) + "\n")
    r = subprocess.run([*CLI, "export", "ego", str(plan), "-o", str(tmp_path / "ego")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr + r.stdout
    assert r.stderr.splitlines() == [
        f"1 problem(s) in {plan}:",
        f"{plan}:9: consumers[5].path: /c0/c1/c2/c3/c4/c5 is 6 levels deep; at most 5 levels below the root are "
        "allowed (the consumers below it are not reported again)"], r.stderr[:3000]
    assert not (tmp_path / "ego").exists()
