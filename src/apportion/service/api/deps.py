"""What every handler gets from the app: the master (the engine's task) and the store."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request, Response

from apportion.service import audit, commitguard
from apportion.service.auth import check_query, master_of as master
from apportion.service.master import Master

__all__ = ["answer", "known_query", "master", "run"]


async def run(m: Master, op) -> object:  # noqa: ANN001 - an op_* closure
    """Send an operation to the master's task; a refusal (ApiError) becomes the HTTP error.
    The call is audited in the batch of its change (audit.py). While the store takes no
    writes, a write is answered 503 with Retry-After here, and a read still goes through
    (service/commitguard.py)."""
    if m.store_down is not None and not getattr(op, "read_only", False):
        raise commitguard.unavailable(m)
    return await m.submit(audit.wrap(op))


def answer(content: Any, status: int = 200) -> Response:
    """JSON already made: FastAPI's generic encoder is skipped on the hot paths."""
    return Response(json.dumps(content, separators=(",", ":")).encode(), status_code=status,
                    media_type="application/json")


async def known_query(request: Request) -> None:
    """For the routes that take no token (health, the console's pages): a query parameter
    the route does not declare is a 422 naming it. Every route that takes a token checks
    it in that dependency (auth.py), before the token: one dependency fewer per call."""
    if request.scope.get("query_string"):
        check_query(request)
