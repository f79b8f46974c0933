"""Skewed (non-IID) partition of training rows over parties, as SimFL defines it (the FGBDT-Chain paper cites it).

The experiments vary the label skew between parties with one knob, theta: group A takes a fraction theta of the
class-0 rows and (1 - theta) of the class-1 rows, group B takes the rest; group A is dealt evenly and at random over
the first ceil(M/2) parties and group B over the other floor(M/2). theta = 0.5 gives every party the global class
mix; theta = 0 or 1 puts each class wholly in one group.

Note that the group sizes follow theta, not the party counts: with an odd M (and theta = 0.5) each of the ceil(M/2)
group-A parties holds fewer rows than each group-B party. That is the definition, kept literally so that runs compare
with SimFL's.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["binary_classes", "feature_skewed", "skew_feature", "skewed_partition"]


def binary_classes(y: np.ndarray) -> np.ndarray:
    """Boolean "class 1" mask used to skew the partition.

    Two distinct labels: the larger one is class 1 (so {0, 1} and {-1, +1} behave alike). One distinct label:
    class 1 when it is above 0. More than two (regression targets): class 1 = label above the median, which
    splits the rows into halves of nearly equal size, so theta skews the target distribution the same way it skews
    classes.
    """
    labels = np.asarray(y, dtype=np.float64)
    distinct = np.unique(labels)
    if distinct.size == 2:
        return labels == distinct[1]
    if distinct.size <= 1:
        return labels > 0.0
    return labels > np.median(labels)


def _split_evenly(rows: np.ndarray, parts: int, rng: np.random.Generator) -> list[np.ndarray]:
    if parts == 0:
        return []
    shuffled = rng.permutation(rows)
    return list(np.array_split(shuffled, parts))


def skewed_partition(y: np.ndarray, parties: int, theta: float, seed: int) -> list[np.ndarray]:
    """Row indices of each party: sorted int64 arrays, pairwise disjoint, together covering ``range(len(y))``.

    Rounding: group A takes ``floor(theta * n0 + 0.5)`` class-0 rows and ``floor((1 - theta) * n1 + 0.5)`` class-1
    rows (round half up, so the result does not depend on banker's rounding); within a group the party sizes differ
    by at most one. With ``parties == 1`` every row goes to party 0. A party may end up empty when there are fewer
    rows than parties in its group. Deterministic for a given ``seed``: the same inputs give the same arrays.
    """
    if isinstance(parties, bool) or not isinstance(parties, numbers.Integral):
        raise ValueError(f"parties must be an integer >= 1, got {parties!r}")
    if parties < 1:
        raise ValueError(f"parties must be >= 1, got {parties}")
    if isinstance(theta, bool) or not isinstance(theta, numbers.Real) or not 0.0 <= float(theta) <= 1.0:
        raise ValueError(f"theta must be a number in [0, 1], got {theta!r}")
    labels = np.asarray(y)
    if labels.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {labels.shape}")
    labels = labels.astype(np.float64)
    if np.isnan(labels).any():
        raise ValueError("y contains NaN labels; drop or impute them before partitioning")
    n = labels.size
    if parties == 1:
        return [np.arange(n, dtype=np.int64)]

    theta = float(theta)
    rng = np.random.default_rng(seed)
    positive = binary_classes(labels)
    class0 = np.flatnonzero(~positive)
    class1 = np.flatnonzero(positive)
    take0 = math.floor(theta * class0.size + 0.5)
    take1 = math.floor((1.0 - theta) * class1.size + 0.5)
    class0 = rng.permutation(class0)
    class1 = rng.permutation(class1)
    group_a = np.concatenate([class0[:take0], class1[:take1]])
    group_b = np.concatenate([class0[take0:], class1[take1:]])

    parties_a = (parties + 1) // 2
    shards = _split_evenly(group_a, parties_a, rng) + _split_evenly(group_b, parties - parties_a, rng)
    return [np.sort(shard).astype(np.int64) for shard in shards]


def skew_feature(X: np.ndarray) -> int:
    """The feature a feature skew follows: the one with the most distinct present values (lowest index on ties),
    a public rule that picks a continuous-looking feature on any data."""
    if X.ndim != 2 or X.shape[1] == 0:
        raise ValueError(f"X must be (rows, features) with at least one feature, got shape {X.shape}")
    counts = [np.unique(col[~np.isnan(col)]).size for col in X.T]
    return int(np.argmax(counts))


def feature_skewed(
    shards: list[np.ndarray], X: np.ndarray, parties: int, strength: float, seed: int
) -> list[np.ndarray]:
    """Re-deal each label group's rows (``skewed_partition``'s shards) over the group's parties by one feature.

    Why: real parties differ in their features (hospitals in different regions see different ages), not only in
    their labels, and a verifier's estimate of another party is hardest to make then. Within each group, a row goes
    to the party whose quantile range of the skew feature (``skew_feature``) it falls in with probability
    ``strength``, and to a uniformly random party of the group otherwise: 0 keeps the label skew alone, 1 gives the
    parties of a group disjoint ranges of that feature. Missing values rank last. Deterministic for a given seed.
    """
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"feature skew strength must be in [0, 1], got {strength}")
    if strength == 0.0 or parties == 1:
        return shards
    rng = np.random.default_rng([seed, 0xFE])
    column = X[:, skew_feature(X)]
    parties_a = (parties + 1) // 2
    groups = [(0, parties_a), (parties_a, parties)]
    out: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * parties
    for first, last in groups:
        rows = np.concatenate(shards[first:last]) if last > first else np.zeros(0, dtype=np.int64)
        k = last - first
        if k == 0 or rows.size == 0:
            continue
        values = np.where(np.isnan(column[rows]), np.inf, column[rows])
        rank = np.empty(rows.size, dtype=np.int64)
        rank[np.argsort(values, kind="stable")] = np.arange(rows.size)
        by_value = rank * k // rows.size
        pick = np.where(rng.random(rows.size) < strength, by_value, rng.integers(0, k, rows.size))
        for i in range(k):
            out[first + i] = np.sort(rows[pick == i]).astype(np.int64)
    return out
