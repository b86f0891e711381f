"""A plan as the live master puts it in force: the plan's text plus the hosts its agents report.

A server's plan may list no hosts at all. Every reported host joins the plan's
``hosts`` (what the agent reports wins over what the plan says of it: its slots, memory,
attributes and resource vector, service/resources.py), groups
defined by ``select(...)`` take in the hosts that match, and a host that the plan
names (in ``hosts`` or in a static group) but that has not reported yet counts as
down until it does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from apportion.engine.model import Plan
from apportion.plan import PlanError, Problem, compile_plan, expand_hosts
from apportion.plan.positions import parse_yaml


@dataclass(frozen=True, slots=True)
class ReportedHost:
    name: str
    slots: int
    memory: float = 0.0
    attributes: Mapping[str, Any] = field(default_factory=dict)
    state: str = "ok"  # ok | closed | down
    # what it has of each kind (cores, memory, gpus, custom) as its agent reported it; None: not
    # reported (the plan's ``resources`` for it apply, if it gives any)
    resources: Mapping[str, float] | None = None


@dataclass(frozen=True, slots=True)
class ParsedPlan:
    text: str
    source: str
    data: Mapping[str, Any]
    positions: Mapping[Any, int]


def parse(text: str, source: str = "<plan>", positions: bool = True) -> ParsedPlan:
    """The plan's text (YAML, or JSON, which YAML reads too) parsed, with the line of
    every field (``positions=False``: without, for a plan already checked, as the one in
    force at a restart); PlanError when it is not a mapping of plan sections."""
    if not positions:
        data = _plain(text)
        if isinstance(data, Mapping):
            return ParsedPlan(text, source, data, {})
    try:
        doc = parse_yaml(text, source)
        json.dumps(doc.data, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError as e:
        raise PlanError([Problem(source, None, "plan", f"not valid Unicode text: {e.reason} "
                                 f"(a lone surrogate such as \\ud800 in an escape?)")]) from None
    if doc.problems:
        raise PlanError(doc.problems)
    if not isinstance(doc.data, Mapping):
        raise PlanError([Problem(source, 1, "plan", "must be a mapping of plan sections "
                                 "(hosts, resource_groups, policy, consumers)")])
    return ParsedPlan(text, source, doc.data, doc.positions)


def _plain(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
        except yaml.YAMLError:
            return None


def _names(pattern: object) -> list[str]:
    try:
        return expand_hosts(pattern) if isinstance(pattern, str) else []
    except ValueError:
        return []  # the compiler names the bad pattern with its line


def with_hosts(parsed: ParsedPlan, reported: Iterable[ReportedHost]) -> dict[str, Any]:
    """The plan's sections with ``hosts`` made of the planned and the reported hosts."""
    data = dict(parsed.data)
    merged: dict[str, dict[str, Any]] = {}
    listed = data.get("hosts") or []
    if not isinstance(listed, list):
        return data  # not a list of hosts: left as it is, for the compiler to name
    for entry in listed:
        if isinstance(entry, Mapping):
            for name in _names(entry.get("name")):
                merged[name] = {**entry, "name": name, "state": "down"}
    groups = data.get("resource_groups") or []
    if isinstance(groups, list):
        for g in groups:
            if isinstance(g, Mapping) and isinstance(g.get("hosts"), list):
                for pattern in g["hosts"]:
                    for name in _names(pattern):
                        merged.setdefault(name, {"name": name, "slots": 0, "state": "down"})
    for h in reported:
        entry = {"name": h.name, "slots": h.slots, "memory": h.memory, "attributes": dict(h.attributes),
                 "state": h.state}
        planned = merged.get(h.name, {}).get("resources")
        if h.resources is not None or planned is not None:
            entry["resources"] = dict(h.resources) if h.resources is not None else planned
        merged[h.name] = entry
    data["hosts"] = list(merged.values())
    return data


def compile_live(parsed: ParsedPlan, reported: Iterable[ReportedHost]) -> Plan:
    """The engine's plan; PlanError lists every problem, with lines of the plan's text."""
    data = with_hosts(parsed, reported)
    positions = {k: v for k, v in parsed.positions.items() if not (k and k[0] == "hosts")}
    return compile_plan(data, parsed.source, positions)
