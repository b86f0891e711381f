"""The onion's shape, read from the source: the engine imports nothing from outside
``apportion.engine``, and no two engine modules import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import apportion.engine

ENGINE = Path(apportion.engine.__file__).parent


def _module(path: Path) -> str:
    rel = path.relative_to(ENGINE.parent.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every apportion module ``path`` imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("apportion"):
            base = ENGINE.parent.parent.joinpath(*node.module.split("."))
            for alias in node.names:  # `from apportion.engine import fastshares` imports a module
                if base.is_dir() and (base / f"{alias.name}.py").exists():
                    out.add(f"{node.module}.{alias.name}")
                else:
                    out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("apportion"))
    return out


GRAPH = {_module(p): _imports(p) for p in ENGINE.rglob("*.py")}


def test_the_graph_was_read():
    assert "apportion.engine.ducc.api" in GRAPH
    assert "apportion.engine.ducc.config" in GRAPH["apportion.engine.ducc.api"]


def test_the_engine_imports_nothing_from_outside():
    outward = {(m, d) for m, deps in GRAPH.items() for d in deps if not d.startswith("apportion.engine")}
    assert outward == set()


def test_no_two_engine_modules_import_each_other():
    mutual = {tuple(sorted((a, b))) for a, deps in GRAPH.items() for b in deps if b != a and a in GRAPH.get(b, ())}
    assert mutual == set()


def test_the_shares_and_the_ducc_cycle_are_apart():
    assert "apportion.engine.shares" not in GRAPH["apportion.engine.fastshares"]
    assert "apportion.engine.ducc.api" not in GRAPH["apportion.engine.ducc.cycle"]
    assert "apportion.engine.ducc.api" not in GRAPH["apportion.engine.ducc.world"]
