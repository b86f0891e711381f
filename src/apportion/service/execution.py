"""Who an activity runs as and within what limits; what its agent reports of it.

The master decides, for each activity it starts, the execution user and the limits
it sends in the start command (docs/service.md, "The agent protocol"); the agent
enforces them (a user policy of its own, cgroups) and reports back who the
activity runs as, what it applied, what it uses, and how it ended:

- **EGO**: the user is the allocation's consumer's ``execution_user`` (written on it
  or inherited from the nearest ancestor that names one; none: the agent's
  ``--default-user``). Memory: the host's memory x the activity's slots / the host's
  slots, or less where the allocation asks for less (``memory``, GB per slot).
  No swap beyond it. CPU weight: 100 per slot.
- **DUCC**: the job's (service's) ``user``, under the OS account the plan maps it to
  (``ducc.accounts``; default: the account of that name). Memory: its share's,
  order x quantum GB. Swap: none (DUCC's scheduler sizes shares in real memory,
  as its Resource Manager documentation says, and its configuration has no swap
  setting). CPU weight: 100 per quantum.

Reports: usage (and who, and the limits) is kept in memory at each heartbeat,
without a store write, and stored with the activity's end. A start the agent
refused ends ``failed`` with the agent's reason; an OOM kill sets ``oom`` and the
reason. An activity whose processes survive SIGKILL closes its host, with that
reason (Slurm's UnkillableStepTimeout).

Nothing here schedules: the master calls these from its hooks, inside its task
(except ``note_heartbeat``, which only touches in-memory usage).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apportion.service.published import ActivityPub, HostPub

if TYPE_CHECKING:
    from apportion.service.store.writer import Batch

# the masters (service/master.py, service/ducc/master.py) call in here; they are named
# ``Any`` so that this module does not import them back (no two modules import each other)
Master = Any
DuccMaster = Any

GB = 2**30  # hosts report memory in GB of 2^30 bytes (agent/facts.py), and DUCC's quantum is in the same GB
CPU_WEIGHT_PER_SLOT = 100
REASON_MAX = 1000  # the store's stop_reason and closed_reason columns
ENDING = ("exited", "killed", "failed")  # what an agent reports of an activity that has ended
LIMIT_KEYS = ("memory", "cpu_weight", "pids")  # the limits an activity's JSON always names
MIN_MEMORY = 4 << 20  # bytes: no memory limit below 4 MiB (the API's floor per slot, Docker's is 6 MB)
MAX_MEMORY = 2**63 - 1  # bytes: what a cgroup's memory.max (an int64) can hold


def _bytes(gb: float) -> int:
    """``gb`` GB as bytes of a memory limit, within [MIN_MEMORY, MAX_MEMORY] (a stored host that
    reported a huge or a tiny figure still gives a limit a cgroup takes, never an overflow)."""
    b = gb * GB
    if not b < MAX_MEMORY:  # inf and NaN too
        return MAX_MEMORY
    return max(MIN_MEMORY, int(b))


def ego_limits(host: HostPub | None, slots: int, memory_per_slot: float | None) -> dict[str, int | None]:
    """The limits of an EGO activity of ``slots`` slots on ``host``: its part of the host's
    memory (bytes; None when the host reports none and the allocation asks for none), or
    ``memory_per_slot`` GB per slot when that is less; no swap; CPU weight by slots."""
    memory = None
    if host is not None and host.memory > 0 and host.slots > 0:
        memory = _bytes(host.memory * slots / host.slots)
    if memory_per_slot is not None and memory_per_slot > 0:
        asked = _bytes(memory_per_slot * slots)
        memory = asked if memory is None else min(memory, asked)
    return {"memory": memory, "swap": 0, "cpu_weight": CPU_WEIGHT_PER_SLOT * slots}


def ducc_limits(order: int, quantum: float) -> dict[str, int | None]:
    """A DUCC process's limits: its share, ``order`` quanta of ``quantum`` GB; no swap."""
    return {"memory": _bytes(order * quantum), "swap": 0, "cpu_weight": CPU_WEIGHT_PER_SLOT * order}


def ego_start(m: Master, a: ActivityPub) -> dict[str, Any]:
    """What an EGO start command says beside the process: ``user``, ``consumer`` and ``limits``.

    ``consumer`` is the allocation's consumer path: where no ``user`` is named, a root agent runs
    the activity under a uid of that consumer's own (``--dynamic-users``), so two consumers never
    share an account unless the plan names the same ``execution_user`` for both."""
    alloc = m.allocations.get(a.allocation)
    consumer = m.consumers.get(alloc.consumer) if alloc is not None else None
    return {"user": consumer.execution_user if consumer is not None else None,
            "consumer": alloc.consumer if alloc is not None else None,
            "limits": ego_limits(m.hosts.get(a.host), a.slots, alloc.memory if alloc is not None else None)}


def ducc_start(m: DuccMaster, a: ActivityPub) -> dict[str, Any]:
    """What a DUCC start command says beside the process: the job user's account, the share's limits."""
    j = m.jobs.get(a.job) if a.job is not None else None
    if j is None:
        return {"user": None, "limits": {"memory": None, "swap": 0, "cpu_weight": CPU_WEIGHT_PER_SLOT * a.slots}}
    cls = m.config.classes.get(j.cls)
    pool = cls.nodepool if cls is not None else (m.config.nodepool_of(a.host) or next(iter(m.config.nodepools)))
    return {"user": m.ducc_accounts.account(j.user), "limits": ducc_limits(a.slots, m.config.quantum(pool))}


# -- reports ------------------------------------------------------------------------------------
def _absorb(a: ActivityPub, r: dict[str, Any]) -> None:
    """Who it runs as, its limits and usage, as reported (in memory)."""
    if r.get("user") is not None:
        a.user = r["user"]
    if r.get("uid") is not None:
        a.uid = r["uid"]
    if r.get("limits") is not None:  # memory, cpu_weight, pids always (null: none); swap, cpu_max when given
        a.limits = {k: v for k, v in r["limits"].items() if v is not None or k in LIMIT_KEYS}
    if r.get("usage") is not None:
        a.usage = {k: v for k, v in r["usage"].items() if v is not None}
    if r.get("oom"):
        a.oom = True


def note_heartbeat(m: Master, host: str, reports: list[dict[str, Any]], alien: int | None) -> None:
    """A heartbeat's usage of running activities and the host's alien processes: in memory
    only (stored with each activity's end), so a heartbeat that brings nothing else new
    writes nothing."""
    h = m.hosts.get(host)
    if h is not None and alien is not None:
        h.alien = alien
    live = m.live_on.get(host)
    if not live:
        return
    for r in reports:
        a = live.get(r["id"])
        if a is not None and a.state == "running":
            _absorb(a, r)


def reports_change(m: Master, host: str, reports: list[dict[str, Any]]) -> bool:
    """Whether a heartbeat says something the store must hold that the master's own test
    (``Master.reports_change``) does not look for: an activity whose processes survive SIGKILL."""
    h = m.hosts.get(host)
    if h is None or h.closed_reason is not None:
        return False
    live = m.live_on.get(host, {})
    return any(r.get("unkillable") and r["id"] in live for r in reports)


def report_into(m: Master, h: HostPub, a: ActivityPub, r: dict[str, Any], batch: Batch) -> None:
    """One report of a live activity of ``h``, before the master acts on its state: what it
    says of the activity is kept; an ending says why (a refused start, an OOM kill); an
    unkillable one closes its host."""
    if not a.live:
        return
    _absorb(a, r)
    if r["state"] in ENDING:
        reason = r.get("reason")
        if r["state"] == "failed":
            a.stop_reason = (reason or "the agent could not start it")[:REASON_MAX]
        elif a.oom:
            a.stop_reason = (reason or "out of memory")[:REASON_MAX]
        elif reason and a.stop_reason is None:  # the agent killed it itself (over its disk limit)
            a.stop_reason = reason[:REASON_MAX]
    if r.get("unkillable") and h.closed_reason is None:
        close_unkillable(m, h, a, batch)


def close_unkillable(m: Master, h: HostPub, a: ActivityPub, batch: Batch) -> None:
    """Processes of ``a`` survive SIGKILL: ``h`` takes no new work until an administrator
    opens it again (they may hold memory, devices or files the next tenant would get)."""
    h.closed = True
    h.closed_reason = f"activity {a.id}: processes survive SIGKILL"
    batch.hosts[h.name] = h
    if h.state == "ok":
        m._set_state(h, "closed", batch)


def event_fields(a: ActivityPub) -> dict[str, Any]:
    """What an activity event says of who ran it and what it used (its end: why, and OOM)."""
    out: dict[str, Any] = {"user": a.user, "uid": a.uid, "limits": a.limits, "usage": a.usage}
    if not a.live:
        out["oom"] = a.oom
        out["stop_reason"] = a.stop_reason
    return out


def agent_facts(h: HostPub, containment: str | None, run_as: dict[str, Any] | None) -> None:
    """What a registering agent says of itself: its containment level, and whom it may run as."""
    h.containment = containment
    h.run_as = dict(run_as) if run_as is not None else None
