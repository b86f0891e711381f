"""The agents' side: register a host, heartbeat, and get commands (docs/service.md, "The agent protocol")."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from apportion.service import execution
from apportion.service.api.deps import answer, run
from apportion.service.api.events import woken
from apportion.service.api.schemas import AgentHeartbeat, AgentRegister, HostName
from apportion.service.auth import Caller, anyone, require_host


router = APIRouter(prefix="/v1/agents", tags=["agents"])


@router.post("/{host}/register")
async def register(host: HostName, body: AgentRegister, c: Caller = Depends(anyone)) -> dict[str, Any]:
    p, m = c.p, c.m
    require_host(p, host)
    agent = {"containment": body.containment, "run_as": body.run_as.model_dump() if body.run_as else None}
    if body.resources is not None:
        agent["resources"] = body.resources.model_dump()
    await run(m, m.op_agent_register(host, body.slots, body.memory, body.os, dict(body.attributes),
                                     [a.id for a in body.activities], agent=agent))
    return {"host": host, "heartbeat": m.settings.heartbeat, "kill_grace": m.settings.kill_grace}


@router.post("/{host}/heartbeat")
async def heartbeat(host: HostName, body: AgentHeartbeat, c: Caller = Depends(anyone)) -> Any:
    p, m = c.p, c.m
    require_host(p, host)
    h = m.hosts.get(host)
    if h is None:
        raise HTTPException(404, f"host {host} is not registered: register first")
    h.last_seen = time.time()
    reports = [a.model_dump() for a in body.activities]
    execution.note_heartbeat(m, host, reports, body.host.alien if body.host is not None else None)
    if m.reports_change(host, reports) or execution.reports_change(m, host, reports):
        await run(m, m.op_agent_reports(host, reports))
    listed = {a.id: a.state for a in body.activities}
    commands = m.commands_for(host, listed)
    if not commands and body.wait > 0:
        w = m.host_waiters.get(host)
        if w is None:
            w = m.host_waiters[host] = asyncio.Event()
        await woken(w, min(body.wait, m.settings.heartbeat))
        h.last_seen = time.time()
        commands = m.commands_for(host, listed)
    return answer({"commands": commands, "heartbeat": m.settings.heartbeat})
