"""The loss functions' derivatives."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.node.model.objective import gradients, sigmoid


def _two_halves(x: np.ndarray) -> np.ndarray:
    """The logistic function as two masked halves: ``1 / (1 + e^-x)`` where ``x >= 0``, ``e^x / (1 + e^x)`` below."""
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    e = np.exp(x[~pos])
    out[~pos] = e / (1.0 + e)
    return out


@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0, 800.0])
def test_sigmoid_is_the_stable_formula_bit_for_bit(scale: float) -> None:
    """Every row's value is the stable formula's float exactly (the model's splits and leaves rest on them), with
    no overflow at large magnitudes."""
    rng = np.random.default_rng(int(scale * 10))
    x = np.concatenate([rng.normal(size=8001) * scale, [0.0, -0.0, np.inf, -np.inf, 745.0, -745.0]])
    with np.errstate(over="raise"):
        got = sigmoid(x)
    assert np.array_equal(got.view(np.int64), _two_halves(x).view(np.int64))
    assert np.all((got >= 0) & (got <= 1))
    assert sigmoid(np.array([np.nan]))[0] != sigmoid(np.array([np.nan]))[0]  # NaN stays NaN


def test_gradients_of_both_objectives() -> None:
    y = np.array([0.0, 1.0, 1.0])
    score = np.array([0.0, 2.0, -1.0])
    g, h = gradients("binary", y, score)
    p = 1 / (1 + np.exp(-score))
    assert np.allclose(g, p - y) and np.allclose(h, p * (1 - p))
    g, h = gradients("regression", y, score)
    assert np.array_equal(g, score - y) and np.array_equal(h, np.ones(3))
    with pytest.raises(ValueError, match="unknown objective 'poisson'"):
        gradients("poisson", y, score)
