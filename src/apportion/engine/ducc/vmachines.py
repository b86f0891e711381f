"""Machines by order: the accounting DUCC's How Much and What Of phases count on (DUCC's RM documentation).

Memory is counted in quanta; a machine's *order* is how many quanta it holds,
and an allocation (an nshare, a process) of order O takes O quanta on ONE
machine. Three tables, indexed by order, describe a nodepool's free space:

- ``machines[o]``: whole free machines of order o (nothing allocated on them);
- ``virtual[o]``: machines with something allocated whose free space is of
  order o (a "virtual machine", a proper part of a real one);
- ``shares[o]``: how many allocations of order o could still be made, counting
  that a larger free space can be split: one free order-5 machine offers one
  order-5 share, or one order-4, or one order-3, or two order-2, or five order-1.

The two machine tables never overlap, so ``machines[o] + virtual[o]`` is the
number of places an order-o allocation fits exactly. ``shares[1]`` is always
the total of free quanta.
"""

from __future__ import annotations

from collections.abc import Iterable


class OrderTables:
    __slots__ = ("machines", "virtual", "_shares")

    def __init__(self, max_order: int) -> None:
        if max_order < 1:
            raise ValueError("max_order must be at least 1")
        self.machines = [0] * (max_order + 1)
        self.virtual = [0] * (max_order + 1)
        self._shares: list[int] | None = None

    @classmethod
    def of(cls, machines: Iterable[tuple[int, int]], max_order: int | None = None) -> "OrderTables":
        """Tables for machines given as (order, free order) pairs."""
        ms = list(machines)
        top = max_order or max((o for o, _ in ms), default=1)
        t = cls(top)
        for order, free in ms:
            t.add_machine(order, free)
        return t

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OrderTables):
            return NotImplemented
        return self.machines == other.machines and self.virtual == other.virtual

    __hash__ = None  # mutable

    @property
    def max_order(self) -> int:
        return len(self.machines) - 1

    def add_machine(self, order: int, free: int) -> None:
        """A machine of ``order`` quanta with ``free`` of them unallocated joins."""
        self._check(order, free)
        if free == order:
            self.machines[order] += 1
        elif free > 0:
            self.virtual[free] += 1
        self._shares = None

    def remove_machine(self, order: int, free: int) -> None:
        self._check(order, free)
        if free == order:
            self._take(self.machines, order)
        elif free > 0:
            self._take(self.virtual, free)
        self._shares = None

    def allocate(self, order: int, free: int, size: int) -> int:
        """Take an allocation of ``size`` quanta from a machine of ``order`` with
        ``free`` quanta free (DUCC's RM documentation: rearrangeVirtual); returns the free order left."""
        self._check(order, free)
        if not 0 < size <= free:
            raise ValueError(f"an order-{size} allocation does not fit in {free} free quanta")
        if free == order:
            self._take(self.machines, order)
        else:
            self._take(self.virtual, free)
        left = free - size
        if left > 0:
            self.virtual[left] += 1
        self._shares = None
        return left

    def release(self, order: int, free: int, size: int) -> int:
        """Give ``size`` quanta back to a machine; the inverse of ``allocate``."""
        self._check(order, free)
        after = free + size
        if after > order:
            raise ValueError(f"releasing {size} quanta would leave {after} free on an order-{order} machine")
        if free > 0:
            self._take(self.virtual, free)
        if after == order:
            self.machines[order] += 1
        else:
            self.virtual[after] += 1
        self._shares = None
        return after

    @property
    def shares(self) -> list[int]:
        """Allocations of each order that could still be made (DUCC's RM documentation: nSharesByOrder)."""
        if self._shares is None:
            base = [m + v for m, v in zip(self.machines, self.virtual)]
            out = list(base)
            # a free space of order p yields p // o allocations of order o
            for o in range(1, len(out)):
                for p in range(o + 1, len(out)):
                    if base[p]:
                        out[o] += (p // o) * base[p]
            self._shares = out
        return self._shares

    def _check(self, order: int, free: int) -> None:
        if not 0 < order <= self.max_order:
            raise ValueError(f"order {order} is outside 1..{self.max_order}")
        if not 0 <= free <= order:
            raise ValueError(f"free order {free} is outside 0..{order}")

    @staticmethod
    def _take(table: list[int], i: int) -> None:
        if table[i] <= 0:
            raise ValueError(f"no machine of free order {i} to take from")
        table[i] -= 1
