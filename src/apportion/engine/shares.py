"""Share arithmetic: how a pool of slots is divided over a consumer subtree.

Everything is exact (rationals: gmpy2's ``mpq``, a C implementation some five
times faster than ``fractions.Fraction``) until the last step, where a pool's shares are
rounded to whole slots by largest remainder, ties to the consumer earlier in the
plan (apportion's reading, docs/policies.md section 16). One recursive water-fill serves both enforcement
modes: parent enforcement is the water-fill itself; leaf enforcement first gives
each leaf its static planned share, then water-fills what is left over the
branches that still have unmet demand (EGO's share ratio enforcement documentation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from apportion.engine import fastshares
from apportion.engine.sharetree import Fraction, ShareTree

def _weighted_fill(amount: Fraction, members: list[str], weight: Mapping[str, int],
                   cap: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """Split ``amount`` by weight, no member above its cap (classic water-filling).

    Members whose cap lies under the water level (what is left per unit of weight)
    are filled to their cap, which can only raise the level for the rest; repeated
    until nobody is under it, the rest share what is left by weight. Usually one
    pass: it finds the same level as sorting by cap/weight, without the divisions."""
    if len(members) == 1:
        m = members[0]
        c = cap[m]
        return {m: Fraction(c) if c <= amount else amount}
    out: dict[str, Fraction] = {}
    live = members
    total_w = sum(weight[m] for m in live)
    left = amount
    while True:
        full = [m for m in live if cap[m] * total_w <= left * weight[m]]  # cap <= level * weight
        if not full:
            break
        for m in full:
            c = cap[m]
            out[m] = Fraction(c)
            left -= c
            total_w -= weight[m]
        live = [m for m in live if m not in out]
        if not live:
            return out
    for m in live:
        out[m] = left * weight[m] / total_w
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
    got = _planned_memo(tree, top, amount)
    zero = Fraction(0)
    return {leaf: got.get(leaf, zero) for leaf in leaves}


def _planned_memo(tree: ShareTree, top: str, amount: int) -> dict[str, Fraction]:
    got = tree._planned.get((top, amount))
    if got is None:
        got = tree._planned[(top, amount)] = _planned(tree, top, amount)
    return got


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
                 cap: Callable[[str], float | None] | None = None) -> dict[str, int]:
    """Each node's need: the sum of its children's, no more than its own cap. A
    subtree below a ratio-0 node takes nothing from this pool: its needs are 0.
    Nodes absent from the result need nothing (only the support is visited); the
    result lists children before their parents, ``top`` last. Needs are whole slots."""
    need: dict[str, int] = {}
    acc: dict[str, int] = {}
    binding = False
    parent, children = tree.parent, tree.children
    for node in tree.support(top, [leaf for leaf, n in leaf_need.items() if n > 0]):
        n = acc.get(node, 0) if children.get(node) else leaf_need.get(node, 0)
        if cap is not None and node != top and n > 0:
            c = cap(node)
            if c is not None and c < n:
                n = max(0, int(c))
                binding = True
        need[node] = n
        if node != top:
            p = parent[node]
            acc[p] = acc.get(p, 0) + n
    if binding:
        need["\0binding"] = 1  # a cap changed something below top
    return need


def round_shares(exact: Mapping[str, Fraction], index: Mapping[str, int]) -> dict[str, int]:
    """Largest remainder: floors first, then the spare units to the largest
    fractional parts, ties to the consumer earlier in the plan. Shares are never
    negative, so ``int`` is the floor."""
    total = int(sum(exact.values(), Fraction(0)))
    out = {k: int(v) for k, v in exact.items()}  # plain ints: these leave the engine
    spare = total - sum(out.values())
    if spare > 0:
        # floor - value is minus the fractional part: the smallest first
        order = sorted((out[k] - v, index[k], k) for k, v in exact.items())
        for _, _, k in order[:spare]:
            out[k] += 1
    return out


def divide_pool(tree: ShareTree, top: str, size: int, leaf_need: Mapping[str, int],
                parent_mode: bool, dynamic: bool,
                cap: Callable[[str], float | None] | None = None,
                *, fast: bool = True) -> tuple[dict[str, int], dict[str, Fraction]]:
    """Divide one pool of ``size`` slots among the leaves below ``top``.

    Returns (whole slots per leaf, share per leaf). ``dynamic`` is
    adjust_share_to_workload: off, each leaf deserves its static planned share
    (capped by its need) and nothing more. A large dynamic division without caps
    is done in floats where that provably rounds the same (``fastshares``; its
    shares are then floats); ``fast=False`` always uses the rationals."""
    if dynamic and cap is None and size > 0 and sum(leaf_need.values()) <= size:
        # the pool covers every need: each leaf that takes part gets its need (what the
        # division below comes to, without walking the tree: a cycle in an idle cluster
        # then costs what its changes do, not what the tree does)
        if tree.zero:
            part = tree.takes_part
            exact = {leaf: n for leaf, n in leaf_need.items() if n > 0 and part(top, leaf)}
        else:
            exact = {leaf: n for leaf, n in leaf_need.items() if n > 0}
        return dict(exact), exact
    if size <= 0:
        return {}, {}
    if fast and cap is None and tree.flat(top):
        return _flat_division(tree, top, size, leaf_need, parent_mode, dynamic)
    leaves = [leaf for leaf, n in leaf_need.items() if n > 0]
    if not leaves:
        return {}, {}
    if fast and dynamic and cap is None and len(leaves) >= fastshares.MIN_LEAVES:
        got = fastshares.divide(tree, top, size, leaf_need, parent_mode,
                                _planned_memo(tree, top, size) if not parent_mode else {})
        if got is not None:
            return got  # the same whole slots as below, checked (fastshares)
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
        plan = _planned_memo(tree, top, size)
        exact = {}
        for leaf in leaves:
            n = need.get(leaf)
            if n:
                p = plan.get(leaf)
                if p:
                    exact[leaf] = p if p < n else Fraction(n)
        if cap is not None:
            _within_caps(tree, top, exact, need)
        if dynamic:
            left = amount - sum(exact.values(), Fraction(0))
            if left > 0:
                for leaf, v in waterfill(tree, top, left, _residual(tree, top, need, exact)).items():
                    exact[leaf] = exact[leaf] + v if leaf in exact else v
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


def _residual(tree: ShareTree, top: str, need: Mapping[str, int],
              taken: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """What each node still needs once its leaves took ``taken``: a leaf its need
    less what it took; a parent the sum of its children's, but no more than its own
    need less what its leaves took. Only nodes with a need take part (``need``
    holds exactly those), children before parents."""
    residual: dict[str, Fraction] = {}
    res: dict[str, Fraction] = {}
    took: dict[str, Fraction] = {}
    parent, children = tree.parent, tree.children
    for node, n in need.items():  # children first: the order subtree_need made them in
        if not children.get(node):
            t = taken.get(node, 0)
            r = n - t
        else:
            r, t = res.get(node, 0), took.get(node, 0)
            if node != top:
                rest = n - t
                if rest < r:
                    r = rest if rest > 0 else 0
        residual[node] = r
        if node != top:
            p = parent[node]
            res[p] = res[p] + r if p in res else r
            took[p] = took[p] + t if p in took else t
    return residual


class ExactShares(Mapping[str, Fraction]):
    """Exact shares as numerators over one denominator, made a ``Fraction`` only when
    read: a division's exact shares are kept to compare the next division's needs
    with, and a cycle reads those of a few leaves, not all."""

    __slots__ = ("num", "den")

    def __init__(self, num: dict[str, int], den: int) -> None:
        self.num = num
        self.den = den

    def __getitem__(self, leaf: str) -> Fraction:
        return Fraction(self.num[leaf], self.den)

    def __iter__(self) -> Iterator[str]:
        return iter(self.num)

    def __len__(self) -> int:
        return len(self.num)


def _flat_division(tree: ShareTree, top: str, size: int, leaf_need: Mapping[str, int], parent_mode: bool,
                   dynamic: bool) -> tuple[dict[str, int], dict[str, Fraction]]:
    """``divide_pool`` below a node whose children are all leaves, without caps: the
    same steps (planned share as far as needed in leaf mode, then the water-fill of
    what is left band by band, then largest remainder) in whole numbers over one
    common denominator instead of rationals, leaf by leaf. Exact: every quantity is
    an integer multiple of 1 / (W * w), W the planned band's weight and w the weight
    still filling when the water-fill stops (at most one band stops part-way: the
    bands after it get nothing)."""
    ratio, index = tree.ratio, tree.index
    band_of, weights = tree.band_info(top)
    planned_band = bool(weights) and not (parent_mode and dynamic)
    # scaled by the planned band's weight: a planned share size * ratio / weight is whole
    scale = weights[0] if planned_band else 1
    # one walk over the leaves in need: each band's in band order (the leaves come in
    # plan order, a pool's leaves below it, as the bands hold them), and the planned
    # band's planned shares as far as needed
    need: dict[str, int] = {}
    in_band: list[list[str]] = [[] for _ in weights]
    taken: dict[str, int] = {}  # what each leaf has so far, times ``scale``
    total_need = 0
    if planned_band:
        # the planned band's leaves, by their planned share (times ``scale``): one look
        # each for the common case
        planned_at = tree.planned_scaled(top, size)
        first = in_band[0]
        for leaf, n in leaf_need.items():
            if n > 0:
                p = planned_at.get(leaf)
                if p is not None:
                    need[leaf] = n
                    total_need += n
                    first.append(leaf)
                    whole = n * scale
                    taken[leaf] = p if p < whole else whole
                elif ratio[leaf] > 0:
                    need[leaf] = n
                    total_need += n
                    b = band_of.get(leaf)
                    if b is not None:
                        in_band[b].append(leaf)
    else:
        for leaf, n in leaf_need.items():
            if n > 0 and ratio[leaf] > 0:
                need[leaf] = n
                total_need += n
                b = band_of.get(leaf)
                if b is not None:
                    in_band[b].append(leaf)
    if not need or (dynamic and total_need <= size):
        return dict(need), dict(need)
    live: list[str] = []
    live_w = 1
    left = 0
    if dynamic:
        left = size * scale - sum(taken.values())
        for band in in_band:
            if left <= 0:
                break
            cap: dict[str, int] = {}
            members: list[str] = []
            total_w = 0
            for c in band:
                x = need[c] * scale - taken.get(c, 0)
                if x > 0:
                    cap[c] = x
                    members.append(c)
                    total_w += ratio[c]
            if not members:
                continue
            while True:  # _weighted_fill: those whose cap lies under the level are filled
                full = [m for m in members if cap[m] * total_w <= left * ratio[m]]
                if not full:
                    break
                for m in full:
                    taken[m] = taken.get(m, 0) + cap[m]
                    left -= cap[m]
                    total_w -= ratio[m]
                if len(full) == len(members):
                    members = []
                    break
                done = set(full)
                members = [m for m in members if m not in done]
            if members:  # the rest share what is left by weight: nothing for later bands
                live, live_w = members, total_w
                break
    # every share as a numerator over one denominator
    den = scale * live_w
    if live:
        num = {leaf: t * live_w for leaf, t in taken.items()}
        for m in live:
            num[m] = num.get(m, 0) + left * ratio[m]
    else:
        num = taken  # live_w is 1
    kept: dict[str, int] = {}
    out: dict[str, int] = {}
    parts: list[tuple[int, int, str]] = []  # the leaves with a fraction of a slot over
    over = 0
    for leaf, x in num.items():
        if x > 0:
            kept[leaf] = x
            q, r = divmod(x, den)
            out[leaf] = q
            if r:
                over += r
                parts.append((-r, index[leaf], leaf))
    # the slots the fractions add up to go to the largest fractions, ties to the
    # earlier leaf in the plan (fewer than there are fractions, so none to a whole one)
    spare = over // den
    if spare > 0:
        parts.sort()
        for _, _, leaf in parts[:spare]:
            out[leaf] += 1
    return out, ExactShares(kept, den)
