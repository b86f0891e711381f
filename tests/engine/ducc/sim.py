"""Small builders for DUCC cycle tests: configurations, machines, jobs, and a driver
that plays the outer layer (publish, confirm evictions the cycle after)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from apportion.engine.ducc.api import (
    DuccDecisions,
    DuccState,
    Job,
    Machine,
    Process,
    advance,
    confirm_gone,
    schedule,
)
from apportion.engine.ducc.config import DuccClass, DuccConfig, DuccProperties, Nodepool, Policy, User


def pool(name: str, nodes: Iterable[str] = (), parent: str | None = None, quantum: int | None = 1,
         search_order: int = 100) -> Nodepool:
    return Nodepool(name, parent, tuple(nodes), quantum if parent is None else None, search_order)


def fair(name: str, nodepool: str = "p", priority: int = 10, weight: int = 1, init_cap: int = 100,
         doubling: bool = False, max_processes: int | None = None, users: tuple[str, ...] | None = None) -> DuccClass:
    return DuccClass(name, Policy.FAIR_SHARE, nodepool, priority, weight=weight, expand_by_doubling=doubling,
                     initialization_cap=init_cap, use_prediction=False, prediction_fudge=0,
                     max_processes=max_processes, users=users)


def fixed(name: str, nodepool: str = "p", priority: int = 5, max_allotment: int | None = None,
          max_processes: int | None = None) -> DuccClass:
    return DuccClass(name, Policy.FIXED_SHARE, nodepool, priority, max_allotment=max_allotment,
                     max_processes=max_processes)


def reserve(name: str, nodepool: str = "p", priority: int = 1, enforce: bool = True) -> DuccClass:
    return DuccClass(name, Policy.RESERVE, nodepool, priority, enforce_memory=enforce)


def config(pools: Iterable[Nodepool], classes: Iterable[DuccClass], users: Iterable[User] = (),
           **props) -> DuccConfig:
    props.setdefault("share_quantum", 1)
    return DuccConfig({p.name: p for p in pools}, {c.name: c for c in classes}, {u.name: u for u in users},
                      DuccProperties(**props))


def machines(*sizes: int, prefix: str = "m", pool_name: str | None = None) -> tuple[Machine, ...]:
    """Machines m1, m2, ... of the given sizes in GB (= order with a 1 GB quantum)."""
    return tuple(Machine(f"{prefix}{i + 1}", gb, pool_name) for i, gb in enumerate(sizes))


def job(id: str, user: str, cls: str = "normal", memory: float = 1, work: int = 1000, threads: int = 1,
        at: float = 0.0, kind: str = "job", max_processes: int | None = None) -> Job:
    return Job(id, user, cls, memory, max_processes=max_processes, threads=threads, work_items=work,
               submitted_at=at, kind=kind)  # type: ignore[arg-type]


class Sim:
    """The outer layer in a test: ``step()`` schedules, publishes, and (by default)
    confirms last cycle's evictions first, so evicted space is free the cycle after."""

    def __init__(self, cfg: DuccConfig, state: DuccState, period: float = 10.0) -> None:
        self.cfg = cfg
        self.state = state
        self.now = 0.0
        self.period = period
        self.last: DuccDecisions | None = None

    def step(self, confirm: bool = True) -> DuccDecisions:
        if confirm:
            self.state = confirm_gone(self.state)
        d = schedule(self.cfg, self.state, self.now)
        self.last = d
        self.state = advance(self.state, d)
        self.now += self.period
        return d

    def add(self, *jobs: Job) -> None:
        self.state = replace(self.state, jobs=self.state.jobs + tuple(jobs))

    def set_machine(self, name: str, **changes) -> None:
        self.state = replace(self.state, machines=tuple(replace(m, **changes) if m.name == name else m
                                                        for m in self.state.machines))

    def initialise_all(self) -> None:
        self.state = replace(self.state, processes=tuple(replace(p, initialized=True)
                                                         for p in self.state.processes))

    def held(self, job_id: str) -> list[Process]:
        return [p for p in self.state.processes if p.job == job_id]

    def on(self, machine: str) -> list[Process]:
        return [p for p in self.state.processes if p.machine == machine]

    def used(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.state.processes:
            out[p.machine] = out.get(p.machine, 0) + p.order
        return out
