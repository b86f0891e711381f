"""A tiny stand-in for the master's HTTP surface, served by uvicorn on loopback.

Only what the SDK's own tests need: an event log served as SSE (with knobs to
drop the connection, cut a message in half, or send repeats) and by long poll,
a few JSON endpoints that refuse, and a standby that names its leader.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse


@dataclass
class Log:
    events: list[dict[str, Any]] = field(default_factory=list)
    per_connection: int | None = None      # end the stream after this many events
    half_message: bool = False             # then send half of the next one
    repeat_last: bool = False              # start each stream again from one before Last-Event-ID
    connections: list[str | None] = field(default_factory=list)  # Last-Event-ID of each connection
    seen_auth: list[str | None] = field(default_factory=list)
    bodies: list[Any] = field(default_factory=list)
    keep_open: bool = True

    def add(self, type_: str, **fields: Any) -> dict[str, Any]:
        event = {"id": len(self.events) + 1, "type": type_, **fields}
        self.events.append(event)
        return event


def sse(event: dict[str, Any]) -> str:
    return f"id: {event['id']}\ndata: {json.dumps(event)}\n\n"


class Box:
    """The log the app serves, swapped for a fresh one per test (one server serves a whole module)."""

    def __init__(self, log: Log) -> None:
        self.log = log


def make_app(log: Log | Box) -> FastAPI:
    box = log if isinstance(log, Box) else Box(log)
    app = FastAPI()

    @app.get("/v1/clients/{cid}/events")
    async def events(cid: int, request: Request, after: int | None = None, wait: float | None = None,
                     last_event_id: str | None = Header(None)):
        log = box.log
        log.seen_auth.append(request.headers.get("authorization"))
        if cid == 404:
            return JSONResponse({"detail": "no client 404"}, status_code=404)
        if wait is not None or after is not None:
            start = after or 0
            deadline = time.monotonic() + (wait or 0)
            while time.monotonic() < deadline and len(log.events) <= start:
                await asyncio.sleep(0.01)
            return {"events": [e for e in log.events if e["id"] > start]}
        log.connections.append(last_event_id)
        start = int(last_event_id) if last_event_id else 0
        if log.repeat_last and start > 0:
            start -= 1

        async def gen():
            sent = 0
            pos = start
            yield "retry: 50\n: hello\n\n"
            while True:
                while pos < len(log.events):
                    if log.per_connection is not None and sent >= log.per_connection:
                        if log.half_message:
                            yield f"id: {log.events[pos]['id']}\ndata: {{\"id\": {log.events[pos]['id']}, "
                        return
                    yield sse(log.events[pos])
                    pos += 1
                    sent += 1
                if not log.keep_open or await request.is_disconnected():
                    return
                await asyncio.sleep(0.01)

        return StreamingResponse(gen(), media_type="text/event-stream")

    @app.post("/v1/clients", status_code=201)
    async def register(request: Request):
        log = box.log
        body = await request.json()
        log.seen_auth.append(request.headers.get("authorization"))
        log.bodies.append(body)
        return {"id": 7, **body}

    @app.get("/v1/allocations/{aid}")
    async def allocation(aid: int):
        if aid == 99:
            return JSONResponse({"detail": "no allocation 99"}, status_code=404)
        return {"id": aid, "held": 0, "hosts": {}, "reclaiming": []}

    @app.post("/v1/allocations", status_code=201)
    async def allocate(request: Request):
        log = box.log
        body = await request.json()
        log.bodies.append(body)
        if body["min"] > body["max"]:
            return JSONResponse({"detail": [{"loc": ["body", "min"], "msg": "min is above max"}]},
                                status_code=422)
        return {"id": 1, **body}

    @app.put("/v1/plan")
    async def put_plan(request: Request):
        box.log.bodies.append((request.headers.get("content-type"), (await request.body()).decode()))
        return {"version": 2}

    return app


def make_standby(leader: str) -> FastAPI:
    app = FastAPI()

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def everything(path: str):
        return JSONResponse({"detail": "this master is a standby", "leader": leader}, status_code=503)

    return app


def make_starting(starting_for: int) -> tuple[FastAPI, list[str]]:
    """A master that answers its first ``starting_for`` calls as the master does while it starts
    (503 with Retry-After); then its work endpoint hands out one item. -> (app, each call's answer)."""
    app = FastAPI()
    answers: list[str] = []

    @app.post("/v1/jobs/{jid}/work")
    async def work(jid: int):
        if len(answers) < starting_for:
            answers.append("starting")
            return JSONResponse({"detail": "the master is starting"}, status_code=503, headers={"Retry-After": "1"})
        answers.append("items")
        return {"items": [{"id": 0, "data": "x"}], "more": False}

    return app, answers


class Served:
    """An ASGI app on 127.0.0.1 in a thread; ``url`` once started."""

    def __init__(self, app: FastAPI, port: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        self.server.should_exit = True
        self.server.force_exit = True
        self.thread.join(10)
        self.sock.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
