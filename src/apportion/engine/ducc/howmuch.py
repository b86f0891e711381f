"""How Much for FAIR_SHARE work (DUCC's RM documentation): how many processes each job deserves now.

apportion's reading, on the engine's one model (apportion's reading, docs/policies.md section 16):

- a class is a consumer (weight = share ratio, priority = sibling priority), its
  users are children of weight 1 and each user's jobs are their children of weight 1;
- fairness is counted in **quanta**: the free quanta of the nodepool are water-filled
  down class -> user -> job (``shares.waterfill``, the same code that divides EGO
  share pools), each job capped by what it can use now (its cap in processes times
  its order), so a small-order job is never starved by a large-order one;
- each job's quanta become whole processes, which must fit the machines: jobs are
  fitted largest order first, each process on the smallest free space that holds it.
  Quanta are not places: fragmented space holds fewer processes of an order than its
  quanta suggest (four order-3 machines: 12 quanta, four order-2 places). When the
  jobs of one order were given more processes than there are places for that order,
  the places are shared among them by the same water-fill (each at most what it was
  given), so the first job in line does not take them all (DUCC's RM documentation: apportionQShares
  works order by order on nSharesByOrder for this reason);
- the fractions of a process each job was owed then go by largest remainder: the job
  closest to having earned one more process (owed quanta / order) gets it first,
  as long as it fits and the job is owed something;
- what is still left (space no process fitted, jobs at their caps) is handed out again
  in up to ``BONUS_ROUNDS`` further water-fill rounds to jobs that still want processes
  that fit ("bonus"); the last quanta go one process at a time to the job furthest
  below its weighted share. A job's **pure fair share** is what the first round gave it;
- priorities: a better class priority (a smaller number) is served first and takes all
  it can use; each worse priority gets what is left.

The free space is a :class:`Space` per nodepool (its own machines only, counted by
free size); a fair-share class sees its nodepool's space first and then its
subpools' (a *view*, a list of spaces in search order), as What Of will search them.

Deterministic throughout: classes by weight (heavier first) then name, users by name,
jobs by submission then id.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import floor

from gmpy2 import mpq

from apportion.engine.ducc.vmachines import OrderTables
from apportion.engine.shares import waterfill
from apportion.engine.sharetree import ShareTree

ROOT = "/"
BONUS_ROUNDS = 3  # water-fill rounds for leftovers before the one-by-one hand-out


@dataclass(frozen=True, slots=True)
class FairClass:
    name: str
    weight: int = 1
    priority: int = 10


@dataclass(frozen=True, slots=True)
class JobAsk:
    """A job as How Much sees it: ``cap`` processes of ``order`` quanta wanted now
    (its caps are already applied: remaining work, max processes, initialization
    cap, doubling, prediction)."""

    id: str
    user: str
    cls: str
    order: int
    cap: int
    submitted: float = 0.0


@dataclass(slots=True)
class HowMuch:
    counts: dict[str, int] = field(default_factory=dict)  # job -> processes
    pure_fair_share: dict[str, int] = field(default_factory=dict)  # job -> processes, before bonus
    quanta_left: int = 0
    free: OrderTables | None = None  # the free space these counts leave, as How Much laid them out


class Space:
    """Free space of one nodepool's own machines, counted by free size (the machine tables of
    DUCC's RM documentation): ``whole[f]`` free machines of order f, ``part[f]`` partly used
    machines with f quanta free. Placement is best fit: the smallest free space that
    holds a process, a partly used machine before a whole one of the same size."""

    __slots__ = ("whole", "part", "top", "quanta")

    def __init__(self, max_order: int) -> None:
        self.whole = [0] * (max_order + 1)
        self.part = [0] * (max_order + 1)
        self.top = 0  # no free space is larger than this
        self.quanta = 0

    @classmethod
    def of_tables(cls, t: OrderTables) -> "Space":
        s = cls(t.max_order)
        s.whole[:] = t.machines
        s.part[:] = t.virtual
        s.quanta = sum(f * (t.machines[f] + t.virtual[f]) for f in range(len(t.machines)))
        s.top = t.max_order
        s._settle()
        return s

    def tables(self) -> OrderTables:
        t = OrderTables(max(1, len(self.whole) - 1))
        t.machines[:len(self.whole)] = self.whole
        t.virtual[:len(self.part)] = self.part
        return t

    def add(self, order: int, free: int) -> None:
        """A machine of ``order`` quanta with ``free`` of them free."""
        if free <= 0:
            return
        if free >= len(self.whole):
            self._grow(free)
        if free == order:
            self.whole[free] += 1
        else:
            self.part[free] += 1
        self.quanta += free
        if free > self.top:
            self.top = free

    def add_part(self, free: int) -> None:
        """Space that only a process of exactly ``free`` quanta should count on (never a
        whole machine): what a fair-share process keeps on a machine closed to new work."""
        if free <= 0:
            return
        if free >= len(self.whole):
            self._grow(free)
        self.part[free] += 1
        self.quanta += free
        if free > self.top:
            self.top = free

    def fits(self, order: int) -> bool:
        return self.top >= order

    def place(self, order: int, n: int) -> int:
        """Place up to ``n`` processes of ``order``, each best fit; returns how many."""
        placed = 0
        f = order
        while placed < n and f <= self.top:
            per = f // order
            for table in (self.part, self.whole):
                while table[f] and placed < n:
                    # best fit fills one space until what is left of it is too small
                    spaces = min(table[f], (n - placed) // per)
                    if spaces:
                        table[f] -= spaces
                        rest = f - per * order
                        if rest:
                            self.part[rest] += spaces
                        placed += spaces * per
                        self.quanta -= spaces * per * order
                    else:
                        take = n - placed
                        table[f] -= 1
                        self.part[f - take * order] += 1
                        placed += take
                        self.quanta -= take * order
            f += 1
        self._settle()
        return placed

    def take_whole(self, order: int, exact: bool) -> int:
        """Take a whole free machine of ``order`` (or, not ``exact``, the smallest of
        at least ``order``); returns its order, 0 when there is none."""
        sizes = [order] if exact else range(order, len(self.whole))
        for f in sizes:
            if f < len(self.whole) and self.whole[f]:
                self.whole[f] -= 1
                self.quanta -= f
                self._settle()
                return f
        return 0

    def _settle(self) -> None:
        t = self.top
        while t > 0 and not (self.whole[t] or self.part[t]):
            t -= 1
        self.top = t

    def _grow(self, size: int) -> None:
        extra = size + 1 - len(self.whole)
        self.whole.extend([0] * extra)
        self.part.extend([0] * extra)


View = Sequence[Space]
"""The spaces a class may use, in search order: its own nodepool's first."""


def view_quanta(view: View) -> int:
    return sum(s.quanta for s in view)


def view_fits(view: View, order: int) -> bool:
    for s in view:
        if s.top >= order:
            return True
    return False


def view_room(view: View, order: int) -> int:
    """How many processes of ``order`` the free space still holds (a larger space split)."""
    room = 0
    for s in view:
        if s.top >= order:
            whole, part = s.whole, s.part
            for f in range(order, s.top + 1):
                c = whole[f] + part[f]
                if c:
                    room += (f // order) * c
    return room


def view_place(view: View, order: int, n: int) -> int:
    placed = 0
    for s in view:
        if placed >= n:
            break
        if s.top >= order:
            placed += s.place(order, n - placed)
    return placed


def how_much(classes: Iterable[FairClass], jobs: Iterable[JobAsk], tables: OrderTables) -> HowMuch:
    """Counts of processes per job for fair-share work on the free space in ``tables``
    (which is not changed)."""
    space = Space.of_tables(tables)
    by_name = {c.name: c for c in classes}
    jobs = [j for j in jobs if j.cap > 0 and j.cls in by_name]
    out = HowMuch()
    for j in jobs:
        out.counts[j.id] = 0
        out.pure_fair_share[j.id] = 0
    for prio in sorted({by_name[j.cls].priority for j in jobs}):
        band = [j for j in jobs if by_name[j.cls].priority == prio]
        fair_share(band, by_name, [space], out)
    out.quanta_left = space.quanta
    out.free = space.tables()
    if out.free.max_order < tables.max_order:
        out.free = _pad(out.free, tables.max_order)
    return out


def fair_share(jobs: Sequence[JobAsk], classes: Mapping[str, FairClass], view: View, out: HowMuch) -> None:
    """One priority band's fair share on ``view``: adds to ``out.counts`` (which must
    hold every job, 0 if new) and ``out.pure_fair_share``."""
    jobs = [j for j in jobs if j.cap > out.counts[j.id]]
    if not jobs:
        return
    tree, index = _tree(jobs, classes)
    fit_order = sorted(jobs, key=lambda j: (-j.order, j.submitted, j.id))
    counts = out.counts
    # the fair round: exact shares of the free quanta, floored to whole processes
    exact = _round(tree, jobs, view, counts)
    if exact is None:
        return
    for jid, placed in _place(tree, index, fit_order, exact, view, counts).items():
        out.pure_fair_share[jid] += placed
    # largest remainder: the process a job is closest to having earned goes first
    heap = []
    for j in jobs:
        owed = exact.get(j.id, 0) - counts[j.id] * j.order
        if owed > 0 and counts[j.id] < j.cap:
            heap.append((-owed / j.order, index[j.id], j))
    heapq.heapify(heap)
    while heap:
        _, i, j = heapq.heappop(heap)
        if not view_fits(view, j.order):
            continue
        view_place(view, j.order, 1)
        counts[j.id] += 1
        owed = exact[j.id] - counts[j.id] * j.order
        if owed > 0 and counts[j.id] < j.cap:
            heapq.heappush(heap, (-owed / j.order, i, j))
    # bonus rounds: what nobody's fair share used (caps, sizes that did not fit)
    for _ in range(BONUS_ROUNDS):
        got = _round(tree, jobs, view, counts)
        if got is None:
            break
        if not _place(tree, index, fit_order, got, view, counts):
            break
    # the last quanta, one process at a time, to the job furthest below its weighted share
    heap = [(counts[j.id] * j.order / _weight(j, classes), index[j.id], j) for j in jobs if j.cap > counts[j.id]]
    heapq.heapify(heap)
    while heap:
        _, i, j = heapq.heappop(heap)
        if not view_fits(view, j.order):
            continue  # space only shrinks: it never will
        view_place(view, j.order, 1)
        counts[j.id] += 1
        if counts[j.id] < j.cap:
            heapq.heappush(heap, (counts[j.id] * j.order / _weight(j, classes), i, j))


def _place(tree: ShareTree, index: Mapping[str, int], fit_order: Sequence[JobAsk], shares: Mapping[str, mpq],
           view: View, counts: dict[str, int]) -> dict[str, int]:
    """Turn each job's quanta in ``shares`` into whole processes (floored, within its
    cap) and place them, largest order first; returns the processes placed per job.

    The quanta were counted over all the free space, but fragmented space holds fewer
    processes of an order than its quanta suggest (four order-3 machines: 12 quanta,
    only four order-2 processes). When the processes the jobs of one order were given
    do not all fit, the places that are left for that order are shared among those
    jobs by the same water-fill (each never above what it was given), not handed to
    the first job in line: the rest of each job's share is owed quanta that no
    process of its order fits now."""
    placed: dict[str, int] = {}
    i, n = 0, len(fit_order)
    while i < n:
        order = fit_order[i].order
        want: dict[str, int] = {}
        total = 0
        while i < n and fit_order[i].order == order:
            j = fit_order[i]
            i += 1
            q = shares.get(j.id)
            if q:
                k = min(int(floor(q / order)), j.cap - counts[j.id])
                if k > 0:
                    want[j.id] = k
                    total += k
        if not want:
            continue
        room = view_room(view, order)
        if room <= 0:
            continue
        if total > room:
            want = _share_room(tree, index, want, room, order)
        for jid, k in want.items():
            if k > 0:
                got = view_place(view, order, k)
                if got:
                    counts[jid] += got
                    placed[jid] = placed.get(jid, 0) + got
    return placed


def _share_room(tree: ShareTree, index: Mapping[str, int], want: Mapping[str, int], room: int,
                order: int) -> dict[str, int]:
    """``room`` processes of ``order`` for jobs that want more in all: the water-fill of
    room x order quanta over them, each capped at what it wants, floored; the places
    the floors leave go by largest remainder (ties in tree order)."""
    fill = waterfill(tree, ROOT, mpq(room * order), _needs(tree, {jid: k * order for jid, k in want.items()}))
    out: dict[str, int] = {}
    rest = []
    left = room
    for jid in want:
        procs = fill.get(jid, 0) / order
        whole = int(floor(procs))
        out[jid] = whole
        left -= whole
        if procs > whole:
            rest.append((-(procs - whole), index[jid], jid))
    rest.sort()
    for _, _, jid in rest[:max(0, left)]:
        out[jid] += 1
    return out


def _round(tree: ShareTree, jobs: Sequence[JobAsk], view: View, counts: Mapping[str, int]) -> dict | None:
    """The exact water-fill of the free quanta over the jobs that still want processes
    that fit; None when there is nothing to give or nobody to give it to."""
    quanta = view_quanta(view)
    if quanta <= 0:
        return None
    fits = {o: view_fits(view, o) for o in {j.order for j in jobs}}
    want = {j.id: (j.cap - counts[j.id]) * j.order for j in jobs if j.cap > counts[j.id] and fits[j.order]}
    if not want:
        return None
    return waterfill(tree, ROOT, mpq(quanta), _needs(tree, want))


def _weight(j: JobAsk, classes: Mapping[str, FairClass]) -> float:
    return classes[j.cls].weight or 1


def _tree(jobs: Sequence[JobAsk], classes: Mapping[str, FairClass]) -> tuple[ShareTree, dict[str, int]]:
    """class -> user -> job, children in the tie order of apportion's reading, docs/policies.md section 16."""
    by_cls: dict[str, dict[str, list[JobAsk]]] = {}
    for j in jobs:
        by_cls.setdefault(j.cls, {}).setdefault(j.user, []).append(j)
    cls_names = sorted(by_cls, key=lambda c: (-classes[c].weight, c))
    children: dict[str, list[str]] = {ROOT: []}
    ratio: dict[str, int] = {ROOT: 1}
    prio: dict[str, int | None] = {ROOT: None}
    order: list[str] = [ROOT]
    for c in cls_names:
        cnode = "/" + c
        children[ROOT].append(cnode)
        ratio[cnode] = max(classes[c].weight, 0)
        prio[cnode] = None  # priorities are separate passes
        order.append(cnode)
        users = by_cls[c]
        kids: list[str] = []
        children[cnode] = kids
        for u in sorted(users):
            unode = cnode + "/" + u
            kids.append(unode)
            ratio[unode] = 1
            prio[unode] = None
            order.append(unode)
            mine = sorted(users[u], key=lambda j: (j.submitted, j.id))
            children[unode] = [j.id for j in mine]
            for j in mine:
                ratio[j.id] = 1
                prio[j.id] = None
                order.append(j.id)
    index = {n: i for i, n in enumerate(order)}
    return ShareTree(children, ratio, prio, index), index


def _needs(tree: ShareTree, want: Mapping[str, int]) -> dict[str, mpq]:
    """Each node's need: a job's is what it wants, a parent's the sum below it."""
    need: dict[str, mpq] = {}
    zero = mpq(0)
    total = zero
    for cnode in tree.children[ROOT]:
        csum = zero
        for unode in tree.children[cnode]:
            usum = 0
            for jid in tree.children[unode]:
                w = want.get(jid, 0)
                if w:
                    need[jid] = mpq(w)
                    usum += w
            need[unode] = mpq(usum)
            csum += usum
        need[cnode] = mpq(csum)
        if tree.ratio[cnode] > 0:
            total += csum
    need[ROOT] = total
    return need


def _pad(t: OrderTables, max_order: int) -> OrderTables:
    c = OrderTables(max_order)
    c.machines[:len(t.machines)] = t.machines
    c.virtual[:len(t.virtual)] = t.virtual
    return c
