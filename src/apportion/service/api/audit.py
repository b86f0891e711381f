"""The audit trail (admin): who changed what, and what was refused (service/audit.py)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query

from apportion.service import audit
from apportion.service.auth import Caller, admin

router = APIRouter(prefix="/v1", tags=["cluster"])


@router.get("/audit")
async def audit_trail(since: float | None = Query(None, ge=0, le=1e11, description="rows at or after this Unix time"),
                      after: int | None = Query(None, ge=0, description="rows after this audit id (paging)"),
                      consumer: str | None = Query(None, max_length=400, description="rows of this consumer's subtree"),
                      kind: Literal["admin", "consumer", "agent", "process"] | None = Query(
                          None, description="rows of tokens of this kind"),
                      limit: int = Query(1000, ge=1, le=10_000),
                      c: Caller = Depends(admin)) -> dict[str, Any]:
    rows = await asyncio.to_thread(audit.read, c.m.writer.engine, since, consumer, kind, after, limit)
    return {"audit": rows}
