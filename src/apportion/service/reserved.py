"""Which allocations have a reservation, and when they are planned to start.

A rigid allocation (``min`` > 0) that waits for slots to come free together may have
a reservation (engine/reserve.py): slots are kept for it as they come free, and its
planned start is known when the running work says how long it runs. After each
cycle the master has committed, the allocations are marked from the engine's
reservations of that cycle: ``reserved`` and ``planned_start`` (Unix seconds; None
when not known or not reserved) in what ``GET /v1/allocations`` shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# the master (service/master.py) is named ``Any``: it imports nothing of this module,
# and app.py hands it in
Master = Any


def observer(m: Master) -> Callable[[Any, float], None]:
    """A hook for ``Master.observers``: after each committed cycle, the allocations
    with a reservation are marked, and those that had one and lost it (started, gone,
    or another chosen) unmarked."""
    marked: set[int] = set()

    def mark(_decisions: Any, _seconds: float) -> None:
        lines = getattr(getattr(m, "engine", None), "reservations", None)  # DUCC's master has none
        now: dict[int, float | None] = {}
        if lines is not None:
            for r in lines():
                try:
                    now[int(r.request)] = r.planned_start
                except ValueError:
                    continue  # not an allocation of the API's (ids are numbers)
        allocations = m.allocations
        for aid in marked - now.keys():
            a = allocations.get(aid)
            if a is not None:
                a.reserved, a.planned_start = False, None
        for aid, start in now.items():
            a = allocations.get(aid)
            if a is not None:
                a.reserved, a.planned_start = True, start
        marked.clear()
        marked.update(now)

    return mark
