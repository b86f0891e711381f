"""Rigid requests: no reclaim is wasted on one that cannot start.

A request with ``min`` > 0 is all or nothing: below its min it runs nothing. The
share-pool reclaim for fairness (the cycle's phase 6) therefore marks slots for a
waiting rigid request only when, once those reclaims complete, the request reaches
its min: with the slots it already holds, the idle slots of its groups and the
reclaims already on their way to its consumer. A reclaim that would leave it short
would end the holder's work and free slots nobody can use (a rigid job ended to
make room for another that still cannot start). EGO's owner reclaims (an owner
takes back slots it lent, or slots a parent's max keeps from it) are not limited:
they give an owner what it owns.

``ReclaimGuard`` is what phase 6 asks before and after serving one waiting rigid
request in one group: before, whether the reclaims that could be marked suffice at
all (if not, nothing is marked); after, whether those marked do (if not, they are
called off within the same cycle, so no decision about them leaves the cycle).
"""

from __future__ import annotations


from apportion.engine.state import RequestState

# ``c`` below is the running cycle (engine/cycle.py's Cycle) and ``v`` its view of a
# group: the cycle imports this module, so this one does not import it back


def waits_rigid(rs: RequestState) -> bool:
    """A rigid request that has not started: below its min, and still wanting slots."""
    return rs.held < rs.min and rs.held < rs.max


def reach_now(c, rs: RequestState) -> int:
    """What ``rs`` can count on without new reclaims: what it holds (slots held back
    this cycle included), the reclaims already on their way to its consumer, and the
    free slots of its groups' open hosts."""
    s = c.s
    groups = s.groups
    free = 0
    for g in rs.groups:  # mostly one: a loop, not a generator
        free += groups[g].open_free
    return rs.held + s.incoming.get(rs.spec.consumer, 0) + free


def usable_idle(c, leaf: str, g: str, v) -> int:
    """The idle slots of ``g`` that ``leaf`` may use: its own, neither in use nor lent;
    the idle slots of the share pools it draws from; what its lenders could lend it
    now. Not every idle slot of the group: those another consumer owns and does not
    lend it are not its to use."""
    u = c.s.usage_in[g].get(leaf)
    idle = v.owned.get(leaf, 0) - ((u.own + (u.lent_total if u.lent else 0)) if u is not None else 0)
    if idle < 0:
        idle = 0
    pv = c.views[g]  # pool_idle's slots, summed as they are met
    size, used = pv.pool_size, c.s.pool_used[g]
    for owner in pv.gp.draws_from[leaf]:
        n = size.get(owner, 0) - used.get(owner, 0)
        if n > 0:
            idle += n
    if v.settings[leaf].borrow:
        idle += sum(max(0, c._lendable(x, g, v)) for x in v.gp.lender_order(leaf) if x != leaf)
    return idle


def reach_usable(c, rs: RequestState) -> int:
    """``reach_now`` with only the idle slots its consumer may use (``usable_idle``). A
    reclaim that counted slots another consumer owns and does not lend freed one slot
    that nobody could use, that slot went to someone else and was reclaimed again, for
    ever; two owners lending to each other, each with a rigid job that needs a slot of
    the other's, took their slots back from each other in turn."""
    leaf = rs.spec.consumer
    views = c.views
    idle = 0
    for g in rs.groups:
        v = views.get(g)
        if v is not None and leaf in v.settings:
            idle += usable_idle(c, leaf, g, v)
    return rs.held + c.s.incoming.get(leaf, 0) + idle


def reach_placed(c, rs: RequestState) -> int:
    """``reach_now`` where slots count only as whole instances on hosts the request
    may use: per open host of its groups, its free slots and the slots being
    reclaimed there for its consumer, in whole instances of ``order`` (counted only
    as far as its min: whether it gets there is what callers ask)."""
    req = rs.spec
    if req.order == 1 and req.requirement is None:
        return reach_now(c, rs)
    s = c.s
    coming: dict[str, int] = {}
    for a in s.reclaim_for.get(req.consumer, {}).values():
        coming[a.host] = coming.get(a.host, 0) + a.slots
    names: set[str] = set(coming)
    for g in rs.groups:
        members = s.groups[g].rank
        names.update(h for h in s.with_free if h in members)
    order = req.order
    total = rs.held
    for name in names:
        h = s.hosts[name]
        if h.takes_work and (req.requirement is None or req.requirement(h.host)):
            total += (h.free + coming.get(name, 0)) // order * order
            if total >= rs.min:
                break  # enough: the caller asks whether it reaches its min
    return total


def room_in_pools(c, leaf: str, rs: RequestState, g: str, v,
                  quotas: dict[str, dict[str, int]], owners) -> list[int]:
    """What phase 6 marks for ``rs``'s leaf in ``g`` at most, per pool of ``owners`` in
    order, whatever a request wants and whatever the victims hold: the leaf's room in
    the pool, as far as what it still wants and its max go, in whole instances of
    ``rs`` (0 where there is none)."""
    out = []
    order = rs.spec.order
    headroom = c._headroom(leaf, g, v)
    for owner in owners:
        deficit = min(c._pool_room(leaf, g, v, quotas, owner), headroom)
        deficit -= deficit % order
        out.append(deficit if deficit > 0 else 0)
    return out


def could_reclaim(c, leaf: str, g: str, v, owners, rooms: list[int], parent_mode: bool) -> list[int]:
    """What phase 6 could mark for ``leaf`` in ``g`` at most, per pool of ``owners``
    in order, whatever a request wants: the leaf's room in each pool (``rooms``, from
    ``room_in_pools``), as far as the victims' excess over what they may keep goes.
    ``within`` turns it into what one request that wants so many could get (the
    phase marks no more than a request wants)."""
    parts = []
    for owner, deficit in zip(owners, rooms):
        if deficit <= 0:
            parts.append(0)
            continue
        if parent_mode:
            avail = 0
            for _, excess in c._victims(v, owner, leaf, parent_mode):
                avail += excess
                if avail >= deficit:
                    break
        else:
            avail = c._victims_hold(v, owner, leaf)
        parts.append(min(avail, deficit))
    return parts


def within(parts: list[int], unmet: int, order: int) -> int:
    """What ``could_reclaim``'s ``parts`` come to for a request that still wants
    ``unmet`` slots: in each pool the phase marks at most that many, in whole
    instances. (Rounding down to whole instances keeps the order of numbers, so the
    least of the pool's room, the leaf's headroom and ``unmet``, rounded, is the
    least of each rounded; and each part is the least of the victims' excess and
    the first two.)"""
    top = unmet - unmet % order
    if top <= 0:
        return 0
    return sum(p if p < top else top for p in parts)


class ReclaimGuard:
    """Phase 6 for one waiting rigid request in one group: reclaim for it only what
    lets it start (the module's docstring)."""

    __slots__ = ("c", "rs", "leaf", "before", "n_reclaims", "want", "need")

    def __init__(self, c, rs: RequestState, ahead: int = 0) -> None:
        self.c = c
        self.rs = rs
        self.need = rs.min + ahead  # what reaches it comes after what is ahead of it
        self.leaf = rs.spec.consumer
        self.before = set(c.s.reclaim_for.get(self.leaf, ()))
        self.n_reclaims = len(c.d.reclaims)
        self.want = c.want.get(self.leaf, 0)

    @classmethod
    def open(cls, c, rs: RequestState, g: str, v, quotas: dict[str, dict[str, int]],
             owners, parent_mode: bool, beyond: dict | None = None, bkey=None,
             ahead: int = 0) -> "ReclaimGuard | None":
        """A guard for serving ``rs`` in ``g``; None when even every reclaim the phase
        could mark would leave it below its min: then nothing is to be marked.
        ``beyond[bkey]`` is set to [reclaims, wants, most]: the count of reclaims and
        what the leaf wants now, and the most a request of the leaf like ``rs`` may
        need to reach its min and pass the first test (the caller's shortcut).
        ``ahead``: what the leaf's earlier requests there that cannot start take first of
        whatever comes to it (they are served before it, in arrival order): the request
        reaches its min only beyond that."""
        # what every request of the leaf there could get at most, whatever it wants: one
        # look serves all its waiting requests until something is marked (a consumer
        # with many wide jobs waiting asks once, not once a job), and what one request
        # could get is worked out from it (``within``). Within phase 6 only marks (and
        # their undoing) move what it reads: the reclaims' count and what the leaf
        # still wants tell when to look again. So does what it can count on without
        # new reclaims, less what it holds (the free slots of its groups and what is
        # on its way to the leaf: free slots do not move within the phase)
        leaf = rs.spec.consumer
        order = rs.spec.order
        key = (leaf, g, rs.groups, order, id(quotas), id(owners), len(c.d.reclaims), c.want.get(leaf, 0))
        cache = c.could_cache
        got = cache.get(key)
        if got is None:
            got = cache[key] = [min(reach_now(c, rs), reach_usable(c, rs)) - rs.held, None, 0, None, 0]
        short = rs.min - rs.held - got[0] + ahead
        if short > 0:
            # first the leaf's room in the pools alone, then as far as the victims'
            # excess goes (never more): most waiting requests are settled by the first
            unmet = rs.unmet
            if got[1] is None:
                rooms = got[1] = room_in_pools(c, leaf, rs, g, v, quotas, owners)
                got[2] = sum(rooms)
            if beyond is not None:
                beyond[bkey] = [key[6], key[7], got[0] + got[2]]
            if got[2] < short or within(got[1], unmet, order) < short:
                return None
            if got[3] is None:
                parts = got[3] = could_reclaim(c, leaf, g, v, owners, got[1], parent_mode)
                got[4] = sum(parts)
            if beyond is not None:
                # no victim's excess can change while the key holds: the tighter bound
                beyond[bkey][2] = got[0] + got[4]
            if got[4] < short or within(got[3], unmet, order) < short:
                return None
        return cls(c, rs, ahead)

    def close(self) -> bool:
        """After the phase served the request: if what was marked still leaves it
        below its min, the marks are called off (before any decision leaves the cycle).
        Whether marks for it stand."""
        c, rs = self.c, self.rs
        if len(c.d.reclaims) == self.n_reclaims:
            return False
        need = self.need
        if reach_now(c, rs) >= need and reach_placed(c, rs) >= rs.min and reach_usable(c, rs) >= need:
            return True  # the first bounds the second
        s = c.s
        mine = s.reclaim_for.get(self.leaf, {})
        for aid in [aid for aid in mine if aid not in self.before]:
            a = mine[aid]
            key = (a.group, a.source[5:])
            c._excess_cache.pop(key, None)  # worked out again from the books when next asked
            c._victim_lists.pop(key, None)
            s.unmark(a)
        del c.d.reclaims[self.n_reclaims:]
        c.want[self.leaf] = self.want
        return False


def protected_held(s, g: str, src: str) -> dict[str, int]:
    """Leaf -> the slots of ``g`` from ``src`` that its protected work holds (work
    started beyond its share through a reservation, or backfilled: it runs to its end)
    and that no reclaim is taking. A reclaim for fairness spares that work, so it does
    not count in how far its consumer is over its share either: else the consumer's
    other, older work would be reclaimed in its place."""
    # kept as the protected requests and their slots change (ClusterState.spared): a copy
    return dict(s.spared.get((g, src), ()))


def pool_idle(c, leaf: str, g: str) -> list[tuple[str, int]]:
    """(pool owner, idle slots) of the pools ``leaf`` draws from in ``g``, nearest first."""
    v = c.views[g]
    used = c.s.pool_used[g]
    out = []
    for owner in v.gp.draws_from[leaf]:
        idle = v.pool_size.get(owner, 0) - used.get(owner, 0)
        if idle > 0:
            out.append((owner, idle))
    return out
