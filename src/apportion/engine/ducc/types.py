"""The DUCC cycle's data: what goes in (``Machine``, ``Job``, ``Process``,
``DuccState``), what comes out (``DuccDecisions`` and its parts), and the sizes
(orders in quanta). ``api`` is the entry point that runs a cycle over them; the
cycle's phases import these types from here, never from ``api``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from math import ceil, floor
from types import MappingProxyType
from typing import Literal

from apportion.engine.ducc.config import DuccConfig

MachineState = Literal["ok", "unavailable", "varied_off", "dead"]
"""ok: schedulable; unavailable: the node says it cannot take work (keeps what it
runs, takes nothing new); varied_off: an administrator took it out (fair-share work
is evicted, other work stays, nothing new); dead: gone (its work is purged)."""

JobKind = Literal["job", "service", "reservation"]
"""job: a UIMA-AS job (fair share or fixed share, by its class); service: one
service instance (one process, FIXED_SHARE or RESERVE class); reservation: a
managed reservation (one process, FIXED_SHARE class) or, in a RESERVE class, a
whole machine."""

EvictReason = Literal["over-count", "defrag", "vary-off", "blacklist", "node-dead"]
JobStateName = Literal["running", "waiting", "deferred"]


@dataclass(frozen=True, slots=True)
class Machine:
    """A node. ``nodepool`` None: the nodepool the configuration puts the host in
    (the configuration wins when it names the host; a host it does not name goes
    to ``nodepool``, else to the first top-level nodepool). A machine is dead when
    ``state`` says so or when ``missed_heartbeats`` reaches ``ducc.rm.node.stability``."""

    name: str
    memory_gb: float
    nodepool: str | None = None
    state: MachineState = "ok"
    missed_heartbeats: int = 0
    reserved_gb: float = 0.0


@dataclass(frozen=True, slots=True)
class Job:
    """What the outer layer knows of a piece of work now.

    ``max_processes`` None: no limit of its own (the class's ``max_processes``
    still applies). ``init_seconds`` and ``seconds_per_item`` are observed
    averages (None until known); they feed prediction."""

    id: str
    user: str
    cls: str
    memory_gb: float
    max_processes: int | None = None
    threads: int = 1
    work_items: int = 1
    done_items: int = 0
    init_seconds: float | None = None
    seconds_per_item: float | None = None
    submitted_at: float = 0.0
    kind: JobKind = "job"

    @property
    def remaining_items(self) -> int:
        return max(0, self.work_items - self.done_items)


@dataclass(frozen=True, slots=True)
class Process:
    """A running share (an nshare) of ``order`` quanta on ``machine``.
    ``investment``: work done since it initialised (any unit, compared only)."""

    share_id: int
    job: str
    machine: str
    order: int
    initialized: bool = False
    started_at: float = 0.0
    investment: float = 0.0


@dataclass(frozen=True, slots=True)
class DuccState:
    """Everything that persists between cycles. ``pending_removal``: share ids
    evicted and not yet confirmed gone (still occupying their space). ``needy``:
    jobs that defragmentation left short last cycle (placed first).
    ``next_share_id``: the id the next new process gets."""

    machines: tuple[Machine, ...] = ()
    jobs: tuple[Job, ...] = ()
    processes: tuple[Process, ...] = ()
    pending_removal: frozenset[int] = frozenset()
    needy: tuple[str, ...] = ()
    next_share_id: int = 1


@dataclass(frozen=True, slots=True)
class NewProcess:
    share_id: int
    job: str
    machine: str
    order: int  # quanta
    memory_gb: float  # order x quantum


@dataclass(frozen=True, slots=True)
class Eviction:
    """``node-dead`` evictions are purged at once (the node is gone); the others
    stay occupied until the caller confirms them gone."""

    share_id: int
    job: str
    machine: str
    reason: EvictReason


@dataclass(frozen=True, slots=True)
class Lost:
    """A non-preemptable process (fixed-share job process, managed reservation,
    reservation) on a dead node: reported, not rescheduled this cycle; the caller
    decides whether its job ends (if the job stays it is asked for again)."""

    share_id: int
    job: str
    machine: str
    reason: str


@dataclass(frozen=True, slots=True)
class JobAccount:
    """One job after the cycle.

    counted: processes How Much gave it (FIXED_SHARE: what it may hold within its
    allotment; RESERVE: machines). held: processes it has on machines after this
    cycle (new ones included), those being removed included. pending_removal:
    held processes evicted and not yet gone. deserved: its pure fair share (before
    bonus, capped by what it can use). cap: what it could use now (job caps)."""

    counted: int
    held: int
    pending_removal: int
    state: JobStateName
    reason: str
    deserved: int = 0
    cap: int = 0


@dataclass(frozen=True, slots=True)
class DuccDecisions:
    now: float
    new: tuple[NewProcess, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    lost: tuple[Lost, ...] = ()
    jobs: Mapping[str, JobAccount] = field(default_factory=dict)
    needy: tuple[str, ...] = ()
    blacklisted: tuple[int, ...] = ()  # share ids that no longer belong where they run
    machines: Mapping[str, str] = field(default_factory=dict)  # name -> ok|unavailable|varied_off|dead|blacklisted
    next_share_id: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", MappingProxyType(dict(self.jobs)))
        object.__setattr__(self, "machines", MappingProxyType(dict(self.machines)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DuccDecisions):
            return NotImplemented
        return (self.now, self.new, self.evictions, self.lost, dict(self.jobs), self.needy, self.blacklisted,
                dict(self.machines), self.next_share_id) == (
            other.now, other.new, other.evictions, other.lost, dict(other.jobs), other.needy, other.blacklisted,
            dict(other.machines), other.next_share_id)

    __hash__ = None  # type: ignore[assignment]


# --- sizes ---------------------------------------------------------------------

def machine_order(memory_gb: float, quantum_gb: int, reserved_gb: float = 0.0) -> int:
    """floor((memory - reserved) / quantum), never below 0."""
    return max(0, floor((memory_gb - reserved_gb) / quantum_gb))


def process_order(memory_gb: float, quantum_gb: int) -> int:
    """ceil(memory / quantum), at least 1."""
    return max(1, ceil(memory_gb / quantum_gb))


def machines_from_config(config: DuccConfig, memory_gb: Mapping[str, float] | None = None,
                         default_gb: float | None = None) -> tuple[Machine, ...]:
    """One ``ok`` machine per host the configuration knows, in its order, with memory
    from ``memory_gb``, else the configuration's own, else ``default_gb``; hosts with
    no memory known are left out."""
    out = []
    for host, mem in config.hosts.items():
        gb = (memory_gb or {}).get(host, mem if mem is not None else default_gb)
        if gb is not None:
            out.append(Machine(host, gb))
    return tuple(out)
