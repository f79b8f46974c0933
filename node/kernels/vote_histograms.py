"""The votes' histograms in fixed point, and each split's larger child by subtraction from its parent.

Why: a party's vote at a node is the feature of its best local split gain (``node.kernels.histogram``), and the
histograms behind it took the largest share of ``simulate``'s time: every level streamed every row of every open node. A
parent's histogram is the sum of its children's, so a level needs only each split's smaller child from the rows
and the larger one as the difference (LightGBM's subtraction trick): 12-24% of the rows below the root on a9a,
HIGGS and credit. Subtraction is only exact on integers: float sums taken in another order differ in their last
bits. So the vote values are quantised once per tree, at a power of two that each party takes from its own values
(``vote_scale``), and summed as int64: the same integers whether a node's histogram came from its rows (a party
node, which keeps nothing between levels) or from its parent less its sibling (the simulator), so both vote alike.

A histogram holds, per cell (``BinnedRows``' compact cells, padding cells after them), the sums of g, h and the row
count; a feature's default cell is filled from the node's totals when the node's gains are scanned, which makes
every cell exact, so a parent less a child is the other child cell by cell.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

SUM_BITS = 61
"""Every sum of quantised magnitudes stays below 2^61 (so a difference of two sums stays inside int64)."""

MIN_SCALE, MAX_SCALE = -60, 60
"""The powers of two a party's values may be quantised at; values beyond 2^(61 + 60) / rows are refused."""


@njit(cache=True, nogil=True)
def vote_scale(g: np.ndarray, h: np.ndarray) -> int:  # pragma: no cover - compiled
    """The power of two ``s`` a party's vote values are quantised at (``rint(v * 2^s)``): the largest with the
    rows' summed magnitudes of g and of h below 2^61, at most ``MAX_SCALE``; ``MIN_SCALE - 1`` where a value is not
    finite or none fits. A function of the party's own values only, so a party node and the simulator agree."""
    sg, sh = 0.0, 0.0
    for r in range(g.shape[0]):
        a, b = abs(g[r]), abs(h[r])
        if not (math.isfinite(a) and math.isfinite(b)):
            return MIN_SCALE - 1
        sg += a
        sh += b
    bound = max(sg, sh)
    s = MAX_SCALE
    # the rounding of each value adds at most one half per row
    while s >= MIN_SCALE and bound * 2.0**s + g.shape[0] >= 2.0**SUM_BITS:
        s -= 1
    return s


@njit(cache=True, nogil=True)
def quantise(v: np.ndarray, s: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = rint(v * 2^s)`` as int64 (``s`` from ``vote_scale``)."""
    f = 2.0**s
    for r in range(v.shape[0]):
        out[r] = np.int64(np.rint(v[r] * f))


@njit(cache=True, nogil=True)
def quantise_votes(g: np.ndarray, h: np.ndarray, qg: np.ndarray, qh: np.ndarray) -> float:  # pragma: no cover
    """A party's g and h quantised at its ``vote_scale`` into ``qg``/``qh``; returns 2^-scale, the factor back to
    values, or 0.0 (nothing written) where the values have no scale: the one step a party node and the simulator
    both take, so that they sum the same integers."""
    s = vote_scale(g, h)
    if s < MIN_SCALE:
        return 0.0
    quantise(g, s, qg)
    quantise(h, s, qh)
    return 2.0 ** (-s)


@njit(cache=True, nogil=True)
def fill(  # pragma: no cover - compiled
    k: int,
    order: np.ndarray,
    start: np.ndarray,
    row_cells: np.ndarray,
    tail_ptr: np.ndarray,
    tail_cell: np.ndarray,
    qg: np.ndarray,
    qh: np.ndarray,
    hist: np.ndarray,
    tot: np.ndarray,
) -> None:
    """Group ``k``'s histogram (``hist[k]``, cells by 3) and totals (``tot[k]``) from its rows."""
    hist[k] = 0
    tg, th = 0, 0
    width = row_cells.shape[1]
    for i in range(start[k], start[k + 1]):
        r = order[i]
        gr, hr = qg[r], qh[r]
        tg += gr
        th += hr
        for j in range(width):
            c = row_cells[r, j]
            hist[k, c, 0] += gr
            hist[k, c, 1] += hr
            hist[k, c, 2] += 1
        first, last = tail_ptr[r], tail_ptr[r + 1]
        if first < last:
            for e in range(first, last):
                c = tail_cell[e]
                hist[k, c, 0] += gr
                hist[k, c, 1] += hr
                hist[k, c, 2] += 1
    tot[k, 0], tot[k, 1], tot[k, 2] = tg, th, start[k + 1] - start[k]


@njit(cache=True, nogil=True)
def scan(  # pragma: no cover - compiled
    k: int,
    hist: np.ndarray,
    tot: np.ndarray,
    cell_start: np.ndarray,
    default_cell: np.ndarray,
    inv: float,
    lam: float,
    min_rows: int,
    best: np.ndarray,
) -> None:
    """Fills group ``k``'s default cells from its totals (exact) and writes its best gain per feature into
    ``best[k]`` (left at -inf where no threshold has ``min_rows`` rows each side): ``GL^2/(HL+lambda) +
    GR^2/(HR+lambda)`` on the sums times ``inv`` (2^-scale)."""
    tg, th, tn = tot[k, 0], tot[k, 1], tot[k, 2]
    if tn == 0:
        return
    for f in range(default_cell.shape[0]):
        lo, hi, d = cell_start[f], cell_start[f + 1], default_cell[f]
        if hi - lo == 2:
            # a feature of two cells (a binary one: a9a's all are) has one threshold and one cell besides the
            # default: the loops below unrolled, the same integer and float steps (a group's scan took 0.91 ->
            # 0.75 us on a9a's features, the loops' branches mispredicted at every feature)
            o = 2 * lo + 1 - d
            hist[k, d, 0] = tg - hist[k, o, 0]
            hist[k, d, 1] = th - hist[k, o, 1]
            hist[k, d, 2] = tn - hist[k, o, 2]
            gl, hl, nl = hist[k, lo, 0], hist[k, lo, 1], hist[k, lo, 2]
            b = -np.inf
            nr = tn - nl
            if nl >= min_rows and nr >= min_rows:
                fgl, fgr = gl * inv, (tg - gl) * inv
                dl, dr = hl * inv + lam, (th - hl) * inv + lam
                gain = (fgl * fgl / dl if dl > 0 else 0.0) + (fgr * fgr / dr if dr > 0 else 0.0)
                if gain > b:
                    b = gain
            best[k, f] = b
            continue
        sg, sh, sn = 0, 0, 0
        for c in range(lo, hi):
            if c != d:
                sg += hist[k, c, 0]
                sh += hist[k, c, 1]
                sn += hist[k, c, 2]
        hist[k, d, 0] = tg - sg
        hist[k, d, 1] = th - sh
        hist[k, d, 2] = tn - sn
        gl, hl, nl = 0, 0, 0
        b = -np.inf
        for c in range(lo, hi - 1):
            gl += hist[k, c, 0]
            hl += hist[k, c, 1]
            nl += hist[k, c, 2]
            nr = tn - nl
            if nl < min_rows or nr < min_rows:
                continue
            fgl, fgr = gl * inv, (tg - gl) * inv
            dl, dr = hl * inv + lam, (th - hl) * inv + lam
            gain = (fgl * fgl / dl if dl > 0 else 0.0) + (fgr * fgr / dr if dr > 0 else 0.0)
            if gain > b:
                b = gain
        best[k, f] = b


@njit(cache=True, nogil=True)
def level_gains(  # pragma: no cover - compiled
    order: np.ndarray,
    start: np.ndarray,
    parents: np.ndarray,
    prev: np.ndarray,
    prev_tot: np.ndarray,
    hist: np.ndarray,
    tot: np.ndarray,
    row_cells: np.ndarray,
    tail_ptr: np.ndarray,
    tail_cell: np.ndarray,
    cell_start: np.ndarray,
    default_cell: np.ndarray,
    qg: np.ndarray,
    qh: np.ndarray,
    inv: float,
    lam: float,
    min_rows: int,
    best: np.ndarray,
) -> None:
    """A level's histograms (into ``hist``/``tot``, one per group of ``order``/``start``) and best gains (into
    ``best``, filled with -inf by the caller). ``parents`` empty: every group from its rows. Otherwise the groups
    are pairs (left, right) of children of the previous level's groups ``parents`` (whose histograms, scanned, are
    ``prev``/``prev_tot``): the smaller child of each pair from its rows, the larger as the parent less it."""
    num_groups = start.shape[0] - 1
    if parents.shape[0] == 0:
        for k in range(num_groups):
            fill(k, order, start, row_cells, tail_ptr, tail_cell, qg, qh, hist, tot)
            scan(k, hist, tot, cell_start, default_cell, inv, lam, min_rows, best)
        return
    for i in range(num_groups // 2):
        a, b = 2 * i, 2 * i + 1
        small, big = (a, b) if start[a + 1] - start[a] <= start[b + 1] - start[b] else (b, a)
        fill(small, order, start, row_cells, tail_ptr, tail_cell, qg, qh, hist, tot)
        scan(small, hist, tot, cell_start, default_cell, inv, lam, min_rows, best)
        p = parents[i]
        for c in range(hist.shape[1]):
            for z in range(3):
                hist[big, c, z] = prev[p, c, z] - hist[small, c, z]
        for z in range(3):
            tot[big, z] = prev_tot[p, z] - tot[small, z]
        scan(big, hist, tot, cell_start, default_cell, inv, lam, min_rows, best)
