"""The onion's shape, read from the source: the engine imports nothing from outside
``apportion.engine``, and no two modules anywhere in ``apportion`` import each other
(at the top, inside a function, or for type checking only)."""

from __future__ import annotations

import ast
import graphlib
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


# --- every module of apportion ------------------------------------------------------------

PACKAGE = ENGINE.parent


def _every_module() -> dict[str, Path]:
    return {_module(p): p for p in PACKAGE.rglob("*.py")}


def _all_imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The apportion modules ``path`` imports anywhere in it, relative imports resolved;
    ``from PKG import NAME`` counts as the module ``PKG.NAME`` when there is one, else as ``PKG``."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod != "apportion" and not mod.startswith("apportion."):
                continue
            for alias in node.names:
                if f"{mod}.{alias.name}" in modules:
                    out.add(f"{mod}.{alias.name}")
                elif mod in modules:
                    out.add(mod)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                mod = alias.name
                while mod not in modules and "." in mod:
                    mod = mod.rsplit(".", 1)[0]
                if mod in modules and mod.startswith("apportion"):
                    out.add(mod)
    out.discard(name)
    return out


MODULES = _every_module()
EVERY = {name: _all_imports(name, path, MODULES) for name, path in MODULES.items()}


def _mutual(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {tuple(sorted((a, b))) for a, deps in graph.items() for b in deps if a in graph.get(b, ())}


def test_every_module_was_read_with_its_relative_and_late_imports():
    assert len(EVERY) == len(MODULES) > 100
    # a function-level import (the CLI imports the scenario runner when `solve` runs)
    assert "apportion.scenario.runner" in EVERY["apportion.cli.main"]
    # a type-checking-only import counts too
    assert "apportion.client._sync" in EVERY["apportion.client"]


def test_the_check_sees_a_pair(tmp_path):
    """The test below can fail: two modules that import each other, one of them late and relatively."""
    pkg = tmp_path / "apportion" / "demo"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from apportion.demo import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    modules = {"apportion.demo": pkg / "__init__.py", "apportion.demo.a": pkg / "a.py", "apportion.demo.b": pkg / "b.py"}
    graph = {name: _all_imports(name, path, modules) for name, path in modules.items()}
    assert _mutual(graph) == {("apportion.demo.a", "apportion.demo.b")}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError:
        pass
    else:
        raise AssertionError("graphlib found no cycle")


def test_no_two_modules_anywhere_import_each_other():
    assert _mutual(EVERY) == set()


def test_no_longer_import_cycle_either():
    """a -> b -> c -> a is as tangled as a pair: the modules' imports sort into layers."""
    try:
        graphlib.TopologicalSorter(EVERY).prepare()
    except graphlib.CycleError as e:
        raise AssertionError(f"an import cycle: {' -> '.join(e.args[1])}") from None
