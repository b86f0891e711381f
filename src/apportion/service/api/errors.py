"""Refusals as HTTP answers. A 422 takes FastAPI's shape for validation errors, so every
422 of the API has one schema: ``{"detail": [{"loc": [WHERE, FIELD], "msg", "type"}]}``.

No answer echoes more than a short excerpt of what was sent: a validation error's
``input`` is at most ``EXCERPT`` characters of its ``repr``, and a message at most ``MSG``.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from apportion.service.master import ApiError

EXCERPT = 80  # characters of the input an error may quote
MSG = 500  # characters of one error message


def excerpt(value: Any, limit: int = EXCERPT) -> str:
    """``repr(value)`` cut to ``limit`` characters (a huge value is not turned whole into text)."""
    if isinstance(value, str | bytes) and len(value) > limit:
        value = value[:limit]
    elif isinstance(value, list | tuple) and len(value) > 8:
        value = [*value[:8], "..."]
    elif isinstance(value, dict) and len(value) > 8:
        value = dict([*list(value.items())[:8], ("...", "...")])
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still refused, not a 500
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _msg(text: str) -> str:
    return text if len(text) <= MSG else text[:MSG - 3] + "..."


def detail_of(e: ApiError) -> Any:
    if e.status != 422:
        return _msg(e.detail) if isinstance(e.detail, str) else e.detail
    if isinstance(e.detail, list):  # plan problems: each with its field and line
        return [{"loc": ["body", *p["field"].split(".")], "msg": _msg(p["msg"]), "type": "plan", "line": p["line"],
                 **({"file": p["file"]} if p.get("file") else {})}  # a DUCC plan's problems may be in its files
                for p in e.detail]
    field, _, reason = str(e.detail).partition(": ")
    return [{"loc": [e.where, field], "msg": _msg(f"{field}: {reason}" if reason else field), "type": "value_error"}]


async def api_error(request: Request, e: Exception) -> JSONResponse:
    assert isinstance(e, ApiError)
    return JSONResponse({"detail": detail_of(e)}, status_code=e.status)


def validation_detail(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """FastAPI's errors, each with its place, message and type, its input as a short excerpt
    (NaN or a megabyte string is never echoed), and only the plain parts of its context."""
    out = []
    for err in errors[:20]:
        item: dict[str, Any] = {"loc": [x if isinstance(x, int | str) else str(x) for x in err.get("loc", ())][:20],
                                "msg": _msg(str(err.get("msg", ""))), "type": str(err.get("type", ""))}
        if "input" in err:
            item["input"] = excerpt(err["input"])
        ctx = err.get("ctx")
        if isinstance(ctx, dict):
            item["ctx"] = {str(k): v if isinstance(v, int | str | bool) and not isinstance(v, float)
                           and len(str(v)) <= EXCERPT else excerpt(v) for k, v in ctx.items()}
        out.append(item)
    return out


async def validation_error(request: Request, e: Exception) -> JSONResponse:
    assert isinstance(e, RequestValidationError)
    return JSONResponse({"detail": validation_detail(list(e.errors()))}, status_code=422)
