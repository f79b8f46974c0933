"""The leaf of a PSD tree that each row falls in, one compiled descent per row.

Why: every party places its rows in every party's PSD twice (its distribution weights and its verifiers'
estimators), M^2 descents of all its rows per task. Level by level in numpy (masks, fancy-indexed gathers of
the split columns) they took 0.95 s of the preparation at 1,000,000 rows and four parties; a row's descent here
reads its few split values in place.

Same rule as the PSD's definition: dimension ``F`` is the label, a row goes right where its value is greater than
the split value and left otherwise, so a missing (NaN) value goes left.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _descend(  # pragma: no cover - compiled
    X: np.ndarray, y: np.ndarray, nodes: np.ndarray, split_value: np.ndarray, height: int
) -> np.ndarray:
    n, f = X.shape
    split_dim, left, right, leaf_index = nodes[0], nodes[1], nodes[2], nodes[3]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        node = 0
        for _ in range(height):
            d = split_dim[node]
            if d < 0:
                break
            v = y[i] if d == f else X[i, d]
            node = right[node] if v > split_value[node] else left[node]
        out[i] = leaf_index[node]
    return out


def leaves_of(
    X: np.ndarray, y: np.ndarray, nodes: Sequence[np.ndarray], split_value: np.ndarray, height: int
) -> np.ndarray:
    """The leaf index of each row of ``X`` (rows, F) with labels ``y`` after at most ``height`` splits: ``nodes``
    holds the tree's breadth-first ``split_dim`` (-1 at a leaf), ``left``, ``right`` and ``leaf_index`` arrays."""
    return _descend(
        np.ascontiguousarray(X, dtype=np.float64),
        np.ascontiguousarray(y, dtype=np.float64),
        np.array(nodes, dtype=np.int64),  # one fresh (writable) array: one compiled signature for every caller
        np.array(split_value, dtype=np.float64),
        int(height),
    )
