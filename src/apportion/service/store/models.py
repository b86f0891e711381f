"""The tables. Times are Unix seconds (floats); deadlines are absolute, so a restart
never extends a grace period."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class PlanRow(Base):
    __tablename__ = "plans"
    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    text: Mapped[str] = mapped_column(Text)
    applied_by: Mapped[str] = mapped_column(String(200))
    applied_at: Mapped[float] = mapped_column(Float)


class TokenRow(Base):
    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 of the token; the token is never stored
    kind: Mapped[str] = mapped_column(String(16))  # admin | consumer | agent
    consumer: Mapped[str | None] = mapped_column(String(400), nullable=True)
    host: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    # a process token (DUCC): the work of this share of this job, nothing else
    job: Mapped[int | None] = mapped_column(Integer, nullable=True)
    share: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)


class ClientRow(Base):
    __tablename__ = "clients"
    __table_args__ = (UniqueConstraint("consumer", "name", name="uq_clients_consumer_name"),)  # names are per consumer
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(200))
    consumer: Mapped[str] = mapped_column(String(400))
    created_at: Mapped[float] = mapped_column(Float)


class HostRow(Base):
    __tablename__ = "hosts"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    slots: Mapped[int] = mapped_column(Integer)
    memory: Mapped[float] = mapped_column(Float, default=0.0)
    os: Mapped[str] = mapped_column(String(100), default="")
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(16))  # ok | closed | down (engine HostState)
    closed: Mapped[bool] = mapped_column(Boolean, default=False)  # closed by the admin
    last_seen: Mapped[float] = mapped_column(Float, default=0.0)
    containment: Mapped[str | None] = mapped_column(String(32), nullable=True)  # cgroup-v2 | cgroup-v1 | process-group
    run_as: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # {"root": bool, "user": str}
    closed_reason: Mapped[str | None] = mapped_column(String(1000), nullable=True)  # why the master closed it
    resources: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # its agent's resource vector


class RequestRow(Base):
    """An allocation as the API names it: the engine's open request."""

    __tablename__ = "allocations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    client: Mapped[int] = mapped_column(Integer, index=True)
    consumer: Mapped[str] = mapped_column(String(400), index=True)
    groups: Mapped[list[str]] = mapped_column(JSON)
    min: Mapped[int] = mapped_column(Integer)
    max: Mapped[int] = mapped_column(Integer)
    order: Mapped[int] = mapped_column(Integer)
    exclusive: Mapped[bool] = mapped_column(Boolean)
    requirement: Mapped[str | None] = mapped_column(Text, nullable=True)
    blocked: Mapped[list[str]] = mapped_column(JSON, default=list)
    seq: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)
    memory: Mapped[float | None] = mapped_column(Float, nullable=True)  # GB per slot asked for (limits)
    resources: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # what each slot needs
    walltime: Mapped[float | None] = mapped_column(Float, nullable=True)  # seconds it runs once started, if said
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # when it first held its min


class HoldingRow(Base):
    """One engine allocation: slots a request holds on a host, from a source of the plan,
    with its pending reclaim if any."""

    __tablename__ = "holdings"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    request: Mapped[int] = mapped_column(Integer, index=True)
    group: Mapped[str] = mapped_column(String(200))
    host: Mapped[str] = mapped_column(String(200), index=True)
    slots: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(400))
    deadline: Mapped[float | None] = mapped_column(Float, nullable=True)
    beneficiary: Mapped[str | None] = mapped_column(String(400), nullable=True)
    reason: Mapped[str | None] = mapped_column(String(400), nullable=True)


class FenceRow(Base):
    """Slots that left a request while its processes still ran there."""

    __tablename__ = "fences"
    request: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    host: Mapped[str] = mapped_column(String(200), primary_key=True)
    slots: Mapped[int] = mapped_column(Integer)
    group: Mapped[str | None] = mapped_column(String(200), nullable=True)  # of those still counted in a pool:
    pool: Mapped[str | None] = mapped_column(String(400), nullable=True)  # the pool's owner,
    pooled: Mapped[int] = mapped_column(Integer, default=0)  # and how many


class ActivityRow(Base):
    __tablename__ = "activities"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    allocation: Mapped[int] = mapped_column(Integer, index=True)
    client: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(200), index=True)
    argv: Mapped[list[str]] = mapped_column(JSON)
    env: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    cwd: Mapped[str | None] = mapped_column(Text, nullable=True)
    slots: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))  # starting | running | exited | killed
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    signal: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    stop: Mapped[bool] = mapped_column(Boolean, default=False)  # the agent is to stop it
    stop_reason: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    stdout: Mapped[list[str]] = mapped_column(JSON, default=list)
    stderr: Mapped[list[str]] = mapped_column(JSON, default=list)
    job: Mapped[int | None] = mapped_column(Integer, nullable=True)  # DUCC: the job this process works for
    user: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the account it ran as
    uid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    oom: Mapped[bool] = mapped_column(Boolean, default=False)  # ended by the kernel's OOM killer
    limits: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # as the agent applied them
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # the last usage reported
    devices: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # GPUs (and cores) it holds


class JobRow(Base):
    """DUCC work: a job, a service or a reservation (``kind``)."""

    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(16))  # job | service | reservation
    user: Mapped[str] = mapped_column(String(200))
    cls: Mapped[str] = mapped_column(String(200))
    memory: Mapped[float] = mapped_column(Float)
    max_processes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    threads: Mapped[int] = mapped_column(Integer)
    argv: Mapped[list[str]] = mapped_column(JSON, default=list)
    env: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    cwd: Mapped[str | None] = mapped_column(Text, nullable=True)
    client: Mapped[int] = mapped_column(Integer)  # whose event stream tells of it
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    retries: Mapped[int] = mapped_column(Integer, default=3)
    submitted_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    init_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    seconds_per_item: Mapped[float | None] = mapped_column(Float, nullable=True)


class ItemRow(Base):
    """One work item of a job: queued, in flight (on a share), done or failed."""

    __tablename__ = "job_items"
    job: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    item: Mapped[str] = mapped_column(Text)  # the item as JSON text: SQLite's JSON column rounds bare floats
    state: Mapped[str] = mapped_column(String(8))  # queued | flight | done | failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    share: Mapped[int | None] = mapped_column(Integer, nullable=True)  # in flight on, or done by
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class ShareRow(Base):
    """A DUCC share: ``order`` quanta of a machine given to a job; its process, if any, is
    an activity. ``cycle``/``gone_cycle``: the cycles it was placed in and confirmed gone
    in (what a machine held at any cycle can be read back from these)."""

    __tablename__ = "shares"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    job: Mapped[int] = mapped_column(Integer, index=True)
    host: Mapped[str] = mapped_column(String(200))
    order: Mapped[int] = mapped_column(Integer)
    activity: Mapped[int | None] = mapped_column(Integer, nullable=True)
    started_at: Mapped[float] = mapped_column(Float)
    initialized_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    evicted: Mapped[str | None] = mapped_column(String(32), nullable=True)  # why, once evicted
    cycle: Mapped[int] = mapped_column(Integer)
    gone_cycle: Mapped[int | None] = mapped_column(Integer, nullable=True)
    gone_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class CycleRow(Base):
    """DUCC: each master cycle that changed anything, with its time (for audits)."""

    __tablename__ = "cycles"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    at: Mapped[float] = mapped_column(Float)
    seconds: Mapped[float] = mapped_column(Float)


class EventRow(Base):
    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    client: Mapped[int] = mapped_column(Integer, index=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)


class MetaRow(Base):
    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class QuarantineRow(Base):
    """A stored row the master could no longer accept at start, set aside with the reason
    (its table is left without it, so the master serves the rest)."""

    __tablename__ = "quarantine"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    table: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(400))
    row: Mapped[str] = mapped_column(Text)  # JSON text of the row as it was
    reason: Mapped[str] = mapped_column(Text)
    at: Mapped[float] = mapped_column(Float)


class AuditRow(Base):
    """A call that changed state, or was refused: who, what, and the outcome."""

    __tablename__ = "audit"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    at: Mapped[float] = mapped_column(Float, index=True)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    token: Mapped[int | None] = mapped_column(Integer, nullable=True)
    kind: Mapped[str | None] = mapped_column(String(16), nullable=True)
    consumer: Mapped[str | None] = mapped_column(String(400), nullable=True, index=True)
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(String(400))
    objects: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    status: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(1000))
