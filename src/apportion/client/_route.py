"""Which master to ask, and what to do when one does not answer.

Shared by ``Client`` and ``AsyncClient``: they do the I/O and the sleeping,
``Route`` decides. A connection error moves to the next URL; a 503 whose JSON
body names a ``leader`` (a standby answers so) moves there; the only master's 503
with a Retry-After (it is starting) is asked again. When every URL has
failed in a row, the caller waits (bounded backoff) and goes round again until
``retry_for`` seconds have passed, which covers a failover (the standby takes
over within 5 s of the leader's death).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import httpx

from apportion.client._call import Call
from apportion.client._errors import ApportionError, MasterUnavailable

_BACKOFF_FIRST = 0.1
_BACKOFF_MAX = 2.0
_LEADER_HOPS = 4

# Nothing reached the master: safe to send again, whatever the method.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Also safe for a GET, which changes nothing.
ANY_TRANSPORT = (httpx.TransportError,)


def body_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text


def leader_of(response: httpx.Response) -> str | None:
    """The leader's URL if this is a standby's 503 that names one."""
    if response.status_code != 503:
        return None
    body = body_of(response)
    leader = body.get("leader") if isinstance(body, dict) else None
    if not leader and isinstance(body, dict) and isinstance(body.get("detail"), dict):
        leader = body["detail"].get("leader")
    return str(leader).rstrip("/") if leader else None


def retry_after(response: httpx.Response) -> float | None:
    """A 503's Retry-After in seconds (at least the first backoff), or None if it has none."""
    try:
        return max(_BACKOFF_FIRST, float(response.headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def check(call: Call, response: httpx.Response) -> Any:
    """The call's value from a read answer, or ``ApportionError`` for a 4xx/5xx."""
    if response.status_code >= 400:
        body = body_of(response)
        detail = body.get("detail", body) if isinstance(body, dict) else body
        raise ApportionError(response.status_code, detail, method=call.method, path=call.path)
    if response.status_code == 204 or not response.content:
        return None
    return call.pick(body_of(response))


def request_args(call: Call, token: str | None, default_timeout: float | None) -> dict[str, Any]:
    headers = {"Accept": "application/json", **call.headers}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    args: dict[str, Any] = {"headers": headers, "params": call.params}
    if call.content is not None:
        args["content"] = call.content.encode()
        headers["Content-Type"] = call.content_type or "text/plain"
    elif call.json is not None:
        args["json"] = call.json
    timeout = call.timeout if call.timeout is not None else default_timeout
    if timeout is not None:
        args["timeout"] = httpx.Timeout(timeout, connect=min(timeout, 5.0))
    return args


class Route:
    """One call's way through the master URLs."""

    def __init__(self, masters: Masters, call: Call, retry_for: float) -> None:
        self.masters = masters
        self.call = call
        self.url = masters.current
        self.give_up_at = time.monotonic() + retry_for
        self.failed_in_row = 0
        self.hops = 0
        self.backoff = _BACKOFF_FIRST
        self.last_error: str = ""

    def check_retryable(self, exc: Exception) -> None:
        """Raise ``ApportionError`` (status 0) if ``exc`` may have reached the master and the call is no GET."""
        kinds = ANY_TRANSPORT if self.call.method == "GET" else NOT_SENT
        if not isinstance(exc, kinds):
            raise ApportionError(0, f"{self.url}: {type(exc).__name__}: {exc}", method=self.call.method,
                                 path=self.call.path) from exc

    def after_error(self, exc: Exception) -> float:
        """A URL failed: move to the next; -> seconds to wait first (0: go now). Raises when out of time."""
        self.last_error = f"{self.url}: {type(exc).__name__}"
        return self._next()

    def after_response(self, response: httpx.Response) -> float | None:
        """None: this answer is the one. Otherwise the seconds to wait before asking ``self.url``."""
        if response.status_code != 503:
            self.masters.current = self.url
            return None
        leader = leader_of(response)
        if leader and leader != self.url and self.hops < _LEADER_HOPS:
            self.hops += 1
            self.url = self.masters.follow(leader)
            return 0.0
        if len(self.masters.urls) == 1 and not leader:
            # The only master, starting (it did nothing with the call, and says when to ask again):
            # ask again, sooner than it says at first, until retry_for is out; then the caller sees the 503.
            return self._again(retry_after(response))
        self.last_error = f"{self.url}: 503 (standby)"
        return self._next()

    def _again(self, limit: float | None) -> float | None:
        left = self.give_up_at - time.monotonic()
        if limit is None or left <= 0:
            return None
        return min(self._backoff(), limit, left)

    def _next(self) -> float:
        self.failed_in_row += 1
        self.url = self.masters.after(self.url)
        if self.failed_in_row < len(self.masters.urls):
            return 0.0
        if time.monotonic() >= self.give_up_at:
            raise MasterUnavailable(f"no master answered ({self.last_error})", method=self.call.method,
                                    path=self.call.path)
        self.failed_in_row = 0
        self.hops = 0
        return min(self._backoff(), max(0.0, self.give_up_at - time.monotonic()))

    def _backoff(self) -> float:
        """The next wait, doubling each time up to its bound."""
        delay, self.backoff = self.backoff, min(self.backoff * 2, _BACKOFF_MAX)
        return delay


class Masters:
    """The known master URLs and the one that answered last."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self.current = self.urls[0]

    def after(self, url: str) -> str:
        i = self.urls.index(url) if url in self.urls else -1
        return self.urls[(i + 1) % len(self.urls)]

    def follow(self, leader: str) -> str:
        if leader not in self.urls:
            self.urls.append(leader)
        self.current = leader
        return leader
