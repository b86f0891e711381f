"""``load_ducc``: a directory of DUCC files (or the files named one by one) -> ``DuccConfig``.

What is read, and from where:

==========================  ===========================================  =========================================
item                        given explicitly                             found in ``directory``
==========================  ===========================================  =========================================
class configuration         ``classes=``                                 ``ducc.classes``; neither: apportion's own
                                                                         default configuration (one ``--default--``
                                                                         nodepool, DUCC's default classes)
user registry               ``users=``                                   ``ducc.users`` (optional)
``ducc.rm.*`` properties    ``properties_files=``, then ``properties=``  ``ducc.properties``, ``site.ducc.properties``
extra node lists            ``nodes=``                                   every ``*.nodes`` file no nodepool reads
host memory (GB)            ``memory=``                                  simulated-cluster files
==========================  ===========================================  =========================================

A nodepool's ``nodefile`` is read relative to the class configuration's
directory (DUCC reads it from its resources directory, where
``ducc.classes`` lives). Extra node lists only say which hosts exist; those
no nodepool's node file names go to the nodepool without a node file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from apportion.engine.ducc.config import DuccConfig, Memory, Nodepool, Source
from apportion.importers.ducc.build import PoolSet, build_classes, build_nodepools, build_users
from apportion.importers.ducc.check import check_classes
from apportion.importers.ducc.nodes import NodeEntry, NodeList, read_node_file
from apportion.importers.ducc.properties import load_properties
from apportion.importers.ducc.stanzas import parse_stanzas
from apportion.importers.ducc.values import BadValue, number_memory
from apportion.plan.errors import KeyPath, PlanError, Positions, Problem

PathLike = str | os.PathLike[str]

CLASSES_FILE = "ducc.classes"
USERS_FILE = "ducc.users"
PROPERTIES_FILES = ("ducc.properties", "site.ducc.properties")


def default_classes_text() -> tuple[str, str]:
    """apportion's own default class configuration: (text, a name for messages)."""
    res = resources.files("apportion.importers.ducc").joinpath("defaults", CLASSES_FILE)
    return res.read_text(encoding="utf-8"), str(res)


def load_ducc(
    directory: PathLike | None = None,
    *,
    classes: PathLike | None = None,
    users: PathLike | None = None,
    nodes: PathLike | Sequence[PathLike] | None = None,
    properties_files: Sequence[PathLike] | None = None,
    properties: Mapping[str, Any] | None = None,
    memory: Mapping[str, Memory] | None = None,
    properties_source: str = "<properties>",
    properties_positions: Positions | None = None,
    properties_path: KeyPath = (),
    memory_source: str = "<memory>",
) -> DuccConfig:
    """Read a DUCC configuration; raise ``PlanError`` listing every problem found.

    ``properties`` are ``ducc.rm.*`` overrides under DUCC's own keys (as in a
    scenario's ``ducc: {properties: ...}``); problems with them are reported
    against ``properties_source`` at the lines ``properties_positions`` gives
    for ``properties_path + (key,)``. ``memory`` maps host names to GB and
    wins over memory sizes found in simulated-cluster files. ``directory`` may
    also name a class configuration file; its directory is then searched for
    the rest.
    """
    problems: list[Problem] = []
    base = Path(directory) if directory is not None else None
    if base is not None and base.is_file() and classes is None:
        classes, base = base, base.parent  # a ducc.classes file named instead of its directory
    if base is not None and not base.is_dir():
        raise PlanError([Problem(str(base), None, "directory", "no such directory")])

    def found(name: str) -> Path | None:
        if base is None:
            return None
        path = base / name
        return path if path.is_file() else None

    classes_path = Path(classes) if classes is not None else found(CLASSES_FILE)
    users_path = Path(users) if users is not None else found(USERS_FILE)
    if properties_files is not None:
        prop_paths = [Path(p) for p in properties_files]
    else:
        prop_paths = [p for p in (found(n) for n in PROPERTIES_FILES) if p is not None]

    props = load_properties(prop_paths, properties, problems, source=properties_source,
                            positions=properties_positions, path=properties_path)

    # the class configuration (and any users it registers)
    if classes_path is None:
        text, label = default_classes_text()
        nodefile_dir = base if base is not None else Path(".")
    else:
        label = str(classes_path)
        text = _read_text(classes_path, problems)
        nodefile_dir = classes_path.parent
    stanzas, syntax = parse_stanzas(text or "", label)
    problems.extend(syntax)
    if users_path is not None:
        user_text = _read_text(users_path, problems)
        user_stanzas, syntax = parse_stanzas(user_text or "", str(users_path), kinds=("User",))
        problems.extend(syntax)
    else:
        user_stanzas = []

    pool_stanzas = [s for s in stanzas if s.kind == "Nodepool"]
    if text is not None and not pool_stanzas:
        problems.append(Problem(label, None, "Nodepool", "no nodepool is defined; at least one is needed "
                                "(`Nodepool --default-- { }` takes every host)"))
    pools = build_nodepools(pool_stanzas, props, problems)

    # hosts: the nodepools' node files, then the other node lists, then given memory sizes
    pool_lists: dict[str, NodeList] = {}
    pool_files: set[Path] = set()
    for pool in pools.pools:
        if pool.nodefile is None:
            continue
        path = nodefile_dir / pool.nodefile
        if not path.is_file():
            problems.append(pool.where.problem("nodefile", f"{pool.nodefile}: no such file (looked in "
                                               f"{nodefile_dir})"))
            continue
        pool_lists[pool.name] = read_node_file(path, problems)
        pool_files.update(pool_lists[pool.name].files)

    if nodes is not None:
        master_paths = [Path(nodes)] if isinstance(nodes, str | os.PathLike) else [Path(p) for p in nodes]
        for path in master_paths:
            if not path.is_file():
                problems.append(Problem(str(path), None, "file", "no such file"))
        master_paths = [p for p in master_paths if p.is_file()]
    elif base is not None:
        master_paths = [p for p in sorted(base.glob("*.nodes")) if p.is_file() and p.resolve() not in pool_files]
    else:
        master_paths = []
    masters = [read_node_file(p, problems) for p in master_paths]

    host_memory = _assign_hosts(pools, pool_lists, masters, memory, memory_source, problems)

    # classes and users
    built, unresolved = build_classes([s for s in stanzas if s.kind == "Class"], props, pools, problems)
    check_classes(built, [p.name for p in pools.pools] + sorted(pools.damaged), problems)
    classes_by_name = {c.name: c for c, _ in built}
    users_built = build_users([s for s in stanzas if s.kind == "User"] + user_stanzas, classes_by_name,
                              unresolved, lambda pool: pools.quantum(pool, props), problems)
    if problems:
        raise PlanError(problems)

    nodepools = {
        p.name: Nodepool(
            name=p.name,
            parent=p.parent,
            nodes=tuple(p.nodes),
            share_quantum=(p.share_quantum or props.share_quantum) if p.parent is None else None,
            search_order=p.search_order,
            nodefile=p.nodefile,
            source=Source(p.where.file, p.where.line),
        )
        for p in pools.pools
    }
    return DuccConfig(
        nodepools=nodepools,
        classes=classes_by_name,
        users={u.name: u for u, _ in users_built},
        properties=props,
        hosts=host_memory,
        domain=pools.domain,
    )


def _read_text(path: Path, problems: list[Problem]) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(str(path), None, "file", f"not UTF-8 text ({exc.reason})"))
    except OSError as exc:
        problems.append(Problem(str(path), None, "file", f"cannot read: {exc.strerror or exc}"))
    return None


def _same_place(a: NodeEntry, b: NodeEntry) -> bool:
    """One line read twice (a node file imported by another and found in the directory too)."""
    return a.line == b.line and (a.file == b.file or Path(a.file).resolve() == Path(b.file).resolve())


def _assign_hosts(pools: PoolSet, pool_lists: Mapping[str, NodeList], masters: Iterable[NodeList],
                  memory: Mapping[str, Any] | None, memory_source: str,
                  problems: list[Problem]) -> dict[str, Memory | None]:
    """Every known host with its memory; fills each pool's ``nodes``. Nodepools may not overlap."""
    hosts: dict[str, Memory | None] = {}
    memory_from: dict[str, str] = {}

    def see(entry: NodeEntry) -> None:
        name, mem = entry.name, entry.memory
        if name not in hosts or (mem is not None and hosts[name] is None):
            hosts[name] = mem
        elif mem is not None and hosts[name] != mem:
            problems.append(Problem(entry.file, entry.line, "host", f"{name} has {mem} GB here but "
                                    f"{hosts[name]} GB at {memory_from[name]}"))
            return
        if mem is not None:
            memory_from.setdefault(name, f"{entry.file}:{entry.line}")

    named: dict[str, NodeEntry] = {}  # host -> where a node list first names it
    for master in masters:
        for entry in master.hosts:
            first = named.setdefault(entry.name, entry)
            if first is not entry and not _same_place(first, entry):
                if None not in (first.memory, entry.memory) and first.memory != entry.memory:
                    see(entry)  # the memory sizes disagree: said with both places
                else:
                    problems.append(Problem(entry.file, entry.line, "host", f"{entry.name} is named twice: here "
                                            f"and at {first.file}:{first.line}; a node is listed once in the "
                                            "node files"))
                continue
            see(entry)

    placed: dict[str, tuple[str, str]] = {}  # host -> (pool, "file:line")
    for pool in pools.pools:
        node_list = pool_lists.get(pool.name)
        if node_list is None:
            continue
        for entry in node_list.hosts:
            at = f"{entry.file}:{entry.line}"
            see(entry)
            owner = placed.get(entry.name)
            if owner is None:
                placed[entry.name] = (pool.name, at)
                pool.nodes.append(entry.name)
            elif owner[0] == pool.name:
                problems.append(Problem(entry.file, entry.line, "host", f"{entry.name} is listed twice for "
                                        f"nodepool {pool.name} (first at {owner[1]})"))
            else:
                problems.append(Problem(entry.file, entry.line, "host", f"{entry.name} is already in nodepool "
                                        f"{owner[0]} ({owner[1]}); nodepools may not overlap"))

    for name, value in (memory or {}).items():
        try:
            hosts[name] = number_memory(value)
        except BadValue as exc:
            problems.append(Problem(memory_source, None, f"memory.{name}", str(exc)))

    regex_pools = [(pool, pool_lists[pool.name].regexes) for pool in pools.pools
                   if pool.name in pool_lists and pool_lists[pool.name].regexes]
    for name in hosts:
        if name in placed or not regex_pools:
            continue
        matches = []  # (pool, the first of its expressions that matches)
        for pool, regexes in regex_pools:
            hit = next((r for r in regexes if r.pattern.fullmatch(name)), None)
            if hit is not None:
                matches.append((pool, hit))
        if len(matches) > 1:
            (p1, r1), (p2, r2) = matches[0], matches[1]
            problems.append(Problem(r2.file, r2.line, "regex", f"host {name} matches the node files of both "
                                    f"nodepool {p1.name} ({r1.file}:{r1.line}) and nodepool {p2.name}; "
                                    "nodepools may not overlap"))
        elif matches:
            placed[name] = (matches[0][0].name, f"{matches[0][1].file}:{matches[0][1].line}")
            matches[0][0].nodes.append(name)

    target = next((p for p in pools.pools if p.nodefile is None), None)
    if target is None:
        target = next((p for p in pools.pools if p.parent is None), None)
    if target is not None:
        target.nodes.extend(name for name in hosts if name not in placed)
    return hosts
