"""Start always: stored rows the master can no longer accept are set aside, not fatal.

Before the master rebuilds itself from the store, every row it rebuilds from is checked
(hosts, clients, allocations, their holdings, activities, jobs, and the plan in force
with the hosts reported). A row that fails (a host report with an infinite memory, a plan
that no longer compiles, a row written by an older version) is logged, moved into the
``quarantine`` table with the reason, in one transaction, and named in ``/readyz`` and
``apportion server check``; the master serves the rest. A plan version is set aside only
when an older one still compiles (the newest such is then in force): with none, nothing
can be served, and the master says so and stops as before.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import Connection, Engine, delete, insert, select, text

from apportion.service.store import counters
from apportion.service.store.models import (
    ActivityRow,
    ClientRow,
    FenceRow,
    HoldingRow,
    HostRow,
    JobRow,
    PlanRow,
    QuarantineRow,
    RequestRow,
)

log = logging.getLogger("apportion.quarantine")
SHOWN = 100  # quarantined rows named in /readyz (the count is always given)


@dataclass(frozen=True, slots=True)
class SetAside:
    table: str
    key: str
    reason: str
    at: float = 0.0

    def json(self) -> dict[str, Any]:
        return {"table": self.table, "key": self.key, "reason": self.reason, "at": self.at}


# --- what each row must be ------------------------------------------------------------------------
class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)


Id = Annotated[int, Field(ge=0)]
Count = Annotated[int, Field(ge=0, le=10_000_000)]
Text = Annotated[str, Field(max_length=100_000)]
Scalar = str | bool | int | float
Flag = Annotated[bool, Field(strict=False)]  # SQLite gives booleans back as 0 and 1


class HostCheck(_Row):
    name: Annotated[str, Field(min_length=1, max_length=200)]
    slots: Count
    memory: Annotated[float, Field(ge=0)]
    os: str | None = None
    attributes: dict[str, Scalar] | None = None
    state: Literal["ok", "closed", "unreachable", "down"]
    closed: Flag
    last_seen: float | None = None


class ClientCheck(_Row):
    id: Id
    name: Annotated[str, Field(min_length=1, max_length=200)]
    consumer: Annotated[str, Field(min_length=1, max_length=400)]


class AllocationCheck(_Row):
    id: Id
    client: Id
    consumer: str
    groups: list[str]
    min: Count
    max: Count
    order: Annotated[int, Field(ge=1, le=10_000)]
    exclusive: Flag
    requirement: str | None = None
    blocked: list[str] | None = None
    seq: Id
    created_at: float


class HoldingCheck(_Row):
    id: Id
    request: Id
    group: str
    host: str
    slots: Count
    source: str
    deadline: float | None = None


class ActivityCheck(_Row):
    id: Id
    allocation: Id
    client: Id
    host: str
    argv: Annotated[list[Annotated[str, Field(pattern=r"^[^\x00]*$")]], Field(min_length=1)]
    env: dict[str, Annotated[str, Field(pattern=r"^[^\x00]*$")]] | None = None
    cwd: Annotated[str, Field(pattern=r"^[^\x00]*$")] | None = None
    slots: Annotated[int, Field(ge=1)]
    state: str
    created_at: float
    stdout: list[str] | None = None
    stderr: list[str] | None = None


class JobCheck(_Row):
    id: Id
    kind: Literal["job", "service", "reservation"]
    user: str
    cls: str
    memory: Annotated[float, Field(gt=0)]
    threads: Annotated[int, Field(ge=1)]
    argv: list[str] | None = None
    env: dict[str, str] | None = None
    client: Id
    state: str
    retries: Annotated[int, Field(ge=0)]
    submitted_at: float


_COUNTED = {"allocations": "allocation", "activities": "activity", "clients": "client", "jobs": "job"}
# (table, model, key column, the row class); parents before their children
CHECKS: list[tuple[str, type[_Row], str, Any]] = [
    ("hosts", HostCheck, "name", HostRow),
    ("clients", ClientCheck, "id", ClientRow),
    ("allocations", AllocationCheck, "id", RequestRow),
    ("holdings", HoldingCheck, "id", HoldingRow),
    ("activities", ActivityCheck, "id", ActivityRow),
    ("jobs", JobCheck, "id", JobRow),
]


def _reason(e: ValidationError) -> str:
    first = e.errors()[0]
    where = ".".join(str(x) for x in first["loc"]) or "row"
    got = first.get("input")
    shown = repr(got)[:60] if not isinstance(got, dict | list) else type(got).__name__
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return f"{where}: {first['msg']} (got {shown}){more}"


def _json_columns(row_class: Any) -> set[str]:
    from sqlalchemy import JSON

    return {c.name for c in row_class.__table__.columns if isinstance(c.type, JSON)}


def _rows(c: Connection, table: str, row_class: Any) -> Iterable[tuple[dict[str, Any], str | None]]:
    """Each row as plain values (JSON columns decoded here, so a broken one is a reason,
    not a failure to read the table); with the reason it cannot be decoded, if any."""
    json_cols = _json_columns(row_class)
    for r in c.execute(text(f'SELECT * FROM "{table}"')):  # noqa: S608 - table names are ours
        row = dict(r._mapping)
        bad = None
        for k in json_cols & row.keys():
            v = row[k]
            if isinstance(v, str | bytes):
                try:
                    row[k] = json.loads(v)
                except ValueError:
                    bad = bad or f"{k}: not JSON"
        yield row, bad


def _dump(row: dict[str, Any]) -> str:
    return json.dumps(row, default=str, ensure_ascii=False)[:100_000]


class Sweep:
    """One look at the store: what is already in quarantine, and what would be set aside now."""

    def __init__(self, c: Connection) -> None:
        self.c = c
        self.found: list[tuple[SetAside, Any, str, dict[str, Any]]] = []  # (entry, row class, key col, row)
        self.plans_aside: list[tuple[SetAside, dict[str, Any]]] = []

    def add(self, table: str, row_class: Any, key_col: str, row: dict[str, Any], reason: str) -> None:
        self.found.append((SetAside(table, str(row.get(key_col)), reason, time.time()), row_class, key_col, row))

    def gone(self, table: str) -> set[str]:
        return {e.key for e, *_ in self.found if e.table == table}

    def rows(self) -> None:
        for table, model, key_col, row_class in CHECKS:
            aside_allocs = self.gone("allocations")
            for row, bad in _rows(self.c, table, row_class):
                if bad is not None:
                    self.add(table, row_class, key_col, row, bad)
                    continue
                try:
                    model.model_validate(row)
                except ValidationError as e:
                    self.add(table, row_class, key_col, row, _reason(e))
                    continue
                if table == "allocations" and row.get("requirement"):
                    from apportion.plan import parse_requirement

                    try:
                        parse_requirement(row["requirement"])
                    except (ValueError, RecursionError) as e:
                        self.add(table, row_class, key_col, row, f"requirement: {str(e)[:300]}")
                        continue
                if table == "allocations" and row["min"] > row["max"]:
                    self.add(table, row_class, key_col, row, f"min: {row['min']} is more than max {row['max']}")
                elif table == "holdings" and str(row["request"]) in aside_allocs:
                    self.add(table, row_class, key_col, row, f"request: allocation {row['request']} is quarantined")

    def plan(self) -> None:
        """The newest plan version that can be put in force with the hosts kept; hosts the
        plan compiler refuses (hosts[i]: ...) are set aside first."""
        from apportion.plan import PlanError
        from apportion.service import liveplan
        from apportion.service.ducc.plan import is_ducc_plan

        versions = [dict(r._mapping) for r in self.c.execute(select(PlanRow).order_by(PlanRow.version.desc()))]
        if not versions:
            return
        host_rows = {r["name"]: r for r, bad in _rows(self.c, "hosts", HostRow) if bad is None}
        for _ in range(len(host_rows) + 1):
            aside_hosts = self.gone("hosts")
            reported = [liveplan.ReportedHost(n, r["slots"], r["memory"], r["attributes"] or {}, r["state"])
                        for n, r in host_rows.items() if n not in aside_hosts]
            failures: list[str] = []
            for v in versions:
                parsed = None
                try:
                    parsed = liveplan.parse(v["text"], f"<plan version {v['version']}>", positions=False)
                    if not is_ducc_plan(parsed.data):
                        liveplan.compile_live(parsed, reported)
                except PlanError as e:
                    hosts = self._hosts_refused(e, parsed, reported)
                    if hosts:
                        for name, why in hosts:
                            self.add("hosts", HostRow, "name", host_rows[name], why)
                        break  # again without them
                    failures.append("; ".join(str(p) for p in e.problems)[:1000])
                    continue
                except Exception as e:  # noqa: BLE001 - any failure to read a stored plan is a reason
                    failures.append(f"{e.__class__.__name__}: {str(e)[:300]}")
                    continue
                # v is the newest that works: the newer ones are set aside
                for newer, why in zip(versions, failures, strict=False):
                    if newer["version"] == v["version"]:
                        break
                    self.plans_aside.append((SetAside("plans", str(newer["version"]), why, time.time()), newer))
                return
            else:
                log.critical("no stored plan version can be put in force: %s", failures[:1])
                return

    @staticmethod
    def _hosts_refused(e: Any, parsed: Any, reported: list[Any]) -> list[tuple[str, str]]:
        from apportion.service import liveplan

        if parsed is None:
            return []
        merged = liveplan.with_hosts(parsed, reported).get("hosts") or []
        names = {h.name for h in reported}
        out = []
        for p in e.problems:
            m = re.match(r"hosts\[(\d+)\]", p.field)
            if m and int(m.group(1)) < len(merged):
                name = merged[int(m.group(1))].get("name")
                if name in names and name not in {n for n, _ in out}:
                    out.append((name, f"{p.field.split('.', 1)[-1]}: {p.reason}"[:1000]))
        return out

    def move(self) -> list[SetAside]:
        """Set aside everything found (in this connection's transaction)."""
        out = []
        for entry, row_class, key_col, row in self.found:
            self._one(entry, row_class.__tablename__, getattr(row_class, key_col), row[key_col], row)
            if entry.table == "allocations":  # what only made sense with it goes with it
                self.c.execute(delete(FenceRow).where(FenceRow.request == row["id"]))
            kind = _COUNTED.get(entry.table)
            if kind is not None and isinstance(row.get("id"), int):
                counters.raise_to(self.c, kind, row["id"])  # its id is never given to another
            out.append(entry)
        for entry, row in self.plans_aside:
            self._one(entry, "plans", PlanRow.version, row["version"], row)
            out.append(entry)
        return out

    def _one(self, entry: SetAside, table: str, key: Any, value: Any, row: dict[str, Any]) -> None:
        log.error("quarantine: %s %s set aside: %s", table, entry.key, entry.reason)
        self.c.execute(insert(QuarantineRow).values(table=table, key=entry.key, row=_dump(row),
                                                    reason=entry.reason, at=entry.at))
        self.c.execute(delete(key.table).where(key == value))


def held(c: Connection) -> tuple[int, list[SetAside]]:
    """What the quarantine table holds: its count and the latest ``SHOWN`` entries."""
    from sqlalchemy import func

    n = c.execute(select(func.count()).select_from(QuarantineRow)).scalar() or 0
    rows = c.execute(select(QuarantineRow).order_by(QuarantineRow.id.desc()).limit(SHOWN))
    return n, [SetAside(r.table, r.key, r.reason, r.at) for r in rows]


def held_in(engine: Engine) -> tuple[int, list[SetAside]]:
    with engine.connect() as c:
        return held(c)


def sweep(engine: Engine, dry_run: bool = False, plan: bool = True) -> tuple[list[SetAside], int, list[SetAside]]:
    """Check the store (``plan``: the plan in force with the hosts too, which costs a compile);
    unless ``dry_run``, move what fails into quarantine (one transaction).
    (set aside now, count in quarantine, the latest entries in quarantine)."""
    if dry_run:
        with engine.connect() as c:
            s = Sweep(c)
            s.rows()
            if plan:
                s.plan()
            return [e for e, *_ in s.found] + [e for e, _ in s.plans_aside], *held(c)
    with engine.begin() as c:
        s = Sweep(c)
        s.rows()
        if plan:
            s.plan()
        now = s.move()
        return now, *held(c)
