"""Tests of the distribution weights (node/privacy/weights.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fgbdt_chain.node.privacy.psd import PSD, build_psd
from fgbdt_chain.node.privacy.weights import distribution_weights, leaf_weights, weighted_leaf_counts

F = 4
LOWS = np.r_[np.zeros(F), 0.0]
HIGHS = np.r_[np.ones(F), 1.0]


def party_data(n: int, skew: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose features and labels are skewed differently per party (like the theta partition)."""
    rng = np.random.default_rng(seed)
    X = rng.beta(1.0 + skew, 1.0 + 2.0 * (1.0 - skew), size=(n, F))
    X[rng.random((n, F)) < 0.05] = np.nan
    y = (rng.random(n) < skew).astype(np.float64)
    return X, y


@pytest.fixture(scope="module")
def federation() -> tuple[list[tuple[np.ndarray, np.ndarray]], list[PSD]]:
    data = [party_data(n, skew, seed) for n, skew, seed in [(3000, 0.2, 1), (1200, 0.8, 2), (5000, 0.5, 3)]]
    psds = [
        build_psd(X, y, LOWS, HIGHS, depth=8, max_rows=60, epsilon=1.0, rng=np.random.default_rng(100 + j))
        for j, (X, y) in enumerate(data)
    ]
    return data, psds


def test_weighted_counts_reproduce_released_counts(
    federation: tuple[list[tuple[np.ndarray, np.ndarray]], list[PSD]],
) -> None:
    """The verifier's property: W-weighted local rows in a covered leaf of psd_j add up to V_l^j."""
    data, psds = federation
    for X, y in data:
        W, _ = distribution_weights(X, y, psds)
        assert W.shape == (X.shape[0], len(psds))
        for j, psd in enumerate(psds):
            leaves = psd.leaf_of(X, y)
            covered = np.bincount(leaves, minlength=psd.num_leaves) > 0
            got = weighted_leaf_counts(W[:, j], leaves, psd.num_leaves)
            np.testing.assert_allclose(got[covered], psd.counts[covered], rtol=1e-12, atol=1e-9)
            # Leaves without local rows get no weight: the column carries exactly the covered mass.
            assert np.all(got[~covered] == 0.0)
            assert math.isclose(W[:, j].sum(), psd.counts[covered].sum(), rel_tol=1e-12, abs_tol=1e-9)
            assert np.all(W[:, j] >= 0.0)


def test_uncovered_leaves_carry_no_weight() -> None:
    # psd over feature 0 only (dims: f0, f1, label): leaves (-inf, 0.5] and (0.5, inf).
    psd = PSD(
        num_dims=3, split_dim=np.array([0, -1, -1]), split_value=np.array([0.5, 0.0, 0.0]), counts=np.array([7.0, 9.0])
    )
    X = np.array([[0.1, 0.0], [0.2, 0.0], [0.4, 1.0]])  # all rows in the left leaf
    y = np.zeros(3)
    W, _ = distribution_weights(X, y, [psd])
    np.testing.assert_allclose(W[:, 0], [7 / 3] * 3)
    assert W[:, 0].sum() == pytest.approx(7.0)  # the right leaf's 9 are not spread over anybody


def test_hand_checked_small_case() -> None:
    dims, values = np.array([0, -1, -1]), np.array([0.5, 0.0, 0.0])  # one split of feature 0 at 0.5
    psd1 = PSD(num_dims=2, split_dim=dims, split_value=values, counts=np.array([4.0, 2.0]))  # N_1 = 6
    psd2 = PSD(num_dims=2, split_dim=dims, split_value=values, counts=np.array([1.0, 3.0]))  # N_2 = 4
    X = np.array([[0.2], [0.3], [0.8]])
    y = np.zeros(3)
    W, w_star = distribution_weights(X, y, [psd1, psd2])
    # Left leaf holds 2 local rows, right leaf 1: W = V / |S|.
    np.testing.assert_allclose(W, [[2.0, 0.5], [2.0, 0.5], [2.0, 3.0]])
    # N = 10: w* = W[:, 0] * 0.6 + W[:, 1] * 0.4.
    np.testing.assert_allclose(w_star, [1.4, 1.4, 2.4])
    _, w_star2 = distribution_weights(X, y, [psd1, psd2], delta=2.5)
    np.testing.assert_allclose(w_star2, 2.5 * np.array([1.4, 1.4, 2.4]))


def test_own_exact_psd_gives_unit_weights() -> None:
    X, y = party_data(2000, 0.3, 9)
    own = build_psd(X, y, LOWS, HIGHS, max_rows=50, epsilon=math.inf, rng=np.random.default_rng(0))
    W, w_star = distribution_weights(X, y, [own])
    np.testing.assert_allclose(W[:, 0], 1.0)
    np.testing.assert_allclose(w_star, 1.0)  # delta * W * N/N


def test_w_star_matches_equation_3(federation: tuple[list[tuple[np.ndarray, np.ndarray]], list[PSD]]) -> None:
    data, psds = federation
    X, y = data[1]
    W, w_star = distribution_weights(X, y, psds, delta=0.7)
    totals = [p.total for p in psds]
    N = sum(totals)
    expected = 0.7 * sum(W[:, j] * totals[j] / N for j in range(len(psds)))
    np.testing.assert_allclose(w_star, expected, rtol=1e-12)


def test_degenerate_inputs() -> None:
    zero = PSD(num_dims=2, split_dim=np.array([-1]), split_value=np.array([0.0]), counts=np.array([0.0]))
    X = np.array([[0.1], [0.9]])
    y = np.zeros(2)
    W, w_star = distribution_weights(X, y, [zero])
    assert np.all(W == 0.0) and np.all(w_star == 0.0)
    W, w_star = distribution_weights(np.empty((0, 1)), np.empty(0), [zero])
    assert W.shape == (0, 1) and w_star.shape == (0,)
    W, w_star = distribution_weights(X, y, [])
    assert W.shape == (2, 0) and np.all(w_star == 0.0)


def test_leaf_weights_helper() -> None:
    leaves = np.array([0, 0, 2, 2, 2])
    np.testing.assert_allclose(leaf_weights(leaves, np.array([1.0, 5.0, 6.0])), [0.5, 0.5, 2.0, 2.0, 2.0])
