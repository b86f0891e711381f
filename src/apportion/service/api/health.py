"""Liveness, readiness, metrics and the interactive docs (assets from the package, no CDN)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from apportion.service import commitguard
from apportion.service.api.deps import master, run
from apportion.service.auth import Caller, admin


router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(request: Request) -> dict[str, Any]:
    """The process answers. A standby says so, and names the leader."""
    role = request.app.state.role
    return {"status": "ok", "role": role.name, "leader": role.leader_url}


@router.get("/readyz", responses={503: {"description": "not ready: starting, or the store takes no writes"}})
async def readyz(request: Request) -> Any:
    """Ready: the store is read, the engine rebuilt, the master's task runs, and the store
    takes writes. Rows the master set aside at start (it serves the rest) are counted and
    the latest named. While the store takes no writes (a full disk): 503, saying why and since when."""
    m = request.app.state.master
    if m is not None and m.ready and m.store_down is not None:
        return JSONResponse({"status": "not ready", "reason": f"the store takes no writes: {m.store_down}",
                             "since": m.store_down_since, "plan_version": m.plan_version},
                            status_code=503, headers={"Retry-After": str(int(commitguard.RETRY))})
    m = master(request)
    n, latest = request.app.state.quarantine
    return {"status": "ready", "plan_version": m.plan_version, "cycles": m.cycles, "quarantined": n,
            "quarantine": latest}


@router.get("/metrics")
async def metrics(request: Request, c: Caller = Depends(admin)) -> Response:
    m = c.m
    mt = request.app.state.metrics
    report = await run(m, m.op_report()) if m.kind == "ego" else None
    mt.open_requests.set(len(m.allocations))
    mt.unmet.set(sum(max(0, a.max - a.held) for a in m.allocations.values()))
    states: dict[str, int] = {}
    for h in m.hosts.values():
        states[h.state] = states.get(h.state, 0) + 1
    for s in ("ok", "closed", "unreachable", "down"):
        mt.hosts.labels(s).set(states.get(s, 0))
    mt.agents_up.set(sum(1 for h in m.hosts.values() if h.state not in ("unreachable", "down")))
    mt.observe_hosts(m)
    mt.observe_kinds(m)
    for path, line in (report.consumers.items() if report is not None else ()):
        for g, gl in line.groups.items():
            mt.held.labels(path, g).set(gl.held)
            mt.deserved.labels(path, g).set(gl.deserved)
            mt.shortfall.labels(path, g).set(gl.shortfall)
    return Response(generate_latest(mt.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/docs", include_in_schema=False)
async def docs() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="apportion API",
                               swagger_js_url="/static/swagger-ui-bundle.js",
                               swagger_css_url="/static/swagger-ui.css",
                               swagger_favicon_url="/static/favicon-32x32.png")
