"""The engine's input: a compiled, validated plan and the requests made against it.

Everything here is frozen and free of I/O. The plan package (``apportion.plan``)
turns user files into these objects; the engine never sees a file, a line number
or a clock. Consumer paths are slash paths (``/LOB1/app1``); the root of the
tree is implicit and is written ``/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

ROOT = "/"

AttrValue = str | int | float | bool

Kinds = tuple[tuple[str, float], ...]
"""A resource vector (cores, memory in GB, gpus, any countable custom kind), as sorted
(kind, amount) pairs: hashable and frozen. Empty: not given (engine/kinds.py)."""


class HostState(str, Enum):
    OK = "ok"  # takes new work
    CLOSED = "closed"  # keeps what it runs, takes nothing new
    UNAVAILABLE = "unavailable"  # as closed (DUCC: the node says it is unavailable)
    # as closed (what it holds stays held), but its slots count in its groups' capacity as they
    # did: its agent stopped answering, and shares do not move while it may come back
    UNREACHABLE = "unreachable"
    DOWN = "down"  # gone: what it ran is lost


class AllocationPolicy(str, Enum):
    STACKED = "stacked"  # fill hosts in the group's host order
    BALANCED = "balanced"  # the host with the most free slots first
    EXCLUSIVE = "exclusive"  # a host serves one consumer at a time
    BEST_FIT = "best_fit"  # the smallest free space that fits (DUCC)


class ShareEnforcement(str, Enum):
    LEAF = "leaf"
    PARENT = "parent"


HostFilter = Callable[["Host"], bool]
"""A compiled resource requirement: True when the host may serve the request."""


def _frozen(mapping: Mapping | None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class Host:
    name: str
    slots: int
    memory: float = 0.0
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)
    state: HostState = HostState.OK
    resources: Kinds = ()  # what the host has of each kind; () for a host of plain slots

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", _frozen(self.attributes))


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """A named set of hosts. ``hosts`` is resolved and in preference order."""

    name: str
    hosts: tuple[str, ...]
    allocation_policy: AllocationPolicy = AllocationPolicy.STACKED
    # where requests with resource vectors go: "first" (the group's host order), "bestfit"
    # or "fgd" (engine/gpupack.py's packers for the GPU dimension)
    packing: str = "first"


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """A consumer's plan in one resource group (consumer-wide values already merged)."""

    owned: int = 0
    share_ratio: int = 1
    priority: int | None = None  # smaller is better; unset ranks after every set value
    rank: int | None = None  # 1 is best; unset ranks after every set value
    max: int | None = None
    lend: bool = False
    lend_limit: int | None = None  # None with lend on: every owned slot may be lent
    borrow: bool = True
    borrow_limit: int | None = None
    borrow_preference: tuple[str, ...] = ()
    lend_to: tuple[str, ...] | None = None  # None: anyone; ("siblings",) or paths
    grace: float = 0.0
    # multidimensional ownership (EGO's ownership policy). With owned_hosts or owned_per_host set,
    # ``owned`` is not what the user wrote: it is the slots of the hosts assigned to
    # the consumer (Plan.host_ownership), worked out by engine/ownership.py.
    owned_hosts: int | tuple[str, ...] | None = None  # a number of hosts, or named hosts
    owned_per_host: int | None = None  # slots of each host in scope (partial ownership)
    partial: bool = False  # owned_hosts: N may be made of parts of hosts like whole ones
    preference: int | None = None  # smaller is more preferred; unset/equal: no preference
    # ownership and limits per resource kind, for requests with resource vectors
    # (engine/drf.py): ``owned: {gpus: 16}``, ``max: {cores: 64}``; ``lend: [gpus]`` lends
    # those kinds only (lend_kinds None with lend on: every kind)
    owned_kinds: Kinds = ()
    max_kinds: Kinds = ()
    lend_kinds: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Consumer:
    path: str
    parent: str  # ROOT for a top-level consumer
    children: tuple[str, ...]
    index: int  # position in the plan: earlier wins ties
    groups: Mapping[str, GroupSettings]  # the groups this consumer is planned in
    # the OS account its work runs as (EGO's ExecutionUser), written here or inherited from
    # the nearest ancestor that names one; None: the agent's default user. Data only: the
    # engine does not schedule by it (the live master sends it to the agents).
    execution_user: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", _frozen(self.groups))

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def depth(self) -> int:
        return self.path.count("/")


@dataclass(frozen=True, slots=True)
class Policy:
    share_enforcement: ShareEnforcement = ShareEnforcement.LEAF
    adjust_share_to_workload: bool = True
    base_quota: bool = False
    reclaim_before_borrow: bool = False
    share_pool_reclaim: bool = True
    reclaim_for_preference: bool = False
    # seconds: use beyond a consumer's share decays with this half-life and puts its
    # next reservations behind the others' (engine/usage.py); None: not counted
    usage_half_life: float | None = None
    # per-kind weights of the dominant share (engine/drf.py): a kind of weight 4 counts
    # four times its share of the total; unnamed kinds weigh 1
    weights: Kinds = ()


@dataclass(frozen=True, slots=True)
class Plan:
    hosts: tuple[Host, ...]
    groups: tuple[ResourceGroup, ...]  # plan order
    consumers: tuple[Consumer, ...]  # plan order, parents before children
    policy: Policy = Policy()
    ducc: object | None = None  # a DUCC configuration; not scheduled by this engine yet
    # multidimensional ownership in force (EGO's ownership policy): group -> consumer -> host -> owned
    # slots, for every consumer with owned_hosts or owned_per_host in that group
    # (parents and children alike; a child's slots are part of its parent's). None when
    # nobody owns hosts, or not worked out yet (engine/ownership.prepared does it).
    host_ownership: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None

    def __post_init__(self) -> None:
        if self.host_ownership is not None:
            object.__setattr__(self, "host_ownership", MappingProxyType({
                g: MappingProxyType({c: _frozen(parts) for c, parts in owners.items()})
                for g, owners in self.host_ownership.items()}))

    def consumer_map(self) -> dict[str, Consumer]:
        return {c.path: c for c in self.consumers}

    def owned_on_hosts(self, group: str, consumer: str) -> Mapping[str, int]:
        """host -> slots ``consumer`` owns in ``group`` (empty without host ownership)."""
        return ((self.host_ownership or {}).get(group) or {}).get(consumer) or {}


@dataclass(frozen=True, slots=True)
class Request:
    """An open request: up to ``max`` slots, in instances of ``order`` slots on one host.

    ``groups`` are the groups the request may use, in order; empty means every
    group its consumer is planned in, in plan order. ``min`` slots must be
    granted together before anything is granted. ``seq`` is the arrival order.
    """

    id: str
    consumer: str
    max: int
    min: int = 0
    groups: tuple[str, ...] = ()
    order: int = 1
    exclusive: bool = False
    requirement: HostFilter | None = None
    requirement_text: str | None = None
    seq: int = 0
    # how long the work runs once started, in seconds, when the client knows (SWF's
    # requested time): what lets work backfill a reservation without delaying it
    walltime: float | None = None
    # what each slot needs of each kind; () a plain slot request (engine/drf.py serves the others)
    resources: Kinds = ()
