"""Reservations for rigid requests: wide work starts in a bounded time.

A rigid request (``min`` > 0) can start only with its min at once. Under shares
alone it may never get there: slots come free one at a time, and each goes to
whoever is below its share at that moment, or the request's min is more than its
consumer deserves. So, in each resource group, one waiting rigid request has a
*reservation*, as a batch scheduler's highest-priority job does (Slurm's backfill
scheduler; the EASY backfilling of the Argonne SP scheduler):

- which (fair over time: engine/usage.py counts use beyond the share, and a
  consumer's debt is taken off what it is below its share): the first waiting wide rigid request (arrival order; a min above one
  instance: a min of one instance starts with any instance that comes free) of the
  consumer furthest below what it deserves in the group (deserved less held; ties:
  the earlier request, then plan order). Only a request that can ever start there has one: its
  min fits the group's hosts taking work and every ``max`` above it, and its
  consumer may draw from a share pool;
- what it does: the share-pool slots of the group that are idle are kept for it,
  as far as its min goes, even beyond its share of the moment: nobody else is given
  them (but backfill, engine/backfill.py). Once those kept and those it holds reach
  its min, it is granted them and starts. Nothing is reclaimed for it beyond its
  share: it waits for slots to come free, as a batch job does. Slots freed by a
  reclaim just completed go to the reclaim's beneficiary first, not to a reservation.
  Once started beyond its share, it runs to its end: no reclaim for fairness takes its slots
  (``ClusterState.protected``; a pool that shrank, a max lowered or an owner still may);
- when: with the ends of the running work that has a ``walltime`` (started at a
  known time), the *planned start* is the time when enough of them will have ended
  to make up what it still lacks; unknown (None) when that work is not enough.

Kept slots are counted as the request's for the rest of the cycle, like the slots a
cycle gives a request below its min and takes back at the end (Cycle._hold_back):
no allocation is made and no decision leaves the cycle for them. The reservation
itself, with the slots kept and the planned start, is in the state
(``ClusterState.reservations``) and the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sortedcontainers import SortedList

from apportion.engine import backfill, usage
from apportion.engine.rigid import pool_idle, usable_idle
from apportion.engine.state import RESERVATION_READY, ClusterState, RequestState, in_order, pool_source

# ``c`` below is the running cycle (engine/cycle.py's Cycle): it imports this module,
# so this one does not import it back


@dataclass(slots=True)
class Reservation:
    request: str
    consumer: str
    group: str
    min: int
    held: int  # what the request holds (before this cycle's kept slots)
    planned_start: float | None = None  # None: unknown (running work without a walltime)
    extra: int = 0  # slots free at the planned start beyond what it needs (EASY's "extra nodes")
    # the picks [(host, slots)] of what was kept for it this cycle (``keep``), made into
    # ``kept`` only when read (a wide request on small hosts keeps on hundreds each cycle)
    picks: list[list[tuple[str, int]]] = field(default_factory=list, repr=False)
    _kept: dict[str, int] | None = field(default=None, repr=False, compare=False)

    @property
    def kept(self) -> dict[str, int]:
        """Host -> slots kept for it this cycle."""
        if self._kept is None:
            out: dict[str, int] = {}
            for picks in self.picks:
                for host, n in picks:
                    out[host] = out.get(host, 0) + n
            self._kept = out
        return self._kept

    @property
    def keeps(self) -> bool:
        """Whether any slot is kept for it (``kept`` not empty)."""
        return any(self.picks)

    @property
    def kept_slots(self) -> int:
        return sum(self.kept.values())


def _fits(c, rs: RequestState, g: str) -> bool:
    """Whether ``rs`` can ever start in ``g``: its min within what its consumer may ever
    hold of the group's hosts taking work (``GroupPlan.most_for``: less what others own
    and will not lend it, within every max above it), and its consumer drawing from
    some pool."""
    v = c.views.get(g)
    leaf = rs.spec.consumer
    if v is None or leaf not in v.settings or not v.gp.draws_from.get(leaf):
        return False
    return rs.min <= v.gp.most_for(leaf, c.s.groups[g].slots_taking_work)


def _deficit(c, leaf: str, g: str) -> int:
    """What ``leaf`` deserves in ``g`` less what it holds there."""
    u = c.s.usage_in[g].get(leaf)
    return usage.deserved_of(c.views[g], leaf) - (u.held if u is not None else 0)


def choose(c) -> dict[str, RequestState]:
    """Group -> the request that has its reservation this cycle (none: no entry)."""
    s = c.s
    # each leaf's requests that still want slots, in arrival order (the running ones,
    # held in full, are not there): a min of one instance starts with any instance
    # that comes free, only wider ones wait for slots to come free together
    books = s.wanting_some.items()  # the order does not matter: the keys below differ in the leaf
    if not books:
        return {}
    chosen: dict[str, RequestState] = {}
    taken: set[str] = set()
    index = s.consumers
    half_life = c.policy.usage_half_life
    owed = _ready_for(c)
    for g in s.group_names:
        v = c.views.get(g)
        if v is None:
            continue
        settings = v.settings
        best = None
        for leaf, book in books:
            if leaf not in settings:
                continue
            # its first wide request not started that fits here, unless an earlier one
            # has not started either: a min of one instance starts with the next
            # instance that comes free, and slots kept would only hold it up (first
            # come first served within a consumer). So only its first request not
            # started counts: none, or not one that fits, and the leaf has none here
            for rs in in_order(book):
                if rs.held < rs.min:
                    break
            else:
                continue
            if not (rs.min > rs.spec.order and g in rs.groups and _fits(c, rs, g)):
                continue
            if rs.spec.id in taken or c._below_max(leaf, g, v) < rs.min - rs.held:
                continue  # kept elsewhere, or a max above it is full of its running work
            key = ((g, leaf) not in owed, usage.debt_slots(s, leaf, half_life) - _deficit(c, leaf, g), rs.seq,
                   index[leaf].index)
            if best is None or key < best[0]:
                best = (key, rs)
        if best is not None:
            chosen[g] = best[1]
            taken.add(best[1].spec.id)
    return chosen


def _ready_for(c) -> set[tuple[str, str]]:
    """(group, consumer) whose reservation was ready and reclaimed the work on its slots:
    those reclaims are on their way, or completed as this cycle began; or whose
    reservation was ready last cycle, waiting only for reclaims on their way (``run``).
    Its consumer keeps the reservation there until they are done: once the work they end is gone, another
    consumer may stand further below its share, and a reservation that moved to it would
    leave the slots to the work they were reclaimed from, to be reclaimed again, for ever."""
    out = set(c.ready_freed)
    for leaf, marked in c.s.reclaim_for.items():
        for a in marked.values():
            if a.reclaim.reason == RESERVATION_READY:
                out.add((a.group, leaf))
    return out


def _ends(s: ClusterState) -> SortedList:
    """(end, request) of the running work with a walltime, soonest first: kept from
    one cycle to the next (``after_cycle`` adds what started; entries of work that has
    ended are dropped as ``planned_start`` meets them), made anew from ``started``
    when the state has none (a new state: engine/replan.py)."""
    ends = s.ends
    if ends is None:
        ends = s.ends = SortedList()
        for rid, t0 in s.started.items():
            rs = s.requests.get(rid)
            if rs is not None and rs.spec.walltime is not None:
                ends.add((t0 + rs.spec.walltime, rid))
    return ends


def planned_start(s: ClusterState, g: str, short: int, free_now: int) -> tuple[float | None, int]:
    """When ``short`` more slots of ``g`` will have come free, from the ends of running
    work with a walltime (None: not known), and the slots free then beyond ``short``
    (EASY's extra nodes: backfill that ends later may use that many). The ends are
    read soonest first, only as far as needed."""
    if short <= 0:
        return None, free_now  # it can start now, or something else than slots holds it (a max)
    ends = _ends(s)
    started, requests = s.started, s.requests
    gone: list[tuple[float, str]] = []
    freed = 0
    found: float | None = None
    for item in ends:
        end, rid = item  # in the past for work that outran its walltime
        if found is not None and end > found:
            break  # every end at the same time as the one that makes it up counts
        rs = requests.get(rid)
        t0 = started.get(rid)
        if rs is None or t0 is None or rs.spec.walltime is None or t0 + rs.spec.walltime != end:
            gone.append(item)  # ended (or started again): no longer running
            continue
        n = rs.unmarked_in(g)
        if not n:
            continue
        freed += n
        if found is None and freed >= short:
            found = end
    for item in gone:
        ends.remove(item)
    if found is None:
        return None, 0
    return found, freed - short


def keep(c, g: str, rs: RequestState, owed: int) -> Reservation:
    """Keep the idle share-pool slots of ``g`` for ``rs`` as far as its min goes
    (``owed``: idle slots that reclaims completed now freed for someone else); grant
    them if that takes it to its min. The reservation, as it stands after."""
    leaf = rs.spec.consumer
    res = Reservation(rs.spec.id, leaf, g, rs.min, rs.held)
    if leaf not in c.want:
        c.want[leaf] = 0  # what it lacks is on its way to it (reclaims): idle slots are still kept
    v = c.views[g]
    room = c._below_max(leaf, g, v)
    order = rs.spec.order
    # what it is given here, held back or granted, host by host: what is kept for it
    # (a grant that makes earlier slots held back allocations moves nothing on a host)
    c._pick_log = res.picks
    c._hold_back_ok = True
    try:
        for owner, idle in pool_idle(c, leaf, g):
            need = -(-(rs.min - rs.held) // order) * order  # whole instances
            take = min(idle - owed, need, rs.max - rs.held, room)
            owed = max(0, owed - idle)
            if take <= 0:
                continue
            placed = c._give(rs, g, take, pool_source(owner))
            room -= placed
            if rs.held >= rs.min or placed < take:
                break
    finally:
        c._hold_back_ok = False
        c._pick_log = None
    return res


def protect_if_beyond(c, g: str, rs: RequestState) -> None:
    """A reservation's request that started beyond its consumer's share runs to its
    end: no reclaim for fairness takes its slots (``ClusterState.protected``)."""
    if _deficit(c, rs.spec.consumer, g) < 0:
        c.s.protected.add(rs.spec.id)


def run(c, freed: list[tuple[str, str, int]]) -> None:
    """The reservations of this cycle, before the serving phases: in each group, the
    chosen request's planned start, then backfill (engine/backfill.py), then the
    slots kept for it. ``freed``: (group, beneficiary, slots) of the reclaims
    completed at the start of the cycle: those slots go to their beneficiary."""
    s = c.s
    for g in [g for g in s.fill if g not in c.reserved]:
        del s.fill[g]  # no reservation there now: the work on its slots is ordinary work
    for g, rs in c.reserved.items():
        leaf = rs.spec.consumer
        owed = sum(n for grp, b, n in freed if grp == g and b != leaf and b in s.consumers)
        # every idle slot it may use: its own, the share pools' and what its lenders
        # could lend it now (the borrowing phase gives those). Counting the pools alone
        # called it not ready where lent slots make up its min: the slots freed for it
        # went to elastic work meanwhile and were reclaimed for it again, for ever
        idle = usable_idle(c, leaf, g, c.views[g])
        free_now = max(0, idle - owed)
        if rs.held + free_now + s.incoming.get(leaf, 0) < rs.min:
            # not ready: slots a reclaim freed for this consumer were won for its other work
            # (a reclaim for fairness is not marked for a rigid request it cannot start):
            # they go to that work, not to be kept and lent on and reclaimed again
            owed += sum(n for grp, b, n in freed if grp == g and b == leaf)
            free_now = max(0, idle - owed)
        start, extra = planned_start(s, g, rs.min - rs.held - free_now, free_now)
        if s.fill.get(g):
            backfill.reclaim_fill(c, g, rs, free_now)
        if start is not None and start > c.now:
            backfill.fill(c, g, rs, start, extra, owed)
        if rs.held + free_now + s.incoming.get(leaf, 0) < rs.min:
            backfill.fill_elastic(c, g, rs, owed)  # not ready: elastic work may use the slots meanwhile
        res = keep(c, g, rs, owed)
        if rs.held >= rs.min:
            protect_if_beyond(c, g, rs)
        else:  # still waiting (not granted what was kept)
            res.planned_start = start
            res.extra = extra
            s.reservations[g] = res
            coming = s.incoming.get(leaf, 0)
            if coming and rs.held + free_now + coming >= rs.min:
                # ready, waiting only for reclaims on their way: it keeps its place next
                # cycle (``_ready_for``). Moved to a consumer further below its share, it
                # left the slots it keeps to that one's elastic work, which it then
                # reclaimed again when it came back, for ever
                s.ready_freed.add((g, leaf))


def absorbs(c, rs: RequestState) -> bool:
    """For QuietRecord: whether a request that came after a cycle that decided
    nothing leaves the reservations as they were: it has no walltime where a
    reservation waits (it could backfill), and it is rigid only behind a waiting
    rigid request of its own consumer that fits each of its groups (each consumer's
    first one there is what counts)."""
    if rs.spec.walltime is not None and c.reserved:
        return False
    if rs.min <= 0:  # elastic: it could run on slots kept for a reservation
        return not any(r.keeps for g, r in c.s.reservations.items() if g in rs.groups)
    if rs.min <= rs.spec.order:
        return True  # a min of one instance: never a reservation
    leaf = rs.spec.consumer
    # its consumer's wide rigid requests before it that have not started
    ahead = [o for o in c.s.wanting_of.get(leaf, {}).values()
             if o.order < rs.order and o.held < o.min and o.min > o.spec.order]
    return all(any(g in o.groups and _fits(c, o, g) for o in ahead) for g in rs.groups)


def after_cycle(c) -> None:
    """Note when work with a walltime started: its end is what planned starts are made
    of. The next cycle may then decide more with nothing else changed (``Decisions.again``):
    when such work started while a reservation still waits (its planned start is made
    of ends known from the next cycle on), or a reservation's request started while
    other wide rigid requests wait (one of them has the reservation next)."""
    s = c.s
    if not s.rigid:
        return
    for g, rs in c.reserved.items():
        # however it came to its min this cycle (the slots kept for it, the serving
        # phases after them, or phase 8's last call), a reservation's request that
        # started beyond its consumer's share runs to its end
        if rs.held >= rs.min and rs.spec.id in s.requests and rs.spec.id not in s.protected:
            protect_if_beyond(c, g, rs)
    started = s.started
    new_end = False
    ends = _ends(s)
    for rid in c.granted_now:
        rs = s.requests.get(rid)
        if rs is not None and rs.spec.walltime is not None and rid not in started and rs.held >= max(rs.min, 1):
            started[rid] = c.now
            item = (c.now + rs.spec.walltime, rid)
            if item not in ends:  # an id that ended and came back within the same time is there once
                ends.add(item)
            new_end = True
    if new_end and s.reservations:
        c.d.again = True
    elif any(rs.held >= rs.min for rs in c.reserved.values()):
        c.d.again = any(rs.held < rs.min and rs.held < rs.max and rs.min > rs.spec.order for rs in s.rigid.values())
