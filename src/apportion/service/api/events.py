"""A client's events: Server-Sent Events that resume after Last-Event-ID, or a long poll.

Events are stored in the same transaction as the decisions they announce, so a
client that reconnects, even to a restarted master, gets every event after its
last id, none twice."""

from __future__ import annotations

import asyncio
import bisect
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse

from apportion.service.api.deps import answer
from apportion.service.auth import Caller, Principal, require_consumer, user
from apportion.service.master import ApiError, Master

router = APIRouter(prefix="/v1", tags=["events"])
KEEPALIVE = 15.0



def _id(e: dict[str, Any]) -> int:
    return e["id"]


async def since(m: Master, client: int, after: int, limit: int = 1000) -> list[dict[str, Any]]:
    recent = m.recent_events.get(client, [])
    floor = m.recent_floor.get(client, m.first_event - 1)
    if after >= floor:
        i = bisect.bisect_right(recent, after, key=_id)
        return recent[i:i + limit]
    return await asyncio.to_thread(m.writer.events_after, client, after, limit)


def waiter(m: Master, client: int) -> asyncio.Event:
    """What the master sets when it publishes events of ``client``. Taken *before* looking
    for events: one published between the look and the wait still wakes the wait."""
    w = m.event_waiters.get(client)
    if w is None:
        w = m.event_waiters[client] = asyncio.Event()
    return w


async def woken(w: asyncio.Event, timeout: float) -> bool:
    """Whether ``w`` was set within ``timeout`` seconds. ``asyncio.timeout`` rather than
    ``wait_for``: no task made for each wait (one per event a stream sends, one per heartbeat)."""
    try:
        async with asyncio.timeout(timeout):
            await w.wait()
    except TimeoutError:
        return False
    return True


def _client(m: Master, p: Principal, client_id: int) -> None:
    c = m.clients.get(client_id)
    if c is None:
        raise HTTPException(404, f"no client {client_id}")
    require_consumer(p, c.consumer)


@router.get("/clients/{client_id}/events", responses={200: {"content": {"text/event-stream": {}}}})
async def client_events(request: Request, client_id: int,
                        after: int | None = Query(None, ge=0, description="long poll: events after this id"),
                        wait: float | None = Query(None, ge=0, le=60, description="long poll: seconds to wait"),
                        last_event_id: str | None = Header(None), accept: str | None = Header(None),
                        c: Caller = Depends(user)) -> Any:
    """Server-Sent Events (``Accept: text/event-stream``, or no ``after``/``wait``), or a
    long poll answering ``{"events": [...]}`` as soon as there is one, or after ``wait`` seconds."""
    p, m = c.p, c.m
    _client(m, p, client_id)
    sse = "text/event-stream" in (accept or "") or (after is None and wait is None)
    if not sse:
        start = after or 0
        w = waiter(m, client_id)
        got = await since(m, client_id, start)
        if not got and wait:
            await woken(w, wait)
            got = await since(m, client_id, start)
        return answer({"events": got, "last": got[-1]["id"] if got else start})
    try:
        start = int(last_event_id) if last_event_id else (after or 0)
    except ValueError:
        raise ApiError(422, "last-event-id: must be an event id (an integer)", where="header") from None

    async def stream() -> AsyncIterator[bytes]:
        last = start
        while True:  # Starlette ends the stream when the client goes away
            w = waiter(m, client_id)
            got = await since(m, client_id, last)
            if not got:
                if not await woken(w, KEEPALIVE):
                    yield b": keepalive\n\n"
                continue
            chunk = []
            for e in got:
                chunk.append(f"id: {e['id']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n")
                last = e["id"]
            yield "".join(chunk).encode()

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
