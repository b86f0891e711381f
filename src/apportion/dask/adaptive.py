"""Dask's adaptive scaling with the allocation as the resource manager.

Dask's ``Adaptive`` asks the scheduler how many workers the work in hand wants (its
*target*, kept between ``minimum`` and ``maximum``), and scales up or down towards it.
Here scaling up is asking the master for more (the allocation's ``max`` becomes the
target's slots), and scaling down is retiring the workers Dask chose, releasing their
slots and lowering ``max`` to match. ``minimum`` becomes the allocation's ``min``: that
many workers' slots come together or not at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from distributed.deploy.adaptive import Adaptive


class AllocationScaler(Protocol):
    """What ``ApportionAdaptive`` asks of its cluster (``ApportionCluster`` is one);
    named here so that this module need not import the cluster's."""

    async def _set_floor(self, minimum: int) -> None: ...

    async def _want(self, n: int) -> None: ...

    async def _retire_names(self, names: list[str], why: str) -> None: ...


class ApportionAdaptive(Adaptive):
    """``Adaptive`` for ``ApportionCluster``: its first round runs at once (not one
    interval later), and scaling goes through the allocation."""

    cluster: AllocationScaler

    def __init__(self, cluster: AllocationScaler, **kwargs: Any) -> None:
        super().__init__(cluster, **kwargs)

    def _start(self) -> None:
        super()._start()
        if self.state == "running":
            self.loop.add_callback(self._first_round)

    async def _first_round(self) -> None:
        await self.cluster._set_floor(int(self.minimum))
        await self.adapt()

    async def scale_up(self, n: int) -> None:
        await self.cluster._want(int(n))

    async def scale_down(self, workers: Iterable[str]) -> None:
        await self.cluster._retire_names(list(workers), why="adaptive")
