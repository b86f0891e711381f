"""Share arithmetic: how a pool of slots is divided over a consumer subtree.

Everything is exact (rationals: gmpy2's ``mpq``, a C implementation some five
times faster than ``fractions.Fraction``) until the last step, where a pool's shares are
rounded to whole slots by largest remainder, ties to the consumer earlier in the
plan (POLICY-NOTES section 7). One recursive water-fill serves both enforcement
modes: parent enforcement is the water-fill itself; leaf enforcement first gives
each leaf its static planned share, then water-fills what is left over the
branches that still have unmet demand (seed 004).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from math import floor

from gmpy2 import mpq as Fraction  # exact rationals, fast

INF = float("inf")


class ShareTree:
    """The part of the consumer tree planned in one group, as the share maths needs it.

    ``children[path]`` lists children in plan order; ``ratio``, ``priority`` (smaller
    is better, None last) and ``index`` (plan order) come from the plan.
    """

    __slots__ = ("children", "ratio", "band", "index", "parent", "depth", "_planned", "_bands")

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
        self.depth: dict[str, int] = {}
        for node in index:  # plan order: parents before children
            p = self.parent.get(node)
            self.depth[node] = 0 if p is None else self.depth.get(p, 0) + 1
        self._planned: dict[tuple[str, int], dict[str, Fraction]] = {}
        self._bands: dict[str, list[list[str]]] = {}

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

    def support(self, top: str, leaves: Iterable[str]) -> list[str]:
        """``leaves`` that take part in a division below ``top`` (no ratio-0 node on
        the way up) and every node between them and ``top``, deepest first: the
        only nodes whose sums a division needs, however large the subtree."""
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
        depth = self.depth
        return sorted(seen, key=lambda n: -depth.get(n, 0))


def _weighted_fill(amount: Fraction, members: list[str], weight: Mapping[str, int],
                   cap: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """Split ``amount`` by weight, no member above its cap (classic water-filling)."""
    if len(members) == 1:
        m = members[0]
        c = cap[m]
        return {m: Fraction(c) if c <= amount else amount}
    out: dict[str, Fraction] = {}
    live = sorted(members, key=lambda m: cap[m] / weight[m])
    total_w = sum(weight[m] for m in live)
    left = amount
    for i, m in enumerate(live):
        c, w = cap[m], weight[m]
        if c * total_w <= left * w:  # c <= left * w / total_w, without the division
            out[m] = Fraction(c)
            left -= c
            total_w -= w
        else:
            for rest in live[i:]:
                out[rest] = left * weight[rest] / total_w
            return out
    return out


def waterfill(tree: ShareTree, top: str, amount: Fraction,
              need: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """Divide ``amount`` below ``top``: best priority band first, ratio within a band,
    nobody above its need. ``need`` must hold every node's need (a parent's need is
    what its subtree can still use). Returns what each leaf gets."""
    got: dict[str, Fraction] = {}
    children, bands, ratio, need_of = tree.children, tree.bands, tree.ratio, need.get
    stack = [(top, amount)]
    pop, push = stack.pop, stack.append
    while stack:
        node, amt = pop()
        if not children.get(node):
            if node != top or amt:
                got[node] = got[node] + amt if node in got else amt
            continue
        for band in bands(node):
            if amt <= 0:
                break
            hungry = [c for c in band if need_of(c, 0) > 0]
            if not hungry:
                continue
            for child, share in _weighted_fill(amt, hungry, ratio, need).items():
                if share:
                    push((child, share))
                    amt -= share
    return got


def planned(tree: ShareTree, top: str, amount: int, leaves: Sequence[str]) -> dict[str, Fraction]:
    """Static planned shares: ``amount`` split down the tree by ratio, ignoring demand.

    Only the best priority band among siblings is planned a share; worse bands get
    theirs when the better ones cannot use it (the water-fill of leftovers). It
    depends on the tree and the amount alone, so each (top, amount) is worked out once."""
    got = tree._planned.get((top, amount))
    if got is None:
        got = tree._planned[(top, amount)] = _planned(tree, top, amount)
    zero = Fraction(0)
    return {leaf: got.get(leaf, zero) for leaf in leaves}


def _planned(tree: ShareTree, top: str, amount: int) -> dict[str, Fraction]:
    got: dict[str, Fraction] = {}
    stack = [(top, Fraction(amount))]
    while stack:
        node, amt = stack.pop()
        kids = tree.children.get(node, ())
        if not kids:
            if node != top:
                got[node] = amt
            continue
        bands = tree.bands(node)
        if not bands:
            continue
        band = bands[0]
        total = sum(tree.ratio[c] for c in band)
        for child in band:
            stack.append((child, amt * tree.ratio[child] / total))
    return got


def subtree_need(tree: ShareTree, top: str, leaf_need: Mapping[str, int],
                 cap: Callable[[str], float | None] | None = None) -> dict[str, Fraction]:
    """Each node's need: the sum of its children's, no more than its own cap. A
    subtree below a ratio-0 node takes nothing from this pool: its needs are 0.
    Nodes absent from the result need nothing (only the support is visited); the
    result lists nodes deepest first, ``top`` last."""
    zero = Fraction(0)
    need: dict[str, Fraction] = {}
    acc: dict[str, Fraction] = {}
    binding = False
    parent = tree.parent
    for node in tree.support(top, [leaf for leaf, n in leaf_need.items() if n > 0]):
        n = acc.get(node, zero) if tree.children.get(node) else Fraction(leaf_need.get(node, 0))
        if cap is not None and node != top and n > 0:
            c = cap(node)
            if c is not None and c < n:
                n = Fraction(max(0, int(c)))
                binding = True
        need[node] = n
        if node != top:
            p = parent[node]
            acc[p] = acc.get(p, zero) + n
    if binding:
        need["\0binding"] = Fraction(1)  # a cap changed something below top
    return need


def round_shares(exact: Mapping[str, Fraction], index: Mapping[str, int]) -> dict[str, int]:
    """Largest remainder: floors first, then the spare units to the largest
    fractional parts, ties to the consumer earlier in the plan."""
    total = int(floor(sum(exact.values(), Fraction(0))))
    out = {k: int(floor(v)) for k, v in exact.items()}  # plain ints: these leave the engine
    spare = total - sum(out.values())
    if spare > 0:
        order = sorted(exact, key=lambda k: (-(exact[k] - out[k]), index[k]))
        for k in order[:spare]:
            out[k] += 1
    return out


def divide_pool(tree: ShareTree, top: str, size: int, leaf_need: Mapping[str, int],
                parent_mode: bool, dynamic: bool,
                cap: Callable[[str], float | None] | None = None) -> tuple[dict[str, int], dict[str, Fraction]]:
    """Divide one pool of ``size`` slots among the leaves below ``top``.

    Returns (whole slots per leaf, exact share per leaf). ``dynamic`` is
    adjust_share_to_workload: off, each leaf deserves its static planned share
    (capped by its need) and nothing more."""
    leaves = [leaf for leaf, n in leaf_need.items() if n > 0]
    if size <= 0 or not leaves:
        return {}, {}
    need = subtree_need(tree, top, leaf_need, cap)
    total_need = need.get(top, Fraction(0))
    caps_bind = need.pop("\0binding", None) is not None
    if total_need <= size and dynamic and not caps_bind:
        exact = {leaf: need[leaf] for leaf in leaves if need.get(leaf, 0) > 0}
        return {k: int(v) for k, v in exact.items()}, exact
    amount = Fraction(size)
    if parent_mode and dynamic:
        exact = waterfill(tree, top, amount, need)
    else:
        plan = planned(tree, top, size, leaves)
        exact = {leaf: min(plan[leaf], need.get(leaf, Fraction(0))) for leaf in leaves}
        if cap is not None:
            _within_caps(tree, top, exact, need)
        if dynamic:
            left = amount - sum(exact.values(), Fraction(0))
            if left > 0:
                residual = {leaf: need.get(leaf, Fraction(0)) - exact[leaf] for leaf in leaves}
                _resum(tree, top, residual, need, exact)
                for leaf, v in waterfill(tree, top, left, residual).items():
                    exact[leaf] = exact.get(leaf, Fraction(0)) + v
    exact = {k: v for k, v in exact.items() if v > 0}
    return round_shares(exact, tree.index), exact


def _within_caps(tree: ShareTree, top: str, exact: dict[str, Fraction],
                 need: Mapping[str, Fraction]) -> Fraction:
    """Scale a subtree's shares down to its (capped) need, keeping their proportions:
    planned shares know nothing of a parent's max, the need does."""
    def visit(node: str) -> Fraction:
        kids = tree.children.get(node, ())
        if not kids:
            return exact.get(node, Fraction(0))
        total = Fraction(0)
        for k in kids:
            if tree.ratio[k] > 0:
                total += visit(k)
        limit = need.get(node, Fraction(0))
        if node != top and total > limit:
            factor = limit / total
            stack = [node]
            while stack:
                n = stack.pop()
                if n in exact:
                    exact[n] *= factor
                stack.extend(tree.children.get(n, ()))
            total = limit
        return total
    return visit(top)


def _resum(tree: ShareTree, top: str, residual: dict[str, Fraction],
           need: Mapping[str, Fraction], taken: Mapping[str, Fraction]) -> None:
    """Fill in parents' residual need: the sum of their children's, but no more
    than the parent's own need less what its leaves already took. Only nodes with
    a need take part (``need`` holds exactly those), deepest first."""
    zero = Fraction(0)
    res: dict[str, Fraction] = {}
    took: dict[str, Fraction] = {}
    parent, children = tree.parent, tree.children
    for node, n in need.items():  # deepest first: the order subtree_need made them in
        if not children.get(node):
            r, t = residual.get(node, zero), taken.get(node, zero)
        else:
            r, t = res.get(node, zero), took.get(node, zero)
            if node != top:
                r = min(r, max(zero, n - t))
            residual[node] = r
        if node != top:
            p = parent[node]
            res[p] = res[p] + r if p in res else r
            took[p] = took[p] + t if p in took else t
