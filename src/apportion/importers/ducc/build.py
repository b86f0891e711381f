"""From the blocks of ``ducc.classes`` / ``ducc.users`` to nodepools, classes and users.

The rules DUCC documents, in apportion's reading:

* **Nodepools** do not inherit. ``parent`` makes a subpool; a pool without a
  parent is top-level. ``share-quantum`` (GB) is allowed on top-level pools
  only (default ``ducc.rm.share.quantum``), ``domain`` on the first pool
  only. ``search-order`` (default 100) orders sibling subpools, lower first.
  At most one pool may lack a ``nodefile``: it takes every known host that
  no node file names. With no such pool, those hosts go to the first
  top-level pool.
* **Classes** inherit: ``Class NAME PARENT { ... }`` (or ``parent = PARENT``)
  starts from everything PARENT has (its own settings and what it
  inherited), except ``abstract`` and ``default``, then applies its own.
  Settings not written anywhere come from the ``ducc.rm.*`` properties
  (``expand-by-doubling``, ``initialization-cap``, ``use-prediction``,
  ``prediction-fudge``) or fixed defaults (priority 10 / 5 / 1 for
  FAIR_SHARE / FIXED_SHARE / RESERVE, weight 100, enforce true).
* **Users** (``User NAME { ... }`` in ``ducc.classes`` or ``ducc.users``)
  carry ``max-allotment`` (GB, every non-preemptable class together) and
  ``max-allotment.CLASS`` (GB, one class).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apportion.engine.ducc.config import (
    DEFAULT_SEARCH_ORDER,
    DuccClass,
    DuccProperties,
    Policy,
    Source,
    User,
)
from apportion.importers.ducc.check import Where, check_tree, first_of_each
from apportion.importers.ducc.stanzas import Stanza
from apportion.importers.ducc.values import BadValue, read_bool, read_gb, read_int, suggest
from apportion.plan.errors import Problem

NODEPOOL_KEYS = ("nodefile", "parent", "domain", "search-order", "share-quantum")

_COMMON = ("policy", "nodepool", "priority", "abstract", "default", "parent", "users")
ALLOWED: Mapping[Policy, tuple[str, ...]] = {
    Policy.FAIR_SHARE: _COMMON + ("weight", "expand-by-doubling", "initialization-cap", "use-prediction",
                                  "prediction-fudge", "debug", "max-processes"),
    Policy.FIXED_SHARE: _COMMON + ("max-processes", "max-allotment"),
    Policy.RESERVE: _COMMON + ("max-machines", "max-allotment", "enforce"),
}
CLASS_KEYS = tuple(dict.fromkeys(k for keys in ALLOWED.values() for k in keys))
DEFAULT_PRIORITY = {Policy.FAIR_SHARE: 10, Policy.FIXED_SHARE: 5, Policy.RESERVE: 1}
DEFAULT_WEIGHT = 100

# DUCC key -> DuccClass field, for messages that point at a field
CLASS_FIELD = {
    "expand-by-doubling": "expand_by_doubling",
    "initialization-cap": "initialization_cap",
    "use-prediction": "use_prediction",
    "prediction-fudge": "prediction_fudge",
    "max-processes": "max_processes",
    "max-machines": "max_machines",
    "max-allotment": "max_allotment",
    "enforce": "enforce_memory",
}


def _label(stanza: Stanza, key: str | None = None) -> str:
    return stanza.label if key is None else f"{stanza.label}.{key}"


def _unknown(stanza: Stanza, key: str, what: str, known: Sequence[str], problems: list[Problem]) -> None:
    problems.append(Problem(stanza.file, stanza.pairs[key].line, _label(stanza, key),
                            f"unknown {what} setting; known: " + ", ".join(known) + suggest(key, known)))


# --- nodepools -------------------------------------------------------------


@dataclass
class PoolDraft:
    """A nodepool as written, before its hosts are known."""

    name: str
    parent: str | None
    nodefile: str | None
    search_order: int
    share_quantum: int | None  # as written (None: not written)
    where: Where
    stanza: Stanza
    nodes: list[str] = field(default_factory=list)


@dataclass
class PoolSet:
    pools: list[PoolDraft]  # unique names, definition order
    broken: set[str]  # pools whose parent is missing or loops
    damaged: set[str]  # Nodepool blocks that could not be read (only their names are known)
    domain: str | None = None

    def by_name(self) -> dict[str, PoolDraft]:
        return {p.name: p for p in self.pools}

    def quantum(self, name: str, props: DuccProperties) -> int | None:
        """The quantum of the top-level pool above ``name``; None when that cannot be followed."""
        pools = self.by_name()
        pool = pools.get(name)
        if pool is None or name in self.broken:
            return None
        while pool.parent is not None:
            pool = pools[pool.parent]
        return pool.share_quantum if pool.share_quantum is not None else props.share_quantum


def build_nodepools(stanzas: Sequence[Stanza], props: DuccProperties, problems: list[Problem]) -> PoolSet:
    drafts: list[PoolDraft] = []
    damaged: set[str] = set()
    domain: str | None = None
    for index, st in enumerate(stanzas):
        where = Where(st.file, st.line, st.label)
        if st.damaged:
            damaged.add(st.name)
            continue
        if st.parent is not None:
            problems.append(Problem(st.file, st.parent_line, st.label,
                                    f"nodepools do not inherit; write `parent = {st.parent}` inside the block "
                                    "to make a subpool"))
        values: dict[str, Any] = {}
        for key, pair in st.pairs.items():
            where.note(key.replace("-", "_"), st.file, pair.line, _label(st, key))
            if key not in NODEPOOL_KEYS:
                _unknown(st, key, "nodepool", NODEPOOL_KEYS, problems)
                continue
            try:
                if key == "search-order":
                    values[key] = read_int(pair.value)
                elif key == "share-quantum":
                    values[key] = read_gb(pair.value, minimum=1)
                else:
                    values[key] = pair.value
            except BadValue as exc:
                problems.append(Problem(st.file, pair.line, _label(st, key), str(exc)))
        if "domain" in values:
            if index == 0:
                domain = values["domain"]
            else:
                problems.append(where.problem("domain", f"`domain` may be set only in the first nodepool "
                                              f"({stanzas[0].name})"))
        where.fields.setdefault("parent", (st.file, st.line, _label(st, "parent")))
        drafts.append(PoolDraft(st.name, values.get("parent"), values.get("nodefile"),
                                values.get("search-order", DEFAULT_SEARCH_ORDER), values.get("share-quantum"),
                                where, st))
    first = first_of_each("nodepool", [d.name for d in drafts], [d.where for d in drafts], problems)
    unique = [drafts[i] for i in first.values()]
    wheres = {d.name: d.where for d in unique}
    broken = check_tree("Nodepool", [d.name for d in unique], {d.name: d.parent for d in unique}, wheres,
                        problems)
    for d in unique:
        if d.parent is not None and d.share_quantum is not None:
            problems.append(d.where.problem("share_quantum", "share-quantum may be set only on a top-level "
                                            "nodepool; a subpool uses its top-level pool's quantum"))
    without = [d for d in unique if d.nodefile is None]
    for d in without[1:]:
        problems.append(d.where.problem(None, f"nodepool {d.name} has no nodefile, and neither has "
                                        f"nodepool {without[0].name} ({without[0].where.place()}); only one "
                                        "nodepool may go without a nodefile (it takes every host no node "
                                        "file names)"))
    return PoolSet(unique, broken, damaged, domain)


# --- classes ---------------------------------------------------------------


_BAD = object()
"""The value of a setting that could not be read (its problem is already reported)."""


@dataclass(frozen=True, slots=True)
class Setting:
    value: Any
    file: str
    line: int
    owner: str  # the class whose block wrote it


def _read_class_value(key: str, text: str) -> Any:
    if key == "policy":
        try:
            return Policy(text.upper())
        except ValueError:
            names = [p.value for p in Policy]
            raise BadValue(f"{text!r} is not a policy; use FAIR_SHARE, FIXED_SHARE or RESERVE"
                           + suggest(text.upper(), names)) from None
    if key in ("nodepool", "debug", "parent"):
        return text
    if key == "priority":
        return read_int(text, minimum=0)
    if key == "weight":
        return read_int(text, minimum=1)
    if key in ("expand-by-doubling", "use-prediction", "abstract", "default", "enforce"):
        return read_bool(text)
    if key in ("initialization-cap", "prediction-fudge", "max-processes", "max-machines"):
        return read_int(text, minimum=0)
    if key == "max-allotment":
        return read_gb(text, minimum=0)
    if key == "users":  # DUCC 2: commas count as white space
        names = tuple(dict.fromkeys(n for n in re.split(r"[\s,]+", text) if n))
        if not names:
            raise BadValue(f"{text!r} names no user; write users = alice bob (or alice, bob)")
        return names
    raise AssertionError(key)


@dataclass
class ClassDraft:
    stanza: Stanza
    own: dict[str, Setting]
    parent: str | None


def build_classes(stanzas: Sequence[Stanza], props: DuccProperties, pools: PoolSet,
                  problems: list[Problem]) -> tuple[list[tuple[DuccClass, Where]], set[str]]:
    """Every class that could be resolved, with where it was written; and the names of those that could not."""
    drafts: list[ClassDraft] = []
    damaged = {st.name for st in stanzas if st.damaged}
    for st in stanzas:
        if st.damaged:
            continue
        own: dict[str, Setting] = {}
        for key, pair in st.pairs.items():
            if key not in CLASS_KEYS:
                _unknown(st, key, "class", CLASS_KEYS, problems)
                continue
            try:
                own[key] = Setting(_read_class_value(key, pair.value), st.file, pair.line, st.name)
            except BadValue as exc:
                problems.append(Problem(st.file, pair.line, _label(st, key), str(exc)))
                own[key] = Setting(_BAD, st.file, pair.line, st.name)
        parent = st.parent
        if "parent" in own:
            if parent is not None and own["parent"].value != parent:
                problems.append(Problem(st.file, own["parent"].line, _label(st, "parent"),
                                        f"the block header names parent {parent} but `parent` says "
                                        f"{own['parent'].value}; give one"))
            parent = own.pop("parent").value
        if parent is _BAD:
            parent = None
        drafts.append(ClassDraft(st, own, parent))

    first = first_of_each("class", [d.stanza.name for d in drafts],
                          [Where(d.stanza.file, d.stanza.line, d.stanza.label) for d in drafts], problems)
    unique = [drafts[i] for i in first.values()]
    by_name = {d.stanza.name: d for d in unique}
    wheres = {}
    for d in unique:
        w = Where(d.stanza.file, d.stanza.line, d.stanza.label)
        w.note("parent", d.stanza.file, d.stanza.parent_line or d.stanza.line, _label(d.stanza, "parent"))
        wheres[d.stanza.name] = w
    broken = check_tree("Class", list(by_name), {n: d.parent for n, d in by_name.items()}, wheres, problems)

    merged: dict[str, dict[str, Setting]] = {}

    def resolve(name: str) -> dict[str, Setting]:
        if name not in merged:
            d = by_name[name]
            base = {} if d.parent is None else {
                k: v for k, v in resolve(d.parent).items() if k not in ("abstract", "default")}
            base.update(d.own)
            merged[name] = base
        return merged[name]

    built: list[tuple[DuccClass, Where]] = []
    unresolved = set(broken) | damaged
    for d in unique:
        name = d.stanza.name
        if name in broken:
            continue
        cls = _make_class(d, resolve(name), props, pools, problems)
        if cls is None:
            unresolved.add(name)
        else:
            built.append(cls)
    return built, unresolved


def _make_class(d: ClassDraft, settings: dict[str, Setting], props: DuccProperties, pools: PoolSet,
                problems: list[Problem]) -> tuple[DuccClass, Where] | None:
    st = d.stanza
    where = Where(st.file, st.line, st.label)
    for key, s in settings.items():
        where.note(CLASS_FIELD.get(key, key), s.file, s.line, _label(st, key))

    def inherited(s: Setting) -> str:
        return "" if s.owner == st.name else f" (inherited from class {s.owner})"

    policy_setting = settings.get("policy")
    if policy_setting is None:
        problems.append(where.problem(None, "no policy: set policy = FAIR_SHARE, FIXED_SHARE or RESERVE "
                                      "(here or in a parent class)"))
        return None
    if policy_setting.value is _BAD:
        return None
    policy: Policy = policy_setting.value
    for key, s in settings.items():
        if key not in ALLOWED[policy]:  # reported; the class is still built (without it) and checked
            kinds = [p.value for p, keys in ALLOWED.items() if key in keys]
            problems.append(Problem(s.file, s.line, _label(st, key),
                                    f"applies only to {' and '.join(kinds)} classes, and {st.name} is "
                                    f"{policy.value}{inherited(s)}"))
    if "nodepool" not in settings:
        problems.append(where.problem(None, "no nodepool: set nodepool = NAME (here or in a parent class)"))
        return None

    def get(key: str, default: Any = None) -> Any:
        # a value that could not be read stands in as unset: the load fails on its problem anyway,
        # and the class can still be checked against the rest of the configuration
        s = settings.get(key)
        return default if s is None or s.value is _BAD else s.value

    nodepool = get("nodepool")
    max_allotment = None
    if policy is not Policy.FAIR_SHARE:
        gb = get("max-allotment", 0)
        if gb:
            quantum = pools.quantum(nodepool, props)
            if quantum is not None:
                if gb < quantum:
                    s = settings["max-allotment"]
                    problems.append(Problem(s.file, s.line, _label(st, "max-allotment"),
                                            f"{gb} GB is less than one quantum ({quantum} GB) of nodepool "
                                            f"{nodepool}{inherited(s)}; no request could ever fit"))
                    return None
                max_allotment = gb // quantum
    fair = policy is Policy.FAIR_SHARE
    cls = DuccClass(
        name=st.name,
        policy=policy,
        nodepool=nodepool,
        priority=get("priority", DEFAULT_PRIORITY[policy]),
        weight=get("weight", DEFAULT_WEIGHT) if fair else None,
        expand_by_doubling=get("expand-by-doubling", props.expand_by_doubling) if fair else None,
        initialization_cap=get("initialization-cap", props.initialization_cap) if fair else None,
        use_prediction=get("use-prediction", props.prediction) if fair else None,
        prediction_fudge=get("prediction-fudge", props.prediction_fudge) if fair else None,
        max_processes=(get("max-processes", 0) or None) if policy is not Policy.RESERVE else None,
        max_machines=(get("max-machines", 0) or None) if policy is Policy.RESERVE else None,
        enforce_memory=get("enforce", True) if policy is Policy.RESERVE else None,
        max_allotment=max_allotment,
        debug=get("debug") if fair else None,
        users=get("users"),
        abstract=get("abstract", False),
        default=get("default", False),
        parent=d.parent,
        source=Source(st.file, st.line),
    )
    return cls, where


# --- users -----------------------------------------------------------------


def build_users(stanzas: Sequence[Stanza], classes: Mapping[str, DuccClass], unresolved: set[str],
                quantum_of: Callable[[str], int | None],
                problems: list[Problem]) -> list[tuple[User, Where]]:
    """Users with their limits; a limit naming a class is converted to that class's quanta."""
    stanzas = [s for s in stanzas if not s.damaged]
    first = first_of_each("user", [s.name for s in stanzas],
                          [Where(s.file, s.line, s.label) for s in stanzas], problems)
    users: list[tuple[User, Where]] = []
    for index in first.values():
        st = stanzas[index]
        where = Where(st.file, st.line, st.label)
        overall: int | None = None
        per_class: dict[str, int] = {}
        for key, pair in st.pairs.items():
            label = _label(st, key)
            where.note(key, st.file, pair.line, label)
            if key != "max-allotment" and not key.startswith("max-allotment."):
                problems.append(Problem(st.file, pair.line, label, "unknown user setting; use max-allotment "
                                        "(GB, all non-preemptable classes) or max-allotment.CLASS (GB, one "
                                        "class)" + suggest(key, ["max-allotment"])))
                continue
            try:
                gb = read_gb(pair.value, minimum=0)
            except BadValue as exc:
                problems.append(Problem(st.file, pair.line, label, str(exc)))
                continue
            if key == "max-allotment":
                overall = gb or None
                continue
            cls_name = key[len("max-allotment."):]
            cls = classes.get(cls_name)
            if cls is None:
                if cls_name not in unresolved:  # an unreadable class is already reported
                    problems.append(Problem(st.file, pair.line, label, f"class {cls_name} is not defined"
                                            + suggest(cls_name, [*classes, *unresolved])))
                continue
            if cls.abstract:
                problems.append(Problem(st.file, pair.line, label,
                                        f"class {cls_name} is abstract (a template); no work runs in it"))
                continue
            if cls.policy.preemptable:
                problems.append(Problem(st.file, pair.line, label,
                                        f"class {cls_name} is FAIR_SHARE; allotments limit only "
                                        "non-preemptable (FIXED_SHARE, RESERVE) work"))
                continue
            if not gb:
                continue
            quantum = quantum_of(cls.nodepool)
            if quantum is None:
                continue
            if gb < quantum:
                problems.append(Problem(st.file, pair.line, label, f"{gb} GB is less than one quantum "
                                        f"({quantum} GB) of nodepool {cls.nodepool}"))
                continue
            per_class[cls_name] = gb // quantum
        users.append((User(st.name, overall, per_class, Source(st.file, st.line)), where))
    return users
