"""Per-consumer quotas: how many clients, open allocations, running activities and how much
outstanding demand (the sum of open allocations' ``max``) a tenant may have at once, and on a
DUCC master how much open work (jobs, reservations and services not yet ended).

A plan sets them on a consumer (``consumers[].quota: {clients, allocations, activities,
demand}``; a field left out keeps the default); a DUCC plan, whose consumers are its users
(``/USER``), sets them per user (``ducc.quotas: {USER: {jobs, clients}}``). A quota covers
the subtree of the consumer that names it, and every consumer below takes the nearest one
above it (or its own). Where no consumer on the way names one, the defaults cover each
top-level consumer's subtree (``/Apps`` and everything under it together). The defaults are
far above what a normal tenant uses; they stop a runaway or hostile token, not work.

Over a limit the call is refused with 429, naming the consumer, the limit and the count,
and nothing changes. Checked inside the master's task, with the change.

The counts are kept as the master changes (``Book``: its hooks are called where clients,
allocations, activities and jobs come and go), so a check costs the same at 20 allocations
or 20,000: no walk over them. Each count is kept per consumer and, for the quotas in
force, per subtree a quota can cover: the whole tree, each top-level consumer, each
consumer that names one. A plan that names other quotas sums them again once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from apportion.service.refusal import ApiError


class Master(Protocol):
    """What the checks read of the master (``service.master.Master`` is one); named here so that
    this module, which the master imports, need not import it back."""

    quota: Book

    def quotas_named(self) -> Mapping[str, Quota]: ...


@dataclass(frozen=True, slots=True)
class Quota:
    clients: int = 1000
    allocations: int = 10_000  # open allocations
    activities: int = 100_000  # starting or running
    demand: int = 10_000_000  # the sum of open allocations' max, in slots
    jobs: int = 10_000  # DUCC: jobs, reservations and services not yet ended


DEFAULT = Quota()
FIELDS = frozenset(f.name for f in fields(Quota))
_cache: dict[int, tuple[Any, dict[str, Quota]]] = {}  # id(plan data) -> (the data, consumer -> its quota)


def _quota(q: Mapping[str, Any]) -> Quota:
    # bool is an int: a plan's `true` is not a limit
    return replace(DEFAULT, **{k: v for k, v in q.items()
                               if k in FIELDS and isinstance(v, int) and not isinstance(v, bool)})


def named(data: Mapping[str, Any] | None) -> dict[str, Quota]:
    """The quotas an EGO plan names: consumer path -> Quota (defaults for the fields left out)."""
    key = id(data)
    hit = _cache.get(key)
    if hit is not None and hit[0] is data:
        return hit[1]
    out: dict[str, Quota] = {}
    consumers = (data or {}).get("consumers") if isinstance(data, Mapping) else None
    for c in consumers if isinstance(consumers, list) else []:
        q = c.get("quota") if isinstance(c, Mapping) else None
        if isinstance(q, Mapping) and isinstance(c.get("path"), str):
            out[c["path"].rstrip("/") or "/"] = _quota(q)
    _cache.clear()
    _cache[key] = (data, out)
    return out


def named_ducc(raw: Any) -> dict[str, Quota]:
    """The quotas a DUCC plan names (``ducc.quotas``: user -> fields): ``/USER`` -> Quota."""
    if not isinstance(raw, Mapping):
        return {}
    return {f"/{user}": _quota(q) for user, q in raw.items() if isinstance(user, str) and isinstance(q, Mapping)}


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


def _roots(consumer: str, quotas: Mapping[str, Quota]) -> tuple[str, ...]:
    """Every subtree holding ``consumer`` whose count a check may read: the whole tree, its
    top-level consumer's, and those of the consumers on the way that name a quota."""
    path = consumer.rstrip("/") or "/"
    if path == "/":
        return ("/",)
    parts = path.strip("/").split("/")
    out = ["/", "/" + parts[0]]
    probe = out[1]
    for p in parts[1:]:
        probe += "/" + p
        if probe in quotas:
            out.append(probe)
    return tuple(out)


class Tally:
    """One count per consumer, and per subtree a quota of the quotas last asked about covers."""

    __slots__ = ("each", "quotas", "sums", "roots_of")

    def __init__(self) -> None:
        self.each: dict[str, int] = {}
        self.quotas: Mapping[str, Quota] | None = None
        self.sums: dict[str, int] = {}
        self.roots_of: dict[str, tuple[str, ...]] = {}

    def add(self, consumer: str, n: int = 1) -> None:
        if not n:
            return
        v = self.each.get(consumer, 0) + n
        if v:
            self.each[consumer] = v
        else:
            del self.each[consumer]
        if self.quotas is not None:
            roots = self.roots_of.get(consumer)
            if roots is None:
                roots = self.roots_of[consumer] = _roots(consumer, self.quotas)
            sums = self.sums
            for r in roots:
                sums[r] = sums.get(r, 0) + n

    def under(self, root: str, quotas: Mapping[str, Quota]) -> int:
        """The count of ``root``'s subtree (``root`` one that ``owner`` gives under ``quotas``)."""
        if quotas is not self.quotas:  # other quotas in force: the subtrees are summed again
            self.quotas, self.sums, self.roots_of = quotas, {}, {}
            for consumer, n in list(self.each.items()):
                self.each.pop(consumer)
                self.add(consumer, n)
        return self.sums.get(root, 0)


class Book:
    """The master's counts, as its hooks keep them."""

    __slots__ = ("clients", "allocations", "demand", "activities", "jobs", "live")

    def __init__(self) -> None:
        self.clients, self.allocations, self.demand = Tally(), Tally(), Tally()
        self.activities = Tally()  # live activities of allocations still open, by the allocation's consumer
        self.jobs = Tally()  # DUCC work not yet ended, by /USER
        self.live: dict[int, int] = {}  # allocation -> its live activities (open or not)

    @classmethod
    def of(cls, clients: Any, allocations: Mapping[int, Any], live_on: Mapping[Any, Mapping[Any, Any]],
           jobs: Any = ()) -> Book:
        """The counts of what the master holds (at start)."""
        b = cls()
        for c in clients:
            b.clients.add(c.consumer)
        for a in allocations.values():
            b.allocation_added(a)
        for on in live_on.values():
            for act in on.values():
                b.activity_started(allocations.get(act.allocation), act.allocation)
        for j in jobs:
            if not j.ended:
                b.jobs.add(f"/{j.user}")
        return b

    def allocation_added(self, a: Any) -> None:
        self.allocations.add(a.consumer)
        self.demand.add(a.consumer, a.max)

    def allocation_gone(self, a: Any) -> None:
        """An allocation left (deleted, or ended by a plan change): its live activities no
        longer count, even while they are being stopped."""
        self.allocations.add(a.consumer, -1)
        self.demand.add(a.consumer, -a.max)
        self.activities.add(a.consumer, -self.live.get(a.id, 0))

    def max_changed(self, a: Any, old: int) -> None:
        self.demand.add(a.consumer, a.max - old)

    def activity_started(self, a: Any, aid: int) -> None:
        """An activity of allocation ``aid`` (``a``; None when it is not open) became live."""
        self.live[aid] = self.live.get(aid, 0) + 1
        if a is not None:
            self.activities.add(a.consumer)

    def activity_ended(self, a: Any, aid: int) -> None:
        """A live activity of allocation ``aid`` (``a``; None when it is gone) ended."""
        n = self.live.get(aid, 0)
        if n <= 0:
            return  # not one counted (a DUCC process: no allocation)
        if n == 1:
            del self.live[aid]
        else:
            self.live[aid] = n - 1
        if a is not None:
            self.activities.add(a.consumer, -1)


def _check(m: Master, consumer: str, what: str, more: int = 1, less: int = 0) -> None:
    """Refused (429) if ``consumer``'s quota root would pass its ``what`` limit with ``more``
    added and ``less`` taken away."""
    quotas = m.quotas_named()
    root, q = owner(consumer, quotas)
    n = getattr(m.quota, what).under(root, quotas)
    limit = getattr(q, what)
    if n - less + more > limit:
        raise ApiError(429, f"quota: {root} may have {limit} {what} (quota.{what}); it has {n}")


def check_client(m: Master, consumer: str) -> None:
    _check(m, consumer, "clients")


def check_allocation(m: Master, consumer: str, mx: int, old_max: int = 0, new: bool = True) -> None:
    """A new allocation of ``mx`` slots (or one whose max goes from ``old_max`` to ``mx``)."""
    if new:
        _check(m, consumer, "allocations")
    if mx > old_max:
        _check(m, consumer, "demand", mx, old_max)


def check_activity(m: Master, consumer: str) -> None:
    _check(m, consumer, "activities")


def check_job(m: Master, consumer: str) -> None:
    """A new job, reservation or service of ``consumer`` (a DUCC master's ``/USER``)."""
    _check(m, consumer, "jobs")
