"""One call of the HTTP API as data: method, path, body, and how to pick the answer apart.

``_calls.Endpoints`` builds them, ``_route`` sends them; both import it from here, so
neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def _same(body: Any) -> Any:
    return body


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str
    json: Any = None
    params: Mapping[str, Any] | None = None
    content: str | None = None
    content_type: str | None = None
    pick: Callable[[Any], Any] = _same
    timeout: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
