"""A small HTTP/1.1 client on asyncio streams for `apportion bench service`'s load.

The load shares the machine with the master it measures, so it should cost as little
CPU as it can: one keep-alive connection per client, a request written in one go, an
answer read by Content-Length (or chunked, for Server-Sent Events). It follows the
master list as the SDK does: a connection error moves to the next URL, a standby's 503
naming a ``leader`` moves there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit


class Transport(Exception):
    """Nothing usable came back: the connection failed, closed or timed out."""


def _hostport(url: str) -> tuple[str, int]:
    u = urlsplit(url)
    return u.hostname or "127.0.0.1", u.port or 80


class Http:
    """One keep-alive connection to whichever master leads, among ``urls``."""

    def __init__(self, urls: list[str], token: str) -> None:
        self.urls = [u.rstrip("/") for u in urls]
        self.token = token
        self.url = self.urls[0]
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def close(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
        self._reader = self._writer = None

    def next_url(self, leader: str | None = None) -> None:
        """Leave the current master: for the one named, or the next in the list."""
        self.close()
        if leader:
            self.url = leader.rstrip("/")
        else:
            i = self.urls.index(self.url) if self.url in self.urls else -1
            self.url = self.urls[(i + 1) % len(self.urls)]

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        r, w = self._reader, self._writer
        if r is None or w is None or r.at_eof() or w.is_closing():
            self.close()
            host, port = _hostport(self.url)
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 5.0)
            except (OSError, TimeoutError) as e:
                raise Transport(f"connect {self.url}: {e.__class__.__name__}") from None
            self._reader, self._writer = r, w
        return r, w

    def _head(self, method: str, path: str, length: int, extra: str = "") -> bytes:
        host, port = _hostport(self.url)
        return (f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {self.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {length}\r\n{extra}\r\n").encode()

    @staticmethod
    async def _status_and_headers(r: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
        line = await r.readline()
        if not line:
            raise Transport("connection closed")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise Transport(f"bad status line {line[:80]!r}")
        headers: dict[str, str] = {}
        while True:
            h = await r.readline()
            if h in (b"\r\n", b"\n"):
                break
            if not h:
                raise Transport("connection closed in the headers")
            k, _, v = h.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        return int(parts[1]), headers

    async def call(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
        """One request on the current master: (status, JSON body or None). Transport on failure."""
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        try:
            async with asyncio.timeout(timeout):
                r, w = await self._open()
                w.write(self._head(method, path, len(data)) + data)
                status, headers = await self._status_and_headers(r)
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    raw = b"".join([c async for c in self._chunks(r)])
                else:
                    n = int(headers.get("content-length", "0") or 0)
                    raw = await r.readexactly(n) if n else b""
                if headers.get("connection", "").lower() == "close":
                    self.close()
        except Transport:
            self.close()
            raise
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
            self.close()
            raise Transport(f"{method} {path}: {e.__class__.__name__}") from None
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            value = raw.decode(errors="replace")
        return status, value

    @staticmethod
    async def _chunks(r: asyncio.StreamReader) -> AsyncIterator[bytes]:
        while True:
            size_line = await r.readline()
            if not size_line:
                raise Transport("connection closed in a chunk")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await r.readline()
                return
            chunk = await r.readexactly(size)
            await r.readexactly(2)
            yield chunk

    async def stream(self, path: str, last_event_id: int | None) -> AsyncIterator[bytes]:
        """A Server-Sent Events response, chunk by chunk (raises Transport when it ends)."""
        extra = "Accept: text/event-stream\r\n"
        if last_event_id:
            extra += f"Last-Event-ID: {last_event_id}\r\n"
        try:
            r, w = await self._open()
            w.write(self._head("GET", path, 0, extra))
            async with asyncio.timeout(10.0):
                status, headers = await self._status_and_headers(r)
            if status != 200:
                n = int(headers.get("content-length", "0") or 0)
                raw = await r.readexactly(n) if n else b""
                raise StreamRefused(status, raw)
            async for chunk in self._chunks(r):
                yield chunk
        except (StreamRefused, Transport):
            self.close()
            raise
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
            self.close()
            raise Transport(f"stream {path}: {e.__class__.__name__}") from None
        self.close()
        raise Transport("the stream ended")


class StreamRefused(Exception):
    def __init__(self, status: int, raw: bytes) -> None:
        super().__init__(status)
        self.status = status
        try:
            self.body = json.loads(raw) if raw else None
        except ValueError:
            self.body = None


def leader_in(status: int, body: Any) -> str | None:
    """The leader's URL if this is a standby's 503 that names one."""
    if status != 503 or not isinstance(body, dict):
        return None
    leader = body.get("leader")
    if not leader and isinstance(body.get("detail"), dict):
        leader = body["detail"].get("leader")
    return str(leader) if leader else None
