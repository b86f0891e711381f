"""What hosts and consumers use per resource kind: slots, cores, memory (GB) and GPUs.

Usage counts what is held, as `used` and `held` do for slots: each slot an allocation holds
counts what one slot of it asked for in `resources` (cores, memory, gpus). A kind it did not
name counts as the slot's part of its host (the host's cores or memory over its slots; memory is
the allocation's `memory` per slot where it gave one), except GPUs: a slot holds a GPU only when
it asked for one (custom kinds, likewise). So a plain slot request on a host of 32 cores and 8 slots
uses 4 cores a slot.

`/v1/hosts` shows each host's `resources_total` and `resources_used`, and `devices_used`, the
GPUs (with the part of each that is held) and pinned CPUs its live activities hold now;
`/v1/consumers` each consumer's `resources_used` in each group (a parent: its subtree's sum), and
`GET /v1/allocations/{id}` the devices its activities hold on each host. Prometheus has the same
(service/metrics.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apportion.service.devices import _used as devices_held
from apportion.service.published import ActivityPub, AllocationPub, HostPub

KINDS = ("slots", "cores", "memory", "gpus")


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 else 0.0


def _tidy(v: dict[str, float]) -> dict[str, float | int]:
    """Whole numbers as ints, the rest to 6 places (a sum of fractions drifts)."""
    out: dict[str, float | int] = {}
    for k, x in v.items():
        r = round(x, 6)
        out[k] = int(r) if r == int(r) else r
    return out


def host_total(h: HostPub) -> dict[str, float]:
    """The host's vector as its agent reported it; without one, its slots and memory (no cores known)."""
    res = h.resources if isinstance(h.resources, dict) else {}
    out = {"slots": float(h.slots), "cores": _num(res.get("cores")), "memory": _num(res.get("memory")) or h.memory,
           "gpus": _num(res.get("gpus"))}
    custom = res.get("custom")
    for name, n in (custom.items() if isinstance(custom, dict) else ()):
        if name not in out:
            out[name] = _num(n)
    return out


def per_slot(a: AllocationPub, h: HostPub | None) -> dict[str, float]:
    """What one slot of ``a`` counts on ``h`` (module docstring)."""
    res = a.resources if isinstance(a.resources, dict) else {}
    total = host_total(h) if h is not None else {"cores": 0.0, "memory": 0.0}
    n = max(1, h.slots) if h is not None else 1
    out = {"slots": 1.0, "cores": _num(res.get("cores")) or total["cores"] / n,
           "memory": _num(res.get("memory")) or _num(a.memory) or total["memory"] / n,
           "gpus": _num(res.get("gpus"))}
    custom = res.get("custom")
    for name, x in (custom.items() if isinstance(custom, dict) else ()):
        if name not in out and _num(x):
            out[name] = _num(x)  # a custom kind counts only where asked for, as GPUs do
    return out


def _zero() -> dict[str, float]:
    return dict.fromkeys(KINDS, 0.0)


def _add(acc: dict[str, float], vec: dict[str, float], times: int) -> None:
    for k, x in vec.items():
        acc[k] = acc.get(k, 0.0) + x * times


def _held(m: Any) -> Iterable[tuple[Any, AllocationPub, dict[str, float]]]:
    """(holding, its allocation, what one slot of it counts) for each holding the master publishes."""
    cache: dict[tuple[int, str], dict[str, float]] = {}
    for hd in m.holdings.values():
        a = m.allocations.get(hd.request)
        if a is None:
            continue
        key = (a.id, hd.host)
        vec = cache.get(key)
        if vec is None:
            vec = cache[key] = per_slot(a, m.hosts.get(hd.host))
        yield hd, a, vec


def used_by_host(m: Any) -> dict[str, dict[str, float]]:
    """Host -> what the slots held on it use, per kind."""
    out: dict[str, dict[str, float]] = {}
    for hd, _a, vec in _held(m):
        _add(out.setdefault(hd.host, _zero()), vec, hd.slots)
    return out


def _ancestors(path: str) -> list[str]:
    """``/A/b`` -> [``/A/b``, ``/A``]: a parent's usage is its subtree's."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts), 0, -1)] or ["/"]


def used_by_consumer(m: Any) -> dict[tuple[str, str], dict[str, float]]:
    """(consumer, group) -> what its subtree's held slots in that group use, per kind."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for hd, a, vec in _held(m):
        for path in _ancestors(a.consumer):
            _add(out.setdefault((path, hd.group), _zero()), vec, hd.slots)
    return out


def consumer_totals(by_group: dict[tuple[str, str], dict[str, float]]) -> dict[str, dict[str, float]]:
    """Consumer -> its usage summed over the groups."""
    out: dict[str, dict[str, float]] = {}
    for (path, _g), vec in by_group.items():
        _add(out.setdefault(path, _zero()), vec, 1)
    return out


def devices_used(live: Iterable[ActivityPub]) -> dict[str, Any]:
    """The GPUs (index -> the part held, 1 whole) and pinned CPUs that live activities hold."""
    gpus, cpus = devices_held(live)
    return {"gpus": {str(i): round(gpus[i], 6) for i in sorted(gpus)}, "cpus": sorted(cpus)}


def host_json(h: HostPub, used: dict[str, float] | None, live: Iterable[ActivityPub]) -> dict[str, Any]:
    """The fields `/v1/hosts` adds per host."""
    return {"resources_total": _tidy(host_total(h)), "resources_used": _tidy(used or _zero()),
            "devices_used": devices_used(live)}


def consumer_json(used: dict[str, float] | None) -> dict[str, Any]:
    return {"resources_used": _tidy(used or _zero())}


def devices_index(m: Any, one: AllocationPub | None = None) -> dict[int, dict[str, list[ActivityPub]]]:
    """Allocation -> host -> its live activities that hold devices: one pass over the live
    activities for a list of allocations; for ``one``, over those on the hosts it holds."""
    out: dict[int, dict[str, list[ActivityPub]]] = {}
    allocation = one.id if one is not None else None
    hosts = m.live_on if one is None else {h: m.live_on[h] for h in one.hosts if h in m.live_on}
    for host, live in hosts.items():
        for x in live.values():
            if isinstance(x.devices, dict) and (allocation is None or x.allocation == allocation):
                out.setdefault(x.allocation, {}).setdefault(host, []).append(x)
    return out


def allocation_devices(a: AllocationPub, index: dict[int, dict[str, list[ActivityPub]]]) -> dict[str, Any]:
    """The devices the allocation's live activities hold, by host:
    {HOST: [{"activity", "gpus", "gpu_share"?, "cpus"?}]} (hosts where they hold none are left out)."""
    mine = index.get(a.id, {})
    return {"devices": {host: [{"activity": x.id, **x.devices} for x in sorted(mine[host], key=lambda x: x.id)]
                        for host in sorted(mine)}}
