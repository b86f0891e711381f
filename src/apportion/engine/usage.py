"""Fair over time: use beyond a consumer's share is remembered, and repaid.

A reservation (engine/reserve.py) may start a wide job beyond what its consumer
deserves at the moment. With ``Policy.usage_half_life`` set, what each leaf holds
beyond what it deserves is integrated over time (slot-seconds) and decays with that
half-life, as the usage behind Slurm's fair-share factor does. Divided by the
half-life it reads as slots: about how far above its share the leaf has stood over
the last half-life. Reservations go to the consumer furthest below what it deserves
*less that debt*, so a consumer that ran wide lets the others go first next time,
and no consumer can hold the machine by asking wide again and again.

Off (no half-life), nothing is counted and reservations follow the share of the
moment alone.
"""

from __future__ import annotations

from apportion.engine.state import ClusterState

SMALL = 1e-9  # slot-seconds below which a debt is forgotten


def deserved_of(v, leaf: str) -> int:
    """What ``leaf`` deserves in the group of view ``v``: its owned part and its share
    of each pool above it."""
    d = v.own_part.get(leaf, 0)
    for owner in v.gp.pools_of[leaf]:
        d += v.deserved_pool.get(owner, {}).get(leaf, 0)
    return d


def account(s: ClusterState, views: dict, now: float, half_life: float) -> None:
    """Bring every leaf's debt up to ``now``: decay it over the time since the last
    cycle, and add what the leaf held beyond what it deserves over that time (read
    from the state as the last cycle left it, and this cycle's views)."""
    last, s.debt_at = s.debt_at, now
    if last is None or now <= last:
        return
    dt = now - last
    debt = s.debt
    if debt:
        decay = 0.5 ** (dt / half_life)
        for leaf in list(debt):
            x = debt[leaf] * decay
            if x < SMALL:
                del debt[leaf]
            else:
                debt[leaf] = x
    for g, v in views.items():
        for leaf, u in s.usage_in[g].items():
            if u.held and leaf in v.gp.pools_of:
                over = u.held - deserved_of(v, leaf)
                if over > 0:
                    debt[leaf] = debt.get(leaf, 0.0) + over * dt


def debt_slots(s: ClusterState, leaf: str, half_life: float | None) -> float:
    """The leaf's debt read as slots (0 without a half-life)."""
    if half_life is None:
        return 0.0
    return s.debt.get(leaf, 0.0) / half_life
