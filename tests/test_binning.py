"""Common bin edges: private sketch, exact quantiles and equal-width cuts."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.node.binning import common_edges, edges_from_sketch, exact_edges, feature_ranges, local_sketch
from fgbdt_chain.node.model import bin_matrix


def _parties(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [rng.normal(size=4000), rng.integers(0, 2, 4000), np.full(4000, 3.0), rng.exponential(size=4000)]
    )
    X[rng.random(4000) < 0.05, 0] = np.nan
    return [X[:1500], X[1500:]]


@pytest.mark.parametrize("method", ["dp", "exact", "uniform"])
def test_edges_are_increasing_inside_the_range_and_at_most_bins_minus_one(method: str) -> None:
    parts = _parties()
    edges = common_edges(parts, 16, method=method, seed=1)
    low, high = feature_ranges(np.vstack(parts))
    for f, e in enumerate(edges):
        assert len(e) <= 15
        assert np.all(np.diff(e) > 0)
        assert np.all((e >= low[f]) & (e < high[f]))
    assert len(edges[2]) == 0  # a constant feature has nothing to cut
    assert len(edges[1]) >= 1 and np.all((edges[1] >= 0) & (edges[1] < 1))  # binary: cuts between 0 and 1


def test_noiseless_sketch_edges_track_exact_quantiles() -> None:
    parts = _parties()
    X = np.vstack(parts)
    low, high = feature_ranges(X)
    sketch = sum(
        local_sketch(p, low, high, resolution=1024, epsilon=np.inf, rng=np.random.default_rng(0)) for p in parts
    )
    private = edges_from_sketch(sketch, low, high, 8)[0]
    exact = exact_edges(X, 8)[0]
    assert len(private) == len(exact) == 7
    # each private cut lies within one bucket width of the exact quantile
    assert np.max(np.abs(private - exact)) <= (high[0] - low[0]) / 1024 + 1e-12


def test_dp_sketch_noise_has_the_documented_scale() -> None:
    X = np.zeros((0, 10))
    sketch = local_sketch(X, np.zeros(10), np.ones(10), resolution=500, epsilon=2.0, rng=np.random.default_rng(3))
    # clipped Laplace(F/eps = 5) noise on empty buckets: mean of max(0, noise) is scale / 2
    assert sketch.mean() == pytest.approx(2.5, rel=0.1)


def test_equal_edges_give_equal_slots_for_every_party() -> None:
    parts = _parties()
    edges = common_edges(parts, 16, seed=4)
    slots = bin_matrix(np.vstack(parts), edges)
    assert slots[:, 2].max() == 1 and np.all(slots[np.isnan(np.vstack(parts)[:, 0]), 0] == 0)
    assert slots.max() <= 16


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="bins"):
        common_edges(_parties(), 1)
    with pytest.raises(ValueError, match="unknown binning method"):
        common_edges(_parties(), 8, method="magic")
