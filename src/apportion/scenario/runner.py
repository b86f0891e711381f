"""Drive the engine through a scenario's timeline and take a snapshot after each step.

At each step's time the step is applied and cycles run until nothing changes
("settled"). Between two steps the clock stops at every reclaim deadline in turn,
where the holder gives the slots up and the cycle settles again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from apportion.engine import Engine, HostState
from apportion.engine.decisions import Decisions
from apportion.scenario.model import Scenario, Step

MAX_CYCLES_PER_SETTLE = 1000


class SettleError(RuntimeError):
    """The engine kept changing its mind at one point in time: a bug, never a user error."""


def quiet_cycles(engine: Engine, now: float) -> Iterator[Decisions]:
    """Run cycles at ``now`` until a cycle decides nothing, yielding each that did."""
    for _ in range(MAX_CYCLES_PER_SETTLE):
        d = engine.cycle(now)
        if not d:
            return
        yield d
    raise SettleError(f"no steady state after {MAX_CYCLES_PER_SETTLE} cycles at t={now}")


def settle(engine: Engine, now: float) -> list[Decisions]:
    """Run cycles at ``now`` until a cycle decides nothing; what each decided."""
    return list(quiet_cycles(engine, now))


def advance(engine: Engine, until: float) -> list[Decisions]:
    """Let the clock pass every reclaim deadline before ``until``, in order."""
    out = []
    while True:
        dl = engine.next_deadline()
        if dl is None or dl >= until:
            return out
        out.extend(settle(engine, dl))


def apply_step(engine: Engine, step: Step) -> list:
    """Apply what happens at a step; returns what a new plan removed (if any)."""
    removed = engine.apply_plan(step.plan) if step.plan is not None else []
    hc = step.hosts
    for name in hc.down:
        engine.set_host_state(name, HostState.DOWN)
    for name in hc.close:
        engine.set_host_state(name, HostState.CLOSED)
    for name in hc.up + hc.open:
        engine.set_host_state(name, HostState.OK)
    # new requests first, so that a step may change or release what it submits
    for req in step.requests:
        engine.submit(req)
    for rid, ch in step.change.items():
        engine.change(rid, min=ch.min, max=ch.max)
    for rid in step.release:
        engine.release(rid)
    return removed


def snapshot(engine: Engine, at: float, decided: list[Decisions], removed_by_plan=()) -> dict[str, Any]:
    rep = engine.report()
    consumers = {}
    for path, line in rep.consumers.items():
        consumers[path] = {
            "held": line.held, "allocated": line.held,
            "groups": {
                g: {
                    "held": gl.held, "owned": gl.owned, "borrowed": gl.borrowed, "shared": gl.shared,
                    "allocated": gl.held, "allocated_owned": gl.owned,
                    "lent": gl.lent, "deserved": gl.deserved, "demand": gl.demand,
                    "planned_owned": gl.planned_owned, "shortfall": gl.shortfall,
                    "owned_hosts": list(gl.owned_hosts),
                    "private_pool": gl.private_pool, "public_pool": gl.public_pool,
                }
                for g, gl in line.groups.items()
            },
        }
    requests = {rid: {"held": sum(h.values()), "allocated": sum(h.values()), "hosts": h} for rid, h in rep.requests.items()}
    reclaiming = [
        {"request": r.request, "host": r.host, "slots": r.slots, "deadline": r.deadline, "for": r.beneficiary}
        for r in rep.reclaiming
    ]
    lost = [
        {"request": x.request, "host": x.host, "slots": x.slots, "consumer": x.consumer}
        for d in decided for x in d.lost
    ]
    counts = {
        "grants": sum(len(d.grants) for d in decided),
        "reclaims": sum(len(d.reclaims) for d in decided),
        "removals": sum(len(d.removals) for d in decided),
    }
    out = {"at": at, "consumers": consumers, "requests": requests, "reclaiming": reclaiming,
           "lost": lost, "decisions": counts}
    if rep.reservations:
        out["reservations"] = [
            {"request": r.request, "consumer": r.consumer, "group": r.group, "min": r.min, "held": r.held,
             "kept": r.kept, "planned_start": r.planned_start}
            for r in rep.reservations
        ]
    if engine.kinds:  # requests with resource vectors (engine/drf.py): per-kind use, dominant shares
        requests.update(engine.kinds.requests_held())
        reclaiming.extend(engine.kinds.reclaiming())
        out["kinds"] = engine.kinds.report(engine.state)
    if removed_by_plan:
        out["removed_by_plan"] = [
            {"request": x.request, "host": x.host, "slots": x.slots, "consumer": x.consumer, "reason": x.reason}
            for x in removed_by_plan
        ]
    return out


def run(scenario: Scenario) -> list[dict[str, Any]]:
    engine = Engine(scenario.plan)
    snaps = []
    for step in scenario.steps:
        decided = advance(engine, step.at)
        removed = apply_step(engine, step)
        decided += settle(engine, step.at)
        snaps.append(snapshot(engine, step.at, decided, removed))
    return snaps
