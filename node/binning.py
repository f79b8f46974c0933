"""Common bin edges for all parties, derived without revealing raw values (NOTES 12).

Every party must bin with the same edges, fixed when the task starts and recorded on chain. Exact global
quantiles would need the pooled raw values, so the default (``dp``) works from public information plus a
differentially private sketch: each party counts its values in ``resolution`` equal-width buckets between the
task schema's per-feature [low, high] and adds Laplace noise; the requester sums the parties' noisy sketches and
cuts at the quantiles of the merged mass. Only the noisy sketch leaves a party.

Privacy accounting of the sketch: adding or removing one row changes one bucket count of every feature by one, so
the whole sketch (all features) has L1 sensitivity ``F`` (the number of features whose value is present, at most F).
Laplace noise of scale ``F / epsilon`` on every bucket makes the released sketch epsilon-DP; clipping at 0 and
everything the requester derives from it are post-processing.

``exact`` (pooled quantiles, not private) and ``uniform`` (equal-width cuts of the schema range, no data at all)
are kept for measuring what the private edges cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fgbdt_chain.ledger.reference import from_fixed, to_fixed

BINNING_METHODS = ("dp", "exact", "uniform")


def feature_ranges(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature [low, high] ignoring missing values; all-missing features get [0, 0].

    In a task these come from the requester's data schema; the simulator derives them from the pooled training
    rows, which stands in for that public schema.
    """
    with np.errstate(all="ignore"):
        present = ~np.isnan(X)
        low = np.where(present.any(axis=0), np.nanmin(np.where(present, X, np.inf), axis=0), 0.0)
        high = np.where(present.any(axis=0), np.nanmax(np.where(present, X, -np.inf), axis=0), 0.0)
    return low.astype(np.float64), high.astype(np.float64)


def schema_ranges(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The task schema's per-feature [low, high] as the chain holds them: 18-decimal fixed point, read back.

    Binning and PSDs use these rounded values both in the simulator and in the party nodes, so both derive the same
    bucket bounds and PSD midpoints from what is recorded on chain.
    """
    low, high = feature_ranges(X)
    return fixed_round(low), fixed_round(high)


def fixed_round(values: np.ndarray) -> np.ndarray:
    """Each value through fixed point and back (``ledger.reference.to_fixed`` then ``from_fixed``)."""
    return np.array([from_fixed(to_fixed(float(v))) for v in values], dtype=np.float64)


def bucket_bounds(low: float, high: float, resolution: int) -> np.ndarray:
    """The ``resolution - 1`` inner boundaries of equal-width buckets over [low, high]."""
    return np.linspace(low, high, resolution + 1)[1:-1]


def local_sketch(
    X: np.ndarray, low: np.ndarray, high: np.ndarray, *, resolution: int, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """A party's noisy bucket counts, shape (F, resolution): the only thing it publishes for binning."""
    num_features = X.shape[1]
    sketch = np.zeros((num_features, resolution), dtype=np.float64)
    for f in range(num_features):
        col = X[:, f]
        col = col[~np.isnan(col)]
        if high[f] > low[f]:
            idx = np.searchsorted(bucket_bounds(low[f], high[f], resolution), col, side="left")
        else:
            idx = np.zeros(col.shape[0], dtype=np.int64)
        sketch[f] = np.bincount(idx, minlength=resolution)[:resolution]
    if np.isfinite(epsilon):
        if epsilon <= 0:
            raise ValueError("epsilon for the binning sketch must be positive")
        sketch += rng.laplace(0.0, num_features / epsilon, size=sketch.shape)
    return np.clip(sketch, 0.0, None)


def edges_from_sketch(sketch: np.ndarray, low: np.ndarray, high: np.ndarray, bins: int) -> list[np.ndarray]:
    """Cut points at the ``bins``-quantiles of the merged noisy mass, snapped to bucket boundaries.

    Duplicates collapse, so a feature with few distinct values (binary ones) gets few bins.
    """
    num_features, resolution = sketch.shape
    edges: list[np.ndarray] = []
    for f in range(num_features):
        if not high[f] > low[f]:
            edges.append(np.zeros(0))
            continue
        bounds = bucket_bounds(low[f], high[f], resolution)
        cum = np.cumsum(sketch[f])
        total = cum[-1]
        if total <= 0:
            edges.append(np.unique(bucket_bounds(low[f], high[f], bins)))
            continue
        targets = total * np.arange(1, bins) / bins
        pos = np.searchsorted(cum[:-1], targets, side="left")
        pos = pos[pos < resolution - 1]
        # a cut is only useful where mass lies on both sides of it
        keep = (cum[pos] > 0) & (cum[pos] < total)
        edges.append(np.unique(bounds[pos[keep]]))
    return edges


def exact_edges(X: np.ndarray, bins: int) -> list[np.ndarray]:
    """Pooled-data quantile cut points (not private): the reference the private edges are measured against."""
    edges: list[np.ndarray] = []
    for f in range(X.shape[1]):
        col = X[:, f]
        col = np.sort(col[~np.isnan(col)])
        if col.size == 0:
            edges.append(np.zeros(0))
            continue
        qs = col[np.minimum((np.arange(1, bins) * col.size) // bins, col.size - 1)]
        cuts = np.unique(qs)
        # a cut equal to the maximum would leave the top bin empty
        edges.append(cuts[cuts < col[-1]])
    return edges


def uniform_edges(low: np.ndarray, high: np.ndarray, bins: int) -> list[np.ndarray]:
    """Equal-width cuts of the schema range: no data used at all."""
    return [
        np.unique(bucket_bounds(lo, hi, bins)) if hi > lo else np.zeros(0) for lo, hi in zip(low, high, strict=True)
    ]


def sketch_rng(seed: int, party: int) -> np.random.Generator:
    """Party ``party``'s own noise stream for its sketch, so a party process reproduces the simulator's sketch."""
    return np.random.default_rng([seed, 0xB1, party])


def common_edges(
    party_X: Sequence[np.ndarray],
    bins: int,
    *,
    method: str = "dp",
    epsilon: float = 1.0,
    resolution: int = 64,
    seed: int = 0,
    ranges: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[np.ndarray]:
    """The task's bin edges from the parties' data, by ``method`` (see the module docstring)."""
    if bins < 2 or bins > 255:
        raise ValueError(f"bins must be in [2, 255], got {bins}")
    if method not in BINNING_METHODS:
        raise ValueError(f"unknown binning method {method!r}; choose one of {', '.join(BINNING_METHODS)}")
    low, high = ranges if ranges is not None else feature_ranges(np.vstack(party_X))
    if method == "exact":
        return exact_edges(np.vstack(party_X), bins)
    if method == "uniform":
        return uniform_edges(low, high, bins)
    merged = sum(
        (
            local_sketch(X, low, high, resolution=resolution, epsilon=epsilon, rng=sketch_rng(seed, p))
            for p, X in enumerate(party_X)
        ),
        start=np.zeros((len(low), resolution)),
    )
    return edges_from_sketch(merged, low, high, bins)
