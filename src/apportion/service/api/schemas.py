"""Request bodies. Unknown fields are refused, so a misspelt field is an error, not ignored.
Types are strict (no ``true`` or ``"3"`` for a number, no NaN or Infinity).

One rule for strings (docs/service.md, "HTTP API"): no string the API or the agent protocol
takes may hold a NUL byte or a lone surrogate (neither can reach exec() or either store:
PostgreSQL's text refuses NUL, and neither store takes text that is not UTF-8); a string
that is a name or one line of text (an OS name, a user, a requirement, a consumer path) also
refuses every other control character. Argument and environment strings, and multi-line
texts (a work item's error, an agent's reason), keep tab, newline and the rest: they mean something there.
A process's output is not checked: it is kept as JSON, which escapes what it holds.

Numbers are bounded where they meet arithmetic or a column: host memory, per-slot memory,
slots; process ids, exit codes, signals and uids fit the stores' 32-bit integers."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from apportion.service.resources import RESERVED
from apportion.service.strings import LINE, TEXT

# checked by pydantic's own regex engine, which also refuses a lone surrogate (not UTF-8) for
# any string it matches: a 422 naming the field either way
Line = StringConstraints(pattern=LINE)  # a name or one line of text: no control character at all
Free = StringConstraints(pattern=TEXT)  # free text: no NUL, no lone surrogate

Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.@:+-]+$")]
# (one pattern per type: a second StringConstraints would replace the first's)
ConsumerPath = Annotated[str, StringConstraints(min_length=1, max_length=400, pattern=r"^/[^\s\x00-\x1f\x7f-\x9f]*$")]
HostName = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")]
Count = Annotated[int, Field(ge=0, le=1_000_000)]
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1, strict=True)]  # the stores' INTEGER (PostgreSQL's is 32-bit)
Pid = Annotated[int, Field(ge=0, le=2**31 - 1, strict=True)]
AttrValue = (Annotated[str, StringConstraints(max_length=1000), Line] | Annotated[int, Field(ge=-(2**53), le=2**53)]
             | float | bool)
# GB: a host's memory, 0 when not known; per slot, at least 4 MiB (Docker's floor for a
# memory limit is 6 MB: a limit of a few bytes kills the process at once)
MIN_GB = 4 / 1024
MAX_GB = 1_000_000.0  # a petabyte: more than any one host has
HostMemory = Annotated[float, Field(ge=0, le=MAX_GB, allow_inf_nan=False)]
SlotMemory = Annotated[float, Field(ge=MIN_GB, le=MAX_GB, allow_inf_nan=False, strict=True)]
MAX_WALLTIME = 1e8  # seconds (over three years): more than any batch system's time limit
Walltime = Annotated[float, Field(gt=0, le=MAX_WALLTIME, allow_inf_nan=False, strict=True)]

Arg = Annotated[str, StringConstraints(max_length=10_000), Free]  # a NUL byte cannot reach exec(): refused at the door
Cwd = Annotated[str, StringConstraints(min_length=1, max_length=4096), Free]
EnvKey = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^=\x00-\x1f\x7f-\x9f]+$")]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# --- resource vectors (docs/service.md, "Host resources and GPUs") ---------------------------
ResCount = Annotated[int, Field(ge=0, le=4096, strict=True)]
DeviceIndex = Annotated[int, Field(ge=0, le=1023, strict=True)]
ShortText = Annotated[str, StringConstraints(max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")]
ResName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Indices = Annotated[list[DeviceIndex], Field(max_length=1024)]


ResAmount = Annotated[float, Field(ge=0, le=4096, allow_inf_nan=False)]


def _custom_names(value: dict[str, Any]) -> dict[str, Any]:
    """No custom kind may take a name the vector gives a field of its own."""
    taken = sorted(k for k in value if k in RESERVED)
    if taken:
        raise ValueError(f"{taken[0]} is not a custom resource name (the vector names it itself)")
    return value


class SlotResources(_In):
    """What each slot of an allocation needs: cores, memory (GB), GPUs (a fraction shares one),
    and countable custom kinds that agents report (``--resource NAME=N``)."""

    cores: ResAmount = 0
    memory: Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)] = 0
    gpus: ResAmount = 0
    gpu_model: Annotated[str, StringConstraints(min_length=1, max_length=200,
                                                pattern=r"^[^\x00-\x1f\x7f]*$")] | None = None
    custom: Annotated[dict[ResName, ResAmount], Field(max_length=64), AfterValidator(_custom_names)] = {}

    def as_json(self) -> dict[str, Any]:
        """As stored and shown: every built-in kind, ``custom`` only where it names any."""
        out = self.model_dump()
        if not out["custom"]:
            del out["custom"]
        return out


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
    custom: Annotated[dict[ResName, ResCount], Field(max_length=64), AfterValidator(_custom_names)] = {}
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
    requirement: Annotated[str, StringConstraints(max_length=2000), Line] | None = None
    # GB per slot its activities may use, when less than their part of the host's memory
    memory: SlotMemory | None = None
    resources: SlotResources | None = None  # what each slot needs; none: a plain slot request
    # seconds its work runs once started, when the client knows (service/walltimes.py)
    walltime: Walltime | None = None


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
    env: dict[EnvKey, Arg] = {}
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
Reason = Annotated[str, StringConstraints(max_length=1000), Free]  # an agent's words: may span lines
User = Annotated[str, StringConstraints(min_length=1, max_length=200), Line]


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
    user: User


class AgentHost(_In):
    alien: Annotated[int, Field(ge=0, le=10_000_000, strict=True)] | None = None


class AgentActivity(_In):
    id: Annotated[int, Field(ge=1, le=2**63 - 1)]
    pid: Pid | None = None
    state: Literal["running", "exited", "killed", "failed"] = "running"
    reason: Reason | None = None  # failed: the user, the host and the rule; an OOM kill: limit and peak
    user: User | None = None
    uid: Annotated[int, Field(ge=0, le=2**31 - 1, strict=True)] | None = None  # the store's INTEGER
    limits: AgentLimits | None = None
    usage: AgentUsage | None = None
    oom: Annotated[bool, Field(strict=True)] = False
    unkillable: Annotated[bool, Field(strict=True)] = False
    exit_code: Int32 | None = None
    signal: Annotated[int, Field(ge=0, le=1024, strict=True)] | None = None
    stdout: list[str] | None = None
    stderr: list[str] | None = None


class AgentRegister(_In):
    slots: Count
    memory: HostMemory = 0.0
    os: Annotated[str, StringConstraints(max_length=100), Line] = ""
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
Env = dict[EnvKey, Arg]
Memory = Annotated[float, Field(gt=0, le=MAX_GB, allow_inf_nan=False)]
ItemId = Annotated[int, Field(ge=0, le=10_000_000)]
# a DUCC user's events go to the client "user:NAME": it must fit a client's name (200)
DuccUser = Annotated[str, StringConstraints(min_length=1, max_length=195, pattern=r"^[A-Za-z0-9_.@:+-]+$")]


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
    user: DuccUser | None = None
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
    user: DuccUser | None = None
    memory: Memory


class ServiceIn(_In):
    class_: Name | None = Field(None, alias="class")
    user: DuccUser | None = None
    memory: Memory
    argv: Argv
    env: Env = {}
    cwd: Cwd | None = None


class FailedItem(_In):
    item: ItemId
    error: Annotated[str, StringConstraints(max_length=100_000), Free] = ""


class WorkIn(_In):
    process: Annotated[int, Field(ge=1)] | None = None  # default: the process token's own
    done: Annotated[list[ItemId], Field(max_length=10_000)] = []
    failed: Annotated[list[FailedItem], Field(max_length=10_000)] = []
    want: Annotated[int, Field(ge=0, le=1000)] | None = None  # default: up to the job's threads
