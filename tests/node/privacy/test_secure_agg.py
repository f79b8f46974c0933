"""Secure aggregation must give the exact sum while each masked vector the aggregator sees reveals nothing."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.node.privacy.secure_agg import SecureSum, aggregate, pairwise_seeds


def test_sum_is_exact_with_negatives() -> None:
    rng = np.random.default_rng(0)
    vectors = [rng.integers(-(2**40), 2**40, size=500, dtype=np.int64) for _ in range(4)]
    vectors[0][:3] = [-1, -(2**50), 0]
    agg = SecureSum(4, seed=1)
    assert np.array_equal(agg.sum(vectors), np.sum(vectors, axis=0))


def test_masked_vectors_hide_inputs() -> None:
    agg = SecureSum(3, seed=2)
    zeros = [np.zeros(1000, dtype=np.int64) for _ in range(3)]
    ones = [np.ones(1000, dtype=np.int64) for _ in range(3)]
    agg.sum(zeros)
    first = [v.copy() for v in agg.last_masked]
    agg.sum(ones)
    for masked in first + agg.last_masked:
        assert np.mean(masked.view(np.int64) == 0) < 0.01
        assert np.mean(masked.view(np.int64) == 1) < 0.01
        high = (masked >> np.uint64(63)).astype(np.float64)
        assert 0.4 < high.mean() < 0.6
    assert np.mean(first[0] == agg.last_masked[0]) < 0.01


def test_pairwise_seeds_distinct_and_bad_input() -> None:
    seeds = pairwise_seeds(4, seed=3)
    assert len(seeds) == 6 and len(set(seeds.values())) == 6
    with pytest.raises(ValueError):
        pairwise_seeds(0)
    with pytest.raises(ValueError):
        SecureSum(2, seed=0).sum([np.zeros(3, dtype=np.int64)])
    with pytest.raises(ValueError):
        aggregate([])


def test_one_party_is_plain() -> None:
    agg = SecureSum(1, seed=4)
    v = np.arange(-5, 5, dtype=np.int64)
    assert np.array_equal(agg.sum([v]), v)
