"""The tables. Times are Unix seconds (floats); deadlines are absolute, so a restart
never extends a grace period."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, Integer, String, Text
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


class ClientRow(Base):
    __tablename__ = "clients"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(200), unique=True)
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
    stop_reason: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    stdout: Mapped[list[str]] = mapped_column(JSON, default=list)
    stderr: Mapped[list[str]] = mapped_column(JSON, default=list)


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
