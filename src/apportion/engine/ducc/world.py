"""One cycle's working copy of the DUCC state: machines, jobs and processes resolved
against the configuration, with the counters every phase updates.

Nothing here outlives a cycle; :mod:`apportion.engine.ducc.cycle` builds a
:class:`World` from a :class:`~apportion.engine.ducc.types.DuccState`, the phases
change it, and it is turned into :class:`~apportion.engine.ducc.types.DuccDecisions`.

Node states and blacklisting are decided here (DUCC's RM documentation, "Nodes" and "Blacklists"):

- a **dead** machine (``state == "dead"`` or ``missed_heartbeats`` >= node
  stability): its fair-share processes and services are purged (evicted with reason
  ``node-dead``, gone at once) and rescheduled elsewhere in the same cycle; its other
  processes are reported lost; it adds no space;
- **varied_off**: nothing new; fair-share processes are evicted (``vary-off``),
  the rest stays;
- **unavailable**: nothing new; everything on it stays;
- **blacklisting**: a process that no longer belongs where it runs under the
  configuration passed in (class gone or abstract, user no longer allowed, machine
  outside the class's nodepool -- or its subpools for fair share --, a size that no
  longer matches) is blacklisted: its space stays counted, it is evicted if it can
  be (jobs and services; reservations stay until they end), and its machine takes
  nothing new until every blacklisted process on it has left.
"""

from __future__ import annotations

from apportion.engine.ducc.config import DuccClass, DuccConfig, Policy
from apportion.engine.ducc.types import (
    DuccState,
    Eviction,
    Job,
    Lost,
    Machine,
    machine_order,
    process_order,
)

FAIR, FIXED, RESERVE = Policy.FAIR_SHARE, Policy.FIXED_SHARE, Policy.RESERVE


class PoolInfo:
    __slots__ = ("name", "parent", "top", "depth", "quantum", "children", "search", "max_order", "rank")

    def __init__(self, name: str, parent: str | None, top: str, depth: int, quantum: int) -> None:
        self.name = name
        self.parent = parent
        self.top = top
        self.depth = depth
        self.quantum = quantum
        self.children: list[str] = []
        self.search: list[str] = []  # itself, then its subpools depth first in search order
        self.max_order = 0  # largest machine order in this pool alone
        self.rank = 0  # position in the bottom-up order


class M:
    """A machine this cycle."""

    __slots__ = ("name", "idx", "pool", "order", "status", "used", "leaving", "claimed", "procs",
                 "blacklisted", "depth")

    def __init__(self, machine: Machine, idx: int, pool: PoolInfo | None, order: int, status: str) -> None:
        self.name = machine.name
        self.idx = idx
        self.pool = pool
        self.order = order
        self.status = status  # ok | unavailable | varied_off | dead | no-nodepool
        self.used = 0  # quanta of every process present (being removed included)
        self.leaving = 0  # quanta of processes being removed
        self.claimed = 0  # quanta of leaving space promised to needy jobs (defragmentation)
        self.procs: list[P] = []
        self.blacklisted = False
        self.depth = pool.depth if pool is not None else 0

    @property
    def accepting(self) -> bool:
        return self.status == "ok" and not self.blacklisted

    @property
    def free(self) -> int:
        return self.order - self.used


class J:
    """A job this cycle."""

    __slots__ = ("job", "id", "user", "cls", "policy", "pool", "order", "priority", "procs", "active",
                 "leaving", "initialized", "cap", "want", "counted", "pure", "deferred", "note", "lost",
                 "sort_key", "weight")

    def __init__(self, job: Job) -> None:
        self.job = job
        self.id = job.id
        self.user = job.user
        self.cls: DuccClass | None = None
        self.policy: Policy | None = None
        self.pool: PoolInfo | None = None
        self.order = 0
        self.priority = 0
        self.procs: list[P] = []
        self.active = 0  # processes it keeps: not being removed, new ones included
        self.leaving = 0  # processes being removed (evicted, not yet gone)
        self.initialized = False
        self.cap = 0  # processes it could use now
        self.want = 0  # non-preemptable: processes asked for
        self.counted = 0
        self.pure = 0
        self.deferred: str | None = None  # why it cannot be scheduled at all
        self.note: str | None = None  # extra words for the reason
        self.lost = 0
        self.sort_key: tuple = (job.submitted_at, job.id)
        self.weight = 1

    @property
    def preemptable(self) -> bool:
        return self.policy is FAIR

    @property
    def schedulable(self) -> bool:
        return self.deferred is None and self.lost == 0 and self.policy is not None


class P:
    """A process (a share) this cycle, old or new."""

    __slots__ = ("share_id", "j", "m", "order", "initialized", "started", "investment", "pending", "evicted",
                 "gone", "new", "cancelled", "blacklisted")

    def __init__(self, share_id: int, j: J | None, m: M, order: int, initialized: bool = False,
                 started: float = 0.0, investment: float = 0.0, pending: bool = False, new: bool = False) -> None:
        self.share_id = share_id
        self.j = j
        self.m = m
        self.order = order
        self.initialized = initialized
        self.started = started
        self.investment = investment
        self.pending = pending  # evicted in an earlier cycle, not confirmed gone
        self.evicted = False  # evicted this cycle
        self.gone = False  # purged this cycle (dead node)
        self.new = new  # started this cycle
        self.cancelled = False  # a new process given to a needy job instead (defragmentation)
        self.blacklisted = False

    @property
    def active(self) -> bool:
        return not (self.pending or self.evicted or self.gone or self.cancelled)

    @property
    def present(self) -> bool:
        return not (self.gone or self.cancelled)


class World:
    def __init__(self, config: DuccConfig, state: DuccState, now: float) -> None:
        self.config = config
        self.props = config.properties
        self.now = now
        self.next_id = state.next_share_id
        self.evictions: list[Eviction] = []
        self.lost: list[Lost] = []
        self.new: list[P] = []
        self.needy_next: list[str] = []
        self._pools(config)
        self._machines(config, state)
        self._jobs(config, state)
        self._processes(state)
        self.needy_last = [self.jby[j] for j in dict.fromkeys(state.needy) if j in self.jby]

    # --- building ------------------------------------------------------------

    def _pools(self, config: DuccConfig) -> None:
        pools: dict[str, PoolInfo] = {}
        tops = [np for np in config.nodepools.values() if np.parent is None]
        kids: dict[str, list] = {}
        for np in config.nodepools.values():
            if np.parent is not None:
                kids.setdefault(np.parent, []).append(np)
        bottom_up: list[str] = []

        def visit(np, top: str, depth: int, quantum: int) -> list[str]:
            info = PoolInfo(np.name, np.parent, top, depth, quantum)
            pools[np.name] = info
            search = [np.name]
            for kid in sorted(kids.get(np.name, ()), key=lambda k: k.search_order):
                info.children.append(kid.name)
                search.extend(visit(kid, top, depth + 1, quantum))
            info.search = search
            bottom_up.append(np.name)
            return search

        for np in tops:
            visit(np, np.name, 0, np.share_quantum or self.props.share_quantum)
        for i, name in enumerate(bottom_up):
            pools[name].rank = i
        self.pools = pools
        self.bottom_up = bottom_up
        self.host_pool = {h: np.name for np in config.nodepools.values() for h in np.nodes}
        self.first_top = tops[0].name if tops else None

    def _machines(self, config: DuccConfig, state: DuccState) -> None:
        stability = self.props.node_stability
        ms = sorted(state.machines, key=lambda m: m.name)
        self.machines: list[M] = []
        self.mby: dict[str, M] = {}
        for i, mc in enumerate(ms):
            if mc.name in self.mby:
                raise ValueError(f"machine {mc.name} is listed twice")
            pname = self.host_pool.get(mc.name) or mc.nodepool or self.first_top
            pool = self.pools.get(pname) if pname is not None else None
            if mc.state == "dead" or (stability and mc.missed_heartbeats >= stability):
                status = "dead"
            elif pool is None:
                status = "no-nodepool"
            else:
                status = mc.state
            order = machine_order(mc.memory_gb, pool.quantum, mc.reserved_gb) if pool is not None else 0
            m = M(mc, i, pool, order, status)
            if pool is not None and status != "dead" and order > pool.max_order:
                pool.max_order = order
            self.machines.append(m)
            self.mby[mc.name] = m

    def _jobs(self, config: DuccConfig, state: DuccState) -> None:
        self.jobs: list[J] = []
        self.jby: dict[str, J] = {}
        for job in sorted(state.jobs, key=lambda j: (j.submitted_at, j.id)):
            if job.id in self.jby:
                raise ValueError(f"job {job.id} is listed twice")
            j = J(job)
            self.jby[job.id] = j
            self.jobs.append(j)
            cls = config.classes.get(job.cls)
            if cls is None:
                j.deferred = f"class {job.cls} is not configured"
                continue
            j.cls = cls
            if cls.abstract:
                j.deferred = f"class {cls.name} is abstract: no work may be submitted to it"
                continue
            if cls.users is not None and job.user not in cls.users:
                j.deferred = f"user {job.user} may not submit to class {cls.name}"
                continue
            pool = self.pools.get(cls.nodepool)
            if pool is None:
                j.deferred = f"nodepool {cls.nodepool} of class {cls.name} is not configured"
                continue
            if cls.policy is FAIR and job.kind != "job":
                j.deferred = f"a {job.kind} needs a FIXED_SHARE or RESERVE class, and {cls.name} is FAIR_SHARE"
                continue
            j.policy = cls.policy
            j.pool = pool
            j.priority = cls.priority
            j.order = process_order(job.memory_gb, pool.quantum)
            j.weight = cls.weight or 1

    def _processes(self, state: DuccState) -> None:
        pending = state.pending_removal
        self.procs: list[P] = []
        seen: set[int] = set()
        for pr in sorted(state.processes, key=lambda pr: pr.share_id):
            if pr.share_id in seen:
                raise ValueError(f"share {pr.share_id} is listed twice")
            seen.add(pr.share_id)
            m = self.mby.get(pr.machine)
            if m is None:
                raise ValueError(f"share {pr.share_id} runs on machine {pr.machine}, which is not in the state")
            j = self.jby.get(pr.job)
            p = P(pr.share_id, j, m, pr.order, pr.initialized, pr.started_at, pr.investment,
                  pending=pr.share_id in pending)
            self.procs.append(p)
            m.procs.append(p)
            m.used += p.order
            if p.pending:
                m.leaving += p.order
            if j is not None:
                j.procs.append(p)
                if p.pending:
                    j.leaving += 1
                else:
                    j.active += 1
                if pr.initialized:
                    j.initialized = True
            if pr.share_id >= self.next_id:
                self.next_id = pr.share_id + 1

    # --- node states and blacklisting --------------------------------------------

    def nodes(self) -> None:
        """Dead nodes, vary_off, blacklisting (see the module doc)."""
        for p in self.procs:
            m, j = p.m, p.j
            if m.status == "dead":
                self._purge(p)
                continue
            why = self._misplaced(p)
            if why is not None:
                p.blacklisted = True
                m.blacklisted = True
                if j is not None and j.note is None:
                    j.note = f"blacklisted on {m.name}: {why}"
                if not p.pending and self._evictable(j):
                    self.evict(p, "blacklist")
                continue
            if m.status == "varied_off" and j is not None and j.policy is FAIR and not p.pending:
                self.evict(p, "vary-off")

    @staticmethod
    def _evictable(j: J | None) -> bool:
        """Jobs (fair or fixed share) and services can be evicted; reservations cannot."""
        if j is None:
            return True
        return j.job.kind == "service" or (j.job.kind == "job" and j.policy is not RESERVE)

    def _misplaced(self, p: P) -> str | None:
        j, m = p.j, p.m
        if m.pool is None:
            return "its machine is in no nodepool"
        if j is None:
            return "its job is unknown"
        if j.policy is None:
            return j.deferred or "its job cannot be scheduled"
        if j.pool.top != m.pool.top:
            return "its machine is in another top-level nodepool"
        if j.policy is FAIR:
            if m.pool.name not in j.pool.search:
                return f"its machine is outside nodepool {j.pool.name} and its subpools"
        elif m.pool is not j.pool:
            return f"its machine is outside nodepool {j.pool.name}"
        if j.policy is RESERVE:
            if self.exact(j) and p.order != m.order or p.order > m.order:
                return "its machine's size no longer matches the reservation"
        elif p.order != j.order:
            return "its size in quanta changed"
        return None

    def exact(self, j: J) -> bool:
        enforce = j.cls.enforce_memory if j.cls is not None else None
        return enforce is not False

    def _purge(self, p: P) -> None:
        j = p.j
        p.gone = True
        reschedule = p.pending or j is None or j.policy is FAIR or j.job.kind == "service"
        if reschedule:
            self.evictions.append(Eviction(p.share_id, p.j.id if j else "", p.m.name, "node-dead"))
        else:
            self.lost.append(Lost(p.share_id, j.id, p.m.name, f"node {p.m.name} is dead"))
            j.lost += 1
        if j is not None:
            if p.pending:
                j.leaving -= 1
            else:
                j.active -= 1

    def evict(self, p: P, reason: str) -> None:
        """Evict an active old process: it stays occupied until confirmed gone."""
        p.evicted = True
        p.m.leaving += p.order
        j = p.j
        if j is not None:
            j.active -= 1
            j.leaving += 1
        self.evictions.append(Eviction(p.share_id, j.id if j else "", p.m.name, reason))  # type: ignore[arg-type]

    # --- small helpers ---------------------------------------------------------

    def investment_age(self, p: P) -> float:
        return max(0.0, self.now - p.started)

    def allowed_pools(self, j: J) -> list[str]:
        return j.pool.search if j.policy is FAIR else [j.pool.name]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b) if b else 0

