"""The endorsement check: equation 11, the level overlap the threshold applies to, and the verifier's estimate."""

from __future__ import annotations

import numpy as np
import pytest

from ledger.reference import NodeHistograms
from node.histogram import BinnedRows
from node.psd import build_psd
from node.verify import endorsement_overlap, estimate_histograms, level_overlap, overlap, relative_differences
from node.weights import distribution_weights


def test_equation_11_with_magnitudes() -> None:
    claimed_g, est_g = np.array([1.0, -2.0, 0.0, 0.5]), np.array([0.5, -2.0, 0.0, -0.5])
    claimed_n, est_n = np.array([10.0, 4.0, 0.0, 0.0]), np.array([5.0, 4.0, 0.0, 2.0])
    # g terms: 0.5/1 + 0 + (both 0) + 1/0.5 -> 2.5 ; n terms: 5/10 + 0 + (both 0) + 2/2 -> 1.5
    assert overlap(claimed_g, claimed_n, est_g, est_n) == pytest.approx(4.0)
    assert relative_differences(claimed_n, est_n) == (pytest.approx(1.5), 3)


def test_level_overlap_is_zero_for_a_perfect_estimate_and_grows_with_inflation() -> None:
    rng = np.random.default_rng(0)
    g, n = rng.normal(size=(5, 2, 9)), rng.integers(0, 50, (5, 2, 9)).astype(float)
    assert level_overlap(g, n, g, n) == 0.0
    assert level_overlap(2 * g, n, g, n) == pytest.approx(0.25)  # |2a - a| / |2a| = 1/2 on g, 0 on n
    assert level_overlap(2 * g, 2 * n, g, n) == pytest.approx(0.5)
    assert level_overlap(-g, n, g, n) == pytest.approx(1.0)  # |-a - a| / |a| = 2 on g
    assert level_overlap(1.5 * g, n, g, n) < level_overlap(2 * g, n, g, n) < level_overlap(-g, n, g, n)


def test_verifier_estimate_reproduces_the_other_partys_counts_where_the_psd_is_exact() -> None:
    """A verifier whose rows cover the same cells as the checked party rebuilds its counts per PSD leaf exactly."""
    rng = np.random.default_rng(1)
    X = rng.integers(0, 2, (3000, 3)).astype(float)
    y = (rng.random(3000) < 0.3).astype(float)
    lows, highs = np.zeros(4), np.ones(4)
    mine, theirs = np.arange(0, 1500), np.arange(1500, 3000)
    psds = [
        build_psd(
            X[idx],
            y[idx],
            lows,
            highs,
            depth=4,
            max_rows=1,
            epsilon=np.inf,
            rng=np.random.default_rng(5),
            label_first=True,
        )
        for idx in (mine, theirs)
    ]
    assert psds[0].num_nodes > 1 and int(psds[0].split_dim[0]) == 3  # the label (dimension F = 3) at the root
    W, _ = distribution_weights(X[mine], y[mine], psds, 1.0)
    slots = (X[mine] + 1).astype(np.uint8)  # value 0 -> slot 1, value 1 -> slot 2
    rows = BinnedRows(slots, 3)
    node = np.zeros(len(mine), dtype=np.int64)
    cands = np.array([[0, 1]])
    g = rng.normal(size=len(mine))
    est_g, est_n = estimate_histograms(rows, node, 1, cands, g, W[:, 1])
    # with depth 4 over 4 binary dimensions every PSD leaf is one cell, so the counts are theirs exactly
    their_slots = (X[theirs] + 1).astype(np.uint8)
    for c, f in enumerate(cands[0]):
        np.testing.assert_allclose(est_n[0, c], np.bincount(their_slots[:, f], minlength=3), rtol=1e-9)
    assert est_g.shape == (1, 2, 3)


def test_an_all_zero_level_is_endorsed_and_anything_else_is_measured() -> None:
    zero = NodeHistograms((0, 1), ((0, 0), (0, 0)), ((0, 0), (0, 0)), ((0, 0), (0, 0)))
    est_g, est_n = np.array([[[0.4, 0.1], [0.2, 0.3]]]), np.array([[[2.0, 1.0], [1.0, 2.0]]])
    claimed = np.zeros((1, 2, 2))
    assert level_overlap(claimed, claimed, est_g, est_n) == pytest.approx(1.0)  # what the bare overlap says
    assert endorsement_overlap([zero], claimed, claimed, est_g, est_n) == 0.0  # a null player: signed
    stray = NodeHistograms((0, 1), ((0, 0), (0, 0)), ((0, 0), (0, 0)), ((0, 1), (0, 0)))  # one row somewhere
    n = np.array([[[0.0, 1.0], [0.0, 0.0]]])
    assert endorsement_overlap([stray], claimed, n, est_g, est_n) == level_overlap(claimed, n, est_g, est_n) > 0.3
