"""Where granted slots go: one capacity ledger per host, one ordered index per group.

A host may belong to several groups; its free slots are counted once (the
ledger), and every group that contains it keeps it in its own order (the
index), so overlapping groups can never hand out the same slot twice.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import accumulate, compress, islice

from apportion.engine.model import AllocationPolicy, Host, HostState, Request


class HostLedger:
    __slots__ = ("host", "free", "state", "takes_work", "users", "exclusive_for", "groups", "ranks", "position")

    def __init__(self, host: Host, position: int) -> None:
        self.host = host
        self.free = host.slots
        self.state = host.state
        self.takes_work = host.state is HostState.OK  # kept with ``state`` (change_state)
        self.users: dict[str, int] = {}  # consumer -> slots held here
        self.exclusive_for: str | None = None  # request holding the host exclusively
        self.groups: list[GroupIndex] = []
        self.ranks: list[int] = []  # its position in each of ``groups``
        self.position = position

    @property
    def used(self) -> int:
        return self.host.slots - self.free


class GroupIndex:
    """The hosts of one group that can take work, in the order the policy prefers."""

    def __init__(self, name: str, policy: AllocationPolicy, hosts: list[HostLedger]) -> None:
        self.name = name
        self.policy = policy
        self.hosts = hosts
        self.rank = {h.host.name: i for i, h in enumerate(hosts)}
        self._span = max(1, len(hosts))
        # where the policy orders by free slots: the keys of the hosts that can take
        # work, as a heap with lazy deletion: a host whose free slots move gets its
        # new key pushed, and its old one is dropped when met (it no longer matches
        # the host). Every grant moves a host's key, so pushing alone is what keeps
        # the index cheap.
        self._heap: list[int] = []
        # otherwise (stacked, exclusive) the order is the group's alone: one byte per
        # host in that order, 1 where it is open, found in order by ``bytearray.find``
        # (a wide job on small hosts reads hundreds), set and cleared in place as a
        # host fills or gets room again
        self._open = bytearray(len(hosts))
        # beside it, each host's name and free slots in that order, so that the open
        # hosts' are read in bulk (``_stacked_wide``: itertools.compress); ``frees`` is
        # right for every open host (change_free, _sync)
        self.names = [h.host.name for h in hosts]
        self.frees = [h.free for h in hosts]
        # the policy as plain flags: hot paths test them per host, and an enum
        # member costs a class lookup each time
        self.balanced = policy is AllocationPolicy.BALANCED
        self.best_fit = policy is AllocationPolicy.BEST_FIT
        self.exclusive = policy is AllocationPolicy.EXCLUSIVE
        self.keyed_by_free = self.balanced or self.best_fit
        self._by_free = -self._span if self.balanced else self._span if self.best_fit else 0
        # running sums, so that capacity is not a walk over every host each cycle
        self.slots_taking_work = 0
        # free slots on the hosts taking work: all that a cycle could still hand out
        # here (Cycle._give: a request that cannot reach its min even with all of them)
        self.open_free = 0
        self.not_taking: dict[str, HostLedger] = {}  # closed or unavailable hosts
        # whether no other group holds any of its hosts (set by ClusterState): slots
        # held back here move this group's counts alone (ClusterState.hold_on_hosts)
        self.alone = False
        self.exclusive_on = 0  # its hosts a request holds exclusively (set_exclusive)
        for i, h in enumerate(hosts):
            h.groups.append(self)
            h.ranks.append(i)
            self._add(h)
            self._count_state(h, +1)

    def _key(self, h: HostLedger) -> int:
        """One int per host, as ints compare fastest: its position in the group,
        preceded, where the policy orders by free slots, by those (most first when
        balanced, fewest first for best fit); ``candidates`` reads the position back."""
        return self.rank[h.host.name] + h.free * self._by_free

    def _add(self, h: HostLedger) -> None:
        if h.free > 0 and h.takes_work:
            if not self.keyed_by_free:
                self._open[h.ranks[h.groups.index(self)]] = 1
                return
            heap = self._heap
            heapq.heappush(heap, self._key(h))
            if len(heap) > 2 * self._span + 64:
                self._compact()

    def _sync(self, h: HostLedger) -> None:
        """The host's place in the index after its state changed."""
        r = h.ranks[h.groups.index(self)]
        self.frees[r] = h.free
        if self.keyed_by_free:
            self._add(h)  # a closed host's key goes stale by itself
        else:
            self._open[r] = 1 if h.free > 0 and h.takes_work else 0

    def _compact(self) -> None:
        """Drop the stale keys: what is left is one key per open host."""
        self._heap = [self._key(h) for h in self.hosts if h.free > 0 and h.takes_work]
        heapq.heapify(self._heap)

    def _count_state(self, h: HostLedger, sign: int) -> None:
        if h.takes_work:
            self.slots_taking_work += sign * h.host.slots
            if h.free > 0:
                self.open_free += sign * h.free
        elif h.state is not HostState.DOWN:
            if sign > 0:
                self.not_taking[h.host.name] = h
            else:
                self.not_taking.pop(h.host.name, None)

    def capacity(self) -> int:
        """Slots this group can count on: hosts taking work, plus what closed hosts still run,
        plus every slot of an unreachable host (silent for a while, as an agent being restarted
        is: shares stay as they were, so nothing is reclaimed because it is silent)."""
        return self.slots_taking_work + sum(h.host.slots if h.state is HostState.UNREACHABLE else h.used
                                            for h in self.not_taking.values())

    def free_slots(self) -> int:
        return sum(h.free for h in self.hosts if h.takes_work)

    def candidates(self) -> Iterator[str]:
        """The open hosts in the group's order, lazily. Callers only read while
        iterating and apply their picks afterwards; the keys met are put back when
        the iteration ends (or is dropped), stale ones and repeats are not."""
        hosts = self.hosts
        if not self.keyed_by_free:
            find = self._open.find
            r = find(1)
            while r >= 0:
                yield hosts[r].host.name
                r = find(1, r + 1)
            return
        heap, span, by_free = self._heap, self._span, self._by_free
        met: list[int] = []
        last = None
        try:
            while heap:
                key = heapq.heappop(heap)
                if key == last:
                    continue  # the same key pushed twice: once is enough
                pos = key % span
                h = hosts[pos]
                if h.free <= 0 or not h.takes_work or key - pos != h.free * by_free:
                    continue  # stale: not this host's key now, or the host is not open
                last = key
                met.append(key)
                yield h.host.name
        finally:
            for key in met:
                heapq.heappush(heap, key)


def change_free(h: HostLedger, delta: int) -> None:
    """Move a host's free count, keeping every group index that holds it in order:
    its new key is pushed where the key moved (the old one goes stale). A group
    whose order does not depend on free slots (stacked, exclusive) only needs the
    host put in when it gets room again and taken out when it fills."""
    before = h.free
    after = before + delta
    h.free = after
    if not h.takes_work:
        return  # in no index: change_state puts it back
    if before > 0:
        if after > 0:  # open before and after
            for g, r in zip(h.groups, h.ranks):
                g.open_free += delta
                g.frees[r] = after
                if g.keyed_by_free:
                    g._add(h)  # the old key goes stale
        else:  # fills: a key goes stale by itself
            for g, r in zip(h.groups, h.ranks):
                g.open_free -= before
                g.frees[r] = after
                if not g.keyed_by_free:
                    g._open[r] = 0
    elif after > 0:  # gets room again
        for g, r in zip(h.groups, h.ranks):
            g.open_free += after
            g.frees[r] = after
            if g.keyed_by_free:
                g._add(h)
            else:
                g._open[r] = 1


def set_exclusive(h: HostLedger, request: str | None) -> None:
    """The request holding the host exclusively (None: none), counted in its groups."""
    if (h.exclusive_for is None) != (request is None):
        d = 1 if request is not None else -1
        for g in h.groups:
            g.exclusive_on += d
    h.exclusive_for = request


def change_state(h: HostLedger, state: HostState) -> None:
    for g in h.groups:
        g._count_state(h, -1)
    h.state = state
    h.takes_work = state is HostState.OK
    for g in h.groups:
        g._sync(h)
        g._count_state(h, +1)


def fits(h: HostLedger, req: Request, consumer: str, group: GroupIndex) -> int:
    """How many instances of ``req`` this host can take now (0 if it may not serve it)."""
    if not h.takes_work or h.free < req.order:
        return 0
    if h.exclusive_for is not None and h.exclusive_for != req.id:
        return 0
    if req.exclusive and h.exclusive_for != req.id and h.users:
        return 0
    if group.exclusive and any(c != consumer for c in h.users):
        return 0
    if req.requirement is not None and not req.requirement(h.host):
        return 0
    return h.free // req.order


def choose_hosts(hosts: dict[str, HostLedger], group: GroupIndex, req: Request,
                 consumer: str, instances: int) -> list[tuple[str, int]]:
    """Pick hosts for up to ``instances`` instances: [(host, slots)].

    - stacked / exclusive: fill hosts in the group's order;
    - balanced: each instance to the host with the most free slots at that moment;
    - best fit: the whole lot on the smallest host that takes it if there is one,
      otherwise the smallest holes first.
    A requirement with ``order()`` reorders the candidates by its keys first."""
    rq = req.requirement
    if rq is None and not group.keyed_by_free and not group.exclusive and not req.exclusive and instances > 0:
        return _stacked(group, req, instances)
    sort_hosts = getattr(rq, "sort_hosts", None) if rq is not None else None
    if sort_hosts is not None and getattr(rq, "order", ()):
        cands = [hosts[n] for n in group.candidates()]
        names = [h.name for h in sort_hosts([c.host for c in cands])]
    else:
        names = None
    if group.balanced and names is None:
        return _balanced(hosts, group, req, consumer, instances)
    source = names if names is not None else group.candidates()
    picks: list[tuple[str, int]] = []
    left = instances
    if group.best_fit and names is None:
        for name in group.candidates():
            if fits(hosts[name], req, consumer, group) >= left:
                return [(name, left * req.order)]
    for name in source:
        n = fits(hosts[name], req, consumer, group)
        if n <= 0:
            continue
        n = min(n, left)
        picks.append((name, n * req.order))
        left -= n
        if left == 0:
            break
    return picks


def _stacked(group: GroupIndex, req: Request, instances: int) -> list[tuple[str, int]]:
    """``choose_hosts`` for the plainest case, a request with no requirement in a stacked
    group: the open hosts in order, each taking what its free slots hold, read straight
    off the group's index (``fits`` written out: an open host takes work and has room)."""
    order, rid = req.order, req.id
    if order == 1 and instances > _WIDE and not group.exclusive_on:
        return _stacked_wide(group, instances)
    hosts, find = group.hosts, group._open.find
    picks: list[tuple[str, int]] = []
    left = instances
    r = find(1)
    while r >= 0:
        h = hosts[r]
        free = h.free
        if free >= order and (h.exclusive_for is None or h.exclusive_for == rid):
            n = free // order
            if n >= left:
                picks.append((h.host.name, left * order))
                break
            picks.append((h.host.name, n * order))
            left -= n
        r = find(1, r + 1)
    return picks


_WIDE = 32  # instances from which _stacked_wide reads the group's index at once


def _stacked_wide(group: GroupIndex, instances: int) -> list[tuple[str, int]]:
    """``_stacked`` for a wide request of one slot an instance where no host of the group
    is held exclusively: every open host takes what its free slots hold, in order, so
    the picks are the open hosts' free slots up to ``instances``, read in bulk (a wide
    job on small hosts spans hundreds)."""
    frees = list(compress(group.frees, group._open))
    cum = list(accumulate(frees))
    if not cum:
        return []
    names = compress(group.names, group._open)
    if cum[-1] <= instances:
        return list(zip(names, frees))
    k = bisect_left(cum, instances)  # the first host that makes them up
    picks = list(zip(islice(names, k), frees))
    picks.append((next(names), instances - (cum[k - 1] if k else 0)))
    return picks


def choose_among(hosts: dict[str, HostLedger], group: GroupIndex, req: Request, consumer: str,
                 instances: int, names: Iterable[str]) -> list[tuple[str, int]]:
    """Up to ``instances`` instances on the named hosts only, filled in the order given
    (a consumer's owned hosts: its own work goes there before anywhere else)."""
    picks: list[tuple[str, int]] = []
    left = instances
    for name in names:
        h = hosts.get(name)
        if h is None or name not in group.rank:
            continue
        n = min(fits(h, req, consumer, group), left)
        if n > 0:
            picks.append((name, n * req.order))
            left -= n
            if left == 0:
                break
    return picks


def _balanced(hosts: dict[str, HostLedger], group: GroupIndex, req: Request,
              consumer: str, instances: int) -> list[tuple[str, int]]:
    """One instance at a time to the emptiest host that may take it. The group's
    index is already in most-free-first order, so only as many hosts as there are
    instances need looking at, plus those that may not serve the request."""
    heap: list[tuple[int, int, str]] = []
    plain = req.requirement is None and not req.exclusive and group.balanced
    for name in group.candidates():
        h = hosts[name]
        if plain and h.free < req.order:
            break  # most free first: no host after this one holds an instance either
        n = fits(h, req, consumer, group)
        if n > 0:
            heapq.heappush(heap, (-h.free, group.rank[name], name))
            if len(heap) >= instances:
                break
    taken: dict[str, int] = {}
    free = {name: -f for f, _, name in heap}
    left = instances
    while left and heap:
        negfree, pos, name = heapq.heappop(heap)
        taken[name] = taken.get(name, 0) + 1
        free[name] -= req.order
        left -= 1
        # nothing but its free slots changed since the host passed fits(): it takes
        # as many more instances as those hold
        if free[name] >= req.order:
            heapq.heappush(heap, (-free[name], pos, name))
    return [(name, n * req.order) for name, n in taken.items()]
