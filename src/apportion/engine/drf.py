"""Requests with resource vectors, served by Dominant Resource Fairness across kinds
(Ghodsi et al., NSDI 2011), with ownership, limits and lending per kind.

A request that carries ``resources`` (what each slot needs of each kind) is kept here, not
in the slot books of ``state.ClusterState``. Each cycle, per resource group in plan order:

1. reclaims whose grace ran out are taken (Removal); reclaims for a consumer that no
   longer needs them are called off;
2. *own*: a leaf that owns kinds in the group (``owned: {gpus: 16}``) is served within
   what it owns of those kinds (what else an instance needs, such as the cores beside
   owned GPUs, comes with it), lowest dominant share first; when no host has room it reclaims, from
   those holding more than they own (the highest dominant share first, newest first),
   what one instance needs on one host, after each victim's grace;
3. *shared*: progressive filling. The leaf with the lowest dominant share (divided by its
   share_ratio) gets its next instance, if it fits within its per-kind max, within what the
   owners that do not lend a kind keep of it idle, and on one host where every dimension
   fits; a leaf whose next instance does not fit is done for the cycle;
4. a request below its ``min`` gives back what this cycle gave it (all or nothing).

A consumer's dominant share is the largest, over the kinds, of weight x used / total in
the group (``policy.weights``). Placement takes the first host in the group's order where
the instance fits (``packing: first``), or engine/gpupack.py's best fit or FGD for the GPU
dimension (``bestfit``, ``fgd``). GPUs are counted per device: a slot asks for whole GPUs
or a fraction (below 1) of one, and fractions share a GPU only where it has that much left.

Slot requests and these share hosts: each slot of a slot allocation takes the host's
cores and memory over its slots (never its GPUs or custom kinds, which only the requests
that name them use); what vector work holds of those takes the matching part of the
host's slots (a fence in the slot books, so the slot cycle does not hand them out).

For the live service (service/resources.py) the book also keeps which allocations changed
since it last looked (``changed``), what processes use (``in_use``) and what left a request
while its processes still used it (``fenced``: off the host until ``set_in_use`` says they
are gone, as the slot books do), and puts a request back as the store kept it
(``restore``). Allocation ids come from the slot books' counter: one namespace. Pure: no
I/O, no clock.
"""

from __future__ import annotations

import gc
import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from sortedcontainers import SortedList

from apportion.engine import gpupack
from apportion.engine.decisions import Decisions, Grant, Reclaim, Removal
from apportion.engine.kinds import EPS, Vector, add_into, dominant, fits, rounded, scaled, vector, within
from apportion.engine.model import HostState, Request
from apportion.engine.state import OWN, Allocation, ClusterState, PendingReclaim, pool_source

FENCE = "\x00kinds"  # the request id the slot books fence vector work under
SHARED = pool_source("/")
GPUS = "gpus"
# what a slot of slot work takes of its host (the host's amount over its slots), and what vector
# work's part of a host's slots is made of: GPUs and custom kinds only the requests that name them use
SLOT_KINDS = ("cores", "memory")
MILLI = gpupack.MILLI
NEAR = 8  # hosts first fit reads directly before it looks among the open hosts
new_tuple = tuple.__new__  # what a NamedTuple's __new__ calls


def gpu_shape(amount: float) -> tuple[int, int]:
    """(GPUs, thousandths of each) for what a slot asks: whole GPUs, or a fraction of one."""
    if amount <= EPS:
        return 0, 0
    if amount < 1:
        return 1, max(1, round(amount * MILLI))
    if abs(amount - round(amount)) > EPS:
        raise ValueError(f"gpus:{amount:g} must be whole or a fraction below 1")
    return round(amount), MILLI


_SHAPES: dict[tuple, int] = {}


def shape_of(spec: Request) -> int | None:
    """What first-fit placement remembers a host cursor by: the same number for the same
    (resources, order), None when a requirement filters hosts. A number, as it is hashed
    several times for each grant (a tuple's hash is worked out anew each time)."""
    if spec.requirement is not None:
        return None
    key = (spec.resources, spec.order)
    got = _SHAPES.get(key)
    if got is None:
        got = _SHAPES[key] = len(_SHAPES)
    return got


@dataclass(slots=True, eq=False)
class KindAlloc(Allocation):
    """A slot allocation that also holds what each slot needs of every kind."""
    need: Vector = field(default_factory=dict)  # per slot
    gpus: tuple[tuple[int, int], ...] = ()  # (device, thousandths) taken, all slots together

    @property
    def amount(self) -> Vector:
        return scaled(self.need, self.slots)


class KindRequest:
    __slots__ = ("spec", "need", "held", "allocs", "groups", "gpu", "arrival", "shape", "inst", "listed")

    def __init__(self, spec: Request, groups: tuple[str, ...], arrival: int) -> None:
        self.spec = spec
        self.need = vector(spec.resources)
        self.gpu = gpu_shape(self.need.get(GPUS, 0.0))
        self.held = 0
        self.allocs: dict[int, KindAlloc] = {}
        self.groups = groups
        self.arrival = arrival
        # what first-fit placement remembers a host cursor by (None: a requirement filters hosts)
        self.shape = shape_of(spec)
        self.inst = scaled(self.need, spec.order)  # what one instance needs
        self.listed = False  # in the book's wanting lists

    @property
    def unmet(self) -> int:
        return max(0, self.spec.max - self.held)


class Packer:
    """engine/gpupack.py's view of a group's hosts for best fit and FGD, kept from one placement
    to the next: a host's free CPU, memory and GPUs (and its fragmentation) are read again only
    when something changed there (``dirty``), and the typical tasks only when the requests did."""

    def __init__(self, book: KindBook, state: ClusterState, names: list[str]) -> None:
        self.names = names
        self.index = {n: i for i, n in enumerate(names)}
        rows = [book._gpu_row(state, n) for n in names]
        self.cluster = gpupack.Cluster([0] * len(names), [0] * len(names), [len(r) for r in rows])
        self.dirty: set[str] = set(names)
        self.frag: gpupack.Fragmentation | None = None
        self.mix_key: object = None  # what the typical tasks of ``frag`` were worked out from

    def sync(self, book: KindBook, state: ClusterState, mix_key: object, mix: gpupack.TaskMix | None) -> None:
        """Read again the hosts that changed (their fragmentation too); the fragmentation over
        ``mix`` (None: none) worked out afresh when the typical tasks changed (``mix_key``)."""
        c, index = self.cluster, self.index
        for n in self.dirty:
            i = index.get(n)
            if i is None:
                continue
            f = book.free_on(state, n)
            c.cpu[i] = c.cpu_cap[i] = max(0, int(f.get("cores", 0.0) * 1000 + 1e-6))
            c.mem[i] = c.mem_cap[i] = max(0, int(f.get("memory", 0.0) * 1024 + 1e-6))
            r = book._gpu_row(state, n)
            c.gpu[i, :len(r)] = r
            if self.frag is not None:
                self.frag.refresh(i)
        self.dirty.clear()
        # best fit scales by the largest free CPU, as a cluster made afresh from free space would
        c.cpu_scale = float(max(1, int(c.cpu.max()) if len(c) else 1))
        if mix is None:
            self.frag = self.mix_key = None
        elif self.frag is None or self.mix_key != mix_key:
            self.frag, self.mix_key = gpupack.Fragmentation(c, mix, before=self.frag), mix_key


class KindBook:
    """What vector requests hold, per host, per (group, leaf) and per GPU device."""

    def __init__(self) -> None:
        self.requests: dict[str, KindRequest] = {}
        self.allocs: dict[int, KindAlloc] = {}
        self.host_used: dict[str, Vector] = {}
        self.gpu_free: dict[str, list[int]] = {}  # host -> thousandths free per device
        self.use: dict[tuple[str, str], Vector] = {}  # (group, leaf) -> held, all sources
        self.own_use: dict[tuple[str, str], Vector] = {}  # (group, leaf) -> held as own
        self.incoming: dict[tuple[str, str], Vector] = {}  # (group, leaf) -> being reclaimed for it
        self.wanting: dict[str, KindRequest] = {}  # open requests below their max
        # group -> leaf -> arrival -> request, oldest first (a plain dict: quick to take one out of)
        self.wanting_by: dict[str, dict[str, dict[int, KindRequest]]] = {}
        self.shapes_in: dict[str, dict[int | None, int]] = {}  # group -> shape -> wanting requests of it
        # the least of every kind any request asks a slot: a host without that much free fits
        # nothing; per group, the hosts that have it (their positions in the group), in order
        self.unit: Vector | None = None
        # the most of every kind any request's instance ever asked (only grows): each grant
        # takes at most that much from what a group has free
        self.most: Vector = {}
        self._open: dict[str, SortedList] | None = None
        # within a cycle: hosts given work whose place in the open hosts is brought up to date
        # when those are next read (a host takes several instances in a row, and most of them
        # go where their shape last went, without reading them)
        self._reopen: set[str] | None = None
        self.dom: dict[tuple[str, str], float] = {}  # (group, leaf) -> dominant share, as last worked out
        self._plan_facts: tuple | None = None
        self.free_sum: dict[str, Vector] = {}  # group -> free on its hosts that take work
        self.on_host: dict[str, dict[int, KindAlloc]] = {}
        self.marked: dict[int, KindAlloc] = {}  # allocations being reclaimed
        self._free: dict[str, Vector] = {}  # host -> free_on, while no slot work is there
        self._caps: dict[str, tuple] = {}  # host -> (its resources, as a dict)
        self.packers: dict[str, Packer] = {}  # group -> its hosts as best fit and FGD see them
        self._slot_work = False  # there was slot work at the last cycle (its room moves unseen)
        self._requests_seen = 0  # counts changes to the open requests (the typical tasks follow them)
        self._mixes: dict[str, tuple[int, gpupack.TaskMix | None]] = {}  # group -> (that count, its tasks)
        self.totals: dict[str, Vector] = {}  # group -> what its hosts have (until hosts change)
        self._arrivals = 0
        self._deferred: set[str] | None = None  # hosts whose fence is brought up to date at the cycle's end
        # the live service's books (none in the simulator): the allocations added, changed or gone
        # since it last looked (None: not kept); what processes use per (request, host); and what
        # left a request while its processes still used it, kept off the host until they are gone:
        # (request, host) -> (slots, what each slot needs)
        self.changed: set[int] | None = None
        self.touched: set[str] | None = None  # hosts whose part of their slots may have changed (None: not kept)
        self.in_use: dict[tuple[str, str], int] = {}
        self.fenced: dict[tuple[str, str], tuple[int, Vector]] = {}

    def _track(self, kr: KindRequest) -> None:
        wants = kr.held < kr.spec.max and kr.spec.id in self.requests
        if wants == kr.listed:
            return
        kr.listed = wants
        rid, leaf = kr.spec.id, kr.spec.consumer
        if wants:
            self.wanting[rid] = kr
            for g in kr.groups:
                by_leaf = self.wanting_by.setdefault(g, {})
                mine = by_leaf.get(leaf)
                if mine is None:
                    mine = by_leaf[leaf] = {}
                last = next(reversed(mine)) if mine else -1
                mine[kr.arrival] = kr
                if kr.arrival < last:  # back below its max: the list kept oldest first
                    ordered = sorted(mine.items())
                    mine.clear()
                    mine.update(ordered)
                counts = self.shapes_in.setdefault(g, {})
                counts[kr.shape] = counts.get(kr.shape, 0) + 1
            return
        self.wanting.pop(rid, None)
        for g in kr.groups:
            counts = self.shapes_in[g]
            counts[kr.shape] -= 1
            if not counts[kr.shape]:
                del counts[kr.shape]
            mine = self.wanting_by[g][leaf]
            del mine[kr.arrival]
            if not mine:
                del self.wanting_by[g][leaf]

    def forget_places(self) -> None:
        """Hosts changed outside this book (a state, a plan): free space is read again."""
        self._free.clear()
        self.packers.clear()
        self._open = None
        self.totals.clear()
        self.dom.clear()
        self._plan_facts = None
        self.free_sum.clear()

    def open_hosts(self, state: ClusterState, group: str, hosts: list[str]) -> SortedList:
        """Positions in ``group`` of the hosts that take work and have at least ``unit`` free."""
        if self._open is None:
            self._open = {}
        self._open_again(state)
        got = self._open.get(group)
        if got is None:
            ledgers, unit = state.hosts, self.unit or {}
            got = self._open[group] = SortedList(
                i for i, n in enumerate(hosts)
                if ledgers[n].takes_work and ledgers[n].host.resources and fits(unit, self.free_on(state, n)))
        return got

    def _open_again(self, state: ClusterState) -> None:
        """The hosts given work since the open hosts were last read: in or out of them."""
        if self._reopen:
            for host in self._reopen:
                self._host_changed(state, host)
            self._reopen.clear()

    def _host_changed(self, state: ClusterState, host: str) -> None:
        """Keep ``host`` in or out of its groups' open hosts."""
        if not self._open:
            return
        h = state.hosts[host]
        ok = h.takes_work and fits(self.unit or {}, self.free_on(state, host))
        for g in h.groups:
            got = self._open.get(g.name)
            if got is not None:
                r = g.rank[host]
                if ok:
                    if r not in got:
                        got.add(r)
                else:
                    got.discard(r)

    def group_free(self, state: ClusterState, group: str, hosts: list[str]) -> Vector:
        """What the group's hosts that take work have free, in all (kept up to date by ``_count``)."""
        got = self.free_sum.get(group)
        if got is None:
            got = self.free_sum[group] = {}
            for n in hosts:
                if state.hosts[n].takes_work:
                    add_into(got, self.free_on(state, n))
        return got

    def plan_facts(self, state: ClusterState) -> tuple[dict[str, list[str]], set[str]]:
        """Per group, the leaves that own kinds there; the groups where someone has a per-kind max."""
        if self._plan_facts is None or self._plan_facts[0] is not state.plan:
            owners: dict[str, list[str]] = {}
            maxed: set[str] = set()
            for c in state.plan.consumers:
                for g, gs in c.groups.items():
                    if gs.owned_kinds and c.is_leaf:
                        owners.setdefault(g, []).append(c.path)
                    if gs.max_kinds:
                        maxed.add(g)
            self._plan_facts = (state.plan, owners, maxed)
        return self._plan_facts[1], self._plan_facts[2]
        self.totals.clear()

    def typical_tasks(self, group: str) -> gpupack.TaskMix | None:
        """FGD's typical tasks of ``group``: one slot of each open request that may use it (None:
        none), worked out again only when the open requests changed."""
        got = self._mixes.get(group)
        if got is None or got[0] != self._requests_seen:
            tasks = [gpupack.Task(int(r.need.get("cores", 0.0) * 1000), int(r.need.get("memory", 0.0) * 1024),
                                  r.gpu[0], r.gpu[1]) for r in self.requests.values() if group in r.groups]
            got = self._mixes[group] = (self._requests_seen, gpupack.typical_mix(tasks) if tasks else None)
        return got[1]

    def __bool__(self) -> bool:
        return bool(self.requests or self.allocs)

    # -- requests -------------------------------------------------------------------------
    def submit(self, state: ClusterState, req: Request) -> None:
        if req.id in self.requests or req.id in state.requests:
            raise ValueError(f"request {req.id!r} is already open")
        if req.consumer not in state.consumers or not state.consumers[req.consumer].is_leaf:
            raise ValueError(f"request {req.id!r}: {req.consumer!r} is not a leaf consumer of the plan")
        kr = KindRequest(req, state.groups_of(req), self._arrivals)  # a bad GPU amount is refused here
        self.requests[req.id] = kr
        self._requests_seen += 1
        self._arrivals += 1
        self._track(kr)
        most = self.most
        for k, a in kr.inst.items():
            if a > most.get(k, 0.0):
                most[k] = a
        unit = self.unit
        if unit is None:
            self.unit = dict(kr.need)
            self._open = None
        elif any(kr.need.get(k, 0.0) < a - EPS for k, a in unit.items()):
            self.unit = {k: min(a, kr.need.get(k, 0.0)) for k, a in unit.items()}
            self._open = None

    def change(self, state: ClusterState, rid: str, min_slots: int | None, max_slots: int | None) -> None:
        kr = self.requests[rid]
        kr.spec = replace(kr.spec, min=kr.spec.min if min_slots is None else min_slots,
                          max=kr.spec.max if max_slots is None else max_slots)
        over = kr.held - kr.spec.max
        # those being reclaimed first, then those on hosts where its processes leave slots idle, then the newest
        busy = {a.host for a in kr.allocs.values()
                if self.in_use.get((rid, a.host), 0) >= self.held_on(rid, a.host)} if self.in_use else set()
        for a in sorted(kr.allocs.values(), key=lambda a: (a.reclaim is None, a.host in busy, -a.id)):
            if over <= 0:
                break
            take = min(over, a.slots)
            self._shrink(state, a, take)
            over -= take
        self._track(kr)

    def release(self, state: ClusterState, rid: str) -> None:
        kr = self.requests.pop(rid)
        self._requests_seen += 1
        self._track(kr)
        for a in list(kr.allocs.values()):
            self._drop(state, a)

    # -- the books ------------------------------------------------------------------------
    def _gpu_row(self, state: ClusterState, host: str) -> list[int]:
        row = self.gpu_free.get(host)
        if row is None:
            n = int(dict(state.hosts[host].host.resources).get(GPUS, 0.0) + EPS)
            row = self.gpu_free[host] = [MILLI] * n
        return row

    def free_on(self, state: ClusterState, host: str) -> Vector:
        """What ``host`` has left for vector work: its resources, less what vector work holds,
        less what its slot allocations take (each slot its share of the host)."""
        got = self._free.get(host)
        if got is not None:
            return got
        h = state.hosts[host]
        cap = h.host.resources
        free = dict(cap)
        used = self.host_used.get(host)
        if used:
            add_into(free, used, -1.0)
        slots = h.host.slots
        if slots > 0 and state.by_host[host]:
            by_slots = slots - h.free - state.fences.get((FENCE, host), 0)
            if by_slots > 0:
                for k, a in cap:
                    if k in SLOT_KINDS:
                        free[k] -= a * by_slots / slots
        else:  # no slot work here: nothing outside this book changes it
            self._free[host] = free
        return free

    def _place_gpus(self, row: list[int], shape: tuple[int, int], slots: int) -> list[tuple[int, int]] | None:
        """Devices for ``slots`` slots of ``shape`` on one host (tightest fit for fractions), or
        None; ``row`` is not changed."""
        k, milli = shape
        if not k:
            return []
        left = list(row)
        taken: list[tuple[int, int]] = []
        for _ in range(slots):
            if milli >= MILLI:
                devs = [i for i, f in enumerate(left) if f >= MILLI][:k]
            else:
                devs = sorted((i for i, f in enumerate(left) if f >= milli), key=lambda i: (left[i], i))[:k]
            if len(devs) < k:
                return None
            for i in devs:
                left[i] -= milli
                taken.append((i, milli))
        return taken

    def _fits_on(self, state: ClusterState, kr: KindRequest, host: str, slots: int) -> list[tuple[int, int]] | None:
        """The GPU devices ``slots`` slots of ``kr`` take on ``host`` when everything fits there."""
        if not fits(kr.inst if slots == kr.spec.order else scaled(kr.need, slots), self.free_on(state, host)):
            return None
        if not kr.gpu[0]:
            return []
        return self._place_gpus(self._gpu_row(state, host), kr.gpu, slots)

    def _add(self, state: ClusterState, kr: KindRequest, group: str, host: str, slots: int,
             gpus: list[tuple[int, int]], source: str, aid: int | None = None,
             key: tuple[str, str] | None = None) -> KindAlloc:
        """A new allocation of ``kr``; ``key``: (group, its consumer), when the caller has it."""
        # ids from the slot books' counter: one namespace for every allocation of the cluster
        if aid is None:
            aid = state._next_id
        if aid >= state._next_id:
            state._next_id = aid + 1
        spec = kr.spec
        a = KindAlloc(aid, spec.id, spec.consumer, group, host, slots, source, None, kr.need, tuple(gpus) if gpus else ())
        if self.changed is not None:
            self.changed.add(aid)
        self.allocs[aid] = a
        mine = self.on_host.get(host)
        if mine is None:
            mine = self.on_host[host] = {}
        mine[aid] = a
        kr.allocs[aid] = a
        held = kr.held = kr.held + slots
        if kr.listed != (held < spec.max and spec.id in self.requests):
            self._track(kr)
        # what one instance needs is worked out once per request (the same numbers as ``a.amount``)
        amount = kr.inst if slots == spec.order else a.amount
        if key is None:
            key = (group, spec.consumer)
        self.dom.pop(key, None)
        free = self._free.get(host)
        h = state.hosts.get(host)
        if free is None or h is None:
            self._on_host(state, host, amount, 1)
        else:  # _on_host for a host whose free space is kept (most grants of a cold cycle), in line
            if self.packers:
                for p in self.packers.values():
                    p.dirty.add(host)
            if self.free_sum and h.takes_work:
                for g in h.groups:
                    fs = self.free_sum.get(g.name)
                    if fs is not None:
                        for k, x in amount.items():
                            fs[k] = fs.get(k, 0.0) - x
            used = self.host_used.get(host)
            if used is None:
                used = self.host_used[host] = {}
            if h.host.slots > 0 and state.by_host[host]:
                del self._free[host]
                add_into(used, amount)
            else:  # what free_on would work out afresh, for the kinds that changed
                caps = self._caps.get(host)
                if caps is None or caps[0] is not h.host.resources:
                    caps = self._caps[host] = (h.host.resources, dict(h.host.resources))
                cap = caps[1].get
                for k, x in amount.items():
                    u = used[k] = used.get(k, 0.0) + x
                    free[k] = cap(k, 0.0) - u
        used = self.use.get(key)
        if used is None:
            used = self.use[key] = {}
        for k, x in amount.items():
            used[k] = used.get(k, 0.0) + x
        if source == OWN:  # the rest of _count: a new allocation is being reclaimed by nobody
            add_into(self.own_use.setdefault(key, {}), amount)
        if gpus:
            row = self._gpu_row(state, host)
            for i, m in gpus:
                if i < len(row):
                    row[i] -= m
        if self._deferred is not None:  # what _refence and _host_changed do within a cycle
            self._deferred.add(host)
            self._reopen.add(host)  # type: ignore[union-attr]
        else:
            self._refence(state, host)
            self._host_changed(state, host)
        return a

    def _on_host(self, state: ClusterState, host: str, amount: Vector, sign: int) -> None:
        """``amount`` taken (+1) from or given back (-1) to what ``host`` has free."""
        h = state.hosts.get(host)
        if self.packers:
            for p in self.packers.values():
                p.dirty.add(host)
        if self.free_sum and h is not None and h.takes_work:
            for g in h.groups:
                fs = self.free_sum.get(g.name)
                if fs is not None:
                    add_into(fs, amount, -sign)
        used = self.host_used.get(host)
        if used is None:
            used = self.host_used[host] = {}
        free = self._free.get(host)
        if free is not None and (h is None or (h.host.slots > 0 and state.by_host[host])):
            del self._free[host]
            free = None
        if free is None:
            add_into(used, amount, sign)
            return
        # what free_on would work out afresh (no slot work here), for the kinds that changed
        caps = self._caps.get(host)
        if caps is None or caps[0] is not h.host.resources:  # type: ignore[union-attr]
            caps = self._caps[host] = (h.host.resources, dict(h.host.resources))  # type: ignore[union-attr]
        cap = caps[1]
        for k, a in amount.items():
            u = used[k] = used.get(k, 0.0) + sign * a
            free[k] = cap.get(k, 0.0) + -1.0 * u

    def _count(self, state: ClusterState, a: KindAlloc, sign: int) -> None:
        amount = a.amount
        key = (a.group, a.consumer)
        self.dom.pop(key, None)
        self._on_host(state, a.host, amount, sign)
        add_into(self.use.setdefault(key, {}), amount, sign)
        if a.source == OWN:
            add_into(self.own_use.setdefault((a.group, a.consumer), {}), amount, sign)
        if a.reclaim is not None:
            add_into(self.incoming.setdefault((a.group, a.reclaim.beneficiary), {}), amount, sign)

    def _drop(self, state: ClusterState, a: KindAlloc) -> None:
        self._count(state, a, -1)
        del self.allocs[a.id]
        del self.on_host[a.host][a.id]
        self.marked.pop(a.id, None)
        kr = self.requests.get(a.request)
        if kr is not None:
            kr.allocs.pop(a.id, None)
            kr.held -= a.slots
            self._track(kr)
        row = self._gpu_row(state, a.host) if a.host in state.hosts else []
        for i, m in a.gpus:
            if i < len(row):
                row[i] += m
        self._changed(a.id)
        self._keep_in_use(state, a.request, a.host, a.slots, a.need)
        self._refence(state, a.host)
        self._host_changed(state, a.host)

    def _shrink(self, state: ClusterState, a: KindAlloc, slots: int) -> None:
        """Give back ``slots`` of ``a`` (its last devices first); the rest keeps its id."""
        if slots >= a.slots:
            self._drop(state, a)
            return
        self._count(state, a, -1)
        keep = len(a.gpus) // a.slots * (a.slots - slots)
        row = self._gpu_row(state, a.host)
        for i, m in a.gpus[keep:]:
            if i < len(row):
                row[i] += m
        a.gpus = a.gpus[:keep]
        a.slots -= slots
        kr = self.requests.get(a.request)
        if kr is not None:
            kr.held -= slots
            self._track(kr)
        self._count(state, a, +1)
        self._changed(a.id)
        self._keep_in_use(state, a.request, a.host, slots, a.need)
        self._refence(state, a.host)
        self._host_changed(state, a.host)

    def _refence(self, state: ClusterState, host: str) -> None:
        """Keep the part of ``host``'s slots that vector work holds off the slot books. Within
        a cycle, once per host at its end: nothing in this book reads that fence (``free_on``
        counts slot work without it)."""
        if self._deferred is not None:
            self._deferred.add(host)
            return
        if self.touched is not None:
            self.touched.add(host)
        h = state.hosts.get(host)
        if h is None:  # no longer in the plan
            return
        if h.state is HostState.DOWN or h.host.slots <= 0:
            return
        used = self.host_used.get(host)
        frac = 0.0
        if used:
            for k, total in h.host.resources:
                if k in SLOT_KINDS and total > EPS:
                    frac = max(frac, used.get(k, 0.0) / total)
        have = state.fences.get((FENCE, host), 0)
        want = min(h.host.slots, max(0, math.ceil(frac * h.host.slots - 1e-6)))
        want = min(want, have + max(0, h.free))
        if want > have:
            state.fence(FENCE, host, want - have)
        elif want < have:
            state.unfence(FENCE, host, have - want)

    # -- the live service -------------------------------------------------------------------
    def _changed(self, aid: int) -> None:
        if self.changed is not None:
            self.changed.add(aid)

    def held_on(self, rid: str, host: str) -> int:
        return sum(a.slots for a in self.on_host.get(host, {}).values() if a.request == rid)

    def _keep_in_use(self, state: ClusterState, rid: str, host: str, slots: int, need: Vector) -> None:
        """Of ``slots`` just taken from ``rid`` on ``host``, those its processes still use stay
        off the host (fenced) until ``set_in_use`` says they are gone, as the slot books do."""
        used = self.in_use.get((rid, host), 0) if self.in_use else 0
        if not used or host not in state.hosts:
            return
        have = self.fenced.get((rid, host), (0, need))[0]
        more = min(slots, max(0, used - self.held_on(rid, host) - have))
        if more:
            self.fence(state, rid, host, more, need)

    def fence(self, state: ClusterState, rid: str, host: str, slots: int, need: Vector) -> None:
        """Keep ``slots`` slots of ``need`` each off ``host`` for ``rid``'s processes (and at a restart)."""
        have = self.fenced.get((rid, host), (0, need))[0]
        self.fenced[(rid, host)] = (have + slots, dict(need))
        self._on_host(state, host, scaled(need, slots), +1)
        self._refence(state, host)
        self._host_changed(state, host)

    def set_in_use(self, state: ClusterState, rid: str, host: str, slots: int) -> int:
        """Processes of ``rid`` now use ``slots`` on ``host``; what was fenced for it that no
        process uses any more is free again. Returns the slots freed."""
        key = (rid, host)
        if slots:
            self.in_use[key] = slots
        else:
            self.in_use.pop(key, None)
        got = self.fenced.get(key)
        if got is None:
            return 0
        have, need = got
        keep = min(have, max(0, slots - self.held_on(rid, host)))
        if keep == have:
            return 0
        if keep:
            self.fenced[key] = (keep, need)
        else:
            del self.fenced[key]
        if host in state.hosts:
            self._on_host(state, host, scaled(need, have - keep), -1)
            self._refence(state, host)
            self._host_changed(state, host)
        return have - keep

    def release_on(self, state: ClusterState, rid: str, hosts: set[str], counts: dict[str, int]) -> int:
        """What ``rid`` holds on ``hosts``, or ``counts[host]`` slots of it there, given back
        (those being reclaimed first, then the newest); its max stays. Returns the slots."""
        kr = self.requests[rid]
        counts = dict(counts)
        names = set(hosts) | set(counts)
        given = 0
        for a in sorted((a for a in kr.allocs.values() if a.host in names), key=lambda a: (a.reclaim is None, -a.id)):
            want = counts.get(a.host, a.slots)
            if want <= 0:
                continue
            take = min(want, a.slots)
            self._shrink(state, a, take)
            if a.host in counts:
                counts[a.host] -= take
            given += take
        return given

    def respec(self, rid: str, spec: Request) -> None:
        """``rid`` with a new spec of the same needs (a requirement that now blocks hosts)."""
        kr = self.requests.pop(rid)
        self._requests_seen += 1
        self._track(kr)  # out of the lists under its old shape
        kr.spec = spec
        kr.shape = shape_of(spec)
        self.requests[rid] = kr
        self._track(kr)

    def restore(self, state: ClusterState, req: Request,
                held: list[tuple[int, str, str, int, str, PendingReclaim | None]]) -> None:
        """Put back an open request and what it held, as the live service stored it: each
        allocation as (id, group, host, slots, source, pending reclaim or None), ids kept. The
        store keeps no device positions: they are placed again, tightest first (else on the
        devices with the most left: the service names the real devices on the host)."""
        self.submit(state, req)
        kr = self.requests[req.id]
        for aid, group, host, slots, source, reclaim in held:
            row = self._gpu_row(state, host)
            gpus = self._place_gpus(row, kr.gpu, slots)
            if gpus is None:
                k, milli = kr.gpu
                left, gpus = list(row), []
                for _ in range(slots):
                    for i in sorted(range(len(left)), key=lambda i: (-left[i], i))[:k]:
                        left[i] -= milli
                        gpus.append((i, milli))
            a = self._add(state, kr, group, host, slots, gpus, source, aid=aid)
            if reclaim is not None:
                a.reclaim = reclaim
                self.marked[a.id] = a
                add_into(self.incoming.setdefault((a.group, reclaim.beneficiary), {}), a.amount)

    def _hosts_again(self, state: ClusterState) -> None:
        """After a new plan: the books of hosts no longer there go; a host whose GPUs changed
        gets its devices' rows again (what is held there taken off)."""
        self.gpu_free = {h: r for h, r in self.gpu_free.items() if h in state.hosts}
        for host, row in list(self.gpu_free.items()):
            n = int(dict(state.hosts[host].host.resources).get(GPUS, 0.0) + EPS)
            if n != len(row):
                del self.gpu_free[host]
                row = self._gpu_row(state, host)
                for a in self.on_host.get(host, {}).values():
                    for i, m in a.gpus:
                        if i < n:
                            row[i] -= m
        for key in [k for k in self.fenced if k[1] not in state.hosts]:
            del self.fenced[key]
        for key in [k for k in self.in_use if k[1] not in state.hosts]:
            del self.in_use[key]
        for host in [h for h in self.host_used if h not in state.hosts]:
            del self.host_used[host]

    # -- the world ------------------------------------------------------------------------
    def host_down(self, state: ClusterState, host: str) -> list[Removal]:
        lost = []
        self.forget_places()
        for a in list(self.on_host.get(host, {}).values()):
            lost.append(Removal(a.request, a.consumer, a.group, a.host, a.slots, "lost: host down"))
            self._drop(state, a)
        return lost

    def after_plan(self, state: ClusterState) -> list[Removal]:
        """What the new plan in ``state`` cannot hold: requests of consumers gone or no
        longer leaves, allocations in groups or on hosts no longer there."""
        gone: list[Removal] = []
        self.forget_places()
        self._requests_seen += 1
        for rid, kr in list(self.requests.items()):
            c = state.consumers.get(kr.spec.consumer)
            if c is None or not c.is_leaf:
                del self.requests[rid]
                self._track(kr)
                for a in list(kr.allocs.values()):
                    gone.append(Removal(a.request, a.consumer, a.group, a.host, a.slots, "plan changed"))
                    self._drop(state, a)
                continue
            del self.requests[rid]
            self._track(kr)  # out of the lists under its old groups
            self.requests[rid] = kr
            kr.groups = state.groups_of(kr.spec)
            self._track(kr)
        for a in list(self.allocs.values()):
            g = state.groups.get(a.group)
            if g is None or a.host not in g.rank or a.group not in state.consumers[a.consumer].groups:
                gone.append(Removal(a.request, a.consumer, a.group, a.host, a.slots, "plan changed"))
                self._drop(state, a)
        for host in {a.host for a in self.allocs.values()} | {host for _, host in self.fenced}:
            self._refence(state, host)
        self._hosts_again(state)
        return gone

    # -- the cycle ------------------------------------------------------------------------
    def cycle(self, state: ClusterState, now: float, out: Decisions) -> bool:
        """Decide for the vector requests, adding to ``out``; True when anything changed."""
        if not (self.wanting or self.marked):
            return False
        self._deferred = set()
        self._reopen = set()
        # a cold cycle makes an allocation and a grant for each instance, and no reference
        # cycles among them: the collector, triggered by the count alone, would walk the
        # whole state again and again (a fifth of a cold cycle). Paused, as the slot cycle is.
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            return self._cycle(state, now, out)
        finally:
            self._open_again(state)
            touched, self._deferred, self._reopen = self._deferred, None, None
            for host in sorted(touched):
                self._refence(state, host)
            if paused:
                gc.enable()

    def _cycle(self, state: ClusterState, now: float, out: Decisions) -> bool:
        before = len(out.grants) + len(out.reclaims) + len(out.removals) + len(out.cancelled)
        for a in [a for a in self.marked.values() if a.reclaim.deadline <= now]:  # type: ignore[union-attr]
            out.removals.append(Removal(a.request, a.consumer, a.group, a.host, a.slots, a.reclaim.reason))
            self._drop(state, a)
        self._cancel_unneeded(state, out)
        if state.allocs or self._slot_work:  # slot work moves room on shared hosts without telling this book
            self._free.clear()
            self.packers.clear()
            self._open = None
            self.free_sum.clear()
        self._slot_work = bool(state.allocs)
        given: dict[str, list[KindAlloc]] = {}
        for group in state.group_names:
            if self.wanting_by.get(group):
                GroupCycle(self, state, group, now, out, given).run(self.wanting_by[group])
        back: dict[str, set[tuple[str, int, str]]] = {}  # request -> (host, slots, group) given back
        for rid, allocs in given.items():
            kr = self.requests[rid]
            if kr.held < kr.spec.min:
                for a in allocs:
                    self._drop(state, a)
                back[rid] = {(a.host, a.slots, a.group) for a in allocs}
        if back:  # their grants out of the decisions, in one pass over them
            out.grants[:] = [g for g in out.grants if g.request not in back
                             or (g.host, g.slots, g.group) not in back[g.request]]
        return len(out.grants) + len(out.reclaims) + len(out.removals) + len(out.cancelled) != before

    def _cancel_unneeded(self, state: ClusterState, out: Decisions) -> None:
        if not self.marked:
            return
        for a in list(self.marked.values()):
            assert a.reclaim is not None
            key = (a.group, a.reclaim.beneficiary)
            if key[1] not in self.wanting_by.get(a.group, {}):
                r = a.reclaim
                out.cancelled.append(Reclaim(a.request, a.consumer, a.group, a.host, a.slots,
                                             r.deadline, r.beneficiary, r.reason))
                add_into(self.incoming.setdefault(key, {}), a.amount, -1.0)
                a.reclaim = None
                del self.marked[a.id]
                self._changed(a.id)

    def next_deadline(self) -> float | None:
        return min((a.reclaim.deadline for a in self.marked.values()), default=None)  # type: ignore[union-attr]

    # -- what people look at ----------------------------------------------------------------
    def requests_held(self) -> dict[str, dict]:
        """Request -> what it holds: slots in all, slots per host, and what each slot needs."""
        out: dict[str, dict] = {}
        for rid, kr in self.requests.items():
            hosts: dict[str, int] = {}
            for a in kr.allocs.values():
                hosts[a.host] = hosts.get(a.host, 0) + a.slots
            out[rid] = {"held": kr.held, "hosts": hosts, "resources": rounded(kr.need)}
        return out

    def reclaiming(self) -> list[dict]:
        return [{"request": a.request, "host": a.host, "slots": a.slots, "deadline": a.reclaim.deadline,
                 "for": a.reclaim.beneficiary}
                for a in sorted(self.allocs.values(), key=lambda a: a.id) if a.reclaim is not None]

    def report(self, state: ClusterState) -> dict:
        """Per group: the total of each kind, and per consumer (leaves and their ancestors)
        what it holds of each kind and its dominant share."""
        weights = dict(state.plan.policy.weights)
        out: dict = {}
        for g in state.group_names:
            totals = group_totals(state, g)
            leaves = {leaf: used for (grp, leaf), used in self.use.items() if grp == g and any(
                v > EPS for v in used.values())}
            if not leaves and not any(kr.spec.consumer and g in kr.groups for kr in self.requests.values()):
                continue
            held: dict[str, Vector] = {}
            for leaf, used in leaves.items():
                for who in (leaf, *state.ancestors.get(leaf, ())):
                    add_into(held.setdefault(who, {}), used)
            out[g] = {
                "totals": rounded(totals),
                "consumers": {c: {"used": rounded(v), "dominant_share": round(dominant(v, totals, weights), 6)}
                              for c, v in sorted(held.items())},
            }
        return out


def group_totals(state: ClusterState, group: str) -> Vector:
    """What the group's hosts have of each kind (hosts down left out)."""
    tot: Vector = {}
    for n in state.groups[group].rank:
        h = state.hosts[n]
        if h.state is not HostState.DOWN:
            add_into(tot, dict(h.host.resources))
    return tot


class GroupCycle:
    """One group in one cycle: ownership first, then progressive filling."""

    def __init__(self, book: KindBook, state: ClusterState, group: str, now: float, out: Decisions,
                 given: dict[str, list[KindAlloc]]) -> None:
        self.book = book
        self.state = state
        self.group = group
        self.now = now
        self.out = out
        self.given = given
        self.consumers = state.consumers
        self.weights = dict(state.plan.policy.weights)
        self.hosts = [n for n in state.groups[group].rank]  # the group's order
        self.packing = next((g.packing for g in state.plan.groups if g.name == group), "first")
        self.ratios: dict[str, float] = {}  # leaf -> its share_ratio in the group
        self._every: list[str] | None = None  # the hosts best fit and FGD may use for any request

    def run(self, wanting: dict[str, dict[int, KindRequest]]) -> None:
        """``wanting``: leaf -> its requests below their max that may use the group, oldest first."""
        tc = self.book.totals
        if self.group not in tc:
            tc[self.group] = group_totals(self.state, self.group)
        self.totals = tc[self.group]
        if not self.totals:
            return
        self.owners, maxed = self.book.plan_facts(self.state)
        self.maxed = self.group in maxed
        self.failed: set[int] = set()  # shapes no open host fits this cycle
        self.from_pos: dict[int, int] = {}  # shape -> the open hosts before it did not fit it
        if self.owners.get(self.group):
            self._own(wanting)
        self._shared(wanting)

    def settings(self, leaf: str):
        return self.consumers[leaf].groups[self.group]

    def share(self, leaf: str) -> float:
        key = (self.group, leaf)
        d = self.book.dom.get(key)
        if d is None:
            ratio = self.ratios.get(leaf)
            if ratio is None:
                ratio = self.ratios[leaf] = self.settings(leaf).share_ratio
            d = dominant(self.book.use.get(key, {}), self.totals, self.weights)
            d = self.book.dom[key] = d / ratio if ratio > 0 else math.inf
        return d

    # -- placement ------------------------------------------------------------------------
    def _candidates(self, kr: KindRequest) -> Iterator[str]:
        hosts = self.state.hosts
        req = kr.spec.requirement
        for n in self.hosts:
            h = hosts[n]
            if h.takes_work and h.host.resources and (req is None or req(h.host)):
                yield n

    def _place(self, kr: KindRequest, slots: int, tried: bool = False) -> tuple[str, list[tuple[int, int]]] | None:
        """Where ``slots`` slots of ``kr`` go, and on which GPUs; None: nowhere. ``tried``: the
        host where its shape last went was found full (first fit goes on from the next one)."""
        if self.packing != "first" and set(kr.need) <= {"cores", "memory", GPUS}:
            return self._pack(kr, slots)
        if kr.shape is None or slots != kr.spec.order:
            return self._first_of(kr, slots, list(self._candidates(kr)))
        # first fit among the open hosts, from where this shape last stopped in this cycle (room
        # only shrinks within a cycle's phases)
        key = kr.shape
        if key in self.failed:
            return None
        hosts, book, state = self.hosts, self.book, self.state
        start = self.from_pos.get(key)
        if tried:
            start += 1  # type: ignore[operator]
        elif start is not None:
            # most often the host where this shape last went still has room: it is the first open
            # host from there (it was open then, and a host that is no longer open fits nothing)
            gpus = book._fits_on(state, kr, hosts[start], slots)
            if gpus is not None:
                return hosts[start], gpus
        # the next few hosts in order, read directly: the first that takes work and fits is the
        # first open host that fits (a host that fits an instance fits the least any request
        # asks), without bringing the open hosts up to date for a host or two
        start = start or 0
        ledgers = state.hosts
        for i in range(start, min(start + NEAR, len(hosts))):
            n = hosts[i]
            h = ledgers[n]
            if h.takes_work and h.host.resources:
                gpus = book._fits_on(state, kr, n, slots)
                if gpus is not None:
                    self.from_pos[key] = i
                    return n, gpus
        for i in book.open_hosts(state, self.group, hosts).irange(start + NEAR):
            n = hosts[i]
            gpus = book._fits_on(state, kr, n, slots)
            if gpus is not None:
                self.from_pos[key] = i
                return n, gpus
        self.failed.add(key)
        return None

    def _pack(self, kr: KindRequest, slots: int) -> tuple[str, list[tuple[int, int]]] | None:
        """engine/gpupack.py's best fit or FGD, over the hosts that may take the request, on
        their free CPU (thousandths), memory (MiB) and GPUs per device."""
        book, state = self.book, self.state
        every = kr.spec.requirement is None  # else the hosts its requirement lets it use
        names = self._all_candidates() if every else list(self._candidates(kr))
        if not names:
            return None
        k, milli = kr.gpu
        if k and milli < MILLI and slots > 1:
            return self._first_of(kr, slots, names)
        task = gpupack.Task(int(kr.need.get("cores", 0.0) * slots * 1000 + 1e-6),
                            int(kr.need.get("memory", 0.0) * slots * 1024 + 1e-6),
                            k * slots if milli >= MILLI else k, milli if k else 0)
        mix = book.typical_tasks(self.group) if self.packing == "fgd" else None
        if every:  # the group's packer, kept from one placement to the next
            packer = book.packers.get(self.group)
            if packer is None or packer.names != names:
                packer = book.packers[self.group] = Packer(book, state, names)
        else:
            packer = Packer(book, state, names)
        packer.sync(book, state, book._requests_seen, mix)
        cluster, frag = packer.cluster, packer.frag
        if self.packing == "fgd" and frag is None:  # no open request in the group: this one's type
            frag = gpupack.Fragmentation(cluster, gpupack.typical_mix([task]))
        where = gpupack.choose(cluster, task, self.packing, frag=frag)
        if where is None:
            return None
        n = names[where.node]
        gpus = [(g, milli) for g in where.gpus]
        if not fits(scaled(kr.need, slots), book.free_on(state, n)):
            return self._first_of(kr, slots, names)
        return n, gpus

    def _all_candidates(self) -> list[str]:
        """The group's hosts that take work and have resources, in its order (once a cycle)."""
        got = self._every
        if got is None:
            hosts = self.state.hosts
            got = self._every = [n for n in self.hosts if hosts[n].takes_work and hosts[n].host.resources]
        return got

    def _first_of(self, kr: KindRequest, slots: int, names: list[str]) -> tuple[str, list[tuple[int, int]]] | None:
        for n in names:
            gpus = self.book._fits_on(self.state, kr, n, slots)
            if gpus is not None:
                return n, gpus
        return None

    def _grant(self, kr: KindRequest, host: str, gpus: list[tuple[int, int]], slots: int, source: str) -> None:
        a = self.book._add(self.state, kr, self.group, host, slots, gpus, source)  # and _shared's own
        # what a request below its min got this cycle, given back at its end if it stays below:
        # what comes once it is at its min stays (what it holds only grows within a cycle)
        if kr.held < kr.spec.min:
            self.given.setdefault(kr.spec.id, []).append(a)
        self.out.grants.append(Grant(kr.spec.id, kr.spec.consumer, self.group, host, slots, source))

    # -- 2. own ----------------------------------------------------------------------------
    def _own(self, wanting: dict[str, list[KindRequest]]) -> None:
        owners = [leaf for leaf in self.owners.get(self.group, ()) if leaf in wanting]
        for leaf in sorted(owners, key=lambda x: (self.share(x), self.consumers[x].index)):
            owned = vector(self.settings(leaf).owned_kinds)
            key = (self.group, leaf)
            covered = dict(self.book.incoming.get(key, {}))  # on its way to the leaf already
            promised: Vector = {}  # what the instances waiting for those reclaims need
            done: set[int] = set()  # shapes that got all they could (what they need only grows)
            for kr in list(wanting.get(leaf, {}).values()):
                if kr.shape in done:
                    continue
                left = kr.unmet
                while left >= kr.spec.order:
                    n = kr.spec.order
                    need = kr.inst
                    if not any(need.get(k, 0.0) > EPS for k in owned):
                        break  # needs none of what it owns: the shared phase serves it
                    have = dict(self.book.own_use.get(key, {}))
                    add_into(have, promised)
                    if not within(have, need, owned) or not self._max_ok(leaf, need):
                        if kr.shape is not None:
                            done.add(kr.shape)
                        break
                    spot = self._place(kr, n)
                    if spot is None:
                        # reclaims on their way count by the kinds it owns (the rest is there or comes with them)
                        mine = {k: a for k, a in need.items() if k in owned}
                        if not fits(mine, covered):
                            freed = self._reclaim_for(leaf, kr, n)
                            if freed is None:
                                if kr.shape is not None:
                                    done.add(kr.shape)
                                break
                            add_into(covered, freed)
                        add_into(covered, mine, -1.0)
                        add_into(promised, need)
                    else:
                        self._grant(kr, spot[0], spot[1], n, OWN)
                    left -= n

    def _reclaim_for(self, leaf: str, kr: KindRequest, slots: int) -> Vector | None:
        """Mark, on the first host where it frees enough, what others hold beyond what they own
        (the highest dominant share first, then the newest) for one instance of ``kr``."""
        need = scaled(kr.need, slots)
        book, state = self.book, self.state
        for n in self._candidates(kr):
            victims = sorted((a for a in book.on_host.get(n, {}).values()
                              if a.source != OWN and a.reclaim is None and a.consumer != leaf),
                             key=lambda a: (-self.share(a.consumer), -a.id))
            if not victims:
                continue
            free = dict(book.free_on(state, n))  # a copy: what the book keeps for the host stays
            row = list(book._gpu_row(state, n))
            chosen = []
            for a in victims:
                chosen.append(a)
                add_into(free, a.amount)
                for i, m in a.gpus:
                    row[i] += m
                if fits(need, free) and book._place_gpus(row, kr.gpu, slots) is not None:
                    for v in chosen:
                        grace = self.consumers[v.consumer].groups[v.group].grace
                        v.reclaim = PendingReclaim(self.now + grace, leaf, "ownership")
                        book._changed(v.id)
                        book.marked[v.id] = v
                        add_into(book.incoming.setdefault((self.group, leaf), {}), v.amount)
                        self.out.reclaims.append(Reclaim(v.request, v.consumer, v.group, v.host, v.slots,
                                                         v.reclaim.deadline, leaf, "ownership"))
                    return scaled_sum(chosen)
        return None

    def _max_ok(self, leaf: str, need: Vector) -> bool:
        """Within the per-kind max of the leaf and of each ancestor that sets one."""
        if not self.maxed:
            return True
        for who in (leaf, *self.state.ancestors.get(leaf, ())):
            gs = self.consumers[who].groups.get(self.group)
            if gs is None or not gs.max_kinds:
                continue
            used: Vector = {}
            for (g, c), v in self.book.use.items():
                if g == self.group and (c == who or who in self.state.ancestors.get(c, ())):
                    add_into(used, v)
            if not within(used, need, vector(gs.max_kinds)):
                return False
        return True

    # -- 3. shared: progressive filling ----------------------------------------------------
    def _kept(self) -> tuple[Vector, dict[str, Vector]]:
        """What owners keep idle for themselves, per kind (they do not lend it): in all, and
        per owner."""
        every: Vector = {}
        per: dict[str, Vector] = {}
        for path in self.owners.get(self.group, ()):
            c = self.consumers[path]
            gs = c.groups[self.group]
            lent = set(gs.lend_kinds) if gs.lend and gs.lend_kinds is not None else None
            have = self.book.own_use.get((self.group, c.path), {})
            mine = {}
            for k, a in gs.owned_kinds:
                if gs.lend and (lent is None or k in lent):
                    continue
                idle = a - have.get(k, 0.0)
                if idle > EPS:
                    mine[k] = idle
            if mine:
                per[c.path] = mine
                add_into(every, mine)
        return every, per

    def _shared(self, wanting: dict[str, dict[int, KindRequest]]) -> None:
        kept, per = self._kept()
        # what the group's hosts have free: the book's own sum, which each grant takes from
        free = self.book.group_free(self.state, self.group, self.hosts) if kept else {}
        consumers = self.consumers
        heap = [(self.share(leaf), consumers[leaf].index, leaf) for leaf in wanting]
        heapq.heapify(heap)
        # per leaf, its requests as they were and how far it got: a request passed over here
        # (its max reached, or its instance fitting nowhere the leaf may take) is not looked at
        # again in this phase, as room only shrinks and use only grows within it
        # leaf -> [its requests, the first not passed over, (group, leaf), the shapes over its
        # limits or beyond what it may take]
        lists: dict[str, list] = {}
        failed = self.failed
        shapes = self.book.shapes_in.get(self.group, {})
        owners = set(self.owners.get(self.group, ()))
        # shapes that fit nowhere, or not beside what owners keep: the same for every leaf that
        # keeps nothing itself
        dead: set[int] = set()
        # per leaf, what the owners other than itself keep idle, of each kind the owners keep
        others: dict[str, Vector] = {}

        def others_of(leaf: str) -> Vector:
            mine = per.get(leaf, {})
            got = others[leaf] = {k: a - mine.get(k, 0.0) for k, a in kept.items()}
            return got

        any_shape = None in shapes  # a request with a requirement: its own hosts, never given up
        maxed, place, share = self.maxed, self._place, self.share
        quick, from_pos = self.packing == "first", self.from_pos
        heappop, heapreplace = heapq.heappop, heapq.heapreplace
        book, state, group, hosts = self.book, self.state, self.group, self.hosts
        add, book_free, given, grants = book._add, book._free, self.given, self.out.grants
        place_gpus, gpu_row = book._place_gpus, book._gpu_row
        ratios, use, dom, weights = self.ratios, book.use, book.dom, self.weights
        divisors = {k: t for k, t in self.totals.items() if t > EPS}
        # grants to come for which any instance surely fits beside what owners keep idle (the
        # check above would pass for every leaf): ``free`` less the most one takes each time
        sure = surely(free, kept, book.most) if kept else 0
        while heap:
            if not any_shape and len(failed) >= len(shapes):
                break  # no shape that anyone wants fits anywhere: nobody can get anything more
            # the leaf with the lowest share: taken off the heap, or put back with its new share
            # in one step (heapreplace) when it got an instance
            _, index, leaf = heap[0]
            if dead and not any_shape and leaf not in owners and len(dead | failed) >= len(shapes):
                heappop(heap)
                continue
            mine = lists.get(leaf)
            if mine is None:
                got = wanting.get(leaf)
                mine = lists[leaf] = [list(got.values()) if got else [], 0, (group, leaf), set()]
            reqs, i, key, blocked = mine
            served = False
            while i < len(reqs):
                kr = reqs[i]
                spec = kr.spec
                # slots of its next instance: order, or 0 when that would pass its max
                n = spec.order if spec.max - kr.held >= spec.order else 0
                shape = kr.shape
                if not n or shape in failed or shape in blocked or (shape in dead and leaf not in owners):
                    i += 1
                    continue
                need = kr.inst
                if maxed and not self._max_ok(leaf, need):
                    blocked.add(shape)
                    i += 1
                    continue
                if kept and not sure:
                    # ``need`` fits in ``free`` less what the owners other than the leaf keep idle
                    keep = (others.get(leaf) or others_of(leaf)).get
                    short = False
                    for k, x in need.items():
                        if x > EPS and x > free.get(k, 0.0) - keep(k, 0.0) + EPS:
                            short = True
                            break
                    if short:
                        blocked.add(shape)
                        if leaf not in per and shape is not None:
                            dead.add(shape)
                        i += 1
                        continue
                # most often: where its shape last went, which still has room
                host = hosts[from_pos[shape]] if quick and shape in from_pos else None
                tried = False
                if host is not None:
                    room = book_free.get(host)  # free_on, while no slot work is there
                    if room is None:
                        host = None
                    else:
                        for k, x in need.items():  # fits(need, room)
                            if x > 0 and not x <= room.get(k, 0.0) + EPS:
                                host = None
                                break
                        else:
                            if kr.gpu[0]:
                                gpus = place_gpus(gpu_row(state, host), kr.gpu, n)
                                if gpus is None:
                                    host = None
                            else:
                                gpus = []
                        tried = host is None  # it does not fit there: first fit goes on from the next
                if host is None:
                    spot = place(kr, n, tried)
                    if spot is None:
                        if shape is None:
                            blocked.add(shape)
                        i += 1
                        continue
                    host, gpus = spot
                a = add(state, kr, group, host, n, gpus, SHARED, None, key)  # _grant, in line
                if kr.held < spec.min:
                    given.setdefault(spec.id, []).append(a)
                # Grant(...), made as its __new__ makes it, without calling it
                grants.append(new_tuple(Grant, (spec.id, leaf, group, host, n, SHARED)))
                if kept:
                    sure = sure - 1 if sure > 0 else surely(free, kept, book.most)
                served = True
                break
            mine[1] = i
            if served:
                # share(leaf), worked out here: what the leaf holds changed, so it is not in ``dom``
                ratio = ratios.get(leaf)
                if ratio is None or weights:
                    d = share(leaf)
                else:  # kinds.dominant with no weights: weight 1.0 x used / total is used / total
                    best = None
                    for k, x in use[key].items():
                        t = divisors.get(k)
                        if t is not None:
                            v = x / t
                            if best is None or v > best:
                                best = v
                    d = 0.0 if best is None else best
                    d = dom[key] = d / ratio if ratio > 0 else math.inf
                heapreplace(heap, (d, index, leaf))
            else:
                heappop(heap)


def surely(free: Vector, kept: Vector, most: Vector) -> int:
    """How many more instances, each taking at most ``most`` of each kind from ``free``, leave
    room for the next one beside ``kept`` (what owners keep idle, more than any leaf sees kept
    by the others): 0 when not sure. A margin of a millionth of the amounts, far more than
    the rounding of the sums, makes it an underestimate."""
    n = None
    for k, b in most.items():
        if b > EPS:
            f, c = free.get(k, 0.0), kept.get(k, 0.0)
            m = math.floor((f - c - 1e-6 * (abs(f) + abs(c) + 1.0)) / b) - 1
            if n is None or m < n:
                n = m
    return max(0, n or 0)


def scaled_sum(allocs: list[KindAlloc]) -> Vector:
    out: Vector = {}
    for a in allocs:
        add_into(out, a.amount)
    return out


def allocation_rows(book: KindBook) -> list[dict]:
    """Every vector allocation, for a report: its request, consumer, group, host, slots, what
    it holds of each kind and its GPU devices."""
    return [{"request": a.request, "consumer": a.consumer, "group": a.group, "host": a.host,
             "slots": a.slots, "resources": rounded(a.amount), "gpus": sorted({i for i, _ in a.gpus})}
            for a in sorted(book.allocs.values(), key=lambda a: a.id)]


__all__ = ["FENCE", "KindBook", "allocation_rows", "gpu_shape", "group_totals"]
