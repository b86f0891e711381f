"""The engine's in-memory state: requests, allocations and the counters derived from them.

Every allocation carries its *source*, the bucket of the plan it is counted in:

- ``own``: the consumer's owned slots in that group;
- ``pool:/A`` : the private share pool of consumer ``/A`` (``pool:/`` is the public pool);
- ``lent:/B/x``: slots lent by leaf ``/B/x``.

Counters (per leaf and group, per pool, per host) are kept up to date on every
change so that a cycle reads them in constant time instead of recounting every
allocation. The state has no clock and does no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from itertools import compress
from dataclasses import dataclass
from typing import Any

from sortedcontainers import SortedDict

from apportion.engine.decisions import Removal
from apportion.engine.index import UNSET, GroupPlan
from apportion.engine.model import ROOT, Consumer, HostState, Plan, Request
from apportion.engine.placement import GroupIndex, HostLedger, change_free, change_state, set_exclusive

OWN = "own"
# why a reservation that is ready reclaims the work on its slots (engine/backfill.py)
RESERVATION_READY = "reservation ready: work on its slots gives way"


def pool_source(owner: str) -> str:
    return "pool:" + owner


def lent_source(lender: str) -> str:
    return "lent:" + lender


_PARSED: dict[str, tuple[str, str]] = {}


def _after_older(book: dict[int, Any], key: int) -> None:
    """``key``, just added last to ``book``, moved before the keys larger than it that
    end the book (those that came after its id was used up), which keep their order."""
    later = []
    for k in reversed(book):
        if k == key:
            continue
        if k < key:
            break
        later.append(k)
    for k in reversed(later):
        book[k] = book.pop(k)


def parse_source(source: str) -> tuple[str, str]:
    """("pool", owner) or ("lent", lender) of a source other than ``own``; sources
    are few (two per consumer) and parsed on every count, so each is parsed once."""
    got = _PARSED.get(source)
    if got is None:
        kind, _, who = source.partition(":")
        got = _PARSED[source] = (kind, who)
    return got


@dataclass(slots=True, eq=False)
class PendingReclaim:
    deadline: float
    beneficiary: str
    reason: str


@dataclass(slots=True, eq=False)
class Allocation:
    id: int
    request: str
    consumer: str
    group: str
    host: str
    slots: int
    source: str
    reclaim: PendingReclaim | None = None


class _SourceHosts(dict):
    """``ClusterState.source_hosts``: (leaf, group, source) -> host -> slots held there
    and not marked, worked out from ``by_source`` when a key is first read (with its
    ``source_multi``) and kept by ``_on_host`` from then on. A job on many small hosts
    is then not a per-host count each time it starts and ends."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__()
        self.state = state

    def __missing__(self, key: tuple[str, str, str]) -> dict[str, int]:
        on: dict[str, int] = {}
        for a in self.state.by_source.get(key, {}).values():
            on[a.host] = on.get(a.host, 0) + a.slots
        self[key] = on
        self.state.source_multi[key] = {host for host, n in on.items() if n >= 2}
        return on


class Usage:
    """One leaf in one group: what it holds, by source, and what is on its way to it."""

    __slots__ = ("own", "pools", "borrowed", "lent", "held", "incoming", "marked")

    def __init__(self) -> None:
        self.own = 0
        self.pools: dict[str, int] = {}  # pool owner -> slots held from that pool
        self.borrowed: dict[str, int] = {}  # lender -> slots borrowed
        self.lent: dict[str, int] = {}  # borrower -> slots lent (this leaf as lender)
        self.held = 0
        self.incoming: dict[str, int] = {}  # source -> slots being reclaimed for this leaf
        self.marked: dict[str, int] = {}  # source -> own allocations marked for reclaim

    def count(self, source: str) -> int:
        if source == OWN:
            return self.own
        kind, who = parse_source(source)
        return (self.pools if kind == "pool" else self.borrowed).get(who, 0)

    def free_of(self, source: str) -> int:
        """Held from ``source`` and not already marked for reclaim."""
        return self.count(source) - self.marked.get(source, 0)

    @property
    def lent_total(self) -> int:
        return sum(self.lent.values())

    @property
    def borrowed_total(self) -> int:
        return sum(self.borrowed.values())

    @property
    def shared_total(self) -> int:
        return sum(self.pools.values())

    @property
    def incoming_total(self) -> int:
        return sum(self.incoming.values())


def in_order(book: SortedDict) -> Iterator[Any]:
    """The values of a book keyed in order (``ClusterState.wanting_of``), in that order,
    read at C speed (``SortedDict.values()`` yields them one by one in Python)."""
    return map(book.__getitem__, book)


def _move_spared(spared: dict[tuple[str, str], dict[str, int]], key: tuple[str, str], leaf: str, slots: int) -> None:
    """``ClusterState.spared``: ``leaf``'s protected slots of ``key`` (group, source)
    moved by ``slots`` (an entry at 0 goes, and a key with none left)."""
    book = spared.get(key)
    if book is None:
        book = spared[key] = {}
    n = book.get(leaf, 0) + slots
    if n:
        book[leaf] = n
    else:
        del book[leaf]
        if not book:
            del spared[key]


class _Protected(set):
    """``ClusterState.protected``: a set of request ids that keeps the state's book of
    the slots protected work holds (``ClusterState.spared``) as ids join and leave it:
    each open request among them adds its ``unmarked`` slots, and moves them there as
    they move (``RequestState.spared``)."""

    __slots__ = ("state", "linked")

    def __init__(self, state: "ClusterState") -> None:
        super().__init__()
        self.state = state
        self.linked: dict[str, RequestState] = {}  # id -> its request, counted in the book

    def link(self, rid: str) -> None:
        """Count the open request ``rid`` in the book (once)."""
        rs = self.state.requests.get(rid)
        if rs is None or rid in self.linked:
            return
        spared = self.state.spared
        self.linked[rid] = rs
        rs.spared = spared
        leaf = rs.spec.consumer
        for key, n in rs.unmarked.items():
            _move_spared(spared, key, leaf, n)

    def unlink(self, rid: str) -> None:
        rs = self.linked.pop(rid, None)
        if rs is None:
            return
        leaf = rs.spec.consumer
        for key, n in rs.unmarked.items():
            _move_spared(rs.spared, key, leaf, -n)
        rs.spared = None

    def add(self, rid: str) -> None:
        if rid not in self:
            set.add(self, rid)
            self.link(rid)

    def discard(self, rid: str) -> None:
        if rid in self:
            set.discard(self, rid)
            self.unlink(rid)

    def remove(self, rid: str) -> None:
        if rid not in self:
            raise KeyError(rid)
        self.discard(rid)

    def pop(self) -> str:
        rid = next(iter(self))
        self.discard(rid)
        return rid

    def clear(self) -> None:
        for rid in list(self):
            self.discard(rid)

    def update(self, *others) -> None:
        for other in others:
            for rid in other:
                self.add(rid)

    def difference_update(self, *others) -> None:
        for other in others:
            for rid in other:
                self.discard(rid)

    def intersection_update(self, *others) -> None:
        keep = set(self).intersection(*others)
        for rid in [r for r in self if r not in keep]:
            self.discard(rid)

    def symmetric_difference_update(self, other) -> None:
        for rid in set(other):
            if rid in self:
                self.discard(rid)
            else:
                self.add(rid)

    def __ior__(self, other):
        self.update(other)
        return self

    def __isub__(self, other):
        self.difference_update(other)
        return self

    def __iand__(self, other):
        self.intersection_update(other)
        return self

    def __ixor__(self, other):
        self.symmetric_difference_update(other)
        return self


class RequestState:
    __slots__ = ("spec", "held", "allocs", "groups", "min", "max", "seq", "order", "unmarked", "unmarked_of",
                 "spared")

    def __init__(self, spec: Request, groups: tuple[str, ...]) -> None:
        self.spec = spec
        self.held = 0
        self.allocs: dict[int, Allocation] = {}
        self.groups = groups
        self.min = spec.min
        self.max = spec.max
        self.seq = spec.seq
        self.order = 0  # when it was opened in this state: arrival order (ClusterState.wanting_of)
        # (group, source) -> slots of its allocations there that no reclaim is taking:
        # what a reservation counts on when it ends, what a reclaim spares if protected
        # (reserve.planned_start, rigid.protected_held), with no walk over its allocations
        self.unmarked: dict[tuple[str, str], int] = {}
        self.unmarked_of: dict[str, int] = {}  # group -> ``unmarked`` summed over its sources there
        # while the request is protected: its state's book of protected slots
        # (ClusterState.spared), which ``unmarked`` moves with
        self.spared: dict[tuple[str, str], dict[str, int]] | None = None

    def count_unmarked(self, group: str, source: str, slots: int) -> None:
        """``unmarked`` moved by ``slots`` (an entry at 0 goes)."""
        key = (group, source)
        # both books written out, not through a helper: this runs for every allocation
        # that moves (a call each costs Curie's replay 3%)
        n = self.unmarked.get(key, 0) + slots
        if n:
            self.unmarked[key] = n
        else:
            del self.unmarked[key]
        n = self.unmarked_of.get(group, 0) + slots
        if n:
            self.unmarked_of[group] = n
        else:
            del self.unmarked_of[group]
        if self.spared is not None:
            _move_spared(self.spared, key, self.spec.consumer, slots)

    def clear_unmarked(self) -> None:
        """Every allocation gone: nothing left unmarked."""
        if self.spared is not None:
            leaf = self.spec.consumer
            for key, n in self.unmarked.items():
                _move_spared(self.spared, key, leaf, -n)
        self.unmarked.clear()
        self.unmarked_of.clear()

    def unmarked_in(self, group: str) -> int:
        """Slots of its allocations in ``group`` that no reclaim is taking."""
        return self.unmarked_of.get(group, 0)

    @property
    def unmet(self) -> int:
        return max(0, self.max - self.held)


class OpenHosts:
    """The picks of a request given every free slot of a group's open hosts, one slot an
    instance (Cycle._give): [(host, its free slots)] in the group's order, read when
    first asked from a copy of the group's books taken then, as that is cheaper than
    the picks (a wide request held back every cycle, where nothing asks)."""

    __slots__ = ("_names", "_frees", "_open", "_picks")

    def __init__(self, group: GroupIndex) -> None:
        self._names = group.names  # never changes
        self._frees = group.frees.copy()
        self._open = bytes(group._open)
        self._picks: list[tuple[str, int]] | None = None

    def picks(self) -> list[tuple[str, int]]:
        if self._picks is None:
            self._picks = list(zip(compress(self._names, self._open), compress(self._frees, self._open)))
        return self._picks

    def __iter__(self):
        return iter(self.picks())

    def __len__(self) -> int:
        return self._open.count(1)


class HeldSlots:
    """Slots a cycle held back for a request (Cycle._hold_back) in one go: its picks
    [(host, slots)] (a list, or ``OpenHosts``), with the allocation ids they used up
    (from ``first``, one a pick) and their places among the cycle's grants (from
    ``at``). ``on_hosts``: taken on their hosts yet (``ClusterState.hold_on_hosts``)."""

    __slots__ = ("group", "picks", "source", "first", "at", "placed", "leaf", "on_hosts")

    def __init__(self, group: str, picks: list[tuple[str, int]] | OpenHosts, source: str, first: int, at: int,
                 placed: int, leaf: str) -> None:
        self.group = group
        self.picks = picks
        self.source = source
        self.first = first
        self.at = at
        self.placed = placed
        self.leaf = leaf
        self.on_hosts = False


class ClusterState:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.consumers: dict[str, Consumer] = plan.consumer_map()
        # the host ledgers, read through ``hosts``: slots a cycle holds back on hosts
        # only one group holds may be left off them until something reads or moves a
        # host (``hold_on_hosts``, ``settle``)
        self._ledgers: dict[str, HostLedger] = {
            h.name: HostLedger(h, i) for i, h in enumerate(plan.hosts)
        }
        self.deferred: list[HeldSlots] = []
        self.group_names: list[str] = [g.name for g in plan.groups]
        self.groups: dict[str, GroupIndex] = {
            g.name: GroupIndex(g.name, g.allocation_policy, [self._ledgers[n] for n in g.hosts])
            for g in plan.groups
        }
        for gi in self.groups.values():
            gi.alone = all(len(h.groups) == 1 for h in gi.hosts)
        self.requests: dict[str, RequestState] = {}
        self.requests_of: dict[str, dict[str, RequestState]] = {}  # leaf -> its open requests, in arrival order
        # leaf -> its open requests that still want slots (held < max), in arrival order: what
        # the cycle walks to serve a leaf, so that requests it holds in full (a running rigid
        # job) cost nothing there, however many there are
        self.wanting_of: dict[str, SortedDict] = {}
        # the books of ``wanting_of`` that are not empty (in no particular order): what
        # walks over every leaf's wanting requests read, however many leaves wait for nothing
        self.wanting_some: dict[str, SortedDict] = {}
        self._opened = 0
        self.allocs: dict[int, Allocation] = {}
        self.by_host: dict[str, dict[int, Allocation]] = {n: {} for n in self.hosts}
        # (leaf, group, source) -> its allocations NOT marked for reclaim, in the order
        # they came to the source: what reclaim and retagging choose from, newest last
        self.by_source: dict[tuple[str, str, str], dict[int, Allocation]] = {}
        # the same allocations summed per host: whether a victim can free a whole
        # instance anywhere is then a look at its hosts, not at every allocation.
        # Made for a key when first read (only reclaims for multi-slot instances read
        # them), kept up to date from then on
        self.source_hosts: dict[tuple[str, str, str], dict[str, int]] = _SourceHosts(self)
        self.source_multi: dict[tuple[str, str, str], set[str]] = {}  # hosts where it holds 2 or more
        self._with_free: set[str] = {n for n, h in self.hosts.items() if h.free > 0}  # hosts with a free slot (``with_free``)
        # beneficiary -> allocations being reclaimed for it
        self.reclaim_for: dict[str, dict[int, Allocation]] = {}
        self.usage_in: dict[str, dict[str, Usage]] = {g: {} for g in self.group_names}  # group -> leaf -> books
        self.pool_used: dict[str, dict[str, int]] = {g: {} for g in self.group_names}
        # group -> consumer with a max -> slots held in its subtree there
        self.subtree_held: dict[str, dict[str, int]] = {g: {} for g in self.group_names}
        self.unmet: dict[str, int] = {}  # leaf -> sum of its requests' unmet slots (none: not there)
        self.unmet_in: dict[str, dict[str, int]] = {g: {} for g in self.group_names}  # group -> leaf -> unmet slots of requests usable there
        self.incoming: dict[str, int] = {}  # leaf -> slots being reclaimed for it, all groups
        # beneficiaries whose unmet slots or pending reclaims changed since the last
        # cycle looked (Cycle._cancel_unneeded): only their reclaims can have become too many
        self.reclaim_dirty: set[str] = set()
        # group -> leaves whose usage or unmet slots there changed since the group's
        # last view: a cycle looks again at these only (Cycle._view)
        self.touched: dict[str, set[str]] = {g: set() for g in self.group_names}
        # group -> leaves whose share-pool slots or marks moved, by any path (slots held
        # back included), since phase 6 last worked out the public pool's excess there:
        # the only ones it works out again (Reclaims._public_excess, excess_memo)
        self.excess_dirty: dict[str, set[str]] = {g: set() for g in self.group_names}
        self.excess_memo: dict[str, tuple] = {}
        self.need_memo: dict[str, tuple] = {}  # group -> Views._public_need's last (the view's books, size, leaves, need)
        # group -> what the last view kept per leaf (Cycle._view)
        self.view_cache: dict[str, object] = {}
        self.lending: dict[str, set[str]] = {}  # group -> leaves with slots lent out there  # (leaf, group) -> unmet of requests usable there
        self.reclaiming: dict[int, Allocation] = {}  # allocations marked for reclaim
        self._deadlines: list[tuple[float, int]] = []  # heap of (deadline, allocation id); stale entries skipped
        self.lost: list[Removal] = []  # removals seen since the last cycle (host down)
        self._next_id = 1
        self.ancestors: dict[str, tuple[str, ...]] = {}
        for c in plan.consumers:
            chain = []
            p = c.parent
            while p != ROOT:
                chain.append(p)
                p = self.consumers[p].parent
            self.ancestors[c.path] = tuple(chain)  # nearest first, root excluded
        # the consumers whose subtree a slot held by a consumer counts in, among those a
        # max applies to: the only subtree totals anything reads (max checks)
        capped = {c.path for c in plan.consumers if any(st.max is not None for st in c.groups.values())}
        self.chain = {c: tuple(p for p in (c,) + up if p in capped) for c, up in self.ancestors.items()}
        self._group_plans: dict[str, GroupPlan] = {}
        self._memo: dict[tuple, object] = {}
        self._groups_of: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}
        # (group, pool owner) -> the last division of that pool and its inputs (Cycle._division)
        self.divisions: dict[tuple[str, str], tuple] = {}
        # (group, pool owner) -> the last few divisions worked out there, by all their
        # inputs (Cycle._division): needs that move away and back find theirs again
        self.recent_divisions: dict[tuple[str, str], dict[tuple, tuple]] = {}
        # (leaf, group) -> epoch: the leaf could not place slots it had room for; it
        # reclaims nothing for that group until the world changes (a new epoch)
        self.futile: dict[tuple[str, str], int] = {}
        self.epoch = 0
        self.futile_at = -1  # the epoch of the latest such mark
        # requests opened since the last cycle began (Cycle.quiet_record reads them)
        self.recent: list[RequestState] = []
        # the live service's books (engine/live.py); empty and unused in `solve`:
        # allocation ids added, changed or removed since the caller last took them
        self.changed: set[int] | None = None
        # (request, host) -> slots its running processes use there
        self.in_use: dict[tuple[str, str], int] = {}
        self.exclusive_hosts: set[str] = set()  # hosts a request holds exclusively (HostLedger.exclusive_for)
        # (request, host) -> slots that left the request while its processes still use
        # them: not free until the processes are gone (a slot is never used twice)
        self.fences: dict[tuple[str, str], int] = {}
        # (request, host) -> [group, pool owner, slots] of fenced slots that came from a
        # share pool: they still count in that pool, so nobody is served past it meanwhile
        self.fence_pool: dict[tuple[str, str], list] = {}
        # the rigid policy's books (engine/reserve.py): open requests with a min above
        # one instance or a walltime; group -> the reservation in force; request -> when it started
        # (requests with a walltime: when they will end)
        self.rigid: dict[str, RequestState] = {}
        self.reservations: dict[str, Any] = {}
        self.started: dict[str, float] = {}
        self.ends: Any = None  # (end, request) of ``started``, soonest first; None: not made yet
        # (group, source) -> leaf -> slots there that its protected work holds and no
        # reclaim is taking (rigid.protected_held), kept by ``protected`` as it changes
        self.spared: dict[tuple[str, str], dict[str, int]] = {}
        self.protected = set()  # requests started through a reservation: no fairness reclaim
        # (group, beneficiary, slots) of marked slots their holder gave back before the
        # deadline: freed for the reclaim's beneficiary as a completed reclaim's are
        # (the next cycle's reservations leave them to it)
        self.released_marked: list[tuple[str, str, int]] = []
        # rigid requests that lost marked slots (a reclaim completed, or their holder gave
        # them back) since the last cycle: below their min the rest goes too (phase 0)
        self.cut_short: set[str] = set()
        # (group, beneficiary) of such slots marked for a reservation that was ready, and
        # of a reservation that was ready last cycle waiting only for reclaims on their way
        self.ready_freed: set[tuple[str, str]] = set()
        self.fill: dict[str, dict[int, Any]] = {}  # group -> elastic allocations on a reservation's slots
        self.debt: dict[str, float] = {}  # leaf -> decayed slot-seconds held beyond its share (engine/usage.py)
        self.debt_at: float | None = None  # the time the debts stand at

    @property
    def hosts(self) -> dict[str, HostLedger]:
        """Host name -> its ledger, with every slot held back on it (``settle``)."""
        if self.deferred:
            self.settle()
        return self._ledgers

    @property
    def with_free(self) -> set[str]:
        """The hosts with a free slot, slots held back taken (``settle``)."""
        if self.deferred:
            self.settle()
        return self._with_free

    def hold_on_hosts(self, held: HeldSlots) -> None:
        """Slots a cycle holds back (Cycle._hold_back) taken on their hosts. Where only
        their group holds those hosts, only its count of open slots moves now: phase 8
        mostly gives them back before anything reads a host, and then no host moved
        (a reservation's wide request keeps every idle slot each cycle, host by host).
        Anything that reads or moves a host first takes them there (``settle``)."""
        group = self.groups[held.group]
        if group.alone:
            if self.deferred:
                self.settle()
            group.open_free -= held.placed
            self.deferred.append(held)
            return
        for host, slots in held.picks:
            self.take_on_host(host, held.leaf, slots)
        held.on_hosts = True

    def settle(self) -> None:
        """The slots held back and not yet on their hosts (``hold_on_hosts``) taken there,
        in the order they were held back, as if taken then: nothing moved a host since."""
        deferred, self.deferred = self.deferred, []
        for held in deferred:
            self.groups[held.group].open_free += held.placed
            for host, slots in held.picks:
                self.take_on_host(host, held.leaf, slots)
            held.on_hosts = True

    def unhold_on_hosts(self, held: HeldSlots) -> None:
        """``hold_on_hosts`` undone: the slots come off their hosts, or, never taken there,
        out of the group's count alone."""
        if not held.on_hosts:
            self.deferred.remove(held)
            self.groups[held.group].open_free += held.placed
            return
        for host, slots in held.picks:
            self.give_on_host(host, held.leaf, slots)
        held.on_hosts = False

    def memo(self, key: tuple, compute):
        """Pure results (a pool's division for given needs) kept between cycles: most
        pools see the same needs cycle after cycle. Bounded; cleared when full."""
        got = self._memo.get(key)
        if got is None:
            if len(self._memo) > 4096:
                self._memo.clear()
            got = self._memo[key] = compute()
        return got

    def group_plan(self, g: str) -> GroupPlan:
        """The plan-static facts of group ``g`` (built on first use, then kept)."""
        gp = self._group_plans.get(g)
        if gp is None:
            gp = self._group_plans[g] = GroupPlan(self.plan, g, self.ancestors)
        return gp

    # -- counters -----------------------------------------------------------
    @property
    def usage(self) -> dict[tuple[str, str], Usage]:
        """Every leaf's books by (leaf, group): a view made on request, for reports and
        checks; the engine reads ``usage_in`` (group -> leaf), the one store."""
        return {(leaf, g): u for g, here in self.usage_in.items() for leaf, u in here.items()}

    def use(self, leaf: str, group: str) -> Usage:
        here = self.usage_in[group]
        u = here.get(leaf)
        if u is None:
            u = here[leaf] = Usage()
        return u

    def _count(self, a: Allocation, sign: int) -> None:
        d = sign * a.slots
        u = self.use(a.consumer, a.group)
        src = a.source
        self.touched[a.group].add(a.consumer)
        if src == OWN:
            u.own += d
        else:
            kind, who = parse_source(src)
            if kind == "pool":
                self.excess_dirty[a.group].add(a.consumer)
                u.pools[who] = u.pools.get(who, 0) + d
                pu = self.pool_used[a.group]
                pu[who] = pu.get(who, 0) + d
            else:
                u.borrowed[who] = u.borrowed.get(who, 0) + d
                self.touched[a.group].add(who)
                lu = self.use(who, a.group)
                lu.lent[a.consumer] = lu.lent.get(a.consumer, 0) + d
                if lu.lent[a.consumer] == 0:
                    del lu.lent[a.consumer]
                lending = self.lending.setdefault(a.group, set())
                if lu.lent:
                    lending.add(who)
                else:
                    lending.discard(who)
        u.held += d
        if a.reclaim is None:
            key = (a.consumer, a.group, src)
            if sign > 0:
                self.by_source.setdefault(key, {})[a.id] = a
            else:
                self.by_source.get(key, {}).pop(a.id, None)
            self._on_host(key, a.host, d)
        else:
            self._count_marked(a, d, u)

    def _on_host(self, key: tuple[str, str, str], host: str, d: int) -> None:
        """Move the per-host total of a (leaf, group, source) by ``d``, keeping the
        hosts where it holds two slots or more apart: only there, or where a host
        has free slots, can freeing it complete a multi-slot instance (Cycle._mark)."""
        on = self.source_hosts.get(key)
        if on is None:
            return  # not read yet: made from ``by_source`` when it is
        n = on.get(host, 0) + d
        if n:
            on[host] = n
        else:
            del on[host]
        multi = self.source_multi.get(key)
        if n >= 2:
            if multi is None:
                multi = self.source_multi[key] = set()
            multi.add(host)
        elif multi:
            multi.discard(host)

    def _count_marked(self, a: Allocation, d: int, u: Usage | None = None) -> None:
        """The reclaim books of a marked allocation: what its beneficiary waits for,
        what its holder has marked, per source."""
        assert a.reclaim is not None
        beneficiary = a.reclaim.beneficiary
        self.reclaim_dirty.add(beneficiary)
        mine = self.reclaim_for.setdefault(beneficiary, {})
        if d > 0:
            mine[a.id] = a
        else:
            mine.pop(a.id, None)
            if not mine:
                del self.reclaim_for[beneficiary]
        if u is None:
            u = self.usage_in[a.group][a.consumer]
        src = a.source
        self.excess_dirty[a.group].add(a.consumer)
        u.marked[src] = u.marked.get(src, 0) + d
        touched = self.touched[a.group]
        touched.add(a.consumer)
        if beneficiary in self.consumers:
            touched.add(beneficiary)
            bu = self.use(beneficiary, a.group)
            bu.incoming[src] = bu.incoming.get(src, 0) + d
            self.incoming[beneficiary] = self.incoming.get(beneficiary, 0) + d

    def _held_delta(self, a: Allocation, d: int) -> None:
        st = self.subtree_held[a.group]
        for p in self.chain[a.consumer]:
            st[p] = st.get(p, 0) + d

    @property
    def protected(self) -> set[str]:
        """Requests started through a reservation or backfilled: no reclaim for fairness
        takes their slots (engine/reserve.py, engine/backfill.py)."""
        return self._protected

    @protected.setter
    def protected(self, rids: Iterable[str]) -> None:
        old = getattr(self, "_protected", None)
        if rids is old:
            return  # an operator in place (``protected |= ...``) sets the set it changed
        if old is not None:
            old.clear()
        self._protected = _Protected(self)
        self._protected.update(rids)

    def touch(self) -> None:
        """Something outside the engine changed (a request, a host): old conclusions
        about what cannot be placed no longer hold."""
        self.epoch += 1

    def is_futile(self, leaf: str, group: str) -> bool:
        return self.futile.get((leaf, group)) == self.epoch

    def _unmet_delta(self, rs: RequestState, delta: int, mark: bool = True) -> None:
        if not delta:
            return
        leaf = rs.spec.consumer
        left = self.unmet.get(leaf, 0) + delta
        if left:
            self.unmet[leaf] = left
        else:
            del self.unmet[leaf]  # only leaves that want slots: every cycle walks them
        if mark:
            self.reclaim_dirty.add(leaf)
        unmet_in, touched = self.unmet_in, self.touched
        for g in rs.groups:
            here = unmet_in[g]
            here[leaf] = here.get(leaf, 0) + delta
            if mark:
                touched[g].add(leaf)

    def _held_by(self, rs: RequestState, delta: int, mark: bool = True) -> None:
        """``rs`` holds ``delta`` more slots: its unmet slots, and the leaf's, follow."""
        before = rs.max - rs.held
        rs.held += delta
        after = rs.max - rs.held
        if (before > 0) != (after > 0):
            self._wanting(rs, after > 0)
        self._unmet_delta(rs, (after if after > 0 else 0) - (before if before > 0 else 0), mark)

    def _wanting(self, rs: RequestState, wants: bool) -> None:
        leaf = rs.spec.consumer
        book = self.wanting_of.get(leaf)
        if wants:
            if book is None:
                book = self.wanting_of[leaf] = SortedDict()
            book[rs.order] = rs
            if len(book) == 1:
                self.wanting_some[leaf] = book
        elif book is not None:
            book.pop(rs.order, None)
            if not book:
                self.wanting_some.pop(leaf, None)

    # -- requests -----------------------------------------------------------
    def groups_of(self, req: Request) -> tuple[str, ...]:
        """The groups ``req`` may use, in order (fixed by the plan: kept per consumer and ask)."""
        key = (req.consumer, req.groups)
        got = self._groups_of.get(key)
        if got is None:
            got = self._groups_of[key] = self._work_out_groups(req)
        return got

    def _work_out_groups(self, req: Request) -> tuple[str, ...]:
        planned = self.consumers[req.consumer].groups
        if req.groups:
            return tuple(g for g in req.groups if g in planned and g in self.groups)
        # preference levels (EGO's ownership policy): smaller first; unset after set; ties in plan order
        mine = [g for g in self.group_names if g in planned]
        return tuple(sorted(mine, key=lambda g: UNSET if planned[g].preference is None else planned[g].preference))

    def add_request(self, req: Request) -> None:
        if req.id in self.requests:
            raise ValueError(f"request {req.id!r} is already open")
        if req.consumer not in self.consumers or not self.consumers[req.consumer].is_leaf:
            raise ValueError(f"request {req.id!r}: {req.consumer!r} is not a leaf consumer of the plan")
        self.touch()
        rs = RequestState(req, self.groups_of(req))
        self.requests[req.id] = rs
        self.requests_of.setdefault(req.consumer, {})[req.id] = rs
        rs.order = self._opened
        self._opened += 1
        self.recent.append(rs)
        if req.id in self._protected:
            self._protected.link(req.id)  # protected before it opened: counted from now on
        self._wanting(rs, rs.max > rs.held)
        self._unmet_delta(rs, rs.unmet)
        if req.min > req.order or req.walltime is not None:
            self.rigid[req.id] = rs

    def change_request(self, rid: str, min_slots: int | None = None, max_slots: int | None = None) -> None:
        """EGO realloc: a new min or max. Lowering max below what is held gives slots
        back at once (the client asked for fewer): those already being reclaimed, then
        idle ones (no process of the request uses them: ``in_use``), then the newest; so
        running work keeps its slots when idle ones can go instead (EGO: the master takes
        idle slots before busy ones)."""
        self.touch()
        rs = self.requests[rid]
        before = rs.unmet
        if min_slots is not None:
            rs.min = min_slots
        if max_slots is not None:
            rs.max = max_slots
        excess = rs.held - rs.max
        if excess > 0:
            order = rs.spec.order
            idle: dict[str, int] = {}
            for a in rs.allocs.values():
                idle[a.host] = idle.get(a.host, 0) + a.slots
            for host in idle:
                idle[host] = max(0, idle[host] - self.in_use.get((rid, host), 0))
            for idle_only in (True, False):
                for a in sorted(rs.allocs.values(), key=lambda a: (a.reclaim is None, -a.id)):
                    if excess <= 0:
                        break
                    room = a.slots if not idle_only or a.reclaim is not None else \
                        min(a.slots, idle[a.host] // order * order)
                    take = min(room, -(-excess // order) * order)
                    if take <= 0:
                        continue
                    idle[a.host] = max(0, idle[a.host] - take)
                    self.release(a, take)
                    excess -= take
        self._wanting(rs, rs.max > rs.held)
        self._unmet_delta(rs, rs.unmet - before)
        if rs.min > rs.spec.order or rs.spec.walltime is not None:
            self.rigid[rid] = rs
        else:
            self.rigid.pop(rid, None)

    def close_request(self, rid: str) -> None:
        self.touch()
        rs = self.requests[rid]
        if rs.allocs:
            self._remove_all(rs)
        self._unmet_delta(rs, -rs.unmet)
        self._wanting(rs, False)
        del self.requests[rid]
        del self.requests_of[rs.spec.consumer][rid]
        self.rigid.pop(rid, None)
        self.started.pop(rid, None)
        self.protected.discard(rid)

    def _remove_all(self, rs: RequestState) -> None:
        """Every allocation of ``rs`` removed, each as ``remove`` would, in the same order
        (a job on many small hosts holds one per host: Curie's widest, hundreds).

        The share-pool slots nobody reclaims and no process is said to use (the
        simulator's, all of them) come off their hosts one by one, but what they come to
        in the request's, the leaf's, the pool's and the subtrees' counts is moved once
        per group and source: sums, and the first mark of each book where ``remove``
        would first have made it, so every book ends as it would have, its order
        included. Any other allocation goes through ``remove`` itself, after what was
        summed so far is counted."""
        changed, allocs, by_host, hosts = self.changed, self.allocs, self.by_host, self.hosts
        by_source, with_free, on_host = self.by_source, self.with_free, self._on_host
        leaf = rs.spec.consumer
        rid = rs.spec.id
        plain = not self.in_use
        sums: dict[tuple[str, str], int] = {}  # (group, source) -> slots taken off, not yet counted
        for a in list(rs.allocs.values()):
            src = a.source
            if a.reclaim is not None or src[0] != "p" or not plain:
                if sums:
                    self._count_removed(rs, sums)
                if a.reclaim is not None:
                    self._released_marked(a, a.slots)
                self.remove(a)
                continue
            aid, g, host, slots = a.id, a.group, a.host, a.slots
            if changed is not None:
                changed.add(aid)
            gs = (g, src)
            if gs not in sums:
                sums[gs] = 0
                self.touched[g].add(leaf)
            sums[gs] += slots
            key = (leaf, g, src)
            del by_source[key][aid]
            on_host(key, host, -slots)
            del allocs[aid]
            here = by_host[host]
            del here[aid]
            h = hosts[host]
            users = h.users
            left = users[leaf] - slots
            if left:
                users[leaf] = left
            else:
                del users[leaf]
            if h.exclusive_for == rid and not any(x.request == rid for x in here.values()):
                set_exclusive(h, None)
                self.exclusive_hosts.discard(host)
            if h.takes_work or h.state is not HostState.DOWN:
                change_free(h, slots)
            else:
                h.free += slots
            if h.free > 0:
                with_free.add(host)
        if sums:
            self._count_removed(rs, sums)
        rs.allocs.clear()
        rs.clear_unmarked()

    def _count_removed(self, rs: RequestState, sums: dict[tuple[str, str], int]) -> None:
        """What ``remove`` does to the counts for share-pool slots of ``rs`` taken off
        their hosts (``_remove_all``): ``sums`` per (group, source), emptied."""
        leaf = rs.spec.consumer
        total = 0
        for (g, src), slots in sums.items():
            self._pool_counts(leaf, g, src, -slots, mark=False)
            st = self.subtree_held[g]
            for p in self.chain[leaf]:
                st[p] -= slots
            total += slots
        sums.clear()
        self._held_by(rs, -total)

    # -- allocations --------------------------------------------------------
    def add(self, rs: RequestState, group: str, host: str, slots: int, source: str) -> Allocation:
        # every grant comes through here (one per host a job spans: a wide job on
        # small hosts makes hundreds): what _count, _held_by and _held_delta do for a
        # new, unmarked allocation is written out
        spec = rs.spec
        leaf = spec.consumer
        aid = self._next_id
        self._next_id = aid + 1
        a = Allocation(aid, spec.id, leaf, group, host, slots, source)
        self.allocs[aid] = a
        if self.changed is not None:
            self.changed.add(aid)
        self.by_host[host][aid] = a
        rs.allocs[aid] = a
        rs.count_unmarked(group, source, slots)
        self._held_grows(rs, slots)
        h = self.take_on_host(host, leaf, slots)
        if spec.exclusive:
            set_exclusive(h, spec.id)
            self.exclusive_hosts.add(host)
        if source[0] == "p":  # a share pool's: the common case, counted here
            self._pool_counts(leaf, group, source, slots)
            skey = (leaf, group, source)
            index = self.by_source.get(skey)
            if index is None:
                index = self.by_source[skey] = {}
            index[aid] = a
            if skey in self.source_hosts:
                self._on_host(skey, host, slots)
        else:
            self._count(a, +1)
        st = self.subtree_held[group]
        for p in self.chain[leaf]:
            st[p] = st.get(p, 0) + slots
        return a

    def _held_grows(self, rs: RequestState, slots: int) -> None:
        """``_held_by`` for slots added (``add``): held only grows here, so the request
        leaves the wanting book at most."""
        before = rs.max - rs.held
        rs.held += slots
        if before > 0:
            after = rs.max - rs.held
            if after <= 0:
                self._wanting(rs, False)
                after = 0
            self._unmet_delta(rs, after - before)

    def add_picks(self, rs: RequestState, group: str, picks: list[tuple[str, int]], source: str) -> list[Allocation]:
        """``add`` for each of ``picks`` [(host, slots)] in turn, of a share pool's slots
        (``source``) for a request that holds no host exclusively: what moves per host
        (the allocation, its books, the host) moved per host, what moves by the sum
        (the request's, the leaf's, the pool's and the subtrees' counts) moved once,
        each count ending where ``add`` after ``add`` would leave it."""
        assert source[0] == "p" and not rs.spec.exclusive
        spec = rs.spec
        leaf, rid = spec.consumer, spec.id
        allocs, by_host, mine, changed = self.allocs, self.by_host, rs.allocs, self.changed
        ledgers, with_free = self.hosts, self._with_free  # settled once: nothing here defers
        skey = (leaf, group, source)
        index = self.by_source.get(skey)
        if index is None:
            index = self.by_source[skey] = {}
        on_host = self._on_host if skey in self.source_hosts else None
        out = []
        aid = self._next_id
        total = 0
        for host, slots in picks:
            a = Allocation(aid, rid, leaf, group, host, slots, source)
            allocs[aid] = a
            if changed is not None:
                changed.add(aid)
            by_host[host][aid] = a
            mine[aid] = a
            h = ledgers[host]  # take_on_host, written out
            change_free(h, -slots)
            if h.free <= 0:
                with_free.discard(host)
            users = h.users
            users[leaf] = users.get(leaf, 0) + slots
            index[aid] = a
            if on_host is not None:
                on_host(skey, host, slots)
            out.append(a)
            aid += 1
            total += slots
        self._next_id = aid
        if not total:
            return out
        rs.count_unmarked(group, source, total)
        self._held_grows(rs, total)  # the sum of each step's move: held only grows
        self._pool_counts(leaf, group, source, total)
        st = self.subtree_held[group]
        for p in self.chain[leaf]:
            st[p] = st.get(p, 0) + total
        return out

    def add_as(self, aid: int, rs: RequestState, group: str, host: str, slots: int, source: str) -> Allocation:
        """``add`` with an id used up earlier (``use_id``), placed in every book by its id:
        before those that came to it after the id was used up (all with larger ids)."""
        keep, self._next_id = self._next_id, aid
        try:
            a = self.add(rs, group, host, slots, source)
        finally:
            self._next_id = keep
        books = [self.allocs, self.by_host[host], rs.allocs]
        if source[0] == "p":
            books.append(self.by_source[(rs.spec.consumer, group, source)])
        for book in books:
            _after_older(book, aid)
        return a

    def _pool_counts(self, leaf: str, group: str, source: str, slots: int, mark: bool = True) -> None:
        """A leaf's share-pool slots in ``group`` move by ``slots``: its books, the pool's
        (``mark``: and the leaf is marked as changed for the next view)."""
        if mark:
            self.touched[group].add(leaf)
        self.excess_dirty[group].add(leaf)
        here = self.usage_in[group]
        u = here.get(leaf)
        if u is None:
            u = here[leaf] = Usage()
        who = source[5:]
        pools = u.pools
        pools[who] = pools.get(who, 0) + slots
        pu = self.pool_used[group]
        pu[who] = pu.get(who, 0) + slots
        u.held += slots

    def take_on_host(self, host: str, leaf: str, slots: int) -> HostLedger:
        """``slots`` of ``host`` go to ``leaf``: its free slots and users (``add``, and the
        slots a cycle gives and takes back within itself, Cycle._hold_back)."""
        h = self.hosts[host]
        change_free(h, -slots)
        if h.free <= 0:
            self.with_free.discard(host)
        users = h.users
        users[leaf] = users.get(leaf, 0) + slots
        return h

    def give_on_host(self, host: str, leaf: str, slots: int) -> None:
        """``take_on_host`` undone, for slots that never were an allocation (nothing runs
        on them, so nothing is fenced)."""
        h = self.hosts[host]
        users = h.users
        users[leaf] -= slots
        if not users[leaf]:
            del users[leaf]
        change_free(h, slots)
        if h.free > 0:
            self.with_free.add(host)

    def use_id(self) -> int:
        """An allocation id used up as ``add`` uses one (for slots counted without an
        allocation, so that the ids of those that follow are as they would be)."""
        aid = self._next_id
        self._next_id = aid + 1
        if self.changed is not None:
            self.changed.add(aid)
        return aid

    def use_ids(self, n: int) -> int:
        """``n`` ids used up as ``use_id`` uses one each; the first of them."""
        first = self._next_id
        self._next_id = first + n
        if self.changed is not None:
            self.changed.update(range(first, first + n))
        return first

    def count_held(self, rs: RequestState, group: str, source: str, slots: int) -> None:
        """What ``add`` (``slots`` > 0) or ``remove`` (< 0) of share-pool slots of
        ``rs`` in ``group`` does to the counts, without an allocation: for slots a
        cycle gives and takes back within itself (Cycle._hold_back).

        The leaf is not marked as changed (``touched``, ``reclaim_dirty``): every such
        count is undone within the same cycle, or undone and made an allocation
        (``add`` marks it then), so its books at the next view are what they were, and
        a backlog held back every cycle does not make every view look at it again."""
        leaf = rs.spec.consumer
        # _held_by and _unmet_delta, unmarked, written out: a request held back is
        # counted and uncounted host by host (phase 8), hundreds of times a cycle
        before = rs.max - rs.held
        rs.held += slots
        after = rs.max - rs.held
        if (before > 0) != (after > 0):
            self._wanting(rs, after > 0)
        delta = (after if after > 0 else 0) - (before if before > 0 else 0)
        if delta:
            unmet = self.unmet
            left = unmet.get(leaf, 0) + delta
            if left:
                unmet[leaf] = left
            else:
                del unmet[leaf]
            unmet_in = self.unmet_in
            for g in rs.groups:
                here = unmet_in[g]
                here[leaf] = here.get(leaf, 0) + delta
        self._pool_counts(leaf, group, source, slots, mark=False)
        st = self.subtree_held[group]
        for p in self.chain[leaf]:
            st[p] = st.get(p, 0) + slots

    def remove(self, a: Allocation) -> None:
        if self.changed is not None:
            self.changed.add(a.id)
        self._count(a, -1)
        self._held_delta(a, -a.slots)
        del self.allocs[a.id]
        del self.by_host[a.host][a.id]
        self.reclaiming.pop(a.id, None)
        rs = self.requests.get(a.request)
        if rs is not None:
            if rs.allocs.pop(a.id, None) is not None and a.reclaim is None:
                rs.count_unmarked(a.group, a.source, -a.slots)
            self._held_by(rs, -a.slots)
        h = self.hosts[a.host]
        h.users[a.consumer] -= a.slots
        if not h.users[a.consumer]:
            del h.users[a.consumer]
        if h.exclusive_for == a.request and not any(x.request == a.request for x in self.by_host[a.host].values()):
            set_exclusive(h, None)
            self.exclusive_hosts.discard(a.host)
        if h.state is not HostState.DOWN:
            fence = self._fence_on_remove(a) if self.in_use else 0
            change_free(h, a.slots - fence)
        else:
            h.free += a.slots
        if h.free > 0:
            self.with_free.add(a.host)

    def held_on(self, request: str, host: str) -> int:
        rs = self.requests.get(request)
        return sum(x.slots for x in rs.allocs.values() if x.host == host) if rs is not None else 0

    def _fence_on_remove(self, a: Allocation) -> int:
        """Slots of ``a`` (already taken off its request) that its processes still use:
        they stay off the host's free slots until those processes are gone."""
        key = (a.request, a.host)
        used = self.in_use.get(key, 0)
        if not used:
            return 0
        fenced = self.fences.get(key, 0)
        fence = min(a.slots, max(0, used - self.held_on(a.request, a.host) - fenced))
        if fence:
            self.fences[key] = fenced + fence
            if a.source[0] == "p":
                self._fence_count(key, (a.group, a.source[5:]), fence)
        return fence

    def _fence_count(self, key: tuple[str, str], pool: tuple[str, str], slots: int) -> None:
        book = self.fence_pool.setdefault(key, [pool[0], pool[1], 0])
        book[2] += slots
        pu = self.pool_used[book[0]]
        pu[book[1]] = pu.get(book[1], 0) + slots

    def set_in_use(self, request: str, host: str, slots: int) -> int:
        """Processes of ``request`` now use ``slots`` on ``host``; slots fenced for it
        that no process uses any more are freed. Returns how many were freed."""
        key = (request, host)
        if slots:
            self.in_use[key] = slots
        else:
            self.in_use.pop(key, None)
        fenced = self.fences.get(key, 0)
        if not fenced:
            return 0
        keep = min(fenced, max(0, slots - self.held_on(request, host)))
        return self.unfence(request, host, fenced - keep)

    def fence(self, request: str, host: str, slots: int, pool: tuple[str, str] | None = None) -> None:
        """Keep ``slots`` of ``host`` off its free slots for ``request``'s processes
        (recovery from the store, and a plan change carrying fences over); ``pool``:
        the (group, pool owner) they still count in."""
        key = (request, host)
        self.fences[key] = self.fences.get(key, 0) + slots
        if pool is not None and pool[0] in self.pool_used:
            self._fence_count(key, pool, slots)
        h = self.hosts[host]
        if h.state is not HostState.DOWN:
            change_free(h, -slots)
        else:
            h.free -= slots
        if h.free <= 0:
            self.with_free.discard(host)

    def unfence(self, request: str, host: str, slots: int) -> int:
        key = (request, host)
        if slots <= 0 or key not in self.fences:
            return 0
        slots = min(slots, self.fences[key])
        left = self.fences[key] - slots
        if left > 0:
            self.fences[key] = left
        else:
            del self.fences[key]
        book = self.fence_pool.get(key)
        if book is not None:
            counted = min(slots, book[2]) if left else book[2]
            self.pool_used[book[0]][book[1]] -= counted
            book[2] -= counted
            if not book[2]:
                del self.fence_pool[key]
        h = self.hosts.get(host)
        if h is not None:
            if h.state is not HostState.DOWN:
                change_free(h, slots)
            else:
                h.free += slots
            if h.free > 0:
                self.with_free.add(host)
        self.touch()
        return slots

    def release(self, a: Allocation, slots: int | None = None) -> None:
        """Give back ``slots`` of an allocation (all of it by default)."""
        if a.reclaim is not None:
            self._released_marked(a, min(a.slots, slots or a.slots))
            if a.request in self.rigid:
                self.cut_short.add(a.request)
        if slots is None or slots >= a.slots:
            self.remove(a)
            return
        part = self.split(a, slots)
        self.remove(part)

    def _released_marked(self, a: Allocation, slots: int) -> None:
        """Marked slots their holder gave back before the deadline: its beneficiary's."""
        self.released_marked.append((a.group, a.reclaim.beneficiary, slots))
        if a.reclaim.reason == RESERVATION_READY:
            self.ready_freed.add((a.group, a.reclaim.beneficiary))

    def split(self, a: Allocation, slots: int) -> Allocation:
        """Cut ``slots`` off ``a`` into an allocation of their own (same source and mark)."""
        self._count(a, -1)
        a.slots -= slots
        self._count(a, +1)
        b = Allocation(self._next_id, a.request, a.consumer, a.group, a.host, slots, a.source, a.reclaim)
        self._next_id += 1
        if self.changed is not None:
            self.changed.add(a.id)
            self.changed.add(b.id)
        self.allocs[b.id] = b
        self.by_host[b.host][b.id] = b
        rs = self.requests.get(b.request)
        if rs is not None:
            rs.allocs[b.id] = b
        if b.reclaim is not None:
            self.reclaiming[b.id] = b
            heapq.heappush(self._deadlines, (b.reclaim.deadline, b.id))
        self._count(b, +1)
        return b

    def retag(self, a: Allocation, source: str) -> None:
        if self.changed is not None:
            self.changed.add(a.id)
        self._count(a, -1)
        if a.reclaim is None:
            self._unmarked_moves(a, -1)
        a.source = source
        if a.reclaim is None:
            self._unmarked_moves(a, +1)
        self._count(a, +1)

    def mark(self, a: Allocation, slots: int, mark: PendingReclaim) -> Allocation:
        if slots < a.slots:
            a = self.split(a, slots)
        if self.changed is not None:
            self.changed.add(a.id)
        if a.reclaim is None:
            # what _count(-1), the mark, and _count(+1) come to: the holder's counts by
            # source stay; the allocation leaves its source index for the reclaim books
            key = (a.consumer, a.group, a.source)
            del self.by_source[key][a.id]
            self._on_host(key, a.host, -a.slots)
            a.reclaim = mark
            self._unmarked_moves(a, -1)
            self._count_marked(a, a.slots)  # marks the holder touched
        else:
            self._count(a, -1)
            a.reclaim = mark
            self._count(a, +1)
        self.reclaiming[a.id] = a
        heapq.heappush(self._deadlines, (mark.deadline, a.id))
        return a

    def unmark(self, a: Allocation) -> None:
        """Call a reclaim off: the holder keeps the slots."""
        if self.changed is not None:
            self.changed.add(a.id)
        self._count(a, -1)
        if a.reclaim is not None:
            self._unmarked_moves(a, +1)
        a.reclaim = None
        self._count(a, +1)
        self.reclaiming.pop(a.id, None)

    def _unmarked_moves(self, a: Allocation, sign: int) -> None:
        """``a`` joins (+1) or leaves (-1) its request's ``unmarked`` slots."""
        rs = self.requests.get(a.request)
        if rs is not None and a.id in rs.allocs:
            rs.count_unmarked(a.group, a.source, sign * a.slots)

    def of_source(self, leaf: str, group: str, source: str) -> Iterable[Allocation]:
        """What ``leaf`` holds from ``source`` in ``group`` and is not being reclaimed."""
        return self.by_source.get((leaf, group, source), {}).values()

    def _live_deadline(self, entry: tuple[float, int]) -> Allocation | None:
        a = self.reclaiming.get(entry[1])
        return a if a is not None and a.reclaim.deadline == entry[0] else None

    def due(self, now: float) -> list[Allocation]:
        """Marked allocations whose deadline has come, by deadline then id (a heap,
        so a cycle does not look at every reclaim still in its grace period)."""
        heap = self._deadlines
        out: dict[int, Allocation] = {}
        while heap and heap[0][0] <= now:
            a = self._live_deadline(heapq.heappop(heap))
            if a is not None:
                out[a.id] = a
        return sorted(out.values(), key=lambda a: (a.reclaim.deadline, a.id))

    def next_deadline(self) -> float | None:
        heap = self._deadlines
        while heap and self._live_deadline(heap[0]) is None:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    # -- hosts ----------------------------------------------------------------
    def set_host_state(self, name: str, state: HostState, keep_in_use: bool = False) -> list[Removal]:
        """``keep_in_use``: going down, the processes counted in ``in_use`` there may still
        run (a host that stopped answering is not known to be dead): the slots of the
        allocations lost with it stay fenced for them, and what was fenced stays so, until
        ``set_in_use`` says they are gone. Without it they are taken to be gone with the host."""
        self.touch()
        h = self.hosts[name]
        lost: list[Removal] = []
        if state is HostState.DOWN:
            if not keep_in_use:
                for key in [k for k in self.in_use if k[1] == name]:
                    del self.in_use[key]
                for key in [k for k in self.fences if k[1] == name]:
                    self.unfence(*key, self.fences[key])
            for a in list(self.by_host[name].values()):
                lost.append(Removal(a.request, a.consumer, a.group, a.host, a.slots, "lost: host down"))
                self.remove(a)
        change_state(h, state)
        self.lost.extend(lost)
        return lost
