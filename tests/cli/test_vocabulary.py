"""One vocabulary, EGO's: the headers and labels of the CLI's tables and the console's pages use
the words of docs/policies.md's "Words" table, never the retired ones (owns/held, OWN/SHARE/ALLOC);
the JSON keeps its old keys and has the glossary's beside them."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from apportion.cli import live, render

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "apportion"
RETIRED = re.compile(r"\b(held|owns|OWN|SHARE|ALLOC|HELD|OWNS)\b")
# the human-facing code: the CLI's tables, the DUCC scenario's table, simulate's report
PY_FILES = [*sorted((SRC / "cli").glob("*.py")), SRC / "scenario" / "ducc_cli.py", SRC / "simulate" / "report.py"]


def glossary() -> set[str]:
    text = (ROOT / "docs" / "policies.md").read_text()
    section = text.split("\n## Words\n", 1)[1].split("\n## ", 1)[0]
    words = re.findall(r"^\| \*\*([\w-]+)\*\* \|", section, re.M)
    assert len(words) >= 8, words
    return set(words)


def test_the_glossary_names_the_canonical_words() -> None:
    assert {"owned", "allocated", "borrowed", "shared", "lent", "deserved", "demand", "shortfall"} <= glossary()
    assert not RETIRED.search(" ".join(glossary()))


def test_solve_and_live_headers_are_the_glossarys() -> None:
    words = glossary()
    assert set(render.COLUMNS.values()) <= words
    assert {c.lower() for c in live._SHARE_COLUMNS} <= words


def _solve(example: str) -> str:
    r = subprocess.run([sys.executable, "-m", "apportion.cli", "solve", example], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "TTY_COMPATIBLE": "0",
                                                   "PYTHONPATH": str(SRC.parent)})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_solve_prints_no_retired_word() -> None:
    """`apportion solve` on an EGO plan and a DUCC scenario, as a user reads it."""
    words = glossary()
    ego = _solve("examples/20-host-ownership.yaml")
    headers = [line.split() for line in ego.splitlines() if line.startswith("consumer ")]
    assert headers and all(set(h[1:]) <= words for h in headers), headers
    for text in (ego, _solve("examples/13-ducc-classes-reservations-fixed.yaml")):
        assert not RETIRED.search(text), RETIRED.search(text)


def _labels(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant that is not a JSON key (a subscript, a .get's key, a dict key)."""
    keys: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            keys.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args:
            keys.add(id(node.args[0]))
        elif isinstance(node, ast.Dict):
            keys.update(id(k) for k in node.keys if k is not None)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in keys:
            out.append((node.lineno, node.value))
    return out


def test_cli_labels_use_no_retired_word() -> None:
    bad = []
    for path in PY_FILES:
        for line, text in _labels(ast.parse(path.read_text())):
            # a docstring or help text may say "holds" as a verb; a header or label never says "held"
            if text in ("held", "HELD", "owns", "OWN", "SHARE", "ALLOC") or re.search(r"\b(OWN|ALLOC)\b", text):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
            elif RETIRED.search(text) and len(text) < 40 and "_" not in text:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not bad, "\n".join(bad)


def test_console_labels_use_no_retired_word() -> None:
    """Each table header ({ h: "..." }) and card label (card(key, "label", ...)) of the console's pages,
    and the visible text of index.html."""
    static = SRC / "console" / "static"
    bad, headers = [], set()
    for path in sorted(static.glob("*.js")):
        text = path.read_text()
        labels = re.findall(r'\{ h: "([^"]*)"', text) + re.findall(r'card\("[^"]*", "([^"]*)"', text)
        labels += re.findall(r'class="legend">([^:$<]*):', text)
        headers.update(labels)
        bad += [f"{path.name}: {x!r}" for x in labels if re.search(r"(?i)\b(held|owns|alloc)\b", x)]
    html = re.sub(r"<[^>]*>", " ", (static / "index.html").read_text())
    bad += [f"index.html: {m.group(0)!r}" for m in re.finditer(r"(?i)\b(held|owns)\b", html)]
    assert not bad, bad
    # the Consumers page's columns are the glossary's
    assert {"owned", "deserved", "allocated", "borrowed", "lent", "demand", "shortfall"} <= headers


def test_json_has_the_glossarys_keys_beside_the_old_ones() -> None:
    r = subprocess.run([sys.executable, "-m", "apportion.cli", "solve", "examples/20-host-ownership.yaml", "--json"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC.parent)})
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)["snapshots"][0]
    for line in snap["consumers"].values():
        assert line["allocated"] == line["held"]
        for g in line["groups"].values():
            assert (g["allocated"], g["allocated_owned"]) == (g["held"], g["owned"])
    assert all(r["allocated"] == r["held"] for r in snap["requests"].values())
    # the service's /v1/consumers: both keys, from one source
    src = (SRC / "service" / "api" / "cluster.py").read_text()
    assert '"held": gl.held' in src and '"allocated": gl.held' in src and '"allocated_owned": gl.owned' in src
