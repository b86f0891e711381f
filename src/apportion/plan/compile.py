"""Turn a parsed plan or scenario mapping into the engine's frozen objects, or fail with every problem.

Two phases, so the report reads well: first the shape of every item
(schema.py; unknown fields, wrong types, out-of-range numbers), then the
meaning (unknown names, the tree, ownership sums, the timeline). An item
with shape problems is repaired by dropping the bad fields, so the second
phase can still check everything else; checks that the repair could make
wrong are skipped for that item. Nothing is returned unless there were no
problems at all: the engine never sees a half-checked plan.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from dataclasses import dataclass, field, replace
from typing import Any

from apportion.engine.model import Plan, Policy, ShareEnforcement
from apportion.engine.ownership import prepared
from apportion.plan.consumers import compile_consumers
from apportion.plan.context import Context
from apportion.plan.errors import KeyPath, PlanError, Positions, Problem, Reporter
from apportion.plan.hosts import compile_groups, compile_hosts
from apportion.plan.positions import Document, compile_document, load_document
from apportion.plan.schema import (
    ChangeIn,
    Checked,
    ConsumerIn,
    HostIn,
    PlanFileIn,
    PolicyIn,
    RequestIn,
    ResourceGroupIn,
    StepIn,
    kind_of,
    show,
    validate_all,
    validate_item,
)
from apportion.plan.timeline import TimelineItems, compile_timeline
from apportion.scenario.model import Scenario

_SECTIONS = "hosts, resource_groups, policy and consumers"


@dataclass
class _Items:
    """Every item of the file, validated for shape."""

    hosts: list[Checked[HostIn]] = field(default_factory=list)
    groups: list[Checked[ResourceGroupIn]] = field(default_factory=list)
    policy: Checked[PolicyIn] | None = None
    consumers: list[Checked[ConsumerIn]] = field(default_factory=list)
    timeline: list[TimelineItems] = field(default_factory=list)
    complete: dict[str, bool] = field(default_factory=dict)  # section -> every item readable


def _checked(model: type, raw: Any, prefix: KeyPath, reporter: Reporter) -> Checked[Any]:
    item = validate_item(model, raw)
    for loc, reason in item.errors:
        if loc[-1:] == ("[key]",):  # pydantic's marker for a bad mapping key
            loc, reason = loc[:-1], f"a key {reason}"
        reporter.add(prefix + loc, reason)
    return item


def _request_id(key: object) -> str | None:
    if isinstance(key, str) and key:
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    return None


def _timeline_items(raw_steps: list[Any], reporter: Reporter) -> list[TimelineItems]:
    steps: list[TimelineItems] = []
    for i, raw in enumerate(raw_steps):
        where: KeyPath = ("timeline", i)
        step = _checked(StepIn, raw, where, reporter)
        requests: list[Checked[RequestIn]] = []
        changes: dict[object, tuple[str | None, Checked[ChangeIn]]] = {}
        if step.model is not None:
            if step.model.at is None and not any(loc[:1] == ("at",) for loc, _ in step.errors):
                reporter.add(where + ("at",), "is required")
            requests = validate_all(RequestIn, step.model.requests) or [
                _checked(RequestIn, request, where + ("requests", j), reporter)
                for j, request in enumerate(step.model.requests)
            ]
            for key, value in step.model.change.items():
                request_id = _request_id(key)
                if request_id is None:
                    reporter.add(
                        where + ("change", key), f"a request id must be a string or an integer (got {show(key)})"
                    )
                changes[key] = (request_id, _checked(ChangeIn, value, where + ("change", key), reporter))
        steps.append(TimelineItems(step, requests, changes))
    return steps


def _shape(data: Any, reporter: Reporter, scenario: bool) -> _Items | None:
    """Phase 1: check the shape of every item; None when there is nothing to go on."""
    if data is None:
        reporter.add((), f"the file is empty; a plan has {_SECTIONS}")
        return None
    if not isinstance(data, Mapping):
        reporter.add((), f"must be a mapping with {_SECTIONS} (got {kind_of(data)})")
        return None
    data = dict(data)
    top = _checked(PlanFileIn, data, (), reporter)
    assert top.model is not None  # every section has a default
    items = _Items()
    items.complete = {  # False when the whole section was unreadable
        name: name in top.model.model_fields_set or name not in data
        for name in ("hosts", "resource_groups", "consumers")
    }
    items.hosts = [_checked(HostIn, raw, ("hosts", i), reporter) for i, raw in enumerate(top.model.hosts)]
    items.groups = [
        _checked(ResourceGroupIn, raw, ("resource_groups", i), reporter)
        for i, raw in enumerate(top.model.resource_groups)
    ]
    policy = {} if top.model.policy is None else top.model.policy
    items.policy = _checked(PolicyIn, policy, ("policy",), reporter)
    items.consumers = [
        _checked(ConsumerIn, raw, ("consumers", i), reporter) for i, raw in enumerate(top.model.consumers)
    ]
    if scenario:
        raw_steps = top.model.timeline
        if raw_steps is None:
            raw_steps = []
        elif not isinstance(raw_steps, list):
            reporter.add(("timeline",), f"must be a list of steps (got {show(raw_steps)})")
            raw_steps = []
        items.timeline = _timeline_items(raw_steps, reporter)
    return items


def _policy(ctx: Context, item: Checked[PolicyIn] | None) -> Policy:
    m = item.model if item is not None else None
    if m is None:
        return Policy()
    if m.base_quota and not m.adjust_share_to_workload:
        ctx.add(
            ("policy", "base_quota"),
            "base_quota needs adjust_share_to_workload: true (the static quota is taken first, "
            "then the dynamic one above it)",
        )
    return Policy(
        share_enforcement=ShareEnforcement(m.share_enforcement),
        adjust_share_to_workload=m.adjust_share_to_workload,
        base_quota=m.base_quota,
        reclaim_before_borrow=m.reclaim_before_borrow,
        share_pool_reclaim=m.share_pool_reclaim,
        reclaim_for_preference=m.reclaim_for_preference,
        usage_half_life=m.usage_half_life,
        weights=tuple(sorted(m.weights.items())),
    )


def _by_line(problems: list[Problem]) -> list[Problem]:
    """File order within a phase; problems without a line keep their order, after the rest."""
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0))


PLAN_SECTIONS = ("hosts", "resource_groups", "policy", "consumers")


def _compile(
    data: Any, source: str, positions: Positions | None, scenario: bool, early: list[Problem] | None = None
) -> tuple[Plan, tuple[Any, ...]]:
    plan, steps, _ = _compile_with_context(data, source, positions, scenario, early)
    return plan, steps


class _Replanner:
    """Timeline steps that carry ``plan:``: a mapping whose sections replace the plan
    in force (the others stay), or a plan file relative to the scenario. Each new
    plan is compiled whole, with its own lines, and later steps are checked
    against it."""

    def __init__(self, data: Mapping[str, Any], source: str, positions: Positions | None, reporter: Reporter):
        self.sections = {k: data[k] for k in PLAN_SECTIONS if k in data}
        self.where = {k: (k,) for k in self.sections}  # where each section's lines are found
        self.source = source
        self.positions = dict(positions or {})
        self.reporter = reporter

    def __call__(self, index: int, raw: Any) -> tuple[Plan | None, Context | None]:
        at: KeyPath = ("timeline", index, "plan")
        if isinstance(raw, str):
            path = Path(self.source).parent / raw
            try:
                plan, _, ctx = compile_document(load_document(path), _plan_with_context)
            except PlanError as e:
                self.reporter.extend(e.problems)
                return None, None
            ctx.reporter = self.reporter
            return plan, ctx
        if not isinstance(raw, Mapping):
            self.reporter.add(at, f"must be a mapping of plan sections or a plan file (got {show(raw)})")
            return None, None
        unknown = [k for k in raw if k not in PLAN_SECTIONS]
        for k in unknown:
            self.reporter.add(at + (k,), f"not a plan section; a step's plan may replace {', '.join(PLAN_SECTIONS)}")
        given = {k: v for k, v in raw.items() if k in PLAN_SECTIONS}
        sections = {**self.sections, **given}
        where = {**self.where, **{k: at + (k,) for k in given}}
        lines = {}
        for k, prefix in where.items():
            n = len(prefix)
            for p, line in self.positions.items():
                if p[:n] == prefix:
                    lines[(k,) + p[n:]] = line
        try:
            plan, _, ctx = _compile_with_context(sections, self.source, lines, False)
        except PlanError as e:
            # name fields as they stand in the file: inside this step's plan, or at the top
            prefix = f"timeline[{index}].plan."
            self.reporter.extend(
                replace(p, field=prefix + p.field) if p.field.split("[")[0].split(".")[0] in given else p
                for p in e.problems
            )
            return None, None
        if unknown:
            return None, None
        self.sections, self.where = sections, where
        ctx.reporter = self.reporter
        return plan, ctx


def _compile_with_context(
    data: Any, source: str, positions: Positions | None, scenario: bool, early: list[Problem] | None = None
) -> tuple[Plan, tuple[Any, ...], Context]:
    reporter = Reporter(source, positions)
    items = _shape(data, reporter, scenario)
    shape_problems = _by_line(reporter.problems)
    reporter.problems = []
    if items is None:
        raise PlanError([*(early or []), *shape_problems])
    ctx = Context(reporter)
    ctx.hosts_complete = items.complete["hosts"]
    ctx.groups_complete = items.complete["resource_groups"]
    ctx.consumers_complete = items.complete["consumers"]
    compile_hosts(ctx, items.hosts)
    compile_groups(ctx, items.groups)
    policy = _policy(ctx, items.policy)
    compile_consumers(ctx, items.consumers)
    steps = compile_timeline(ctx, items.timeline, _Replanner(data, source, positions, reporter)) if scenario else ()
    ducc = _ducc_section(data, ctx, source, positions)
    problems = [*(early or []), *shape_problems, *_by_line(reporter.problems), *ducc[1]]
    if problems:
        raise PlanError(problems)
    plan = Plan(
        hosts=tuple(ctx.hosts), groups=tuple(ctx.groups), consumers=ctx.compiled_consumers, policy=policy,
        ducc=ducc[0],
    )
    # owned hosts (EGO's ownership policy): a new plan's assignment, in rank order; each host owner's
    # `owned` becomes the slots of its hosts. A plan put in force under running work
    # is assigned again from the ownership in force (Engine.apply_plan).
    plan = prepared(plan)
    return plan, steps, ctx


def _ducc_section(data: Any, ctx: Context, source: str, positions: Positions | None) -> tuple[Any, list[Problem]]:
    """A ``ducc:`` section (written by ``apportion import ducc``), read by the importer's
    own reader so that its problems carry lines like the rest."""
    if not isinstance(data, Mapping) or data.get("ducc") is None:
        return None, []
    from apportion.importers.ducc import ducc_config_from_mapping

    memory = {h.name: (h.memory or None) for h in ctx.hosts}
    try:
        return ducc_config_from_mapping(data["ducc"], memory, source=source, positions=positions), []
    except PlanError as e:
        return None, list(e.problems)


def compile_plan(data: Mapping[str, Any], source: str = "<plan>", positions: Positions | None = None) -> Plan:
    """Compile an already-parsed plan mapping (a ``timeline`` key is allowed and ignored)."""
    plan, _ = _compile(data, source, positions, scenario=False)
    return plan


def compile_scenario(
    data: Mapping[str, Any], source: str = "<scenario>", positions: Positions | None = None
) -> Scenario:
    """Compile an already-parsed scenario mapping: plan sections plus an optional ``timeline``."""
    plan, steps = _compile(data, source, positions, scenario=True)
    return Scenario(plan=plan, steps=steps, source=source)


def _plan_with_context(doc: Document) -> tuple[Plan, tuple[Any, ...], Context]:
    return _compile_with_context(doc.data, doc.source, doc.positions, False, doc.problems)


def plan_of(document: Document) -> Plan:
    """The plan a parsed file holds (its ``timeline``, if any, is ignored)."""
    return compile_document(document, lambda d: _compile(d.data, d.source, d.positions, False, d.problems)[0])


def scenario_of(document: Document) -> Scenario:
    """The scenario a parsed file holds: a plan plus a ``timeline`` (none gives no steps)."""

    def compile_(d: Document) -> Scenario:
        plan, steps = _compile(d.data, d.source, d.positions, True, d.problems)
        return Scenario(plan=plan, steps=steps, source=d.source)

    return compile_document(document, compile_)


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read a .yaml/.yml/.toml plan file; PlanError lists every problem with its line."""
    return plan_of(load_document(path))


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read a scenario file (a plan plus a ``timeline``; no timeline gives no steps)."""
    return scenario_of(load_document(path))
