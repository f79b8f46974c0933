"""Secure aggregation (``node.privacy.secure_agg``) and horizontal FederBoost (``node.baselines.federboost``): the
aggregator sees
only masked vectors and gets exact sums; the buckets are the pooled quantiles; the trees are a centralized GBDT's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.baselines.federboost import quantile_edges, train_federboost
from fgbdt_chain.node.baselines.seed_systems import SeedInputs
from fgbdt_chain.node.model.trees import bin_matrix
from fgbdt_chain.node.privacy.secure_agg import (
    SecureSum,
    aggregate,
    fraction_bits,
    mask,
    masked_input,
    pairwise_seeds,
    to_fixed,
)


def test_sums_are_exact_and_negative_values_survive() -> None:
    rng = np.random.default_rng(0)
    agg = SecureSum(4, seed=1)
    for _ in range(3):
        vectors = [rng.integers(-(2**60), 2**60, size=50, dtype=np.int64) for _ in range(4)]
        expected = sum(v.astype(object) for v in vectors)
        assert agg.sum(vectors).tolist() == [int(x) for x in expected]
    assert agg.bytes_sent.tolist() == [3 * 50 * 8] * 4
    with pytest.raises(ValueError, match="one vector per party"):
        agg.sum([np.zeros(3, dtype=np.int64)])
    with pytest.raises(ValueError, match="int64"):
        masked_input(0, np.zeros(3), agg.seeds, 4, 1)


def test_the_aggregator_sees_only_masked_vectors() -> None:
    """A masked vector reveals nothing of its input: it differs from it in every entry, two different inputs give
    vectors that are not their difference apart, and its words look uniform (mean near 2^63, every bit about
    half set); only the sum of all of them is the sum of the inputs."""
    agg = SecureSum(3, seed=7)
    zeros = [np.zeros(4_000, dtype=np.int64)] * 3
    agg.sum(zeros)
    seen = agg.last_masked
    assert all(np.count_nonzero(v) >= 3_995 for v in seen)
    words = np.concatenate(seen).astype(np.float64)
    assert abs(words.mean() / 2.0**63 - 1.0) < 0.03
    bits = np.unpackbits(np.concatenate(seen).view(np.uint8))
    assert abs(bits.mean() - 0.5) < 0.01
    ones = [np.ones(4_000, dtype=np.int64)] * 3
    total = agg.sum(ones)  # a new round: fresh masks, so the change of input does not show as a difference of 1
    assert np.count_nonzero(agg.last_masked[0] - seen[0] - np.uint64(1)) >= 3_995
    assert total.tolist() == [3] * 4_000
    # the masked vectors alone still carry each party's self-mask, which only the unmasking round takes out
    assert aggregate(agg.last_masked).tolist() != [3] * 4_000


def test_pairwise_seeds_come_from_ecdh_and_masks_cancel() -> None:
    seeds = pairwise_seeds(3, seed=5)
    assert sorted(seeds) == [(0, 1), (0, 2), (1, 2)] and len(set(seeds.values())) == 3
    assert pairwise_seeds(3, seed=5) == seeds and pairwise_seeds(3, seed=6) != seeds
    assert pairwise_seeds(2)[(0, 1)] != pairwise_seeds(2)[(0, 1)]  # no seed: fresh keys from the OS
    total = sum(masked_input(i, np.zeros(8, dtype=np.int64), seeds, 3, 9) for i in range(3))
    assert np.all(total == 0)
    assert not np.array_equal(mask(seeds[(0, 1)], 1, 8), mask(seeds[(0, 1)], 2, 8))


def test_fixed_point_scale_never_overflows() -> None:
    assert fraction_bits(1.0) == 40 and fraction_bits(2.0**40) == 21
    big = to_fixed(np.array([2.0**40]), fraction_bits(2.0**40))
    assert int(big[0]) < 2**62
    with pytest.raises(ValueError, match="finite"):
        fraction_bits(float("inf"))


def _parties(rows: int = 3_000, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [rng.normal(size=rows), rng.pareto(1.2, size=rows) * 1000, rng.integers(0, 3, size=rows).astype(float)]
    )
    X[rng.random(rows) < 0.1, 0] = np.nan
    y = (np.nan_to_num(X[:, 0]) + 0.001 * X[:, 1] + X[:, 2] + rng.normal(size=rows) > 1.0).astype(float)
    cuts = [0, 1_000, 1_800, rows]
    return [X[a:b] for a, b in itertools.pairwise(cuts)], [y[a:b] for a, b in itertools.pairwise(cuts)], X


def test_buckets_are_the_pooled_quantiles() -> None:
    """Every edge has its quantile's share of all parties' values below it (to one row of ties), a discrete
    feature gets a bucket per value, and the aggregator only ever saw masked counts."""
    party_X, _, X = _parties()
    edges = quantile_edges(party_X, 8, SecureSum(3, seed=0))
    for f in (0, 1):
        col = X[:, f][~np.isnan(X[:, f])]
        shares = [np.mean(col < e) for e in edges[f]]
        assert len(edges[f]) == 7
        assert np.allclose(shares, np.arange(1, 8) / 8, atol=1.5 / col.size)
    assert len(edges[2]) == 2 and np.all((edges[2] >= 0) & (edges[2] < 2))  # values 0, 1, 2: three buckets


def test_federboost_is_a_centralized_gbdt_on_its_buckets() -> None:
    """With the masks and the fixed-point scale, the trees are those of LightGBM on all rows binned by
    FederBoost's buckets (same lambda, learning rate, depth and minimum rows), to LightGBM's float precision."""
    party_X, party_y, X = _parties()
    params = TrainParams(trees=8, depth=3, bins=8, min_rows=20)
    test_X = X[:500]
    inputs = SeedInputs(party_X, [], party_y, [], test_X, np.zeros((500, 3), dtype=np.uint8), params, seed=3)
    result = train_federboost(inputs)
    edges = [np.asarray(e) for e in result.details["edges"]]
    slots = bin_matrix(np.vstack(party_X), edges)
    booster = baselines.train_lightgbm(slots, np.concatenate(party_y), params)
    expected = baselines.predict_lightgbm(booster, bin_matrix(test_X, edges), params)
    # LightGBM keeps gradients in 32-bit floats: leaf values agree to ~1e-9, a different split would differ by far more
    np.testing.assert_allclose(result.test_pred, expected, rtol=0, atol=1e-7)
    assert result.trees is None and len(result.comm_bytes_per_party_per_tree) == 3
    assert result.comm_bytes_per_party_per_tree[0] > result.comm_bytes_per_party_per_tree[1] > 0  # party 0 sends splits
