"""Backfill: work that cannot delay a reservation runs on the slots kept for it.

While a reservation (engine/reserve.py) waits for its planned start, the idle slots
kept for it would stand idle. As in Slurm's backfill scheduler and the EASY
backfilling it follows, a waiting request that says how long it runs (``walltime``)
is started on them, out of turn, when it cannot delay the reservation:

- it ends before the planned start (now + walltime <= planned start): the slots are
  free again by the time the reservation needs them; or
- it uses only the *extra* slots: those that will be free at the planned start
  beyond what the reservation needs (EASY's extra nodes).

Candidates are taken in arrival order, each from the pools its consumer draws from
in the group, nearest first, within its consumer's max; a rigid one only if it
reaches its min. Without a planned start (running work without a walltime), nothing
is backfilled that way: no end is known before which backfill would have to end.
Work backfilled so runs to its end, as a batch scheduler's backfilled job does: no
reclaim for fairness takes its slots (``ClusterState.protected``), neither for the
reservation (it was started because it does not delay it) nor for anyone else (its
walltime bounds how long it holds them). Without that, each backfilled job, beyond
its consumer's share on slots kept for another, was reclaimed at the next cycle and
its work thrown away (on Curie's first 10,000 jobs: 89,447 reclaims instead of 103).

Elastic work (no min, no walltime) may run on the kept slots too, whatever the
planned start (``fill_elastic``): it can give them back at any time. It is noted
(``ClusterState.fill``), and when the reservation is *ready* (what it holds, the
idle slots and the slots of that elastic work reach its min) those slots are
reclaimed for it, with their holder's grace (``reclaim_fill``).
"""

from __future__ import annotations

from apportion.engine.decisions import Reclaim
from apportion.engine.rigid import pool_idle
from apportion.engine.state import RESERVATION_READY, PendingReclaim, RequestState, pool_source

# ``c`` below is the running cycle (engine/cycle.py's Cycle), which imports this
# module: this one does not import it back


def candidates(c, g: str, reserved: RequestState, most: int, start: float, extra: int) -> list[RequestState]:
    """Waiting requests with a walltime that may run in ``g``, in arrival order, leaving
    out those that ``fill`` would pass over whatever it gave before them: those that
    need more to reach their min than ``most`` slots, than their consumer still wants,
    or, unless they end by ``start``, than the ``extra`` slots (each of these only
    falls while ``fill`` gives)."""
    want, now = c.want, c.now
    out = []
    for leaf, book in c.s.wanting_some.items():  # requests still wanting slots (held < max)
        w = want.get(leaf, 0)
        if w > 0:
            top = min(most, w)
            out.extend(rs for rs in dict.values(book)  # in any order: sorted below
                       if rs.spec.walltime is not None and (need := rs.min - rs.held) <= top
                       and (need <= extra or now + rs.spec.walltime <= start) and g in rs.groups
                       and rs is not reserved)
    out.sort(key=_arrival)
    return out


def _idle_in(c, g: str) -> int:
    """The idle slots of every share pool of ``g``: the most any leaf finds idle there."""
    v = c.views[g]
    used = c.s.pool_used[g]
    return sum(max(0, n - used.get(owner, 0)) for owner, n in v.pool_size.items())


def fill(c, g: str, reserved: RequestState, start: float, extra: int, owed: int) -> int:
    """Backfill ``g`` before ``start``; returns the slots given (they are no longer
    idle for the reservation to keep; its planned start does not move)."""
    given = 0
    # a candidate gets no more than the idle slots of the pools its consumer draws
    # from less ``owed``: with none it gets nothing, and one that needs more than that
    # to reach its min is passed over (the bound only falls as slots are given)
    most = _idle_in(c, g) - owed
    if most <= 0:
        return 0
    for rs in candidates(c, g, reserved, most, start, extra):
        if rs.min - rs.held > most:
            continue
        leaf = rs.spec.consumer
        v = c.views.get(g)
        if v is None or leaf not in v.settings:
            continue
        ends_in_time = c.now + rs.spec.walltime <= start
        limit = rs.max - rs.held
        if not ends_in_time:
            limit = min(limit, extra)
        pools = pool_idle(c, leaf, g)
        idle = sum(n for _, n in pools) - owed
        limit = min(limit, idle, c._headroom(leaf, g, v))
        limit -= limit % rs.spec.order
        if limit <= 0 or rs.held + limit < rs.min:
            continue
        placed = _give_from_pools(c, rs, g, pools, limit)
        given += placed
        if not ends_in_time:
            extra -= placed
        if placed and rs.held >= max(rs.min, 1):
            c.s.protected.add(rs.spec.id)  # it runs to its end (its walltime bounds it)
        if placed:
            most = _idle_in(c, g) - owed
            if most <= 0:
                break
    return given


def _give_from_pools(c, rs: RequestState, g: str, pools: list[tuple[str, int]], limit: int) -> int:
    """Up to ``limit`` slots of ``g`` to ``rs`` from the idle share pools, nearest first;
    how many were given."""
    placed = 0
    for owner, n in pools:
        take = min(n, limit - placed)
        if take > 0:
            placed += c._give(rs, g, take, pool_source(owner))
        if placed >= limit:
            break
    return placed


def fill_elastic(c, g: str, reserved: RequestState, owed: int) -> None:
    """Elastic requests of ``g`` onto its idle share-pool slots that the reservation
    would keep: consumers by their oldest waiting request (first come first served,
    as the surplus phase), each its elastic requests in arrival order."""
    s, want, v = c.s, c.want, c.views[g]
    if s.groups[g].open_free <= owed:
        return  # no idle slot to lend
    books = s.wanting_of
    leaves = [x for x, n in want.items() if n > 0 and x in v.settings and books.get(x)]
    if not leaves:
        return
    fill = s.fill.setdefault(g, {})
    # each leaf's elastic requests that may run here (what giving to one leaf does
    # leaves the others' as they were): only leaves with some are served, in order
    elastic_of = {}
    for leaf in leaves:
        elastic = [rs for rs in dict.values(books[leaf])
                   if rs.min <= 0 and rs.spec.walltime is None and g in rs.groups and rs is not reserved]
        if elastic:
            elastic_of[leaf] = elastic
    for leaf in sorted(elastic_of, key=lambda x: (books[x].peekitem(0)[1].seq, s.consumers[x].index)):
        for rs in sorted(elastic_of[leaf], key=_arrival):  # in arrival order (the book's keys)
            pools = pool_idle(c, leaf, g)
            idle = sum(n for _, n in pools) - owed
            n = min(idle, rs.max - rs.held, c._headroom(leaf, g, v))
            if idle <= 0:
                return
            if n <= 0:
                continue
            mine = c.granted_now.get(rs.spec.id)
            before = len(mine) if mine else 0
            _give_from_pools(c, rs, g, pools, n)
            for a in c.granted_now.get(rs.spec.id, [])[before:]:
                fill[a.id] = a
            if want.get(leaf, 0) <= 0:
                break


def _arrival(rs: RequestState) -> int:
    return rs.order


def reclaim_fill(c, g: str, reserved: RequestState, free_now: int) -> None:
    """When the slots of elastic work on kept slots, with the idle ones and what it
    holds, make up the reservation's min: reclaim them for it (newest first, each
    with its holder's grace). Only slots on hosts it may use count, in whole
    instances with the free slots there."""
    s = c.s
    leaf = reserved.spec.consumer
    # only work still on the share pools the reservation draws from: work the books
    # moved onto its own consumer's slots (or a lender's) frees nothing it may use, and
    # reclaiming it would only hand the slot back to that work, for ever
    sources = {pool_source(owner) for owner in c.views[g].gp.draws_from[leaf]}
    fill = {aid: a for aid, a in s.fill.get(g, {}).items()
            if s.allocs.get(aid) is a and a.reclaim is None and a.source in sources}
    s.fill[g] = fill
    if not fill or reserved.min - reserved.held - free_now - s.incoming.get(leaf, 0) <= 0:
        return
    req = reserved.spec
    order = req.order
    hosts = s.hosts
    on_host: dict[str, list] = {}  # host -> the elastic work there, newest first
    for a in sorted(fill.values(), key=lambda a: -a.id):
        h = hosts[a.host]
        if h.takes_work and (req.requirement is None or req.requirement(h.host)):
            on_host.setdefault(a.host, []).append(a)
    coming: dict[str, int] = {}
    for a in s.reclaim_for.get(leaf, {}).values():
        coming[a.host] = coming.get(a.host, 0) + a.slots
    members = s.groups[g].rank
    names = {x for x in s.with_free if x in members} | set(coming) | set(on_host)
    have = ready = reserved.held
    plan: list[tuple] = []  # (slots of instances gained, [(allocation, slots)]) per host
    for name in sorted(names, key=members.get):
        h = hosts[name]
        if not h.takes_work or (req.requirement is not None and not req.requirement(h.host)):
            continue
        base = h.free + coming.get(name, 0)
        extra = sum(a.slots for a in on_host.get(name, ()))
        whole = (base + extra) // order * order
        have += whole
        ready += base // order * order
        take = max(0, whole - base)  # what of the elastic work completes instances here
        if whole > base // order * order:
            marks = []
            for a in on_host.get(name, ()):
                if take <= 0:
                    break
                marks.append((a, min(a.slots, take)))
                take -= min(a.slots, take)
            plan.append((whole - base // order * order, marks))
    # a host's idle slots may be another consumer's (owned, not lent to this one): no more
    # of them count than the idle slots this consumer may use, with those on their way
    usable = reserved.held + free_now + sum(coming.values())
    if ready > usable:
        have -= ready - usable
        ready = usable
    if have < reserved.min:
        return  # not ready yet: the elastic work runs on
    need = reserved.min - ready
    settings = c.views[g].settings
    reason = RESERVATION_READY
    for gain, marks in plan:
        if need <= 0:
            break
        for a, take in marks:
            deadline = c.now + settings[a.consumer].grace
            b = s.mark(a, take, PendingReclaim(deadline, leaf, reason))
            c.d.reclaims.append(Reclaim(b.request, b.consumer, g, b.host, take, deadline, leaf, reason))
            if leaf in c.want:
                c.want[leaf] -= take
        need -= gain


def fill_live(s, g: str) -> dict:
    """Allocation id -> the elastic work still on a reservation's kept slots in ``g``
    (neither gone nor being reclaimed)."""
    fill = s.fill.get(g)
    if not fill:
        return {}
    allocs = s.allocs
    return {aid: a for aid, a in fill.items() if allocs.get(aid) is a and a.reclaim is None}


def add_fill_held(live: dict, src: str, spared: dict[str, int]) -> dict[str, int]:
    """``spared`` (leaf -> slots a reclaim for fairness leaves alone) with the elastic
    work on a reservation's kept slots (``live``, from ``fill_live``) from ``src``
    added: those slots are the
    reservation's, lent while it is not ready, and come back to it alone
    (``reclaim_fill``). A reclaim for another consumer's fairness would hand them to
    that consumer, and one for the reservation's own consumer would free a slot it
    cannot start with, to be lent and reclaimed again."""
    for a in live.values():
        if a.source == src:
            spared[a.consumer] = spared.get(a.consumer, 0) + a.slots
    return spared
