"""What every handler gets from the app: the master (the engine's task) and the store."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Response

from apportion.service.auth import master_of as master
from apportion.service.master import Master

__all__ = ["answer", "master", "run"]


async def run(m: Master, op) -> object:  # noqa: ANN001 - an op_* closure
    """Send an operation to the master's task; a refusal (ApiError) becomes the HTTP error."""
    return await m.submit(op)


def answer(content: Any, status: int = 200) -> Response:
    """JSON already made: FastAPI's generic encoder is skipped on the hot paths."""
    return Response(json.dumps(content, separators=(",", ":")).encode(), status_code=status,
                    media_type="application/json")
