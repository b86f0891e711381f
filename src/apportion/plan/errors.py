"""Problems found in a plan or scenario file, and the one exception that carries them.

A user fixing a plan wants every mistake at once, each pointing at a file, a
line and a field, so the loader never stops at the first problem: it collects
``Problem`` objects and raises a single ``PlanError`` holding all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

KeyPath = tuple[str | int, ...]
"""Where a value sits in the parsed document: ``("consumers", 3, "groups", "RG1", "owned")``."""

Positions = Mapping[KeyPath, int]
"""Key path -> 1-based line of that key (mapping entry) or item (sequence entry)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a file. ``str()`` gives ``file:line: field: reason``."""

    file: str
    line: int | None
    field: str
    reason: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}: {self.reason}"


class PlanError(Exception):
    """Raised instead of returning a half-checked plan; ``problems`` lists every problem found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: list[Problem] = list(problems)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


def format_field(path: KeyPath) -> str:
    """Render a key path the way a user would point at it: ``consumers[3].groups.RG1.owned``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "document"


def line_of(positions: Positions | None, path: KeyPath) -> int | None:
    """The line of ``path``, or of its nearest ancestor that has one (e.g. for a missing field)."""
    if not positions:
        return None
    for end in range(len(path), 0, -1):
        line = positions.get(path[:end])
        if line is not None:
            return line
    return positions.get(())


class Reporter:
    """Collects problems for one source, resolving field names and lines from key paths."""

    def __init__(self, source: str, positions: Positions | None) -> None:
        self.source = source
        self.positions = positions
        self.problems: list[Problem] = []

    def add(self, path: KeyPath, reason: str) -> None:
        self.problems.append(
            Problem(self.source, line_of(self.positions, path), format_field(path), reason)
        )

    def extend(self, problems: Iterable[Problem]) -> None:
        self.problems.extend(problems)

    def raise_if_any(self) -> None:
        if self.problems:
            raise PlanError(self.problems)
