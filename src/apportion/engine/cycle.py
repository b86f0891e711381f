"""One scheduling cycle for slot plans (EGO's slot-plan documentation).

The cycle reads the state, decides, and applies its own decisions to the state so
that each phase sees what the previous one did. Order of the phases, which is the
order in which a leaf with unmet demand is served (apportion's reading, docs/policies.md
section 16), each with the module of engine/phases/ that holds it:

0. removals (removals.py): reclaims whose grace has run out are taken by force;
   reclaims whose beneficiary no longer wants the slots are called off;
1. per group (view.py): capacity, ownership honoured in rank order, pools, demand,
   deserved;
2. own idle owned slots (own.py; an owner blocked by an ancestor's max reclaims within it);
3. share-pool slots up to the deserved share, nearest pool first (pool.py;
   base_quota: static quota in every group first, then the dynamic quota);
4. borrowing of lent slots (borrow.py; rank order of borrowers, first come first served);
5. reclaim of the leaf's own lent slots (reclaim.py; worst-ranked borrower first);
   reclaim_before_borrow swaps 4 and 5;
6. share-pool reclaim for fairness, the most over-share first (reclaim.py;
   share_pool_reclaim);
7. surplus: idle pool slots beyond deserved, first come first served (surplus.py);
8. a request that did not reach its ``min`` gives this cycle's grants back (minimum.py).

After them a pool that shrank takes its excess back (reclaim.py). The rigid policy's
reservations and backfill (engine/reserve.py, backfill.py, rigid.py, usage.py) come
after phase 2. What the serving phases give with, and the walk that serves leaves,
are in give.py; what they all share in base.py; a cycle that decided nothing is kept
as a QuietRecord (quiet.py).

Each phase first asks, per leaf and group, whether there is anything to be had at
all, and only then walks the leaf's requests: most leaves, most cycles, get
nothing, and finding that out must cost next to nothing.
"""

from __future__ import annotations

from apportion.engine import reserve, usage
from apportion.engine.decisions import Decisions
from apportion.engine.index import rank_key
from apportion.engine.phases.borrow import Borrowing
from apportion.engine.phases.give import Giving
from apportion.engine.phases.minimum import Minimum
from apportion.engine.phases.own import OwnSlots
from apportion.engine.phases.pool import SharePools
from apportion.engine.phases.quiet import QuietRecord
from apportion.engine.phases.reclaim import Reclaims
from apportion.engine.phases.removals import Removals
from apportion.engine.phases.surplus import Surplus
from apportion.engine.phases.view import GroupView, Views
from apportion.engine.state import ClusterState, RequestState

__all__ = ["Cycle", "GroupView", "QuietRecord", "rank_key"]


class Cycle(Removals, Views, OwnSlots, SharePools, Borrowing, Reclaims, Surplus, Minimum, Giving):
    """One cycle: the state it sets (each phase module's methods read and change it) and
    ``run()``, the phases in order. The phases' methods are those of the mixins it
    inherits, one per phase module (engine/phases/)."""

    # slots given to a request still below its min are counted, not made into
    # allocations, until a later grant of the cycle may take it there (_hold_back);
    # off, every grant is an allocation at once: the same decisions, for the tests
    hold_back = True

    def __init__(self, state: ClusterState, now: float) -> None:
        self.s = state
        self.now = now
        self.policy = state.plan.policy
        self.d = Decisions(now)
        self.views: dict[str, GroupView] = {}
        self.want: dict[str, int] = {}  # leaf -> slots it still wants this cycle
        self.granted_now: dict[str, list] = {}  # request -> allocations granted this cycle
        # request -> slots placed this cycle for a request that cannot reach its min
        # (see _give): [HeldSlots (state.py)], counted like
        # allocations but never made into one, as phase 8 takes them back anyway
        self.held_back: dict[str, list] = {}
        self._hold_back_ok = False  # the serving phases where that is exact (_give)
        self._pick_log: list | None = None  # where _give notes its picks (reserve.keep)
        self._held_back_keys: set[tuple[str, str, str]] = set()  # (leaf, group, source) of those
        self._excess_cache: dict[tuple[str, str], dict[str, int]] = {}
        self._victim_lists: dict[tuple[str, str], list] = {}
        # (group, pool owner) -> [the excess dict, the sum of its values over 0] (Reclaims._victims_hold)
        self._excess_pos: dict[tuple[str, str], list] = {}
        self._sparing = False  # phase 6: protected work is not counted as excess (engine/rigid.py)
        self._spared: dict[tuple[str, str], dict[str, int]] = {}  # phase 6: (group, source) -> protected_held
        self._fill_live: dict[str, dict] = {}  # phase 6: group -> backfill.fill_live, if any
        self.could_cache: dict[tuple, list] = {}  # phase 6: rigid.ReclaimGuard.open's bounds
        self.stuck: set[tuple[str, str]] = set()  # (leaf, group) that could not be placed
        self.first: set[str] = set()  # beneficiaries of reclaims completed now: served first
        self._shorts: dict[tuple[str, bool, str], list[str]] = {}
        # leaves whose decisions here could change if they wanted more: what they still
        # wanted bounded something, or their walk reached the end of their requests
        # (QuietRecord: a cycle with nothing but new requests of other leaves since)
        self.sensitive: set[str] = set()
        self.want0: frozenset[str] = frozenset()
        # an engine that skips quiet cycles (the simulator) ends a cycle after phase 3
        # when the others are certain to do nothing, and works that phase out with sums
        # (_plain_phase3): cut_short
        self.settle_quiet = False
        self.cut_short = False
        # the rigid policy (engine/reserve.py): group -> the request with a reservation
        # this cycle; (group, beneficiary, slots) of the reclaims completed at its start
        self.reserved: dict[str, RequestState] = {}
        # (group, beneficiary, slots) freed for reclaims' beneficiaries: marked slots
        # their holder gave back since the last cycle, then those taken at their deadline
        self.freed: list[tuple[str, str, int]] = state.released_marked
        state.released_marked = []
        # (group, beneficiary) of those marked for a reservation that was ready (reserve.choose)
        self.ready_freed: set[tuple[str, str]] = state.ready_freed
        state.ready_freed = set()
        self.keeping: frozenset[str] = frozenset()  # leaves with slots kept: no reclaim victims

    def run(self) -> Decisions:
        s = self.s
        s.recent = []
        self.d.lost, s.lost = s.lost, []
        self._expire()  # 0. removals
        self._cancel_unneeded()
        for g in s.group_names:  # 1. the group views
            self.views[g] = self._view(g)
        incoming = s.incoming
        for leaf, n in s.unmet.items():
            if n > 0:
                n -= incoming.get(leaf, 0)
                if n > 0:
                    self.want[leaf] = n
        self.want0 = frozenset(self.want)
        if s.reservations:
            s.reservations = {}
        if self.policy.usage_half_life is not None:
            usage.account(s, self.views, self.now, self.policy.usage_half_life)
        if s.rigid:
            self.reserved = reserve.choose(self)
        if self.want:
            # reservations come after the owners' own slots (phase 2), before the share
            # pools: where nobody owns slots phase 2 has nothing to do, and they come
            # first, before the sums of _plain_phase3 are worked out
            early = bool(self.reserved) and not any(v.gp.owners for v in self.views.values())
            if early:
                self._reserve()
            steps = self._plain_phase3() if self.settle_quiet else None
            if steps is not None:
                self._apply_plain(steps)
                if self.reserved:
                    self._enforce_min()  # the slots kept are given back, as phase 8 does
                self.cut_short = True
                if s.rigid:
                    reserve.after_cycle(self)
                return self.d
            self._serve_own()  # 2.
            if self.reserved and not early:
                self._reserve()
            self._serve_pool()  # 3.
            if self.policy.reclaim_before_borrow:
                self._reclaim_lent()  # 5.
                self._borrow()  # 4.
            else:
                self._borrow()  # 4.
                self._reclaim_lent()  # 5.
            if self.policy.share_pool_reclaim:
                self._reclaim_pool()  # 6.
            self._surplus()  # 7.
            self._enforce_min()  # 8.
        self.keeping = frozenset()  # slots kept are given back by now
        self._reclaim_overused_pools()  # a pool that shrank
        if s.rigid:
            reserve.after_cycle(self)
        return self.d

    def _reserve(self) -> None:
        """The reservations (engine/reserve.py): backfill, then slots kept or granted."""
        reserve.run(self, self.freed)
        self.keeping = frozenset(rs.spec.consumer for rs in self.reserved.values())
