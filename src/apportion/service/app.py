"""The FastAPI application: routers, the master's task and leadership in its lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import swagger_ui_bundle
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine

from apportion.service.api import agents, cluster, events, health, work
from apportion.service.leader import Role, leadership
from apportion.service.master import Master, Settings
from apportion.service.metrics import Metrics
from apportion.service.store.writer import StoreWriter

log = logging.getLogger("apportion.server")
MAX_BODY = 1 << 20  # 1 MiB for every body but a plan's
MAX_PLAN = 64 << 20


@dataclass
class ServerConfig:
    url: str  # this master's own URL, announced to the others when it leads
    settings: Settings = field(default_factory=Settings)


def create_app(db: Engine, config: ServerConfig) -> FastAPI:
    role = Role()
    writer = StoreWriter(db)
    metrics = Metrics()
    lead = leadership(db)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks: list[asyncio.Task] = []

        async def become_leader() -> None:
            try:
                await lead.acquire(role, config.url)
                tasks.append(asyncio.create_task(lead.watch()))
                snapshot = await asyncio.to_thread(writer.load)
                m = Master(writer, snapshot, config.settings)
                m.observers.append(metrics.observe)
                app.state.master = m
                await m.run()
            except SystemExit as e:
                log.critical("%s", e)
                os._exit(2)
            except BaseException as e:  # noqa: BLE001 - the master's task must never die quietly
                if isinstance(e, asyncio.CancelledError):
                    raise
                log.critical("the master's task failed: %r; stopping", e, exc_info=True)
                os._exit(70)

        tasks.append(asyncio.create_task(become_leader()))
        try:
            yield
        finally:
            for t in tasks:
                t.cancel()

    app = FastAPI(title="apportion", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="The live resource manager's API: clients, allocations, activities, events, "
                              "hosts, consumers, plans and tokens. See docs/service.md.")
    app.state.master = None
    app.state.writer = writer
    app.state.metrics = metrics
    app.state.role = role
    app.state.token_cache = {}
    app.mount("/static", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="static")

    @app.middleware("http")
    async def guard(request: Request, call_next):  # noqa: ANN001, ANN202 - Starlette's middleware shape
        path = request.url.path
        if role.name != "leader" and path not in ("/healthz", "/openapi.json", "/docs") \
                and not path.startswith("/static"):
            return JSONResponse({"detail": f"this master is {role.name}", "leader": role.leader_url},
                                status_code=503, headers={"Retry-After": "1"})
        length = request.headers.get("content-length")
        limit = MAX_PLAN if path.startswith("/v1/plan") else MAX_BODY
        if length is not None and length.isdigit() and int(length) > limit:
            return JSONResponse({"detail": f"body: {int(length)} bytes is more than the limit of {limit}"},
                                status_code=413)
        return await call_next(request)

    for r in (work.router, events.router, cluster.router, agents.router, health.router):
        app.include_router(r)
    return app
