"""The Python SDK of the live service (docs/service.md).

```python
from apportion.client import Client

with Client("http://127.0.0.1:8470") as api:          # token: APPORTION_TOKEN or token_file=
    me = api.register("my-app", "/Dev")
    alloc = api.allocate("/Dev", "RG1", 1, 4, client=me)
    with api.events(me) as events:
        for event in events:                          # reconnects and resumes by itself
            if event["type"] == "granted":
                api.start_activity(alloc["id"], event["host"], ["./worker"])
```

A DUCC job's process works through its items with ``for item in work(): ...``
(or ``serve(fn)``, ``threads`` at a time); see ``_work``.

``AsyncClient`` has the same calls, awaited, and ``async for`` over events.
Every refusal raises ``ApportionError`` (``.status``, ``.detail``); no master
reachable raises ``MasterUnavailable`` (status 0).
"""

from typing import TYPE_CHECKING, Any

from apportion.client._config import DEFAULT_MASTER, master_urls, resolve_token
from apportion.client._errors import ApportionError, MasterUnavailable
from apportion.client._resources import parse_resources, resources_of
from apportion.client._sse import SSEMessage, SSEParser
from apportion.client._types import Activity, Allocation, ConsumerRow, Event, Host, Output, PlanInForce

if TYPE_CHECKING:
    from apportion.client._async import AsyncClient, AsyncEventStream
    from apportion.client._sync import Client, EventStream

_LAZY = {"Client": "_sync", "EventStream": "_sync", "AsyncClient": "_async", "AsyncEventStream": "_async",
         "work": "_work", "serve": "_work", "Work": "_work"}


def __getattr__(name: str) -> Any:
    """The clients are imported on first use (with httpx), so the package itself is cheap to import."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"apportion.client.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'apportion.client' has no attribute {name!r}")

__all__ = [
    "Activity", "Allocation", "ApportionError", "AsyncClient", "AsyncEventStream", "Client", "ConsumerRow",
    "DEFAULT_MASTER", "Event", "EventStream", "Host", "MasterUnavailable", "Output", "PlanInForce", "SSEMessage",
    "SSEParser", "Work", "master_urls", "parse_resources", "resolve_token", "resources_of", "serve", "work",
]
