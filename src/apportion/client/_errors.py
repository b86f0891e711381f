"""What the SDK raises: one exception type, with the master's status and detail."""

from __future__ import annotations

from typing import Any


def describe(detail: Any) -> str:
    """The master's ``detail`` as one readable line.

    FastAPI's validation errors are a list of ``{"loc": [...], "msg": ...}``:
    each becomes ``body.min: Input should be ...`` so the field is named.
    """
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict) and "msg" in item:
                where = [".".join(str(x) for x in item.get("loc", ()))]
                where += [f"line {item['line']}" if item.get("line") else "", str(item.get("field") or "")]
                prefix = ": ".join(w for w in where if w)
                parts.append(f"{prefix}: {item['msg']}" if prefix else str(item["msg"]))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    if isinstance(detail, dict):
        return ", ".join(f"{k}: {v}" for k, v in detail.items())
    return str(detail)


class ApportionError(Exception):
    """The master refused a call (``status`` 4xx or 5xx), with its ``detail``.

    ``status`` is 0 when no master could be reached at all (``MasterUnavailable``).
    """

    def __init__(self, status: int, detail: Any, *, method: str = "", path: str = "") -> None:
        self.status = status
        self.detail = detail
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{status}: {describe(detail)}" if status else f"{where}{describe(detail)}")


class MasterUnavailable(ApportionError):
    """No master answered: every URL refused the connection or timed out."""

    def __init__(self, detail: Any, *, method: str = "", path: str = "") -> None:
        super().__init__(0, detail, method=method, path=path)
