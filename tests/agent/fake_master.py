"""A tiny master that speaks docs/service.md's agent protocol and nothing else, for the loop's tests.

It runs in a thread on 127.0.0.1 (FastAPI on uvicorn). Tests queue commands for a host and read
what the agent registered and reported. `leader=URL` makes it a standby that answers 503 with
the leader's URL to everything.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import uvicorn
from fastapi import FastAPI, Header, HTTPException
from fastapi.responses import JSONResponse

from tests.service.live import wait_until

TOKEN = "agent-test-token"
HEARTBEAT = 0.2


class FakeMaster:
    def __init__(self, leader: str | None = None, port: int = 0) -> None:
        self.leader = leader
        self.lock = threading.Lock()
        self.registers: list[tuple[str, dict[str, Any]]] = []
        self.hosts: set[str] = set()
        self.reports: dict[str, dict[int, dict[str, Any]]] = {}
        self.output: dict[int, dict[str, list[str]]] = {}
        self.queued: dict[str, list[dict[str, Any]]] = {}
        self.known: set[int] = set()  # activities this master started; others are stopped after a register
        self.heartbeats = 0
        self.app = self._app()
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning",
                                                    timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> FakeMaster:
        self.thread.start()
        wait_until(lambda: self.server.started, what="the fake master listens")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    @property
    def url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    # -- what tests call ------------------------------------------------------------------
    def send(self, host: str, command: dict[str, Any]) -> None:
        with self.lock:
            if command["op"] == "start":
                self.known.add(command["activity"])
            self.queued.setdefault(host, []).append(command)

    def report(self, host: str, activity: int) -> dict[str, Any] | None:
        with self.lock:
            return self.reports.get(host, {}).get(activity)

    def forget_hosts(self) -> None:
        """As a master that lost its memory: every heartbeat is answered 404 until a register."""
        with self.lock:
            self.hosts.clear()

    # -- the protocol ---------------------------------------------------------------------
    def _app(self) -> FastAPI:
        app = FastAPI()

        def check(authorization: str | None) -> JSONResponse | None:
            if self.leader is not None:
                return JSONResponse({"detail": "standby", "leader": self.leader}, status_code=503)
            if authorization != f"Bearer {TOKEN}":
                raise HTTPException(401, "bad token")
            return None

        @app.post("/v1/agents/{host}/register")
        async def register(host: str, body: dict[str, Any], authorization: str | None = Header(None)) -> Any:
            if (redirect := check(authorization)) is not None:
                return redirect
            with self.lock:
                self.registers.append((host, body))
                self.hosts.add(host)
                self.reports[host] = {}
                for a in body.get("activities", []):
                    if a["id"] not in self.known:
                        self.queued.setdefault(host, []).append({"op": "stop", "activity": a["id"],
                                                                 "kill_grace": 5.0})
            return {"host": host, "heartbeat": HEARTBEAT, "kill_grace": 5.0}

        @app.post("/v1/agents/{host}/heartbeat")
        async def heartbeat(host: str, body: dict[str, Any], authorization: str | None = Header(None)) -> Any:
            if (redirect := check(authorization)) is not None:
                return redirect
            deadline = time.monotonic() + float(body["wait"])
            with self.lock:
                if host not in self.hosts:
                    raise HTTPException(404, f"host {host} is not registered")
                self.heartbeats += 1
                self.reports[host] = {r["id"]: r for r in body["activities"]}
                for r in body["activities"]:
                    for stream in ("stdout", "stderr"):
                        if r.get(stream) is not None:
                            self.output.setdefault(r["id"], {})[stream] = r[stream]
            while True:
                with self.lock:
                    commands = self.queued.pop(host, [])
                if commands or time.monotonic() >= deadline:
                    return {"commands": commands, "heartbeat": HEARTBEAT}
                await asyncio.sleep(0.01)

        return app
