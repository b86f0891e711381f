"""The FastAPI application: routers, the master's task and leadership in its lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import swagger_ui_bundle
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from starlette.types import ASGIApp, Receive, Scope, Send

from apportion.service.api import agents, cluster, events, health, jobs, work
from apportion.service.leader import Role, leadership
from apportion.service.api.errors import api_error
from apportion.service import liveplan
from apportion.service.ducc.master import DuccMaster
from apportion.service.ducc.plan import is_ducc_plan
from apportion.service.master import ApiError, Master, Settings
from apportion.service.metrics import Metrics
from apportion.service.store.writer import StoreWriter

log = logging.getLogger("apportion.server")
MAX_BODY = 1 << 20  # 1 MiB for every body but a plan's
MAX_PLAN = 64 << 20


class Guard:
    """Pure ASGI: a standby answers 503 naming the leader (but /healthz and the docs), and
    a body larger than the limit is refused with 413 before it is read."""

    OPEN = ("/healthz", "/openapi.json", "/docs")

    def __init__(self, app: ASGIApp, role: Role) -> None:
        self.app = app
        self.role = role

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if self.role.name != "leader" and path not in self.OPEN and not path.startswith("/static"):
            response = JSONResponse({"detail": f"this master is {self.role.name}", "leader": self.role.leader_url},
                                    status_code=503, headers={"Retry-After": "1"})
            await response(scope, receive, send)
            return
        limit = MAX_PLAN if path.startswith(("/v1/plan", "/v1/jobs")) else MAX_BODY
        for key, value in scope["headers"]:
            if key == b"content-length" and value.isdigit() and int(value) > limit:
                response = JSONResponse({"detail": f"body: {int(value)} bytes is more than the limit of {limit}"},
                                        status_code=413, headers={"Connection": "close"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


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
                # Recovery makes a few hundred thousand objects that live as long as the
                # master and no reference cycles to speak of: the collector is paused while
                # it runs, then they are put out of its reach (gc.freeze), and young objects
                # are collected less often, so no full collection walks the whole engine
                # again and again (restart time, latency tails)
                gc.disable()
                try:
                    snapshot = await asyncio.to_thread(writer.load)
                    kind = DuccMaster if is_ducc_plan(liveplan.parse(snapshot.plan_text, "<plan in force>",
                                                                      positions=False).data) else Master
                    m = kind(writer, snapshot, config.settings)
                finally:
                    gc.freeze()
                    gc.set_threshold(50_000, 20, 100)
                    gc.enable()
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

    # FastAPI's own OpenTelemetry hooks cost some 5% of the master's thread per request and
    # report to no collector here: off (Prometheus /metrics and the JSON logs are the signals)
    quiet = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}
    app = FastAPI(title="apportion", version="1", lifespan=lifespan, docs_url=None, redoc_url=None, telemetry=quiet,
                  description="The live resource manager's API: clients, allocations, activities, events, "
                              "hosts, consumers, plans and tokens. See docs/service.md.")
    app.state.master = None
    app.state.writer = writer
    app.state.metrics = metrics
    app.state.role = role
    app.state.token_cache = {}
    app.mount("/static", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="static")

    app.add_middleware(Guard, role=role)
    app.add_exception_handler(ApiError, api_error)
    for r in (work.router, jobs.router, events.router, cluster.router, agents.router, health.router):
        app.include_router(r)
    app.openapi = lambda: _with_bearer(app)  # type: ignore[method-assign]
    return app


def _with_bearer(app: FastAPI) -> dict:
    """The spec, saying once that every path but the open ones wants a bearer token
    (auth.py reads the header itself, in the one dependency each call has)."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        spec.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        for path, ops in spec["paths"].items():
            if path not in Guard.OPEN and path != "/readyz":
                for op in ops.values():
                    op["security"] = [{"bearer": []}]
        app.openapi_schema = spec
    return app.openapi_schema
