"""Resource vectors: what a host has and what a slot needs of each kind (cores, memory in
GB, GPUs, any countable custom kind), and the dominant share of Dominant Resource Fairness
(Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of Multiple Resource Types",
NSDI 2011).

A vector is a plain ``dict`` kind -> amount here (the plan holds them as sorted pairs,
``model.Kinds``); a kind not named is 0. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apportion.engine.model import Kinds

EPS = 1e-9  # amounts are sums of floats (a half GPU twice is one): compared with this slack

Vector = dict[str, float]


def vector(pairs: Kinds | Mapping[str, float]) -> Vector:
    return dict(pairs.items() if isinstance(pairs, Mapping) else pairs)


def scaled(v: Mapping[str, float], n: float) -> Vector:
    return {k: a * n for k, a in v.items()}


def add_into(into: Vector, v: Mapping[str, float], sign: float = 1.0) -> None:
    """``into`` += sign * ``v``, in place; kinds that come to 0 stay (cheap and harmless)."""
    for k, a in v.items():
        into[k] = into.get(k, 0.0) + sign * a


def fits(need: Mapping[str, float], free: Mapping[str, float]) -> bool:
    """Every kind of ``need`` is there in ``free``."""
    get = free.get
    for k, a in need.items():  # a plain loop: this runs once or more per grant
        if a > 0 and not a <= get(k, 0.0) + EPS:
            return False
    return True


def within(used: Mapping[str, float], need: Mapping[str, float], limit: Mapping[str, float]) -> bool:
    """``used`` + ``need`` stays within ``limit`` in every kind ``limit`` names."""
    return all(used.get(k, 0.0) + need.get(k, 0.0) <= cap + EPS for k, cap in limit.items())


def total(vectors: Iterable[Mapping[str, float]]) -> Vector:
    out: Vector = {}
    for v in vectors:
        add_into(out, v)
    return out


def shares(used: Mapping[str, float], totals: Mapping[str, float],
           weights: Mapping[str, float] | None = None) -> Vector:
    """Per kind: weight x used / total (kinds the cluster has none of are left out)."""
    w = weights or {}
    return {k: w.get(k, 1.0) * a / totals[k] for k, a in used.items() if totals.get(k, 0.0) > EPS}


def dominant(used: Mapping[str, float], totals: Mapping[str, float],
             weights: Mapping[str, float] | None = None) -> float:
    """The dominant share: the largest of ``shares`` (0 for nothing used)."""
    w = weights or {}
    best = None
    for k, a in used.items():  # ``max(shares(...).values())`` without the dict: once per grant
        t = totals.get(k, 0.0)
        if t > EPS:
            v = w.get(k, 1.0) * a / t
            if best is None or v > best:
                best = v
    return 0.0 if best is None else best


def dominant_kind(used: Mapping[str, float], totals: Mapping[str, float],
                  weights: Mapping[str, float] | None = None) -> str | None:
    """The kind whose share is the dominant one (first by name on ties); None for nothing used."""
    s = shares(used, totals, weights)
    if not s or max(s.values()) <= 0:
        return None
    top = max(s.values())
    return min(k for k, v in s.items() if v >= top - EPS)


def rounded(v: Mapping[str, float], places: int = 6) -> dict[str, float]:
    """A vector for a report: kinds sorted, sums rounded (0.1 + 0.2 shows as 0.3)."""
    return {k: round(v[k], places) + 0.0 for k in sorted(v)}
