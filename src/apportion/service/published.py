"""What the master has committed, as the API reads it.

The master's task is the only writer. It changes these records only inside a step,
and a step runs without yielding to the event loop from its first change to its
commit and publication, so an API handler (they share the loop) never sees a change
that the store does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LIVE_STATES = ("starting", "running")  # an activity in these uses its slots
ENDED_STATES = ("exited", "killed", "failed", "lost")  # final: "failed" started nothing (see stop_reason)


@dataclass(slots=True)
class ClientPub:
    id: int
    name: str
    consumer: str
    created_at: float

    def json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "consumer": self.consumer}


@dataclass(slots=True)
class HoldingPub:
    request: int
    group: str
    host: str
    slots: int
    source: str
    deadline: float | None = None
    beneficiary: str | None = None
    reason: str | None = None
    kind: bool = False  # a vector allocation's (engine/drf.py): its slots are the request's, not the host's


@dataclass(slots=True)
class AllocationPub:
    id: int
    client: int
    consumer: str
    groups: list[str]
    min: int
    max: int
    order: int
    exclusive: bool
    requirement: str | None
    blocked: list[str]
    seq: int
    created_at: float
    memory: float | None = None  # GB per slot asked for: its activities' memory limit, if below the host's share
    held: int = 0
    hosts: dict[str, int] = field(default_factory=dict)
    reclaiming: dict[int, HoldingPub] = field(default_factory=dict)  # holding id -> marked holding
    resources: dict[str, Any] | None = None  # what each slot needs ({cores, memory, gpus, gpu_model}); None: slots
    # a reservation at the last cycle (service/reserved.py), and its planned start (Unix
    # seconds; None: not known, or no reservation)
    reserved: bool = False
    planned_start: float | None = None
    walltime: float | None = None  # seconds it runs once started, as the client said (service/walltimes.py)
    started_at: float | None = None  # when it first held its min (Unix seconds; None: not yet)

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id, "client": self.client, "consumer": self.consumer, "groups": self.groups,
            "min": self.min, "max": self.max, "slots_per_instance": self.order, "exclusive": self.exclusive,
            "requirement": self.requirement, "blocked": self.blocked, "held": self.held,
            "hosts": dict(sorted(self.hosts.items())),
            "reclaiming": [{"host": h.host, "slots": h.slots, "deadline": h.deadline, "for": h.beneficiary}
                           for h in sorted(self.reclaiming.values(), key=lambda h: (h.deadline or 0, h.host))],
            "memory": self.memory, "resources": self.resources,
            "reserved": self.reserved, "planned_start": self.planned_start,
            "walltime": self.walltime, "started_at": self.started_at,
        }


@dataclass(slots=True)
class ActivityPub:
    id: int
    allocation: int
    client: int
    host: str
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    slots: int
    state: str
    created_at: float
    exit_code: int | None = None
    signal: int | None = None
    pid: int | None = None
    stop: bool = False
    stop_reason: str | None = None
    ended_at: float | None = None
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    job: int | None = None  # DUCC: the job (or service) this process works for
    user: str | None = None  # the account it runs as, and its uid, as its agent reports them
    uid: int | None = None
    oom: bool = False  # the kernel's OOM killer ended it
    limits: dict[str, Any] | None = None  # {"memory", "cpu_weight", "pids"} as the agent applied them
    usage: dict[str, Any] | None = None  # {"cpu_seconds", "memory", "memory_peak"}: kept in memory while it
    # runs (each heartbeat), stored with its end
    secret: str | None = None  # DUCC: its process token, in memory only, until the agent has started it
    devices: dict[str, Any] | None = None  # {"gpus", "gpu_share", "cpus"} it holds on its host (devices.py)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def json(self) -> dict[str, Any]:
        out = {
            "id": self.id, "allocation": self.allocation, "host": self.host, "state": self.state,
            "exit_code": self.exit_code, "signal": self.signal, "slots": self.slots, "argv": self.argv,
            "pid": self.pid, "stopping": self.stop and self.live, "stop_reason": self.stop_reason,
            "created_at": self.created_at, "ended_at": self.ended_at,
            "user": self.user, "uid": self.uid, "oom": self.oom, "limits": self.limits, "usage": self.usage,
            "devices": self.devices,
        }
        if self.job is not None:
            out["job"] = self.job
        return out

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id, "allocation": self.allocation, "client": self.client, "host": self.host,
            "argv": self.argv, "env": self.env, "cwd": self.cwd, "slots": self.slots, "state": self.state,
            "exit_code": self.exit_code, "signal": self.signal, "pid": self.pid, "stop": self.stop,
            "stop_reason": self.stop_reason, "created_at": self.created_at, "ended_at": self.ended_at,
            "stdout": self.stdout, "stderr": self.stderr, "job": self.job,
            "user": self.user, "uid": self.uid, "oom": self.oom, "limits": self.limits, "usage": self.usage,
            "devices": self.devices,
        }


@dataclass(slots=True)
class HostPub:
    name: str
    slots: int
    memory: float
    os: str
    attributes: dict[str, Any]
    state: str  # ok | closed | unreachable | down (service/hoststates.py)
    closed: bool  # closed by the admin (stays closed when it comes back)
    last_seen: float = 0.0
    reported: bool = False  # an agent has reported it since this master started
    containment: str | None = None  # cgroup-v2 | cgroup-v1 | process-group, as its agent registered
    run_as: dict[str, Any] | None = None  # {"root": can it switch users, "user": the agent's own}
    closed_reason: str | None = None  # why the master closed it (an activity whose processes survive SIGKILL)
    alien: int | None = None  # processes of non-system users in no activity (each heartbeat; not stored)
    unreachable_since: float | None = None  # when its agent was found silent (not stored: a restart waits anew)
    resources: dict[str, Any] | None = None  # its agent's resource vector: cores, memory, GPUs, custom

    def row(self) -> dict[str, Any]:
        return {"name": self.name, "slots": self.slots, "memory": self.memory, "os": self.os,
                "attributes": self.attributes, "state": self.state, "closed": self.closed,
                "last_seen": self.last_seen, "containment": self.containment, "run_as": self.run_as,
                "closed_reason": self.closed_reason, "resources": self.resources}

    def facts(self) -> dict[str, Any]:
        """What the host JSON says of its agent beside slots and state (docs/service.md)."""
        return {"containment": self.containment, "run_as": self.run_as, "alien": self.alien,
                "closed_reason": self.closed_reason, "resources": self.resources}


# --- DUCC ------------------------------------------------------------------------------

JOB_ENDED = ("done", "failed", "cancelled")


@dataclass(slots=True)
class JobPub:
    """A DUCC job, service or reservation (``kind``) as submitted, and where it stands."""

    id: int
    kind: str  # job | service | reservation
    user: str
    cls: str
    memory: float
    max_processes: int | None
    threads: int
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    client: int
    state: str  # waiting | running | done | failed | cancelled
    reason: str
    retries: int
    submitted_at: float
    ended_at: float | None = None
    init_seconds: float | None = None
    seconds_per_item: float | None = None

    @property
    def ended(self) -> bool:
        return self.state in JOB_ENDED

    def row(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "user": self.user, "cls": self.cls, "memory": self.memory,
                "max_processes": self.max_processes, "threads": self.threads, "argv": self.argv, "env": self.env,
                "cwd": self.cwd, "client": self.client, "state": self.state, "reason": self.reason,
                "retries": self.retries, "submitted_at": self.submitted_at, "ended_at": self.ended_at,
                "init_seconds": self.init_seconds, "seconds_per_item": self.seconds_per_item}


@dataclass(slots=True)
class SharePub:
    """``order`` quanta of ``host`` given to a job; ``activity``: its process (None for a
    reservation, which runs nothing)."""

    id: int
    job: int
    host: str
    order: int
    activity: int | None
    started_at: float
    cycle: int
    initialized_at: float | None = None
    evicted: str | None = None
    gone_cycle: int | None = None
    gone_at: float | None = None

    def row(self) -> dict[str, Any]:
        return {"id": self.id, "job": self.job, "host": self.host, "order": self.order, "activity": self.activity,
                "started_at": self.started_at, "initialized_at": self.initialized_at, "evicted": self.evicted,
                "cycle": self.cycle, "gone_cycle": self.gone_cycle, "gone_at": self.gone_at}
