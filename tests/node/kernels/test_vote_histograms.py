"""The votes' fixed point: the party's scale, its bound, and a split's larger child by subtraction."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.node.kernels.histogram import BinnedRows, RowGroups
from fgbdt_chain.node.kernels.vote_histograms import MAX_SCALE, MIN_SCALE, SUM_BITS, level_gains, quantise, vote_scale


@pytest.mark.parametrize("magnitude", [1e-300, 1e-12, 1.0, 1e6, 1e15])
@pytest.mark.parametrize("rows", [1, 1000])
def test_the_scale_is_the_finest_whose_sums_fit(magnitude: float, rows: int) -> None:
    """Every sum of quantised magnitudes stays below 2^61 at the scale, and a scale one finer would not keep that
    bound (unless the scale is already the finest allowed)."""
    rng = np.random.default_rng(rows)
    g = rng.normal(size=rows) * magnitude
    h = rng.random(rows) * magnitude
    s = vote_scale(g, h)
    assert MIN_SCALE <= s <= MAX_SCALE
    q = np.empty(rows, dtype=np.int64)
    for v in (g, h):
        quantise(v, s, q)
        assert sum(abs(int(x)) for x in q) < 2**SUM_BITS
        assert np.array_equal(q, np.rint(v * 2.0**s).astype(np.int64))
    if s < MAX_SCALE:
        finer = max(np.abs(g).sum(), np.abs(h).sum()) * 2.0 ** (s + 1) + rows
        assert finer >= 2.0**SUM_BITS


def test_values_the_fixed_point_cannot_hold_have_no_scale() -> None:
    ones = np.ones(4)
    for bad in (np.nan, np.inf, -np.inf, 1e300):
        g = ones.copy()
        g[2] = bad
        assert vote_scale(g, ones) == MIN_SCALE - 1
        assert vote_scale(ones, g) == MIN_SCALE - 1
    assert vote_scale(np.zeros(3), np.zeros(3)) == MAX_SCALE  # nothing to bound: the finest
    assert vote_scale(np.zeros(0), np.zeros(0)) == MAX_SCALE
    rows = BinnedRows(np.zeros((4, 2), dtype=np.uint8), 2)
    with pytest.raises(ValueError, match="finite and small enough"):
        rows.best_gains(np.zeros(4, dtype=np.int64), 1, np.array([1.0, np.nan, 0.0, 0.0]), ones, 1.0)


@pytest.mark.parametrize("seed", range(4))
def test_the_larger_child_by_subtraction_is_the_one_from_its_rows(seed: int) -> None:
    """Each split's children: the smaller from its rows and the larger as the parent less it give the same
    histograms and gains, bit for bit, as both children from their rows (integers: exact)."""
    rng = np.random.default_rng(seed)
    n, f, nbins = int(rng.integers(50, 400)), 6, int(rng.integers(2, 9))
    slots = rng.integers(0, nbins, (n, f)).astype(np.uint8)
    slots[:, 0] = 0  # a constant feature too
    rows = BinnedRows(slots, nbins)
    g, h = rng.normal(size=n) * 10.0 ** rng.integers(-6, 6, n), rng.random(n)
    s = vote_scale(g, h)
    qg, qh = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    quantise(g, s, qg)
    quantise(h, s, qh)
    cells = int(rows.cell_start[-1]) + rows.row_cells.shape[1]
    lam, min_rows = 0.5, int(rng.integers(0, 4))

    def gains(groups: RowGroups, parents: np.ndarray, prev: np.ndarray, prev_tot: np.ndarray) -> tuple[np.ndarray, ...]:
        k = groups.start.shape[0] - 1
        hist, tot = np.empty((k, cells, 3), dtype=np.int64), np.empty((k, 3), dtype=np.int64)
        best = np.full((k, f), -np.inf)
        level_gains(
            groups.order, groups.start, parents, prev, prev_tot, hist, tot, rows.row_cells, rows.tail_ptr,
            rows.tail_cell, rows.cell_start, rows.default_cell, qg, qh, 2.0 ** (-s), lam, min_rows, best,
        )  # fmt: skip
        return hist, tot, best

    parent_of = rng.integers(-1, 3, n)
    parents = RowGroups.of(parent_of, 3)
    none = np.zeros(0, dtype=np.int64)
    prev, prev_tot, _ = gains(parents, none, np.empty((0, cells, 3), dtype=np.int64), np.empty((0, 3), dtype=np.int64))
    split = np.array([0, 2])  # parents 0 and 2 split, 1 is a leaf
    side = rng.integers(0, 2, n)
    child = np.where(np.isin(parent_of, split), 2 * np.searchsorted(split, parent_of) + side, -1)
    children = RowGroups.of(child, 4)
    by_rows = gains(children, none, prev, prev_tot)
    subtracted = gains(children, split, prev, prev_tot)
    for a, b in zip(by_rows, subtracted, strict=True):
        assert a.tobytes() == b.tobytes()
    assert np.isinf(by_rows[2][:, 0]).all()  # the constant feature never splits
    assert np.isfinite(by_rows[2]).any()


def _scan_reference(
    hist: np.ndarray, tot: np.ndarray, cell_start: np.ndarray, default_cell: np.ndarray, inv: float, lam: float, m: int
) -> tuple[np.ndarray, np.ndarray]:
    """``scan``'s general loop in plain Python (Python floats are IEEE doubles: the same operations, the same
    values), every feature through it whatever its cells."""
    hist, best = hist.copy(), np.full((hist.shape[0], default_cell.shape[0]), -np.inf)
    for k in range(hist.shape[0]):
        tg, th, tn = (int(v) for v in tot[k])
        if tn == 0:
            continue
        for f in range(default_cell.shape[0]):
            lo, hi, d = int(cell_start[f]), int(cell_start[f + 1]), int(default_cell[f])
            others = [c for c in range(lo, hi) if c != d]
            hist[k, d] = (tg, th, tn) - hist[k, others].sum(axis=0)
            gl = hl = nl = 0
            b = -np.inf
            for c in range(lo, hi - 1):
                gl, hl, nl = gl + int(hist[k, c, 0]), hl + int(hist[k, c, 1]), nl + int(hist[k, c, 2])
                if nl < m or tn - nl < m:
                    continue
                fgl, fgr = gl * inv, (tg - gl) * inv
                dl, dr = hl * inv + lam, (th - hl) * inv + lam
                gain = (fgl * fgl / dl if dl > 0 else 0.0) + (fgr * fgr / dr if dr > 0 else 0.0)
                b = max(b, gain)
            best[k, f] = b
    return hist, best


@pytest.mark.parametrize("min_rows", [0, 1, 3])
def test_the_scan_of_two_cell_features_is_the_general_loops_bit_for_bit(min_rows: int) -> None:
    """Two-cell features (binary ones; their default cell first or second) take an unrolled scan: its filled cells
    and gains are the general loop's, bit for bit, next to features of one and of several cells."""
    rng = np.random.default_rng(7)
    n = 300
    slots = np.stack(
        [
            (rng.random(n) < 0.3).astype(np.uint8),  # default slot 0
            (rng.random(n) < 0.8).astype(np.uint8) * 3,  # default slot 3
            rng.integers(0, 5, n).astype(np.uint8),  # five cells
            np.full(n, 2, dtype=np.uint8),  # one cell
            (rng.random(n) < 0.01).astype(np.uint8),  # nearly constant: a side below min_rows
        ],
        axis=1,
    )
    rows = BinnedRows(slots, 5)
    assert sorted(np.diff(rows.cell_start).tolist()) == [1, 2, 2, 2, 5]
    g, h = rng.normal(size=n), rng.random(n)
    s = vote_scale(g, h)
    qg, qh = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    quantise(g, s, qg)
    quantise(h, s, qh)
    groups = RowGroups.of(rng.integers(-1, 4, n), 4)
    cells = int(rows.cell_start[-1]) + rows.row_cells.shape[1]
    hist, tot = np.empty((4, cells, 3), dtype=np.int64), np.empty((4, 3), dtype=np.int64)
    best = np.full((4, 5), -np.inf)
    none = np.zeros(0, dtype=np.int64)
    level_gains(
        groups.order, groups.start, none, hist[:0], tot[:0], hist, tot, rows.row_cells, rows.tail_ptr, rows.tail_cell,
        rows.cell_start, rows.default_cell, qg, qh, 2.0 ** (-s), 0.5, min_rows, best,
    )  # fmt: skip
    unfilled = hist.copy()
    for k in range(4):  # the defaults as the rows left them (nothing added), for the reference to fill
        unfilled[k, rows.default_cell] = 0
    want_hist, want_best = _scan_reference(
        unfilled, tot, rows.cell_start, rows.default_cell, 2.0 ** (-s), 0.5, min_rows
    )
    assert hist.tobytes() == want_hist.tobytes()
    assert best.tobytes() == want_best.tobytes()
    assert np.isfinite(best[:, [0, 1]]).all() and np.isinf(best[:, 3]).all()
