"""State shared by the compile passes: what is known so far, and how complete it is.

Passes run in file order (hosts, groups, policy, consumers, timeline); each
adds what it learned here. The ``*_complete`` flags record whether every
name of a section could be read: when one could not, "unknown X" checks
against that section are skipped, since the unreadable entry may be the one
named, and a false "unknown" would only bury the real problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apportion.engine.model import Consumer, Host, ResourceGroup
from apportion.plan.errors import KeyPath, Reporter
from apportion.plan.schema import Checked, ConsumerIn

NAME_PATTERN = r"[A-Za-z][0-9A-Za-z_-]{0,127}"
MAX_DEPTH = 5


@dataclass
class ConsumerInfo:
    """One consumer entry while the tree is being checked."""

    index: int
    path: str
    item: Checked[ConsumerIn]
    parent: str = "/"
    children: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)  # planned in, plan order
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # group -> field -> value
    sources: dict[str, dict[str, KeyPath]] = field(default_factory=dict)  # group -> field -> where set

    @property
    def model(self) -> ConsumerIn | None:
        return self.item.model

    @property
    def where(self) -> KeyPath:
        return ("consumers", self.index)

    def known(self, group: str, name: str) -> bool:
        """True when the merged ``name`` in ``group`` is what the user wrote (not a stand-in)."""
        return self.item.intact((name,), ("resource_groups",), ("groups", group, name))


@dataclass
class Context:
    reporter: Reporter
    hosts: list[Host] = field(default_factory=list)
    host_names: set[str] = field(default_factory=set)  # includes hosts too broken to build
    hosts_complete: bool = True
    groups: list[ResourceGroup] = field(default_factory=list)
    group_names: list[str] = field(default_factory=list)  # plan order, includes broken ones
    groups_complete: bool = True
    consumers: dict[str, ConsumerInfo] = field(default_factory=dict)  # plan order
    consumer_paths: set[str] = field(default_factory=set)  # every readable path
    consumers_complete: bool = True
    compiled_consumers: tuple[Consumer, ...] = ()

    def add(self, path: KeyPath, reason: str) -> None:
        self.reporter.add(path, reason)
