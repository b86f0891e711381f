"""EGO's XML files as an apportion plan mapping: ``import_ego(files)``.

Reads ``ResourceGroups.xml``, ``ConsumerTrees.xml`` and, where present,
``MDPlan.xml`` (and the hosts, from a ``hosts.yaml`` beside them or given
apart: EGO learns its hosts from its agents, not from these files). Every
mistake is a ``Problem`` naming the file, the line and the element; every
element or setting apportion does not carry is a note saying why, as is every
unknown element (read past, never fatal). The result is a plan mapping that
``compile_plan`` accepts, or a ``PlanError`` with every problem. The mapping
of each element is in docs/ego-import.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apportion.importers.ego.names import (
    CONSUMER_TREES,
    HOSTS_FILES,
    MD_PLAN,
    RESOURCE_GROUPS,
    SETTING_ORDER,
    kind_of_file,
)
from apportion.importers.ego.xmlfile import EGO_NAMESPACE, Node, read_xml
from apportion.plan.context import MAX_DEPTH
from apportion.plan.errors import PlanError, Problem

ROOT = "/"


@dataclass
class EgoImport:
    """The plan mapping, what was not carried (notes), and the files read."""

    plan: dict[str, Any]
    notes: list[Problem]
    files: dict[str, Path]


def find_files(paths: Sequence[Path], hosts: Path | None = None) -> dict[str, Path]:
    """The EGO files among ``paths`` (directories are looked into), by kind; PlanError if
    a file is not one of them or the two required ones are missing."""
    found: dict[str, Path] = {}
    problems: list[Problem] = []
    for path in paths:
        if path.is_dir():
            for child in sorted(path.iterdir()):
                kind = kind_of_file(child.name)
                if kind is not None and kind not in found:
                    found[kind] = child
            continue
        kind = kind_of_file(path.name)
        if not path.exists():
            problems.append(Problem(str(path), None, "file", "no such file or directory"))
        elif kind is None:
            problems.append(Problem(str(path), None, "file", f"not an EGO file this importer reads: name it "
                                    f"{CONSUMER_TREES}, {RESOURCE_GROUPS}, {MD_PLAN} or {HOSTS_FILES[0]}"))
        elif kind in found:
            problems.append(Problem(str(path), None, "file", f"a second {kind} (the first: {found[kind]})"))
        else:
            found[kind] = path
    if hosts is not None:
        found["hosts"] = hosts
    where = ", ".join(str(p) for p in paths)
    for required in (CONSUMER_TREES, RESOURCE_GROUPS):
        if required not in found and not problems:
            problems.append(Problem(where, None, "file", f"no {required} there"))
    if problems:
        raise PlanError(problems)
    return found


def import_ego(paths: Sequence[Path], hosts: Path | None = None) -> EgoImport:
    files = find_files(paths, hosts)
    reader = _Reader(files)
    plan = reader.run()
    return EgoImport(plan, reader.notes, files)


# --- values -------------------------------------------------------------------------------


def _yes(text: str) -> bool | None:
    low = text.strip().lower()
    if low in ("y", "yes", "true", "1"):
        return True
    if low in ("n", "no", "false", "0"):
        return False
    return None


@dataclass
class _Settings:
    """One consumer's plan in one resource group, as read, with where each value came from."""

    values: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, Node] = field(default_factory=dict)
    num_hosts: tuple[str, int, Node] | None = None  # ("percentage" | "remaining", value, node)

    def set(self, key: str, value: Any, node: Node) -> None:
        self.values[key] = value
        self.origin[key] = node


@dataclass
class _Consumer:
    path: str
    node: Node
    execution_user: str | None = None
    user_node: Node | None = None
    grace: float | None = None  # consumer-wide ReclaimGracePeriod
    grace_node: Node | None = None
    groups: dict[str, _Settings] = field(default_factory=dict)  # planned groups, as met in the trees


class _Reader:
    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files
        self.problems: list[Problem] = []
        self.notes: list[Problem] = []
        self.hosts: dict[str, dict[str, Any]] = {}
        self.host_origin: dict[str, Node] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.group_nodes: dict[str, Node] = {}
        self.consumers: dict[str, _Consumer] = {}
        self.hierarchy = False
        self.default_grace: dict[str, tuple[float, Node]] = {}
        self.get_free_first: list[tuple[bool, Node]] = []
        self.md_planned: dict[str, set[str]] = {}  # group -> consumers MDPlan.xml plans there
        self.trees_groups: set[str] = set()  # the groups ConsumerTrees.xml has a DistributionTree for

    # --- reporting --------------------------------------------------------------------

    def problem(self, node: Node, reason: str, what: str | None = None) -> None:
        self.problems.append(Problem(node.file, node.line, what or node.label, reason))

    def note(self, node: Node, reason: str, what: str | None = None) -> None:
        self.notes.append(Problem(node.file, node.line, what or node.label, reason))

    def unknown(self, node: Node, parent: Node) -> None:
        if node.namespace not in (None, EGO_NAMESPACE):
            self.note(node, f"an element of another namespace ({node.namespace}) in {parent.label}: not read")
        else:
            self.note(node, f"unknown element in {parent.label}: not read")

    def check_attrs(self, node: Node, known: Iterable[str], not_carried: dict[str, str] | None = None) -> None:
        for name in node.attrs:
            if name in known:
                continue
            if not_carried and name in not_carried:
                self.note(node, f"not carried: {not_carried[name]}", f"{node.label} {name}")
            elif name not in ("schemaLocation", "noNamespaceSchemaLocation"):
                self.note(node, f"unknown attribute {name!r}: not read")

    def integer(self, node: Node, text: str | None = None, minimum: int = 0, what: str | None = None) -> int | None:
        raw = (node.text if text is None else text).strip()
        try:
            value = int(raw)
        except ValueError:
            self.problem(node, f"{raw!r} is not a whole number", what)
            return None
        if value < minimum:
            self.problem(node, f"{value} is below {minimum}", what)
            return None
        return value

    def seconds(self, node: Node, text: str | None = None, what: str | None = None) -> float | None:
        raw = (node.text if text is None else text).strip()
        try:
            value = float(raw)
        except ValueError:
            self.problem(node, f"{raw!r} is not a number of seconds", what)
            return None
        if not math.isfinite(value) or value < 0:
            self.problem(node, f"{raw!r} is not a number of seconds >= 0", what)
            return None
        return int(value) if value.is_integer() else value

    def required_attr(self, node: Node, name: str) -> str | None:
        value = node.attrs.get(name, "").strip()
        if not value:
            self.problem(node, f"the {name} attribute is missing or empty")
            return None
        return value

    def root(self, kind: str, expected: Sequence[str]) -> Node | None:
        if kind not in self.files:
            return None
        node = read_xml(self.files[kind], self.problems)
        if node is None:
            return None
        if node.name not in expected:
            self.problem(node, f"the root element of {kind} is <{expected[0]}>, not {node.label}")
            return None
        return node

    # --- the whole --------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self.read_hosts()
        groups_root = self.root(RESOURCE_GROUPS, ("ResourceGroups",))
        trees_root = self.root(CONSUMER_TREES, ("ConsumerTrees",))
        md_root = self.root(MD_PLAN, ("DistributionTree", "MDPlan", "DistributionTrees"))
        if self.problems:  # a file that does not parse: what the others say of it would only be noise
            raise PlanError(self.problems)
        if groups_root is not None:
            self.read_resource_groups(groups_root)
        if trees_root is not None:
            self.read_consumer_trees(trees_root)
        if md_root is not None and md_root.name == "DistributionTree":
            self.read_distribution_tree(md_root, md=True)
        elif md_root is not None:  # several trees in one root element
            for child in md_root:
                if child.name == "DistributionTree":
                    self.read_distribution_tree(child, md=True)
                else:
                    self.unknown(child, md_root)
        if self.problems:
            raise PlanError(self.problems)
        mapping, origins = self.build()
        if self.problems:
            raise PlanError(self.problems)
        self.check(mapping, origins)
        return mapping

    # --- hosts ------------------------------------------------------------------------

    def read_hosts(self) -> None:
        path = self.files.get("hosts")
        if path is None:
            return
        from apportion.plan.compile import plan_of
        from apportion.plan.hostnames import expand_hosts
        from apportion.plan.positions import load_document

        try:
            document = load_document(path)
            plan_of(document)  # every problem with its line, as for any plan file
        except PlanError as e:
            self.problems.extend(e.problems)
            return
        except OSError as e:
            self.problems.append(Problem(str(path), None, "file", f"cannot read it: {e.strerror or e}"))
            return
        data = document.data if isinstance(document.data, dict) else {}
        for raw in data.get("hosts") or []:
            for name in expand_hosts(str(raw["name"])):
                self.hosts[name] = {**raw, "name": name}

    # --- ResourceGroups.xml ----------------------------------------------------------

    def read_resource_groups(self, root: Node) -> None:
        from apportion.plan import parse_requirement

        for node in root:
            if node.name != "ResourceGroup":
                self.unknown(node, root)
                continue
            self.check_attrs(node, ("ResourceGroupName", "availableSlots"))
            name = self.required_attr(node, "ResourceGroupName")
            if name is None:
                continue
            if name in self.groups:
                self.problem(node, f"resource group {name} is defined twice (first at line "
                             f"{self.group_nodes[name].line})")
                continue
            slots_text = node.attrs.get("availableSlots")
            group_slots: int | None = None
            if slots_text is not None:
                if slots_text.strip().isdigit():
                    group_slots = int(slots_text)
                else:
                    self.note(node, f"not carried: availableSlots {slots_text!r} is an expression; a host's slots "
                              "are its own in apportion (hosts.yaml)", f"{node.label} availableSlots")
            group: dict[str, Any] = {"name": name}
            for child in node:
                if child.name == "ResourceRequirement":
                    if "select" in group or "hosts" in group:
                        self.problem(child, f"resource group {name} has both a ResourceList and a "
                                     "ResourceRequirement, or two of one: give one")
                        continue
                    try:
                        parse_requirement(child.text)
                    except ValueError as e:
                        self.problem(child, f"{child.text!r}: {e}")
                        continue
                    group["select"] = child.text
                    if group_slots is not None:
                        self.note(node, "not carried: availableSlots on a group chosen by ResourceRequirement; "
                                  "a host's slots are its own in apportion (hosts.yaml)",
                                  f"{node.label} availableSlots")
                elif child.name == "ResourceList":
                    if "select" in group or "hosts" in group:
                        self.problem(child, f"resource group {name} has both a ResourceList and a "
                                     "ResourceRequirement, or two of one: give one")
                        continue
                    group["hosts"] = self.read_resource_list(child, name, group_slots)
                else:
                    self.unknown(child, node)
            if "select" not in group and "hosts" not in group:
                self.problem(node, f"resource group {name} has neither a ResourceList nor a ResourceRequirement")
                continue
            self.groups[name] = group
            self.group_nodes[name] = node

    def read_resource_list(self, node: Node, group: str, group_slots: int | None) -> list[str]:
        names: list[str] = []
        seen: set[str] = set()
        for entry in node:
            if entry.name != "ResourceEntry":
                self.unknown(entry, node)
                continue
            self.check_attrs(entry, ("availableSlots",))
            host = entry.text
            if not host or any(c.isspace() for c in host):
                self.problem(entry, f"{host!r} is not a host name")
                continue
            if host in seen:
                self.problem(entry, f"host {host} is listed twice in resource group {group}")
                continue
            names.append(host)
            seen.add(host)
            text = entry.attrs.get("availableSlots")
            slots = self.integer(entry, text, what=f"{entry.label} availableSlots") if text is not None \
                else group_slots
            known = self.hosts.get(host)
            if known is None:
                self.hosts[host] = {"name": host, "slots": 1 if slots is None else slots}
                self.host_origin[host] = entry
                if slots is None:
                    self.note(entry, f"host {host} has no availableSlots and is not in hosts.yaml: given 1 slot "
                              "(EGO would count its CPUs); write its slots in hosts.yaml")
            elif slots is not None and slots != known.get("slots", 1):
                self.note(entry, f"availableSlots {slots} for {host} in {group} differs from the {known.get('slots', 1)} "
                          "slots it has elsewhere: a host has one slot count in apportion, the first is kept")
        return names

    # --- ConsumerTrees.xml and MDPlan.xml ----------------------------------------------

    def read_consumer_trees(self, root: Node) -> None:
        for node in root:
            if node.name == "ConsumerHierarchy":
                self.hierarchy = True
                self.check_attrs(node, ())
                for child in node:
                    if child.name == "Consumer":
                        self.read_hierarchy_consumer(child, ROOT)
                    else:
                        self.unknown(child, node)
            elif node.name == "DistributionTree":
                self.read_distribution_tree(node, md=False)
            else:
                self.unknown(node, root)

    def consumer_path(self, node: Node, parent: str) -> str | None:
        name = self.required_attr(node, "ConsumerName")
        if name is None:
            return None
        return f"/{name}" if parent == ROOT else f"{parent}/{name}"

    def too_deep(self, node: Node, path: str) -> bool:
        """A consumer deeper than a plan allows is one problem, its subtree not read."""
        depth = path.count("/")
        if depth <= MAX_DEPTH:
            return False
        below = sum(1 for _ in _consumers_below(node))
        self.problem(node, f"consumer {path} is {depth} levels deep; a plan allows at most {MAX_DEPTH} levels "
                     "below the root" + (f" (the {below} consumer(s) below it are not read)" if below else ""))
        return True

    def read_hierarchy_consumer(self, node: Node, parent: str) -> None:
        self.check_attrs(node, ("ConsumerName",))
        path = self.consumer_path(node, parent)
        if path is None or self.too_deep(node, path):
            return
        if path in self.consumers:
            self.problem(node, f"consumer {path} is defined twice (first at line {self.consumers[path].node.line})")
            return
        consumer = _Consumer(path, node)
        self.consumers[path] = consumer
        children = []
        for child in node:
            if child.name == "ConsumerProperties":
                self.check_attrs(child, ())
                for prop in child:
                    self.read_consumer_property(prop, child, consumer)
            elif child.name == "Consumer":
                children.append(child)
            else:
                self.read_consumer_property(child, node, consumer)
        for child in children:
            self.read_hierarchy_consumer(child, path)

    def read_consumer_property(self, node: Node, parent: Node, consumer: _Consumer) -> None:
        if node.name == "ExecutionUser":
            user = node.text
            if "\\" in user:
                short = user.rsplit("\\", 1)[1]
                self.note(node, f"'{user}': the domain is left out on Linux, as EGO does: '{short}'")
                user = short
            if not user:
                self.problem(node, "the execution user is empty")
                return
            consumer.execution_user, consumer.user_node = user, node
        elif node.name == "ReclaimGracePeriod":
            consumer.grace, consumer.grace_node = self.seconds(node), node
        elif node.name in _CONSUMER_NOT_CARRIED:
            self.note(node, f"not carried: {_CONSUMER_NOT_CARRIED[node.name]}")
        else:
            self.unknown(node, parent)

    def read_distribution_tree(self, tree: Node, md: bool) -> None:
        self.check_attrs(tree, ("DistributionTreeName", "RevisionVersion"))
        groups: list[str] = []
        consumers: list[Node] = []
        default_grace: tuple[float, Node] | None = None
        for node in tree:
            if node.name == "ResourceGroupName":
                if node.text not in self.groups:
                    self.problem(node, f"unknown resource group {node.text!r} (ResourceGroups.xml defines "
                                 f"{', '.join(self.groups) or 'none'})")
                elif node.text in groups:
                    self.problem(node, f"resource group {node.text} is named twice in this tree")
                else:
                    groups.append(node.text)
            elif node.name == "PolicyParameter":
                name = node.attrs.get("name", "")
                if name == "DefaultGracePeriod":
                    value = self.seconds(node, what=f"{node.label} DefaultGracePeriod")
                    if value is not None:
                        default_grace = (value, node)
                else:
                    self.note(node, f"not carried: policy parameter {name!r} (apportion's policy switches are "
                              "the plan's `policy:` section)")
            elif node.name == "Consumer":
                consumers.append(node)
            elif node.name in _TREE_NOT_CARRIED:
                self.note(node, f"not carried: {_TREE_NOT_CARRIED[node.name]}")
            else:
                self.unknown(node, tree)
        if not groups:
            self.problem(tree, "a DistributionTree names no ResourceGroupName: which groups does it plan?")
            return
        if not md:
            self.trees_groups.update(groups)
        if default_grace is not None:
            for g in groups:
                before = self.default_grace.get(g)
                if before is not None and before[0] != default_grace[0]:
                    self.note(default_grace[1], f"DefaultGracePeriod {default_grace[0]} for {g} differs from "
                              f"{before[0]} at {before[1].file}:{before[1].line}: the first is kept")
                else:
                    self.default_grace.setdefault(g, default_grace)
        for node in consumers:
            self.read_tree_consumer(node, ROOT, groups, md)

    def read_tree_consumer(self, node: Node, parent: str, groups: list[str], md: bool) -> None:
        self.check_attrs(node, ("ConsumerName",))
        path = self.consumer_path(node, parent)
        if path is None:
            return
        consumer = self.consumers.get(path)
        if consumer is None:
            if path.count("/") > MAX_DEPTH:
                if not self.hierarchy:  # the hierarchy said so already
                    self.too_deep(node, path)
                return
            if self.hierarchy:
                self.note(node, f"not carried: consumer {path} is not in the ConsumerHierarchy, and EGO does "
                          "not recognise a consumer planned only in a DistributionTree")
                return
            if parent != ROOT and parent not in self.consumers:
                return  # its parent was refused already
            consumer = self.consumers[path] = _Consumer(path, node)
        tree_groups = groups
        if md:  # MDPlan.xml plans a consumer in a group only where ConsumerTrees.xml has no tree for it
            groups = [g for g in groups if g in consumer.groups or g not in self.trees_groups]
        for g in groups:
            consumer.groups.setdefault(g, _Settings())
            if md:
                self.md_planned.setdefault(g, set()).add(path)
        for child in node:
            if child.name == "DistributionPolicies":
                self.check_attrs(child, ())
                self.read_policies(child, consumer, groups, md, tree_groups)
            elif child.name == "Consumer":
                self.read_tree_consumer(child, path, tree_groups, md)
            elif child.name in _TREE_NOT_CARRIED:
                self.note(child, f"not carried: {_TREE_NOT_CARRIED[child.name]}")
            else:
                self.unknown(child, node)

    def put(self, consumer: _Consumer, groups: Iterable[str], key: str, value: Any, node: Node, md: bool) -> None:
        if value is None:
            return
        for g in groups:
            settings = consumer.groups.setdefault(g, _Settings())
            before = settings.values.get(key)
            if key in settings.values and before != value:
                other = settings.origin[key]
                self.note(node, f"{consumer.path} in {g}: {key} {value} here, {before} at {other.file}:{other.line}; "
                          f"{'MDPlan.xml' if md else 'the later'} value is kept")
            settings.set(key, value, node)

    def read_policies(self, node: Node, consumer: _Consumer, groups: list[str], md: bool,
                      tree_groups: list[str]) -> None:
        for child in node:
            name = child.name
            if name == "Rank":
                rank = self.integer(child)
                # MDS ranks count from 0, the highest (IBM: "all consumers have the highest possible rank (0)")
                self.put(consumer, groups, "rank", None if rank is None else rank + (1 if md else 0), child, md)
            elif name in ("SharingPolicy", "Sharing"):
                self.read_sharing(child, consumer, groups, md)
            elif name == "Ownership":
                self.check_attrs(child, ("type",))
                kind = child.attrs.get("type", "absolute")
                if kind != "absolute":
                    self.note(child, f"not carried: ownership of type {kind!r}; apportion owns a number of slots "
                              "(type=\"absolute\")")
                    continue
                self.put(consumer, groups, "owned", self.integer(child), child, md)
            elif name in ("Lending", "Borrowing"):
                # <Lending>/<Borrowing enabled="Y|N"> with its <LendLimit>/<BorrowLimit>
                key, limit = ("lend", "LendLimit") if name == "Lending" else ("borrow", "BorrowLimit")
                self.check_attrs(child, ("enabled",))
                self.put(consumer, groups, key, _yes(child.attrs.get("enabled", "Y")) is not False, child, md)
                for sub in child:
                    if sub.name == limit:
                        self.put(consumer, groups, f"{key}_limit", self.integer(sub), sub, md)
                    else:
                        self.unknown(sub, child)
            elif name == "ReclaimGracePeriod":
                self.put(consumer, groups, "grace", self.seconds(child), child, md)
            elif name == "MaxSlots":
                self.put(consumer, groups, "max", self.integer(child), child, md)
            elif name == "OwnershipPolicy":
                self.check_attrs(child, ())
                for sub in child:
                    if sub.name == "ResourceGroup":
                        self.read_ownership(sub, consumer, groups, md, tree_groups)
                    else:
                        self.unknown(sub, child)
            elif name in _POLICY_NOT_CARRIED:
                self.note(child, f"not carried: {_POLICY_NOT_CARRIED[name]}")
            else:
                self.unknown(child, node)

    def read_sharing(self, node: Node, consumer: _Consumer, groups: list[str], md: bool) -> None:
        self.check_attrs(node, ("priority",), {"EnforceSiblingShareReclaim": "the plan's policy.share_enforcement "
                                               "decides, for the whole plan, how share is reclaimed"})
        if "priority" in node.attrs:
            self.put(consumer, groups, "priority", self.integer(node, node.attrs["priority"],
                                                                what=f"{node.label} priority"), node, md)
        for child in node:
            if child.name == "Shares":
                self.check_attrs(child, ("type",))
                kind = child.attrs.get("type", "ratio")
                if kind != "ratio":
                    self.note(child, f"not carried: shares of type {kind!r}; apportion shares by ratio")
                    continue
                self.put(consumer, groups, "share_ratio", self.integer(child), child, md)
            elif child.name == "Limit":
                self.note(child, "not carried: limits per dimension (ncpus, mem); apportion plans slots")
            else:
                self.unknown(child, node)

    def read_ownership(self, node: Node, consumer: _Consumer, groups: list[str], md: bool,
                       tree_groups: list[str]) -> None:
        self.check_attrs(node, ("name", "PreferenceLevel", "GetFreeFromNextLevelBeforeReclaim"))
        group = self.required_attr(node, "name")
        if group is None:
            return
        if group not in tree_groups:
            self.problem(node, f"resource group {group!r} is not one this DistributionTree plans "
                         f"({', '.join(tree_groups)})")
            return
        if group not in groups:
            self.note(node, f"not carried: {consumer.path} is not planned in {group} in {CONSUMER_TREES}, so it "
                      "owns nothing there")
            return
        if "PreferenceLevel" in node.attrs:
            level = self.integer(node, node.attrs["PreferenceLevel"], what=f"{node.label} PreferenceLevel")
            self.put(consumer, [group], "preference", level, node, md)
        if "GetFreeFromNextLevelBeforeReclaim" in node.attrs:
            text = node.attrs["GetFreeFromNextLevelBeforeReclaim"]
            value = _yes(text)
            if value is None:
                self.problem(node, f"{text!r} is not Y or N", f"{node.label} GetFreeFromNextLevelBeforeReclaim")
            else:
                self.get_free_first.append((value, node))
        for child in node:
            if child.name == "HostSelection":
                self.read_host_selection(child, consumer, group, md)
            elif child.name == "PerHost":
                self.note(child, "not carried: a share of each host per dimension; apportion's owned_per_host "
                          "(slots of each host) has no EGO element here")
            else:
                self.unknown(child, node)

    def read_host_selection(self, node: Node, consumer: _Consumer, group: str, md: bool) -> None:
        self.check_attrs(node, ("type",), {"ResReq": "which hosts a consumer owns is worked out by apportion "
                                           "in rank order (owned_hosts: N), not by a requirement"})
        kind = node.attrs.get("type", "")
        settings = consumer.groups.setdefault(group, _Settings())
        if kind == "NumHosts":
            for child in node:
                if child.name != "NumHosts":
                    self.unknown(child, node)
                    continue
                self.check_attrs(child, ("type",))
                how = child.attrs.get("type", "absolute")
                value = self.integer(child)
                if value is None:
                    continue
                if how == "absolute":
                    self.put(consumer, [group], "owned_hosts", value, child, md)
                elif how in ("percentage", "remaining"):
                    if how == "percentage" and value > 100:
                        self.problem(child, f"{value} is above 100 percent")
                        continue
                    settings.num_hosts = (how, value, child)
                    settings.origin["owned_hosts"] = child
                else:
                    self.problem(child, f"type {how!r}: give absolute, percentage or remaining", "<NumHosts> type")
        elif kind == "HostList":
            for child in node:
                if child.name != "HostList":
                    self.unknown(child, node)
                    continue
                hosts: list[str] = []
                for host in child:
                    if host.name != "Host":
                        self.unknown(host, child)
                    elif host.text in hosts:
                        self.problem(host, f"host {host.text} is listed twice")
                    else:
                        hosts.append(host.text)
                self.put(consumer, [group], "owned_hosts", hosts, child, md)
        else:
            self.problem(node, f"type {kind!r}: give NumHosts or HostList", "<HostSelection> type")

    # --- building the plan -----------------------------------------------------------

    def group_sizes(self) -> dict[str, int]:
        """How many hosts each group has (its ResourceList, or the known hosts its select() takes)."""
        from apportion.plan import compile_plan

        try:
            plan = compile_plan({"hosts": list(self.hosts.values()), "resource_groups": list(self.groups.values())},
                                source="<hosts and resource groups>")
        except PlanError:
            return {}
        return {g.name: len(g.hosts) for g in plan.groups}

    def resolve_num_hosts(self) -> None:
        sizes: dict[str, int] | None = None
        for consumer in self.consumers.values():
            for g, settings in consumer.groups.items():
                if settings.num_hosts is None or settings.num_hosts[0] != "percentage":
                    continue
                sizes = self.group_sizes() if sizes is None else sizes
                _, pct, node = settings.num_hosts
                total = sizes.get(g, 0)
                count = total * pct // 100
                self.note(node, f"{pct} percent of the {total} hosts of {g} (as known now) written as owned_hosts: "
                          f"{count}; apportion does not recount it when hosts join")
                settings.values["owned_hosts"] = count
        for consumer in self.consumers.values():
            for g, settings in consumer.groups.items():
                if settings.num_hosts is None or settings.num_hosts[0] != "remaining":
                    continue
                sizes = self.group_sizes() if sizes is None else sizes
                node = settings.num_hosts[2]
                parent = consumer.path.rsplit("/", 1)[0] or ROOT
                if parent == ROOT:
                    scope = sizes.get(g, 0)
                else:
                    scope = _count(self.consumers[parent].groups.get(g, _Settings()).values.get("owned_hosts"))
                siblings = [c for c in self.consumers.values()
                            if c is not consumer and (c.path.rsplit("/", 1)[0] or ROOT) == parent]
                taken = sum(_count(c.groups[g].values.get("owned_hosts")) for c in siblings if g in c.groups)
                count = max(0, scope - taken)
                self.note(node, f"the remaining hosts of {g} (of {scope}, {taken} owned by siblings) written as "
                          f"owned_hosts: {count}")
                settings.values["owned_hosts"] = count

    def build(self) -> tuple[dict[str, Any], dict[str, Node]]:
        self.resolve_num_hosts()
        origins: dict[str, Node] = {}
        mapping: dict[str, Any] = {}
        if self.hosts:
            mapping["hosts"] = list(self.hosts.values())
            for i, name in enumerate(self.hosts):
                if name in self.host_origin:
                    origins[f"hosts[{i}]"] = self.host_origin[name]
        mapping["resource_groups"] = list(self.groups.values())
        for i, name in enumerate(self.groups):
            origins[f"resource_groups[{i}]"] = self.group_nodes[name]
        choices = {value for value, _ in self.get_free_first}
        if len(choices) == 1:
            if choices == {False}:
                mapping["policy"] = {"reclaim_for_preference": True}
        elif len(choices) > 1:
            for _value, node in self.get_free_first:
                self.note(node, "not carried: GetFreeFromNextLevelBeforeReclaim differs between consumers; "
                          "apportion decides it for the whole plan (policy.reclaim_for_preference): left at its "
                          "default (idle slots elsewhere first)")
        ranked_md = self.md_ranked_groups()
        consumers: list[dict[str, Any]] = []
        inherited: dict[str, str | None] = {ROOT: None}
        for index, consumer in enumerate(self.consumers.values()):
            prefix = f"consumers[{index}]"
            parent = consumer.path.rsplit("/", 1)[0] or ROOT
            origins[prefix] = consumer.node
            entry: dict[str, Any] = {"path": consumer.path}
            above = inherited.get(parent)
            inherited[consumer.path] = consumer.execution_user or above
            if consumer.execution_user is not None and consumer.execution_user != above:
                entry["execution_user"] = consumer.execution_user
                assert consumer.user_node is not None
                origins[f"{prefix}.execution_user"] = consumer.user_node
            planned = [g for g in self.groups if g in consumer.groups]
            entry["resource_groups"] = planned
            groups: dict[str, Any] = {}
            for g in planned:
                settings = consumer.groups[g]
                values = dict(settings.values)
                if "grace" not in values:
                    if consumer.grace is not None:
                        values["grace"] = consumer.grace
                        assert consumer.grace_node is not None
                        settings.origin["grace"] = consumer.grace_node
                    elif g in self.default_grace and self.default_grace[g][0]:
                        values["grace"], settings.origin["grace"] = self.default_grace[g]
                if "rank" not in values and g in ranked_md and consumer.path in ranked_md[g]:
                    values["rank"] = 1  # EGO's default MDS rank, 0: the highest
                if values.get("lend") is False:
                    values.pop("lend")
                if values.get("borrow") is True:
                    values.pop("borrow")
                if values.get("share_ratio") == 1:
                    values.pop("share_ratio")
                if values.get("grace") == 0:
                    values.pop("grace")
                ordered = {k: values[k] for k in SETTING_ORDER if k in values}
                groups[g] = ordered
                for k, node in settings.origin.items():
                    origins[f"{prefix}.groups.{g}.{k}"] = node
                origins[f"{prefix}.groups.{g}"] = consumer.node
            if any(groups.values()):
                entry["groups"] = {g: v for g, v in groups.items() if v}
            consumers.append(entry)
        mapping["consumers"] = consumers
        return mapping, origins

    def md_ranked_groups(self) -> dict[str, set[str]]:
        """group -> consumers MDPlan.xml plans there, for the groups where MDPlan.xml gives some Rank."""
        md = str(self.files.get(MD_PLAN, ""))
        ranked = {g for c in self.consumers.values() for g, s in c.groups.items()
                  if "rank" in s.origin and s.origin["rank"].file == md}
        return {g: self.md_planned.get(g, set()) for g in ranked}

    def check(self, mapping: dict[str, Any], origins: dict[str, Node]) -> None:
        """The mapping as apportion's own loader checks it; each problem moved to the element it came from."""
        from apportion.plan import compile_plan

        try:
            compile_plan(mapping, source="<imported plan>")
        except PlanError as e:
            raise PlanError([_located(p, origins) for p in e.problems]) from None


def _consumers_below(node: Node) -> Iterable[Node]:
    todo = [c for c in node if c.name == "Consumer"]
    while todo:
        c = todo.pop()
        yield c
        todo.extend(x for x in c if x.name == "Consumer")


def _count(owned_hosts: Any) -> int:
    if isinstance(owned_hosts, list):
        return len(owned_hosts)
    return owned_hosts if isinstance(owned_hosts, int) else 0


def _located(problem: Problem, origins: dict[str, Node]) -> Problem:
    field_path = problem.field
    while field_path:
        node = origins.get(field_path)
        if node is not None:
            return Problem(node.file, node.line, node.label, f"{problem.field}: {problem.reason}")
        cut = max(field_path.rfind("."), field_path.rfind("["))
        field_path = field_path[:cut] if cut > 0 else ""
    return problem


_CONSUMER_NOT_CARRIED = {
    "User": "who may use a consumer is a token's scope in apportion (apportion token create --consumer)",
    "Users": "who may use a consumer is a token's scope in apportion (apportion token create --consumer)",
    "Admin": "administrators are admin tokens in apportion",
    "Administrators": "administrators are admin tokens in apportion",
    "Roles": "roles are tokens' kinds and scopes in apportion",
    "Description": "descriptions are not kept",
}
_TREE_NOT_CARRIED = {
    "ConsumableResources": "apportion plans slots, one dimension; over-commit ratios have no meaning there",
    "SlotMapping": "apportion plans slots, one dimension; a slot is not mapped to ncpus and mem",
    "TimeInterval": "a plan is in force until the next is applied (apportion plan apply); time windows are not kept",
}
_POLICY_NOT_CARRIED = {
    "TimeInterval": "a plan is in force until the next is applied (apportion plan apply); time windows are not kept",
}
