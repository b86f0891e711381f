"""Checks on the meaning of a DUCC configuration, shared by both ways of reading one.

A configuration comes either from DUCC's own files (``ducc.classes`` and
friends) or from a plan's ``ducc:`` section. The two differ in syntax, but
the rules about names are the same: names are unique, parents exist and do
not loop, a class's nodepool exists, at most one default class per policy,
user limits name real non-preemptable classes. Those rules live here, and
each reader tells them where things were written through ``Where``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from apportion.engine.ducc.config import DuccClass, Policy, User
from apportion.importers.ducc.values import suggest
from apportion.plan.errors import Problem


@dataclass
class Where:
    """Where one nodepool, class or user was written, and where each of its fields was."""

    file: str
    line: int | None
    label: str  # "Class normal" or "ducc.classes[3]"
    fields: dict[str, tuple[str, int | None, str]] = field(default_factory=dict)  # field -> (file, line, label)

    def at(self, name: str | None = None) -> tuple[str, int | None, str]:
        if name is None:
            return self.file, self.line, self.label
        return self.fields.get(name, (self.file, self.line, f"{self.label}.{name}"))

    def problem(self, name: str | None, reason: str) -> Problem:
        file, line, label = self.at(name)
        return Problem(file, line, label, reason)

    def note(self, name: str, file: str, line: int | None, label: str) -> None:
        self.fields[name] = (file, line, label)

    def place(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


def first_of_each(kind: str, names: Sequence[str], wheres: Sequence[Where],
                  problems: list[Problem]) -> dict[str, int]:
    """name -> index of its first definition; every later definition is a problem."""
    first: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in first:
            earlier = wheres[first[name]]
            problems.append(wheres[index].problem(None, f"{kind} {name} is already defined at {earlier.place()}"))
        else:
            first[name] = index
    return first


def find_cycles(order: Iterable[str], parent_of: Callable[[str], str | None]) -> list[list[str]]:
    """Each loop of parent links once, as the list of its members starting from the earliest in ``order``."""
    order = list(order)
    rank = {name: i for i, name in enumerate(order)}
    state: dict[str, int] = {}  # 1: on the current walk, 2: done
    cycles: list[list[str]] = []
    for start in order:
        walk: list[str] = []
        name: str | None = start
        while name is not None and name in rank and state.get(name) is None:
            state[name] = 1
            walk.append(name)
            name = parent_of(name)
        if name is not None and state.get(name) == 1:
            loop = walk[walk.index(name):]
            first = min(range(len(loop)), key=lambda i: rank[loop[i]])
            cycles.append(loop[first:] + loop[:first])
        for member in walk:
            state[member] = 2
    return cycles


def check_tree(kind: str, names: Sequence[str], parents: Mapping[str, str | None],
               wheres: Mapping[str, Where], problems: list[Problem]) -> set[str]:
    """Missing parents and loops among ``names`` (unique); returns the names whose ancestry is broken."""
    broken: set[str] = set()
    known = set(names)
    for name in names:
        parent = parents[name]
        if parent is not None and parent not in known:
            problems.append(wheres[name].problem("parent", f"parent {kind.lower()} {parent} is not defined"
                                                 + suggest(parent, names)))
            broken.add(name)
    for loop in find_cycles(names, lambda n: parents.get(n)):
        chain = " -> ".join(loop + [loop[0]])
        problems.append(wheres[loop[0]].problem("parent", f"circular {kind.lower()} parents: {chain}"))
        broken.update(loop)
    # descendants of a broken name are broken too (their ancestry cannot be followed)
    changed = True
    while changed:
        changed = False
        for name in names:
            parent = parents[name]
            if name not in broken and parent is not None and parent in broken:
                broken.add(name)
                changed = True
    return broken


def check_classes(classes: Sequence[tuple[DuccClass, Where]], pool_names: Iterable[str] | None,
                  problems: list[Problem]) -> None:
    """Nodepools and debug classes named by classes exist; one default per policy; no abstract default.

    ``pool_names`` None means the nodepools could not all be read, so unknown
    nodepools are not reported (the unreadable one may be the one named).
    """
    pools = None if pool_names is None else list(pool_names)
    by_name = {c.name: c for c, _ in classes}
    defaults: dict[Policy, tuple[DuccClass, Where]] = {}
    for cls, where in classes:
        if pools is not None and cls.nodepool not in pools:
            problems.append(where.problem("nodepool", f"nodepool {cls.nodepool} is not defined"
                                          + suggest(cls.nodepool, pools)))
        if cls.debug is not None:
            target = by_name.get(cls.debug)
            if target is None:
                problems.append(where.problem("debug", f"debug class {cls.debug} is not defined"
                                              + suggest(cls.debug, by_name)))
            elif target.abstract:
                problems.append(where.problem("debug", f"debug class {cls.debug} is abstract (a template); "
                                              "name a class work can run in"))
        if cls.default:
            if cls.abstract:
                problems.append(where.problem("default", "an abstract class (a template) cannot be a default"))
                continue
            earlier = defaults.get(cls.policy)
            if earlier is not None:
                problems.append(where.problem("default", f"{cls.name} and {earlier[0].name} "
                                              f"({earlier[1].place()}) are both the default "
                                              f"{cls.policy.value} class; only one may be"))
            else:
                defaults[cls.policy] = (cls, where)


def check_user_classes(user: User, where: Where, classes: Mapping[str, DuccClass],
                       problems: list[Problem], *, label: Callable[[str], str],
                       unreadable: Iterable[str] = ()) -> None:
    """The classes a user's limits name exist and take non-preemptable work.

    Classes in ``unreadable`` exist but could not be read (their problems are
    reported already), so limits naming them are not reported again.
    """
    skip = set(unreadable)
    for cls_name in user.class_max_allotment:
        cls = classes.get(cls_name)
        key = label(cls_name)
        if cls is None and cls_name in skip:
            continue
        if cls is None:
            problems.append(where.problem(key, f"class {cls_name} is not defined" + suggest(cls_name, classes)))
        elif cls.abstract:
            problems.append(where.problem(key, f"class {cls_name} is abstract (a template); no work runs in it"))
        elif cls.policy.preemptable:
            problems.append(where.problem(key, f"class {cls_name} is FAIR_SHARE; allotments limit only "
                                          "non-preemptable (FIXED_SHARE, RESERVE) work"))
