"""The preparation's compiled kernels give numpy's answers exactly: ``column_stats`` the ranges and integer flags of
the masked-array form, ``bucketing`` ``np.searchsorted``'s buckets, ``psd_leaves`` the level-by-level
descent of a PSD's tree; on missing values, infinities, signed zeros, values equal to a bound and empty inputs."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.node.kernels.bucketing import bucket_counts_by_feature
from fgbdt_chain.node.kernels.column_stats import column_stats
from fgbdt_chain.node.privacy.binning import INTEGER_LIMIT, feature_ranges, schema_integers
from fgbdt_chain.node.privacy.psd import build_psd, psd_rng

SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0**52, -(2.0**52) + 1, 0.5)


def _matrix(rng: np.random.Generator) -> np.ndarray:
    n, f = int(rng.integers(0, 120)), int(rng.integers(1, 6))
    X = rng.standard_normal((n, f)) * rng.choice([1.0, 1e3, 1e16], f)
    for j in range(f):
        kind = rng.integers(0, 5)
        if kind == 0:
            X[:, j] = np.round(X[:, j])
        elif kind == 1:
            X[:, j] = np.nan
        elif kind == 2 and n:
            X[rng.random(n) < 0.3, j] = np.nan
        elif kind == 3 and n:
            X[rng.integers(0, n, 4), j] = rng.choice(SPECIALS, 4)
    return X


def _numpy_stats(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        present = ~np.isnan(X)
        any_present = present.any(axis=0)
        low = np.where(any_present, np.min(np.where(present, X, np.inf), axis=0, initial=np.inf), 0.0)
        high = np.where(any_present, np.max(np.where(present, X, -np.inf), axis=0, initial=-np.inf), 0.0)
        values = np.where(present, X, 0.0)
        whole = (values == np.floor(values)) & (np.abs(values) < INTEGER_LIMIT)
    return low, high, np.all(whole | ~present, axis=0) & any_present


@pytest.mark.parametrize("seed", range(4))
def test_ranges_and_integer_flags_are_numpys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(60):
        X = _matrix(rng)
        low, high, integers = _numpy_stats(X)
        got_low, got_high = feature_ranges(X)
        assert np.array_equal(got_low, low) and np.array_equal(got_high, high)
        assert np.array_equal(schema_integers(X), integers)


def test_column_stats_marks_absent_columns_and_refuses_a_vector() -> None:
    X = np.array([[np.nan, 1.0, np.inf], [np.nan, 2.5, 3.0]])
    low, high, present, whole = column_stats(X, INTEGER_LIMIT)
    assert present.tolist() == [False, True, True] and whole.tolist() == [True, False, False]
    assert low[1:].tolist() == [1.0, 3.0] and high[1:].tolist() == [2.5, np.inf] and low[0] == np.inf
    with pytest.raises(ValueError, match="2-D"):
        column_stats(np.zeros(3), INTEGER_LIMIT)


@pytest.mark.parametrize("seed", range(4))
def test_buckets_are_searchsorteds(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    for _ in range(60):
        X = _matrix(rng)
        bounds = [np.sort(rng.standard_normal(int(rng.integers(0, 30))) * 1e3) for _ in range(X.shape[1])]
        for j, b in enumerate(bounds):  # values equal to a bound land below it
            if b.size and X.shape[0]:
                X[rng.integers(0, X.shape[0]), j] = b[rng.integers(0, b.size)]
        counted = [None if rng.random() < 0.25 else b for b in bounds]
        for j, (b, got) in enumerate(zip(counted, bucket_counts_by_feature(X, counted), strict=True)):
            if b is None:
                assert got is None
                continue
            col = X[:, j]
            want = np.bincount(np.searchsorted(b, col[~np.isnan(col)], side="left"), minlength=b.size + 1)
            assert np.array_equal(got, want)


def test_bucketing_refuses_wrong_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(rows, 2\)"):
        bucket_counts_by_feature(np.zeros((3, 3)), [np.zeros(1), np.zeros(1)])


@pytest.mark.parametrize("seed", range(3))
def test_psd_leaves_are_the_level_by_level_descent(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    for _ in range(25):
        n, f = int(rng.integers(2, 400)), int(rng.integers(1, 5))
        X = rng.standard_normal((n, f))
        X[rng.random((n, f)) < 0.15] = np.nan
        y = rng.integers(0, 2, n).astype(np.float64)
        low, high = feature_ranges(X)
        psd = build_psd(
            X,
            y,
            np.append(low, 0.0),
            np.append(high, 1.0),
            depth=int(rng.integers(1, 9)),
            max_rows=int(rng.integers(2, 40)),
            epsilon=1.0,
            rng=psd_rng(seed, 0),
            label_levels=int(rng.integers(0, 3)),
        )
        node = np.zeros(n, dtype=np.int64)  # every row down one level at a time; NaN compares false and goes left
        for _ in range(psd.height):
            d = psd.split_dim[node]
            value = np.where(d == f, y, X[np.arange(n), np.clip(d, 0, f - 1)])
            go_right = value > psd.split_value[node]
            node = np.where(d < 0, node, np.where(go_right, psd.right[node], psd.left[node]))
        assert np.array_equal(psd.leaf_of(X, y), psd.leaf_index[node])
