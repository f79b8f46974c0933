"""Distribution weights (Algorithm 2, equation 3).

W[i, j] re-weights this party's row i so that its rows, weighted, reproduce party j's released PSD counts: for row i
in leaf l of psd_j, W[i, j] = V_l^j / |S_l^j| (the density ratio; the paper prints its inverse). The verifier relies on
exactly this: summing W[:, j] over the local rows of any leaf of psd_j that holds local rows gives V_l^j, so a party
can rebuild an approximation of party j's histograms from its own rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fgbdt_chain.node.privacy.psd import PSD


def leaf_weights(leaves: np.ndarray, released: np.ndarray) -> np.ndarray:
    """Per-row weight V_l / |S_l| for rows with leaf ids `leaves`; a leaf without local rows simply gets no row."""
    local = np.bincount(leaves, minlength=released.shape[0])
    ratio = np.zeros(released.shape[0], dtype=np.float64)
    has_rows = local > 0
    ratio[has_rows] = released[has_rows] / local[has_rows]
    return ratio[leaves]


def weighted_leaf_counts(w_column: np.ndarray, leaves: np.ndarray, num_leaves: int) -> np.ndarray:
    """Sum of a weight column per leaf: what a verifier compares with the released counts."""
    return np.bincount(leaves, weights=np.asarray(w_column, dtype=np.float64), minlength=num_leaves)


def distribution_weights(
    X: np.ndarray, y: np.ndarray, psds: Sequence[PSD], delta: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Return (W of shape (n, M), w_star of shape (n,)) for this party's rows against all M published PSDs.

    `psds` holds every approved party's PSD including this party's own, in party order (column j = party j).
    w_star[i] = delta * sum_j W[i, j] * N_j / N with N_j = psds[j].total and N the sum of the totals (equation 3).
    When every released count is 0 (N == 0) there is no distribution to fit and w_star is all zeros.
    """
    y = np.asarray(y)
    n = y.shape[0]
    M = len(psds)
    W = np.zeros((n, M), dtype=np.float64)
    for j, psd in enumerate(psds):
        W[:, j] = leaf_weights(psd.leaf_of(X, y), psd.counts)
    totals = np.array([psd.total for psd in psds], dtype=np.float64)
    N = float(totals.sum())
    if M == 0 or N <= 0.0:
        return W, np.zeros(n, dtype=np.float64)
    w_star = delta * (W @ (totals / N))
    return W, w_star
