"""The DUCC configuration as apportion holds it: frozen, validated, inheritance resolved.

It lives in the engine because the DUCC cycle reads it; the outer layer builds
it: ``apportion.importers.ducc.load_ducc`` from ``ducc.classes``, node files,
``ducc.users`` and ``ducc.rm.*`` properties, ``ducc_config_from_mapping`` from a
plan's ``ducc:`` section. Nothing here reads a file. Every
class here is immutable; mappings keep the order things were defined in.

Units: memory is in GB. A class's ``max_allotment`` (and a user's per-class
limit) is in quanta of the class's nodepool, because a class lives in exactly
one nodepool and that fixes its quantum; a user's overall limit spans classes
in nodepools that may have different quanta, so it stays in GB.

``source`` fields say where a thing was defined, for messages only; they never
take part in equality, so a configuration read from DUCC files equals the same
configuration read back from a plan file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType


class Policy(str, Enum):
    """A class's scheduling policy."""

    FAIR_SHARE = "FAIR_SHARE"  # weighted fair share, preemptable, may grow into subpools
    FIXED_SHARE = "FIXED_SHARE"  # non-preemptable, one process per request, own nodepool only
    RESERVE = "RESERVE"  # a whole machine, non-preemptable, own nodepool only

    @property
    def preemptable(self) -> bool:
        return self is Policy.FAIR_SHARE


DEFAULT_NODEPOOL = "--default--"
DEFAULT_SEARCH_ORDER = 100


@dataclass(frozen=True, slots=True)
class Source:
    """Where something was written: a file and a 1-based line (None when unknown)."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


def _frozen_map(mapping: Mapping | None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class Nodepool:
    """A named set of hosts. Top-level pools are independent clusters; subpools nest.

    ``nodes`` are the pool's own hosts, in order; the hosts of its subpools are
    not repeated here (``DuccConfig.pool_hosts`` gives the whole subtree).
    ``share_quantum`` (GB) is set on top-level pools only; a subpool uses its
    top-level pool's quantum (``DuccConfig.quantum``). Lower ``search_order``
    is searched first among sibling subpools.
    """

    name: str
    parent: str | None
    nodes: tuple[str, ...]
    share_quantum: int | None
    search_order: int = DEFAULT_SEARCH_ORDER
    nodefile: str | None = None  # as written in ducc.classes; information only
    source: Source | None = field(default=None, compare=False)

    @property
    def top_level(self) -> bool:
        return self.parent is None


@dataclass(frozen=True, slots=True)
class DuccClass:
    """A scheduling class with every setting resolved (parent class merged, defaults filled in).

    Settings that do not apply to the class's policy are ``None``:
    ``weight``, ``expand_by_doubling``, ``initialization_cap``,
    ``use_prediction``, ``prediction_fudge`` and ``debug`` are FAIR_SHARE only;
    ``max_processes`` FAIR_SHARE and FIXED_SHARE; ``max_machines`` and
    ``enforce_memory`` RESERVE only; ``max_allotment`` FIXED_SHARE and RESERVE.
    """

    name: str
    policy: Policy
    nodepool: str
    priority: int  # smaller is evaluated first (DUCC: reserve 1, fixed 5, fair 10)
    weight: int | None = None
    expand_by_doubling: bool | None = None
    initialization_cap: int | None = None  # processes until one has initialised; 0: no cap
    use_prediction: bool | None = None
    prediction_fudge: int | None = None  # milliseconds
    max_processes: int | None = None  # per job; None: no cap
    max_machines: int | None = None  # per reservation; None: no cap
    enforce_memory: bool | None = None  # a reservation's order must equal the machine's
    max_allotment: int | None = None  # quanta per user in this class; None: no class limit
    debug: str | None = None  # class that debug jobs of this class run in
    users: tuple[str, ...] | None = None  # who may submit to the class; None: everyone
    abstract: bool = False  # a template only: never scheduled, never submitted to
    default: bool = False  # the default class for its kind of work
    parent: str | None = None  # the class this one derives from
    source: Source | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class User:
    """Per-user limits on non-preemptable work (DUCC's user registry).

    ``max_allotment_gb`` caps everything the user holds in FIXED_SHARE and
    RESERVE classes together; None means ``ducc.rm.global_allotment`` applies.
    ``class_max_allotment`` maps a class name to a cap in quanta of that class's
    nodepool, overriding the class's own ``max_allotment`` for this user.
    """

    name: str
    max_allotment_gb: int | None = None
    class_max_allotment: Mapping[str, int] = field(default_factory=dict)
    source: Source | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "class_max_allotment", _frozen_map(self.class_max_allotment))

    def __hash__(self) -> int:
        return hash((self.name, self.max_allotment_gb, frozenset(self.class_max_allotment.items())))


@dataclass(frozen=True, slots=True)
class DuccProperties:
    """The ``ducc.rm.*`` properties apportion uses, with DUCC's shipped defaults."""

    share_quantum: int = 1  # ducc.rm.share.quantum, GB
    fragmentation_threshold: int = 8  # ducc.rm.fragmentation.threshold, processes
    initialization_cap: int = 1  # ducc.rm.initialization.cap, processes (0: no cap)
    expand_by_doubling: bool = True  # ducc.rm.expand.by.doubling
    prediction: bool = True  # ducc.rm.prediction
    prediction_fudge: int = 120_000  # ducc.rm.prediction.fudge, milliseconds
    node_stability: int = 5  # ducc.rm.node.stability, missed heartbeats before a node is dead
    global_allotment: int | None = None  # ducc.rm.global_allotment, GB per user; None: unlimited

    def to_ducc_keys(self) -> dict[str, int | bool | None]:
        """The properties under DUCC's own keys, in a fixed order."""
        return {key: getattr(self, attr) for key, attr in PROPERTY_KEYS.items()}


PROPERTY_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "ducc.rm.share.quantum": "share_quantum",
        "ducc.rm.fragmentation.threshold": "fragmentation_threshold",
        "ducc.rm.initialization.cap": "initialization_cap",
        "ducc.rm.expand.by.doubling": "expand_by_doubling",
        "ducc.rm.prediction": "prediction",
        "ducc.rm.prediction.fudge": "prediction_fudge",
        "ducc.rm.node.stability": "node_stability",
        "ducc.rm.global_allotment": "global_allotment",
    }
)
"""DUCC property key -> ``DuccProperties`` attribute."""


Memory = int | float
"""A host's memory in GB (an int when it is a whole number)."""


@dataclass(frozen=True, slots=True)
class DuccConfig:
    """A whole DUCC configuration: nodepools, classes, users, properties and the hosts.

    ``hosts`` maps every host the configuration knows (from node files, the
    simulated-cluster description or given memory sizes) to its memory in GB,
    or None when no memory size was given for it. Every host belongs to exactly
    one nodepool.
    """

    nodepools: Mapping[str, Nodepool]
    classes: Mapping[str, DuccClass]
    users: Mapping[str, User] = field(default_factory=dict)
    properties: DuccProperties = field(default_factory=DuccProperties)
    hosts: Mapping[str, Memory | None] = field(default_factory=dict)
    domain: str | None = None  # the first nodepool's `domain`; host names are compared as written

    def __post_init__(self) -> None:
        for name in ("nodepools", "classes", "users", "hosts"):
            object.__setattr__(self, name, _frozen_map(getattr(self, name)))

    def __hash__(self) -> int:
        return hash((frozenset(self.nodepools.items()), frozenset(self.classes.items()),
                     frozenset(self.users.items()), self.properties, frozenset(self.hosts.items()), self.domain))

    # --- nodepools ---------------------------------------------------------

    def top_pool(self, pool: str) -> Nodepool:
        """The top-level nodepool that ``pool`` lies in (itself when it is top-level)."""
        np = self.nodepools[pool]
        while np.parent is not None:
            np = self.nodepools[np.parent]
        return np

    def quantum(self, pool: str) -> int:
        """The share quantum (GB) that applies in ``pool``."""
        quantum = self.top_pool(pool).share_quantum
        assert quantum is not None
        return quantum

    def subpools(self, pool: str) -> list[Nodepool]:
        """``pool``'s direct subpools, in search order (ties: definition order)."""
        kids = [np for np in self.nodepools.values() if np.parent == pool]
        return sorted(kids, key=lambda np: np.search_order)

    def pool_hosts(self, pool: str, recursive: bool = True) -> list[str]:
        """The hosts of ``pool`` and, when ``recursive``, of its subpools (in search order)."""
        hosts = list(self.nodepools[pool].nodes)
        if recursive:
            for kid in self.subpools(pool):
                hosts.extend(self.pool_hosts(kid.name))
        return hosts

    def nodepool_of(self, host: str) -> str | None:
        """The nodepool whose own hosts include ``host``."""
        for np in self.nodepools.values():
            if host in np.nodes:
                return np.name
        return None

    # --- classes and users -------------------------------------------------

    def schedulable_classes(self) -> Iterator[DuccClass]:
        """The classes work may be submitted to (every class that is not abstract)."""
        return (c for c in self.classes.values() if not c.abstract)

    def default_class(self, policy: Policy) -> DuccClass | None:
        """The class marked ``default`` for ``policy``, if any."""
        for c in self.classes.values():
            if c.default and c.policy is policy:
                return c
        return None

    def user_allotment_gb(self, user: str) -> int | None:
        """The user's overall limit on non-preemptable work in GB; None: unlimited."""
        u = self.users.get(user)
        if u is not None and u.max_allotment_gb is not None:
            return u.max_allotment_gb
        return self.properties.global_allotment

    def class_allotment(self, user: str, cls: str) -> int | None:
        """The user's limit in class ``cls``, in quanta; None: unlimited."""
        u = self.users.get(user)
        if u is not None and cls in u.class_max_allotment:
            return u.class_max_allotment[cls]
        return self.classes[cls].max_allotment
