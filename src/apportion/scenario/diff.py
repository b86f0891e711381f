"""What a new plan would do to a running cluster, before it is applied.

The old scenario is played to its last step; the new plan is then put in force on
that running state (``Engine.apply_plan``) and one instant is settled: every
reclaim it starts (with its deadline), every allocation it removes, which owned
hosts change owner, and how each consumer's deserved share moves. Nothing leaves
this function: it works on its own engine.
"""

from __future__ import annotations

from typing import Any

from apportion.engine import Engine, Plan
from apportion.engine.ownership import moves_between
from apportion.scenario.model import Scenario
from apportion.scenario.runner import advance, apply_step, settle


def plan_diff(old: Scenario, new: Plan) -> dict[str, Any]:
    engine = Engine(old.plan)
    now = 0.0
    for step in old.steps:
        advance(engine, step.at)
        apply_step(engine, step)
        settle(engine, step.at)
        now = step.at
    before = _deserved(engine)
    already = {(a.request, a.host, a.id) for a in engine.state.reclaiming.values()}
    owners_before = engine.plan.host_ownership
    removed = engine.apply_plan(new)
    moves = moves_between(owners_before, engine.plan.host_ownership, engine.plan)
    decided = settle(engine, now)
    after = _deserved(engine)
    reclaims = [
        {"request": r.request, "host": r.host, "slots": r.slots, "deadline": r.deadline, "for": r.beneficiary,
         "reason": r.reason}
        for d in decided for r in d.reclaims
    ]
    return {
        "at": now,
        # owned hosts changing owner (EGO's ownership policy): deepest owners, null for the pool
        "moves": [{"host": m.host, "group": m.group, "from": m.source, "to": m.target, "slots": m.slots}
                  for m in moves],
        "reclaims": reclaims,
        "removed": [
            {"request": x.request, "host": x.host, "slots": x.slots, "consumer": x.consumer, "reason": x.reason}
            for x in removed
        ],
        "deserved": {
            path: {g: {"before": before.get(path, {}).get(g), "after": n} for g, n in groups.items()}
            for path, groups in after.items()
            if groups != before.get(path)
        },
        "still_reclaiming_from_before": len(already),
    }


def _deserved(engine: Engine) -> dict[str, dict[str, int]]:
    rep = engine.report()
    return {p: {g: gl.deserved for g, gl in line.groups.items()} for p, line in rep.consumers.items()}
