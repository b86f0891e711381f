"""A ``DuccConfig`` as a plan's ``ducc:`` section, and back.

``plan_mapping`` gives ``{"hosts": [...], "ducc": {...}}``: the hosts with
their memory, and the DUCC configuration with every setting spelled out.
``dump_plan_yaml`` writes it as YAML. ``ducc_config_from_mapping`` reads a
``ducc:`` section (written by this module or by hand) and checks it as
strictly as the plan loader checks the rest of a plan: unknown keys, wrong
types and broken references are all reported, with lines when the caller
passes the positions of the parsed document. The format is in
docs/ducc-import.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from apportion.engine.ducc.config import (
    DEFAULT_SEARCH_ORDER,
    PROPERTY_KEYS,
    DuccClass,
    DuccConfig,
    DuccProperties,
    Memory,
    Nodepool,
    Policy,
    Source,
    User,
)
from apportion.importers.ducc.check import Where, check_classes, check_tree, check_user_classes, first_of_each
from apportion.importers.ducc.properties import apply_overrides
from apportion.importers.ducc.values import BadValue, number_memory, suggest
from apportion.plan.errors import KeyPath, PlanError, Positions, Reporter, format_field, line_of
from apportion.plan.hostnames import expand_hosts
from apportion.plan.schema import kind_of

SECTION_KEYS = ("properties", "domain", "nodepools", "classes", "users")
NODEPOOL_FIELDS = ("name", "parent", "share_quantum", "search_order", "nodefile", "nodes")
CLASS_FIELDS = ("name", "policy", "nodepool", "priority", "weight", "expand_by_doubling", "initialization_cap",
                "use_prediction", "prediction_fudge", "max_processes", "max_machines", "enforce_memory",
                "max_allotment", "debug", "users", "abstract", "default", "parent")
USER_FIELDS = ("name", "max_allotment_gb", "class_max_allotment")

# which class fields apply to which policies (the rest must be null or left out)
_FAIR_ONLY = ("weight", "expand_by_doubling", "initialization_cap", "use_prediction", "prediction_fudge", "debug")
_APPLIES: dict[str, tuple[Policy, ...]] = {
    **{f: (Policy.FAIR_SHARE,) for f in _FAIR_ONLY},
    "max_processes": (Policy.FAIR_SHARE, Policy.FIXED_SHARE),
    "max_machines": (Policy.RESERVE,),
    "enforce_memory": (Policy.RESERVE,),
    "max_allotment": (Policy.FIXED_SHARE, Policy.RESERVE),
}
_DEFAULT_PRIORITY = {Policy.FAIR_SHARE: 10, Policy.FIXED_SHARE: 5, Policy.RESERVE: 1}


# --- writing ---------------------------------------------------------------


def config_to_mapping(cfg: DuccConfig) -> dict[str, Any]:
    """The ``ducc:`` section: every nodepool, class and user with every setting written out."""
    section: dict[str, Any] = {"properties": cfg.properties.to_ducc_keys()}
    if cfg.domain is not None:
        section["domain"] = cfg.domain
    section["nodepools"] = [
        {
            "name": np.name,
            "parent": np.parent,
            "share_quantum": np.share_quantum,
            "search_order": np.search_order,
            "nodefile": np.nodefile,
            "nodes": list(np.nodes),
        }
        for np in cfg.nodepools.values()
    ]
    section["classes"] = [
        {
            "name": c.name,
            "policy": c.policy.value,
            "nodepool": c.nodepool,
            "priority": c.priority,
            "weight": c.weight,
            "expand_by_doubling": c.expand_by_doubling,
            "initialization_cap": c.initialization_cap,
            "use_prediction": c.use_prediction,
            "prediction_fudge": c.prediction_fudge,
            "max_processes": c.max_processes,
            "max_machines": c.max_machines,
            "enforce_memory": c.enforce_memory,
            "max_allotment": c.max_allotment,
            "debug": c.debug,
            "users": None if c.users is None else list(c.users),
            "abstract": c.abstract,
            "default": c.default,
            "parent": c.parent,
        }
        for c in cfg.classes.values()
    ]
    section["users"] = [
        {"name": u.name, "max_allotment_gb": u.max_allotment_gb, "class_max_allotment": dict(u.class_max_allotment)}
        for u in cfg.users.values()
    ]
    return section


def hosts_list(cfg: DuccConfig) -> list[dict[str, Any]]:
    """The plan's ``hosts:`` entries: each host with its memory (left out when not known)."""
    return [{"name": name} if mem is None else {"name": name, "memory": mem} for name, mem in cfg.hosts.items()]


def plan_mapping(cfg: DuccConfig) -> dict[str, Any]:
    """A plan holding ``cfg``: ``{"hosts": [...], "ducc": {...}}``."""
    return {"hosts": hosts_list(cfg), "ducc": config_to_mapping(cfg)}


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no anchors or aliases, even where a value repeats."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


class _FlowMap(dict):
    """A mapping written on one line: ``{name: h1, memory: 31}``."""


class _FlowList(list):
    """A list of scalars written in brackets: ``[h1, h2, h3]``."""


_Dumper.add_representer(_FlowMap, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))
_Dumper.add_representer(_FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def dump_plan_yaml(cfg: DuccConfig, header: Sequence[str] = ()) -> str:
    """``plan_mapping(cfg)`` as YAML: short lists and host entries in flow style, the rest in blocks."""
    plan = plan_mapping(cfg)
    plan["hosts"] = [_FlowMap(h) for h in plan["hosts"]]
    for pool in plan["ducc"]["nodepools"]:
        pool["nodes"] = _FlowList(pool["nodes"])
    for cls in plan["ducc"]["classes"]:
        if cls["users"] is not None:
            cls["users"] = _FlowList(cls["users"])
    for user in plan["ducc"]["users"]:
        user["class_max_allotment"] = _FlowMap(user["class_max_allotment"])
    text = yaml.dump(plan, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=100)
    lead = "".join(f"# {line}\n" if line else "#\n" for line in header)
    return lead + text


# --- reading ---------------------------------------------------------------


def ducc_config_from_plan(
    plan: Mapping[str, Any], *, source: str = "<plan>", positions: Positions | None = None
) -> DuccConfig:
    """The ``ducc:`` section of a whole plan mapping, with host memory from its ``hosts:`` list."""
    reporter = Reporter(source, positions)
    hosts: dict[str, Memory | None] = {}
    items = plan.get("hosts") or []
    if not isinstance(items, list):
        reporter.add(("hosts",), "expected a list of hosts")
        items = []
    for index, item in enumerate(items):
        where = ("hosts", index)
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            reporter.add(where, "expected a mapping with a `name`")
            continue
        try:
            names = expand_hosts(item["name"])
        except ValueError as exc:
            reporter.add(where + ("name",), str(exc))
            continue
        memory = None
        if item.get("memory") is not None:
            try:
                memory = number_memory(item["memory"])
            except BadValue as exc:
                reporter.add(where + ("memory",), str(exc))
        for name in names:
            hosts[name] = memory
    if "ducc" not in plan:
        reporter.add(("ducc",), "the plan has no ducc: section")
    reporter.raise_if_any()
    return ducc_config_from_mapping(plan["ducc"], hosts, source=source, positions=positions, path=("ducc",))


def ducc_config_from_mapping(
    section: Any,
    hosts: Mapping[str, Memory | None] | None = None,
    *,
    source: str = "<ducc>",
    positions: Positions | None = None,
    path: KeyPath = ("ducc",),
) -> DuccConfig:
    """Read a plan's ``ducc:`` section; raise ``PlanError`` with every problem found.

    ``hosts`` (name -> memory GB or None) are the plan's hosts: when given,
    every host a nodepool names must be one of them, and the configuration's
    ``hosts`` are exactly these. When None, the configuration's hosts are the
    nodepools' hosts, with unknown memory. ``positions`` and ``path`` locate
    the section in the parsed file, so problems carry lines.
    """
    return _SectionReader(source, positions, path).read(section, hosts)


class _SectionReader:
    def __init__(self, source: str, positions: Positions | None, path: KeyPath) -> None:
        self.reporter = Reporter(source, positions)
        self.source = source
        self.positions = positions
        self.path = path

    # helpers -------------------------------------------------------------

    def add(self, path: KeyPath, reason: str) -> None:
        self.reporter.add(self.path + path, reason)

    def where(self, path: KeyPath, fields: Sequence[str]) -> Where:
        full = self.path + path
        where = Where(self.source, line_of(self.positions, full), format_field(full))
        for name in fields:
            where.note(name, self.source, line_of(self.positions, full + (name,)), format_field(full + (name,)))
        return where

    def mapping(self, value: Any, path: KeyPath, allowed: Sequence[str], required: Sequence[str] = ()) -> bool:
        if not isinstance(value, Mapping):
            self.add(path, f"expected a mapping, got {kind_of(value)}")
            return False
        ok = True
        for key in value:
            if key not in allowed:
                self.add(path + (str(key),), "unknown field; known: " + ", ".join(allowed)
                         + suggest(str(key), allowed))
                ok = False
        for key in required:
            if key not in value:
                self.add(path, f"missing required field `{key}`")
                ok = False
        return ok

    def items(self, value: Any, path: KeyPath) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(path, f"expected a list, got {kind_of(value)}")
            return []
        return value

    def name(self, value: Any, path: KeyPath, optional: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value or any(ch.isspace() for ch in value):
            self.add(path, f"expected a name (a non-empty string without spaces), got {value!r}")
            return None
        return value

    def integer(self, value: Any, path: KeyPath, minimum: int | None,
                optional: bool = True) -> tuple[bool, int | None]:
        if value is None:
            if not optional:
                self.add(path, "may not be null")
                return False, None
            return True, None
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(path, f"expected a whole number, got {value!r}")
            return False, None
        if minimum is not None and value < minimum:
            self.add(path, f"{value} is below the least allowed value, {minimum}")
            return False, None
        return True, value

    def boolean(self, value: Any, path: KeyPath) -> tuple[bool, bool | None]:
        if value is None:
            return True, None
        if not isinstance(value, bool):
            self.add(path, f"expected true or false, got {value!r}")
            return False, None
        return True, value

    # the section -----------------------------------------------------------

    def read(self, section: Any, hosts: Mapping[str, Memory | None] | None) -> DuccConfig:
        problems = self.reporter.problems
        self.mapping(section, (), SECTION_KEYS)
        if not isinstance(section, Mapping):
            self.reporter.raise_if_any()
        props = apply_overrides(DuccProperties(), section.get("properties"), self.reporter, self.path + ("properties",))
        domain = self.name(section.get("domain"), ("domain",), optional=True)
        pools, pool_wheres, pools_ok = self.nodepools(section.get("nodepools"), props, hosts)
        classes, class_wheres, broken_classes = self.classes(section.get("classes"), props)
        check_classes(list(zip(classes, class_wheres, strict=True)), None if not pools_ok else
                      [p.name for p in pools], problems)
        class_map = {c.name: c for c in classes}
        for cls, where in zip(classes, class_wheres, strict=True):
            if cls.parent is not None and cls.parent not in class_map and cls.parent not in broken_classes:
                problems.append(where.problem("parent", f"parent class {cls.parent} is not defined"
                                              + suggest(cls.parent, class_map)))
        users = self.users(section.get("users"), class_map, broken_classes)
        if problems:
            raise PlanError(problems)
        if hosts is None:
            host_map: dict[str, Memory | None] = {h: None for p in pools for h in p.nodes}
        else:
            host_map = dict(hosts)
        return DuccConfig(nodepools={p.name: p for p in pools}, classes=class_map,
                          users={u.name: u for u in users}, properties=props, hosts=host_map, domain=domain)

    def nodepools(self, value: Any, props: DuccProperties,
                  hosts: Mapping[str, Memory | None] | None) -> tuple[list[Nodepool], list[Where], bool]:
        problems = self.reporter.problems
        raw: list[dict[str, Any]] = []
        wheres: list[Where] = []
        complete = True
        items = self.items(value, ("nodepools",))
        if value is not None and not items and isinstance(value, list):
            self.add(("nodepools",), "at least one nodepool is needed")
        for index, item in enumerate(items):
            path = ("nodepools", index)
            self.mapping(item, path, NODEPOOL_FIELDS, ("name",))
            if not isinstance(item, Mapping):
                complete = False
                continue
            name = self.name(item.get("name"), path + ("name",))
            if name is None:
                complete = False
                continue
            entry: dict[str, Any] = {"name": name, "index": index}
            entry["parent"] = self.name(item.get("parent"), path + ("parent",), optional=True)
            _, entry["share_quantum"] = self.integer(item.get("share_quantum"), path + ("share_quantum",), 1)
            _, order = self.integer(item.get("search_order"), path + ("search_order",), None)
            entry["search_order"] = DEFAULT_SEARCH_ORDER if order is None else order
            entry["nodefile"] = self.name(item.get("nodefile"), path + ("nodefile",), optional=True)
            entry["nodes"] = self.node_names(item.get("nodes"), path + ("nodes",), hosts)
            raw.append(entry)
            wheres.append(self.where(path, NODEPOOL_FIELDS))
        if value is None:
            self.add(("nodepools",), "missing: at least one nodepool is needed")
        first = first_of_each("nodepool", [e["name"] for e in raw], wheres, problems)
        unique = [raw[i] for i in first.values()]
        uwheres = [wheres[i] for i in first.values()]
        by_name = {e["name"]: w for e, w in zip(unique, uwheres, strict=True)}
        check_tree("Nodepool", [e["name"] for e in unique], {e["name"]: e["parent"] for e in unique}, by_name,
                   problems)
        owner: dict[str, str] = {}
        pools: list[Nodepool] = []
        for entry, where in zip(unique, uwheres, strict=True):
            quantum = entry["share_quantum"]
            if entry["parent"] is not None and quantum is not None:
                problems.append(where.problem("share_quantum", "only a top-level nodepool has a share_quantum; "
                                              "a subpool uses its top-level pool's"))
            if entry["parent"] is None and quantum is None:
                quantum = props.share_quantum
            for host in entry["nodes"]:
                if host in owner:
                    problems.append(where.problem("nodes", f"host {host} is already in nodepool {owner[host]}; "
                                                  "nodepools may not overlap"))
                else:
                    owner[host] = entry["name"]
            pools.append(Nodepool(entry["name"], entry["parent"], tuple(entry["nodes"]),
                                  quantum if entry["parent"] is None else None, entry["search_order"],
                                  entry["nodefile"], Source(where.file, where.line)))
        return pools, uwheres, complete

    def node_names(self, value: Any, path: KeyPath, hosts: Mapping[str, Memory | None] | None) -> list[str]:
        names: list[str] = []
        seen: set[str] = set()
        for index, item in enumerate(self.items(value, path)):
            if not isinstance(item, str):
                self.add(path + (index,), f"expected a host name, got {item!r}")
                continue
            try:
                expanded = expand_hosts(item)
            except ValueError as exc:
                self.add(path + (index,), str(exc))
                continue
            for host in expanded:
                if host in seen:
                    self.add(path + (index,), f"host {host} is listed twice")
                    continue
                if hosts is not None and host not in hosts:
                    self.add(path + (index,), f"host {host} is not one of the plan's hosts" + suggest(host, hosts))
                    continue
                seen.add(host)
                names.append(host)
        return names

    def classes(self, value: Any, props: DuccProperties) -> tuple[list[DuccClass], list[Where], set[str]]:
        """The classes that could be read, where each was written, and the names of those that could not."""
        names: list[str] = []
        wheres: list[Where] = []
        results: list[DuccClass | None] = []
        for index, item in enumerate(self.items(value, ("classes",))):
            path = ("classes", index)
            self.mapping(item, path, CLASS_FIELDS, ("name", "policy", "nodepool"))
            if not isinstance(item, Mapping):
                continue
            cls = self.one_class(item, path, props)
            if isinstance(item.get("name"), str):
                names.append(item["name"])
                wheres.append(self.where(path, CLASS_FIELDS))
                results.append(cls)
        if value is None:
            self.add(("classes",), "missing: list the classes (an empty list is allowed)")
        first = first_of_each("class", names, wheres, self.reporter.problems)
        keep = [i for i in first.values() if results[i] is not None]
        broken = {names[i] for i in first.values() if results[i] is None}
        return [results[i] for i in keep], [wheres[i] for i in keep], broken  # type: ignore[misc]

    def one_class(self, item: Mapping[str, Any], path: KeyPath, props: DuccProperties) -> DuccClass | None:
        before = len(self.reporter.problems)
        name = self.name(item.get("name"), path + ("name",))
        policy = None
        if "policy" in item:
            try:
                policy = Policy(item["policy"])
            except ValueError:
                self.add(path + ("policy",), f"{item['policy']!r} is not FAIR_SHARE, FIXED_SHARE or RESERVE")
        nodepool = self.name(item.get("nodepool"), path + ("nodepool",)) if "nodepool" in item else None
        ints = {}
        for fld, minimum in (("priority", 0), ("weight", 1), ("initialization_cap", 0), ("prediction_fudge", 0),
                             ("max_processes", 1), ("max_machines", 1), ("max_allotment", 1)):
            _, ints[fld] = self.integer(item.get(fld), path + (fld,), minimum)
        bools = {}
        for fld in ("expand_by_doubling", "use_prediction", "enforce_memory", "abstract", "default"):
            _, bools[fld] = self.boolean(item.get(fld), path + (fld,))
        debug = self.name(item.get("debug"), path + ("debug",), optional=True)
        parent = self.name(item.get("parent"), path + ("parent",), optional=True)
        users = None
        if item.get("users") is not None:
            users = tuple(n for n in (self.name(u, path + ("users", i))
                                      for i, u in enumerate(self.items(item["users"], path + ("users",))))
                          if n is not None)
        if policy is not None:
            for fld, policies in _APPLIES.items():
                if item.get(fld) is not None and policy not in policies:
                    self.add(path + (fld,), f"applies only to {' and '.join(p.value for p in policies)} classes; "
                             f"this class is {policy.value} (write null or leave it out)")
        if len(self.reporter.problems) > before or name is None or policy is None or nodepool is None:
            return None
        fair = policy is Policy.FAIR_SHARE

        def pick(value: Any, default: Any) -> Any:
            return default if value is None else value

        return DuccClass(
            name=name,
            policy=policy,
            nodepool=nodepool,
            priority=pick(ints["priority"], _DEFAULT_PRIORITY[policy]),
            weight=pick(ints["weight"], 100) if fair else None,
            expand_by_doubling=pick(bools["expand_by_doubling"], props.expand_by_doubling) if fair else None,
            initialization_cap=pick(ints["initialization_cap"], props.initialization_cap) if fair else None,
            use_prediction=pick(bools["use_prediction"], props.prediction) if fair else None,
            prediction_fudge=pick(ints["prediction_fudge"], props.prediction_fudge) if fair else None,
            max_processes=ints["max_processes"],
            max_machines=ints["max_machines"],
            enforce_memory=pick(bools["enforce_memory"], True) if policy is Policy.RESERVE else None,
            max_allotment=ints["max_allotment"],
            debug=debug,
            users=users,
            abstract=pick(bools["abstract"], False),
            default=pick(bools["default"], False),
            parent=parent,
            source=Source(self.source, line_of(self.positions, self.path + path)),
        )

    def users(self, value: Any, classes: Mapping[str, DuccClass], broken: set[str]) -> list[User]:
        problems = self.reporter.problems
        built: list[User] = []
        wheres: list[Where] = []
        for index, item in enumerate(self.items(value, ("users",))):
            path = ("users", index)
            self.mapping(item, path, USER_FIELDS, ("name",))
            if not isinstance(item, Mapping):
                continue
            name = self.name(item.get("name"), path + ("name",))
            _, overall = self.integer(item.get("max_allotment_gb"), path + ("max_allotment_gb",), 1)
            per_class: dict[str, int] = {}
            limits = item.get("class_max_allotment")
            if limits is not None and not isinstance(limits, Mapping):
                self.add(path + ("class_max_allotment",), f"expected a mapping of class -> quanta, got "
                         f"{kind_of(limits)}")
            elif limits:
                for cls_name, quanta in limits.items():
                    ok, q = self.integer(quanta, path + ("class_max_allotment", cls_name), 1, optional=False)
                    if ok and q is not None:
                        per_class[str(cls_name)] = q
            if name is None:
                continue
            where = self.where(path, USER_FIELDS)
            for cls_name in per_class:
                full = self.path + path + ("class_max_allotment", cls_name)
                where.note(f"class_max_allotment.{cls_name}", self.source, line_of(self.positions, full),
                           format_field(full))
            user = User(name, overall, per_class, Source(where.file, where.line))
            check_user_classes(user, where, classes, problems, label=lambda c: f"class_max_allotment.{c}",
                               unreadable=broken)
            built.append(user)
            wheres.append(where)
        first = first_of_each("user", [u.name for u in built], wheres, problems)
        return [built[i] for i in first.values()]


__all__ = [
    "CLASS_FIELDS",
    "NODEPOOL_FIELDS",
    "PROPERTY_KEYS",
    "SECTION_KEYS",
    "USER_FIELDS",
    "config_to_mapping",
    "ducc_config_from_mapping",
    "ducc_config_from_plan",
    "dump_plan_yaml",
    "hosts_list",
    "plan_mapping",
]
