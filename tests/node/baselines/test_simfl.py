"""SimFL and TFL (``node.baselines.simfl``, ``node.baselines.tfl``, ``node.baselines.local_trees``): the LSH similarity
against a brute-force
count, the weighted gradients' conservation, the turns, and trees that are LightGBM's to the last bit."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.baselines.local_trees import fit_tree, party_dataset
from fgbdt_chain.node.baselines.simfl import (
    builder_of,
    hash_functions,
    lsh_coordinates,
    lsh_scale,
    most_similar,
    signatures,
    similarity,
    weighted_gradients,
)
from fgbdt_chain.node.model.trees import tree_values


def test_most_similar_is_the_row_sharing_the_most_hash_values() -> None:
    """Against a brute-force count over every pair, ties included: the chosen row always has the maximal count,
    and among tied rows each is chosen (the draw is uniform, so all of several ties show up over many rows)."""
    rng = np.random.default_rng(0)
    sig_from = rng.integers(0, 3, size=(400, 5))
    sig_to = rng.integers(0, 3, size=(60, 5))
    chosen = most_similar(sig_from, sig_to, np.random.default_rng(1))
    counts = (sig_from[:, None, :] == sig_to[None, :, :]).sum(axis=2)
    assert np.all(counts[np.arange(400), chosen] == counts.max(axis=1))
    tied = [i for i in range(400) if (counts[i] == counts[i].max()).sum() >= 2]
    assert tied and any(chosen[i] != int(np.argmax(counts[i])) for i in tied)  # not always the first of a tie
    same = np.repeat(sig_from[:1], 300, axis=0)  # one signature, many rows: spread over its ties
    ties = np.flatnonzero(counts[0] == counts[0].max())
    picks = most_similar(same, sig_to, np.random.default_rng(2))
    assert set(picks.tolist()) == set(ties.tolist()) if ties.size <= 5 else set(picks.tolist()) <= set(ties.tolist())


def test_weighted_gradients_keep_every_partys_sum() -> None:
    """Every row of every other party adds its gradient to exactly one row of the builder (Eq. 4), so the builder's
    weighted sums total the gradients of all parties."""
    rng = np.random.default_rng(3)
    sizes = [50, 80, 30]
    sigs = [rng.integers(0, 4, size=(n, 6)) for n in sizes]
    similar = similarity(sigs, seed=0)
    g = [rng.normal(size=n) for n in sizes]
    h = [rng.random(size=n) for n in sizes]
    for m in range(3):
        G, H = weighted_gradients(m, g, h, similar)
        assert G.shape == (sizes[m],)
        assert np.isclose(G.sum(), sum(x.sum() for x in g)) and np.isclose(H.sum(), sum(x.sum() for x in h))
        assert np.all(similar[((m + 1) % 3, m)] < sizes[m])


def test_lsh_scale_reads_the_spread_from_public_edges() -> None:
    """A normal column's quartile edges give its standard deviation; one-hot columns keep their values; a missing
    value is hashed at the median edge; the hash functions are the same for every party of a task."""
    edges = np.quantile(np.random.default_rng(4).normal(0, 250.0, 100_000), np.arange(1, 16) / 16)
    centre, spread = lsh_scale(edges)
    assert abs(spread - 250.0) / 250.0 < 0.1 and abs(centre) < 10
    assert lsh_scale(np.array([0.5])) == (0.5, 1.0)
    Z = lsh_coordinates(np.array([[np.nan, 1.0]]), [edges, np.array([0.5])])
    assert Z[0, 0] == pytest.approx(centre / spread) and Z[0, 1] == 1.0
    a1, b1 = hash_functions(10, seed=7)
    a2, b2 = hash_functions(10, seed=7)
    assert a1.shape == (10, 9) and np.array_equal(a1, a2) and np.array_equal(b1, b2)
    assert hash_functions(100, seed=7)[0].shape == (100, 40)  # L = min(40, d - 1)
    assert np.all(np.diff(signatures(np.array([[0.0], [4.0], [8.0]]), np.ones((1, 1)), np.zeros(1)), axis=0) == 1)
    with pytest.raises(ValueError, match="at least 2 features"):
        hash_functions(1, seed=0)


def test_turns_cover_every_tree_once() -> None:
    for trees, parties in ((10, 3), (7, 7), (5, 2)):
        blocks = [builder_of(t, trees, parties, "blocks") for t in range(trees)]
        assert blocks == sorted(blocks) and set(blocks) == set(range(parties))
        assert max(blocks.count(m) for m in range(parties)) - min(blocks.count(m) for m in range(parties)) <= 1
    assert [builder_of(t, 6, 3, "round_robin") for t in range(6)] == [0, 1, 2, 0, 1, 2]
    with pytest.raises(ValueError, match="unknown turns"):
        builder_of(0, 4, 2, "random")


def test_a_local_tree_is_lightgbms_tree() -> None:
    """``fit_tree`` grows LightGBM's tree for the gradients given and converts it: the heap tree routes every row to
    the leaf LightGBM routes it to, with LightGBM's leaf value."""
    rng = np.random.default_rng(5)
    slots = rng.integers(0, 9, size=(3_000, 4)).astype(np.uint8)
    g = np.where(slots[:, 0] > 4, 0.6, -0.4) + 0.3 * rng.normal(size=3_000)
    h = rng.uniform(0.1, 0.25, size=3_000)
    params = TrainParams(trees=1, depth=4, bins=8)
    tree = fit_tree(party_dataset(slots, params), g, h, params)
    lp = {**baselines.lightgbm_params(params), "objective": lambda _p, _d: (g, h)}
    booster = lgb.train(lp, party_dataset(slots, params), num_boost_round=1)
    expected = booster.predict(slots.astype(np.float64), raw_score=True)
    np.testing.assert_allclose(tree_values(tree, slots), expected, rtol=0, atol=1e-15)
    assert tree.depth <= 4 and len(tree.leaf_ids()) > 4
    with pytest.raises(ValueError, match="one gradient and hessian per row"):
        fit_tree(party_dataset(slots, params), g[:10], h[:10], params)
