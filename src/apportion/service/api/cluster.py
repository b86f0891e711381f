"""Hosts, consumers, the plan and tokens: what administrators use."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException, Request, Response

from apportion.service import audit, commitguard, hoststates, kinds, removals
from apportion.service.api.deps import run
from apportion.service.api.schemas import HostClose, HostName, TokenIn
from apportion.service.auth import Caller, admin, user
from apportion.service.master import ApiError
from apportion.service.store.db import retry_locked
from apportion.service.store.writer import digest

router = APIRouter(prefix="/v1", tags=["cluster"])

_PLAN_BODY = Body(..., media_type="text/plain", description="The plan's text: YAML or JSON (docs/plan-format.md)")


@router.get("/hosts")
async def list_hosts(c: Caller = Depends(user)) -> dict[str, Any]:
    m = c.m
    fenced = hoststates.fenced_by_host(m)
    used = kinds.used_by_host(m)
    return {"hosts": [{"name": h.name, "state": h.state, "slots": h.slots, "free": m.free_on(h.name),
                       "used": m.host_used.get(h.name, 0), "memory": h.memory, "os": h.os,
                       "attributes": h.attributes, "closed": h.closed, "last_seen": h.last_seen, **h.facts(),
                       **hoststates.json(m, h, fenced), **m.start_failures.json(h.name),
                       **kinds.host_json(h, used.get(h.name), m.live_on.get(h.name, {}).values())}
                      for h in sorted(m.hosts.values(), key=lambda h: h.name)]}


@router.delete("/hosts/{name}", status_code=204)
async def delete_host(name: HostName, c: Caller = Depends(admin)) -> Response:
    """Remove a host that is down and holds nothing (409 otherwise, saying why)."""
    m = c.m
    if name not in m.hosts:
        raise HTTPException(404, f"no host {name}")
    await run(m, removals.op_delete_host(m, name))
    return Response(status_code=204)


@router.post("/hosts/{name}/close")
async def close_host(name: HostName, body: HostClose | None = None, c: Caller = Depends(admin)) -> dict[str, Any]:
    """Take no new work; with ``reclaim``, also take back what runs there now."""
    m = c.m
    if name not in m.hosts:
        raise HTTPException(404, f"no host {name}")
    h = await run(m, m.op_close_host(name, (body or HostClose()).reclaim))
    return {"name": h.name, "state": h.state}


@router.post("/hosts/{name}/vary-off")
async def vary_off(name: HostName, c: Caller = Depends(admin)) -> dict[str, Any]:
    """DUCC's name for closing a host: fair-share work on it is evicted, nothing new goes there."""
    return await close_host(name, None, c)


@router.post("/hosts/{name}/vary-on")
async def vary_on(name: HostName, c: Caller = Depends(admin)) -> dict[str, Any]:
    return await open_host(name, c)


@router.post("/hosts/{name}/open")
async def open_host(name: HostName, c: Caller = Depends(admin)) -> dict[str, Any]:
    m = c.m
    if name not in m.hosts:
        raise HTTPException(404, f"no host {name}")
    h = await run(m, m.op_open_host(name))
    return {"name": h.name, "state": h.state}


@router.post("/hosts/{name}/confirm-dead")
async def confirm_dead(name: HostName, c: Caller = Depends(admin)) -> dict[str, Any]:
    """The host is known dead (powered off, reinstalled): what ran there is lost and every
    slot fenced there for its processes is free. 409 while its agent answers."""
    m = c.m
    if name not in m.hosts:
        raise HTTPException(404, f"no host {name}")
    h = await run(m, hoststates.op_confirm_dead(m, name, audit.who(c.p)))
    return {"name": h.name, "state": h.state}


@router.get("/consumers")
async def consumers(c: Caller = Depends(user)) -> dict[str, Any]:
    """Per consumer and resource group: EGO's rg view."""
    p, m = c.p, c.m
    report = await run(m, m.op_report())
    used = kinds.used_by_consumer(m)
    out = []
    for path, line in report.consumers.items():
        if not p.may_see(path):
            continue
        for g, gl in line.groups.items():
            out.append({"consumer": path, "group": g, "owned": gl.planned_owned, "held": gl.held,
                        "held_owned": gl.owned, "allocated": gl.held, "allocated_owned": gl.owned,
                        "borrowed": gl.borrowed, "lent": gl.lent, "shared": gl.shared,
                        "deserved": gl.deserved, "demand": gl.demand, "shortfall": gl.shortfall,
                        **kinds.consumer_json(used.get((path, g)))})
    return {"consumers": out}


@router.get("/plan")
async def get_plan(c: Caller = Depends(admin)) -> dict[str, Any]:
    m = c.m
    return {"version": m.plan_version, "applied_by": m.plan_by, "applied_at": m.plan_at, "text": m.plan_text}


async def _text(request: Request) -> str:
    raw = await request.body()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(422, "plan: the body is not UTF-8 text") from None


@router.put("/plan", openapi_extra={"requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}},
                                                    "required": True}})
async def put_plan(request: Request, c: Caller = Depends(admin)) -> dict[str, Any]:
    """Validate and put a new plan in force, atomically; 422 lists every problem and
    leaves the plan in force as it was."""
    p, m = c.p, c.m
    text = await _text(request)
    version = await run(m, m.op_apply_plan(text, p.name))
    return {"version": version}


@router.post("/plan/diff", openapi_extra={"requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}},
                                                          "required": True}})
async def diff_plan(request: Request, c: Caller = Depends(admin)) -> dict[str, Any]:
    """What the plan would reclaim and remove right now, run on a copy of the live state."""
    m = c.m
    text = await _text(request)
    return await run(m, m.op_diff_plan(text))


@router.post("/tokens", status_code=201)
async def create_token(body: TokenIn, c: Caller = Depends(admin)) -> dict[str, Any]:
    m = c.m
    # a scope that does not belong to the kind is refused, never dropped (an admin token
    # asked "for /Apps" would silently be a full admin token)
    if body.consumer is not None and body.kind != "consumer":
        raise ApiError(422, f"consumer: a token of kind {body.kind} has no consumer scope (kind consumer has)")
    if body.host is not None and body.kind != "agent":
        raise ApiError(422, f"host: a token of kind {body.kind} has no host (kind agent has)")
    if body.kind == "consumer":
        if body.consumer is None:
            raise ApiError(422, "consumer: a consumer token needs the consumer path it is scoped to")
        if body.consumer == "/":  # every tenant's: that is an admin token's reach, asked for by name
            raise ApiError(422, "consumer: / is every tenant's subtree: a consumer token is scoped below it "
                                "(an admin token reaches everything)")
        if not m.valid_consumer(body.consumer):
            raise ApiError(422, f"consumer: {body.consumer} is not a consumer of the plan in force")
    if body.kind == "agent" and body.host is None:
        raise ApiError(422, "host: an agent token needs the host it reports for")
    if m.store_down is not None:
        raise commitguard.unavailable(m)
    try:
        tid, token = await asyncio.to_thread(retry_locked, m.writer.make_token, body.kind,
                                             body.consumer if body.kind == "consumer" else None,
                                             body.host if body.kind == "agent" else None, audit.claim(201))
    except Exception as e:
        if commitguard.store_trouble(e):  # the store takes no writes: the token was not made
            raise HTTPException(503, f"the store takes no writes now ({commitguard.short(e)}): try again later",
                                headers={"Retry-After": str(int(commitguard.RETRY))}) from None
        raise
    return {"token": token, "id": tid, "kind": body.kind}


@router.get("/tokens")
async def list_tokens(c: Caller = Depends(admin)) -> dict[str, Any]:
    """Every token's id, kind and scope; never a token or its digest."""
    return {"tokens": await asyncio.to_thread(c.m.writer.tokens)}


@router.delete("/tokens/{token_id}", status_code=204)
async def revoke_token(request: Request, token_id: int, c: Caller = Depends(admin)) -> Response:
    """Revoke a token: every call with it is refused (401) from now on."""
    row = audit.claim(204)
    try:
        gone = await asyncio.to_thread(retry_locked, c.m.writer.revoke_token, token_id, row)
    except ValueError as e:
        audit.unclaim()
        raise HTTPException(409, f"token {token_id}: {e}") from None
    if gone is None:
        audit.unclaim()
        raise HTTPException(404, f"no token {token_id}")
    cache = request.app.state.token_cache
    for token in [t for t in cache if digest(t) == gone]:
        del cache[token]
    return Response(status_code=204)
