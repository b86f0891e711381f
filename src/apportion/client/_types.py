"""The shapes of the master's answers (docs/service.md), as typed dictionaries.

The master may add fields; these name the ones the contract promises.
"""

from __future__ import annotations

from typing import Any, TypedDict

Event = dict[str, Any]
"""One event: ``{"id", "type", "allocation", "host", "slots", ...}`` (docs/service.md, Events)."""


class Reclaiming(TypedDict, total=False):
    host: str
    slots: int
    deadline: float
    # "for" (the beneficiary) is a keyword in Python: read it as reclaiming["for"]


class Allocation(TypedDict, total=False):
    id: int
    client: int
    consumer: str
    min: int
    max: int
    held: int
    hosts: dict[str, int]
    reclaiming: list[Reclaiming]
    resources: dict[str, Any] | None  # what each slot asked for: cores, memory (GB), gpus, gpu_model
    devices: dict[str, list[dict[str, Any]]]  # host -> [{"activity", "gpus", "gpu_share"?, "cpus"?}] held now
    walltime: float | None  # seconds its work runs once started, as the client said
    started_at: float | None  # when it first held its min (Unix seconds)
    reserved: bool  # a rigid allocation waiting with slots kept for it
    planned_start: float | None  # when it is planned to start (Unix seconds; None: not known)


class Activity(TypedDict, total=False):
    id: int
    allocation: int
    host: str
    state: str
    exit_code: int | None
    signal: int | None
    slots: int
    argv: list[str]
    pid: int | None
    stopping: bool
    stop_reason: str | None
    created_at: float
    ended_at: float | None
    job: int  # DUCC: the job (or service) whose process it is
    user: str | None  # the account it runs as, and its uid (as its agent reports them)
    uid: int | None
    oom: bool  # the kernel's OOM killer ended it (stop_reason gives the limit and the peak)
    limits: dict[str, Any] | None  # memory (bytes), cpu_weight, pids: as the agent applied them
    usage: dict[str, Any] | None  # cpu_seconds, memory, memory_peak (bytes): while it runs, and at its end
    devices: dict[str, Any] | None  # {"gpus", "gpu_share"?, "cpus"?} it holds on its host


class Output(TypedDict):
    stdout: list[str]
    stderr: list[str]


class Host(TypedDict, total=False):
    name: str
    state: str
    slots: int
    free: int
    attributes: dict[str, Any]
    containment: str | None  # cgroup-v2, cgroup-v1 or process-group
    run_as: dict[str, Any] | None  # {"root": can its agent switch users, "user": the agent's own}
    alien: int | None  # processes of non-system users in no activity
    closed_reason: str | None  # why the master closed it
    last_seen: float  # the time of its agent's last heartbeat
    unreachable_since: float | None  # since when its agent is silent (unreachable or down)
    lost_at: float | None  # unreachable: when it is to be declared down
    fenced: int  # slots fenced there for processes not yet known gone
    fenced_for: list[int]  # the lost activities whose processes may still run there
    resources: dict[str, Any] | None  # its agent's vector: cores, memory, gpus, devices, custom
    resources_total: dict[str, float]  # slots, cores, memory (GB), gpus and custom kinds
    resources_used: dict[str, float]  # what the slots held there use, per kind
    devices_used: dict[str, Any]  # {"gpus": {INDEX: part held}, "cpus": [...]}: what live activities hold


class ConsumerRow(TypedDict, total=False):
    consumer: str
    group: str
    owned: int
    held: int
    borrowed: int
    lent: int
    deserved: int
    demand: int
    shortfall: int
    resources_used: dict[str, float]  # what its held slots in the group use, per kind (a parent: its subtree's)


class PlanInForce(TypedDict, total=False):
    version: int
    applied_by: str
    applied_at: float
    text: str
