"""Hosts and resource groups: expand ranges, resolve static lists and select() groups."""

from __future__ import annotations

from collections.abc import Callable

from apportion.engine.model import AllocationPolicy, Host, HostState, Kinds, ResourceGroup
from apportion.plan.context import Context
from apportion.plan.errors import KeyPath
from apportion.plan.hostnames import expand_hosts
from apportion.plan.schema import Checked, HostIn, ResourceGroupIn
from apportion.plan.select import Requirement, parse_requirement
from apportion.plan.slot_expression import slots_of


def _names_list(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def new_host_names(name: object, index: int, first_seen: dict[str, int],
                   problem: Callable[[str], None]) -> list[str] | None:
    """The names ``hosts[index].name`` expands to that no earlier entry defined.
    A bad range is reported (None); names defined before are reported and left out.
    ``first_seen`` (name -> index of the entry that defined it) is kept up to date.
    Plans and DUCC scenarios both read their host lists through here."""
    if not isinstance(name, str):
        return None
    try:
        names = expand_hosts(name)
    except ValueError as exc:
        problem(str(exc))
        return None
    twice = [n for n in names if n in first_seen]
    if twice:
        earlier = sorted({first_seen[n] for n in twice})
        problem(f"{_names_list(twice)} already defined by " + ", ".join(f"hosts[{i}]" for i in earlier))
    fresh = []
    for n in names:
        if n not in first_seen:
            first_seen[n] = index
            fresh.append(n)
    return fresh


def compile_hosts(ctx: Context, items: list[Checked[HostIn]]) -> None:
    """One Host per expanded name, in plan order; every name at most once."""
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        where: KeyPath = ("hosts", index, "name")
        name = item.value("name")
        names = new_host_names(name, index, first_seen, lambda reason, where=where: ctx.add(where, reason))
        if names is None:
            if isinstance(name, str):
                ctx.host_names.add(name)
            else:
                ctx.hosts_complete = False
            continue
        shape = _shape(ctx, index, item) if item.model is not None else None
        for host_name in names:
            ctx.host_names.add(host_name)
            if item.model is not None and shape is not None:
                m = item.model
                slots, memory, resources = shape
                ctx.hosts.append(
                    Host(host_name, slots, memory, dict(m.attributes), HostState(m.state), resources)
                )


def _shape(ctx: Context, index: int, item: Checked[HostIn]) -> tuple[int, float, Kinds] | None:
    """A host entry's slots, memory and resource vector. With ``resources``, ``slots`` may be
    left out (the whole cores, at least 1) or be an expression over them; ``memory`` left out
    is the resources' memory. None (and a problem naming the field) when they do not add up."""
    m = item.model
    assert m is not None
    written = m.model_fields_set
    if m.resources is None:
        if isinstance(m.slots, str):
            ctx.add(("hosts", index, "slots"), f"must be a whole number (got {m.slots!r}); an expression needs the host's resources "
                           "(resources: {cores: 8, memory: 32})")
            return None
        return m.slots, float(m.memory), ()
    resources = m.resources
    memory = float(m.memory) if "memory" in written else float(resources.get("memory", 0.0))
    if "slots" not in written:
        slots = max(1, int(resources.get("cores", 1) + 1e-9))
    elif isinstance(m.slots, str):
        try:
            slots = slots_of(m.slots, resources)
        except ValueError as exc:
            ctx.add(("hosts", index, "slots"), str(exc))
            return None
    else:
        slots = m.slots
    return slots, memory, tuple(sorted(resources.items()))


def resolve_host_names(ctx: Context, pattern: str, where: KeyPath) -> list[str] | None:
    """Expand a host name or pattern and check every name exists; None (and a problem) if not."""
    try:
        names = expand_hosts(pattern)
    except ValueError as exc:
        ctx.add(where, str(exc))
        return None
    unknown = [n for n in names if n not in ctx.host_names]
    if unknown:
        if ctx.hosts_complete:
            ctx.add(where, f"unknown host {_names_list(unknown)}")
        return None
    return names


def _parse(ctx: Context, text: str, where: KeyPath) -> Requirement | None:
    try:
        return parse_requirement(text)
    except ValueError as exc:
        ctx.add(where, str(exc))
        return None


def _group_members(ctx: Context, index: int, m: ResourceGroupIn) -> list[str] | None:
    """The group's host names, in preference order; None when they could not be resolved."""
    where: KeyPath = ("resource_groups", index)
    if (m.hosts is None) == (m.select is None):
        reason = "give either hosts or select, not both" if m.hosts is not None else (
            "needs hosts (a list of host names) or select (a requirement such as select(linux))"
        )
        ctx.add(where + (("select",) if m.hosts is not None else ()), reason)
        return None
    ordering = None
    if m.order is not None:
        ordering = _parse(ctx, m.order, where + ("order",))
        if ordering is not None and (ordering.has_select or not ordering.order):
            ctx.add(where + ("order",), f"must be only an order(...) section (got {m.order!r})")
            ordering = None
    members: list[str] = []
    if m.select is not None:
        requirement = _parse(ctx, m.select, where + ("select",))
        if requirement is None:
            return None
        if requirement.order and m.order is not None:
            ctx.add(where + ("order",), "order is given twice: in select and in order")
        members = [h.name for h in requirement.sort_hosts([h for h in ctx.hosts if requirement(h)])]
    else:
        assert m.hosts is not None
        ok = True
        seen: set[str] = set()
        for j, pattern in enumerate(m.hosts):
            names = resolve_host_names(ctx, pattern, where + ("hosts", j))
            if names is None:
                ok = False
                continue
            again = [n for n in names if n in seen]
            if again:
                ctx.add(where + ("hosts", j), f"host {_names_list(again)} listed twice in this group")
            fresh = [n for n in dict.fromkeys(names) if n not in seen]
            members.extend(fresh)
            seen.update(fresh)
        if not ok:
            return None
    if ordering is not None:
        by_name = {h.name: h for h in ctx.hosts}
        if all(n in by_name for n in members):
            members = [h.name for h in ordering.sort_hosts([by_name[n] for n in members])]
    return members


def compile_groups(ctx: Context, items: list[Checked[ResourceGroupIn]]) -> None:
    """ResourceGroups in plan order; names unique."""
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        name = item.value("name")
        if not isinstance(name, str):
            ctx.groups_complete = False
            continue
        if name in first_seen:
            ctx.add(
                ("resource_groups", index, "name"),
                f"resource group {name} already defined at resource_groups[{first_seen[name]}]",
            )
            continue
        first_seen[name] = index
        ctx.group_names.append(name)
        if item.model is None:
            continue
        members = _group_members(ctx, index, item.model)
        if members is not None:
            ctx.groups.append(
                ResourceGroup(name, tuple(members), AllocationPolicy(item.model.allocation_policy),
                              item.model.packing)
            )
