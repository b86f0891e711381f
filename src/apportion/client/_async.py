"""``AsyncClient``: the API over ``httpx.AsyncClient``; ``AsyncEventStream``: a client's events."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from apportion.client._calls import Call, Endpoints
from apportion.client._errors import ApportionError
from apportion.client._events import IDLE_TIMEOUT, StreamState
from apportion.client._route import Route, check, request_args
from apportion.client._types import Event


class AsyncClient(Endpoints):
    """The master's API for asyncio: every call of ``Client``, awaited.

    Same arguments as ``Client``. ``events()`` is an async iterator.
    """

    def _make_http(self, timeout: float) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=timeout)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def _send(self, call: Call) -> Any:
        return self._send_async(call)

    async def _send_async(self, call: Call) -> Any:
        response = await self._open(call, stream=False, retry_for=self._retry_for)
        return check(call, response)

    async def _open(self, call: Call, *, stream: bool, retry_for: float) -> httpx.Response:
        route = Route(self._masters, call, retry_for)
        args = request_args(call, self._token, self._timeout)
        while True:
            request = self._http.build_request(call.method, route.url + call.path, **args)
            try:
                response = await self._http.send(request, stream=stream)
            except httpx.TransportError as e:
                route.check_retryable(e)
                await asyncio.sleep(route.after_error(e))
                continue
            if response.status_code == 503:
                await response.aread()
            wait = route.after_response(response)
            if wait is None:
                return response
            await response.aclose()
            await asyncio.sleep(wait)

    def events(self, client: int, after: int | None = None, *,
               idle_timeout: float = IDLE_TIMEOUT) -> AsyncEventStream:
        """The events of ``client`` after ``after``: ``async for event in client.events(id)``.

        Reconnects by itself with ``Last-Event-ID``; each event once, in order.
        ``await stream.next(timeout)`` waits a bounded time. Close it with
        ``await stream.aclose()`` (or ``async with``).
        """
        return AsyncEventStream(self, client, after, idle_timeout)


class AsyncEventStream(StreamState):
    """A client's events, read by a task of its own into a queue."""

    def __init__(self, client: AsyncClient, client_id: int, after: int | None, idle_timeout: float) -> None:
        super().__init__(client_id, after, idle_timeout)
        self._client = client
        self._queue: asyncio.Queue[Event | BaseException] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Event:
        return await self.next()

    async def next(self, timeout: float | None = None) -> Event:
        """The next event; ``TimeoutError`` if none comes within ``timeout`` seconds."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            item = await asyncio.wait_for(self._queue.get(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no event within {timeout} s") from None
        if isinstance(item, BaseException):
            self._queue.put_nowait(item)
            raise item
        return self._hand_out(item)

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        task, self._task = self._task, None
        self._queue.put_nowait(StopAsyncIteration())
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        cursor = self._cursor
        while True:
            call = cursor.call(self._idle)
            try:
                response = await self._client._open(call, stream=True, retry_for=self._idle)
                try:
                    cursor.opened(call, response, await response.aread() if response.status_code >= 400 else None)
                    async for line in response.aiter_lines():
                        event = cursor.take(line)
                        if event is not None:
                            self._queue.put_nowait(event)
                finally:
                    await response.aclose()
            except ApportionError as e:
                if e.status:
                    self._queue.put_nowait(e)
                    return
            except (httpx.TransportError, httpx.StreamError, ConnectionError, OSError):
                pass
            except Exception as e:  # noqa: BLE001 - hand any other failure to the reader
                self._queue.put_nowait(e)
                return
            await asyncio.sleep(cursor.broken())
