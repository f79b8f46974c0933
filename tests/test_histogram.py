"""The level kernel against a plain dense computation, on sparse data with missing slots."""

from __future__ import annotations

import numpy as np
import pytest

from node.histogram import BinnedRows, votes_from_gains


def _data(seed: int, n: int = 600, f: int = 9, nb: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    slots = np.where(rng.random((n, f)) < 0.7, 1, rng.integers(0, nb, (n, f))).astype(np.uint8)
    slots[:, 3] = 2  # a constant feature: no valid split
    return slots, rng.normal(size=n), rng.random(n)


def _dense_best(
    slots: np.ndarray, group: np.ndarray, groups: int, g: np.ndarray, h: np.ndarray, nb: int, lam: float, min_rows: int
) -> np.ndarray:
    f = slots.shape[1]
    best = np.full((groups, f), -np.inf)
    for k in range(groups):
        rows = group == k
        for j in range(f):
            hg = np.bincount(slots[rows, j], weights=g[rows], minlength=nb)
            hh = np.bincount(slots[rows, j], weights=h[rows], minlength=nb)
            hn = np.bincount(slots[rows, j], minlength=nb)
            for t in range(nb - 1):
                nl, nr = hn[: t + 1].sum(), hn[t + 1 :].sum()
                if nl < min_rows or nr < min_rows:
                    continue
                gl, hl = hg[: t + 1].sum(), hh[: t + 1].sum()
                gr, hr = hg.sum() - gl, hh.sum() - hl
                best[k, j] = max(best[k, j], gl * gl / (hl + lam) + gr * gr / (hr + lam))
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("min_rows", [1, 15])
def test_best_gains_match_dense_computation(seed: int, min_rows: int) -> None:
    slots, g, h = _data(seed)
    rows = BinnedRows(slots, 6)
    group = np.random.default_rng(seed + 10).integers(-1, 5, len(g))  # -1: rows outside every open node
    fast = rows.best_gains(group, 5, g, h, 0.5, min_rows)
    slow = _dense_best(slots, group, 5, g, h, 6, 0.5, min_rows)
    assert np.array_equal(np.isinf(fast), np.isinf(slow))
    np.testing.assert_allclose(fast[np.isfinite(fast)], slow[np.isfinite(slow)], rtol=1e-9)
    assert np.all(np.isinf(fast[:, 3]))  # the constant feature never splits


def test_candidate_histograms_match_bincount() -> None:
    slots, g, h = _data(5)
    rows = BinnedRows(slots, 6)
    group = np.random.default_rng(3).integers(-1, 4, len(g))
    feats = np.array([[0, 1], [2, 0], [8, 7], [1, 1]])
    sg, sh, sn = rows.candidate_histograms(group, 4, feats, g, h)
    for k in range(4):
        sel = group == k
        for c in range(2):
            col = slots[sel, feats[k, c]]
            np.testing.assert_allclose(sg[k, c], np.bincount(col, weights=g[sel], minlength=6))
            np.testing.assert_allclose(sh[k, c], np.bincount(col, weights=h[sel], minlength=6))
            assert np.array_equal(sn[k, c], np.bincount(col, minlength=6))


def test_votes_take_the_lowest_index_on_ties_and_abstain_without_a_split() -> None:
    best = np.array([[1.0, 3.0, 3.0], [-np.inf, -np.inf, -np.inf], [2.0, -np.inf, 1.0]])
    assert votes_from_gains(best).tolist() == [1, -1, 0]


def test_rejects_bad_shapes_and_slots() -> None:
    with pytest.raises(ValueError, match="out of range"):
        BinnedRows(np.full((3, 2), 7, dtype=np.uint8), 6)
    rows = BinnedRows(np.zeros((3, 2), dtype=np.uint8), 6)
    with pytest.raises(ValueError, match="shape"):
        rows.best_gains(np.zeros(2, dtype=np.int64), 1, np.zeros(3), np.zeros(3), 0.1)
