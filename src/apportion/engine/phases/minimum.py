"""Phase 8 of a cycle: a request that did not reach its ``min`` gives this cycle's
grants back (and the slots held back for it are no longer counted)."""

from __future__ import annotations

from apportion.engine.phases.base import HELD, CyclePart


class Minimum(CyclePart):
    """Phase 8's method; ``Cycle`` inherits it."""

    def _enforce_min(self) -> None:
        undo = set()
        s = self.s
        for rid, allocs in self.granted_now.items():
            rs = s.requests[rid]
            if rs.held < rs.min:
                for a in allocs:
                    if a.id in s.allocs:
                        s.remove(a)
                undo.add(rid)
        changed = s.changed
        for rid, held in self.held_back.items():
            rs = s.requests[rid]
            assert rs.held < rs.min, "a request held back reached its min"
            for g, host, slots, source, aid, _ in held:
                if changed is not None:
                    changed.add(aid)
                self._unhold(rs, g, host, slots, source)
        if self.held_back or undo:
            self.d.grants = [gr for gr in self.d.grants if gr is not HELD and gr.request not in undo]
        self.held_back = {}
        self._held_back_keys.clear()
