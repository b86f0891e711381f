"""The agent's side of docs/service.md "The agent protocol": commands in, reports out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Json = dict[str, Any]
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")
_INT64 = 2**63 - 1  # a cgroup's limits are int64: a larger one is not a limit
# What the agent last sent of an activity's output: the sizes of its stdout and stderr files.
OutputMark = tuple[int, int]


def _optional_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= _INT64:
        raise ValueError(f"{name}: a number from 0 to 2^63-1, or null")
    return int(value)


def _text(value: str, name: str) -> str:
    """The master's rule for strings, held here too: no NUL byte (it cannot reach exec()) and
    no lone surrogate (not UTF-8). A start that breaks it fails with the field named."""
    bad = _NOT_TEXT.search(value)
    if bad is not None:
        raise ValueError(f"{name}: holds {ascii(bad.group())[1:-1]} at position {bad.start()}: no string may")
    return value


@dataclass(frozen=True)
class StartLimits:
    """The start command's `limits`: bytes of memory and of swap beyond it, CPU weight (100 per slot)."""

    memory: int | None = None
    swap: int | None = None
    cpu_weight: int | None = None

    @classmethod
    def from_json(cls, raw: Any) -> StartLimits:
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise ValueError("limits: an object")
        return cls(memory=_optional_int(raw.get("memory"), "limits.memory"),
                   swap=_optional_int(raw.get("swap"), "limits.swap"),
                   cpu_weight=_optional_int(raw.get("cpu_weight"), "limits.cpu_weight"))


MAX_DEVICE = 1023  # a GPU index or a CPU id


def _indices(value: Any, name: str) -> tuple[int, ...] | None:
    """`gpus` / `cpus`: a list of distinct indices 0..1023, or null (not stated)."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_DEVICE + 1 or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= MAX_DEVICE for i in value):
        raise ValueError(f"{name}: a list of indices 0..{MAX_DEVICE}, or null")
    if len(set(value)) != len(value):
        raise ValueError(f"{name}: an index named twice")
    return tuple(value)


@dataclass(frozen=True)
class Start:
    """`{"op": "start", "activity", "allocation", "argv", "env", "cwd", "slots", "user", "consumer", "limits",
    "gpus", "cpus"}`: `gpus` the GPU indices it may use (none: none), `cpus` the cores it is pinned to."""

    activity: int
    argv: list[str]
    allocation: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    slots: int = 1
    user: str | None = None  # the execution user the master resolved; None: the consumer's dynamic uid
    consumer: str | None = None  # the allocation's consumer path (a dynamic uid is per consumer)
    limits: StartLimits = field(default_factory=StartLimits)
    gpus: tuple[int, ...] = ()
    cpus: tuple[int, ...] | None = None

    @classmethod
    def from_json(cls, c: Json) -> Start:
        argv = c.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("argv: a non-empty list of strings")
        env = c.get("env") or {}
        if not isinstance(env, dict):
            raise ValueError("env: an object of strings")
        allocation = c.get("allocation")
        user = c.get("user")
        if user is not None and not isinstance(user, str):
            raise ValueError("user: a string or null")
        consumer = c.get("consumer")
        if consumer is not None and (not isinstance(consumer, str) or not consumer.startswith("/")):
            raise ValueError("consumer: a consumer path (/...) or null")
        cwd = c.get("cwd") or None
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError("cwd: a string or null")
        return cls(activity=int(c["activity"]), argv=[_text(a, f"argv[{i}]") for i, a in enumerate(argv)],
                   allocation=None if allocation is None else int(allocation),
                   env={_text(str(k), "env"): _text(str(v), f"env.{k}") for k, v in env.items()},
                   cwd=None if cwd is None else _text(cwd, "cwd"),
                   slots=int(c.get("slots") or 1), user=None if not user else _text(user, "user"),
                   consumer=None if consumer is None else _text(consumer, "consumer"),
                   limits=StartLimits.from_json(c.get("limits")), gpus=_indices(c.get("gpus"), "gpus") or (),
                   cpus=_indices(c.get("cpus"), "cpus") or None)


class Runner(Protocol):
    """What runs activities for one agent: real processes, or nothing at all (--light)."""

    def known(self) -> list[Json]:
        """`[{"id", "state"}]` (and "pid" while it runs) of every activity not yet forgotten, for
        register: the master ends what is not listed, and hears how a listed one ended in the
        heartbeat that follows (an end seen while the master was away keeps its exit code)."""
        ...

    def start(self, cmd: Start, host: str) -> None: ...

    def fail(self, activity: int, message: str) -> None:
        """Record a start that could not be made sense of as failed, with `message` as its reason."""
        ...

    def stop(self, activity: int, kill_grace: float) -> None: ...

    def forget(self, activity: int) -> None: ...

    def poll(self) -> bool:
        """Look at the processes, send SIGKILL where a grace ran out; True if an activity ended."""
        ...

    def reports(self, sent: dict[int, OutputMark]) -> tuple[list[Json], dict[int, OutputMark]]:
        """Every activity not forgotten, with output where it changed since `sent`; and the new marks."""
        ...


@runtime_checkable
class HostReporting(Protocol):
    """What a runner that runs real processes adds to the register and heartbeat bodies."""

    def describe(self) -> Json:
        """For register: `{"containment", "run_as"}`."""
        ...

    def host_report(self) -> Json:
        """For the heartbeat's "host": `{"alien"}`."""
        ...
