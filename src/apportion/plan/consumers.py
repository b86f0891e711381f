"""The consumer tree: paths, parents, planned groups, inherited settings and their checks.

Settings are written once per consumer and overridden per group, because
most consumers have the same plan in every group; the engine, though, wants
one complete ``GroupSettings`` per (consumer, group), so the merge happens
here, and every check runs on merged values while still pointing at the line
where the offending value was written.
"""

from __future__ import annotations

import re
from typing import Any

from apportion.engine.model import ROOT, Consumer, GroupSettings
from apportion.plan.context import MAX_DEPTH, NAME_PATTERN, ConsumerInfo, Context
from apportion.plan.errors import KeyPath
from apportion.plan.hostnames import expand_hosts
from apportion.plan.schema import (
    LENDING_FIELDS,
    OWNERSHIP_FIELDS,
    SETTING_FIELDS,
    Checked,
    ConsumerIn,
    SettingsIn,
)

_NAME = re.compile(NAME_PATTERN + r"\Z")
_DEFAULTS = GroupSettings()


def _listing(paths: list[str], limit: int = 4) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def path_problem(path: str) -> str | None:
    """Why ``path`` is not a valid consumer path, or None when it is."""
    if not path.startswith("/"):
        return f"{path!r} must be a slash path from the root, like /LOB1/app1"
    if path == ROOT:
        return "'/' is the root, which is implicit; name a consumer below it"
    for name in path[1:].split("/"):
        if not name:
            return f"{path!r} has an empty name (a doubled or trailing '/')"
        if not _NAME.match(name):
            return (
                f"{name!r} is not a valid consumer name: start with a letter, then use letters, "
                "digits, '_' or '-' (at most 128 characters)"
            )
    return None


def _read_paths(ctx: Context, items: list[Checked[ConsumerIn]]) -> dict[str, int]:
    """Register every readable path; keep the valid, first-seen ones in ``ctx.consumers``."""
    first_index: dict[str, int] = {}
    too_deep: set[str] = set()
    for index, item in enumerate(items):
        path = item.value("path")
        if not isinstance(path, str):
            ctx.consumers_complete = False
            continue
        ctx.consumer_paths.add(path)
        where: KeyPath = ("consumers", index, "path")
        reason = path_problem(path)
        if reason is not None:
            ctx.add(where, reason)
            first_index.setdefault(path, index)
            continue
        if path in first_index:
            ctx.add(where, f"consumer {path} already defined at consumers[{first_index[path]}]")
            continue
        first_index[path] = index
        depth = path.count("/")
        if depth > MAX_DEPTH:
            branch = "/".join(path.split("/")[: MAX_DEPTH + 2])  # its ancestor one level too deep
            if branch not in too_deep:  # one problem a branch, not one for each consumer below
                too_deep.add(branch)
                ctx.add(where, f"{path} is {depth} levels deep; at most {MAX_DEPTH} levels below the root are "
                        "allowed (the consumers below it are not reported again)")
        if item.model is not None:
            ctx.consumers[path] = ConsumerInfo(index, path, item)
    return first_index


def _link_tree(ctx: Context, first_index: dict[str, int]) -> None:
    for info in ctx.consumers.values():
        parent = info.path.rsplit("/", 1)[0] or ROOT
        info.parent = parent
        if parent == ROOT:
            continue
        where = info.where + ("path",)
        parent_index = first_index.get(parent)
        if parent_index is not None and parent_index > info.index:
            ctx.add(
                where,
                f"parent {parent} is listed after its child (at consumers[{parent_index}]); list parents first",
            )
        elif parent in ctx.consumers:
            ctx.consumers[parent].children.append(info.path)
        elif parent not in ctx.consumer_paths and ctx.consumers_complete:
            ctx.add(where, f"parent {parent} is not in the plan; add it before {info.path}")


def _linked_parent(ctx: Context, info: ConsumerInfo) -> ConsumerInfo | None:
    parent = ctx.consumers.get(info.parent)
    return parent if parent is not None and info.path in parent.children else None


def _plan_groups(ctx: Context) -> None:
    """The groups each consumer is planned in: listed, or inherited from its parent."""
    for info in ctx.consumers.values():  # plan order: a parent is done before its children
        model = info.model
        assert model is not None
        parent = _linked_parent(ctx, info)
        inherited = parent.groups if parent is not None else list(ctx.group_names)
        if model.resource_groups is None:
            info.groups = list(inherited)
        else:
            listed: list[str] = []
            for j, group in enumerate(model.resource_groups):
                where = info.where + ("resource_groups", j)
                if group in listed:
                    ctx.add(where, f"resource group {group} listed twice")
                elif group not in ctx.group_names:
                    if ctx.groups_complete:
                        ctx.add(where, f"unknown resource group {group}")
                elif parent is not None and group not in parent.groups:
                    ctx.add(
                        where,
                        f"{info.path} cannot be planned in {group}: its parent {parent.path} is not "
                        f"(the parent's groups: {_listing(parent.groups) or 'none'})",
                    )
                else:
                    listed.append(group)
            info.groups = [g for g in ctx.group_names if g in listed]
        for group in model.groups:
            where = info.where + ("groups", group)
            if group not in ctx.group_names:
                if ctx.groups_complete:
                    ctx.add(where, f"unknown resource group {group}")
            elif group not in info.groups:
                why = (
                    "add it to resource_groups"
                    if model.resource_groups is not None
                    else f"its parent {info.parent} is not planned there"
                )
                ctx.add(
                    where,
                    f"{info.path} is not planned in {group} "
                    f"(its groups: {_listing(info.groups) or 'none'}); {why}",
                )


_OWNERSHIP_AND_PARTIAL = (*OWNERSHIP_FIELDS, "partial")


def _merge_settings(ctx: Context) -> None:
    """Per group: the per-group value if written, else the consumer-wide one, else the default."""
    for info in ctx.consumers.values():
        model = info.model
        assert model is not None
        # the consumer-wide values, worked out once; each group then applies its block
        written = model.model_fields_set
        wide = {name: getattr(model if name in written else _DEFAULTS, name) for name in SETTING_FIELDS}
        wide_sources = {name: info.where + (name,) for name in SETTING_FIELDS}
        for group in info.groups:
            override: SettingsIn | None = model.groups.get(group)
            values = dict(wide)
            sources = dict(wide_sources)
            if override is not None:
                here = info.where + ("groups", group)
                overridden = override.model_fields_set
                # a per-group owned, owned_hosts or owned_per_host replaces the consumer-wide
                # ownership whole (with its partial): one setting written in three forms
                if any(n in overridden for n in OWNERSHIP_FIELDS):
                    for name in _OWNERSHIP_AND_PARTIAL:
                        values[name] = getattr(_DEFAULTS, name)
                        sources[name] = here + (name,)
                for name in SETTING_FIELDS:
                    if name in overridden:
                        values[name] = getattr(override, name)
                        sources[name] = here + (name,)
            values["borrow_preference"] = tuple(values["borrow_preference"])
            values["grace"] = float(values["grace"])
            _split_kinds(values)
            info.settings[group] = values
            info.sources[group] = sources


def _split_kinds(values: dict[str, Any]) -> None:
    """Per-kind ownership, limits and lending (``owned: {gpus: 16}``, ``max: {cores: 64}``,
    ``lend: [gpus]``) go to their own settings; a plain number keeps meaning slots."""
    for name in ("owned", "max"):
        if isinstance(values[name], dict):
            values[name + "_kinds"] = tuple(sorted(values[name].items()))
            values[name] = getattr(_DEFAULTS, name)
    if isinstance(values["lend"], tuple):
        values["lend_kinds"] = values["lend"]
        values["lend"] = True


def _written_settings(info: ConsumerInfo) -> list[tuple[KeyPath, SettingsIn]]:
    """The consumer-wide block and each per-group block, with where each sits."""
    model = info.model
    assert model is not None
    blocks: list[tuple[KeyPath, SettingsIn]] = [(info.where, model)]
    blocks.extend((info.where + ("groups", g), s) for g, s in model.groups.items())
    return blocks


def _check_leaf_only(ctx: Context) -> None:
    for info in ctx.consumers.values():
        if not info.children:
            continue
        for where, block in _written_settings(info):
            for name in LENDING_FIELDS:
                if name in block.model_fields_set:
                    ctx.add(
                        where + (name,),
                        f"{name} applies to leaf consumers only, and {info.path} has children "
                        f"({_listing(info.children)})",
                    )


def _check_limits(ctx: Context) -> None:
    for info in ctx.consumers.values():
        for group in info.groups:
            values, sources = info.settings[group], info.sources[group]
            if not all(info.known(group, n) for n in OWNERSHIP_FIELDS):
                continue
            bounds = _owned_bounds(ctx, values, group)
            if bounds is None:
                continue
            low, high = bounds
            hosts = _kind(values) is not None
            what = f"({high} slots with {_form(values)})" if hosts and low == high else (
                f"(at most {high} slots with {_form(values)})" if hosts else f"({high})")
            if (
                values["lend_limit"] is not None
                and values["lend_limit"] > high
                and info.known(group, "lend_limit")
            ):
                ctx.add(
                    sources["lend_limit"],
                    f"lend_limit {values['lend_limit']} is above what {info.path} owns in {group} {what}",
                )
            if values["max"] is not None and values["max"] < low and info.known(group, "max"):
                what = f"({low} slots with {_form(values)})" if hosts and low == high else (
                    f"(at least {low} slots with {_form(values)})" if hosts else f"({low})")
                ctx.add(
                    sources["max"], f"max {values['max']} is below what {info.path} owns in {group} {what}"
                )


def _kind(values: dict[str, Any]) -> str | None:
    if values["owned_hosts"] is not None:
        return "names" if isinstance(values["owned_hosts"], tuple) else "hosts"
    if values["owned_per_host"] is not None:
        return "per_host"
    return None


def _form(values: dict[str, Any]) -> str:
    kind = _kind(values)
    if kind == "hosts":
        return f"owned_hosts: {values['owned_hosts']}"
    if kind == "names":
        return f"owned_hosts: [{_listing(list(values['owned_hosts']))}]"
    if kind == "per_host":
        return f"owned_per_host: {values['owned_per_host']}"
    return f"owned: {values['owned']}"


def _owned_bounds(ctx: Context, values: dict[str, Any], group: str) -> tuple[int, int] | None:
    """The fewest and the most slots the ownership written can come to in ``group``
    (the same number twice for owned: N, named hosts and owned_per_host); None when the
    group's hosts are not known."""
    kind = _kind(values)
    if kind is None:
        return values["owned"], values["owned"]
    members = next((g.hosts for g in ctx.groups if g.name == group), None)
    if members is None:
        return None
    slots = {h.name: h.slots for h in ctx.hosts}
    sizes = sorted(slots.get(h, 0) for h in members)
    if kind == "hosts":
        n = min(values["owned_hosts"], len(sizes))
        return sum(sizes[:n]), sum(sizes[len(sizes) - n:])
    if kind == "names":
        total = sum(slots.get(h, 0) for h in values["owned_hosts"])
        return total, total
    total = sum(min(values["owned_per_host"], n) for n in sizes)
    return total, total


def _check_named_consumers(ctx: Context) -> None:
    """lend_to and borrow_preference must name consumers that exist (and not the consumer itself)."""
    for info in ctx.consumers.values():
        for where, block in _written_settings(info):
            for name in ("lend_to", "borrow_preference"):
                if name not in block.model_fields_set:
                    continue
                value = getattr(block, name)
                if value is None:
                    continue
                if name == "lend_to" and not value:
                    ctx.add(where + (name,), "an empty list lends to nobody; use lend: false instead")
                    continue
                if name == "lend_to" and tuple(value) == ("siblings",):
                    continue
                seen: set[str] = set()
                for j, target in enumerate(value):
                    at = where + (name, j)
                    if target == "siblings":
                        ctx.add(at, "'siblings' must be given alone: lend_to: siblings")
                    elif target in seen:
                        ctx.add(at, f"{target} named twice")
                    elif target == info.path:
                        ctx.add(at, f"{target} is this consumer itself")
                    elif target not in ctx.consumer_paths:
                        if ctx.consumers_complete:
                            ctx.add(at, f"unknown consumer {target}")
                    seen.add(target)


def _check_ownership(ctx: Context) -> None:
    """A parent must own, in each group, at least what its children own together.

    Children whose ``owned`` could not be read are left out: the sum of the
    others is then a lower bound, so a shortfall it shows is still real.
    """
    for info in ctx.consumers.values():
        if not info.children:
            continue
        for group in info.groups:
            if not info.known(group, "owned"):
                continue
            planned = [ctx.consumers[c] for c in info.children if group in ctx.consumers[c].groups]
            # children that own hosts are checked against the parent's hosts (_check_host_ownership)
            kids = [k for k in planned if k.known(group, "owned") and _kind(k.settings[group]) is None]
            total = sum(k.settings[group]["owned"] for k in kids)
            values = info.settings[group]
            if _kind(values) is not None:
                bounds = _owned_bounds(ctx, values, group)
                if bounds is None or total <= bounds[1]:
                    continue
                owned = bounds[1]
                source = info.sources[group][_own_field(values)]
                says = f"{info.path} owns at most {owned} slots in {group} ({_form(values)})"
            else:
                owned = values["owned"]
                source = info.sources[group]["owned"]
                says = f"{info.path} owns {owned} in {group}"
            if total > owned:
                parts = [f"{k.path} {k.settings[group]['owned']}" for k in kids if k.settings[group]["owned"]]
                bound = "" if len(kids) == len(planned) else "at least "
                ctx.add(
                    source,
                    f"{says}, less than its children own together "
                    f"({bound}{total}: {_listing(parts)})",
                )


def _own_field(values: dict[str, Any]) -> str:
    kind = _kind(values)
    return "owned" if kind is None else ("owned_per_host" if kind == "per_host" else "owned_hosts")


def _check_host_ownership(ctx: Context) -> None:
    """Owned hosts (EGO's ownership policy): one form of ownership per block; named hosts exist, are in
    the group and are named once; ``partial`` goes with owned_hosts: N; a child owns
    hosts only out of its parent's hosts, and children together no more than the parent.
    Named hosts are expanded here (ranges) so the engine sees plain names."""
    reported: set[tuple[KeyPath, str]] = set()

    def add(where: KeyPath, reason: str) -> None:
        if (where, reason) not in reported:
            reported.add((where, reason))
            ctx.add(where, reason)

    members = {g.name: set(g.hosts) for g in ctx.groups}
    for info in ctx.consumers.values():
        for where, block in _written_settings(info):
            forms = [n for n in OWNERSHIP_FIELDS if n in block.model_fields_set]
            for extra in forms[1:]:
                add(where + (extra,),
                    f"give one of owned, owned_hosts and owned_per_host ({forms[0]} is given here too)")
        for group in info.groups:
            values, sources = info.settings[group], info.sources[group]
            if isinstance(values["owned_hosts"], tuple):
                names: list[str] = []
                for j, pattern in enumerate(values["owned_hosts"]):
                    at = sources["owned_hosts"] + (j,)
                    try:
                        expanded = expand_hosts(pattern)
                    except ValueError as exc:
                        add(at, str(exc))
                        continue
                    unknown = [n for n in expanded if n not in ctx.host_names]
                    if unknown and ctx.hosts_complete:
                        add(at, f"unknown host {_listing(unknown)}")
                    outside = [n for n in expanded if n in ctx.host_names and group in members
                               and n not in members[group]]
                    if outside:
                        add(at, f"host {_listing(outside)} is not in resource group {group}")
                    twice = [n for n in expanded if n in names]
                    if twice:
                        add(at, f"host {_listing(twice)} named twice")
                    names.extend(n for n in expanded if n not in names)
                values["owned_hosts"] = tuple(names)
            per_host = values["owned_per_host"]
            if per_host is not None and ctx.hosts_complete and group in members and members[group]:
                largest = max((h.slots for h in ctx.hosts if h.name in members[group]), default=0)
                if per_host > largest:
                    add(sources["owned_per_host"], f"owned_per_host {per_host} is more than any host of "
                        f"{group} has (the largest has {largest} slots)")
            if values["partial"] and _kind(values) != "hosts":
                add(sources["partial"], "partial applies to owned_hosts: N (a number of hosts) only; "
                    f"{info.path} has {_form(values)} in {group}")
    for info in ctx.consumers.values():
        parent = _linked_parent(ctx, info)
        if parent is None:
            continue  # top level: more hosts than the group has is overallocation, allowed
        for group in info.groups:
            values = info.settings[group]
            kind = _kind(values)
            if kind is None or group not in parent.groups:
                continue
            pv = parent.settings[group]
            pkind = _kind(pv)
            at = info.sources[group][_own_field(values)]
            if pkind is None:
                add(at, f"{info.path} cannot own hosts in {group}: its parent {parent.path} owns no hosts "
                    "there (a child's ownership is assigned from its parent's; give the parent "
                    "owned_hosts or owned_per_host)")
            elif kind == "names" and pkind == "names":
                missing = [n for n in values["owned_hosts"] if n not in pv["owned_hosts"]]
                if missing:
                    add(at, f"host {_listing(missing)} is not among {parent.path}'s hosts in {group} "
                        f"({_listing(list(pv['owned_hosts']))})")
            elif kind == "per_host" and pkind == "per_host" and values["owned_per_host"] > pv["owned_per_host"]:
                add(at, f"owned_per_host {values['owned_per_host']} is more than {parent.path} owns of each "
                    f"host in {group} ({pv['owned_per_host']})")
    for info in ctx.consumers.values():
        if not info.children:
            continue
        for group in info.groups:
            pv = info.settings[group]
            pkind = _kind(pv)
            if pkind is None:
                continue
            kids = [ctx.consumers[c] for c in info.children if group in ctx.consumers[c].groups]
            at = info.sources[group][_own_field(pv)]
            if pkind in ("hosts", "names"):
                cap = pv["owned_hosts"] if pkind == "hosts" else len(pv["owned_hosts"])
                named: list[str] = []
                counted = 0
                parts = []
                for k in kids:
                    kv = k.settings[group]
                    if _kind(kv) == "hosts":
                        counted += kv["owned_hosts"]
                        parts.append(f"{k.path} {kv['owned_hosts']}")
                    elif _kind(kv) == "names":
                        named.extend(n for n in kv["owned_hosts"] if n not in named)
                        parts.append(f"{k.path} {len(kv['owned_hosts'])}")
                if counted + len(named) > cap:
                    add(at, f"{info.path} owns {cap} hosts in {group}, fewer than its children own together "
                        f"({counted + len(named)}: {_listing(parts)})")
            else:
                per = [(k.path, k.settings[group]["owned_per_host"]) for k in kids
                       if _kind(k.settings[group]) == "per_host"]
                total = sum(n for _, n in per)
                if total > pv["owned_per_host"]:
                    add(at, f"{info.path} owns {pv['owned_per_host']} slots of each host in {group}, fewer "
                        f"than its children together ({total}: {_listing([f'{p} {n}' for p, n in per])})")


def compile_consumers(ctx: Context, items: list[Checked[ConsumerIn]]) -> None:
    """Check the consumer section and leave the compiled tree in ``ctx.compiled_consumers``."""
    first_index = _read_paths(ctx, items)
    _link_tree(ctx, first_index)
    _plan_groups(ctx)
    _merge_settings(ctx)
    _check_leaf_only(ctx)
    _check_named_consumers(ctx)
    _check_host_ownership(ctx)
    _check_limits(ctx)
    _check_ownership(ctx)
    ctx.compiled_consumers = tuple(
        Consumer(
            path=info.path,
            parent=info.parent,
            children=tuple(info.children),
            index=info.index,
            groups={g: GroupSettings(**info.settings[g]) for g in info.groups},
            execution_user=_execution_user(ctx, info),
        )
        for info in ctx.consumers.values()
    )


def _execution_user(ctx: Context, info: ConsumerInfo) -> str | None:
    """The consumer's own ``execution_user``, else its nearest ancestor's (EGO's ExecutionUser)."""
    node: ConsumerInfo | None = info
    while node is not None:
        model = node.model
        if model is not None and model.execution_user is not None:
            return model.execution_user
        node = _linked_parent(ctx, node)
    return None
