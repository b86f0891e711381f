"""Request bodies. Unknown fields are refused, so a misspelt field is an error, not ignored.
Types are strict (no ``true`` or ``"3"`` for a number, no NaN or Infinity), and no text that
reaches a process (argv, env, cwd) may hold a NUL byte."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.@:+-]+$")]
ConsumerPath = Annotated[str, StringConstraints(min_length=1, max_length=400, pattern=r"^/[^\s]*$")]
HostName = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")]
Count = Annotated[int, Field(ge=0, le=1_000_000)]
AttrValue = str | int | float | bool


NoNul = StringConstraints(pattern=r"^[^\x00]*$")  # a NUL byte cannot reach exec(): refused at the door
Arg = Annotated[str, StringConstraints(max_length=10_000), NoNul]
Cwd = Annotated[str, StringConstraints(min_length=1, max_length=4096), NoNul]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# --- resource vectors (docs/service.md, "Host resources and GPUs") ---------------------------
ResCount = Annotated[int, Field(ge=0, le=4096, strict=True)]
DeviceIndex = Annotated[int, Field(ge=0, le=1023, strict=True)]
ShortText = Annotated[str, StringConstraints(max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")]
ResName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Indices = Annotated[list[DeviceIndex], Field(max_length=1024)]


class SlotResources(_In):
    """What each slot of an allocation needs: cores, memory (GB), GPUs (a fraction shares one)."""

    cores: Annotated[float, Field(ge=0, le=4096, allow_inf_nan=False)] = 0
    memory: Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)] = 0
    gpus: Annotated[float, Field(ge=0, le=4096, allow_inf_nan=False)] = 0
    gpu_model: Annotated[str, StringConstraints(min_length=1, max_length=200,
                                                pattern=r"^[^\x00-\x1f\x7f]*$")] | None = None


class GpuDevice(_In):
    index: DeviceIndex
    minor: DeviceIndex | None = None
    model: ShortText = ""
    pci_bus_id: ShortText = ""
    uuid: ShortText = ""


class HostResourcesIn(_In):
    """An agent's resource vector (agent/resources.py)."""

    cores: ResCount = 0
    memory: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] = 0.0
    gpus: ResCount = 0
    gpu_model: ShortText | None = None
    devices: Annotated[list[GpuDevice], Field(max_length=1024)] = []
    custom: Annotated[dict[ResName, ResCount], Field(max_length=64)] = {}
    pin_cores: Annotated[bool, Field(strict=True)] = False
    cpus: Indices = []


class ClientIn(_In):
    name: Name
    consumer: ConsumerPath


class AllocationIn(_In):
    client: Annotated[int, Field(ge=1)]
    consumer: ConsumerPath
    group: Name | Annotated[list[Name], Field(min_length=1, max_length=100)] | None = None
    min: Count = 0
    max: Count
    slots_per_instance: Annotated[int, Field(ge=1, le=10_000)] = 1
    exclusive: bool = False
    requirement: Annotated[str, StringConstraints(max_length=2000)] | None = None
    # GB per slot its activities may use, when less than their part of the host's memory
    memory: Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False, strict=True)] | None = None
    resources: SlotResources | None = None  # what each slot needs; none: a plain slot request


class AllocationChange(_In):
    min: Count | None = None
    max: Count | None = None


class ReleaseIn(_In):
    hosts: Annotated[list[HostName], Field(min_length=1, max_length=10_000)] | None = None
    slots: Annotated[dict[HostName, Annotated[int, Field(ge=1, le=1_000_000)]],
                     Field(min_length=1, max_length=10_000)] | None = None
    blocked: bool = False


class ActivityIn(_In):
    host: HostName
    argv: Annotated[list[Arg], Field(min_length=1, max_length=1000)]
    env: dict[Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^=\x00]+$")], Arg] = {}
    cwd: Cwd | None = None
    slots: Annotated[int, Field(ge=1, le=10_000)] = 1


class HostClose(_In):
    reclaim: bool = False


class TokenIn(_In):
    kind: Literal["admin", "consumer", "agent"]
    consumer: ConsumerPath | None = None
    host: HostName | None = None


ActivityState = Literal["starting", "running", "exited", "killed", "failed", "lost"]  # published.py's, all of them
Bytes = Annotated[int, Field(ge=0, le=2**63 - 1, strict=True)]  # cgroup v1 "unlimited" is near 2**63
Reason = Annotated[str, StringConstraints(max_length=1000)]


class AgentLimits(_In):
    """What the agent applied to an activity (docs/service.md, "The agent protocol")."""

    memory: Bytes | None = None
    swap: Bytes | None = None
    cpu_weight: Annotated[int, Field(ge=0, le=1_000_000, strict=True)] | None = None
    cpu_max: Annotated[float, Field(ge=0, le=100_000, allow_inf_nan=False, strict=True)] | None = None  # cores
    pids: Annotated[int, Field(ge=0, le=2**31, strict=True)] | None = None
    gpus: Indices | None = None  # the GPUs it may use (CUDA_VISIBLE_DEVICES)
    devices: Literal["cgroup-v1", "environment"] | None = None  # how the other GPUs are kept from it
    cpus: Indices | None = None  # the cores it is pinned to
    cpu_pinning: Literal["cpuset", "affinity"] | None = None


class AgentUsage(_In):
    cpu_seconds: Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False, strict=True)] | None = None
    memory: Bytes | None = None
    memory_peak: Bytes | None = None


class AgentRunAs(_In):
    root: Annotated[bool, Field(strict=True)]
    user: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class AgentHost(_In):
    alien: Annotated[int, Field(ge=0, le=10_000_000, strict=True)] | None = None


class AgentActivity(_In):
    id: Annotated[int, Field(ge=1)]
    pid: int | None = None
    state: Literal["running", "exited", "killed", "failed"] = "running"
    reason: Reason | None = None  # failed: the user, the host and the rule; an OOM kill: limit and peak
    user: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    uid: Annotated[int, Field(ge=0, le=2**32 - 1, strict=True)] | None = None
    limits: AgentLimits | None = None
    usage: AgentUsage | None = None
    oom: Annotated[bool, Field(strict=True)] = False
    unkillable: Annotated[bool, Field(strict=True)] = False
    exit_code: int | None = None
    signal: int | None = None
    stdout: list[str] | None = None
    stderr: list[str] | None = None


class AgentRegister(_In):
    slots: Count
    memory: Annotated[float, Field(ge=0)] = 0.0
    os: Annotated[str, StringConstraints(max_length=100)] = ""
    attributes: dict[Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")],
                     AttrValue] = {}
    activities: list[AgentActivity] = []
    containment: Literal["cgroup-v2", "cgroup-v1", "process-group"] | None = None
    run_as: AgentRunAs | None = None
    resources: HostResourcesIn | None = None


class AgentHeartbeat(_In):
    wait: Annotated[float, Field(ge=0, le=30)] = 0.0
    activities: list[AgentActivity] = []
    host: AgentHost | None = None


def groups_of(group: Any) -> list[str]:
    if group is None:
        return []
    return [group] if isinstance(group, str) else list(group)


# --- DUCC ------------------------------------------------------------------------------------
Argv = Annotated[list[Arg], Field(min_length=1, max_length=1000)]
Env = dict[Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^=\x00]+$")], Arg]
Memory = Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False)]
ItemId = Annotated[int, Field(ge=0, le=10_000_000)]


def _finite(items: list[Any]) -> list[Any]:
    """Work items are any JSON but NaN and Infinity (JSON has neither: they would not go back out)."""
    todo = list(items)
    while todo:
        x = todo.pop()
        if isinstance(x, float) and not math.isfinite(x):
            raise ValueError(f"{x} is not a JSON number (a work item must be finite)")
        if isinstance(x, list):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
    return items


class JobIn(_In):
    class_: Name | None = Field(None, alias="class")
    user: Name | None = None
    memory: Memory
    max_processes: Annotated[int, Field(ge=1, le=100_000)] | None = None
    threads: Annotated[int, Field(ge=1, le=1000)] = 4
    work: Annotated[list[Any], Field(min_length=1, max_length=1_000_000), AfterValidator(_finite)]
    argv: Argv
    env: Env = {}
    cwd: Cwd | None = None
    retries: Annotated[int, Field(ge=0, le=100)] = 3


class ReservationIn(_In):
    class_: Name | None = Field(None, alias="class")
    user: Name | None = None
    memory: Memory


class ServiceIn(_In):
    class_: Name | None = Field(None, alias="class")
    user: Name | None = None
    memory: Memory
    argv: Argv
    env: Env = {}
    cwd: Cwd | None = None


class FailedItem(_In):
    item: ItemId
    error: Annotated[str, StringConstraints(max_length=100_000)] = ""


class WorkIn(_In):
    process: Annotated[int, Field(ge=1)] | None = None  # default: the process token's own
    done: Annotated[list[ItemId], Field(max_length=10_000)] = []
    failed: Annotated[list[FailedItem], Field(max_length=10_000)] = []
    want: Annotated[int, Field(ge=0, le=1000)] | None = None  # default: up to the job's threads
