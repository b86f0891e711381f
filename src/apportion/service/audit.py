"""The audit: every call that changes state, or tries to, recorded in the store.

A row holds the time, the request id (also in the access log and the ``X-Request-Id``
header), the token's id and kind, its consumer, the method and path, the objects named
(``{"allocations": 5}``, and ``"created"``: the id a creation gave), the HTTP status and
the outcome (``done``, or the refusal's message).

Where it is written:

- a call that reaches the master's task (``deps.run``) is recorded by the task itself,
  in the batch of the change, so the change and its row are committed in one
  transaction; a refusal inside the task (422, 404, 409, 429) is recorded the same way;
- token creation and revocation are recorded in their own transaction with the token;
- a call of an authenticated caller refused before reaching the task (403, a 422 of the
  body) is recorded once the answer is sent (``Guard``, app.py).

Not audited: a call refused before authentication (401, a 413 read before the token, a 404
of no route), which is counted and summed up in the log instead (throttle.py), so that no
one without a token can grow the store; reads, the agents' protocol (registers and heartbeats: the events and the
hosts' rows say what they changed), processes fetching work, and ``POST /v1/plan/diff``
(it changes nothing).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine, select

from apportion.service.store.db import insert_many, json_text
from apportion.service.strings import printable
from apportion.service.store.models import AuditRow

WRITES = ("POST", "PUT", "PATCH", "DELETE")
QUIET = ("/v1/agents/", "/v1/plan/diff")
COLLECTIONS = {"clients", "allocations", "activities", "hosts", "tokens", "jobs", "reservations", "services"}
OUTCOME = 1000  # characters of an outcome

# the request being served: its scope state (request_id, principal; "audited" once recorded)
current: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("apportion_request", default=None)


def audited(method: str, path: str) -> bool:
    return method in WRITES and path.startswith("/v1/") and not path.startswith(QUIET) \
        and not (path.startswith("/v1/jobs/") and path.endswith("/work"))


def objects(path: str, created: Any = None) -> dict[str, Any]:
    """The objects a path names: ``/v1/allocations/5/release`` -> ``{"allocations": 5}``."""
    out: dict[str, Any] = {}
    parts = path.strip("/").split("/")
    for i, p in enumerate(parts[:-1]):
        if p in COLLECTIONS:
            nxt = parts[i + 1][:200]
            out[p] = int(nxt) if nxt.isdigit() else nxt
    if created is not None:
        out["created"] = created
    return out


def who(principal: Any) -> str:
    """A token as a stop_reason names it: ``token 7 (consumer /Apps/batch)``."""
    if principal is None:
        return "an unknown caller"
    scope = {"consumer": f"consumer {principal.consumer}", "agent": f"agent {principal.host}",
             "admin": "admin"}.get(principal.kind, principal.kind)
    return f"token {principal.token} ({scope})"


# A row as the master's batch carries it, before it has an id: a plain tuple (no dict, no
# ORM object), in the columns' order; ``objects`` is still a dict (``created`` may join it).
Row = tuple  # (at, request_id, token, kind, consumer, method, path, objects, status, outcome)
OBJECTS = 7


def row(state: dict[str, Any], method: str, path: str, status: int, outcome: str,
        created: Any = None) -> Row:
    p = state.get("principal")
    if p is None:
        token = kind = consumer = None
    else:
        token, kind, consumer = p.token, p.kind, p.consumer
    # what was sent is kept as it can be stored on either store: its NULs and controls escaped
    return (time.time(), state.get("request_id"), token, kind, consumer, method, printable(path[:400])[:400],
            objects(printable(path), created), status, printable(outcome[:OUTCOME])[:OUTCOME])


def with_created(r: Row, created: Any) -> Row:
    """``r`` naming the id its call created (a token's, known only in its transaction)."""
    return (*r[:OBJECTS], {**r[OBJECTS], "created": created}, *r[OBJECTS + 1:])


def claim(status: int = 200, outcome: str = "done", created: Any = None) -> Row | None:
    """The row of the request being served, marked as recorded (the caller writes it with
    its change); None outside an audited request."""
    state = current.get()
    if state is None or state.get("audited") or not audited(state["method"], state["path"]):
        return None
    state["audited"] = True
    return row(state, state["method"], state["path"], status, outcome, created)


def unclaim() -> None:
    """The claimed row was not written (the change was refused): the answer records it."""
    state = current.get()
    if state is not None:
        state["audited"] = False


def wrap(op: Callable[[Any, float], Any]) -> Callable[[Any, float], Any]:
    """``op`` recording the current request in its batch: its outcome, or its refusal."""
    state = current.get()
    if state is None or state.get("audited") or not audited(state["method"], state["path"]) \
            or getattr(op, "read_only", False):
        return op
    state["audited"] = True
    from apportion.service.refusal import ApiError

    def run(batch: Any, now: float) -> Any:
        try:
            result = op(batch, now)
        except ApiError as e:
            batch.audit.append(row(state, state["method"], state["path"], e.status, f"refused: {e.detail}"))
            raise
        creates = state["method"] == "POST" and state["path"].rstrip("/").rsplit("/", 1)[-1] in COLLECTIONS
        batch.audit.append(row(state, state["method"], state["path"], 200, "done",
                               getattr(result, "id", None) if creates else None))
        return result
    return run


_COLUMNS = ("id", "at", "request_id", "token", "kind", "consumer", "method", "path", "objects", "status", "outcome")


def insert_rows(c: Connection, counters: Any, rows: list[Row]) -> None:
    """``rows`` written in ``c``'s transaction, with ids from the durable counter: one
    prepared statement run by the driver for all of them (``objects`` made JSON here, the
    rest bound as it is), none of the ORM's per-row work on the master's thread."""
    if rows:
        first = counters.take(c, "audit", len(rows), durable=False)  # rows never go: the table keeps the top
        insert_many(c, AuditRow, _COLUMNS, [(first + i, *r[:OBJECTS], json_text(r[OBJECTS]),
                                             *r[OBJECTS + 1:]) for i, r in enumerate(rows)])


def write(engine: Engine, counters: Any, rows: list[Row]) -> None:
    from apportion.service.store.db import retry_locked

    def once() -> None:
        with engine.begin() as c:
            insert_rows(c, counters, rows)
    retry_locked(once)


def read(engine: Engine, since: float | None, consumer: str | None, kind: str | None, after: int | None,
         limit: int) -> list[dict[str, Any]]:
    q = select(AuditRow).order_by(AuditRow.id).limit(limit)
    if since is not None:
        q = q.where(AuditRow.at >= since)
    if after is not None:
        q = q.where(AuditRow.id > after)
    if kind is not None:
        q = q.where(AuditRow.kind == kind)
    if consumer is not None and consumer != "/":
        q = q.where((AuditRow.consumer == consumer) | AuditRow.consumer.like(consumer.rstrip("/") + "/%"))
    with engine.connect() as c:
        return [{"id": r.id, "at": r.at, "request_id": r.request_id, "token": r.token, "kind": r.kind,
                 "consumer": r.consumer, "method": r.method, "path": r.path, "objects": r.objects,
                 "status": r.status, "outcome": r.outcome} for r in c.execute(q)]
