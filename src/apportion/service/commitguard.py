"""When the store refuses a batch: one request's own data, or the store itself.

The master applies a batch's operations to the engine, then commits the batch; only after
the commit does anyone hear of it (service/master.py). When the commit fails, the engine
is ahead of the store, and what it holds in memory (the published objects included) may
show changes nobody may see. So the master first puts itself back as the store has it,
the way a restart does (``rebuild``: the snapshot read again, the engine rebuilt from it;
what lives only in memory, the hosts' last heartbeats and the event streams' waiters, is
kept), and then:

- **the batch's data** (the store refused a value: PostgreSQL's "text fields cannot contain
  NUL", an integer out of range, text that is not UTF-8, a constraint): each operation of the
  batch is run again alone, in a batch of its own, and committed. The one the store still
  refuses is answered 422 (its batch-mates are committed without it). Checks at the door
  (api/schemas.py) keep such data out; this is what holds when one slips through, and an
  operation that fails with an error of the master's own (a bug: the engine may be half
  changed) is isolated the same way, answered 500, and the master goes on.
- **the store** (full, read-only, gone: SQLAlchemy's ``OperationalError``, as SQLite's
  "database or disk is full" and PostgreSQL's "could not extend file" are): the batch's
  operations are answered 503 with ``Retry-After``, nothing of them kept; the master stays
  up and says why on ``/readyz``; reads go on; writes are answered 503 at the door
  (api/deps.py) without reaching the task; every ``RETRY`` seconds a probe writes (and
  takes back) a row the size of a few pages, and once it commits the master takes writes
  again. Its hosts are given a fresh chance to heartbeat, as at a restart (their agents'
  heartbeats were refused meanwhile). Nothing acknowledged is lost: an answer is only
  ever given after its commit.

A master whose store holds what it cannot be rebuilt from stops (exit 70): a restart sets the
rows aside (store/quarantine.py) and serves the rest.

A master started on a store that cannot take a write (a full disk) probes before it says
ready, and waits the same way. A store that answers no read either (the rebuild fails)
leaves the master serving nothing but 503 until it can be read again; on PostgreSQL the
leader's lock connection is then gone too, and the leader stops for a standby
(service/leader.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException
from sqlalchemy import delete, insert
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError

from apportion.service.refusal import ApiError
from apportion.service.store.models import MetaRow

# the master (service/master.py) calls in here: it and its operations are named ``Any`` so that
# this module does not import it back (no two modules import each other)
Master = Any
Op = Any

log = logging.getLogger("apportion.master")
RETRY = 2.0  # seconds between probes while the store refuses writes (the Retry-After of a 503)
PROBE_BYTES = 64 << 10  # the probe's row: a commit that needs new pages, as a batch does
# what the master keeps of itself through a rebuild: its task's queue and wake-up, the hooks
# and waiters of those who listen, the published events, counters of its own
KEPT = frozenset({"queue", "_wake", "observers", "committed", "event_waiters", "host_waiters", "recent_events",
                  "recent_floor", "first_event", "cycles", "last_cycle_seconds", "ready", "store_down",
                  "store_down_since", "stale"})


def store_trouble(e: BaseException) -> bool:
    """Whether ``e`` says the store cannot commit at all (full, read-only, gone), not that it
    refused one batch's data."""
    return isinstance(e, OperationalError | InterfaceError | DisconnectionError | OSError)


def short(e: BaseException) -> str:
    """The store's own words, first line, without the statement SQLAlchemy appends."""
    orig = getattr(e, "orig", None)
    text = str(orig if orig is not None else e).strip().splitlines()
    return (text[0] if text else e.__class__.__name__)[:300]


def unavailable(m: Master) -> HTTPException:
    return HTTPException(503, f"the store takes no writes now ({m.store_down}): try again later",
                         headers={"Retry-After": str(int(RETRY))})


# -- back to what the store holds -------------------------------------------------------
def rebuild(m: Master, fresh_hosts: bool = False) -> None:
    """``m`` as the store has it, in place (every reference to it stays good): the snapshot
    read again and a master built from it, whose state replaces ``m``'s. The hosts keep
    their last heartbeat unless ``fresh_hosts`` (each then gets a new chance, as at a start);
    live activities keep the usage their agents reported (held in memory only)."""
    seen = {n: (h.last_seen, h.alien) for n, h in m.hosts.items()}
    usage = {a.id: (a.usage, a.user, a.uid, a.limits) for on in m.live_on.values() for a in on.values()}
    snapshot = m.writer.load()
    fresh = type(m)(m.writer, snapshot, m.settings)
    for key, value in vars(fresh).items():
        if key not in KEPT:
            setattr(m, key, value)
    for name, h in m.hosts.items():
        if name in seen and not fresh_hosts:
            h.last_seen, h.alien = seen[name]
    for on in m.live_on.values():
        for a in on.values():
            if a.id in usage and a.usage is None:
                a.usage, a.user, a.uid, a.limits = usage[a.id]
    m.stale = False


def _try_rebuild(m: Master, fresh_hosts: bool = False) -> bool:
    try:
        rebuild(m, fresh_hosts)
        return True
    except Exception as e:  # noqa: BLE001 - sorted below
        if not store_trouble(e):
            # what the store holds cannot be served as it is: a restart sets the rows it cannot
            # accept aside (docs/service.md, "Quarantine") and serves the rest
            log.critical("the master cannot be rebuilt from the store (%s: %s): it stops; a restart "
                         "quarantines what it cannot accept", e.__class__.__name__, short(e))
            os._exit(70)
        log.error("the store cannot be read (%s): the master answers 503 until it can", short(e))
        m.stale = True
        return False


# -- a commit that failed ---------------------------------------------------------------------
def failed(m: Master, ops: list[Op], error: BaseException | None, broken: dict[int, BaseException]) -> None:
    """The batch of ``ops`` was not committed (``error``), or not even tried (``broken``:
    operations that raised an error of the master's own, by index). Answer every operation."""
    if error is not None and store_trouble(error):
        trouble(m, ops, error)
        return
    if error is not None:
        log.error("the store refused a batch of %d operations (%s): each is tried alone", len(ops), short(error))
    if not _try_rebuild(m):
        trouble(m, ops, error or next(iter(broken.values())))
        return
    if not ops:  # the master's own cycle: nothing to answer, no request to blame
        trouble(m, [], error)
        return
    for i, op in enumerate(ops):
        if op.future.done():
            continue
        if i in broken:
            _answer(op, ApiError(500, f"internal error: {broken[i].__class__.__name__}"))
            continue
        if len(ops) == 1 and error is not None:  # it alone was in the batch: it is the one
            _answer(op, _refused(error))
            continue
        batch, results, decisions, bad = m._attempt([op])
        if bad:
            log.error("an operation failed: %r", bad[0])
            if not _try_rebuild(m):
                trouble(m, ops[i + 1:], bad[0])
                return
            _answer(op, ApiError(500, f"internal error: {bad[0].__class__.__name__}"))
            continue
        try:
            m.writer.commit(batch)
        except Exception as e:  # noqa: BLE001 - sorted below
            if store_trouble(e):
                trouble(m, ops[i:], e)
                return
            log.error("the store refused an operation's data: %s", short(e))
            if not _try_rebuild(m):
                trouble(m, ops[i + 1:], e)
                return
            _answer(op, _refused(e))
            continue
        m._finish(batch, decisions, results)


def _refused(e: BaseException) -> ApiError:
    return ApiError(422, f"body: the store refused this request's data ({short(e)})")


def _answer(op: Op, error: BaseException) -> None:
    if not op.future.done():
        op.future.set_exception(error)


def trouble(m: Master, ops: list[Op], error: BaseException | None) -> None:
    """The store takes no writes: the master back to what it holds, ``ops`` answered 503."""
    reason = short(error) if error is not None else "unknown"
    if m.store_down is None:
        log.error("the store takes no writes (%s): writes are answered 503, reads go on; "
                  "the master takes writes again once a probe commits", reason)
        m.store_down_since = time.time()
    m.store_down = reason
    if not m.stale:
        _try_rebuild(m)
    for op in ops:
        _answer(op, unavailable(m))


# -- waiting for the store -------------------------------------------------------------------
def probe(m: Master) -> None:
    """A write the size of a few pages, taken back in the same transaction: raises while the
    store cannot take a batch (SQLite allocates the pages, and writes them to its WAL at the
    commit; PostgreSQL writes them to its WAL)."""
    key = "probe:" + secrets.token_hex(8)
    with m.writer.engine.begin() as c:
        # random: PostgreSQL would compress a repeated character to a few bytes
        c.execute(insert(MetaRow).values(key=key, value=secrets.token_hex(PROBE_BYTES // 2)))
        c.execute(delete(MetaRow).where(MetaRow.key == key))


def check(m: Master) -> bool:
    """Probe the store; on failure, the master waits (``store_down`` says why). Whether it writes."""
    try:
        probe(m)
    except Exception as e:  # noqa: BLE001 - any failure is the store's
        trouble(m, [], e)
        return False
    return True


async def wait(m: Master, serve: Callable[[Op], Any]) -> None:
    """While the store takes no writes: read-only operations queued are served (``serve``),
    others answered 503; every ``RETRY`` seconds, a probe. Returns once a probe commits."""
    next_probe = time.monotonic() + RETRY
    while m.store_down is not None:
        timeout = max(0.0, next_probe - time.monotonic())
        if m.queue.empty():
            try:
                await asyncio.wait_for(m._wake.wait(), timeout)
            except TimeoutError:
                pass
        m._wake.clear()
        while not m.queue.empty():
            op = m.queue.get_nowait()
            if getattr(op.fn, "read_only", False) and not m.stale:
                serve(op)
            else:
                _answer(op, unavailable(m))
        if time.monotonic() < next_probe:
            continue
        next_probe = time.monotonic() + RETRY
        if m.stale and not _try_rebuild(m, fresh_hosts=True):
            continue
        try:
            await asyncio.to_thread(probe, m)
        except Exception as e:  # noqa: BLE001
            m.store_down = short(e)
            continue
        # back: every host gets a fresh chance to heartbeat, as at a start (their agents'
        # heartbeats were refused while the store was away)
        now = time.time()
        for h in m.hosts.values():
            h.last_seen = now
        log.warning("the store takes writes again after %.1f s: the master goes on",
                    now - (m.store_down_since or now))
        m.store_down = None
        m.store_down_since = None
