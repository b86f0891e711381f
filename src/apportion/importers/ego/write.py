"""An apportion plan as EGO's XML files: ``export_ego(plan_file)``.

Writes what ``import_ego`` reads: ``ResourceGroups.xml`` (each group's host
list or its requirement), ``ConsumerTrees.xml`` (the ConsumerHierarchy with
each consumer's execution user, and one DistributionTree per resource group
with each consumer's slot plan there), ``MDPlan.xml`` when some consumer owns
hosts or prefers a group, and ``hosts.yaml`` (the hosts: EGO keeps them
outside these files). Whatever a plan says that these files cannot is listed
as a note, so ``import_ego(export_ego(plan))`` gives the same plan for every
plan without such notes.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET  # building and writing only; reading goes through defusedxml
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apportion.engine.model import GroupSettings, Plan
from apportion.importers.ego.names import CONSUMER_TREES, HOSTS_FILES, MD_PLAN, RESOURCE_GROUPS
from apportion.importers.ego.xmlfile import EGO_NAMESPACE
from apportion.plan.errors import Problem

ROOT = "/"
_DEFAULT = GroupSettings()


@dataclass
class EgoExport:
    files: dict[str, str]  # file name -> text
    notes: list[Problem]  # what the files do not carry


def _el(parent: ET.Element, tag: str, text: Any = None, **attrs: Any) -> ET.Element:
    child = ET.SubElement(parent, tag, {k: str(v) for k, v in attrs.items()})
    if text is not None:
        child.text = str(text)
    return child


def _text(root: ET.Element) -> str:
    root.set("xmlns", EGO_NAMESPACE)
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _requirement(raw: Mapping[str, Any]) -> str:
    select = str(raw["select"]).strip()
    if "select(" not in select and "order(" not in select:
        select = f"select({select})"
    order = raw.get("order")
    return f"{select} {order}" if order else select


class _Writer:
    def __init__(self, plan: Plan, raw: Mapping[str, Any], source: str) -> None:
        self.plan = plan
        self.raw = raw
        self.source = source
        self.notes: list[Problem] = []
        self.children: dict[str, list[str]] = {ROOT: []}
        for c in plan.consumers:
            self.children.setdefault(c.parent, []).append(c.path)
            self.children.setdefault(c.path, [])
        self.consumers = plan.consumer_map()

    def note(self, field: str, reason: str) -> None:
        self.notes.append(Problem(self.source, None, field, f"not carried: {reason}"))

    def depth_first(self, parent: str = ROOT) -> list[str]:
        out: list[str] = []
        for path in self.children.get(parent, []):
            out.append(path)
            out.extend(self.depth_first(path))
        return out

    def run(self) -> EgoExport:
        files = {RESOURCE_GROUPS: self.resource_groups(), CONSUMER_TREES: self.consumer_trees()}
        md = self.md_plan()
        if md is not None:
            files[MD_PLAN] = md
        files[HOSTS_FILES[0]] = self.hosts()
        self.policy()
        order = [c.path for c in self.plan.consumers]
        if order != self.depth_first():
            self.note("consumers", "their order in the plan: the ConsumerHierarchy lists a consumer's children "
                      "after it, so they come back depth first (ties the plan's order broke may fall otherwise)")
        return EgoExport(files, self.notes)

    # --- the files --------------------------------------------------------------------

    def hosts(self) -> str:
        hosts = []
        for h in self.plan.hosts:
            entry: dict[str, Any] = {"name": h.name, "slots": h.slots}
            if h.memory:
                entry["memory"] = h.memory
            if h.attributes:
                entry["attributes"] = dict(h.attributes)
            if h.state.value != "ok":
                entry["state"] = h.state.value
            hosts.append(entry)
        # JSON text, one host a line: JSON is YAML, and the plan loader reads JSON text fast
        lines = ",\n".join("  " + json.dumps(h, ensure_ascii=False) for h in hosts)
        return '{"hosts": [\n' + lines + ("\n" if lines else "") + "]}\n"

    def resource_groups(self) -> str:
        root = ET.Element("ResourceGroups")
        raw_groups = {str(g.get("name")): g for g in self.raw.get("resource_groups") or [] if isinstance(g, Mapping)}
        slots = {h.name: h.slots for h in self.plan.hosts}
        for i, group in enumerate(self.plan.groups):
            node = _el(root, "ResourceGroup", ResourceGroupName=group.name)
            raw = raw_groups.get(group.name, {})
            if raw.get("select") is not None:
                _el(node, "ResourceRequirement", _requirement(raw))
            else:
                entries = _el(node, "ResourceList")
                for host in group.hosts:
                    _el(entries, "ResourceEntry", host, availableSlots=slots.get(host, 1))
            if group.allocation_policy.value != "stacked":
                self.note(f"resource_groups[{i}].allocation_policy", f"{group.allocation_policy.value}: the slot "
                          "allocation policy is not in these files")
        return _text(root)

    def consumer_trees(self) -> str:
        root = ET.Element("ConsumerTrees")
        hierarchy = _el(root, "ConsumerHierarchy")

        def add(parent: ET.Element, path: str, above: str | None) -> None:
            consumer = self.consumers[path]
            node = _el(parent, "Consumer", ConsumerName=path.rsplit("/", 1)[1])
            user = getattr(consumer, "execution_user", None)
            if user is not None and user != above:
                _el(_el(node, "ConsumerProperties"), "ExecutionUser", user)
            for child in self.children[path]:
                add(node, child, user)

        for top in self.children[ROOT]:
            add(hierarchy, top, None)
        for group in self.plan.groups:
            tree = _el(root, "DistributionTree", DistributionTreeName=group.name)
            _el(tree, "ResourceGroupName", group.name)
            for top in self.children[ROOT]:
                self.tree_consumer(tree, top, group.name)
        return _text(root)

    def tree_consumer(self, parent: ET.Element, path: str, group: str) -> None:
        consumer = self.consumers[path]
        s = consumer.groups.get(group)
        if s is None:
            return
        node = _el(parent, "Consumer", ConsumerName=path.rsplit("/", 1)[1])
        policies = ET.Element("DistributionPolicies")
        if s.rank is not None:
            _el(policies, "Rank", s.rank)
        if s.share_ratio != _DEFAULT.share_ratio or s.priority is not None:
            sharing = _el(policies, "SharingPolicy", **({"priority": s.priority} if s.priority is not None else {}))
            _el(sharing, "Shares", s.share_ratio, type="ratio")
        if s.owned_hosts is None and s.owned_per_host is None and s.owned:
            _el(policies, "Ownership", s.owned, type="absolute")
        if s.max is not None:
            _el(policies, "MaxSlots", s.max)
        if s.lend:
            lending = _el(policies, "Lending")
            if s.lend_limit is not None:
                _el(lending, "LendLimit", s.lend_limit)
        if not s.borrow:
            _el(policies, "Borrowing", enabled="N")
        elif s.borrow_limit is not None:
            _el(_el(policies, "Borrowing"), "BorrowLimit", s.borrow_limit)
        if s.grace:
            _el(policies, "ReclaimGracePeriod", _seconds(s.grace))
        if len(policies):
            node.append(policies)
        where = f"consumers[{consumer.index}] ({path}) in {group}"
        if s.lend_to is not None:
            self.note(f"{where}.lend_to", "who may borrow a consumer's slots: no element of these files holds it")
        if s.borrow_preference:
            self.note(f"{where}.borrow_preference", "the lenders to borrow from first: no element of these files "
                      "holds it")
        if s.owned_per_host is not None:
            self.note(f"{where}.owned_per_host", "slots of each host: MDPlan.xml's PerHost shares are per dimension, "
                      "not slots")
        if s.partial:
            self.note(f"{where}.partial", "parts of hosts counted as hosts: no element of these files holds it")
        if not s.lend and s.lend_limit is not None:
            self.note(f"{where}.lend_limit", "a lend limit without lending")
        for child in self.children[path]:
            self.tree_consumer(node, child, group)

    def md_plan(self) -> str | None:
        owners = [(c, g, s) for c in self.plan.consumers for g, s in c.groups.items()
                  if s.owned_hosts is not None or s.preference is not None]
        if not owners:
            return None
        root = ET.Element("DistributionTree", DistributionTreeName="apportion")
        for group in self.plan.groups:
            if any(g == group.name for _, g, _ in owners):
                _el(root, "ResourceGroupName", group.name)
        get_free = "N" if self.plan.policy.reclaim_for_preference else "Y"

        def add(parent: ET.Element, path: str) -> bool:
            consumer = self.consumers[path]
            node = ET.Element("Consumer", ConsumerName=path.rsplit("/", 1)[1])
            ownership = ET.Element("OwnershipPolicy")
            for g in (grp.name for grp in self.plan.groups):
                s = consumer.groups.get(g)
                if s is None or (s.owned_hosts is None and s.preference is None):
                    continue
                attrs = {"name": g, "GetFreeFromNextLevelBeforeReclaim": get_free}
                if s.preference is not None:
                    attrs["PreferenceLevel"] = str(s.preference)
                rg = _el(ownership, "ResourceGroup", **attrs)
                if isinstance(s.owned_hosts, int):
                    _el(_el(rg, "HostSelection", type="NumHosts"), "NumHosts", s.owned_hosts, type="absolute")
                elif s.owned_hosts is not None:
                    listed = _el(_el(rg, "HostSelection", type="HostList"), "HostList")
                    for host in s.owned_hosts:
                        _el(listed, "Host", host)
            if len(ownership):
                _el(node, "DistributionPolicies").append(ownership)
            kept = [add(node, child) for child in self.children[path]]
            if len(ownership) or any(kept):
                parent.append(node)
                return True
            return False

        for top in self.children[ROOT]:
            add(root, top)
        return _text(root)

    def policy(self) -> None:
        defaults = type(self.plan.policy)()
        for name in ("share_enforcement", "adjust_share_to_workload", "base_quota", "reclaim_before_borrow",
                     "share_pool_reclaim"):
            value = getattr(self.plan.policy, name)
            if value != getattr(defaults, name):
                shown = getattr(value, "value", value)
                self.note(f"policy.{name}", f"{shown}: an ego.conf setting, not in these files")
        owns = any(s.owned_hosts is not None or s.preference is not None
                   for c in self.plan.consumers for s in c.groups.values())
        if self.plan.policy.reclaim_for_preference and not owns:
            self.note("policy.reclaim_for_preference", "true: MDPlan.xml says it per owned group "
                      "(GetFreeFromNextLevelBeforeReclaim), and no consumer owns hosts or prefers a group")


def export_ego(plan_file: Path) -> EgoExport:
    """The EGO files for the plan in ``plan_file`` (PlanError if the plan does not load)."""
    from apportion.plan.compile import plan_of
    from apportion.plan.positions import load_document

    document = load_document(plan_file)
    plan = plan_of(document)
    raw = document.data if isinstance(document.data, Mapping) else {}
    return _Writer(plan, raw, str(plan_file)).run()


def write_files(export: EgoExport, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in export.files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
