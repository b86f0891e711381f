"""apportion: share a pool of hosts among many tenants, the EGO and DUCC way.

``apportion.client`` (the SDK) is loaded on first use, so ``import apportion`` stays cheap and
never pulls in the engine or the server.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = ("client",)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"apportion.{name}")
    raise AttributeError(f"module 'apportion' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
