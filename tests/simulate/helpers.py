"""Small plans and jobs for the simulator's tests."""

from __future__ import annotations

from typing import Any

from apportion.plan import compile_plan
from apportion.simulate.replay import Replay
from apportion.traces.record import TraceJob


def plan(consumers: list[dict[str, Any]], slots: int, hosts: int = 1):
    per = slots // hosts
    name = f"h[1-{hosts}]" if hosts > 1 else "h1"
    return compile_plan({
        "hosts": [{"name": name, "slots": per}],
        "resource_groups": [{"name": "cpu", "hosts": [name]}],
        "consumers": consumers,
    })


def job(i: int, submit: float, run: float, slots: int, user: str = "u", checkpoint: float | None = None,
        walltime: float | None = None) -> TraceJob:
    return TraceJob(id=str(i), submit=submit, run=run, slots=slots, user=user, checkpoint=checkpoint,
                    walltime=walltime)


def by_user(table: dict[str, str]):
    return lambda j: (table[j.user], None)


def run(p, jobs, resolve, **kw) -> tuple[Replay, dict]:
    r = Replay(p, jobs, resolve, **kw)
    r.run()
    return r, r.result()


def shared_traces():
    """The shared traces directory beside the repository (or beside the folder of
    worktrees that holds it)."""
    from pathlib import Path

    here = Path(__file__).resolve()
    for up in (3, 4):
        if len(here.parents) > up and (here.parents[up] / "shared" / "traces").is_dir():
            return here.parents[up] / "shared" / "traces"
    return here.parents[3] / "shared" / "traces"
