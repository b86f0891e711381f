"""Which master serves.

PostgreSQL: every master holds its own connection and tries a session-level
advisory lock on it; the one that gets it is the leader and writes its URL into
the store. When the leader dies its connection drops and the lock goes with it;
a standby, trying every half second, takes over. A leader that loses its lock
connection stops at once (it can no longer know that it is the only writer).

SQLite: one master per database file, enforced by an exclusive lock on a file
beside it; a second master is refused at start.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, delete, insert, select, text
from sqlalchemy.engine import make_url

from apportion.service.store.db import is_sqlite
from apportion.service.store.models import MetaRow

log = logging.getLogger("apportion.leader")
LOCK_KEY = 0x61707074  # "appt": the advisory lock every apportion master of a database tries


@dataclass
class Role:
    name: str = "starting"  # starting | standby | leader
    leader_url: str | None = None


class SqliteLeadership:
    def __init__(self, engine: Engine) -> None:
        db = make_url(str(engine.url)).database or ""
        self.path = Path(db + ".lock") if db and db != ":memory:" else None
        self._fd: int | None = None

    async def acquire(self, role: Role, url: str) -> None:
        role.name, role.leader_url = "leader", url
        if self.path is None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SystemExit(f"another apportion master is using {self.path.with_suffix('')}: "
                             "SQLite serves one master; use PostgreSQL for a standby") from None
        self._fd = fd

    async def watch(self) -> None:
        return None


class PostgresLeadership:
    def __init__(self, engine: Engine, poll: float = 0.5) -> None:
        self.engine = engine
        self.poll = poll
        self._conn = None

    async def acquire(self, role: Role, url: str) -> None:
        while True:
            try:
                got = await asyncio.to_thread(self._try)
            except Exception as e:  # noqa: BLE001 - the database is away: wait for it as a standby
                log.warning("leader election: %s", e)
                got = False
            if got:
                await asyncio.to_thread(self._announce, url)
                role.name, role.leader_url = "leader", url
                log.info("leader: this master (%s) holds the lock", url)
                return
            leader = await asyncio.to_thread(self._leader)
            if role.name != "standby" or leader != role.leader_url:
                log.info("standby: the leader is %s", leader or "unknown")
            role.name, role.leader_url = "standby", leader
            await asyncio.sleep(self.poll)

    def _try(self) -> bool:
        log.debug("leader election: trying the lock")
        if self._conn is None:
            self._conn = self.engine.connect()
            self._conn.execution_options(isolation_level="AUTOCOMMIT")
        got = self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": LOCK_KEY}).scalar()
        return bool(got)

    def _announce(self, url: str) -> None:
        with self.engine.begin() as c:
            c.execute(delete(MetaRow).where(MetaRow.key == "leader"))
            c.execute(insert(MetaRow).values(key="leader", value=url))

    def _leader(self) -> str | None:
        try:
            with self.engine.connect() as c:
                return c.execute(select(MetaRow.value).where(MetaRow.key == "leader")).scalar()
        except Exception:  # noqa: BLE001
            return None

    async def watch(self) -> None:
        """Stop the process the moment the lock's connection is gone."""
        while True:
            await asyncio.sleep(self.poll)
            try:
                await asyncio.to_thread(lambda: self._conn.execute(text("SELECT 1")).scalar())
            except Exception as e:  # noqa: BLE001
                log.critical("leader: the lock's connection is gone (%s): stopping", e)
                os._exit(75)


def leadership(engine: Engine) -> SqliteLeadership | PostgresLeadership:
    return SqliteLeadership(engine) if is_sqlite(str(engine.url)) else PostgresLeadership(engine)
