"""`apportion bench plan-change`: a plan change under running work, at 10,000 hosts.

The cluster: ``hosts`` hosts of ``slots`` slots in one resource group, every host
owned. ``parents`` top-level consumers each own ``hosts / parents`` hosts; under
each, ``leaves / parents`` leaves own the parent's hosts between them, 10 each at
the default size (1,000 leaves owning hosts). Each leaf runs one request of whole
hosts (order = slots per host, so one allocation per host) on its own hosts.
Half the leaves the change will grow ask for one host more than they own: with
every host owned and busy, they wait.

The change alters ``change_fraction`` of the leaves' ownerships (10%: 100 leaves),
in pairs under one parent: one leaf owns a host less, the other a host more.

Measured (wall clock, ``time.perf_counter``):

- **diff**: the new ownership worked out from the one in force and the work
  running (``ownership.assign``) and the hosts that change owner
  (``ownership.moves_between``): what ``apportion plan diff`` shows as moves;
- **apply**: ``Engine.apply_plan`` (which works the ownership out again, then
  builds the new state aside and swaps it in);
- then the cycles that settle it, and the reclaims they decide.

**Reclaims against the minimum the change forces.** A host that changes owner
carries allocations of its old owner. They must go only if the new owner wants
the slots: the minimum is, per host moved, the allocations on it held outside the
new owner's subtree, up to what the new owner still wants (in allocations). Here
each grower wants one host more and takes one busy host: minimum = 1 per grower.
Counted: the reclaims the settling cycles decide (one Reclaim per allocation or
piece of one), and of those, the ones on a moved host.
"""

from __future__ import annotations

import gc
import time
from dataclasses import asdict, dataclass

from apportion.bench.machine import source_revision
from apportion.engine import Consumer, Engine, GroupSettings, Host, Plan, Policy, Request, ResourceGroup
from apportion.engine.ownership import assign, moves_between
from apportion.engine.replan import workload_of
from apportion.scenario.runner import quiet_cycles

TARGET_S = 1.0


@dataclass(frozen=True, slots=True)
class PlanChangeSpec:
    hosts: int = 10_000
    slots: int = 16
    parents: int = 20
    leaves: int = 1_000
    change_fraction: float = 0.10

    def __post_init__(self) -> None:
        if self.parents < 1 or self.leaves < self.parents or self.leaves % self.parents:
            raise ValueError("leaves must be a positive multiple of parents")
        if self.hosts % self.leaves:
            raise ValueError("hosts must be a multiple of leaves (every leaf owns as many hosts)")
        if self.hosts // self.leaves < 2:
            raise ValueError("each leaf must own at least 2 hosts")
        if not 0 <= self.change_fraction <= 1:
            raise ValueError("change_fraction must be between 0 and 1")


def _plan(spec: PlanChangeSpec, per_leaf: dict[str, int]) -> Plan:
    hosts = tuple(Host(f"h{i:05d}", spec.slots) for i in range(spec.hosts))
    group = ResourceGroup("RG", tuple(h.name for h in hosts))
    per_parent = spec.leaves // spec.parents
    parent_hosts = spec.hosts // spec.parents
    consumers = []
    index = 0
    for p in range(spec.parents):
        ppath = f"/lob{p:03d}"
        kids = tuple(f"{ppath}/app{k:03d}" for k in range(per_parent))
        consumers.append(Consumer(ppath, "/", kids, index, {"RG": GroupSettings(owned_hosts=parent_hosts)}))
        index += 1
        for kid in kids:
            consumers.append(Consumer(kid, ppath, (), index, {"RG": GroupSettings(owned_hosts=per_leaf[kid])}))
            index += 1
    return Plan(hosts, (group,), tuple(consumers), Policy())


def _changes(spec: PlanChangeSpec, leaves: list[str]) -> tuple[dict[str, int], list[str]]:
    """Pairs under one parent (one leaf -1 host, the next +1), spread over the parents."""
    base = spec.hosts // spec.leaves
    per_leaf = dict.fromkeys(leaves, base)
    pairs = int(round(spec.leaves * spec.change_fraction)) // 2
    per_parent = spec.leaves // spec.parents
    growers = []
    for i in range(pairs):
        parent, slot = i % spec.parents, (i // spec.parents) * 2
        if slot + 1 >= per_parent:
            raise ValueError("change_fraction too large for this many leaves per parent")
        shrink = leaves[parent * per_parent + slot]
        grow = leaves[parent * per_parent + slot + 1]
        per_leaf[shrink] = base - 1
        per_leaf[grow] = base + 1
        growers.append(grow)
    return per_leaf, growers


def run(spec: PlanChangeSpec = PlanChangeSpec()) -> dict:
    base = spec.hosts // spec.leaves
    leaves = [f"/lob{p:03d}/app{k:03d}" for p in range(spec.parents) for k in range(spec.leaves // spec.parents)]
    new_per_leaf, growers = _changes(spec, leaves)
    old_plan = _plan(spec, dict.fromkeys(leaves, base))
    new_plan = _plan(spec, new_per_leaf)
    grow = set(growers)

    t = time.perf_counter()
    engine = Engine(old_plan)  # the initial assignment, in rank order
    for i, leaf in enumerate(leaves):
        want = base + (1 if leaf in grow else 0)
        engine.submit(Request(f"r{i:05d}", leaf, max=want * spec.slots, order=spec.slots, seq=i))
    cycles = sum(1 for _ in quiet_cycles(engine, 0.0))
    build_s = time.perf_counter() - t
    owners = engine.plan.host_ownership["RG"]
    on_own = sum(1 for a in engine.state.allocs.values() if owners.get(a.consumer, {}).get(a.host))
    allocs = len(engine.state.allocs)

    gc.collect()
    t = time.perf_counter()
    got = assign(new_plan, engine.plan.host_ownership, workload_of(engine.state))
    moves = moves_between(engine.plan.host_ownership, got.owners, new_plan)
    diff_s = time.perf_counter() - t

    before = engine.plan.host_ownership
    t = time.perf_counter()
    removed = engine.apply_plan(new_plan)
    apply_s = time.perf_counter() - t
    applied_moves = moves_between(before, engine.plan.host_ownership, engine.plan)

    # the minimum the change forces: per moved host, allocations on it held outside
    # the new owner's subtree, up to what the new owner still wants (in allocations)
    st = engine.state
    wants = {leaf: -(-sum(rs.unmet for rs in st.requests_of.get(leaf, {}).values()) // spec.slots)
             for leaf in leaves}
    minimum = 0
    moved_hosts = set()
    for m in applied_moves:
        if m.target is None:
            continue
        moved_hosts.add(m.host)
        others = sum(1 for a in st.by_host[m.host].values()
                     if not (a.consumer == m.target or a.consumer.startswith(m.target + "/")))
        take = min(others, wants.get(m.target, 0))
        wants[m.target] = wants.get(m.target, 0) - take
        minimum += take

    t = time.perf_counter()
    reclaims = []
    cycles_after = 0
    for d in quiet_cycles(engine, 0.0):
        reclaims.extend(d.reclaims)
        cycles_after += 1
    settle_s = time.perf_counter() - t
    short_after = sum(rs.unmet for leaf in growers for rs in st.requests_of.get(leaf, {}).values())

    return {
        "spec": asdict(spec),
        "revision": source_revision(),
        "cluster": {"hosts": spec.hosts, "slots": spec.hosts * spec.slots, "consumers": len(old_plan.consumers),
                    "owning_leaves": spec.leaves, "allocations": allocs, "allocations_on_own_hosts": on_own,
                    "build_and_settle_s": build_s, "settle_cycles": cycles},
        "change": {"leaves_altered": 2 * len(growers), "growers": len(growers), "shrinkers": len(growers)},
        "diff_s": diff_s,
        "apply_s": apply_s,
        "diff_and_apply_s": diff_s + apply_s,
        "target_s": TARGET_S,
        "met": diff_s + apply_s <= TARGET_S,
        "moves": len(moves),
        "moves_applied": len(applied_moves),
        "moved_hosts": len(moved_hosts),
        "removed": len(removed),
        "reclaims": len(reclaims),
        "reclaimed_slots": sum(r.slots for r in reclaims),
        "reclaims_on_moved_hosts": sum(1 for r in reclaims if r.host in moved_hosts),
        "minimum_reclaims": minimum,
        "settle_after_s": settle_s,
        "settle_after_cycles": cycles_after,
        "growers_still_short_slots": short_after,
    }


__all__ = ["PlanChangeSpec", "TARGET_S", "run"]
