"""What every handler gets from the app: the master (the engine's task) and the store."""

from __future__ import annotations

from fastapi import HTTPException, Request

from apportion.service.master import Master


def master(request: Request) -> Master:
    m = request.app.state.master
    if m is None or not m.ready:
        raise HTTPException(503, "the master is starting", headers={"Retry-After": "1"})
    return m


async def run(m: Master, op) -> object:  # noqa: ANN001 - an op_* closure
    """Send an operation to the master's task; a refusal (ApiError) becomes the HTTP error."""
    return await m.submit(op)
