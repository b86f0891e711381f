"""Host states, and the fence on what a host that stopped answering may still run.

A host is ``ok`` (takes work), ``closed`` (keeps what it runs, takes nothing new: an
administrator closed it, or processes there survive SIGKILL), ``unreachable`` or ``down``
(docs/service.md, "Hosts"):

- **unreachable**: its agent missed ``missed`` heartbeats in a row. Nothing new is placed
  there, its allocations stay held and its activities keep their state: an agent restarted
  for an upgrade, or a network cut that heals, finds its work as it left it, and adopts it
  (the kubelet's node lifecycle: a node that stops posting its status is ``Unknown`` and
  tainted unreachable before anything on it is evicted).
- **down**: no heartbeat for ``host_lost_after`` seconds (counted from the last one), or
  an administrator confirmed it dead. Its activities are declared ``lost`` and its
  allocations are taken back. Its processes are not known to be gone, though, so their
  slots stay *fenced*: given to nobody, on that host, until its agent comes back and
  reports them gone (it stops them: the master does not know them any more), or until an
  administrator confirms the host dead (``POST /v1/hosts/{name}/confirm-dead``, Slurm's
  ``scontrol update state=down`` after a node is known to be powered off).

An agent that comes back makes its host ``ok`` (``closed`` if closed) again, whatever the
state. The activities declared lost whose processes may still run there are kept per host
(``Master.orphans``); they count in the engine's ``in_use`` of their allocation on that
host, which is what holds the fence (engine/state.py), and leave it when the agent lists
them ended, or no longer lists them. After a restart of the master they are found again
from the fences the store holds: every lost activity of a fenced allocation on that host.

The DUCC master keeps DUCC's own rule: a node that missed ``ducc.rm.node.stability``
heartbeats is dead at once (DUCC's resource manager has no unreachable state).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from apportion.service import resources
from apportion.service.published import HostPub
from apportion.service.refusal import ApiError

if TYPE_CHECKING:
    from apportion.service.store.writer import Batch

# the masters (service/master.py, service/ducc/master.py) call in here; named ``Any`` so
# that this module does not import them back
Master = Any

log = logging.getLogger("apportion.master")

OK, CLOSED, UNREACHABLE, DOWN = "ok", "closed", "unreachable", "down"
SILENT = (UNREACHABLE, DOWN)  # states of a host whose agent does not answer
ENDED = ("exited", "killed", "failed")  # an agent's report of a process that is gone


def lost_after(m: Master) -> float:
    """Seconds without a heartbeat before a host is declared lost (0: as soon as it is silent)."""
    return m.settings.host_lost_after if m.kind == "ego" else 0.0


def fences(m: Master) -> bool:
    """Whether this master fences the slots of lost activities (the EGO engine's ``in_use``)."""
    return getattr(m, "engine", None) is not None


def check(m: Master, batch: Batch, now: float) -> None:
    """Hosts whose agent missed too many heartbeats become unreachable; after
    ``host_lost_after`` seconds of silence, down."""
    silent_for = m._missed_limit() * m.settings.heartbeat
    window = lost_after(m)
    for h in m.hosts.values():
        if h.state == DOWN:
            continue
        quiet = now - h.last_seen
        if quiet <= silent_for:
            continue
        if quiet >= window:
            log.warning("host %s: no heartbeat for %.1f s: down, what ran there is lost", h.name, quiet)
            declare_lost(m, h, batch, now)
        elif h.state != UNREACHABLE:
            log.warning("host %s: no heartbeat for %.1f s: unreachable (down after %g s of silence)",
                        h.name, quiet, window)
            h.unreachable_since = now
            m._set_state(h, UNREACHABLE, batch)


def declare_lost(m: Master, h: HostPub, batch: Batch, now: float) -> None:
    """``h`` is down: its activities are lost, and those that may still run are kept as
    orphans, so that their slots stay fenced."""
    if h.unreachable_since is None:
        h.unreachable_since = now
    if fences(m):
        mine = m.orphans.setdefault(h.name, {})
        for a in m.live_on.get(h.name, {}).values():
            mine[a.id] = a  # a start sent and not yet reported may have run: it counts too
        if not mine:
            del m.orphans[h.name]
    m._set_state(h, DOWN, batch)


def orphan_slots(m: Master, alloc: int, host: str) -> int:
    """Slots of ``alloc``'s lost activities on ``host`` whose processes may still run."""
    return sum(a.slots for a in m.orphans.get(host, {}).values() if a.allocation == alloc)


def heard(m: Master, h: HostPub, batch: Batch) -> bool:
    """``h``'s agent answers again: it is ``ok`` (or ``closed``) whatever it was. Whether
    it was silent."""
    if h.state not in SILENT:
        return False
    log.info("host %s: its agent answers again after %.1f s (it was %s)", h.name,
             m._now - (h.unreachable_since or m._now), h.state)
    h.unreachable_since = None
    m._set_state(h, CLOSED if h.closed else OK, batch)
    return True


def gone(m: Master, host: str, still: set[int]) -> None:
    """Of the orphans of ``host``, only those in ``still`` may still run (what its agent
    lists running); the others are gone and their slots free."""
    mine = m.orphans.get(host)
    if not mine:
        return
    allocs = set()
    for aid in [i for i in mine if i not in still]:
        allocs.add(mine.pop(aid).allocation)
    if not mine:
        del m.orphans[host]
    for alloc in sorted(allocs):
        m._in_use(alloc, host)  # the fence shrinks by what is gone
    if allocs:
        log.info("host %s: its agent reports gone what ran there when it was lost; fenced for "
                 "processes still there: %s", host, sorted(m.orphans.get(host, {})) or "none")


def registered(m: Master, host: str, listed: list[int]) -> None:
    """A register lists what the agent knows (running or ended, to be reported next)."""
    gone(m, host, set(listed))


def reported(m: Master, host: str, reports: list[dict[str, Any]]) -> None:
    """A heartbeat reports every activity the agent has not forgotten, with its state."""
    if m.orphans.get(host):
        gone(m, host, {r["id"] for r in reports if r.get("state") not in ENDED})


def reports_change(m: Master, host: str, reports: list[dict[str, Any]]) -> bool:
    """Whether a heartbeat says that an orphan of ``host`` is gone."""
    mine = m.orphans.get(host)
    if not mine:
        return False
    running = {r["id"] for r in reports if r.get("state") not in ENDED}
    return any(aid not in running for aid in mine)


def rebuild(m: Master) -> None:
    """After a restart: every lost activity of an allocation fenced on its host may still
    run there (the store keeps the fences; what the agent reports next says which do)."""
    for a in m.activities.values():
        if a.state == "lost" and resources.fenced_on(m, a.allocation, a.host):
            m.orphans.setdefault(a.host, {})[a.id] = a
            resources.count_in_use(m, a.allocation, a.host, a.slots)


def op_confirm_dead(m: Master, name: str, by: str | None = None) -> Any:
    """An administrator says ``name`` is dead (powered off, reinstalled): nothing of what
    ran there runs any more. Its activities are lost (if it was unreachable) and every
    slot fenced there is free. 409 for a host whose agent answers: it reports its
    processes itself."""

    def run(batch: Batch, now: float) -> HostPub:
        h = m.hosts.get(name)
        if h is None:
            raise ApiError(404, f"no host {name}")
        if h.state not in SILENT:
            raise ApiError(409, f"host {name} is {h.state}: its agent answers and reports its processes; "
                                "only an unreachable or down host can be confirmed dead")
        log.warning("host %s: confirmed dead%s", name, f" by {by}" if by else "")
        if h.state == UNREACHABLE:
            declare_lost(m, h, batch, now)
        m.orphans.pop(name, None)
        if fences(m):
            resources.forget_host(m, name)
        batch.hosts[name] = h
        return h
    return run


def fenced_by_host(m: Master) -> dict[str, int]:
    """host -> the slots fenced there (published)."""
    out: dict[str, int] = {}
    for (_, host), f in getattr(m, "fences", {}).items():  # a DUCC master fences by its own books
        out[host] = out.get(host, 0) + f[0]
    return out


def json(m: Master, h: HostPub, fenced: dict[str, int]) -> dict[str, Any]:
    """What ``GET /v1/hosts`` says of a host's state beside ``state`` and ``last_seen``:
    since when it is silent, when it is to be declared lost (while unreachable), the slots
    fenced there (``fenced``: ``fenced_by_host``) and the lost activities whose processes
    may still run there."""
    return {"unreachable_since": h.unreachable_since,
            "lost_at": h.last_seen + lost_after(m) if h.state == UNREACHABLE else None,
            "fenced": fenced.get(h.name, 0),
            "fenced_for": sorted(m.orphans.get(h.name, {}))}
