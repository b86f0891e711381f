"""What the console's Resources page shows: the cluster, its consumers and its hosts per
resource kind (slots, cores, memory in GB, GPUs and the custom kinds agents report), counted
as ``/v1/hosts`` and ``/v1/consumers`` count them (``service/kinds.py``: each slot held counts
what one slot of its allocation asked for), in one compact read-only answer a page at a time.

A consumer's ``dominant_share`` is the largest, over the kinds other than slots, of what its
subtree holds over what the hosts that are not lost have, each kind weighted by the plan's
``policy.weights``: the share Dominant Resource Fairness (Ghodsi et al., NSDI 2011) compares.
Nothing here changes anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apportion.console.views import DOWN
from apportion.service import kinds

if TYPE_CHECKING:
    from apportion.service.auth import Principal
    from apportion.service.master import Master

ORDER = ("slots", "cores", "memory", "gpus")  # the kinds every host has, in this order; custom kinds after


def _round(v: dict[str, float]) -> dict[str, float]:
    return {k: round(x, 6) + 0.0 for k, x in v.items()}


def _dominant(used: dict[str, float], totals: dict[str, float], weights: dict[str, float]) -> tuple[float, str | None]:
    best, which = 0.0, None
    for k, x in used.items():
        if k == "slots" or totals.get(k, 0.0) <= 0 or x <= 0:
            continue
        s = weights.get(k, 1.0) * x / totals[k]
        if s > best + 1e-12:
            best, which = s, k
    return best, which


def kind_view(m: Master, p: Principal, offset: int = 0, limit: int = 200, name: str | None = None) -> dict[str, Any]:
    """The cluster's totals and use per kind, every consumer ``p`` may see with what its subtree
    holds of each kind (summed over the resource groups) and its dominant share, what consumers
    outside its scope hold (``others``), and a page of hosts (sorted by name; ``name``: those
    whose name has it, in any case) with what each has, what is held there, and the part of
    each of its GPUs that live activities hold."""
    by_host = kinds.used_by_host(m)
    totals: dict[str, float] = {}
    used: dict[str, float] = {}
    for h in m.hosts.values():
        if h.state in DOWN:
            continue
        for k, x in kinds.host_total(h).items():
            totals[k] = totals.get(k, 0.0) + x
        for k, x in by_host.get(h.name, {}).items():
            used[k] = used.get(k, 0.0) + x
    names = [k for k in ORDER if k in totals] + sorted(k for k in totals if k not in ORDER)
    weights = dict(m.engine.plan.policy.weights)
    per = kinds.consumer_totals(kinds.used_by_consumer(m))
    rows = []
    for c in m.engine.plan.consumers:
        if not p.may_see(c.path):
            continue
        mine = per.get(c.path, {})
        share, which = _dominant(mine, totals, weights)
        rows.append({"consumer": c.path, "leaf": c.is_leaf, "used": _round({k: mine.get(k, 0.0) for k in names}),
                     "dominant_share": round(share, 6), "dominant_kind": which})
    # what consumers out of the token's scope hold (work is held by leaves)
    hidden = [c.path for c in m.engine.plan.consumers if c.is_leaf and not p.may_see(c.path)]
    others = {k: sum(per.get(leaf, {}).get(k, 0.0) for leaf in hidden) for k in names}
    hosts = sorted(m.hosts.values(), key=lambda h: h.name)
    if name:
        low = name.lower()
        hosts = [h for h in hosts if low in h.name.lower()]
    page = []
    for h in hosts[offset:offset + limit]:
        total = kinds.host_total(h)
        held = by_host.get(h.name, {})
        gpus = kinds.devices_used(m.live_on.get(h.name, {}).values())["gpus"]
        page.append({"name": h.name, "state": h.state, "closed": h.closed,
                     "total": _round({k: total.get(k, 0.0) for k in names}),
                     "used": _round({k: held.get(k, 0.0) for k in names}), "gpus": gpus})
    return {"kinds": names, "totals": _round(totals), "used": _round(used), "weights": weights,
            "consumers": rows, "others": _round(others), "total": len(hosts), "offset": offset, "hosts": page}
