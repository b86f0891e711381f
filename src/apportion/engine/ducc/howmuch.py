"""How Much for FAIR_SHARE work (seed 001): how many processes each job deserves now.

apportion's reading, on the engine's one model (POLICY-NOTES 1 and 8):

- a class is a consumer (weight = share ratio, priority = sibling priority), its
  users are children of weight 1 and each user's jobs are their children of weight 1;
- fairness is counted in **quanta**: the free quanta of the nodepool are water-filled
  down class -> user -> job (``shares.waterfill``, the same code that divides EGO
  share pools), each job capped by what it can use now (its cap in processes times
  its order), so a small-order job is never starved by a large-order one;
- each job's quanta become whole processes, which must fit the machines: jobs are
  fitted largest order first, each process on the smallest free space that holds it
  (a copy of the nodepool's :class:`OrderTables`);
- what is left (fractions of a process, space no process fitted) is handed out again
  in further rounds to jobs that still want processes that fit ("bonus"), until a
  round gives nothing; the last quanta go one process at a time to the job furthest
  below its weighted share. A job's **pure fair share** is what the first round gave it;
- priorities: a better class priority (a smaller number) is served first and takes all
  it can use; each worse priority gets what is left.

Deterministic throughout: classes by weight (heavier first) then name, users by name,
jobs by submission then id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from math import floor

from gmpy2 import mpq

from apportion.engine.ducc.vmachines import OrderTables
from apportion.engine.shares import ShareTree, waterfill

ROOT = "/"


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


def how_much(classes: Iterable[FairClass], jobs: Iterable[JobAsk], tables: OrderTables) -> HowMuch:
    """Counts of processes per job for fair-share work on the free space in ``tables``
    (which is not changed)."""
    free = _copy(tables)
    by_name = {c.name: c for c in classes}
    jobs = [j for j in jobs if j.cap > 0 and j.cls in by_name]
    out = HowMuch()
    for j in jobs:
        out.counts[j.id] = 0
        out.pure_fair_share[j.id] = 0
    for prio in sorted({by_name[j.cls].priority for j in jobs}):
        band = [j for j in jobs if by_name[j.cls].priority == prio]
        _one_priority(band, by_name, free, out)
    out.quanta_left = free.shares[1] if free.max_order >= 1 else 0
    out.free = free
    return out


def _one_priority(jobs: list[JobAsk], classes: Mapping[str, FairClass], free: OrderTables, out: HowMuch) -> None:
    tree, index = _tree(jobs, classes)
    order_of = {j.id: j.order for j in jobs}
    first = True
    while True:
        want = {j.id: (j.cap - out.counts[j.id]) * j.order for j in jobs
                if j.cap > out.counts[j.id] and _fits_somewhere(free, j.order)}
        quanta = free.shares[1]
        if not want or quanta <= 0:
            return
        need = _needs(tree, want)
        got = waterfill(tree, ROOT, mpq(quanta), need)
        given = _fit(jobs, {jid: floor(q / order_of[jid]) for jid, q in got.items()}, free, out)
        if first:
            for jid, n in given.items():
                out.pure_fair_share[jid] += n
            first = False
        if sum(given.values()) == 0:
            break
    # the last quanta, one process at a time, to the job furthest below its share
    while True:
        cands = [j for j in jobs if j.cap > out.counts[j.id] and _fits_somewhere(free, j.order)]
        if not cands:
            return
        j = min(cands, key=lambda j: (out.counts[j.id] * j.order / _weight(j, classes), index[j.id]))
        if not _place(free, j.order):
            return
        out.counts[j.id] += 1


def _weight(j: JobAsk, classes: Mapping[str, FairClass]) -> float:
    return classes[j.cls].weight


def _tree(jobs: list[JobAsk], classes: Mapping[str, FairClass]) -> tuple[ShareTree, dict[str, int]]:
    """class -> user -> job, children in the tie order of POLICY-NOTES 7."""
    cls_names = sorted({j.cls for j in jobs}, key=lambda c: (-classes[c].weight, c))
    children: dict[str, list[str]] = {ROOT: []}
    ratio: dict[str, int] = {ROOT: 1}
    prio: dict[str, int | None] = {ROOT: None}
    for c in cls_names:
        cnode = f"/{c}"
        children[ROOT].append(cnode)
        ratio[cnode] = max(classes[c].weight, 0)
        prio[cnode] = None  # priorities are separate passes
        users = sorted({j.user for j in jobs if j.cls == c})
        children[cnode] = []
        for u in users:
            unode = f"{cnode}/{u}"
            children[cnode].append(unode)
            ratio[unode], prio[unode] = 1, None
            mine = sorted((j for j in jobs if j.cls == c and j.user == u), key=lambda j: (j.submitted, j.id))
            children[unode] = [j.id for j in mine]
            for j in mine:
                ratio[j.id], prio[j.id] = 1, None
    order = [ROOT] + [n for c in children[ROOT] for n in [c] + children[c] + [x for u in children[c] for x in children[u]]]
    index = {n: i for i, n in enumerate(order)}
    return ShareTree(children, ratio, prio, index), index


def _needs(tree: ShareTree, want: Mapping[str, int]) -> dict[str, mpq]:
    need: dict[str, mpq] = {}

    def visit(node: str) -> mpq:
        kids = tree.children.get(node)
        if not kids:
            n = mpq(want.get(node, 0))
        else:
            n = mpq(0)
            for k in kids:
                v = visit(k)
                if tree.ratio[k] > 0:
                    n += v
        need[node] = n
        return n

    visit(ROOT)
    return need


def _fit(jobs: list[JobAsk], processes: Mapping[str, int], free: OrderTables, out: HowMuch) -> dict[str, int]:
    """Place each job's processes on the free space, largest order first (the hardest
    to fit), each on the smallest free space that holds it."""
    given: dict[str, int] = {}
    for j in sorted(jobs, key=lambda j: (-j.order, j.submitted, j.id)):
        n = min(processes.get(j.id, 0), j.cap - out.counts[j.id])
        placed = 0
        while placed < n and _place(free, j.order):
            placed += 1
        out.counts[j.id] += placed
        given[j.id] = placed
    return given


def _fits_somewhere(t: OrderTables, order: int) -> bool:
    return order <= t.max_order and t.shares[order] > 0


def _place(t: OrderTables, order: int) -> bool:
    """Take an order-``order`` space from the smallest free space that holds it, a
    partly used machine before a whole one of the same free size."""
    for f in range(order, t.max_order + 1):
        if t.virtual[f] > 0:
            # a virtual machine's real order only has to exceed its free space
            t.allocate(t.max_order, f, order)
            return True
        if t.machines[f] > 0:
            t.allocate(f, f, order)
            return True
    return False


def _copy(t: OrderTables) -> OrderTables:
    c = OrderTables(t.max_order)
    c.machines[:] = t.machines
    c.virtual[:] = t.virtual
    return c
