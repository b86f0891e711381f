"""Reading the whole store at start, and writing one batch per cycle in one transaction."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, bindparam, delete, func, insert, select, update

from apportion.service.published import (
    ActivityPub,
    AllocationPub,
    ClientPub,
    HoldingPub,
    HostPub,
    JobPub,
    SharePub,
)
from apportion.service import audit
from apportion.service.store.counters import Counters
from apportion.service.store.db import insert_dicts, insert_many, json_text
from apportion.service.store.models import (
    ActivityRow,
    ClientRow,
    CycleRow,
    EventRow,
    FenceRow,
    HoldingRow,
    HostRow,
    ItemRow,
    JobRow,
    PlanRow,
    RequestRow,
    ShareRow,
    TokenRow,
)

_CHUNK = 500  # rows per IN (...) list: SQLite allows a few thousand bound parameters
_DELETES: dict[Any, Any] = {}  # table -> DELETE ... WHERE key IN (:keys), for ``_replace``


@dataclass
class Batch:
    """Everything one step of the master changes: written in one transaction."""

    plan: tuple[int, str, str, float] | None = None  # version, text, applied by, at
    clients: list[ClientPub] = field(default_factory=list)
    hosts: dict[str, HostPub] = field(default_factory=dict)
    allocations: dict[int, AllocationPub] = field(default_factory=dict)
    deleted_allocations: list[int] = field(default_factory=list)
    deleted_clients: list[int] = field(default_factory=list)
    deleted_hosts: list[str] = field(default_factory=list)
    audit: list[tuple] = field(default_factory=list)  # rows of the calls this batch served (audit.Row)
    holdings: dict[int, HoldingPub | None] = field(default_factory=dict)  # None: gone
    holdings_full: list[tuple[int, HoldingPub]] | None = None  # the state was rebuilt: all of them
    fences: dict[tuple[str, str], tuple[int, str | None, str | None, int]] = field(default_factory=dict)
    # (request, host) -> (slots, group, pool owner, slots of them counted in that pool)
    activities: dict[int, ActivityPub] = field(default_factory=dict)
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    wake_hosts: set[str] = field(default_factory=set)
    decisions: Any = None
    kind_slots: dict[str, int] | None = None  # host -> the part of its slots vector work holds, what changed (not stored)
    # DUCC
    jobs: dict[int, JobPub] = field(default_factory=dict)
    new_items: list[dict[str, Any]] = field(default_factory=list)  # rows of submitted jobs' items
    items: dict[tuple[int, int], tuple[str, int, int | None, str | None]] = field(default_factory=dict)
    # (job, item) -> (state, attempts, share, error)
    shares: dict[int, SharePub] = field(default_factory=dict)
    tokens: list[dict[str, Any]] = field(default_factory=list)  # process tokens made (digests)
    dropped_tokens: list[int] = field(default_factory=list)  # shares whose process tokens go
    cycle: tuple[int, float, float] | None = None  # DUCC: (cycle, at, seconds) of a cycle that decided

    @property
    def empty(self) -> bool:
        return not (self.plan or self.clients or self.hosts or self.allocations or self.deleted_allocations
                    or self.deleted_clients or self.deleted_hosts or self.audit
                    or self.holdings or self.holdings_full is not None or self.activities or self.events
                    or self.jobs or self.new_items or self.items or self.shares or self.tokens
                    or self.dropped_tokens or self.cycle)


@dataclass
class Snapshot:
    plan_version: int
    plan_text: str
    plan_by: str
    plan_at: float
    clients: list[ClientPub]
    hosts: list[HostPub]
    allocations: list[AllocationPub]
    holdings: list[tuple[int, HoldingPub]]
    fences: list[tuple[tuple[int, str], tuple[int, str | None, str | None, int]]]
    activities: list[ActivityPub]
    next_event: int
    max_allocation: int
    max_activity: int
    jobs: list[JobPub] = field(default_factory=list)
    items: dict[int, list[tuple[int, Any, str, int, int | None, str | None]]] = field(default_factory=dict)
    # job -> its items (idx, item, state, attempts, share, error), in order
    shares: list[SharePub] = field(default_factory=list)  # not yet gone
    max_share: int = 0
    max_cycle: int = 0
    max_job: int = 0
    max_client: int = 0  # the highest client id ever given (ids are never reused)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "apt_" + secrets.token_urlsafe(32)


def _alloc_row(a: AllocationPub) -> dict[str, Any]:
    return {"id": a.id, "client": a.client, "consumer": a.consumer, "groups": a.groups, "min": a.min,
            "max": a.max, "order": a.order, "exclusive": a.exclusive, "requirement": a.requirement,
            "blocked": a.blocked, "seq": a.seq, "created_at": a.created_at, "memory": a.memory,
            "resources": a.resources, "walltime": a.walltime, "started_at": a.started_at}


def _holding_row(hid: int, h: HoldingPub) -> dict[str, Any]:
    return {"id": hid, "request": h.request, "group": h.group, "host": h.host, "slots": h.slots,
            "source": h.source, "deadline": h.deadline, "beneficiary": h.beneficiary, "reason": h.reason}


class StoreWriter:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._fences: dict[tuple[str, str], tuple[int, str | None, str | None, int]] = {}
        self.counters = Counters()  # ids only go up, through restarts and deletes

    # -- start -------------------------------------------------------------------
    def plan_in_force(self) -> PlanRow | None:
        with self.engine.connect() as c:
            return c.execute(select(PlanRow).order_by(PlanRow.version.desc()).limit(1)).first()

    def put_first_plan(self, text: str, by: str) -> None:
        """The plan given on the command line, stored as a new version when it differs
        from the one in force (a restart with the same file adds nothing)."""
        row = self.plan_in_force()
        if row is not None and row.text == text:
            return
        with self.engine.begin() as c:
            c.execute(insert(PlanRow).values(version=(row.version + 1) if row else 1, text=text, applied_by=by,
                                             applied_at=time.time()))

    def reported_hosts(self) -> list[Any]:
        from apportion.service.liveplan import ReportedHost

        with self.engine.connect() as c:
            return [ReportedHost(r.name, r.slots, r.memory, r.attributes or {}, r.state)
                    for r in c.execute(select(HostRow))]

    def load(self) -> Snapshot:
        with self.engine.connect() as c:
            plan = c.execute(select(PlanRow).order_by(PlanRow.version.desc()).limit(1)).first()
            if plan is None:
                raise RuntimeError("the store holds no plan: start the server with --plan")
            clients = [ClientPub(r.id, r.name, r.consumer, r.created_at) for r in c.execute(select(ClientRow))]
            hosts = [HostPub(r.name, r.slots, r.memory, r.os, r.attributes or {}, r.state, r.closed, r.last_seen,
                             containment=r.containment, run_as=r.run_as, closed_reason=r.closed_reason,
                             resources=r.resources if isinstance(r.resources, dict) else None)
                     for r in c.execute(select(HostRow))]
            allocs = [AllocationPub(r.id, r.client, r.consumer, list(r.groups), r.min, r.max, r.order, r.exclusive,
                                    r.requirement, list(r.blocked or []), r.seq, r.created_at, r.memory,
                                    resources=r.resources if isinstance(r.resources, dict) else None,
                                    walltime=r.walltime, started_at=r.started_at)
                      for r in c.execute(select(RequestRow))]
            holdings = [(r.id, HoldingPub(r.request, r.group, r.host, r.slots, r.source, r.deadline, r.beneficiary,
                                          r.reason))
                        for r in c.execute(select(HoldingRow).order_by(HoldingRow.id))]
            fences = [((r.request, r.host), (r.slots, r.group, r.pool, r.pooled or 0))
                      for r in c.execute(select(FenceRow))]
            acts = [ActivityPub(r.id, r.allocation, r.client, r.host, list(r.argv), dict(r.env or {}), r.cwd,
                                r.slots, r.state, r.created_at, r.exit_code, r.signal, r.pid, r.stop, r.stop_reason,
                                r.ended_at, list(r.stdout or []), list(r.stderr or []), r.job, r.user, r.uid,
                                bool(r.oom), r.limits, r.usage,
                                devices=r.devices if isinstance(r.devices, dict) else None)
                    for r in c.execute(select(ActivityRow))]
            top = self.counters.load(c)
            jobs = [JobPub(r.id, r.kind, r.user, r.cls, r.memory, r.max_processes, r.threads, list(r.argv or []),
                           dict(r.env or {}), r.cwd, r.client, r.state, r.reason or "", r.retries, r.submitted_at,
                           r.ended_at, r.init_seconds, r.seconds_per_item)
                    for r in c.execute(select(JobRow).order_by(JobRow.id))]
            items: dict[int, list[tuple[int, Any, str, int, int | None, str | None]]] = {}
            for r in c.execute(select(ItemRow.job, ItemRow.idx, ItemRow.item, ItemRow.state, ItemRow.attempts,
                                      ItemRow.share, ItemRow.error).order_by(ItemRow.job, ItemRow.idx)):
                items.setdefault(r.job, []).append((r.idx, json.loads(r.item), r.state, r.attempts, r.share,
                                                    r.error))
            shares = [SharePub(r.id, r.job, r.host, r.order, r.activity, r.started_at, r.cycle, r.initialized_at,
                               r.evicted, r.gone_cycle, r.gone_at)
                      for r in c.execute(select(ShareRow).where(ShareRow.gone_cycle.is_(None)).order_by(ShareRow.id))]
            max_share = c.execute(select(func.max(ShareRow.id))).scalar() or 0
            max_cycle = c.execute(select(func.max(CycleRow.id))).scalar() or 0
        self._fences = {(str(k[0]), k[1]): f for k, f in fences}
        return Snapshot(plan.version, plan.text, plan.applied_by, plan.applied_at, clients, hosts, allocs, holdings,
                        fences, acts, top["event"] + 1, top["allocation"], top["activity"], jobs, items, shares,
                        max_share, max_cycle, top["job"], top["client"])

    # -- a batch ---------------------------------------------------------------------
    def commit(self, b: Batch) -> None:
        if b.empty and b.fences == self._fences:
            return
        with self.engine.begin() as c:
            if b.plan is not None:
                version, text, by, at = b.plan
                c.execute(insert(PlanRow).values(version=version, text=text, applied_by=by, applied_at=at))
            if b.deleted_clients:  # first: a name may be given again in the same batch
                c.execute(delete(ClientRow).where(ClientRow.id.in_(b.deleted_clients)))
                self.counters.up(c, "client", max(b.deleted_clients))
            if b.deleted_hosts:
                c.execute(delete(HostRow).where(HostRow.name.in_(b.deleted_hosts)))
            if b.clients:
                c.execute(insert(ClientRow), [{"id": x.id, "name": x.name, "consumer": x.consumer,
                                               "created_at": x.created_at} for x in b.clients])
            if b.hosts:
                self._replace(c, HostRow, HostRow.name, list(b.hosts), [h.row() for h in b.hosts.values()])
            gone = list(b.deleted_allocations)
            if b.allocations or gone:
                self._replace(c, RequestRow, RequestRow.id, list(b.allocations) + gone,
                              [_alloc_row(a) for a in b.allocations.values() if a.id not in set(gone)])
                top = max([*b.allocations, *gone])
                if gone:  # a row that goes takes its id out of the table: the counter keeps it
                    self.counters.up(c, "allocation", top)
            if b.holdings_full is not None:
                c.execute(delete(HoldingRow))
                if b.holdings_full:
                    c.execute(insert(HoldingRow), [_holding_row(i, h) for i, h in b.holdings_full])
            if b.holdings:
                self._replace(c, HoldingRow, HoldingRow.id, list(b.holdings),
                              [_holding_row(i, h) for i, h in b.holdings.items() if h is not None])
            if b.fences != self._fences:
                c.execute(delete(FenceRow))
                if b.fences:
                    c.execute(insert(FenceRow), [{"request": int(r), "host": h, "slots": n, "group": g, "pool": pool,
                                                  "pooled": pooled}
                                                 for (r, h), (n, g, pool, pooled) in b.fences.items()])
            if b.activities:
                self._replace(c, ActivityRow, ActivityRow.id, list(b.activities),
                              [a.row() for a in b.activities.values()])
            if b.jobs:
                self._replace(c, JobRow, JobRow.id, list(b.jobs), [j.row() for j in b.jobs.values()])
            if b.new_items:
                for i in range(0, len(b.new_items), 5000):
                    c.execute(insert(ItemRow), b.new_items[i:i + 5000])
            if b.items:
                c.execute(update(ItemRow).where(ItemRow.job == bindparam("j"), ItemRow.idx == bindparam("i"))
                          .values(state=bindparam("s"), attempts=bindparam("a"), share=bindparam("h"),
                                  error=bindparam("e")),
                          [{"j": j, "i": i, "s": st, "a": a, "h": h, "e": e}
                           for (j, i), (st, a, h, e) in b.items.items()])
            if b.shares:
                self._replace(c, ShareRow, ShareRow.id, list(b.shares), [x.row() for x in b.shares.values()])
            if b.dropped_tokens:
                for i in range(0, len(b.dropped_tokens), _CHUNK):
                    c.execute(delete(TokenRow).where(TokenRow.share.in_(b.dropped_tokens[i:i + _CHUNK])))
            if b.tokens:
                c.execute(insert(TokenRow), [{**t, "id": self.counters.next(c, "token")} for t in b.tokens])
            if b.audit:
                audit.insert_rows(c, self.counters, b.audit)
            if b.cycle is not None:
                c.execute(insert(CycleRow).values(id=b.cycle[0], at=b.cycle[1], seconds=b.cycle[2]))
            if b.events:  # the most rows of a batch: one prepared INSERT, no ORM work per row
                now = time.time()
                insert_many(c, EventRow, ("id", "client", "body", "created_at"),
                            [(body["id"], client, json_text(body), now) for client, body in b.events])
        self._fences = dict(b.fences)

    @staticmethod
    def _replace(c, table, key, keys: list, rows: list[dict[str, Any]]) -> None:  # noqa: ANN001
        """Each of ``keys`` stored as its row in ``rows`` (inserted, or over the stored one: one
        prepared statement for all), or deleted where ``rows`` has none."""
        name = key.expression.name
        kept = {r[name] for r in rows}
        gone = [k for k in keys if k not in kept]
        if gone:
            drop = _DELETES.get(table)
            if drop is None:  # made once a table: a statement's construction cost more than its run
                drop = _DELETES[table] = delete(table).where(key.in_(bindparam("keys", expanding=True)))
            for i in range(0, len(gone), _CHUNK):
                c.execute(drop, {"keys": gone[i:i + _CHUNK]})
        insert_dicts(c, table, rows, replacing=name)

    # -- events and tokens (read and written outside the engine's batches) ---------------------
    def events_after(self, client: int, after: int, limit: int = 1000) -> list[dict[str, Any]]:
        with self.engine.connect() as c:
            rows = c.execute(select(EventRow.body).where(EventRow.client == client, EventRow.id > after)
                             .order_by(EventRow.id).limit(limit))
            return [r.body for r in rows]

    def create_token(self, kind: str, consumer: str | None = None, host: str | None = None) -> str:
        return self.make_token(kind, consumer, host)[1]

    def make_token(self, kind: str, consumer: str | None = None, host: str | None = None,
                   audit_row: audit.Row | None = None) -> tuple[int, str]:
        """A new token: (its id, the token). Only its digest is stored; ``audit_row`` with it."""
        token = new_token()
        with self.engine.begin() as c:
            tid = self.counters.next(c, "token")  # never a revoked token's id
            c.execute(insert(TokenRow).values(id=tid, digest=digest(token), kind=kind, consumer=consumer, host=host,
                                              created_at=time.time()))
            if audit_row is not None:
                audit.insert_rows(c, self.counters, [audit.with_created(audit_row, tid)])
        return tid, token

    def tokens(self) -> list[dict[str, Any]]:
        """Every token, without its secret (the digest is not shown either)."""
        with self.engine.connect() as c:
            return [{"id": r.id, "kind": r.kind, "consumer": r.consumer, "host": r.host, "created_at": r.created_at}
                    for r in c.execute(select(TokenRow).order_by(TokenRow.id))]

    def revoke_token(self, tid: int, audit_row: audit.Row | None = None) -> str | None:
        """Delete token ``tid``; its digest, to forget it in caches (None: no such token).
        The last admin token stays (ValueError): without one nobody could make another.
        ``audit_row`` is written with the change (a refusal's row: by the caller)."""
        with self.engine.begin() as c:
            kind = c.execute(select(TokenRow.kind).where(TokenRow.id == tid)).scalar()
            if kind == "admin" and c.execute(select(func.count()).where(TokenRow.kind == "admin")).scalar() <= 1:
                raise ValueError("it is the last admin token: make another first")
            gone = c.execute(delete(TokenRow).where(TokenRow.id == tid).returning(TokenRow.digest)).scalar()
            if audit_row is not None and gone is not None:
                audit.insert_rows(c, self.counters, [audit_row])
            return gone

    def token(self, token: str) -> TokenRow | None:
        with self.engine.connect() as c:
            return c.execute(select(TokenRow).where(TokenRow.digest == digest(token))).first()
