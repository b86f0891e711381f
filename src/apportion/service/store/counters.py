"""Durable id counters that only go up.

Each kind of id (allocations, activities, clients, events, jobs, tokens, audit rows) may
have a row ``max_<kind>`` in the ``meta`` table. At start the next id is one past the
larger of that counter and the highest id stored, so the counter only needs raising when
a row leaves its table: in the transaction that deletes allocations or clients (to the
highest id of the batch), that makes a token (tokens are revoked), or that sets rows aside
in quarantine. It is never lowered: an ``UPDATE ... WHERE value < new`` cannot go back even
when two transactions commit out of order. Activities, events, jobs and audit rows never
leave their tables (but for the quarantine), so no write of theirs touches ``meta``, and a
deleted (or quarantined) row never gives its id to another.
"""

from __future__ import annotations

import threading

from sqlalchemy import Connection, Integer, bindparam, cast, func, insert, select, update

from apportion.service.store.models import (
    ActivityRow,
    AuditRow,
    ClientRow,
    EventRow,
    JobRow,
    MetaRow,
    RequestRow,
    TokenRow,
)

TABLES = {"allocation": RequestRow, "activity": ActivityRow, "client": ClientRow, "event": EventRow,
          "job": JobRow, "token": TokenRow, "audit": AuditRow}


def read(c: Connection) -> dict[str, int]:
    """The highest id given of each kind: the larger of its counter and the rows stored."""
    meta = {r.key: r.value for r in c.execute(select(MetaRow).where(MetaRow.key.like("max_%")))}
    top = {}
    for kind, table in TABLES.items():
        stored = c.execute(select(func.max(table.id))).scalar() or 0
        try:
            counted = int(meta.get(f"max_{kind}", 0))
        except ValueError:
            counted = 0
        top[kind] = max(stored, counted)
    return top


# made once (a statement's construction cost more than its run, at each step that deletes)
_RAISE = (update(MetaRow).where(MetaRow.key == bindparam("k"), cast(MetaRow.value, Integer) < bindparam("v"))
          .values(value=bindparam("s")))


def raise_to(c: Connection, kind: str, value: int) -> None:
    """Counter ``kind`` is at least ``value`` once ``c`` commits (never lowered)."""
    key = f"max_{kind}"
    done = c.execute(_RAISE, {"k": key, "v": value, "s": str(value)})
    if done.rowcount == 0 and c.execute(select(MetaRow.key).where(MetaRow.key == key)).first() is None:
        c.execute(insert(MetaRow).values(key=key, value=str(value)))


class Counters:
    """What this process has given, so a batch raises a counter only when it passes it.

    The in-memory book is kept under a lock, but no SQL runs under it: the master's
    commit and a token's or an audit row's own transaction each hold SQLite's write lock
    while they raise a counter, and waiting for the other's lock while holding one's
    own would deadlock them. ``raise_to`` never lowers a counter, so the order in which
    the transactions commit does not matter."""

    def __init__(self) -> None:
        self.top: dict[str, int] | None = None
        self.lock = threading.Lock()

    def _ensure(self, c: Connection) -> None:
        if self.top is None:
            got = read(c)
            with self.lock:
                if self.top is None:
                    self.top = got

    def load(self, c: Connection) -> dict[str, int]:
        """The counters as stored, never below what this process already gave: an id taken
        by a transaction not yet committed when they are read (an audit row written while
        the master starts) stays taken."""
        got = read(c)
        with self.lock:
            if self.top is not None:
                got = {k: max(v, self.top.get(k, 0)) for k, v in got.items()}
            self.top = got
            return dict(got)

    def up(self, c: Connection, kind: str, value: int) -> None:
        """Ids up to ``value`` of ``kind`` are used by what ``c`` writes."""
        self._ensure(c)
        with self.lock:
            assert self.top is not None
            if value <= self.top[kind]:
                return
            self.top[kind] = value
        raise_to(c, kind, value)

    def next(self, c: Connection, kind: str) -> int:
        """A new id of ``kind``, recorded in ``c``'s transaction."""
        return self.take(c, kind, 1)

    def take(self, c: Connection, kind: str, n: int, durable: bool = True) -> int:
        """``n`` new ids of ``kind`` (the first; the others follow it), recorded in ``c``'s
        transaction (``durable`` False: rows of that kind are never deleted, so the table's
        highest id is the counter, and this process's book is enough)."""
        self._ensure(c)
        with self.lock:
            assert self.top is not None
            first = self.top[kind] + 1
            self.top[kind] += n
            last = self.top[kind]
        if durable:
            raise_to(c, kind, last)
        return first
