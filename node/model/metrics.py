"""Evaluation metrics, written out so that they need nothing beyond numpy."""

from __future__ import annotations

import numpy as np


def error_rate(y: np.ndarray, proba: np.ndarray) -> float:
    """Share of rows whose 0.5-thresholded probability disagrees with the {0, 1} label."""
    return float(np.mean((proba > 0.5) != (y > 0.5)))


def auc(y: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve by the rank-sum statistic, ties sharing their average rank; NaN for one class."""
    pos = y > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    sorted_scores = score[order]
    ranks = np.empty(len(score), dtype=np.float64)
    # average ranks over runs of equal scores
    boundaries = np.flatnonzero(np.diff(sorted_scores)) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [len(score)]))
    avg = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(avg, ends - starts)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def rmse(y: np.ndarray, pred: np.ndarray) -> float:
    """Root mean squared error (regression tasks)."""
    return float(np.sqrt(np.mean((pred - y) ** 2)))
