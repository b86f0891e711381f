"""Multi-resource requests on the live master: the engine's Dominant Resource Fairness
(engine/drf.py) places them, on the resource vectors the agents report.

- **Hosts.** Each reported host enters the plan with the vector its agent reported
  (``host_vector``): ``cores``, ``memory`` (GB; the host's memory where the agent gave none),
  ``gpus`` (how many devices) and each custom kind (``--resource NAME=N``). A host whose agent
  reported no vector keeps what the plan says of it (its ``resources``, if any).
- **Requests.** An allocation with ``resources`` asks for that vector per slot
  (``slot_vector``); the engine serves it by Dominant Resource Fairness and puts each
  instance on one host where every kind fits, the per-kind ``owned``/``max``/``lend`` of the
  plan applying. ``gpu_model`` keeps it to hosts whose GPUs are all of that model; hosts it
  released with ``blocked`` never serve it again (``HostFilter``).
- **Devices.** Which GPU indices an activity gets on the host the engine chose is
  service/devices.py's choice, the devices the engine counted for the allocation there first
  (``engine_devices``); it never decides whether or where work fits.
- **The books.** The engine keeps vector work apart from the slot books (``engine.kinds``);
  the functions here are what the master asks of either, by request: what is held on a host,
  giving back, what processes use (and the fence on what they still use once it is taken),
  the holdings and fences to store and publish, and the restore after a restart. Allocation
  ids are one namespace for both, so the store's holdings name either kind alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from apportion.engine import Engine, Host, Request
from apportion.engine.drf import FENCE
from apportion.engine.model import HostFilter, Kinds
from apportion.engine.state import Allocation, PendingReclaim
from apportion.service import devices
from apportion.service.published import AllocationPub, HostPub
from apportion.vectornames import VECTOR_FIELDS

EPS = 1e-9
BUILT_IN = ("cores", "memory", "gpus")
RESERVED = VECTOR_FIELDS


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 else 0.0


def host_vector(h: HostPub) -> dict[str, float] | None:
    """What the host has of each kind, as its agent reported it; None where it reported none."""
    res = h.resources
    if not isinstance(res, dict):
        return None
    out = {"cores": _num(res.get("cores")), "memory": _num(res.get("memory")) or _num(h.memory),
           "gpus": _num(res.get("gpus"))}
    custom = res.get("custom")
    for name, n in (custom.items() if isinstance(custom, dict) else ()):
        if isinstance(name, str) and name not in RESERVED:
            out[name] = _num(n)
    return out


def slot_vector(a: AllocationPub) -> Kinds:
    """What each slot of ``a`` needs, for the engine: the positive amounts of ``resources``
    (``memory`` there, else the allocation's ``memory`` per slot), a GPU need above one that is
    not whole rounded up to whole devices (as devices.py hands them out); () for a plain slot
    request (no ``resources``, or nothing above 0 in them)."""
    res = a.resources if isinstance(a.resources, dict) else None
    if not res:
        return ()
    need = [("cores", _num(res.get("cores"))), ("gpus", _num(res.get("gpus"))),
            ("memory", _num(res.get("memory")) or _num(a.memory))]
    if need[1][1] > 1:
        need[1] = ("gpus", float(math.ceil(need[1][1] - EPS)))
    custom = res.get("custom")
    if custom and isinstance(custom, dict):
        need += [(name, _num(n)) for name, n in custom.items()]
        need.sort()
    return tuple(kv for kv in need if kv[1] > 0)


class VectorFilter:
    """Where a vector request may go: its requirement, hosts it blocked, and with a
    ``gpu_model`` only hosts whose GPUs are all of that model (case-blind, within the name)."""

    __slots__ = ("blocked", "hosts", "inner", "model")

    def __init__(self, hosts: Mapping[str, HostPub], inner: HostFilter | None, model: str | None,
                 blocked: Iterable[str]) -> None:
        self.hosts = hosts  # the master's, read as they are now
        self.inner = inner
        self.model = model
        self.blocked = frozenset(blocked)

    def __call__(self, host: Host) -> bool:
        if host.name in self.blocked or (self.inner is not None and not self.inner(host)):
            return False
        if self.model is None:
            return True
        gpus = devices.host_gpus(self.hosts.get(host.name))
        return bool(gpus) and all(devices.model_fits(self.model, g) for g in gpus)


def where(m: Any, a: AllocationPub, need: Kinds, requirement: HostFilter | None) -> HostFilter | None:
    """Where ``a`` may go: its ``requirement``, and for a vector request (``need``) its
    ``gpu_model`` and the hosts it blocked too."""
    if not need:
        return requirement
    model = a.resources.get("gpu_model") if isinstance(a.resources, dict) else None
    if model or a.blocked:
        return VectorFilter(m.hosts, requirement, model if isinstance(model, str) and model else None, a.blocked)
    return requirement


def check(exclusive: bool, resources: dict[str, Any] | None) -> str | None:
    """Why a new allocation's resources cannot be served (None when they can): 422's words."""
    custom = (resources or {}).get("custom") or {}
    asks = any(_num((resources or {}).get(k)) for k in BUILT_IN) or any(_num(v) for v in custom.values())
    if exclusive and asks:
        return "exclusive: an allocation with resources shares its hosts (exclusive is for slot requests)"
    return None


# -- the books: slot work in engine.state, vector work in engine.kinds ---------------------------
def _vector(e: Engine, rid: str, host: str | None = None) -> bool:
    book = e.kinds
    return rid in book.requests or (host is not None and (rid, host) in book.fenced)


def is_open(e: Engine, aid: int) -> bool:
    """Whether the engine holds ``aid`` as an open request, slot or vector."""
    rid = str(aid)
    return rid in e.state.requests or rid in e.kinds.requests


def held_on(m: Any, aid: int, host: str) -> int:
    e, rid = m.engine, str(aid)
    return e.kinds.held_on(rid, host) if rid in e.kinds.requests else e.state.held_on(rid, host)


def release_hosts(m: Any, a: AllocationPub, hosts: Iterable[str], block: bool,
                  slots: Mapping[str, int] | None = None) -> int:
    """What ``a`` holds on ``hosts`` (or ``slots[host]`` of it) given back; ``block``: never
    there again (``a.blocked`` is the caller's to extend)."""
    e, rid = m.engine, str(a.id)
    if rid not in e.kinds.requests:
        return e.release_hosts(rid, hosts, block=block, slots=slots)
    hosts = set(hosts)
    if block:
        names = set(a.blocked) | hosts | set(slots or ())
        kr = e.kinds.requests[rid]
        base = kr.spec.requirement
        inner = base.inner if isinstance(base, VectorFilter) else base
        model = base.model if isinstance(base, VectorFilter) else None
        e.kinds.respec(rid, replace(kr.spec, requirement=VectorFilter(m.hosts, inner, model, names)))
    return e.kinds.release_on(e.state, rid, hosts, dict(slots or {}))


def holders_on(e: Engine, host: str) -> list[str]:
    """The requests, slot and vector, that hold something on ``host``."""
    got = {a.request for a in e.state.by_host.get(host, {}).values()}
    got |= {a.request for a in e.kinds.on_host.get(host, {}).values()}
    return sorted(got)


def set_in_use(m: Any, aid: int, host: str, slots: int) -> None:
    e, rid = m.engine, str(aid)
    if host not in e.state.hosts:
        return
    if _vector(e, rid, host):
        e.kinds.set_in_use(e.state, rid, host, slots)
    else:
        e.state.set_in_use(rid, host, slots)


def count_in_use(m: Any, aid: int, host: str, slots: int) -> None:
    """At a restart: ``slots`` more used by processes of ``aid`` on ``host``."""
    e, rid = m.engine, str(aid)
    books = e.kinds.in_use if _vector(e, rid, host) else e.state.in_use
    books[(rid, host)] = books.get((rid, host), 0) + slots


def fenced_on(m: Any, aid: int, host: str) -> int:
    e, rid = m.engine, str(aid)
    got = e.kinds.fenced.get((rid, host))
    return got[0] if got is not None else e.state.fences.get((rid, host), 0)


def forget_host(m: Any, name: str) -> None:
    """Nothing of what ran on ``name`` runs any more: every fence there is lifted."""
    e = m.engine
    s, book = e.state, e.kinds
    for rid, host in [k for k in s.fences if k[1] == name and k[0] != FENCE]:
        s.set_in_use(rid, host, 0)
    for rid, host in [k for k in book.fenced if k[1] == name]:
        book.set_in_use(s, rid, host, 0)
    for books in (s.in_use, book.in_use):
        for key in [k for k in books if k[1] == name]:
            del books[key]


def fences(e: Engine) -> dict[tuple[str, str], tuple[int, str | None, str | None, int]]:
    """What the store keeps of the fences: (request, host) -> (slots, group, pool owner, pooled).
    The part of a host's slots that vector work holds is not stored: the engine works it out."""
    s = e.state
    out = {k: (n, *(s.fence_pool[k] if k in s.fence_pool else (None, None, 0)))
           for k, n in s.fences.items() if k[0] != FENCE}
    for k, (n, _) in e.kinds.fenced.items():
        out[k] = (n, None, None, 0)
    return out


def kind_slots(e: Engine) -> dict[str, int]:
    """Host -> the slots of it that vector work holds (what slot work cannot have there)."""
    e.kinds.touched = set()
    return {host: n for (rid, host), n in e.state.fences.items() if rid == FENCE and n > 0}


def kind_slots_changed(e: Engine, published: Mapping[str, int]) -> dict[str, int] | None:
    """What changed of ``kind_slots`` since it was last asked (0: none now), or None."""
    book = e.kinds
    if not book.touched:
        return None
    fences = e.state.fences
    got = {host: fences.get((FENCE, host), 0) for host in book.touched}
    book.touched = set()
    got = {host: n for host, n in got.items() if n != published.get(host, 0)}
    return got or None


def allocations(e: Engine) -> Iterator[Allocation]:
    yield from e.state.allocs.values()
    yield from e.kinds.allocs.values()


def changed(e: Engine) -> Iterator[tuple[int, Allocation | None]]:
    """The allocations added, changed (None: gone) since the last call, slot ones then vector ones."""
    s, book = e.state, e.kinds
    for aid in s.changed or ():
        yield aid, s.allocs.get(aid)
    for aid in book.changed or ():
        yield aid, book.allocs.get(aid)
    s.changed = set()
    book.changed = set()


def restore(m: Any, req: Request, held: list[tuple[int, str, str, int, str, PendingReclaim | None]],
            blocked: Iterable[str]) -> None:
    """An open allocation and what it held, back in the engine after a restart."""
    e = m.engine
    if req.resources:
        e.kinds.restore(e.state, req, held)  # blocked hosts are in its filter (``request``)
    else:
        e.restore(req, held, blocked)


def restore_fence(m: Any, aid: int, host: str, slots: int) -> bool:
    """A stored fence of an open vector request, back in the engine's vector books (False: not one)."""
    book, rid = m.engine.kinds, str(aid)
    kr = book.requests.get(rid)
    if kr is None:
        return False  # a slot request, or one gone since (kept as slots: the safe side)
    book.fence(m.engine.state, rid, host, slots, kr.need)
    return True


def engine_devices(m: Any, aid: int, host: str) -> list[int]:
    """The GPU indices of ``host`` that the engine counted for ``aid`` there (devices.py hands
    these out first, so its books and the engine's agree)."""
    allocs = [a for a in m.engine.kinds.on_host.get(host, {}).values() if a.request == str(aid)]
    if not allocs:
        return []
    gpus = devices.host_gpus(m.hosts.get(host))
    out: list[int] = []
    for a in sorted(allocs, key=lambda a: a.id):
        for pos, _ in a.gpus:
            if pos < len(gpus) and gpus[pos]["index"] not in out:
                out.append(gpus[pos]["index"])
    return out


def free_on(m: Any, host: str) -> int:
    """Slots of ``host`` that slot work could still get: its slots less those slot allocations
    hold, the part vector work holds and what is fenced."""
    h = m.hosts.get(host)
    if h is None or h.state != "ok":
        return 0
    fenced_here = sum(f[0] for (_, name), f in m.fences.items() if name == host)
    slots_held = m.host_used.get(host, 0) - m.kind_used.get(host, 0)
    return max(0, h.slots - slots_held - m.kind_slots.get(host, 0) - fenced_here)
