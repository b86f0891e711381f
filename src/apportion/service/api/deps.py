"""What every handler gets from the app: the master (the engine's task) and the store."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request, Response

from apportion.service import audit
from apportion.service.api.errors import excerpt
from apportion.service.auth import master_of as master
from apportion.service.master import ApiError, Master

__all__ = ["answer", "known_query", "master", "run"]


async def run(m: Master, op) -> object:  # noqa: ANN001 - an op_* closure
    """Send an operation to the master's task; a refusal (ApiError) becomes the HTTP error.
    The call is audited in the batch of its change (audit.py)."""
    return await m.submit(audit.wrap(op))


def answer(content: Any, status: int = 200) -> Response:
    """JSON already made: FastAPI's generic encoder is skipped on the hot paths."""
    return Response(json.dumps(content, separators=(",", ":")).encode(), status_code=status,
                    media_type="application/json")


_known: dict[int, frozenset[str]] = {}  # id(route) -> the query parameters it declares (routes live as long as the app)


async def known_query(request: Request) -> None:
    """Applied to every route: a query parameter the route does not declare is a 422 naming it
    (``?host=h1`` on a path that has no such filter would otherwise list everything)."""
    if not request.query_params:
        return
    route = request.scope.get("route")
    names = _known.get(id(route))
    if names is None:
        found: set[str] = set()
        todo = [getattr(route, "dependant", None)]
        while todo:
            dep = todo.pop()
            if dep is not None:
                found.update(p.alias for p in dep.query_params)
                todo.extend(dep.dependencies)
        names = _known[id(route)] = frozenset(found)
    for key in request.query_params:
        if key not in names:
            allowed = ", ".join(sorted(names)) or "none"
            raise ApiError(422, f"{excerpt(key, 40)}: unknown query parameter (this path takes: {allowed})",
                           where="query")
