"""Which hosts each consumer owns (EGO's ownership policy, multidimensional plans). Pure: no I/O, no clock.

A consumer may own hosts in a resource group in three ways (``GroupSettings``):

- ``owned_hosts: N``: N hosts. Whole hosts, unless ``partial`` allows parts of
  hosts as well, or a better-ranked consumer already took part of every host left
  (EGO's ownership policy: "it still takes the partial host if an alternative is not available");
- ``owned_hosts: [names]``: those hosts;
- ``owned_per_host: K``: K slots of every host in scope (partial ownership).

(``owned: N``, aggregate slots not tied to hosts, is the engine's business as before.)

The *scope* of a top-level consumer is the group's hosts that are not down; the
scope of a child is what its parent owns (its slots on each host): children's
ownership is assigned from the parent's and is a subset of it. What a parent owns
beyond its children is its private pool; what the top level leaves unowned is the
public pool.

``assign`` works out the ownership, level by level, siblings in rank order (best
rank first, ties to the consumer earlier in the plan). Without a previous
assignment this is the assignment of a new plan. With one (a plan change, a host
down or back), it follows the steps of EGO's ownership policy with minimal impact:

1. drop what is no longer owned: hosts gone, down, or out of the parent's scope,
   names no longer listed, hosts beyond a lowered count (the least used by the
   consumer's own work go, and come back first should it be short again). A host
   kept but idle stays with its owner (EGO's ownership policy drops it to the public pool and
   gives it back at once: the same result);
2. consumers short of their configured ownership, best rank first, take hosts:
   public (or parent's private) pool hosts, least workload first (of equal ones, a
   host just given up first, so it moves straight to whoever needs it); then hosts
   of worse-ranked siblings, the worst rank first. Whole hosts first unless
   ``partial``; a part of a host only when no whole one is left;
3. when a group shrinks (a host down, a host out of the group, a parent owning
   less), the ownership recomputed in rank order is what step 2 gives: the
   consumers that now own more than the smaller group leaves them are the worst
   ranked, and step 2 trims them, each by the host its own work uses least (what
   the better rank would like does not enter into it). ``Assignment.trimmed``
   lists them.

``redistribute`` is the periodic pass of step 3: owned hosts that are idle are
collected from every consumer and handed out again by rank (an owner gets its own
back first unless a better rank is short and the pool has no idle host for it).

"Workload" of a host, for a consumer choosing it, is the slots used on it by
others (what taking it might one day cost them); ties go to the host with less
work in all, then to the group's host order. Step 4 (rebalancing allocations) is
the engine's cycle.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from sortedcontainers import SortedList

from apportion.engine.model import ROOT, GroupSettings, HostState, Plan

COUNT = "hosts"  # owned_hosts: N
NAMES = "names"  # owned_hosts: [names]
PER_HOST = "per_host"  # owned_per_host: K

Owners = dict[str, dict[str, dict[str, int]]]
"""group -> consumer -> host -> owned slots."""

OwnerMap = Mapping[str, Mapping[str, Mapping[str, int]]]

Workload = Mapping[str, Mapping[str, Mapping[str, int]]]
"""group -> host -> leaf -> slots held there (current allocations)."""

UNSET = 1 << 30


def host_kind(s: GroupSettings) -> str | None:
    """How a consumer owns hosts in a group: COUNT, NAMES, PER_HOST, or None (aggregate/none)."""
    if s.owned_hosts is not None:
        return NAMES if isinstance(s.owned_hosts, tuple) else COUNT
    if s.owned_per_host is not None:
        return PER_HOST
    return None


def uses_host_ownership(plan: Plan) -> bool:
    return any(host_kind(s) for c in plan.consumers for s in c.groups.values())


def _rank_key(s: GroupSettings, index: int) -> tuple[int, int]:
    return (s.rank if s.rank is not None else UNSET, index)


@dataclass(frozen=True, slots=True)
class Move:
    """Slots of a host that change owner. ``source``/``target`` are the deepest owners
    (a consumer whose children do not own those slots), None for the pool."""

    group: str
    host: str
    source: str | None
    target: str | None
    slots: int


@dataclass(slots=True)
class Assignment:
    owners: Owners = field(default_factory=dict)
    short: dict[str, dict[str, int]] = field(default_factory=dict)  # group -> consumer -> units short
    # (group, consumer, host): hosts taken from a consumer for a better rank (step 2/3)
    trimmed: list[tuple[str, str, str]] = field(default_factory=list)

    def owned_slots(self, group: str, consumer: str) -> int:
        return sum(self.owners.get(group, {}).get(consumer, {}).values())


# --- the pass over one group --------------------------------------------------


class _Group:
    def __init__(self, plan: Plan, group, previous: Mapping[str, Mapping[str, int]],
                 load: Mapping[str, Mapping[str, int]], down: Collection[str], collect_free: bool,
                 slots: Mapping[str, int]) -> None:
        self.name = group.name
        self.pos = {h: i for i, h in enumerate(group.hosts)}
        self.hosts = [h for h in group.hosts if h not in down and h in slots]
        self.slots = slots
        self.previous = previous
        self.collect_free = collect_free
        cons = [c for c in plan.consumers if group.name in c.groups]
        self.settings = {c.path: c.groups[group.name] for c in cons}
        self.index = {c.path: c.index for c in cons}
        self.kind = {p: host_kind(s) for p, s in self.settings.items()}
        kids: dict[str, list[str]] = {}
        for c in cons:
            kids.setdefault(c.parent, []).append(c.path)
        self.children = {p: sorted(ks, key=lambda k: _rank_key(self.settings[k], self.index[k]))
                         for p, ks in kids.items()}
        parent = {c.path: c.parent for c in plan.consumers}
        # workload: total per host, per consumer subtree per host, hosts each subtree uses
        self.total: dict[str, int] = {}
        self.sub: dict[str, dict[str, int]] = {}
        self.loaded: dict[str, set[str]] = {}
        for h, by_leaf in load.items():
            t = 0
            per = self.sub.setdefault(h, {})
            for leaf, n in by_leaf.items():
                if n <= 0:
                    continue
                t += n
                p = leaf
                while p != ROOT and p in parent:
                    per[p] = per.get(p, 0) + n
                    self.loaded.setdefault(p, set()).add(h)
                    p = parent[p]
            self.total[h] = t
        # hosts named by anyone: others avoid them while they have a choice
        self.named: set[str] = set()
        self.names_below: dict[str, list[str]] = {}
        for c in cons:
            s = self.settings[c.path]
            if self.kind[c.path] == NAMES:
                self.named.update(s.owned_hosts)  # type: ignore[arg-type]
                p = c.parent
                while p != ROOT and p in self.settings:
                    lst = self.names_below.setdefault(p, [])
                    lst.extend(h for h in s.owned_hosts if h not in lst)  # type: ignore[union-attr]
                    p = parent[p]
        self.out: dict[str, dict[str, int]] = {}
        self.short: dict[str, int] = {}
        self.trimmed: list[tuple[str, str, str]] = []

    def own_load(self, k: str, h: str) -> int:
        return self.sub.get(h, {}).get(k, 0)

    def others_load(self, k: str, h: str) -> int:
        return self.total.get(h, 0) - self.own_load(k, h)

    def run(self) -> None:
        self._level(ROOT, {h: self.slots[h] for h in self.hosts})

    # one parent's children, inside the parent's scope --------------------------------
    def _level(self, parent: str, scope: dict[str, int]) -> None:
        kids = [k for k in self.children.get(parent, ()) if self.kind[k] is not None]
        if not kids:
            return
        lv = _Level(self, kids, scope)
        lv.keep()
        lv.fill()
        for k in kids:
            mine = lv.held[k]
            self.out[k] = dict(sorted(mine.items(), key=lambda x: self.pos[x[0]]))
            if lv.short.get(k):
                self.short[k] = lv.short[k]
        for k in kids:
            self._level(k, self.out[k])


class _Level:
    """The siblings under one parent, sharing the parent's scope."""

    def __init__(self, g: _Group, kids: list[str], scope: dict[str, int]) -> None:
        self.g = g
        self.kids = kids
        self.rank_of = {k: i for i, k in enumerate(kids)}
        self.scope = scope
        self.used = {h: 0 for h in scope}
        self.held: dict[str, dict[str, int]] = {k: {} for k in kids}
        self.holders: dict[str, dict[str, int]] = {h: {} for h in scope}
        self.collected: dict[str, dict[str, int]] = {k: {} for k in kids}
        self.collected_hosts: set[str] = set()  # idle hosts collected by the periodic pass
        self.spare_hosts: set[str] = set()  # hosts an owner gave up beyond its count
        self.short: dict[str, int] = {}
        self._whole: SortedList | None = None
        self._any: SortedList | None = None

    # book-keeping ---------------------------------------------------------------
    def free(self, h: str) -> int:
        return self.scope[h] - self.used[h]

    def _key(self, h: str) -> tuple:
        g = self.g
        return (g.total.get(h, 0), 0, h in g.named, self._origin(h), g.pos[h], h)

    def _origin(self, h: str) -> int:
        """Among hosts of equal workload: one an owner gave up (beyond its count) first,
        so the change moves it straight to whoever needs it; then a host that was in
        the pool; an idle host collected from an owner last (its owner
        would take it back)."""
        return 0 if h in self.spare_hosts else (2 if h in self.collected_hosts else 1)

    def _index_remove(self, h: str) -> None:
        if self._any is not None and self.free(h) > 0:
            k = self._key(h)
            self._any.remove(k)
            self._whole.remove((self.used[h] > 0,) + k)

    def _index_add(self, h: str) -> None:
        if self._any is not None and self.free(h) > 0:
            k = self._key(h)
            self._any.add(k)
            self._whole.add((self.used[h] > 0,) + k)

    def give(self, k: str, h: str, n: int) -> None:
        if n <= 0:
            return
        self._index_remove(h)
        self.held[k][h] = self.held[k].get(h, 0) + n
        self.holders[h][k] = self.holders[h].get(k, 0) + n
        self.used[h] += n
        self._index_add(h)

    def take(self, k: str, h: str, n: int | None = None) -> int:
        have = self.held[k].get(h, 0)
        n = have if n is None else min(n, have)
        if n <= 0:
            return 0
        self._index_remove(h)
        if n == have:
            del self.held[k][h]
            del self.holders[h][k]
        else:
            self.held[k][h] = have - n
            self.holders[h][k] = have - n
        self.used[h] -= n
        self._index_add(h)
        return n

    def settings(self, k: str) -> GroupSettings:
        return self.g.settings[k]

    def names_in_scope(self, k: str) -> list[str]:
        return [h for h in self.settings(k).owned_hosts if h in self.scope]  # type: ignore[union-attr]

    # step 1 ---------------------------------------------------------------------
    def keep(self) -> None:
        g = self.g
        for k in self.kids:
            s, kind = self.settings(k), g.kind[k]
            allowed = set(s.owned_hosts) if kind == NAMES else None  # type: ignore[arg-type]
            kept: list[tuple[str, int]] = []
            for h, n in g.previous.get(k, {}).items():
                if h not in self.scope or (allowed is not None and h not in allowed):
                    continue  # gone, down, outside the parent's ownership, no longer named
                cap = self.free(h)
                if kind == PER_HOST:
                    cap = min(cap, s.owned_per_host)  # type: ignore[type-var]
                n = min(n, cap)
                if n > 0:
                    kept.append((h, n))
                    self.used[h] += n  # reserve while deciding (undone below)
            for h, n in kept:
                self.used[h] -= n
            spare: list[tuple[str, int]] = []
            if kind == COUNT and len(kept) > s.owned_hosts:  # type: ignore[operator]
                # more hosts than it now owns: the least used by its own work go to the
                # pool, and come back first should it be short again in step 2
                kept = self._most_used(k, kept)
                kept, spare = kept[: s.owned_hosts], kept[s.owned_hosts:]  # type: ignore[misc]
            self.spare_hosts.update(h for h, _ in spare)
            if g.collect_free:
                idle = [(h, n) for h, n in kept if g.total.get(h, 0) == 0]
                kept = [(h, n) for h, n in kept if g.total.get(h, 0) > 0]
                self.collected_hosts.update(h for h, _ in idle)
                spare += idle
            self.collected[k] = dict(spare)
            for h, n in kept:
                self.give(k, h, n)

    def _most_used(self, k: str, parts: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Parts in the order they are kept: not named by a better-ranked sibling (it
        would take them), then most of the consumer's own work, then most work in all."""
        g = self.g
        named = self._named_by_better(k)
        return sorted(parts, key=lambda x: (x[0] in named, -g.own_load(k, x[0]), -g.total.get(x[0], 0),
                                            g.pos[x[0]]))

    def _named_by_better(self, k: str) -> set[str]:
        out: set[str] = set()
        for v in self.kids[: self.rank_of[k]]:
            if self.g.kind[v] == NAMES:
                out.update(self.settings(v).owned_hosts)  # type: ignore[arg-type]
        return out

    # step 2 ---------------------------------------------------------------------
    def fill(self) -> None:
        self._any = SortedList()
        self._whole = SortedList()
        for h in self.scope:
            self._index_add(h)
        g = self.g
        for k in self.kids:
            kind = g.kind[k]
            if kind == COUNT:
                self._fill_count(k)
            elif kind == NAMES:
                self._fill_slots(k, [(h, self.scope[h]) for h in self.names_in_scope(k)])
            else:
                per = self.settings(k).owned_per_host
                self._fill_slots(k, [(h, min(per, n)) for h, n in self.scope.items()])  # type: ignore[type-var]

    def _lower(self, k: str) -> Iterable[str]:
        """Worse-ranked siblings, the worst first."""
        return reversed(self.kids[self.rank_of[k] + 1:])

    def _fill_slots(self, k: str, wants: list[tuple[str, int]]) -> None:
        """Named hosts and per-host shares: up to ``want`` slots on each host; free slots
        first, then worse-ranked siblings' slots there, the worst rank first."""
        short = 0
        col = self.collected[k]
        for h, want in wants:
            need = want - self.held[k].get(h, 0)
            if need <= 0:
                continue
            got = min(need, self.free(h))
            self.give(k, h, got)
            need -= got
            for v in self._lower(k):
                if need <= 0:
                    break
                got = self.take(v, h, need)
                if got:
                    self.g.trimmed.append((self.g.name, v, h))
                self.give(k, h, got)
                need -= got
            short += need
        for h in list(col):  # collected parts not taken back: they stay in the pool
            del col[h]
        if short:
            self.short[k] = short

    def _fill_count(self, k: str) -> None:
        g = self.g
        s = self.settings(k)
        target: int = s.owned_hosts  # type: ignore[assignment]
        mine = self.held[k]
        # a part of a host held: its free rest comes with it (no one is displaced)
        for h in list(mine):
            self.give(k, h, self.free(h))
        # hosts named by its children (and theirs) first: they must be in its ownership
        for h in g.names_below.get(k, ()):
            if len(mine) >= target:
                break
            if h in self.scope and h not in mine:
                self._grab(k, h, lower_only=True)
        # its own hosts put in the pool above (beyond its count, idle ones collected
        # by the periodic pass) come back first, if nobody better took them
        col = self.collected[k]
        for h, n in self._most_used(k, list(col.items())):
            if len(mine) >= target:
                break
            if self.free(h) > 0:
                self.give(k, h, min(n, self.free(h)))
        col.clear()
        while len(mine) < target:
            h = self._best_free(k)
            if h is not None:
                self.give(k, h, self.free(h))
                continue
            h = self._best_lower(k)
            if h is None:
                break
            self._grab(k, h, lower_only=True)
        if len(mine) < target:
            self.short[k] = target - len(mine)

    def _grab(self, k: str, h: str, lower_only: bool) -> None:
        """Take host ``h`` for ``k``: its free slots and the parts of worse-ranked siblings."""
        for v in list(self.holders[h]):
            if v != k and (not lower_only or self.rank_of[v] > self.rank_of[k]):
                self.take(v, h)
                self.g.trimmed.append((self.g.name, v, h))
        self.give(k, h, self.free(h))

    def _best_free(self, k: str) -> str | None:
        """Step 2, first choice: a pool host with free slots, least workload first (whole
        hosts first unless ``partial``); hosts where ``k``'s own work runs count only
        the others' work."""
        g = self.g
        whole_first = not self.settings(k).partial
        index = self._whole if whole_first else self._any
        mine = self.held[k]
        best_key, best = None, None
        for key in index:  # the first one not already held by k
            h = key[-1]
            if h not in mine:
                best_key, best = key, h
                break
        for h in g.loaded.get(k, ()):
            if h in self.scope and h not in mine and self.free(h) > 0:
                key = (g.others_load(k, h), -g.own_load(k, h), h in g.named, self._origin(h), g.pos[h], h)
                if whole_first:
                    key = (self.used[h] > 0,) + key
                if best_key is None or key < best_key:
                    best_key, best = key, h
        return best

    def _best_lower(self, k: str) -> str | None:
        """Step 2, second choice (and step 3's trim when a group shrank): a host of a
        worse-ranked sibling, the worst rank first, and of its hosts the one its own
        work uses least (then the least work in all): the over-owner is trimmed by its
        own workload, whatever the taker would like."""
        g = self.g
        mine = self.held[k]
        for v in self._lower(k):
            cands = [h for h in self.held[v] if h not in mine]
            if cands:
                return min(cands, key=lambda h: (g.own_load(v, h), g.total.get(h, 0), g.pos[h]))
        return None


# --- the public functions ----------------------------------------------------------


def _down_hosts(plan: Plan, down: Collection[str] | None) -> Collection[str]:
    if down is not None:
        return down
    return {h.name for h in plan.hosts if h.state is HostState.DOWN}


def assign(plan: Plan, previous: OwnerMap | None = None, workload: Workload | None = None,
           down: Collection[str] | None = None, *, collect_free: bool = False) -> Assignment:
    """The hosts each consumer owns, per group.

    ``previous``: the ownership in force (None for a new plan); ``workload``: slots
    held per group, host and leaf; ``down``: hosts that are down (default: as the
    plan's hosts say). Deterministic: the same inputs give the same assignment."""
    slots = {h.name: h.slots for h in plan.hosts}
    down_set = _down_hosts(plan, down)
    out = Assignment()
    for group in plan.groups:
        if not any(host_kind(c.groups[group.name]) for c in plan.consumers if group.name in c.groups):
            continue
        prev = (previous or {}).get(group.name) or {}
        load = (workload or {}).get(group.name) or {}
        gp = _Group(plan, group, prev, load, down_set, collect_free, slots)
        gp.run()
        out.owners[group.name] = gp.out
        if gp.short:
            out.short[group.name] = gp.short
        out.trimmed.extend(gp.trimmed)
    return out


def redistribute(plan: Plan, current: OwnerMap, workload: Workload | None = None,
                 down: Collection[str] | None = None) -> Assignment:
    """The periodic pass (EGO's ownership policy, step 3): idle owned hosts are collected from every
    consumer and handed out again by rank. An owner gets its own idle hosts back
    unless a better-ranked consumer is short and the pool has no idle host for it."""
    return assign(plan, current, workload, down, collect_free=True)


def with_ownership(plan: Plan, assignment: Assignment) -> Plan:
    """``plan`` with the assignment in force: ``host_ownership`` set, and each host
    owner's ``owned`` equal to the slots of its hosts (the engine's aggregate guarantee)."""
    owners = assignment.owners
    consumers = []
    for c in plan.consumers:
        groups = {}
        changed = False
        for g, s in c.groups.items():
            if host_kind(s) is not None:
                n = sum(owners.get(g, {}).get(c.path, {}).values())
                if n != s.owned:
                    s = replace(s, owned=n)
                    changed = True
            groups[g] = s
        consumers.append(replace(c, groups=groups) if changed else c)
    return replace(plan, consumers=tuple(consumers), host_ownership=owners)


def prepared(plan: Plan) -> Plan:
    """A plan whose host ownership is worked out (a new plan's assignment if it is not
    yet). A plan in which nobody owns hosts is returned as it is (host_ownership None)."""
    if plan.host_ownership is not None or not uses_host_ownership(plan):
        return plan
    return with_ownership(plan, assign(plan))


def deepest_parts(owners: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """host -> deepest owner -> slots: a consumer's slots on a host less its children's there."""
    by_host: dict[str, dict[str, int]] = {}
    for c, parts in owners.items():
        for h, n in parts.items():
            by_host.setdefault(h, {})[c] = by_host.get(h, {}).get(c, 0) + n
    out: dict[str, dict[str, int]] = {}
    for h, per in by_host.items():
        deep = dict(per)
        for c, n in per.items():
            parent = c.rsplit("/", 1)[0] or ROOT
            if parent in deep:
                deep[parent] -= n
        out[h] = {c: n for c, n in deep.items() if n > 0}
    return out


def moves_between(old: OwnerMap | None, new: OwnerMap | None, plan: Plan | None = None) -> list[Move]:
    """Slots of hosts whose deepest owner changes from ``old`` to ``new``, per group.
    Ordered by group (plan order when ``plan`` is given), host position, then owners."""
    old, new = old or {}, new or {}
    order = [g.name for g in plan.groups] if plan is not None else []
    pos = {g.name: {h: i for i, h in enumerate(g.hosts)} for g in plan.groups} if plan is not None else {}
    groups = order + sorted((set(old) | set(new)) - set(order))
    moves: list[Move] = []
    for g in groups:
        a, b = deepest_parts(old.get(g, {})), deepest_parts(new.get(g, {}))
        hp = pos.get(g, {})
        for h in sorted(set(a) | set(b), key=lambda x: (hp.get(x, len(hp)), x)):
            was, now = a.get(h, {}), b.get(h, {})
            if was == now:
                continue
            lost = [(c, n - now.get(c, 0)) for c, n in sorted(was.items()) if n > now.get(c, 0)]
            won = [(c, n - was.get(c, 0)) for c, n in sorted(now.items()) if n > was.get(c, 0)]
            i = j = 0
            while i < len(lost) or j < len(won):
                if i < len(lost) and j < len(won):
                    (src, x), (dst, y) = lost[i], won[j]
                    n = min(x, y)
                    moves.append(Move(g, h, src, dst, n))
                    lost[i], won[j] = (src, x - n), (dst, y - n)
                    i += lost[i][1] == 0
                    j += won[j][1] == 0
                elif i < len(lost):
                    moves.append(Move(g, h, lost[i][0], None, lost[i][1]))
                    i += 1
                else:
                    moves.append(Move(g, h, None, won[j][0], won[j][1]))
                    j += 1
    return moves


def whole_hosts(plan: Plan, group: str, consumer: str, slots: Mapping[str, int] | None = None) -> list[str]:
    """The hosts ``consumer`` owns whole in ``group`` (all their slots), sorted by name."""
    if slots is None:
        slots = {h.name: h.slots for h in plan.hosts}
    return sorted(h for h, n in plan.owned_on_hosts(group, consumer).items() if n >= slots.get(h, 0) > 0)


def owners_by_host(plan: Plan, group: str) -> dict[str, dict[str, int]]:
    """host -> consumer -> owned slots in ``group``, every level (for the cycle)."""
    out: dict[str, dict[str, int]] = {}
    for c, parts in ((plan.host_ownership or {}).get(group) or {}).items():
        for h, n in parts.items():
            out.setdefault(h, {})[c] = n
    return out


__all__ = [
    "COUNT", "NAMES", "PER_HOST", "Assignment", "Move", "OwnerMap", "Owners", "Workload", "assign",
    "deepest_parts", "host_kind", "moves_between", "owners_by_host", "prepared", "redistribute",
    "uses_host_ownership", "whole_hosts", "with_ownership",
]
