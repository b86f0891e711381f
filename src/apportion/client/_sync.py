"""``Client``: the API over a blocking ``httpx.Client``; ``EventStream``: a client's events."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from apportion.client._calls import Call, Endpoints
from apportion.client._errors import ApportionError
from apportion.client._events import IDLE_TIMEOUT, StreamState
from apportion.client._route import Route, check, request_args
from apportion.client._types import Event


class Client(Endpoints):
    """The master's API, blocking.

    ``master``: a URL or a list (also comma-separated); default
    ``APPORTION_MASTER``, else ``http://127.0.0.1:8470``. ``token``: default
    ``APPORTION_TOKEN``, else the first line of ``token_file`` (or of
    ``APPORTION_TOKEN_FILE``). ``retry_for``: how long a call keeps going
    round the URLs when none answers (a failover) before it raises
    ``MasterUnavailable``. Every refusal raises ``ApportionError``.
    """

    def _make_http(self, timeout: float) -> httpx.Client:
        return httpx.Client(timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call) -> Any:
        response = self._open(call, stream=False, retry_for=self._retry_for)
        return check(call, response)

    def _open(self, call: Call, *, stream: bool, retry_for: float) -> httpx.Response:
        route = Route(self._masters, call, retry_for)
        args = request_args(call, self._token, self._timeout)
        while True:
            request = self._http.build_request(call.method, route.url + call.path, **args)
            try:
                response = self._http.send(request, stream=stream)
            except httpx.TransportError as e:
                route.check_retryable(e)
                time.sleep(route.after_error(e))
                continue
            if response.status_code == 503:
                response.read()
            wait = route.after_response(response)
            if wait is None:
                return response
            response.close()
            time.sleep(wait)

    def events(self, client: int, after: int | None = None, *, idle_timeout: float = IDLE_TIMEOUT) -> EventStream:
        """The events of ``client`` after event id ``after``, for ever, each once and in order.

        Iterate over it, or call ``next(timeout)``. It reconnects by itself with
        ``Last-Event-ID`` (bounded backoff) whenever the connection drops.
        Close it (or use it in a ``with``) when done.
        """
        return EventStream(self, client, after, idle_timeout)


class EventStream(StreamState):
    """A client's events, read by a thread of its own into a queue."""

    def __init__(self, client: Client, client_id: int, after: int | None, idle_timeout: float) -> None:
        super().__init__(client_id, after, idle_timeout)
        self._client = client
        self._queue: queue.Queue[Event | BaseException] = queue.Queue()
        self._closed = threading.Event()
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._run, name=f"apportion-events-{client_id}", daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return self.next()

    def next(self, timeout: float | None = None) -> Event:
        """The next event; ``TimeoutError`` if none comes within ``timeout`` seconds."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no event within {timeout} s") from None
        if isinstance(item, BaseException):
            self._queue.put(item)  # every later call raises it too
            raise item
        return self._hand_out(item)

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading; the events already read are still handed out, then iteration ends."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._queue.put(StopIteration())
        response = self._response
        if response is not None:
            response.close()

    def _run(self) -> None:
        cursor = self._cursor
        while not self._closed.is_set():
            call = cursor.call(self._idle)
            try:
                response = self._client._open(call, stream=True, retry_for=self._idle)
                self._response = response
                try:
                    cursor.opened(call, response, response.read() if response.status_code >= 400 else None)
                    for line in response.iter_lines():
                        event = cursor.take(line)
                        if event is not None:
                            self._queue.put(event)
                        if self._closed.is_set():
                            return
                finally:
                    self._response = None
                    response.close()
            except ApportionError as e:
                if e.status:
                    self._queue.put(e)
                    return
            except (httpx.TransportError, httpx.StreamError, ConnectionError, OSError):
                pass
            except Exception as e:  # noqa: BLE001 - hand any other failure to the reader
                self._queue.put(e)
                return
            if self._closed.wait(cursor.broken()):
                return
