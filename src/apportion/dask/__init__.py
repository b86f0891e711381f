"""Dask on apportion: ``ApportionCluster`` runs Dask workers as activities on granted slots.

```python
from distributed import Client
from apportion.dask import ApportionCluster

with ApportionCluster(consumer="/Apps/dask", group="Workers") as cluster, Client(cluster) as client:
    cluster.adapt(minimum=0, maximum=16)       # Dask's adaptive target drives the allocation's max
    print(client.submit(sum, range(10)).result())
```

The package itself imports nothing of Dask: ``python -m apportion.dask.worker`` (the
worker an activity runs) stays lean, and ``ApportionCluster`` is imported on first use.
Needs ``pip install 'apportion[dask]'``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apportion.dask.adaptive import ApportionAdaptive
    from apportion.dask.cluster import ApportionCluster

_LAZY = {"ApportionCluster": "cluster", "ApportionAdaptive": "adaptive"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        try:
            module = importlib.import_module(f"apportion.dask.{_LAZY[name]}")
        except ImportError as e:
            if (e.name or "").split(".")[0] in ("dask", "distributed"):
                raise ImportError(f"apportion.dask needs Dask: pip install 'apportion[dask]' ({e})") from e
            raise
        return getattr(module, name)
    raise AttributeError(f"module 'apportion.dask' has no attribute {name!r}")


__all__ = ["ApportionAdaptive", "ApportionCluster"]
