"""The types both share divisions work on: the consumer tree planned in one group
(``ShareTree``) and the exact rationals (``Fraction``, gmpy2's ``mpq``).

Kept apart from ``shares`` (exact division) and ``fastshares`` (the same division
over numpy arrays) so that each of those imports this module and neither imports
the other's types back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gmpy2 import mpq as Fraction  # exact rationals, fast

INF = float("inf")


class ShareTree:
    """The part of the consumer tree planned in one group, as the share maths needs it.

    ``children[path]`` lists children in plan order; ``ratio``, ``priority`` (smaller
    is better, None last) and ``index`` (plan order) come from the plan.
    """

    __slots__ = ("children", "ratio", "band", "index", "parent", "_planned", "_bands", "fast", "_part", "zero",
                 "_flat", "_band_info", "_scaled")

    def __init__(
        self,
        children: Mapping[str, Sequence[str]],
        ratio: Mapping[str, int],
        priority: Mapping[str, int | None],
        index: Mapping[str, int],
    ) -> None:
        self.children = children
        self.ratio = ratio
        self.band = {p: (INF if v is None else v) for p, v in priority.items()}
        self.index = index
        self.parent: dict[str, str] = {k: p for p, kids in children.items() for k in kids}
        self._planned: dict[tuple[str, int], dict[str, Fraction]] = {}
        self._bands: dict[str, list[list[str]]] = {}
        self.fast: dict[str, object] = {}  # top -> the arrays of fastshares, made on first use
        self._part: dict[str, dict[str, bool]] = {}  # top -> leaf -> takes part in its divisions
        self.zero = any(r <= 0 for r in ratio.values())  # some node has ratio 0: not every leaf takes part
        self._flat: dict[str, bool] = {}
        self._band_info: dict[str, tuple[dict[str, int], list[int]]] = {}
        self._scaled: dict[tuple[str, int], dict[str, int]] = {}

    def flat(self, node: str) -> bool:
        """Whether every child of ``node`` is a leaf (a division below it is one level)."""
        got = self._flat.get(node)
        if got is None:
            got = self._flat[node] = all(not self.children.get(c) for c in self.children.get(node, ()))
        return got

    def bands(self, node: str) -> list[list[str]]:
        """Children with a positive ratio, grouped by priority, best band first."""
        got = self._bands.get(node)
        if got is None:
            by_band: dict[float, list[str]] = {}
            for child in self.children.get(node, ()):
                if self.ratio[child] > 0:
                    by_band.setdefault(self.band[child], []).append(child)
            got = self._bands[node] = [by_band[k] for k in sorted(by_band)]
        return got

    def band_info(self, node: str) -> tuple[dict[str, int], list[int]]:
        """``bands(node)`` the other way round: each child's band number, and each
        band's weight (the sum of its ratios)."""
        got = self._band_info.get(node)
        if got is None:
            bands = self.bands(node)
            got = self._band_info[node] = ({c: b for b, band in enumerate(bands) for c in band},
                                           [sum(self.ratio[c] for c in band) for band in bands])
        return got

    def planned_scaled(self, node: str, size: int) -> dict[str, int]:
        """The first band's children below ``node`` -> ``size`` times its ratio: the
        planned share of each out of ``size``, times the band's weight (a whole number)."""
        key = (node, size)
        got = self._scaled.get(key)
        if got is None:
            bands = self.bands(node)
            got = {c: size * self.ratio[c] for c in bands[0]} if bands else {}
            if len(self._scaled) > 64:
                self._scaled.clear()  # sizes change with hosts: keep only recent ones
            self._scaled[key] = got
        return got

    def takes_part(self, top: str, leaf: str) -> bool:
        """Whether ``leaf`` takes part in divisions below ``top``: no ratio-0 node on
        the way up (what ``support`` keeps); worked out once per top and leaf."""
        known = self._part.setdefault(top, {})
        got = known.get(leaf)
        if got is None:
            node, got = leaf, True
            while node != top:
                if self.ratio[node] <= 0:
                    got = False
                    break
                node = self.parent[node]
            known[leaf] = got
        return got

    def support(self, top: str, leaves: Iterable[str]) -> list[str]:
        """``leaves`` that take part in a division below ``top`` (no ratio-0 node on
        the way up) and every node between them and ``top``, children before their
        parents: the only nodes whose sums a division needs, however large the subtree."""
        parent, ratio = self.parent, self.ratio
        seen: set[str] = set()
        for leaf in leaves:
            path = []
            node = leaf
            while node != top and node not in seen:  # above a seen node, all is known
                if ratio[node] <= 0:
                    break
                path.append(node)
                node = parent[node]
            else:
                seen.update(path)
        seen.add(top)
        # plan order puts a parent before its children, so its reverse puts every
        # child before its parent, and ``top`` (first in plan order of them all) last
        return sorted(seen, key=self.index.__getitem__, reverse=True)
