"""A synthetic, seeded workload for the engine benchmark.

Everything is built directly as engine model objects (no files, no plan
compiler) and is a pure function of its parameters and the seed: the same
``WorkloadSpec`` always gives the same plan, the same requests and the same
sequence of steady-state changes.

The shape:

- ``hosts`` hosts of ``slots_per_host`` slots, split into ``groups`` resource
  groups of contiguous hosts, stacked and balanced alternating;
- ``leaves`` leaf consumers in a 4-level tree (top / branch / team / leaf, leaves
  at depth 4); every third top-level consumer is planned in only half the groups;
- nested ownership: about 40% of a group's capacity is owned by some top-level
  consumers, and at each level below some children own part of their parent's
  ownership (never more than 60% of it), so every level stays well under its
  capacity and the rest forms private share pools; some owning leaves lend with a
  lend limit; share ratios 1-4; a few ranks, priorities, maxima and grace periods;
- ``requests`` open requests of 1-32 slots on a skewed choice of leaves (orders
  1, 2 and 4, a few with a minimum), so that demand is about twice the capacity
  and the cycle has to reclaim.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from apportion.engine.model import (
    ROOT,
    AllocationPolicy,
    Consumer,
    GroupSettings,
    Host,
    Plan,
    Policy,
    Request,
    ResourceGroup,
)

MAX_SLOTS = 32  # the largest request


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    hosts: int = 10_000
    slots_per_host: int = 16
    leaves: int = 1_000
    requests: int = 20_000
    groups: int = 4
    seed: int = 1
    # 1: plain slots; 3: hosts with cores, memory and GPUs, and requests with a vector per
    # slot (served by Dominant Resource Fairness, engine/drf.py), ownership counted in cores
    kinds: int = 1

    def __post_init__(self) -> None:
        if self.kinds not in (1, 3):
            raise ValueError("kinds must be 1 or 3")
        for name in ("hosts", "slots_per_host", "leaves", "groups"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.requests < 0:
            raise ValueError("requests must not be negative")
        if self.groups > self.hosts:
            raise ValueError("there must be at least one host per resource group")


def tree_shape(leaves: int) -> tuple[int, int, int]:
    """Fan-outs (tops, branches per top, teams per branch) for a 4-level tree with
    about the fourth root of ``leaves`` children per node; the leaves are dealt
    round-robin over the teams so that no team is left without a leaf."""
    f = max(1, round(leaves ** 0.25))
    while f > 1 and f ** 3 > leaves:
        f -= 1
    return f, f, f


def _split(total: int, weights: list[int]) -> list[int]:
    """``total`` split by weight, floors, the remainder to the first ones."""
    if not weights:
        return []
    s = sum(weights)
    out = [total * w // s for w in weights]
    for i in range(total - sum(out)):
        out[i % len(out)] += 1
    return out


@dataclass(slots=True)
class Workload:
    spec: WorkloadSpec
    plan: Plan
    requests: list[Request]
    leaves: list[str]
    leaf_weights: list[int] = field(repr=False)

    @property
    def capacity(self) -> int:
        return sum(h.slots for h in self.plan.hosts)

    @property
    def demand(self) -> int:
        return sum(r.max for r in self.requests)


def make_plan(spec: WorkloadSpec, rng: random.Random) -> Plan:
    width = len(str(spec.hosts - 1))
    hosts = tuple(Host(f"h{i:0{width}d}", spec.slots_per_host, resources=host_kinds(spec))
                  for i in range(spec.hosts))
    group_names = [f"rg{i}" for i in range(spec.groups)]
    bounds = [spec.hosts * i // spec.groups for i in range(spec.groups + 1)]
    groups = tuple(
        ResourceGroup(
            name,
            tuple(h.name for h in hosts[bounds[i]:bounds[i + 1]]),
            AllocationPolicy.STACKED if i % 2 == 0 else AllocationPolicy.BALANCED,
        )
        for i, name in enumerate(group_names)
    )
    capacity = {name: (bounds[i + 1] - bounds[i]) * spec.slots_per_host for i, name in enumerate(group_names)}

    # -- the tree: paths, parents, children in plan order (parents first) --------------
    n_top, n_branch, n_team = tree_shape(spec.leaves)
    teams = [f"/t{t}/b{b}/m{m}" for t in range(n_top) for b in range(n_branch) for m in range(n_team)]
    leaves_of: dict[str, list[str]] = {team: [] for team in teams}
    for i in range(spec.leaves):
        team = teams[i % len(teams)]
        leaves_of[team].append(f"{team}/l{len(leaves_of[team])}")
    children: dict[str, list[str]] = {ROOT: []}
    order: list[str] = []
    for t in range(n_top):
        top = f"/t{t}"
        children[ROOT].append(top)
        order.append(top)
        children[top] = []
        for b in range(n_branch):
            branch = f"{top}/b{b}"
            children[top].append(branch)
            order.append(branch)
            children[branch] = []
            for m in range(n_team):
                team = f"{branch}/m{m}"
                children[branch].append(team)
                order.append(team)
                children[team] = list(leaves_of[team])
                order.extend(leaves_of[team])
                for leaf in leaves_of[team]:
                    children[leaf] = []
    parent = {c: p for p, kids in children.items() for c in kids}

    # -- the groups each top-level subtree is planned in ------------------------------
    planned_in: dict[str, list[str]] = {}
    for t, top in enumerate(children[ROOT]):
        if spec.groups > 1 and t % 3 == 2:
            planned_in[top] = group_names[t % 2::2]
        else:
            planned_in[top] = list(group_names)

    def top_of(path: str) -> str:
        return "/" + path.split("/")[1]

    # -- per-consumer settings that do not depend on the group -------------------------
    ratio = {p: rng.randint(1, 4) for p in order}
    rank = {p: (rng.randint(1, 5) if rng.random() < 0.1 else None) for p in order}
    priority = {p: None for p in order}
    for p in order:  # a few non-leaf consumers get a priority, as do all their siblings
        if children[p] and rng.random() < 0.05:
            for sib in children[parent[p]]:
                priority[sib] = rng.randint(1, 3)
    grace = {p: rng.choice((0.0, 0.0, 10.0)) for p in order}
    leaf_max = {p: (rng.randint(64, 512) if not children[p] and rng.random() < 0.05 else None) for p in order}

    # -- nested ownership, per group -----------------------------------------------------
    owned: dict[tuple[str, str], int] = {}
    lend: dict[tuple[str, str], tuple[bool, int | None]] = {}

    def own_below(node: str, g: str, budget: int) -> None:
        kids = [k for k in children[node]]
        if not kids or budget <= 0:
            return
        owners = [k for k in kids if rng.random() < 0.5]
        if not owners:
            owners = [kids[0]]
        share = budget * rng.randint(40, 60) // 100  # the rest stays the parent's private pool
        for k, n in zip(owners, _split(share, [rng.randint(1, 4) for _ in owners]), strict=True):
            owned[(k, g)] = n
            if children[k]:
                own_below(k, g, n)
            elif n > 0 and rng.random() < 0.5:
                lend[(k, g)] = (True, max(1, n * rng.randint(25, 75) // 100))

    for g in group_names:
        tops = [t for t in children[ROOT] if g in planned_in[t]]
        owners = [t for i, t in enumerate(tops) if i % 2 == 0]
        own_total = capacity[g] * 40 // 100
        for t, n in zip(owners, _split(own_total, [rng.randint(1, 4) for _ in owners]), strict=True):
            owned[(t, g)] = n
            own_below(t, g, n)

    consumers = []
    for index, p in enumerate(order):
        gs = {}
        for g in planned_in[top_of(p)]:
            lends, limit = lend.get((p, g), (False, None))
            gs[g] = GroupSettings(
                owned=owned.get((p, g), 0),
                share_ratio=ratio[p],
                priority=priority[p],
                rank=rank[p],
                max=leaf_max[p],
                lend=lends,
                lend_limit=limit,
                # a borrower may not outlast its lender's grace: lenders get the longest
                grace=30.0 if lends else grace[p],
            )
        consumers.append(Consumer(p, parent[p], tuple(children[p]), index, gs))
    return Plan(hosts, groups, tuple(consumers), Policy())


def host_kinds(spec: WorkloadSpec) -> tuple[tuple[str, float], ...]:
    """A host's resources with 3 kinds: a core and 4 GB a slot, a GPU every 4 slots."""
    if spec.kinds == 1:
        return ()
    s = spec.slots_per_host
    return (("cores", float(s)), ("gpus", float(s // 4)), ("memory", 4.0 * s))


# what a slot asks with 3 kinds, and how often: most a core and 4 or 8 GB, some a GPU
SLOT_SHAPES = ((("cores", 1.0), ("memory", 4.0)), (("cores", 1.0), ("memory", 8.0)),
               (("cores", 4.0), ("gpus", 1.0), ("memory", 16.0)))
SLOT_SHAPE_WEIGHTS = (80, 95, 100)


def with_kinds(plan: Plan) -> Plan:
    """The plan for 3 kinds: what a consumer owns in slots it owns in cores (its slots' cores)."""
    consumers = tuple(replace(c, groups={g: replace(gs, owned=0, owned_kinds=(("cores", float(gs.owned)),))
                                         if gs.owned else gs for g, gs in c.groups.items()})
                      for c in plan.consumers)
    return replace(plan, consumers=consumers)


def random_request(rng: random.Random, rid: str, seq: int, leaves: list[str], weights: list[int],
                   groups_of: dict[str, tuple[str, ...]], kinds: int = 1) -> Request:
    consumer = rng.choices(leaves, cum_weights=weights)[0]
    x = rng.random()
    order = 4 if x < 0.05 else 2 if x < 0.15 else 1
    mx = rng.randint(1, MAX_SLOTS // order) * order
    y = rng.random()
    mn = mx if (y < 0.03 and mx <= 8) else order if y < 0.13 else 0
    groups: tuple[str, ...] = ()
    planned = groups_of[consumer]
    if len(planned) > 1 and rng.random() < 0.1:
        groups = (rng.choice(planned),)
    resources = rng.choices(SLOT_SHAPES, cum_weights=SLOT_SHAPE_WEIGHTS)[0] if kinds == 3 else ()
    return Request(rid, consumer, mx, min=mn, groups=groups, order=order, seq=seq, resources=resources)


def new_max(rng: random.Random, req: Request) -> int:
    lo = max(1, -(-req.min // req.order))
    return rng.randint(lo, MAX_SLOTS // req.order) * req.order


def make_workload(spec: WorkloadSpec) -> Workload:
    rng = random.Random(spec.seed)
    plan = make_plan(spec, rng)
    leaves = [c.path for c in plan.consumers if c.is_leaf]
    groups_of = {c.path: tuple(c.groups) for c in plan.consumers if c.is_leaf}
    # skewed demand: a few heavy leaves, many light ones
    cum, total = [], 0
    for _ in leaves:
        total += rng.choice((1, 1, 1, 2, 3, 8))
        cum.append(total)
    requests = [random_request(rng, f"r{i}", i, leaves, cum, groups_of, spec.kinds) for i in range(spec.requests)]
    if spec.kinds == 3:
        plan = with_kinds(plan)
    return Workload(spec, plan, requests, leaves, cum)


@dataclass(frozen=True, slots=True)
class Change:
    kind: str  # "release" | "submit" | "change"
    request: Request | None = None  # for submit
    id: str | None = None  # for release and change
    max: int | None = None  # for change


class Churn:
    """The steady-state changes: each step touches ``fraction`` of the open requests,
    a third released, a third changed (a new max), and as many new ones submitted as
    were released, so the number of open requests stays put. Deterministic for a seed."""

    def __init__(self, wl: Workload, fraction: float) -> None:
        self.rng = random.Random(f"churn-{wl.spec.seed}")
        self.fraction = fraction
        self.wl = wl
        self.open: list[Request] = list(wl.requests)
        self.pos: dict[str, int] = {r.id: i for i, r in enumerate(self.open)}
        self.next = len(wl.requests)
        self.groups_of = {c.path: tuple(c.groups) for c in wl.plan.consumers if c.is_leaf}

    def _drop(self, rid: str) -> None:
        i = self.pos.pop(rid)
        last = self.open.pop()
        if last.id != rid:
            self.open[i] = last
            self.pos[last.id] = i

    def step(self) -> list[Change]:
        rng = self.rng
        n = max(1, round(len(self.open) * self.fraction)) if self.open else 0
        touched = rng.sample(range(len(self.open)), min(n, len(self.open)))
        n_release = len(touched) // 3
        out: list[Change] = []
        release = [self.open[i] for i in touched[:n_release]]
        for i in touched[n_release:]:
            req = self.open[i]
            out.append(Change("change", id=req.id, max=new_max(rng, req)))
        for req in release:
            out.append(Change("release", id=req.id))
            self._drop(req.id)
        for _ in range(max(n_release, n - len(touched))):
            req = random_request(rng, f"r{self.next}", self.next, self.wl.leaves, self.wl.leaf_weights,
                                 self.groups_of, self.wl.spec.kinds)
            self.next += 1
            self.pos[req.id] = len(self.open)
            self.open.append(req)
            out.append(Change("submit", request=req))
        return out

    def steps(self, count: int) -> Iterator[list[Change]]:
        for _ in range(count):
            yield self.step()
