"""Clients, allocations and activities: what application managers use."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Response

from apportion.service import audit, kinds, removals
from apportion.service.api.deps import answer, run
from apportion.service.api.schemas import (
    ActivityIn,
    ActivityState,
    AllocationChange,
    AllocationIn,
    ClientIn,
    HostName,
    ReleaseIn,
    groups_of,
)
from apportion.service.auth import Caller, Principal, require_consumer, user
from apportion.service.master import ApiError, Master
from apportion.service.published import ActivityPub, AllocationPub

router = APIRouter(prefix="/v1", tags=["allocations"])


def _alloc(m: Master, p: Principal, aid: int) -> AllocationPub:
    a = m.allocations.get(aid)
    if a is None:
        raise HTTPException(404, f"no allocation {aid}")
    require_consumer(p, a.consumer)
    return a


def _activity(m: Master, p: Principal, act_id: int) -> ActivityPub:
    act = m.activities.get(act_id)
    if act is None:
        raise HTTPException(404, f"no activity {act_id}")
    c = m.clients.get(act.client)
    require_consumer(p, c.consumer if c else "/")
    return act


# The calls of every round of an application (create, delete) come first: a request is
# matched against the routes in order (twice: the app, then this router).
@router.post("/allocations", status_code=201)
async def create_allocation(body: AllocationIn, c: Caller = Depends(user)) -> Any:
    p, m = c.p, c.m
    require_consumer(p, body.consumer)
    c = m.clients.get(body.client)
    if c is None:
        raise ApiError(422, f"client: no client {body.client}")
    require_consumer(p, c.consumer)
    groups = groups_of(body.group)
    m.check_allocation(body.consumer, groups, body.min, body.max, body.slots_per_instance, body.requirement)
    a = await run(m, m.op_create_allocation(body.client, body.consumer, groups, body.min, body.max,
                                            body.slots_per_instance, body.exclusive, body.requirement, body.memory,
                                            body.resources.as_json() if body.resources is not None else None,
                                            walltime=body.walltime))
    return answer(a.json(), 201)


@router.delete("/allocations/{aid}", status_code=204)
async def delete_allocation(aid: int, c: Caller = Depends(user)) -> Response:
    p, m = c.p, c.m
    _alloc(m, p, aid)
    await run(m, m.op_delete(aid))
    return Response(status_code=204)


@router.post("/clients", status_code=201)
async def register_client(body: ClientIn, c: Caller = Depends(user)) -> Any:
    """Register (or register again under the same name: its allocations are kept)."""
    p, m = c.p, c.m
    require_consumer(p, body.consumer)
    c = await run(m, m.op_register_client(body.name, body.consumer))
    return answer(c.json(), 201)


@router.get("/clients")
async def list_clients(c: Caller = Depends(user)) -> dict[str, Any]:
    """The clients the token may see (a consumer token: those of its subtree)."""
    p, m = c.p, c.m
    return {"clients": [x.json() for x in sorted(m.clients.values(), key=lambda x: x.id) if p.may_see(x.consumer)]}


@router.delete("/clients/{client_id}", status_code=204)
async def delete_client(client_id: int, c: Caller = Depends(user)) -> Response:
    """Delete a client and every allocation of it (their slots go back, their activities are stopped)."""
    p, m = c.p, c.m
    x = m.clients.get(client_id)
    if x is None:
        raise HTTPException(404, f"no client {client_id}")
    require_consumer(p, x.consumer)
    await run(m, removals.op_delete_client(m, client_id))
    return Response(status_code=204)


@router.get("/clients/{client_id}")
async def get_client(client_id: int, c: Caller = Depends(user)) -> dict[str, Any]:
    p, m = c.p, c.m
    c = m.clients.get(client_id)
    if c is None:
        raise HTTPException(404, f"no client {client_id}")
    require_consumer(p, c.consumer)
    return c.json()


@router.get("/allocations/{aid}")
async def get_allocation(aid: int, c: Caller = Depends(user)) -> Any:
    p, m = c.p, c.m
    a = _alloc(m, p, aid)
    return answer({**a.json(), **kinds.allocation_devices(a, kinds.devices_index(m, a))})


@router.get("/allocations")
async def list_allocations(consumer: str | None = None, client: int | None = None, c: Caller = Depends(user)) -> dict[str, Any]:
    p, m = c.p, c.m
    from apportion.service.master import in_subtree

    held = kinds.devices_index(m)
    out = [{**a.json(), **kinds.allocation_devices(a, held)} for a in m.allocations.values()
           if p.may_see(a.consumer) and (consumer is None or in_subtree(a.consumer, consumer))
           and (client is None or a.client == client)]
    return {"allocations": out}


@router.patch("/allocations/{aid}")
async def change_allocation(aid: int, body: AllocationChange, c: Caller = Depends(user)) -> dict[str, Any]:
    p, m = c.p, c.m
    _alloc(m, p, aid)
    a = await run(m, m.op_change_allocation(aid, body.min, body.max))
    return a.json()


@router.post("/allocations/{aid}/release")
async def release_allocation(aid: int, body: ReleaseIn | None = None, c: Caller = Depends(user)) -> dict[str, Any]:
    """No hosts: give back every slot and end the demand (min = max = 0; PATCH may ask
    again). Hosts: give back what the allocation holds there; its max stays, so it may
    be granted elsewhere; ``blocked``: those hosts are never given to it again."""
    p, m = c.p, c.m
    _alloc(m, p, aid)
    body = body or ReleaseIn()
    a = await run(m, m.op_release(aid, body.hosts, body.blocked, body.slots))
    return a.json()


@router.post("/allocations/{aid}/activities", status_code=201)
async def start_activity(aid: int, body: ActivityIn, c: Caller = Depends(user)) -> dict[str, Any]:
    p, m = c.p, c.m
    _alloc(m, p, aid)
    act = await run(m, m.op_start_activity(aid, body.host, body.argv, body.env, body.cwd, body.slots))
    return act.json()


@router.get("/activities")
async def list_activities(allocation: int | None = None, host: HostName | None = None,
                          state: ActivityState | None = None, c: Caller = Depends(user)) -> dict[str, Any]:
    p, m = c.p, c.m
    out = []
    for act in m.activities.values():
        if (allocation is not None and act.allocation != allocation) or (host is not None and act.host != host) \
                or (state is not None and act.state != state):
            continue
        c = m.clients.get(act.client)
        if c is not None and p.may_see(c.consumer):
            out.append(act.json())
    return {"activities": out}


@router.get("/activities/{act_id}")
async def get_activity(act_id: int, c: Caller = Depends(user)) -> dict[str, Any]:
    p, m = c.p, c.m
    return _activity(m, p, act_id).json()


@router.get("/activities/{act_id}/output")
async def activity_output(act_id: int, c: Caller = Depends(user)) -> dict[str, Any]:
    p, m = c.p, c.m
    act = _activity(m, p, act_id)
    return {"id": act.id, "stdout": act.stdout, "stderr": act.stderr}


@router.post("/activities/{act_id}/kill", status_code=202)
async def kill_activity(act_id: int, c: Caller = Depends(user)) -> dict[str, Any]:
    p, m = c.p, c.m
    _activity(m, p, act_id)
    act = await run(m, m.op_kill_activity(act_id, audit.who(p)))  # stop_reason names who
    return act.json()
