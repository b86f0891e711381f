"""What every serving phase of a cycle gives with: the room a leaf has under its
max, giving a request slots from a source (``_give``) and placing them on hosts
(``_place``), or holding them back for a request that stays below its min
(``_hold_back``, ``_materialise``); and the walk that serves leaves, request by
request in arrival order, group by group (``_serve``, ``_walk``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice, repeat
from operator import itemgetter

from apportion.engine.decisions import Grant
from apportion.engine.model import Request
from apportion.engine.phases.base import HELD, INF, CyclePart
from apportion.engine.phases.view import GroupView
from apportion.engine.placement import choose_among, choose_hosts
from apportion.engine.state import OWN, HeldSlots, OpenHosts, RequestState, in_order


class Giving(CyclePart):
    """Giving, placing and holding back slots, and the serving walk; ``Cycle`` inherits them."""

    def _below_max(self, leaf: str, g: str, v: GroupView) -> int | float:
        """How many more slots the leaf may hold under the max of it and its ancestors
        (unbounded without one)."""
        chain = v.gp.max_chain[leaf]
        if not chain:
            return INF
        st = self.s.subtree_held[g]
        return min(mx - st.get(p, 0) for p, mx in chain)

    def _headroom(self, leaf: str, g: str, v: GroupView) -> int:
        """What the leaf still wants, as far as a max lets it grow."""
        return min(self.want.get(leaf, 0), self._below_max(leaf, g, v))

    def _max_room(self, leaf: str, g: str, v: GroupView) -> int | float:
        """Room under the max, counting what is already being reclaimed for the leaf."""
        room = self._below_max(leaf, g, v)
        if room != INF:
            u = self.s.usage_in[g].get(leaf)
            if u is not None and u.incoming:
                room -= u.incoming_total
        return room

    def _give(self, rs: RequestState, g: str, n: int, source: str) -> int:
        """Place up to ``n`` slots of ``rs`` in ``g`` from ``source``; returns slots placed."""
        req: Request = rs.spec
        if n >= self.want.get(req.consumer, 0):
            self.sensitive.add(req.consumer)  # what it wants may be what bounds n
        unmet = rs.max - rs.held
        inst = min(n, unmet) // req.order
        if inst <= 0:
            if n > 0 and unmet >= req.order:
                self._note_stuck(req.consumer, g)  # room for less than one instance
            return 0
        placed = 0
        wanted = inst * req.order
        s = self.s
        hosts, group = s.hosts, s.groups[g]
        place = self._place
        holding = False
        log = self._pick_log
        if log is not None:
            place = self._logged(place, log)
        if self.hold_back and self._hold_back_ok and source[0] == "p" and not req.exclusive \
                and not s.in_use and self._stays_below_min(rs, wanted):
            # a request still below its min after this grant: unless a later one this
            # cycle takes it there, phase 8 takes back whatever it is given. What it is
            # given still counts until then (it keeps those slots from the leaves served
            # after it), so it is counted, and made into allocations and grants only if
            # such a later grant comes (_materialise)
            place = self._hold_back if log is None else self._logged(self._hold_back, log)
            holding = True
        owned_hosts = self.views[g].gp.owned_hosts
        if holding and not owned_hosts and inst >= group.open_free > 0 and req.order == 1 \
                and req.requirement is None and group.alone and not group.keyed_by_free and not group.exclusive \
                and not group.exclusive_on:
            # held back, and given every open slot of the group: the picks are the open
            # hosts whole (placement._stacked_wide), read only if something asks
            picks = OpenHosts(group)
            if log is not None:
                log.append(picks)
            placed = self._hold_back(rs, g, picks, source, group.open_free)
            self.want[req.consumer] -= placed
            if placed < wanted:
                self._note_stuck(req.consumer, g)
            return placed
        if owned_hosts:
            # owned hosts first: the consumer's own for its own slots, the lender's for
            # lent ones, the parent's for its private pool's
            mine = owned_hosts.get(req.consumer if source == OWN else source[5:], ())
            if mine:
                placed = place(rs, g, choose_among(hosts, group, req, req.consumer, inst, mine), source)
                inst -= placed // req.order
        if inst > 0:
            placed += place(rs, g, choose_hosts(hosts, group, req, req.consumer, inst), source)
        if placed:
            self.want[req.consumer] -= placed
        if placed < wanted:
            self._note_stuck(req.consumer, g)  # on the books, but no host may take it
        return placed

    @staticmethod
    def _logged(place: Callable[[RequestState, str, list[tuple[str, int]], str], int], log: list):
        """``place``, noting its picks in ``log`` (reserve.keep: what a reservation keeps)."""
        def logged(rs: RequestState, g: str, picks: list[tuple[str, int]], source: str) -> int:
            if picks:
                log.append(picks)
            return place(rs, g, picks, source)
        return logged

    def _stays_below_min(self, rs: RequestState, wanted: int) -> bool:
        """Whether ``rs`` stays below its min after ``wanted`` more slots, or could not
        reach it even with every open slot of its groups: what it is given then is held
        back (``_hold_back``)."""
        return rs.held + wanted < rs.min or rs.held + sum(self.s.groups[x].open_free for x in rs.groups) < rs.min

    def _place(self, rs: RequestState, g: str, picks: list[tuple[str, int]], source: str) -> int:
        if not picks:
            return 0
        req = rs.spec
        if req.id in self.held_back:
            self._materialise(rs)  # what it was given earlier comes first, as it came
        placed = 0
        add, grants = self.s.add, self.d.grants
        mine = self.granted_now.setdefault(req.id, [])
        rid, leaf = req.id, req.consumer
        if source[0] == "p" and not req.exclusive and len(picks) > 1:
            mine.extend(self.s.add_picks(rs, g, picks, source))  # the same, the counts moved once
            grants.extend([Grant(rid, leaf, g, host, slots, source) for host, slots in picks])
            return sum(map(itemgetter(1), picks))
        for host, slots in picks:
            mine.append(add(rs, g, host, slots, source))
            grants.append(Grant(rid, leaf, g, host, slots, source))
            placed += slots
        return placed

    def _hold_back(self, rs: RequestState, g: str, picks: list[tuple[str, int]] | OpenHosts, source: str,
                   placed: int | None = None) -> int:
        """``_place`` for a request phase 8 will take back (``_give``): every count that
        ``ClusterState.add`` moves and a later phase reads (the request's and the
        leaf's, the pool's, the hosts'), moved alike; allocation ids are used up alike.
        Only a share pool's slots in the pool and surplus phases come here: phase 6
        reclaims only from leaves above what they may keep, and no grant of those
        phases takes a leaf there; ``_mark`` checks it (``_held_back_keys``).
        The picks are kept whole (``HeldSlots``), and on hosts only their group holds
        they are taken when something reads or moves a host (ClusterState.hold_on_hosts):
        the cost of a wide request held back is then not one per host it spans."""
        if not picks:
            return 0
        s = self.s
        leaf = rs.spec.consumer
        n = len(picks)
        if placed is None:
            placed = sum(map(itemgetter(1), picks))
        grants = self.d.grants
        held = HeldSlots(g, picks, source, s.use_ids(n), len(grants), placed, leaf)
        grants.extend(repeat(HELD, n))  # their places among the grants, should they become ones
        self.held_back.setdefault(rs.spec.id, []).append(held)
        s.hold_on_hosts(held)
        s.count_held(rs, g, source, placed)
        self._held_back_keys.add((leaf, g, source))
        return placed

    def _materialise(self, rs: RequestState) -> None:
        """A request given slots held back (``_hold_back``) is given more by a grant that
        may take it to its min: what it was given becomes allocations and grants now,
        each with the id and the place among the grants it was given then, and in the
        books' order by id (all that came to them since has larger ids), as if made
        then. Nothing between read what differs: no phase marks slots held back."""
        s = self.s
        leaf = rs.spec.consumer
        mine = self.granted_now.setdefault(rs.spec.id, [])
        grants = self.d.grants
        for held in self.held_back.pop(rs.spec.id):
            g, source = held.group, held.source
            s.count_held(rs, g, source, -held.placed)
            if not held.on_hosts:
                s.settle()
            for i, (host, slots) in enumerate(held.picks):
                s.give_on_host(host, leaf, slots)
                mine.append(s.add_as(held.first + i, rs, g, host, slots, source))
                grants[held.at + i] = Grant(rs.spec.id, leaf, g, host, slots, source)

    def _unhold(self, rs: RequestState, held: HeldSlots) -> None:
        """Slots held back for ``rs`` (``_hold_back``) no longer counted, and off their
        hosts: what phase 8 does to them."""
        self.s.count_held(rs, held.group, held.source, -held.placed)
        self.s.unhold_on_hosts(held)

    def _note_stuck(self, leaf: str, g: str) -> None:
        """The leaf had room in ``g`` but could not place anything: it must not hold
        up the surplus for others (``_pool_has_deficit``), and reclaiming for it is
        futile until something outside the engine changes (``ClusterState.epoch``)."""
        self.stuck.add((leaf, g))
        self.s.futile[(leaf, g)] = self.s.futile_at = self.s.epoch

    def _serve(self, leaves: list[str], room: Callable[[str, str, GroupView], bool],
               serve: Callable[[str, RequestState, str, GroupView], bool | None],
               groups: Callable[[str], Iterable[str]] | None = None,
               first: Callable[[str], bool] | None = None) -> None:
        """For each leaf: the groups where ``room`` says there is something to be had
        (among ``groups(leaf)`` if given: those a phase knows it can serve at all);
        then its open requests in arrival order, each request's groups in its order,
        until the leaf wants nothing more or no group has room left. ``first(leaf)``,
        if given, may serve the leaf itself, exactly as this would (True: done).
        ``serve`` returns True when it changed nothing (anything else: it may have)."""
        views, want, unmet_in = self.views, self.want, self.s.unmet_in
        every = self.s.group_names
        for leaf in leaves:
            if want.get(leaf, 0) <= 0:
                continue
            if first is not None and first(leaf):
                continue
            open_groups = {g for g in (every if groups is None else groups(leaf))
                           if unmet_in[g].get(leaf, 0) > 0 and leaf in views[g].settings
                           and room(leaf, g, views[g])}
            if open_groups:
                self._walk(leaf, 0, open_groups, room, serve, set(open_groups))

    def _walk(self, leaf: str, i: int, open_groups: set[str], room: Callable[[str, str, GroupView], bool],
              serve: Callable[[str, RequestState, str, GroupView], bool | None],
              fresh: set[str] | None = None) -> None:
        """``_serve`` for one leaf, from the ``i``-th request that still wants slots on.
        ``fresh``: groups of ``open_groups`` where ``room`` said yes with nothing changed
        since (it is not asked again there while ``serve`` changes nothing)."""
        views, want = self.views, self.want
        if fresh is None:
            fresh = set()
        # those that still want slots, in arrival order (held in full: nothing to serve),
        # walked in order and only as far as needed (a long queue is not copied): while
        # serving, a request can only leave the book (served in full), never join it.
        # The book is read through an iterator while nothing changes (most requests of
        # a leaf that phase 6 cannot start), by position once something may have
        book = self.s.wanting_of.get(leaf)
        walk = None
        while book is not None and i < len(book):
            if walk is None:
                walk = islice(in_order(book), i, None)
            rs = next(walk)
            for g in rs.groups:
                if g in open_groups:
                    if serve(leaf, rs, g, views[g]) is True:
                        if g in fresh:
                            continue  # nothing changed: its room is what it was
                    else:
                        walk = None
                        fresh.clear()
                    if want[leaf] <= 0:
                        break  # served: whether room is left no longer matters
                    if room(leaf, g, views[g]):
                        fresh.add(g)
                    else:
                        open_groups.discard(g)
            if rs.held < rs.max:
                i += 1  # still in the book; a request served in full left it, the next took its place
            if want[leaf] <= 0 or not open_groups:
                break
        else:
            self.sensitive.add(leaf)  # every request looked at: a new one would be too

    def _wanting(self, among) -> list[str]:
        """The leaves of ``among`` that still want slots, in serving order."""
        idx = self.s.consumers
        return sorted((x for x in among if self.want.get(x, 0) > 0),
                      key=lambda p: (p not in self.first, idx[p].index))
