"""Raw values counted in the buckets of sorted bounds, every feature in one compiled pass over the rows.

Why: a party's binning sketch counts each feature's values in two grids. One ``np.searchsorted`` per feature and
grid reads a strided column of a row-major matrix each time: 0.45 s of the preparation at 1,000,000 rows of 28
features and four parties. Here a row's features are looked up together, in their memory order.

Each value's bucket is ``np.searchsorted(bounds, x, side="left")`` exactly (the number of bounds below it, by the
same float comparison), so a value equal to a bound lands below it; NaN is missing and lands in none.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def _below(bounds: np.ndarray, lo: int, hi: int, x: float) -> int:  # pragma: no cover - compiled
    """How many of ``bounds[lo:hi]`` (sorted) are less than ``x``."""
    start = lo
    while lo < hi:
        mid = (lo + hi) >> 1
        if bounds[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo - start


@njit(cache=True, nogil=True)
def _count(  # pragma: no cover - compiled
    X: np.ndarray, bounds: np.ndarray, first: np.ndarray, out_first: np.ndarray
) -> np.ndarray:
    counts = np.zeros(out_first[-1], dtype=np.int64)
    n, f = X.shape
    for i in range(n):
        for j in range(f):
            if out_first[j + 1] == out_first[j]:
                continue
            x = X[i, j]
            if np.isnan(x):
                continue
            counts[out_first[j] + _below(bounds, first[j], first[j + 1], x)] += 1
    return counts


def bucket_counts_by_feature(X: np.ndarray, bounds: Sequence[np.ndarray | None]) -> list[np.ndarray | None]:
    """Per column ``j`` of ``X`` (rows, features): how many present values fall in each bucket of ``bounds[j]``
    (``len(bounds[j]) + 1`` buckets, as ``np.bincount(np.searchsorted(bounds[j], x, "left"))``); None where
    ``bounds[j]`` is None (that column is not counted)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != len(bounds):
        raise ValueError(f"X must be (rows, {len(bounds)}), got shape {X.shape}")
    arrays = [np.zeros(0) if b is None else np.asarray(b, dtype=np.float64) for b in bounds]
    first = np.zeros(len(bounds) + 1, dtype=np.int64)  # where each column's bounds start in ``flat``
    np.cumsum([a.size for a in arrays], out=first[1:])
    out_first = np.zeros(len(bounds) + 1, dtype=np.int64)  # where each column's counts start in the result
    np.cumsum([0 if b is None else a.size + 1 for a, b in zip(arrays, bounds, strict=True)], out=out_first[1:])
    flat = np.concatenate(arrays) if arrays else np.zeros(0)
    counts = _count(X, flat, first, out_first)
    return [None if b is None else counts[out_first[j] : out_first[j + 1]] for j, b in enumerate(bounds)]
