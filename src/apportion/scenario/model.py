"""A scenario: a plan and a timeline of what happens to it, compiled and validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from apportion.engine.model import Plan, Request


@dataclass(frozen=True, slots=True)
class RequestChange:
    min: int | None = None
    max: int | None = None


@dataclass(frozen=True, slots=True)
class HostChanges:
    down: tuple[str, ...] = ()
    up: tuple[str, ...] = ()
    close: tuple[str, ...] = ()
    open: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Step:
    at: float
    requests: tuple[Request, ...] = ()
    change: Mapping[str, RequestChange] = field(default_factory=dict)
    release: tuple[str, ...] = ()
    hosts: HostChanges = HostChanges()
    plan: Plan | None = None  # a new plan from this step on

    def __post_init__(self) -> None:
        object.__setattr__(self, "change", MappingProxyType(dict(self.change)))


@dataclass(frozen=True, slots=True)
class Scenario:
    plan: Plan
    steps: tuple[Step, ...]
    source: str = "<scenario>"
