"""Which GPUs (and, where the agent pins cores, which CPUs) each activity of a host holds.

An allocation that asks for `resources: {gpus: G, cores: C, ...}` per slot gets, for each
activity of S slots, S x G GPUs of the host its agent reported, as Slurm's GRES hands out device
files: whole devices, the lowest free indices first, never one device to two live activities.
A need below one GPU (`gpus: 0.5` on one slot) is a share of one device: the device already
shared that fits it best (the most used one that still has room) or a free one, and devices
shared this way are never handed out whole until every share on them has ended; a need above one
that is not whole rounds up to whole devices. The engine decides whether and on which host an
allocation's slots fit (service/resources.py); this ledger only names the devices, those the
engine counted for the allocation on that host first. A host whose agent pins cores (`--pin-cores`)
gives an activity S x C cores (one per slot without `cores`) from the CPUs the agent listed.

The ledger is the host's live activities: each carries its assignment (`devices`), stored with
it, so the ledger rebuilds itself from the store at a restart and an assignment is free again
the moment its activity ends. Not enough free devices: the start is refused (409), naming them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from typing import Any

from apportion.service.published import ActivityPub, AllocationPub, HostPub

EPS = 1e-9


class NotEnough(Exception):
    """The host has not the free devices an activity needs; the message says what it has."""


def host_gpus(host: HostPub | None) -> list[dict[str, Any]]:
    """The GPUs the host's agent reported: [{"index", "model", ...}], by index."""
    res = host.resources if host is not None and isinstance(host.resources, dict) else {}
    devices = res.get("devices")
    if not isinstance(devices, list):
        return []
    out = [d for d in devices if isinstance(d, dict) and isinstance(d.get("index"), int)]
    return sorted(out, key=lambda d: d["index"])


def host_cpus(host: HostPub | None) -> list[int] | None:
    """The CPUs activities are pinned to on `host`, or None where its agent does not pin cores."""
    res = host.resources if host is not None and isinstance(host.resources, dict) else {}
    if not res.get("pin_cores"):
        return None
    cpus = res.get("cpus")
    return sorted(c for c in cpus if isinstance(c, int)) if isinstance(cpus, list) else []


def needs(alloc: AllocationPub | None, slots: int, host: HostPub | None) -> tuple[float, int | None]:
    """(GPUs, cores to pin) an activity of `slots` slots of `alloc` needs on `host` (cores: None
    where the host pins none)."""
    res = alloc.resources if alloc is not None and isinstance(alloc.resources, dict) else {}
    gpus = float(res.get("gpus") or 0) * slots
    cores = None
    if host_cpus(host) is not None:
        per = float(res.get("cores") or 0)
        cores = math.ceil(per * slots - EPS) if per > 0 else slots
    return gpus, cores


def _used(live: Iterable[ActivityPub], skip: int | None = None) -> tuple[dict[int, float], set[int]]:
    """GPU index -> the part of it live activities hold (1.0: whole); the CPUs they are pinned to."""
    gpus: dict[int, float] = {}
    cpus: set[int] = set()
    for a in live:
        d = a.devices
        if a.id == skip or not isinstance(d, dict):
            continue
        share = float(d.get("gpu_share") or 1.0)
        for i in d.get("gpus") or ():
            gpus[i] = gpus.get(i, 0.0) + share
        cpus.update(d.get("cpus") or ())
    return gpus, cpus


def model_fits(model: str | None, gpu: dict[str, Any]) -> bool:
    return model is None or model.lower() in str(gpu.get("model") or "").lower()


def assign(host: HostPub | None, live: Iterable[ActivityPub], alloc: AllocationPub | None,
           slots: int, prefer: Collection[int] = ()) -> dict[str, Any] | None:
    """The devices of a new activity: {"gpus": [...], "gpu_share": f (with a share of one),
    "cpus": [...] (where pinned)}; None when it needs none. ``prefer``: the devices the engine
    counted for the allocation on this host (service/resources.py), taken first where they
    fit. Raises NotEnough."""
    need, cores = needs(alloc, slots, host)
    if need <= EPS and cores is None:
        return None
    model = (alloc.resources or {}).get("gpu_model") if alloc is not None and isinstance(alloc.resources, dict) \
        else None
    live = list(live)
    used, pinned = _used(live)
    name = host.name if host is not None else "?"
    out: dict[str, Any] = {"gpus": []}
    if need > EPS:
        mine = [g["index"] for g in host_gpus(host) if model_fits(model, g)]
        kind = f"{model} GPUs" if model else "GPUs"
        if need < 1 - EPS:
            room = [(used.get(i, 0.0), i) for i in mine if used.get(i, 0.0) + need <= 1 + EPS]
            room = [x for x in room if x[1] in prefer] or room
            shared = [(u, i) for u, i in room if u > EPS]
            if not room:
                raise NotEnough(f"host {name}: no GPU has {need:g} of a device free "
                                f"({_describe(mine, used)})")
            _, best = max(shared) if shared else min(room, key=lambda x: x[1])
            out["gpus"], out["gpu_share"] = [best], round(need, 6)
        else:
            whole = math.ceil(need - EPS)
            free = sorted((i for i in mine if used.get(i, 0.0) <= EPS), key=lambda i: (i not in prefer, i))
            if len(free) < whole:
                raise NotEnough(f"host {name}: {whole} {kind} asked for, {len(free)} free "
                                f"({_describe(mine, used)})")
            out["gpus"] = free[:whole]
    if cores is not None:
        free_cpus = [c for c in host_cpus(host) or [] if c not in pinned]
        if len(free_cpus) < cores:
            raise NotEnough(f"host {name}: {cores} cores to pin asked for, {len(free_cpus)} free")
        out["cpus"] = free_cpus[:cores]
    return out


def _describe(mine: list[int], used: dict[int, float]) -> str:
    if not mine:
        return "it has none"
    held = [f"{i}: {'held' if used.get(i, 0) >= 1 - EPS else f'{used[i]:g} held'}" for i in mine if used.get(i)]
    return f"of {len(mine)}; " + (", ".join(held) if held else "none held")


def start_command(start: dict[str, Any], a: ActivityPub, host: HostPub | None,
                  alloc: AllocationPub | None) -> dict[str, Any]:
    """A start command with its devices: `gpus` always (empty: none visible to it), `cpus` where the
    host pins cores; and, where the allocation asked for memory per slot in `resources`, exactly
    that as its memory limit."""
    d = a.devices if isinstance(a.devices, dict) else {}
    start["gpus"] = list(d.get("gpus") or [])
    if d.get("cpus") is not None:
        start["cpus"] = list(d["cpus"])
    asked = memory_limit(alloc, a.slots)
    if asked is not None and isinstance(start.get("limits"), dict):
        start["limits"] = {**start["limits"], "memory": asked}
    return start


def memory_limit(alloc: AllocationPub | None, slots: int) -> int | None:
    """The memory (bytes) an activity asked for with `resources.memory` (GB per slot), else None."""
    res = alloc.resources if alloc is not None and isinstance(alloc.resources, dict) else {}
    mem = res.get("memory")
    if not isinstance(mem, (int, float)) or isinstance(mem, bool) or mem <= 0:
        return None
    return int(mem * 2**30 * slots)
