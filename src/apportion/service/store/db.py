"""Opening the store: SQLite (WAL) by default, PostgreSQL by URL; schema by Alembic."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar
from pathlib import Path

from typing import TYPE_CHECKING

from sqlalchemy import JSON, Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    from alembic.config import Config

T = TypeVar("T")
MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0008"  # the newest revision in migrations/versions (a test holds it to Alembic's own head)
DEFAULT_URL = "sqlite:///apportion.db"


def normalise_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here; a bare path means an SQLite file."""
    if "://" not in url:
        return f"sqlite:///{url}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001 - DBAPI types
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    # WAL with synchronous=NORMAL keeps every commit through a crash of the process (the
    # failure a master must survive); a power loss may lose the last ones (docs/service.md).
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _private(path: str) -> None:
    """The store file and SQLite's -wal/-shm beside it are its owner's alone: they hold
    activity environments and token digests."""
    for f in (path, path + "-wal", path + "-shm"):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            if os.stat(f).st_mode & 0o077:
                os.chmod(f, 0o600)


def retry_locked(fn: Callable[..., T], *args: Any, tries: int = 6) -> T:
    """``fn(*args)`` (one transaction), again if SQLite says the database is locked: a write
    beside the master's (tokens, audit rows) can meet SQLite's busy error at once, without
    its busy timeout, when WAL's snapshot it read moved on."""
    for i in range(tries):
        try:
            return fn(*args)
        except OperationalError as e:
            if "locked" not in str(e) or i == tries - 1:
                raise
            time.sleep(0.02 * 2**i)
    raise AssertionError("unreachable")


_INSERTS: dict[tuple[str, str, tuple[str, ...], str | None], str] = {}  # (table, dialect, columns, key) -> INSERT


_dumps = json.dumps


def json_text(value: Any) -> str:
    """A JSON column's value as ``insert_many`` takes it: compact JSON text (``None`` as ``null``)."""
    return _dumps(value, separators=(",", ":"))


_JSON_AT: dict[tuple[str, tuple[str, ...]], tuple[bool, ...]] = {}  # (table, columns) -> which are JSON


def _json_at(table: Any, columns: tuple[str, ...]) -> tuple[bool, ...]:
    """Which of ``columns`` of ``table`` (a model) are JSON columns."""
    key = (table.__tablename__, columns)
    got = _JSON_AT.get(key)
    if got is None:
        types = table.__table__.columns
        got = _JSON_AT[key] = tuple(isinstance(types[n].type, JSON) for n in columns)
    return got


def insert_many(c: Connection, table: Any, columns: tuple[str, ...], rows: list[tuple],
                replacing: str | None = None) -> None:
    """``rows`` (tuples in the order of ``columns``) inserted into ``table`` (a model) by one
    prepared statement that the driver runs for all of them: none of the ORM's per-row work.
    A JSON column takes its text, made by the caller (``json_text``). ``replacing``: the
    primary key's column; a row whose key is stored already replaces it (SQLite and
    PostgreSQL both have ``ON CONFLICT ... DO UPDATE``)."""
    if not rows:
        return
    key = (table.__tablename__, c.dialect.name, columns, replacing)
    sql = _INSERTS.get(key)
    if sql is None:
        mark = "?" if c.dialect.paramstyle == "qmark" else "%s"  # SQLite's driver; psycopg
        cast = c.dialect.name != "sqlite"
        marks = [f"CAST({mark} AS JSON)" if cast and j else mark for j in _json_at(table, columns)]
        quote = c.dialect.identifier_preparer.quote
        sql = (f"INSERT INTO {quote(table.__tablename__)} ({', '.join(quote(n) for n in columns)}) "
               f"VALUES ({', '.join(marks)})")
        if replacing is not None:
            sql += (f" ON CONFLICT ({quote(replacing)}) DO UPDATE SET "
                    + ", ".join(f"{quote(n)} = excluded.{quote(n)}" for n in columns if n != replacing))
        _INSERTS[key] = sql
    c.exec_driver_sql(sql, rows)


def insert_dicts(c: Connection, table: Any, rows: list[dict[str, Any]], replacing: str | None = None) -> None:
    """``rows`` (dicts with the same keys, column names) inserted as ``insert_many`` does; a JSON
    column's value made JSON text here (``None`` as ``null``, as the ORM writes it)."""
    if not rows:
        return
    columns = tuple(rows[0])
    pairs = tuple(zip(columns, _json_at(table, columns), strict=True))
    insert_many(c, table, columns, [tuple(json_text(r[n]) if j else r[n] for n, j in pairs)
                                    for r in rows], replacing)


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    if is_sqlite(url):
        path = make_url(url).database
        if path and path != ":memory:" and not path.startswith("file:"):
            if not os.path.exists(path):  # created 0600 (SQLite makes its -wal and -shm with the same mode)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
            _private(path)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        if path and path != ":memory:" and not path.startswith("file:"):
            event.listen(engine, "connect", lambda *_: _private(path))
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=4, max_overflow=4)


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    return cfg


def current_revision(engine: Engine) -> str | None:
    if not has_schema(engine):
        return None
    with engine.connect() as c:
        return c.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest revision. When it is there already, Alembic (a
    fifth of a second to import) is not even loaded: a restart is that much faster."""
    if current_revision(engine) == HEAD:
        return
    from alembic import command

    cfg = alembic_config(str(engine.url))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def has_schema(engine: Engine) -> bool:
    return inspect(engine).has_table("alembic_version")
