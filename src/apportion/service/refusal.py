"""``ApiError``: a refused operation, nothing changed.

In a module of its own so that the master's helpers (quotas, the audit trail, removals) and
the API routes can raise and catch it without importing the master (``service/master.py``
imports those helpers; ``from apportion.service.master import ApiError`` still works).
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A refused operation: nothing was changed. A 422's detail is "field: reason", or a
    list of plan problems; the API answers it in FastAPI's shape for validation errors,
    with the field in ``loc`` (api/errors.py)."""

    def __init__(self, status: int, detail: Any, where: str = "body") -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.where = where
