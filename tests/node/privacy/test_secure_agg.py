"""Secure aggregation must give the exact sum while each masked vector the aggregator sees reveals nothing."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.node.privacy.secure_agg import SecureSum, aggregate, pairwise_seeds, shamir_secret, shamir_shares


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


def test_shamir_shares_rebuild_from_any_threshold_and_not_below() -> None:
    draw = np.random.default_rng(5).integers
    secret = 123456789123456789
    shares = shamir_shares(secret, list(range(5)), 3, lambda n: int(draw(0, min(n, 2**62))))
    assert shamir_secret({h: shares[h] for h in (0, 2, 4)}) == secret
    assert shamir_secret({h: shares[h] for h in (1, 3, 4)}) == secret
    assert shamir_secret({h: shares[h] for h in (0, 1)}) != secret
    with pytest.raises(ValueError, match="threshold"):
        shamir_shares(secret, [0, 1], 3, lambda n: 0)


def test_a_party_that_leaves_mid_tree_leaves_the_others_sum_exact() -> None:
    """Four parties sum a tree's leaf releases; party 2 leaves after the keys are agreed and before it sends its
    masked vector: the aggregator rebuilds its masks from the survivors' shares and reads the survivors' exact sum,
    in that round and the next; party 2 cannot come back, and below the threshold nothing is summed."""
    rng = np.random.default_rng(6)
    agg = SecureSum(4, seed=7)
    assert agg.threshold == 3
    first = [rng.integers(-(2**40), 2**40, size=64, dtype=np.int64) for _ in range(4)]
    assert np.array_equal(agg.sum(first), np.sum(first, axis=0))
    tree = {i: rng.integers(-(2**40), 2**40, size=64, dtype=np.int64) for i in (0, 1, 3)}
    assert np.array_equal(agg.sum_of(tree), np.sum(list(tree.values()), axis=0))
    assert agg.dropped == {2}
    for masked in agg.last_masked:  # what the aggregator saw still hides each input
        assert np.mean(masked.view(np.int64) == tree[0]) < 0.05
    again = {i: rng.integers(-5, 5, size=64, dtype=np.int64) for i in (0, 1, 3)}
    assert np.array_equal(agg.sum_of(again), np.sum(list(again.values()), axis=0))
    with pytest.raises(ValueError, match="cannot rejoin"):
        agg.sum_of({i: again[0] for i in (0, 1, 2, 3)})
    with pytest.raises(ValueError, match="fewer than the 3"):
        agg.sum_of({0: again[0], 1: again[1]})


def test_the_rebuilt_key_gives_the_masks_the_pair_agreed() -> None:
    agg = SecureSum(3, seed=8)
    secret = shamir_secret({j: agg.key_shares[1][j] for j in (0, 2)})
    assert secret == agg.keys[1].privkey.secret_multiplier
    assert agg.seeds[(0, 1)] == pairwise_seeds(3, seed=8)[(0, 1)]
