"""The agent's side of docs/service.md "The agent protocol": commands in, reports out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

Json = dict[str, Any]
# What the agent last sent of an activity's output: the sizes of its stdout and stderr files.
OutputMark = tuple[int, int]


@dataclass(frozen=True)
class Start:
    """`{"op": "start", "activity", "allocation", "argv", "env", "cwd", "slots"}`."""

    activity: int
    argv: list[str]
    allocation: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    slots: int = 1

    @classmethod
    def from_json(cls, c: Json) -> Start:
        argv = c.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("argv: a non-empty list of strings")
        env = c.get("env") or {}
        if not isinstance(env, dict):
            raise ValueError("env: an object of strings")
        allocation = c.get("allocation")
        return cls(activity=int(c["activity"]), argv=list(argv),
                   allocation=None if allocation is None else int(allocation),
                   env={str(k): str(v) for k, v in env.items()}, cwd=c.get("cwd") or None,
                   slots=int(c.get("slots") or 1))


class Runner(Protocol):
    """What runs activities for one agent: real processes, or nothing at all (--light)."""

    def running(self) -> list[Json]:
        """`[{"id", "pid"}]` of what runs now, for register."""
        ...

    def start(self, cmd: Start, host: str) -> None: ...

    def fail(self, activity: int, message: str) -> None:
        """Record a start that could not be made sense of as ended (exit code 127)."""
        ...

    def stop(self, activity: int, kill_grace: float) -> None: ...

    def forget(self, activity: int) -> None: ...

    def poll(self) -> bool:
        """Look at the processes, send SIGKILL where a grace ran out; True if an activity ended."""
        ...

    def reports(self, sent: dict[int, OutputMark]) -> tuple[list[Json], dict[int, OutputMark]]:
        """Every activity not forgotten, with output where it changed since `sent`; and the new marks."""
        ...
