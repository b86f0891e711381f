"""The FastAPI application: routers, the master's task and leadership in its lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import os
import secrets
import time
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _quote  # a JSON string, as json.dumps writes it

import swagger_ui_bundle
from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apportion.service.api import agents, cluster, events, health, jobs, work
from apportion.service.api import audit as audit_api
from apportion import console
from apportion.console import api as console_api, pages as console_pages
from apportion.service.leader import Role, leadership
from apportion.service.api.deps import known_query
from apportion.service.api.errors import api_error, validation_error
from apportion.service import liveplan, reserved
from apportion.service.ducc.master import DuccMaster
from apportion.service.ducc.plan import is_ducc_plan
from apportion.service.master import ApiError, Master, Settings
from apportion.service.metrics import Metrics
from apportion.service import audit
from apportion.service.auth import principal_of
from apportion.service.throttle import DEFAULT_LIMIT, DEFAULT_WINDOW, Limiter, Tally
from apportion.service.store import quarantine
from apportion.service.store.writer import StoreWriter

log = logging.getLogger("apportion.server")
access = logging.getLogger("apportion.access")  # one JSON line per request (cli/server.py's formatter)
MAX_BODY = 1 << 20  # 1 MiB for every body but a plan's
MAX_PLAN = 64 << 20


class AccessLines:
    """The access log: a request's line is one JSON object with its fields (and those of the
    other log lines: time, level, logger, msg), written out directly (its strings quoted as
    ``json.dumps`` quotes them; no dict, no encoder), and the lines of the requests answered
    in one turn of the event loop go to logging together, as one record (cli/server.py's
    formatter writes them as they are): one record and one write per turn, not per request."""

    def __init__(self) -> None:
        self.pending: list[str] = []

    def add(self, scope: Scope, state: dict, rid: str, status: int, started: float) -> None:
        method, path, p = scope["method"], scope["path"][:200], state.get("principal")
        token = "null" if p is None or p.token is None else int(p.token)
        kind = "null" if p is None or p.kind is None else _quote(p.kind)
        line = (f'{{"time": {time.time():.3f}, "level": "info", "logger": "apportion.access", '
                f'"msg": {_quote(f"{method} {path} {status}")}, "request_id": {_quote(rid)}, '
                f'"method": {_quote(method)}, "path": {_quote(path)}, "status": {int(status)}, '
                f'"ms": {(time.perf_counter() - started) * 1000:.2f}, '
                f'"client": {_quote(str((scope.get("client") or ("",))[0]))}, "token": {token}, "kind": {kind}}}')
        if not self.pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self.pending.append(line)

    def flush(self) -> None:
        lines, self.pending = self.pending, []
        if lines:
            access.info("\n".join(lines), extra={"json_lines": True})


class Guard:
    """Pure ASGI, outside everything else:

    - a standby answers 503 naming the leader (but /healthz and the docs);
    - a body is read here, counting bytes as they come (chunked ones too), and refused
      with 413 the moment it passes the limit: before authentication or parsing, so a
      huge body costs the master at most the limit (plans and jobs may be larger, with a
      bearer header);
    - every request gets an id (header ``X-Request-Id``) and one JSON access log line;
    - an error nothing else handled is a JSON 500 naming the request id, logged in one
      bounded line, never a traceback on the wire;
    - a call refused before its caller was authenticated (401, a 413 before the token is
      read, a 404 of a path that does not exist) is counted and summed up in the log, not
      written to the audit; past the limit of such refusals from its address in a window,
      a call to the API without a valid token is answered 429 with ``Retry-After``, before
      its body is read (throttle.py).
    """

    OPEN = ("/healthz", "/openapi.json", "/docs")
    BODY_METHODS = (b"POST", b"PUT", b"PATCH", b"DELETE")

    def __init__(self, app: ASGIApp, role: Role, writer: StoreWriter | None = None,
                 limiter: Limiter | None = None, metrics: Metrics | None = None) -> None:
        self.app = app
        self.role = role
        self.writer = writer
        self.limiter = limiter or Limiter(0)
        self.metrics = metrics
        self.tally = Tally("refused before authentication", "apportion_unauthenticated_refusals_total")
        self.prefix = f"{os.getpid():x}-{secrets.token_hex(2)}"
        self.count = itertools.count(1)
        self.lines = AccessLines()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = f"{self.prefix}-{next(self.count)}"
        state = scope.setdefault("state", {})
        state.update(request_id=rid, method=scope["method"], path=scope["path"])
        token = audit.current.set(state)
        status = 0
        said = b""  # the start of a refusal's body, for the audit

        async def send_with_id(message: Message) -> None:
            nonlocal status, said
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode())]
            elif message["type"] == "http.response.body" and status >= 400 and len(said) < 600:
                said += message.get("body", b"")[:600]
            await send(message)

        try:
            await self._serve(scope, receive, send_with_id)
        except Exception as e:  # noqa: BLE001 - the last resort: a JSON 500, never a traceback on the wire
            where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
            log.error("request %s %s %s: %s: %s (at %s)", rid, scope["method"], scope["path"][:200],
                      e.__class__.__name__, str(e)[:300], f"{where.filename}:{where.lineno}" if where else "?")
            if status == 0:
                await JSONResponse({"detail": f"internal error (request {rid})"}, status_code=500)(
                    scope, receive, send_with_id)
        finally:
            audit.current.reset(token)
            if 400 <= status < 500 and state.get("principal") is None:
                self._refused_unauthenticated(scope, status)
            elif self.writer is not None and not state.get("audited") \
                    and audit.audited(scope["method"], scope["path"]):
                await self._audit_refusal(state, status, said)
            if access.isEnabledFor(logging.INFO):
                self.lines.add(scope, state, rid, status, started)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if self.role.name != "leader" and path not in self.OPEN and not path.startswith("/static"):
            response = JSONResponse({"detail": f"this master is {self.role.name}", "leader": self.role.leader_url},
                                    status_code=503, headers={"Retry-After": "1"})
            await response(scope, receive, send)
            return
        if path.startswith("/v1/") or path == "/metrics":
            address = _address(scope)
            wait = self.limiter.retry_after(address)
            if wait is not None and not self._authenticated(scope):
                response = JSONResponse(
                    {"detail": f"too many calls from {address} were refused before authentication; "
                               f"try again in {wait} s, with a valid token"},
                    status_code=429, headers={"Retry-After": str(wait)})
                await response(scope, receive, send)
                return
        if scope["method"].encode() not in self.BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        limit = MAX_PLAN if path.startswith(("/v1/plan", "/v1/jobs")) and b"authorization" in headers else MAX_BODY
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await self._too_large(scope, receive, send, f"{int(declared)} bytes", limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                chunks.clear()
                await self._too_large(scope, receive, send, f"more than {limit} bytes", limit)
                return
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        del chunks
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    def _authenticated(scope: Scope) -> bool:
        """Whether the call carries a valid bearer token (an address over its limit of refusals
        is still served when it does: the agents and clients that share it go on)."""
        scheme, _, token = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1").partition(" ")
        token = token.strip()
        app = scope.get("app")
        if scheme.lower() != "bearer" or not token or app is None:
            return False
        return principal_of(app.state, token) is not None

    def _refused_unauthenticated(self, scope: Scope, status: int) -> None:
        """Counted, limited per address and summed up in the log: no audit row (it would let
        anyone grow the store at will)."""
        address = _address(scope)
        if self.metrics is not None:
            self.metrics.unauthenticated.labels(str(status)).inc()
        if status != 429:
            self.limiter.refused(address)
        self.tally.note(address, str(status), f"{scope['method']} {scope['path'][:100]} answered {status}")

    async def _audit_refusal(self, state: dict, status: int, said: bytes) -> None:
        """A write of an authenticated caller refused before it reached the master's task (403,
        a body's 422)."""
        outcome = "done" if status < 400 else "refused: " + said.decode("utf-8", "replace")[:900]
        try:
            await asyncio.to_thread(audit.write, self.writer.engine, self.writer.counters,
                                    [audit.row(state, state["method"], state["path"], status, outcome)])
        except Exception as e:  # noqa: BLE001 - an audit row that cannot be written is logged, not a failure
            log.error("audit: request %s not recorded: %s", state.get("request_id"), str(e)[:300])

    @staticmethod
    async def _too_large(scope: Scope, receive: Receive, send: Send, size: str, limit: int) -> None:
        response = JSONResponse({"detail": f"body: {size} is more than the limit of {limit}"},
                                status_code=413, headers={"Connection": "close"})
        await response(scope, receive, send)


def _address(scope: Scope) -> str:
    return str((scope.get("client") or ("",))[0])


@dataclass
class ServerConfig:
    url: str  # this master's own URL, announced to the others when it leads
    settings: Settings = field(default_factory=Settings)
    swept: bool = False  # the store was checked (quarantine.sweep) before the app was made
    refusal_limit: int = DEFAULT_LIMIT  # refusals before authentication per address per window (0: no limit)
    refusal_window: float = DEFAULT_WINDOW


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
                async def sweep(plan: bool) -> None:
                    """Rows the master can no longer accept are set aside, never fatal; the
                    plan with the hosts is checked only when the master could not be built
                    from the store (compiling it twice would slow every restart)."""
                    try:
                        if config.swept and not plan:
                            n, latest = await asyncio.to_thread(quarantine.held_in, db)
                        else:
                            _, n, latest = await asyncio.to_thread(quarantine.sweep, db, False, plan)
                        app.state.quarantine = (n, [e.json() for e in latest])
                    except Exception as e:  # noqa: BLE001 - the check must not keep the master down either
                        log.error("the quarantine check failed: %s: %s", e.__class__.__name__, str(e)[:300])

                async def build() -> Master:
                    snapshot = await asyncio.to_thread(writer.load)
                    kind = DuccMaster if is_ducc_plan(liveplan.parse(snapshot.plan_text, "<plan in force>",
                                                                      positions=False).data) else Master
                    return kind(writer, snapshot, config.settings)

                await sweep(False)
                gc.disable()
                try:
                    try:
                        m = await build()
                    except Exception as e:  # noqa: BLE001 - what the store holds cannot be served: set it aside
                        log.error("the master cannot be built from the store (%s: %s): checking the plan "
                                  "with the hosts", e.__class__.__name__, str(e)[:300])
                        await sweep(True)
                        m = await build()
                finally:
                    gc.freeze()
                    gc.set_threshold(50_000, 20, 100)
                    gc.enable()
                m.observers.append(metrics.observe)
                m.observers.append(reserved.observer(m))  # planned starts in /v1/allocations
                console.attach(app, m)  # the console's live feed and the history sampler
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
    app.state.quarantine = (0, [])  # (rows in quarantine, the latest of them)
    app.mount("/static", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="static")

    limiter = Limiter(config.refusal_limit, config.refusal_window)
    metrics.limited_addresses.set_function(limiter.over)
    app.add_middleware(Guard, role=role, writer=writer, limiter=limiter, metrics=metrics)
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    # every route refuses a query parameter it does not declare: those that take a token in
    # that one dependency (auth.py), the others (health, the console's pages) in their own
    checked = [Depends(known_query)]
    # routes are matched in order: the agents' heartbeats and the allocations' calls first
    for r in (agents.router, work.router, events.router, jobs.router, cluster.router, audit_api.router):
        app.include_router(r)
    app.include_router(health.router, dependencies=checked)
    app.include_router(console_api.router)  # the console: read-only /v1 views and its pages at /ui
    app.include_router(console_pages.router, dependencies=checked)
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
        _links(spec)
        app.openapi_schema = spec
    return app.openapi_schema


# what a creation's answer leads to: OpenAPI links (a client follows them; schemathesis's
# stateful phase chains calls through them)
_LINKS = {
    ("/v1/clients", "post"): ("client_id", ["/v1/clients/{client_id}"]),  # not its events: an SSE stream
    ("/v1/allocations", "post"): ("aid", ["/v1/allocations/{aid}", "/v1/allocations/{aid}/release",
                                          "/v1/allocations/{aid}/activities"]),
    ("/v1/allocations/{aid}/activities", "post"): ("act_id", ["/v1/activities/{act_id}",
                                                              "/v1/activities/{act_id}/output",
                                                              "/v1/activities/{act_id}/kill"]),
}


def _links(spec: dict) -> None:
    paths = spec.get("paths", {})
    for (path, method), (param, targets) in _LINKS.items():
        op = paths.get(path, {}).get(method)
        if op is None:
            continue
        links = {}
        for target in targets:
            for target_method, target_op in paths.get(target, {}).items():
                if target_op.get("operationId"):
                    links[f"{target_method}_{target_op['operationId']}"] = {
                        "operationId": target_op["operationId"], "parameters": {param: "$response.body#/id"}}
        for status, response in op.get("responses", {}).items():
            if status.startswith("2"):
                response["links"] = links
