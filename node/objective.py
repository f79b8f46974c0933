"""Loss functions: first and second derivatives of the loss at the current raw scores."""

from __future__ import annotations

import numpy as np

OBJECTIVES = ("binary", "regression")


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function."""
    out = np.empty_like(x, dtype=np.float64)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    e = np.exp(x[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def gradients(objective: str, y: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(g, h) per row: logistic loss for ``binary`` (y in {0, 1}), squared error for ``regression``."""
    if objective == "binary":
        p = sigmoid(score)
        return p - y, p * (1.0 - p)
    if objective == "regression":
        return score - y, np.ones_like(score)
    raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
