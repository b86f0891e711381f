"""Slow and surplus connections, closed at the socket before a request reaches the application.

uvicorn closes an idle keep-alive connection (``timeout_keep_alive``) but has no timeout on
reading a request: a client that trickles one header line every few seconds, or a body a
byte at a time, holds its connection (and, for a body, a task) for ever. ``GuardedHttp``
is uvicorn's httptools protocol with the bounds Apache httpd's mod_reqtimeout and nginx's
``client_header_timeout`` / ``client_body_timeout`` / ``large_client_header_buffers`` set:

- **the request head** (request line and headers) must be whole within ``head_timeout``
  seconds of the connection being made, or of the request's first byte on a kept-alive
  connection; else the connection is answered 408 (nothing, when not a byte of a request
  came) and closed. A head larger than ``max_head`` bytes is answered 431 and closed.
- **the body** must come within ``body_timeout`` seconds, extended by one second for every
  ``body_min_rate`` bytes received (mod_reqtimeout's ``body=10,MinRate=500``); slower, it is
  answered 408 and closed. While the application has not taken what came (flow control
  paused reading), the client is not held to the rate.
- **connections** are at most ``max_connections``: one more is answered 503 with
  ``Retry-After`` and closed at once, before the master's file descriptors run out.

One timer per connection at a time, not one per request: the check re-arms itself for the
next deadline only while a head or a body is awaited. Each close is counted in the metric
``apportion_connections_closed_total{reason}`` and summed up in the log (throttle.Tally).
"""

from __future__ import annotations

import asyncio
import resource
from dataclasses import dataclass
from typing import Any

from apportion.service.throttle import Tally

HEAD_TIMEOUT = 10.0  # seconds to send a whole request head
BODY_TIMEOUT = 10.0  # seconds for a body, before the rate extends it
BODY_MIN_RATE = 500.0  # bytes per second that extend the body's time by one second
MAX_HEAD = 64 << 10  # bytes of request line and headers
MAX_CONNECTIONS = 4096
FD_HEADROOM = 128  # file descriptors kept for the store, the logs and the master's own files


def raise_open_files_limit() -> None:
    """Raise the soft limit on open files towards what ``MAX_CONNECTIONS`` needs, within the hard
    limit: the program that needs descriptors raises its own soft limit (systemd leaves services
    a soft limit of 1024 for select()'s sake; asyncio uses epoll), as Go's runtime does at start."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = MAX_CONNECTIONS + FD_HEADROOM
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if new > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        except (ValueError, OSError):
            pass  # kept as it is: default_max_connections() follows it


def default_max_connections() -> int:
    """``MAX_CONNECTIONS``, or fewer where the open-files limit is lower (less ``FD_HEADROOM``):
    refusing a connection is better than running out of descriptors, where accept() fails
    for everyone."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft - FD_HEADROOM))


@dataclass(frozen=True)
class ConnLimits:
    head_timeout: float = HEAD_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    body_min_rate: float = BODY_MIN_RATE
    max_head: int = MAX_HEAD
    max_connections: int = MAX_CONNECTIONS


_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def _answer(status: int, detail: str, retry_after: int | None = None) -> bytes:
    body = ('{"detail": "%s"}' % detail).encode()
    head = [f"HTTP/1.1 {status} {_REASONS[status]}", "content-type: application/json",
            f"content-length: {len(body)}", "connection: close"]
    if retry_after is not None:
        head.append(f"retry-after: {retry_after}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def protocol(limits: ConnLimits, metrics: Any = None) -> Any:
    """The protocol class for ``uvicorn.run(http=...)``: uvicorn's httptools protocol with
    these limits (``metrics``: the app's Metrics, for the counts). Without httptools,
    uvicorn's default, unguarded (said in the log)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools comes with uvicorn[standard]
        import logging

        logging.getLogger("apportion.server").warning(
            "httptools is not installed: slow clients are not timed out and connections are not bounded")
        return "auto"

    tally = Tally("connection closed", "apportion_connections_closed_total")

    class GuardedHttp(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_since: float | None = None  # a request head is awaited since
            self._head_bytes = 0
            self._began = False  # a byte of the awaited head came
            self._body_since: float | None = None  # a body is being read since
            self._body_got = 0
            self._check_at: asyncio.TimerHandle | None = None

        # -- the connection ------------------------------------------------------------
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if metrics is not None:
                metrics.connections.set(len(self.connections))
            if len(self.connections) > limits.max_connections:
                self._close("too_many", _answer(503, f"more than {limits.max_connections} connections are open; "
                                                     "try again", retry_after=1))
                return
            self._head_since = self.loop.time()
            self._arm(self._head_since + limits.head_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._check_at is not None:
                self._check_at.cancel()
                self._check_at = None
            super().connection_lost(exc)
            if metrics is not None:
                metrics.connections.set(len(self.connections))

        def data_received(self, data: bytes) -> None:
            # between two requests (or before the first), what comes is a request head's start
            if self._head_since is None and self._body_since is None:
                self._head_since, self._head_bytes = self.loop.time(), 0
            elif self._body_since is not None:
                self._body_got += len(data)
            self._began = True
            if self._head_since is not None and self._head_bytes + len(data) > limits.max_head \
                    and b"\r\n\r\n" not in data[:max(0, limits.max_head - self._head_bytes) + 4]:
                # the head does not end within the limit (looked for only when it could be passed)
                self._close("head_too_large", _answer(431, f"the request head is more than {limits.max_head} bytes"))
                return
            super().data_received(data)
            if self.transport.is_closing():
                return
            if self._head_since is not None:  # the head is still not whole: all of this was head
                self._head_bytes += len(data)
                if self._check_at is None:
                    self._arm(self._head_since + limits.head_timeout)
            elif self._body_since is not None:  # a body is still awaited
                if self._body_since < 0:
                    self._body_since = self.loop.time()
                if self._check_at is None:
                    self._arm(self._body_due())

        # -- the parser's steps (the fewest overridden: they run for every request) -----
        def on_headers_complete(self) -> None:
            self._head_since = None
            self._body_since, self._body_got = -1.0, 0  # awaited; timed from the end of this read
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._body_since = None
            super().on_message_complete()

        # -- the deadlines -------------------------------------------------------------
        def _body_due(self) -> float:
            assert self._body_since is not None
            return self._body_since + limits.body_timeout + self._body_got / limits.body_min_rate

        def _arm(self, when: float) -> None:
            self._check_at = self.loop.call_at(when, self._check)

        def _check(self) -> None:
            self._check_at = None
            if self.transport is None or self.transport.is_closing() or self.transport.get_protocol() is not self:
                return  # closed, or handed to another protocol (a WebSocket upgrade)
            now = self.loop.time()
            if self._head_since is not None:
                due = self._head_since + limits.head_timeout
                if now < due:
                    self._arm(due)
                elif self._began:
                    self._close("head_timeout", _answer(408, f"the request head did not come whole within "
                                                             f"{limits.head_timeout:g} s"))
                else:  # not a byte of a request: nothing to answer
                    self._close("head_timeout", b"")
                return
            if self._body_since is not None:
                if self.flow.read_paused:  # the application has not taken what came: not the client's doing
                    self._body_since = now - self._body_got / limits.body_min_rate  # a fresh body_timeout
                    self._arm(now + 1.0)
                    return
                due = self._body_due()
                if now < due:
                    self._arm(due)
                else:
                    self._close("body_too_slow", _answer(
                        408, f"the body came slower than {limits.body_min_rate:g} bytes/s (after "
                             f"{limits.body_timeout:g} s)"))

        def _close(self, reason: str, answer: bytes) -> None:
            if metrics is not None:
                metrics.connections_closed.labels(reason).inc()
            address = str((self.client or ("",))[0])
            tally.note(address, reason, reason.replace("_", " "))
            answering = self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete
            if answer and not answering:  # not in the middle of another answer
                self.transport.write(answer)
            self.transport.close()

    return GuardedHttp
