"""Refusals as HTTP answers. A 422 takes FastAPI's shape for validation errors, so every
422 of the API has one schema: ``{"detail": [{"loc": [WHERE, FIELD], "msg", "type"}]}``."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from apportion.service.master import ApiError


def detail_of(e: ApiError) -> Any:
    if e.status != 422:
        return e.detail
    if isinstance(e.detail, list):  # plan problems: each with its field and line
        return [{"loc": ["body", *p["field"].split(".")], "msg": p["msg"], "type": "plan", "line": p["line"],
                 **({"file": p["file"]} if p.get("file") else {})}  # a DUCC plan's problems may be in its files
                for p in e.detail]
    field, _, reason = str(e.detail).partition(": ")
    return [{"loc": [e.where, field], "msg": f"{field}: {reason}" if reason else field, "type": "value_error"}]


async def api_error(request: Request, e: Exception) -> JSONResponse:
    assert isinstance(e, ApiError)
    return JSONResponse({"detail": detail_of(e)}, status_code=e.status)
