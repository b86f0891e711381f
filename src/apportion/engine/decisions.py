"""What one cycle decides. The caller (service, simulator, scenario runner) acts on these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

# Grant, Reclaim and Removal are named tuples: immutable records like frozen
# dataclasses, with the same fields and repr, but made at a third of the cost
# (a busy cycle makes a couple of thousand of them).


class Grant(NamedTuple):
    request: str
    consumer: str
    group: str
    host: str
    slots: int
    source: str  # "own", "pool:/path" (share pool of that consumer; "pool:/" is the public pool), "lent:/lender"


class Reclaim(NamedTuple):
    """Slots the holder must give back by ``deadline``; they stay its own until then."""

    request: str
    consumer: str
    group: str
    host: str
    slots: int
    deadline: float
    beneficiary: str
    reason: str


class Removal(NamedTuple):
    """Slots taken away now: a reclaim's deadline passed, or the host went down (lost)."""

    request: str
    consumer: str
    group: str
    host: str
    slots: int
    reason: str


@dataclass(slots=True)
class Decisions:
    at: float
    grants: list[Grant] = field(default_factory=list)
    reclaims: list[Reclaim] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    lost: list[Removal] = field(default_factory=list)
    cancelled: list[Reclaim] = field(default_factory=list)  # reclaims called off: the holder keeps them
    retagged: int = 0  # allocations whose source the books changed (no effect outside the engine)
    # a cycle at the next tick may decide more with nothing else changed: work with a
    # walltime started while a reservation waits (its planned start may move, and
    # backfill with it), or a reservation's request started (the next one is chosen).
    # The master runs a cycle every tick anyway; a caller that skips quiet ticks (the
    # simulator) runs the next one (engine/reserve.py)
    again: bool = False

    def __bool__(self) -> bool:
        """True when the cycle changed anything, its own books included: a cycle that
        only moved slots between sources may lead the next one to decide."""
        return bool(self.grants or self.reclaims or self.removals or self.lost or self.cancelled
                    or self.retagged)
