"""Phase 8 of a cycle: a request that did not reach its ``min`` gives this cycle's
grants back (and the slots held back for it are no longer counted).

A reservation's request still short of its min comes first (``_last_call``): the
other requests that did not reach theirs give back first, and it takes what they
leave, from its share pools and its lenders. Without that, two rigid requests could
split the idle slots so that neither reaches its min, every cycle alike, with nothing
running that could ever end and change it."""

from __future__ import annotations

from apportion.engine import reserve
from apportion.engine.phases.base import HELD, CyclePart


class Minimum(CyclePart):
    """Phase 8's method; ``Cycle`` inherits it."""

    def _enforce_min(self) -> None:
        undo: set[str] = set()
        if self.reserved:
            self._last_call(undo)
        s = self.s
        for rid in [rid for rid in self.granted_now if s.requests[rid].held < s.requests[rid].min]:
            self._take_back(rid, undo)
        for rid in list(self.held_back):
            self._take_back(rid, undo)
        if undo:
            self.d.grants = [gr for gr in self.d.grants if gr is not HELD and gr.request not in undo]
        self._held_back_keys.clear()

    def _take_back(self, rid: str, undo: set[str]) -> None:
        """What ``rid``, still below its min, was given this cycle is given back:
        its allocations removed, its slots held back no longer counted."""
        s = self.s
        rs = s.requests[rid]
        allocs = self.granted_now.pop(rid, ())
        if rs.held < rs.min:
            for a in allocs:
                if a.id in s.allocs:
                    s.remove(a)
        held = self.held_back.pop(rid, ())
        assert not held or rs.held < rs.min, "a request held back reached its min"
        changed = s.changed
        for h in held:
            if changed is not None:
                changed.update(range(h.first, h.first + len(h.picks)))
            self._unhold(rs, h)
        undo.add(rid)

    def _last_call(self, undo: set[str]) -> None:
        """Each reservation's request still short of its min: the other requests of its
        group that did not reach theirs give back what they were given this cycle, and
        it takes what that leaves idle in its share pools, then from its lenders."""
        s = self.s
        for g, rs in self.reserved.items():
            if rs.held >= rs.min or rs.spec.id not in s.requests:
                continue
            losers = [rid for rid in {**self.granted_now, **self.held_back}
                      if rid != rs.spec.id and rid not in undo and s.requests[rid].held < s.requests[rid].min
                      and g in s.requests[rid].groups]
            if not losers:
                continue
            for rid in losers:
                self._take_back(rid, undo)
            leaf = rs.spec.consumer
            self.want[leaf] = max(self.want.get(leaf, 0), rs.min - rs.held)
            reserve.keep(self, g, rs, 0)
            v = self.views[g]
            if rs.held < rs.min and v.settings[leaf].borrow:
                # not a lender taking slots back (reclaims on their way to it): its idle
                # slots are what its own request, given back just now, waits on with them;
                # lent out again, they were taken back again, for ever
                incoming = s.incoming
                lenders = {x for x in v.gp.lenders if self._lendable(x, g, v) > 0 and not incoming.get(x)}
                if lenders:
                    self._borrow_for(leaf, rs, g, v, lenders)
            if rs.held >= rs.min:
                reserve.protect_if_beyond(self, g, rs)
