"""Loss functions: first and second derivatives of the loss at the current raw scores."""

from __future__ import annotations

import numpy as np

from fgbdt_chain.ledger.spec.modes import OBJECTIVES


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function: ``1 / (1 + e^-x)`` for ``x >= 0`` and ``e^x / (1 + e^x)`` below,
    both from ``e^-|x|``, which never overflows. Computing both branches on every row and choosing costs a third
    of masking the rows into two halves and back, with the same operations on the same values."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def gradients(objective: str, y: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(g, h) per row: logistic loss for ``binary`` (y in {0, 1}), squared error for ``regression``."""
    if objective == "binary":
        p = sigmoid(score)
        return p - y, p * (1.0 - p)
    if objective == "regression":
        return score - y, np.ones_like(score)
    raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
