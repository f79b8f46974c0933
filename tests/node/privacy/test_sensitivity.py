"""A search over adversarial neighbouring datasets: every statistic a private party releases moves, when one row is
added or removed, by at most the sensitivity its noise is calibrated to.

Each trial draws a small party (1 to 40 rows) whose rows sit at the extremes the declared ranges allow (the lowest
and highest bins, the missing slot, gradients at +-1 where the labels and scores make them so, hessians at their
largest, 1/4 at a score of 0) and one more row of the same kind, then computes the statistic exactly (the released
value before its noise) on both datasets. The statistics are computed by the code a party runs, with the earlier
releases (the scores, the split path, the PSD's structure, the sketch's grid) held fixed, as adaptive composition
conditions on them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.fixed_point import ONE
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.kernels import limbs
from fgbdt_chain.node.kernels.histogram import FixedRows
from fgbdt_chain.node.privacy.accountant import (
    HISTOGRAM_SENSITIVITY,
    LEAF_GRADIENT_SHARE,
    ROW_BOUNDS,
    VOTE_SENSITIVITY,
    leaf_plan,
    plan,
)
from fgbdt_chain.node.privacy.binning import bucket_counts, cell_bounds, grid_bounds, sketched_features
from fgbdt_chain.node.privacy.psd import build_psd
from fgbdt_chain.node.protocol.local_party import LocalParty
from fgbdt_chain.node.sim.random_split import party_leaf_sums

TRIALS = 150
FEATURES, BINS = 3, 6
PARAMS = TrainParams(trees=4, depth=3, bins=BINS, objective="binary")
PRIVATE = plan(1.0, 1e-5, PARAMS.trees, PARAMS.depth)
SCORES = np.array([-30.0, 0.0, 30.0])
"""Scores that put a row's gradient at -1, +1 (far from its label) or its hessian at 1/4 (a score of 0)."""


def extreme_rows(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` rows of bin slots at the extremes (missing slot 0, the lowest bin 1, the highest ``BINS``) or anywhere,
    labels 0 or 1, and scores from :data:`SCORES`."""
    pick = rng.random((n, FEATURES)) < 0.75
    extreme = rng.choice([0, 1, BINS], size=(n, FEATURES))
    anywhere = rng.integers(0, BINS + 1, size=(n, FEATURES))
    slots = np.where(pick, extreme, anywhere).astype(np.uint8)
    return slots, rng.integers(0, 2, n).astype(np.float64), rng.choice(SCORES, n)


Rows = tuple[np.ndarray, np.ndarray, np.ndarray]


def neighbours(rng: np.random.Generator) -> tuple[Rows, Rows]:
    """A dataset and the same with one more row at the extremes (removing it is the other direction)."""
    n = int(rng.integers(1, 41))
    small = extreme_rows(rng, n)
    extra = extreme_rows(rng, 1)
    big = (
        np.concatenate([small[0], extra[0]]),
        np.concatenate([small[1], extra[1]]),
        np.concatenate([small[2], extra[2]]),
    )
    return small, big


def party(slots: np.ndarray, y: np.ndarray, score: np.ndarray) -> LocalParty:
    """A private party as FV-tree builds one under a budget: every row weighs 1."""
    p = LocalParty(slots, y, PARAMS, np.ones(y.size), privacy=PRIVATE)
    p.score = score.copy()
    return p


def nodes_of(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    return rng.integers(-1, k, size=n)  # -1: a row in a closed node


def test_vote_utilities_move_by_at_most_the_vote_sensitivity() -> None:
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(TRIALS):
        small, big = neighbours(rng)
        k = int(rng.integers(1, 4))
        where_small = nodes_of(rng, small[0].shape[0], k)
        where = np.concatenate([where_small, rng.integers(0, k, 1)])
        gains = []
        for (slots, y, score), node in ((small, where_small), (big, where)):
            p = party(slots, y, score)
            g, _, h_vote = p.gradients()
            gv, hv = p.vote_gradients(g, h_vote)
            best = p.rows.best_gains(node, k, gv, hv, PARAMS.lam, p.vote_min_rows)
            floor = p.vote_floor(node, k, gv, hv)
            assert floor is not None
            gains.append(np.maximum(best, floor[:, None]))  # the utilities exponential_votes draws from
        a, b = gains
        assert np.isfinite(a).all() and np.isfinite(b).all()  # every feature electable, whatever the rows
        worst = max(worst, float(np.max(np.abs(a - b))))
    assert 0 < worst <= VOTE_SENSITIVITY


def test_without_the_floor_one_row_decides_whether_a_party_votes_at_all() -> None:
    """What the floor is for: the kernel's own gains give a node without rows no utility, so its vote was none."""
    slots = np.ones((2, FEATURES), dtype=np.uint8)
    p = party(slots, np.ones(2), np.zeros(2))
    g, _, h_vote = p.gradients()
    gv, hv = p.vote_gradients(g, h_vote)
    node = np.array([0, 0])  # node 1 holds no row of this party
    best = p.rows.best_gains(node, 2, gv, hv, PARAMS.lam, p.vote_min_rows)
    assert not np.isfinite(best[1]).any()
    floor = p.vote_floor(node, 2, gv, hv)
    assert floor is not None and floor[1] == 0.0
    votes = p.votes_from(best, 0, 0, floor)
    assert votes[1] >= 0  # a vote like any other node's
    with pytest.raises(ValueError, match="vote_floor"):
        p.votes_from(best, 0, 0)


def level_release(
    slots: np.ndarray, y: np.ndarray, score: np.ndarray, node: np.ndarray, cand: np.ndarray
) -> np.ndarray:
    """One level's exact histogram release, every quantity in units of its per-row bound: both candidates' (g, h, n)
    per bin of every open node, and the nodes' totals (a root level's)."""
    p = party(slots, y, score)
    g, h, _ = p.gradients()
    rows = FixedRows.of(g, h)
    sums = p.rows.group_candidates_fixed(p.rows.groups(node, cand.shape[0]), cand, rows)
    g_sum = np.asarray(limbs.join(sums.g_hi, sums.g_lo).tolist(), dtype=np.float64) / ONE / ROW_BOUNDS["g"]
    h_sum = np.asarray(limbs.join(sums.h_hi, sums.h_lo).tolist(), dtype=np.float64) / ONE / ROW_BOUNDS["h"]
    n_sum = sums.n.astype(np.float64) / ROW_BOUNDS["n"]
    totals = np.stack([g_sum[:, 0].sum(axis=-1), h_sum[:, 0].sum(axis=-1), n_sum[:, 0].sum(axis=-1)])
    return np.concatenate([g_sum.ravel(), h_sum.ravel(), n_sum.ravel(), totals.ravel()])


def test_a_level_of_histograms_moves_by_at_most_its_l2_sensitivity() -> None:
    rng = np.random.default_rng(2)
    worst = 0.0
    for _ in range(TRIALS):
        small, big = neighbours(rng)
        k = int(rng.integers(1, 4))
        cand = np.stack([rng.choice(FEATURES, size=2, replace=False) for _ in range(k)]).astype(np.int64)
        where_small = nodes_of(rng, small[0].shape[0], k)
        where = np.concatenate([where_small, rng.integers(0, k, 1)])
        diff = level_release(*small, where_small, cand) - level_release(*big, where, cand)
        worst = max(worst, float(np.linalg.norm(diff)))
    assert 0 < worst <= HISTOGRAM_SENSITIVITY + 1e-9


def test_a_tree_of_leaf_sums_moves_by_at_most_one_unit_of_its_noise() -> None:
    rng = np.random.default_rng(3)
    exact = leaf_plan(math.inf, 1e-5, 4)
    a = LEAF_GRADIENT_SHARE
    worst = 0.0
    for _ in range(TRIALS):
        (slots_s, y_s, score_s), (slots_b, y_b, score_b) = neighbours(rng)
        feature = int(rng.integers(0, FEATURES))
        released = []
        for slots, y, score in ((slots_s, y_s, score_s), (slots_b, y_b, score_b)):
            p = party(slots, y, score)
            g, h, _ = p.gradients()
            leaf = slots[:, feature].astype(np.int64)
            released.append(party_leaf_sums(leaf, g, h, BINS + 1, exact, rng))
        dg = released[1][0] - released[0][0]
        dh = released[1][1] - released[0][1]
        # in units of the noise per unit multiplier: g's sd is 1 / sqrt(a), h's is (1/4) / sqrt(1 - a)
        moved = math.sqrt(a * float(dg @ dg) / ROW_BOUNDS["g"] ** 2 + (1 - a) * float(dh @ dh) / ROW_BOUNDS["h"] ** 2)
        worst = max(worst, moved)
    assert 0 < worst <= 1.0 + 1e-9


def test_psd_leaf_counts_move_by_one_row() -> None:
    rng = np.random.default_rng(4)
    low, high = np.zeros(FEATURES + 1), np.ones(FEATURES + 1)
    for _ in range(40):
        n = int(rng.integers(1, 200))
        X = rng.choice([0.0, 1.0, 0.5, np.nan], size=(n, FEATURES), p=[0.4, 0.4, 0.1, 0.1])
        y = rng.integers(0, 2, n).astype(np.float64)
        psd = build_psd(X, y, low, high, depth=6, max_rows=8, epsilon=1.0, rng=rng, label_levels=1)
        row = rng.choice([0.0, 1.0, np.nan], size=(1, FEATURES))
        label = rng.integers(0, 2, 1).astype(np.float64)
        before = np.bincount(psd.leaf_of(X, y), minlength=psd.counts.size)
        after = np.bincount(psd.leaf_of(np.vstack([X, row]), np.concatenate([y, label])), minlength=psd.counts.size)
        assert int(np.abs(after - before).sum()) == 1


def test_sketch_counts_move_by_at_most_one_per_sketched_feature() -> None:
    rng = np.random.default_rng(5)
    low, high = np.array([0.0, -5.0, 3.0, 2.0]), np.array([1.0, 5.0, 3.0, 1000.0])  # feature 2 is a single point
    features = sketched_features(low, high)
    for _ in range(60):
        n = int(rng.integers(0, 50))
        X = rng.choice([0.0, 1.0], size=(n, 4)) * (high - low) + low
        row = np.where(rng.random(4) < 0.2, np.nan, rng.choice([0.0, 1.0], size=4) * (high - low) + low)
        moved = 0
        for stage in ("cells", "grid"):
            for f in range(4):
                if not high[f] > low[f]:
                    continue
                bounds = cell_bounds(float(low[f]), float(high[f]))
                if stage == "grid":
                    starts = np.arange(0, bounds.size + 1, 2, dtype=np.int64)
                    bounds = grid_bounds(float(low[f]), float(high[f]), starts, np.full(starts.size, 3))
                before = bucket_counts(X[:, f], bounds)
                after = bucket_counts(np.append(X[:, f], row[f]), bounds)
                moved += int(np.abs(after - before).sum())
        assert moved <= 2 * features  # one count per sketched feature in each of the two stages
