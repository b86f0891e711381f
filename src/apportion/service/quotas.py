"""Per-consumer quotas: how many clients, open allocations, running activities and how much
outstanding demand (the sum of open allocations' ``max``) a tenant may have at once.

A plan sets them on a consumer (``consumers[].quota: {clients, allocations, activities,
demand}``; a field left out keeps the default). A quota covers the subtree of the consumer
that names it, and every consumer below takes the nearest one above it (or its own). Where
no consumer on the way names one, the defaults cover each top-level consumer's subtree
(``/Apps`` and everything under it together). The defaults are far above what a normal
tenant uses; they stop a runaway or hostile token, not work.

Over a limit the call is refused with 429, naming the consumer, the limit and the count,
and nothing changes. Checked inside the master's task, with the change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from apportion.service.refusal import ApiError


class Master(Protocol):
    """What the checks read of the master (``service.master.Master`` is one); named here so that
    this module, which the master imports, need not import it back."""

    @property
    def parsed(self) -> Any: ...

    @property
    def clients(self) -> Mapping[int, Any]: ...

    @property
    def allocations(self) -> Mapping[int, Any]: ...

    @property
    def live_on(self) -> Mapping[Any, Mapping[Any, Any]]: ...


@dataclass(frozen=True, slots=True)
class Quota:
    clients: int = 1000
    allocations: int = 10_000  # open allocations
    activities: int = 100_000  # starting or running
    demand: int = 10_000_000  # the sum of open allocations' max, in slots


DEFAULT = Quota()
_cache: dict[int, tuple[Any, dict[str, Quota]]] = {}  # id(plan data) -> (the data, consumer -> its quota)


def named(data: Mapping[str, Any] | None) -> dict[str, Quota]:
    """The quotas the plan names: consumer path -> Quota (defaults for the fields left out)."""
    key = id(data)
    hit = _cache.get(key)
    if hit is not None and hit[0] is data:
        return hit[1]
    out: dict[str, Quota] = {}
    consumers = (data or {}).get("consumers") if isinstance(data, Mapping) else None
    for c in consumers if isinstance(consumers, list) else []:
        q = c.get("quota") if isinstance(c, Mapping) else None
        if isinstance(q, Mapping) and isinstance(c.get("path"), str):
            known = {f.name for f in fields(Quota)}
            out[c["path"].rstrip("/") or "/"] = replace(DEFAULT, **{k: v for k, v in q.items()
                                                                    if k in known and isinstance(v, int)})
    _cache.clear()
    _cache[key] = (data, out)
    return out


def owner(consumer: str, quotas: Mapping[str, Quota]) -> tuple[str, Quota]:
    """The consumer whose quota ``consumer`` counts against, and that quota."""
    path = consumer.rstrip("/") or "/"
    probe = path
    while True:
        if probe in quotas:
            return probe, quotas[probe]
        if probe == "/":
            break
        probe = probe.rsplit("/", 1)[0] or "/"
    top = "/" + path.strip("/").split("/")[0] if path != "/" else "/"
    return top, DEFAULT


def _under(consumer: str, root: str) -> bool:
    return root == "/" or consumer == root or consumer.startswith(root + "/")


def _refuse(root: str, what: str, limit: int, count: int) -> None:
    raise ApiError(429, f"quota: {root} may have {limit} {what} (quota.{what}); it has {count}")


def _count(items: Iterable[str], root: str) -> int:
    return sum(1 for c in items if _under(c, root))


def check_client(m: Master, consumer: str) -> None:
    root, q = owner(consumer, named(m.parsed.data))
    n = _count((c.consumer for c in m.clients.values()), root)
    if n + 1 > q.clients:
        _refuse(root, "clients", q.clients, n)


def check_allocation(m: Master, consumer: str, mx: int, old_max: int = 0, new: bool = True) -> None:
    """A new allocation of ``mx`` slots (or one whose max goes from ``old_max`` to ``mx``)."""
    root, q = owner(consumer, named(m.parsed.data))
    if new:
        n = _count((a.consumer for a in m.allocations.values()), root)
        if n + 1 > q.allocations:
            _refuse(root, "allocations", q.allocations, n)
    if mx > old_max:
        demand = sum(a.max for a in m.allocations.values() if _under(a.consumer, root))
        if demand - old_max + mx > q.demand:
            _refuse(root, "demand", q.demand, demand)


def check_activity(m: Master, consumer: str) -> None:
    root, q = owner(consumer, named(m.parsed.data))
    n = 0
    for on in m.live_on.values():
        for act in on.values():
            a = m.allocations.get(act.allocation)
            if a is not None and _under(a.consumer, root):
                n += 1
    if n + 1 > q.activities:
        _refuse(root, "activities", q.activities, n)
