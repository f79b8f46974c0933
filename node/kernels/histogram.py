"""Gradient histograms, the local split search and the row partition, for a whole tree level per call.

A level needs, for every open node (a *group* of rows), the best local split gain of every feature (to vote), the
histograms of the two candidate features (to send), and, once the contract has chosen the splits, the rows of the
next level's nodes. Looping over nodes or features in Python would dominate the run time, so each of these is one
compiled numba kernel over all the groups of the level:

* votes: rows' bin slots are stored once as sparse entries around each feature's most common slot (a9a: about
  10 of 123 features are away from it in a row), and only the (feature, slot) cells that occur in the data get a
  histogram cell, so work and memory follow the data, not ``features * slots``. The values are summed in fixed point
  (``node.kernels.vote_histograms``: exact int64 sums, so that the simulator may take a split's larger child as its
  parent less the smaller); a group's default cells come from its totals, then every threshold is scanned. A row's
  entries sit in a fixed-width table (short rows padded): a loop of varying length per row costs one mispredicted
  branch per row, about as much as the row's updates;
* candidates and splits: the rows of every group are listed in increasing order (``RowGroups``), and both read
  one feature of a group's rows at a time from a feature-major copy of the slots, a short stretch of one column;
  applying the splits partitions each group's list into its children's, so the grouping is never rebuilt.

The votes' sums are integers and the candidates' are taken in the order of a plain loop over the rows in
increasing order (a row adds to a cell at most once), so the votes and the quantised histograms are the same
however the rows are visited (the tests compare them bit for bit with such a loop).

The same code serves one party (a node process, from row positions) and the simulator (which keeps the groups
up to date, and a level's vote histograms to subtract from), so both compute the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from fgbdt_chain.ledger.spec.fixed_point import ONE_FLOAT
from fgbdt_chain.node.kernels.vote_histograms import level_gains, quantise_votes

TAIL_COST = 6
"""What a row longer than the fixed width costs, in histogram updates (its ragged tail's mispredicted branch)."""


@njit(cache=True, nogil=True)
def _group_rows(group_of_row: np.ndarray, num_groups: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """A stable counting sort of the rows by group (-1: none)."""
    start = np.zeros(num_groups + 1, dtype=np.int64)
    for r in range(group_of_row.shape[0]):
        k = group_of_row[r]
        if k >= num_groups:
            raise ValueError("a row's group is not below num_groups")
        if k >= 0:
            start[k + 1] += 1
    for k in range(num_groups):
        start[k + 1] += start[k]
    fill = start[:num_groups].copy()
    order = np.empty(start[num_groups], dtype=np.int64)
    for r in range(group_of_row.shape[0]):
        k = group_of_row[r]
        if k >= 0:
            order[fill[k]] = r
            fill[k] += 1
    return order, start


@njit(cache=True, nogil=True)
def _row_gains(  # pragma: no cover - compiled
    row_cells: np.ndarray,
    tail_ptr: np.ndarray,
    tail_cell: np.ndarray,
    group_of_row: np.ndarray,
    num_groups: int,
    cell_start: np.ndarray,
    default_cell: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    lam: float,
    min_rows: int,
) -> np.ndarray:
    """The votes' gains of every group from its rows, on the values quantised at the party's own scale
    (``node.kernels.vote_histograms``): the integers the simulator's subtraction makes too."""
    qg = np.empty(g.shape[0], dtype=np.int64)
    qh = np.empty(h.shape[0], dtype=np.int64)
    inv = quantise_votes(g, h, qg, qh)
    if inv == 0.0:
        raise ValueError("vote values must be finite and small enough to sum in fixed point")
    order, start = _group_rows(group_of_row, num_groups)
    hist = np.empty((num_groups, cell_start[-1] + row_cells.shape[1], 3), dtype=np.int64)
    tot = np.empty((num_groups, 3), dtype=np.int64)
    best = np.full((num_groups, default_cell.shape[0]), -np.inf)
    level_gains(
        order,
        start,
        np.zeros(0, dtype=np.int64),
        hist,
        tot,
        hist,
        tot,
        row_cells,
        tail_ptr,
        tail_cell,
        cell_start,
        default_cell,
        qg,
        qh,
        inv,
        lam,
        min_rows,
        best,
    )
    return best


@njit(cache=True, nogil=True)
def _votes(best: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``votes_from_gains`` of a (groups, F) array, F >= 1."""
    out = np.empty(best.shape[0], dtype=np.int64)
    votes_into(best, out)
    return out


@njit(cache=True, nogil=True)
def votes_into(best: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``votes_from_gains`` of a (groups, F) array into ``out`` (groups,): numpy's argmax (the first maximum, or the
    first NaN) and -1 where that gain is not finite (everywhere when F is 0). ``node.kernels.party_kernels`` runs it
    right after each party's gains, while they are in the cache."""
    for k in range(best.shape[0]):
        if best.shape[1] == 0:
            out[k] = -1
            continue
        arg, top = 0, best[k, 0]
        if not np.isnan(top):
            for f in range(1, best.shape[1]):
                x = best[k, f]
                if np.isnan(x):
                    arg, top = f, x
                    break
                if x > top:
                    arg, top = f, x
        out[k] = arg if np.isfinite(top) else -1


@njit(cache=True, nogil=True)
def _group_candidates(  # pragma: no cover - compiled
    order: np.ndarray,
    start: np.ndarray,
    slots_t: np.ndarray,
    features: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    nbins: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    num_groups, nc = features.shape
    for k in range(num_groups):
        for c in range(nc):
            if features[k, c] < 0 or features[k, c] >= slots_t.shape[0]:
                raise ValueError("a candidate feature is not a feature index")
    hg = np.zeros((num_groups, nc, nbins))
    hh = np.zeros((num_groups, nc, nbins))
    hn = np.zeros((num_groups, nc, nbins), dtype=np.int64)
    for k in range(num_groups):
        for c in range(nc):
            column = slots_t[features[k, c]]
            for i in range(start[k], start[k + 1]):
                r = order[i]
                s = column[r]
                hg[k, c, s] += g[r]
                hh[k, c, s] += h[r]
                hn[k, c, s] += 1
    return hg, hh, hn


@njit(cache=True, nogil=True)
def _check_features(features: np.ndarray, num_features: int) -> None:  # pragma: no cover - compiled
    for k in range(features.shape[0]):
        for c in range(features.shape[1]):
            if features[k, c] < 0 or features[k, c] >= num_features:
                raise ValueError("a candidate feature is not a feature index")


@njit(cache=True, nogil=True)
def _group_candidates_fixed(  # pragma: no cover - compiled
    order: np.ndarray,
    start: np.ndarray,
    slots_t: np.ndarray,
    features: np.ndarray,
    g_hi: np.ndarray,
    g_lo: np.ndarray,
    h_hi: np.ndarray,
    h_lo: np.ndarray,
    count: np.ndarray,
    nbins: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    _check_features(features, slots_t.shape[0])
    num_groups, nc = features.shape
    ghi = np.zeros((num_groups, nc, nbins), dtype=np.int64)
    glo = np.zeros((num_groups, nc, nbins), dtype=np.int64)
    hhi = np.zeros((num_groups, nc, nbins), dtype=np.int64)
    hlo = np.zeros((num_groups, nc, nbins), dtype=np.int64)
    hn = np.zeros((num_groups, nc, nbins), dtype=np.int64)
    candidates_into(order, start, slots_t, features, g_hi, g_lo, h_hi, h_lo, count, ghi, glo, hhi, hlo, hn)
    return ghi, glo, hhi, hlo, hn


@njit(cache=True, nogil=True, inline="always")
def _add_row(  # pragma: no cover - compiled
    acc: np.ndarray,
    r: int,
    col0: np.ndarray,
    col1: np.ndarray,
    g_hi: np.ndarray,
    g_lo: np.ndarray,
    h_hi: np.ndarray,
    h_lo: np.ndarray,
    count: np.ndarray,
) -> None:
    """Row ``r``'s five values added to its bin of both candidates in ``acc`` (2, nbins, 5)."""
    s0, s1 = col0[r], col1[r]
    a, b, c, d, e = g_hi[r], g_lo[r], h_hi[r], h_lo[r], count[r]
    acc[0, s0, 0] += a
    acc[0, s0, 1] += b
    acc[0, s0, 2] += c
    acc[0, s0, 3] += d
    acc[0, s0, 4] += e
    acc[1, s1, 0] += a
    acc[1, s1, 1] += b
    acc[1, s1, 2] += c
    acc[1, s1, 3] += d
    acc[1, s1, 4] += e


@njit(cache=True, nogil=True)
def candidates_into(  # pragma: no cover - compiled
    order: np.ndarray,
    start: np.ndarray,
    slots_t: np.ndarray,
    features: np.ndarray,
    g_hi: np.ndarray,
    g_lo: np.ndarray,
    h_hi: np.ndarray,
    h_lo: np.ndarray,
    count: np.ndarray,
    ghi: np.ndarray,
    glo: np.ndarray,
    hhi: np.ndarray,
    hlo: np.ndarray,
    hn: np.ndarray,
) -> None:
    """The exact candidate histograms of one party's grouped rows, added into zeroed (groups, C, nbins) arrays and
    normalised (the features already checked): the body of ``_group_candidates_fixed``, which
    ``node.kernels.party_kernels`` runs for every party at once."""
    num_groups, nc = features.shape
    nbins = ghi.shape[2]
    # two candidates: both in one pass over the group's rows, each row's values read once, into two copies of the
    # group's histograms side by side that even and odd rows take turns to add into (integer sums: the same in any
    # order). A binary feature's rows nearly all add to one bin, and each add waited for the one before it to be
    # stored; with two copies two chains run at once (a9a's biggest party: 38.6 -> 32.3 us a root, 37.0 -> 33.5 us
    # at 4 nodes, the same at 64)
    acc = np.empty((2, 2, nbins, 5), dtype=np.int64)
    for k in range(num_groups):
        if nc == 2:
            col0, col1 = slots_t[features[k, 0]], slots_t[features[k, 1]]
            acc[:] = 0
            first, last = start[k], start[k + 1]
            for i in range(first, last - 1, 2):
                _add_row(acc[0], order[i], col0, col1, g_hi, g_lo, h_hi, h_lo, count)
                _add_row(acc[1], order[i + 1], col0, col1, g_hi, g_lo, h_hi, h_lo, count)
            if (last - first) & 1:
                _add_row(acc[0], order[last - 1], col0, col1, g_hi, g_lo, h_hi, h_lo, count)
            for c in range(2):
                for s in range(nbins):
                    ghi[k, c, s] += acc[0, c, s, 0] + acc[1, c, s, 0]
                    glo[k, c, s] += acc[0, c, s, 1] + acc[1, c, s, 1]
                    hhi[k, c, s] += acc[0, c, s, 2] + acc[1, c, s, 2]
                    hlo[k, c, s] += acc[0, c, s, 3] + acc[1, c, s, 3]
                    hn[k, c, s] += acc[0, c, s, 4] + acc[1, c, s, 4]
            continue
        for c in range(nc):
            column = slots_t[features[k, c]]
            for i in range(start[k], start[k + 1]):
                r = order[i]
                s = column[r]
                ghi[k, c, s] += g_hi[r]
                glo[k, c, s] += g_lo[r]
                hhi[k, c, s] += h_hi[r]
                hlo[k, c, s] += h_lo[r]
                hn[k, c, s] += count[r]
    # normalise: lo in [0, 2**32), so that equal values have equal limbs
    for k in range(num_groups):
        for c in range(nc):
            for s in range(nbins):
                ghi[k, c, s] += glo[k, c, s] >> 32
                glo[k, c, s] &= 0xFFFFFFFF
                hhi[k, c, s] += hlo[k, c, s] >> 32
                hlo[k, c, s] &= 0xFFFFFFFF


@njit(cache=True, nogil=True, inline="always")
def _add_limbs(  # pragma: no cover - compiled
    acc: np.ndarray,
    r: int,
    col0: np.ndarray,
    col1: np.ndarray,
    g_hi: np.ndarray,
    g_lo: np.ndarray,
    h_hi: np.ndarray,
    h_lo: np.ndarray,
) -> None:
    """``_add_row`` without the count: row ``r``'s four limbs added to its bin of both candidates in ``acc``
    (2, nbins, 4)."""
    s0, s1 = col0[r], col1[r]
    a, b, c, d = g_hi[r], g_lo[r], h_hi[r], h_lo[r]
    acc[0, s0, 0] += a
    acc[0, s0, 1] += b
    acc[0, s0, 2] += c
    acc[0, s0, 3] += d
    acc[1, s1, 0] += a
    acc[1, s1, 1] += b
    acc[1, s1, 2] += c
    acc[1, s1, 3] += d


@njit(cache=True, nogil=True)
def pair_limbs_into(  # pragma: no cover - compiled
    order: np.ndarray,
    start: np.ndarray,
    slots_t: np.ndarray,
    features: np.ndarray,
    g_hi: np.ndarray,
    g_lo: np.ndarray,
    h_hi: np.ndarray,
    h_lo: np.ndarray,
    ghi: np.ndarray,
    glo: np.ndarray,
    hhi: np.ndarray,
    hlo: np.ndarray,
) -> None:
    """``candidates_into``'s limb sums of two candidates per group (``features`` (groups, 2)), without the counts,
    which ``counts_from_votes`` takes from the level's vote histograms where every row counts one: eight updates
    a row instead of ten (a9a's biggest party: 121 -> 90 us a level of 128 nodes, 50 -> 43 us a root). The same
    integers as ``candidates_into``'s (the same rows added in the same two interleaved chains)."""
    num_groups = features.shape[0]
    nbins = ghi.shape[2]
    acc = np.empty((2, 2, nbins, 4), dtype=np.int64)
    for k in range(num_groups):
        col0, col1 = slots_t[features[k, 0]], slots_t[features[k, 1]]
        acc[:] = 0
        first, last = start[k], start[k + 1]
        for i in range(first, last - 1, 2):
            _add_limbs(acc[0], order[i], col0, col1, g_hi, g_lo, h_hi, h_lo)
            _add_limbs(acc[1], order[i + 1], col0, col1, g_hi, g_lo, h_hi, h_lo)
        if (last - first) & 1:
            _add_limbs(acc[0], order[last - 1], col0, col1, g_hi, g_lo, h_hi, h_lo)
        for c in range(2):
            for s in range(nbins):
                ghi[k, c, s] += acc[0, c, s, 0] + acc[1, c, s, 0]
                glo[k, c, s] += acc[0, c, s, 1] + acc[1, c, s, 1]
                hhi[k, c, s] += acc[0, c, s, 2] + acc[1, c, s, 2]
                hlo[k, c, s] += acc[0, c, s, 3] + acc[1, c, s, 3]
    for k in range(num_groups):
        for c in range(2):
            for s in range(nbins):
                ghi[k, c, s] += glo[k, c, s] >> 32
                glo[k, c, s] &= 0xFFFFFFFF
                hhi[k, c, s] += hlo[k, c, s] >> 32
                hlo[k, c, s] &= 0xFFFFFFFF


@njit(cache=True, nogil=True)
def counts_from_votes(  # pragma: no cover - compiled
    features: np.ndarray, cell_of: np.ndarray, hist: np.ndarray, hn: np.ndarray
) -> None:
    """Each group's row count per bin of its candidates (``hn`` (groups, C, nbins)) read off the level's vote
    histograms ``hist`` (groups, cells, 3: g, h, rows; every cell exact once scanned, ``vote_histograms.scan``):
    a used slot's count is its cell's, an unused slot's 0. The counts of rows that each count one, which is what
    ``candidates_into`` sums then."""
    for k in range(features.shape[0]):
        for c in range(features.shape[1]):
            cells = cell_of[features[k, c]]
            for s in range(hn.shape[2]):
                cell = cells[s]
                hn[k, c, s] = hist[k, cell, 2] if cell >= 0 else 0


@njit(cache=True, nogil=True, inline="always")
def value_limbs(v: float) -> tuple[bool, np.int64, np.int64]:  # pragma: no cover - compiled
    """Limbs of ``rint(v * ONE)``, the value ``ledger.spec.fixed_point.to_fixed`` gives, and whether it is finite and
    below ``2**80`` in magnitude (else the limbs are 0).

    ``rint`` of the scaled float is an integral float q; ``floor(q / 2**32)`` and ``q - hi * 2**32`` are exact (a
    power-of-two scaling, and a difference that is an integer below 2**32), so ``hi * 2**32 + lo == q`` exactly."""
    q = np.rint(v * ONE_FLOAT)
    if not abs(q) < 1.2089258196146292e24:  # 2**80; also False for NaN
        return False, np.int64(0), np.int64(0)
    qh = np.floor(q * 2.3283064365386963e-10)  # 2**-32
    return True, np.int64(qh), np.int64(q - qh * 4294967296.0)


@njit(cache=True, nogil=True)
def _quantise_limbs(x: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``value_limbs`` of every element; False when some value is not finite or not below ``2**80``."""
    flat = x.ravel()
    hi = np.empty(flat.shape[0], dtype=np.int64)
    lo = np.empty(flat.shape[0], dtype=np.int64)
    for i in range(flat.shape[0]):
        ok, hi[i], lo[i] = value_limbs(flat[i])
        if not ok:
            return False, hi.reshape(x.shape), lo.reshape(x.shape)
    return True, hi.reshape(x.shape), lo.reshape(x.shape)


@njit(cache=True, nogil=True)
def _partition_rows(  # pragma: no cover - compiled
    slots_t: np.ndarray,
    order: np.ndarray,
    start: np.ndarray,
    split_feature: np.ndarray,
    split_threshold: np.ndarray,
    node_id: np.ndarray,
    group_of_row: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    num_split = _check_splits(split_feature, slots_t.shape[0])
    new_start = np.zeros(2 * num_split + 1, dtype=np.int64)
    new_order = np.empty(order.shape[0], dtype=np.int64)
    total = partition_into(
        slots_t, order, start, split_feature, split_threshold, node_id, group_of_row, new_order, new_start
    )
    return new_order[:total], new_start


@njit(cache=True, nogil=True)
def _check_splits(split_feature: np.ndarray, num_features: int) -> int:  # pragma: no cover - compiled
    """The number of splitting groups; raises on a split feature that is not a feature index."""
    num_split = 0
    for k in range(split_feature.shape[0]):
        if split_feature[k] >= num_features:
            raise ValueError("a split feature is not a feature index")
        if split_feature[k] >= 0:
            num_split += 1
    return num_split


@njit(cache=True, nogil=True)
def partition_into(  # pragma: no cover - compiled
    slots_t: np.ndarray,
    order: np.ndarray,
    start: np.ndarray,
    split_feature: np.ndarray,
    split_threshold: np.ndarray,
    node_id: np.ndarray,
    group_of_row: np.ndarray,
    new_order: np.ndarray,
    new_start: np.ndarray,
) -> int:
    """One party's partition (the splits already checked) into ``new_order`` (at least as long as ``order``) and
    the zeroed ``new_start``; returns how many rows stay in a group. The body of ``_partition_rows``, which
    ``node.kernels.party_kernels`` runs for every party at once."""
    num_groups = start.shape[0] - 1
    total = 0
    for k in range(num_groups):
        if split_feature[k] >= 0:
            total += start[k + 1] - start[k]
    right = np.empty(total, dtype=np.int64)
    out, child = 0, 0
    for k in range(num_groups):
        first, last = start[k], start[k + 1]
        f = split_feature[k]
        if f < 0:  # a leaf: its rows leave every group
            for i in range(first, last):
                group_of_row[order[i]] = -1
            continue
        column, t = slots_t[f], split_threshold[k]
        n_left, n_right = 0, 0
        # a stable partition, both children keeping increasing row order; branch-free (the side of a row is
        # data, so a branch on it is mispredicted often): the row is written to both lists, only one advances
        for i in range(first, last):
            r = order[i]
            side = int(column[r] > t)
            new_order[out + n_left] = r
            right[n_right] = r
            n_left += 1 - side
            n_right += side
            node_id[r] = 2 * node_id[r] + side
            group_of_row[r] = child + side
        new_order[out + n_left : out + n_left + n_right] = right[:n_right]
        out += n_left + n_right
        new_start[child + 1] = new_start[child] + n_left
        new_start[child + 2] = out
        child += 2
    return out


@dataclass(frozen=True)
class RowGroups:
    """The rows of every group (open node) of a level: group ``k`` is ``order[start[k]:start[k + 1]]``, in
    increasing row order; rows of no group are left out."""

    order: np.ndarray
    start: np.ndarray

    @property
    def num_groups(self) -> int:
        return int(self.start.shape[0]) - 1

    @classmethod
    def of(cls, group_of_row: np.ndarray, num_groups: int) -> RowGroups:
        """Group rows by ``group_of_row`` (values in ``[0, num_groups)``, or -1 for no group)."""
        if num_groups < 0:
            raise ValueError("num_groups must be non-negative")
        order, start = _group_rows(np.ascontiguousarray(group_of_row, dtype=np.int64), int(num_groups))
        return cls(order, start)

    @classmethod
    def everything(cls, n_rows: int) -> RowGroups:
        """One group of all the rows (a tree's root)."""
        return cls(np.arange(n_rows, dtype=np.int64), np.array([0, n_rows], dtype=np.int64))


@dataclass(frozen=True)
class FixedRows:
    """Every row's gradient and hessian quantised once to 18-decimal fixed point (``q = hi * 2**32 + lo``) and
    its count weight (1 for a real row): what a party's histograms are exact integer sums of, so that the sums of the
    same rows agree to the last unit wherever they are taken (``ledger.spec.histogram_rules``)."""

    g_hi: np.ndarray
    g_lo: np.ndarray
    h_hi: np.ndarray
    h_lo: np.ndarray
    count: np.ndarray

    @classmethod
    def of(cls, g: np.ndarray, h: np.ndarray, count: np.ndarray | None = None) -> FixedRows:
        ok_g, g_hi, g_lo = _quantise_limbs(np.ascontiguousarray(g, dtype=np.float64))
        ok_h, h_hi, h_lo = _quantise_limbs(np.ascontiguousarray(h, dtype=np.float64))
        if not (ok_g and ok_h):
            raise OverflowError("a gradient or hessian is not finite or beyond 1.2e6 in magnitude (fixed point)")
        rows = g.shape[0]
        weights = np.ones(rows, dtype=np.int64) if count is None else np.ascontiguousarray(count, dtype=np.int64)
        bound = max(int(np.abs(g_hi).max(initial=0)), int(np.abs(h_hi).max(initial=0)), 1)
        if bound * max(int(weights.sum()), 1) >= 2**62 or int(weights.max(initial=0)) >= 2**31:
            raise OverflowError("gradient sums beyond what 64-bit limbs carry (values near 1e6 over millions of rows)")
        return cls(g_hi, g_lo, h_hi, h_lo, weights)


@dataclass(frozen=True)
class FixedSums:
    """A party's exact candidate histograms of a level: limbs of g and h and the counts, each (nodes, C, nbins)."""

    g_hi: np.ndarray
    g_lo: np.ndarray
    h_hi: np.ndarray
    h_lo: np.ndarray
    n: np.ndarray


def _as_float(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it already is a contiguous float64 array (the kernels only read it), else a converted
    copy: the per-level ``astype`` copies of every party's g and h were measurable."""
    return np.ascontiguousarray(a, dtype=np.float64)


def row_width(lengths: np.ndarray) -> int:
    """The vote kernel's fixed row width for rows of these entry counts: the fewest updates, a padding entry
    counting as one and a row longer than the width as ``TAIL_COST`` more (a9a: 10, for rows of 8 to 16)."""
    if lengths.size == 0 or int(lengths.max()) == 0:
        return 0
    counts = np.bincount(lengths)
    sizes = np.arange(counts.size)
    costs = [int((np.maximum(sizes, w) * counts).sum() + TAIL_COST * counts[w + 1 :].sum()) for w in range(counts.size)]
    return int(np.argmin(costs))


def candidate_sums(
    groups: RowGroups, slots_t: np.ndarray, features: np.ndarray, rows: FixedRows, nbins: int
) -> FixedSums:
    """The exact candidate histograms of grouped rows from feature-major slots (features x rows, ``uint8``),
    without ``BinnedRows``' layout: what a party summing its rows chunk by chunk computes per chunk
    (``node.protocol.chunked_party``)."""
    if features.ndim != 2 or features.shape[0] != groups.num_groups:
        raise ValueError(f"features must have shape ({groups.num_groups}, C), got {features.shape}")
    if rows.count.shape != (slots_t.shape[1],):
        raise ValueError(f"fixed rows must have shape ({slots_t.shape[1]},)")
    try:
        return FixedSums(
            *_group_candidates_fixed(
                groups.order,
                groups.start,
                slots_t,
                np.ascontiguousarray(features, dtype=np.int64),
                rows.g_hi,
                rows.g_lo,
                rows.h_hi,
                rows.h_lo,
                rows.count,
                nbins,
            )
        )
    except ValueError as exc:
        raise ValueError(f"candidate features must be in [0, {slots_t.shape[0]})") from exc


class BinnedRows:
    """Bin slots of a fixed set of rows, laid out for repeated level-wise split searches."""

    def __init__(self, slots: np.ndarray, nbins: int) -> None:
        if slots.ndim != 2:
            raise ValueError(f"slots must be a 2-D array (rows, features), got shape {slots.shape}")
        if slots.size and int(slots.max()) >= nbins:
            raise ValueError(f"slot {int(slots.max())} out of range for {nbins} slots")
        if slots.shape[0] >= 2**31:
            raise ValueError("at most 2**31 - 1 rows")
        self.slots = np.ascontiguousarray(slots, dtype=np.uint8)
        self.n_rows, self.n_features = slots.shape
        self.nbins = nbins
        self.slots_t = np.ascontiguousarray(self.slots.T)  # feature-major, for candidates and splits
        offsets = np.arange(self.n_features, dtype=np.int64) * nbins
        flat = (self.slots.astype(np.int64) + offsets).ravel()
        per_cell = np.bincount(flat, minlength=self.n_features * nbins).reshape(self.n_features, nbins)
        used = per_cell > 0
        used[:, 0] |= ~used.any(axis=1)  # a feature of an empty row set still gets one cell
        # compact cell numbering: the used slots of feature f are cells cell_start[f] .. cell_start[f+1]-1
        self.cell_of = np.where(used, np.cumsum(used.ravel()).reshape(used.shape) - 1, -1).astype(np.int64)
        self.cell_start = np.concatenate(([0], np.cumsum(used.sum(axis=1)))).astype(np.int64)
        default_slot = per_cell.argmax(axis=1)
        self.default_cell = self.cell_of[np.arange(self.n_features), default_slot]
        # the rows' cells away from the default slot: row r's first ones in row_cells[r] (short rows padded with
        # distinct cells past the real ones, so that a row's updates never wait on each other), the rest in
        # tail_cell[tail_ptr[r]:tail_ptr[r + 1]]
        rows, feats = np.nonzero(self.slots != default_slot[None, :].astype(np.uint8))
        cells = self.cell_of[feats, self.slots[rows, feats]]
        lengths = np.bincount(rows, minlength=self.n_rows)
        width = row_width(lengths)
        num_cells = int(self.cell_start[-1])
        cell_dtype = np.uint16 if num_cells + width <= np.iinfo(np.uint16).max else np.int64
        rank = np.arange(rows.shape[0]) - np.concatenate(([0], np.cumsum(lengths)))[rows]  # place in its row
        head = rank < width
        self.row_cells = np.empty((self.n_rows, width), dtype=cell_dtype)
        self.row_cells[:] = num_cells + np.arange(width)
        self.row_cells[rows[head], rank[head]] = cells[head]
        self.tail_cell = cells[~head].astype(cell_dtype)
        self.tail_ptr = np.concatenate(([0], np.cumsum(np.bincount(rows[~head], minlength=self.n_rows))))
        self.tail_ptr = self.tail_ptr.astype(np.int64)

    def _check_rows(self, *arrays: np.ndarray) -> None:
        for a in arrays:
            if a.shape != (self.n_rows,):
                raise ValueError(f"group_of_row, g and h must have shape ({self.n_rows},)")

    def groups(self, group_of_row: np.ndarray, num_groups: int) -> RowGroups:
        """The rows of each group, for ``group_candidates`` and ``split_groups``."""
        self._check_rows(group_of_row)
        return RowGroups.of(group_of_row, num_groups)

    def best_gains(
        self, group_of_row: np.ndarray, num_groups: int, g: np.ndarray, h: np.ndarray, lam: float, min_rows: int = 1
    ) -> np.ndarray:
        """Best split gain of every feature in every group, shape (num_groups, F); -inf where none is valid.

        The gain is equation 4 when ``g``/``h`` are refitted (weighted) values: ``GL^2/(HL+lambda) +
        GR^2/(HR+lambda)``, both sides needing ``min_rows`` rows. Rows of group -1 take no part.
        """
        self._check_rows(group_of_row, g, h)
        return _row_gains(
            self.row_cells,
            self.tail_ptr,
            self.tail_cell,
            np.ascontiguousarray(group_of_row, dtype=np.int64),
            int(num_groups),
            self.cell_start,
            self.default_cell,
            _as_float(g),
            _as_float(h),
            float(lam),
            int(min_rows),
        )

    def candidate_histograms(
        self, group_of_row: np.ndarray, num_groups: int, features: np.ndarray, g: np.ndarray, h: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sums of g, h and the row counts of each group's candidate features, each of shape (num_groups, C, nbins),
        where ``features`` (num_groups, C) names the candidates of every group."""
        self._check_rows(group_of_row, g, h)
        return self.group_candidates(self.groups(group_of_row, num_groups), features, g, h)

    def group_candidates(
        self, groups: RowGroups, features: np.ndarray, g: np.ndarray, h: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``candidate_histograms`` of rows already grouped."""
        self._check_rows(g, h)
        if features.ndim != 2 or features.shape[0] != groups.num_groups:
            raise ValueError(f"features must have shape ({groups.num_groups}, C), got {features.shape}")
        try:
            return _group_candidates(
                groups.order,
                groups.start,
                self.slots_t,
                np.ascontiguousarray(features, dtype=np.int64),
                _as_float(g),
                _as_float(h),
                self.nbins,
            )
        except ValueError as exc:  # the kernel checks the range, saving two numpy reductions per call
            raise ValueError(f"candidate features must be in [0, {self.n_features})") from exc

    def group_candidates_fixed(self, groups: RowGroups, features: np.ndarray, rows: FixedRows) -> FixedSums:
        """The exact (fixed-point) candidate histograms of rows already grouped: what a party sends."""
        if rows.count.shape != (self.n_rows,):
            raise ValueError(f"fixed rows must have shape ({self.n_rows},)")
        if features.ndim != 2 or features.shape[0] != groups.num_groups:
            raise ValueError(f"features must have shape ({groups.num_groups}, C), got {features.shape}")
        try:
            return FixedSums(
                *_group_candidates_fixed(
                    groups.order,
                    groups.start,
                    self.slots_t,
                    np.ascontiguousarray(features, dtype=np.int64),
                    rows.g_hi,
                    rows.g_lo,
                    rows.h_hi,
                    rows.h_lo,
                    rows.count,
                    self.nbins,
                )
            )
        except ValueError as exc:
            raise ValueError(f"candidate features must be in [0, {self.n_features})") from exc

    def split_groups(
        self,
        groups: RowGroups,
        split_feature: np.ndarray,
        split_threshold: np.ndarray,
        node_id: np.ndarray,
        group_of_row: np.ndarray,
    ) -> RowGroups:
        """Apply a level's splits to grouped rows: the next level's groups, with ``node_id`` and ``group_of_row``
        updated in place.

        Group k splits on ``split_feature[k]`` at ``split_threshold[k]`` (a row goes left when its slot is at most
        the threshold, as ``node.protocol.local_party.route``), or is a leaf when the feature is -1: its rows leave
        every group. The next level's groups are the children of the splitting groups, left then right, in group
        order (the open nodes in increasing id), their rows still in increasing order.
        """
        self._check_rows(node_id, group_of_row)
        if split_feature.shape != (groups.num_groups,) or split_threshold.shape != (groups.num_groups,):
            raise ValueError(f"need one split feature and threshold per group ({groups.num_groups})")
        if node_id.dtype != np.int64 or group_of_row.dtype != np.int64:
            raise ValueError("node_id and group_of_row must be int64 arrays (they are updated in place)")
        order, start = _partition_rows(
            self.slots_t,
            groups.order,
            groups.start,
            np.ascontiguousarray(split_feature, dtype=np.int64),
            np.ascontiguousarray(split_threshold, dtype=np.int64),
            node_id,
            group_of_row,
        )
        return RowGroups(order, start)


def votes_from_gains(best: np.ndarray) -> np.ndarray:
    """Each group's vote from its per-feature best gains: the best feature (lowest index on ties) or -1."""
    if best.ndim == 2 and best.shape[1] > 0 and best.dtype == np.float64:
        return _votes(np.ascontiguousarray(best))  # one compiled pass instead of four numpy calls per party-level
    vote = best.argmax(axis=-1)
    has = np.isfinite(np.take_along_axis(best, vote[..., None], axis=-1)[..., 0])
    return np.where(has, vote, -1)
