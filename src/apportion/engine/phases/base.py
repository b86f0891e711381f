"""What every phase of a cycle shares: the attributes of the running cycle that the
phase modules read and change (``CyclePart``), and the few constants and helpers
more than one of them uses.

Each phase module defines one mixin class holding that phase's methods; the cycle
(engine/cycle.py's ``Cycle``) inherits them all and sets the attributes below in its
``__init__``. A method of one phase calls another phase's through ``self``, as when
they were one class: no phase module imports engine/cycle.py, nor needs to.
"""

from __future__ import annotations

from apportion.engine.decisions import Decisions, Grant
from apportion.engine.model import Policy
from apportion.engine.state import ClusterState, RequestState, Usage

INF = float("inf")

HELD = Grant("", "", "", "", 0, "")  # the place of a grant held back (Cycle._hold_back) among the grants


def pool_have(u: Usage | None, owner: str, src: str) -> int:
    """What a leaf holds from ``owner``'s pool (source ``src``) plus what is being
    reclaimed for it from there: what counts against its quota in that pool."""
    if u is None:
        return 0
    return u.pools.get(owner, 0) + (u.incoming.get(src, 0) if u.incoming else 0)


class CyclePart:
    """The running cycle's state, as the phases see it (set by ``Cycle.__init__``,
    where each is described)."""

    hold_back: bool
    s: ClusterState
    now: float
    policy: Policy
    d: Decisions
    views: dict  # group -> GroupView (phases/view.py)
    want: dict[str, int]
    granted_now: dict[str, list]
    held_back: dict[str, list]
    _hold_back_ok: bool
    _pick_log: list | None
    _held_back_keys: set[tuple[str, str, str]]
    _excess_cache: dict[tuple[str, str], dict[str, int]]
    _victim_lists: dict[tuple[str, str], list]
    _excess_pos: dict[tuple[str, str], list]
    _sparing: bool
    _spared: dict[tuple[str, str], dict[str, int]]
    _fill_live: dict[str, dict]
    could_cache: dict[tuple, list]
    _no_fit: dict[tuple[str, str, str], int]
    stuck: set[tuple[str, str]]
    first: set[str]
    _shorts: dict[tuple[str, bool, str], list[str]]
    sensitive: set[str]
    want0: frozenset[str]
    settle_quiet: bool
    cut_short: bool
    reserved: dict[str, RequestState]
    freed: list[tuple[str, str, int]]
    keeping: frozenset[str]
