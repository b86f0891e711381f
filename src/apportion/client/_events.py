"""The bookkeeping of one event stream, shared by the sync and async readers.

A reader connects with ``Last-Event-ID`` set to the last id it handed out,
feeds every line to ``EventCursor.take`` and hands out what it returns. On any
disconnect it calls ``broken()`` and waits the delay it returns (a bounded
backoff, reset by the next event) before connecting again. Ids only grow, so
an event at or below the last id is a repeat and is dropped: the caller sees
every event once, in order.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from apportion.client._calls import Call
from apportion.client._errors import ApportionError
from apportion.client._route import body_of
from apportion.client._sse import SSEParser

BACKOFF_FIRST = 0.05
BACKOFF_MAX = 5.0
IDLE_TIMEOUT = 60.0
"""With no byte for this long the connection is taken as dead and made again
(a half-open TCP connection otherwise waits for ever)."""

class EventCursor:
    def __init__(self, client_id: int, after: int | None) -> None:
        self.client_id = int(client_id)
        self.last_id = after
        self.parser = SSEParser()
        self.backoff = BACKOFF_FIRST
        self.reconnects = 0

    def call(self, idle_timeout: float) -> Call:
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        return Call("GET", f"/v1/clients/{self.client_id}/events", headers=headers, timeout=idle_timeout)

    def opened(self, call: Call, response: httpx.Response, body: bytes | None) -> None:
        """Check a new connection's status: raise for a refusal that trying again cannot mend."""
        if response.status_code < 400:
            return
        if response.status_code >= 500 or response.status_code in (408, 429):
            raise ConnectionError(f"{response.status_code} from the master")
        parsed = body_of(httpx.Response(response.status_code, content=body or b""))
        detail = parsed.get("detail", parsed) if isinstance(parsed, dict) else parsed
        raise ApportionError(response.status_code, detail, method=call.method, path=call.path)

    def take(self, line: str) -> dict[str, Any] | None:
        """The next event if ``line`` completes one that is new, else None."""
        msg = self.parser.feed(line)
        if msg is None:
            return None
        if msg.retry is not None:
            self.backoff = min(msg.retry / 1000.0, BACKOFF_MAX)
        try:
            event = json.loads(msg.data)
        except json.JSONDecodeError:
            return None
        if not isinstance(event, dict) or "type" not in event:
            return None  # a keep-alive or something this SDK does not know
        raw = event.get("id", msg.id)
        event_id = int(raw) if raw is not None else None
        if event_id is not None:
            if self.last_id is not None and event_id <= self.last_id:
                return None
            self.last_id = event_id
        self.backoff = BACKOFF_FIRST
        return event

    def broken(self) -> float:
        """The connection is gone: -> seconds to wait before the next one."""
        self.parser.reset()
        self.reconnects += 1
        delay, self.backoff = self.backoff, min(self.backoff * 2, BACKOFF_MAX)
        return delay


class StreamState:
    """What both event streams show: the last id read, and how often they reconnected."""

    def __init__(self, client_id: int, after: int | None, idle_timeout: float) -> None:
        self._cursor = EventCursor(client_id, after)
        self._idle = idle_timeout
        self._handed_out = after

    @property
    def last_id(self) -> int | None:
        """The id of the last event handed out: keep it to resume from there later
        (``events(client, after=last_id)``), even in another process."""
        return self._handed_out

    def _hand_out(self, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("id") is not None:
            self._handed_out = int(event["id"])
        return event

    @property
    def reconnects(self) -> int:
        return self._cursor.reconnects
