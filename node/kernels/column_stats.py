"""Per-column statistics of a raw feature matrix in one compiled pass: the range and the integer flag of a schema.

Why: a task's schema (each feature's [low, high] and whether it holds only integers) is derived from the pooled
training rows in the simulator and from the data file by the CLI. The numpy form builds six matrix-sized
temporaries (masks, filled copies, floors) and took 0.8 s of the preparation at 1,000,000 rows of 28 features, more
than a third of it; one pass over the rows in their memory order keeps a few numbers per column instead.

The results are the numpy form's exactly: a minimum and a maximum are exact whatever the order, and the integer test
is the same two float comparisons (``x == floor(x)`` and ``|x| < limit``) on every present value.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _scan(X: np.ndarray, limit: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    n, f = X.shape
    low = np.full(f, np.inf)
    high = np.full(f, -np.inf)
    present = np.zeros(f, dtype=np.bool_)
    whole = np.ones(f, dtype=np.bool_)
    for i in range(n):
        for j in range(f):
            x = X[i, j]
            if np.isnan(x):
                continue
            present[j] = True
            if x < low[j]:
                low[j] = x
            if x > high[j]:
                high[j] = x
            if whole[j] and not (x == np.floor(x) and abs(x) < limit):
                whole[j] = False
    return low, high, present, whole


def column_stats(X: np.ndarray, limit: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per column of ``X`` (rows, features): the least and the greatest present (non-NaN) value (+inf and -inf
    where none is), whether any value is present, and whether every present value is an integer of magnitude below
    ``limit``. NaN is missing; infinities are values (never integers)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (rows, features), got shape {X.shape}")
    return _scan(X, float(limit))
