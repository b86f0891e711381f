"""A vectorised water-fill for large pools, used only where it rounds exactly as the rationals do.

``shares.divide_pool`` works in exact rationals, which costs a few microseconds per
leaf in Python; a public pool over hundreds of needy leaves is divided every cycle
of a busy cluster. This module does the same division in floating point over numpy
arrays (one array per level of the tree, one segment per parent) and then checks
that the floats cannot round differently from the exact shares:

- every decision the water-fill takes (a member filled to its cap or not; a leaf
  saturated by its planned share or not) has a margin well above the float error;
- a leaf whose share is a whole number is one by construction (filled to its need,
  or planned a whole share it keeps), never by a float that happens to land near one;
  every other share stays clear of whole numbers;
- at the cut of the largest-remainder rounding, fractional parts are clearly apart,
  or tie because the leaves are twins (same parent, weight, planned share and fate),
  whose exact shares are then equal too, so plan order breaks the tie as it must.

If any check fails, ``divide`` returns None and the caller divides exactly. The
error bound: magnitudes are at most the pool size S; a float share passes through
a few dozen roundings (sums over at most a few thousand terms, numpy's pairwise),
so it is off by far less than 1e-10 * S, the tolerance used.
"""

from __future__ import annotations

from collections.abc import Mapping
import numpy as np

from apportion.engine.sharetree import Fraction, ShareTree

# ``x.any()`` goes through numpy's reduction machinery, about 1 us a call; counting
# the set flags answers the same question in a quarter of that (dozens of calls a division)
_any = np.count_nonzero

MIN_LEAVES = 48  # below this, numpy's per-call cost outweighs the exact division
TOL = 1e-10  # relative to the pool size


class _Shape:
    """The part of the tree below ``top`` that can take part in its divisions (no
    ratio-0 node on the way), as arrays: node 0 is ``top``, then level by level,
    each level's nodes grouped by parent."""

    __slots__ = ("names", "names_arr", "pos", "parent", "weight", "band", "index", "levels", "level_nodes",
                 "band_parents", "planned")

    def __init__(self, tree: ShareTree, top: str) -> None:
        names = [top]
        parent = [-1]
        rank = [0]
        levels: list[list[list[int]]] = []  # level -> band rank -> node positions
        frontier = [0]
        while frontier:
            nxt: list[int] = []
            bands_here: list[list[int]] = []
            for p in frontier:
                for b, band in enumerate(tree.bands(names[p])):
                    while len(bands_here) <= b:
                        bands_here.append([])
                    for child in band:
                        bands_here[b].append(len(names))
                        nxt.append(len(names))
                        names.append(child)
                        parent.append(p)
                        rank.append(b)
            if nxt:
                levels.append(bands_here)
            frontier = nxt
        self.names = names
        # every node below top, those below a ratio-0 node at -1 (they take no part)
        self.pos: dict[str, int] = {}
        stack = [top]
        while stack:
            node = stack.pop()
            self.pos[node] = -1
            stack.extend(tree.children.get(node, ()))
        self.pos.update((n, i) for i, n in enumerate(names))
        self.parent = np.array(parent, dtype=np.intp)
        self.weight = np.array([tree.ratio[n] if i else 1 for i, n in enumerate(names)], dtype=np.float64)
        self.band = np.array(rank, dtype=np.intp)
        self.index = np.array([tree.index[n] for n in names], dtype=np.int64)
        self.levels = [[np.array(b, dtype=np.intp) for b in bands] for bands in levels]
        self.level_nodes = [(np.concatenate(bands), self.parent[np.concatenate(bands)]) for bands in self.levels]
        self.band_parents = [[self.parent[b] for b in bands] for bands in self.levels]
        self.names_arr = np.array(names, dtype=object)
        self.planned: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def planned_floats(self, size: int, exact: Mapping[str, Fraction]) -> tuple[np.ndarray, np.ndarray]:
        """Each node's planned share of a pool of ``size`` as a float, and whether the
        rational is a whole number (none planned counts as 0, a whole one)."""
        got = self.planned.get(size)
        if got is None:
            floats = np.zeros(len(self.names))
            whole = np.ones(len(self.names), dtype=bool)
            for leaf, p in exact.items():
                i = self.pos.get(leaf)
                if i is not None:
                    floats[i] = float(p)
                    whole[i] = p.denominator == 1
            got = self.planned[size] = (floats, whole)
        return got


def _shape(tree: ShareTree, top: str) -> _Shape:
    """Worked out once per tree and pool owner (a plan's trees never change)."""
    got = tree.fast.get(top)
    if got is None:
        got = tree.fast[top] = _Shape(tree, top)
    return got


def divide(tree: ShareTree, top: str, size: int, leaf_need: Mapping[str, int], parent_mode: bool,
           planned: Mapping[str, Fraction]) -> tuple[dict[str, int], Shares] | None:
    """``divide_pool`` for a dynamic division without parent caps, when the pool is
    oversubscribed: (whole slots per leaf, share per leaf), or None where the floats
    cannot be trusted to round as the rationals would (or there is nothing to gain).
    ``planned`` is the exact static planned share of each leaf for this pool size."""
    sh = _shape(tree, top)
    idx = np.fromiter(map(sh.pos.__getitem__, leaf_need), dtype=np.intp, count=len(leaf_need))
    need = np.fromiter(leaf_need.values(), dtype=np.float64, count=len(leaf_need))
    keep = (idx >= 0) & (need > 0)  # leaves below a ratio-0 node take no part
    if _any(keep) < len(keep):
        idx, need = idx[keep], need[keep]
    if len(idx) < MIN_LEAVES or float(need.sum()) <= size:  # sums of whole numbers: exact
        return None
    tol = TOL * size
    count = len(sh.names)
    res = np.zeros(count)
    if parent_mode:
        base = np.zeros(len(idx))
        left0 = float(size)
    else:
        # leaf enforcement: the planned share first, as far as needed
        floats, whole_plan = sh.planned_floats(size, planned)
        plan = floats[idx]
        # a whole planned share compares exactly with the whole need; any other this
        # close to it could fall either side
        if _any((np.abs(plan - need) <= tol) & ~whole_plan[idx]):
            return None
        base = np.minimum(plan, need)
        left0 = size - float(base.sum())
        if left0 <= tol:
            return None  # nothing, or next to nothing, left over: let the rationals say which
    res[idx] = need - base
    # what each subtree still needs: children's sums, deepest level first
    parent = sh.parent
    for nodes, parents in reversed(sh.level_nodes):
        res += np.bincount(parents, weights=res[nodes], minlength=count)
    give = np.zeros(count)
    full = np.zeros(count, dtype=bool)
    # each band's takers (members, their parents, what those had left, who stayed below
    # the water level; None: all), from which _sole works out, if ties need it, who
    # was handed everything its parent had
    takers: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]] = []
    any_full = False  # no node filled to its need yet: nobody sits under a full parent
    give[0] = left0
    weight = sh.weight
    for bands, band_parents in zip(sh.levels, sh.band_parents):
        left = give.copy()  # what each parent still has to hand out
        for members, parents in zip(bands, band_parents):
            m = members[(res[members] > 0) & (left[parents] > 0)]
            if not len(m):
                continue
            # a parent filled to its need hands each child exactly its own: no level to find
            if any_full:
                under_full = full[parent[m]]
                if _any(under_full):
                    f = m[under_full]
                    give[f] = res[f]
                    full[f] = True
                    left -= np.bincount(parent[f], weights=res[f], minlength=count)
                    m = m[~under_full]
                    if not len(m):
                        continue
            seg, w, cap = parent[m], weight[m], res[m]
            avail = left[seg]
            # first, as most often, every member clearly below the water level: one pass
            tw = np.bincount(seg, weights=w, minlength=count)[seg]
            margin = cap - avail / tw * w
            if _any(margin <= tol):  # someone at or near its cap: the general loop decides
                if _any(np.abs(margin) <= tol):
                    return None
                any_full = True
            else:
                give[m] = avail * w / tw
                left[seg] = 0.0  # a parent with a member below its cap hands out all it has
                takers.append((m, seg, avail, None))
                continue
            live = np.ones(len(m), dtype=bool)
            while True:
                tw = np.bincount(seg[live], weights=w[live], minlength=count)
                level = left[seg] / np.where(live, tw[seg], 1.0)
                margin = cap - level * w
                if _any(live & (np.abs(margin) <= tol)):
                    return None
                done = live & (margin < 0)
                if not _any(done):
                    break
                give[m[done]] = cap[done]
                full[m[done]] = True
                left -= np.bincount(seg[done], weights=cap[done], minlength=count)
                live &= ~done
                if not _any(live):
                    break
            if _any(live):
                s = seg[live]
                tw = np.bincount(s, weights=w[live], minlength=count)
                give[m[live]] = left[s] * w[live] / tw[s]
                left[s] = 0.0
                takers.append((m, seg, avail, live))
    got = give[idx]
    value = base + got
    whole = full[idx] | (need <= base)  # filled to the need: exactly the need
    value[whole] = need[whole]
    if not parent_mode:
        # planned share alone, nothing of the leftover: exactly the planned share,
        # a whole number only if the rational is one
        alone = ~whole & (got == 0) & whole_plan[idx]
        whole |= alone
        value[alone] = np.round(value[alone])
    floor = np.floor(value)
    frac = np.where(whole, 0.0, value - floor)
    if _any(~whole & ((frac <= tol) | (frac >= 1 - tol))):
        return None
    spare = size - int(floor.sum())
    out = floor.astype(np.int64)
    if spare < 0 or spare > int((~whole).sum()):
        return None
    if spare:
        order = np.lexsort((sh.index[idx], -frac))
        if spare < len(order):
            a, b = frac[order[spare - 1]], frac[order[spare]]
            if a - b <= 2 * tol and not _twins(sh, idx, frac, whole, got, order, spare, tol, full,
                                               _sole(takers, give, count), planned):
                chosen = _cut_exactly(sh, tree, idx, need, floor, frac, got, order, spare, tol, full,
                                      planned, size, parent_mode, res, need <= base)
                if chosen is None:
                    return None
                order = chosen
                spare = len(chosen)
        out[order[:spare]] += 1
    given = value > 0
    at = idx[given]
    exact = np.zeros(count)
    exact[at] = value[given]
    return dict(zip(sh.names_arr[at].tolist(), out[given].tolist())), Shares(sh.pos, exact)


class Shares:
    """The float share of each leaf, looked up by name (only ``divide``'s caller
    reads a few of them: no dict of every leaf is built)."""

    __slots__ = ("_pos", "_values")

    def __init__(self, pos: dict[str, int], values: np.ndarray) -> None:
        self._pos = pos
        self._values = values

    def get(self, leaf: str, default: float = 0) -> float:
        i = self._pos.get(leaf, -1)
        v = float(self._values[i]) if i >= 0 else 0.0
        return v if v > 0 else default

    def __getitem__(self, leaf: str) -> float:
        v = self.get(leaf, 0.0)
        if not v:
            raise KeyError(leaf)
        return v


def _twins(sh: _Shape, idx: np.ndarray, frac: np.ndarray, whole: np.ndarray, got: np.ndarray,
           order: np.ndarray, spare: int, tol: float, full: np.ndarray, sole: np.ndarray,
           planned: Mapping[str, Fraction]) -> bool:
    """The leaves whose fractional parts lie within the float error of the cut: only
    if their exact shares are provably equal too does plan order break the tie as the
    rationals would. Equal means: the same planned share (the rationals compared),
    and the same part of the leftover: none, or amounts that the fill makes equal by
    construction (``_same_amount``)."""
    a = frac[order[spare - 1]]
    near = np.flatnonzero(np.abs(frac - a) <= 2 * tol)
    k0 = near[0]
    if whole[k0]:
        return False
    j = int(idx[k0])
    zero = 0
    for k in near[1:]:
        if frac[k] != frac[k0] or whole[k] or (got[k] > 0) != (got[k0] > 0):
            return False
        i = int(idx[k])
        if planned.get(sh.names[i], zero) != planned.get(sh.names[j], zero):
            return False
        if got[k] > 0 and not _same_amount(sh, i, j, full, sole):
            return False
    return True


def _sole(takers: list, give: np.ndarray, count: int) -> np.ndarray:
    """Nodes handed all their parent had: the only taker in their parent's band, and
    no earlier band of that parent took anything."""
    sole = np.zeros(count, dtype=bool)
    for m, seg, avail, live in takers:
        ok = (np.bincount(seg, minlength=count)[seg] == 1) & (avail == give[seg])
        if live is not None:
            ok &= live
        sole[m[ok]] = True
    return sole


def _same_amount(sh: _Shape, i: int, j: int, full: np.ndarray, sole: np.ndarray) -> bool:
    """Whether nodes ``i`` and ``j`` were handed exactly equal parts of the leftover:
    below one parent, in one band, of one weight and both below their caps (one water
    level), or each the only taker of its parent, whose parents were handed equal parts."""
    parent = sh.parent
    while i != j:
        if i == 0 or j == 0:
            return False
        if parent[i] == parent[j]:
            return (sh.band[i] == sh.band[j] and sh.weight[i] == sh.weight[j]
                    and not full[i] and not full[j])
        if not (sole[i] and sole[j]):
            return False
        i, j = int(parent[i]), int(parent[j])
    return True


def _cut_exactly(sh: _Shape, tree: ShareTree, idx: np.ndarray, need: np.ndarray, floor: np.ndarray,
                 frac: np.ndarray, got: np.ndarray, order: np.ndarray, spare: int, tol: float,
                 full: np.ndarray, planned: Mapping[str, Fraction], size: int,
                 parent_mode: bool, res_f: np.ndarray, capped: np.ndarray) -> np.ndarray | None:
    """The leaves that get a spare slot, when the fractional parts at the cut are too
    close for the floats: the shares of the few leaves there are worked out in exact
    rationals along their paths, following the fill's decisions (which the margins
    proved), and the cut is made among them by the exact fractional parts. None if
    the close group is not clearly apart from the rest."""
    Q = Fraction
    a = frac[order[spare - 1]]
    dist = np.abs(frac - a)
    near = np.flatnonzero(dist <= 2 * tol)
    if _any((dist > 2 * tol) & (dist <= 6 * tol)):
        return None  # no clear gap around the close group
    picked = np.zeros(len(idx), dtype=bool)
    picked[order[:spare]] = True
    take = int(picked[near].sum())
    names, parent = sh.names, sh.parent
    zero = Q(0)
    need_at = dict(zip(idx.tolist(), need.tolist()))
    # the leftover, exactly: the pool less every leaf's planned part (its need where
    # that is smaller, which the margins proved)
    based = Q(int(need[capped].sum())) + sum(
        (planned.get(n, zero) for n in sh.names_arr[idx[~capped]].tolist()), zero) if not parent_mode else zero
    memo: dict[int, Fraction] = {}

    def residual(x: int) -> Fraction:
        """What node ``x``'s subtree still needs after the planned parts, exactly (only
        the few nodes a close leaf's path meets are ever asked)."""
        r = memo.get(x)
        if r is None:
            kids = tree.children.get(names[x])
            if not kids:
                n = int(need_at.get(x, 0))
                p = zero if parent_mode else planned.get(names[x], zero)
                r = n - p if n > p else zero
            else:
                r = zero
                for kid in kids:
                    j = sh.pos.get(kid, -1)
                    if j >= 0 and res_f[j] > 0:
                        r += residual(j)
            memo[x] = r
        return r

    handed: dict[int, Fraction] = {0: Q(size) - based}

    def amount(x: int) -> Fraction | None:
        if x in handed:
            return handed[x]
        if full[x]:
            handed[x] = residual(x)
            return handed[x]
        y = int(parent[x])
        avail = amount(y)
        if avail is None:
            return None
        band, w_live, for_full = int(sh.band[x]), 0, zero
        for b, members in enumerate(tree.bands(names[y])):
            for m in members:
                j = sh.pos[m]
                if j < 0 or not res_f[j] > 0:
                    continue
                if b < band:
                    if not full[j]:
                        return None
                    avail -= residual(j)
                elif b == band:
                    if full[j]:
                        for_full += residual(j)
                    else:
                        w_live += tree.ratio[m]
        handed[x] = (avail - for_full) * tree.ratio[names[x]] / w_live
        return handed[x]

    exact_frac = []
    for k in near.tolist():
        i = int(idx[k])
        if got[k] > 0:
            part = amount(i)
            if part is None:
                return None
            n = int(need[k])
            p = Q(0) if parent_mode else planned.get(names[i], Q(0))
            v = (p if p < n else Q(n)) + part
        else:
            v = Q(0) if parent_mode else planned.get(names[i], Q(0))
        exact_frac.append((v - int(floor[k]), k))
    near_sorted = [k for _, k in sorted(exact_frac, key=lambda fk: (-fk[0], int(sh.index[idx[fk[1]]])))]
    close = set(near.tolist())
    rest = [k for k in order[:spare].tolist() if k not in close]
    return np.array(rest + near_sorted[:take], dtype=np.intp)
