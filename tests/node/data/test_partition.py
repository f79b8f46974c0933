"""Tests of node.partition.skewed_partition (SimFL's skewed split)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgbdt_chain.node.data.partition import binary_classes, skewed_partition


def labels(n0: int, n1: int, seed: int = 0) -> np.ndarray:
    y = np.array([0.0] * n0 + [1.0] * n1)
    return np.random.default_rng(seed).permutation(y)


def check_cover(parts: list[np.ndarray], n: int) -> None:
    for part in parts:
        assert part.dtype == np.int64
        assert np.all(np.diff(part) > 0), "sorted, no duplicates"
    merged = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    np.testing.assert_array_equal(np.sort(merged), np.arange(n))


def rounded(x: float) -> int:
    return math.floor(x + 0.5)


@pytest.mark.parametrize("parties", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("theta", [0.0, 0.1, 0.5, 0.8, 1.0])
def test_group_composition_follows_theta(parties: int, theta: float) -> None:
    n0, n1 = 1000, 600
    y = labels(n0, n1)
    parts = skewed_partition(y, parties, theta, seed=3)
    assert len(parts) == parties
    check_cover(parts, y.size)
    half = math.ceil(parties / 2)
    group_a = np.concatenate(parts[:half])
    group_b = np.concatenate(parts[half:])
    assert int((y[group_a] == 0).sum()) == rounded(theta * n0)
    assert int((y[group_a] == 1).sum()) == rounded((1 - theta) * n1)
    assert group_a.size + group_b.size == n0 + n1
    for group in (parts[:half], parts[half:]):
        sizes = [p.size for p in group]
        assert max(sizes) - min(sizes) <= 1, "a group is dealt evenly"


def test_extreme_theta_separates_classes() -> None:
    y = labels(300, 200)
    parts = skewed_partition(y, 4, 1.0, seed=0)
    assert set(np.unique(y[np.concatenate(parts[:2])])) == {0.0}
    assert set(np.unique(y[np.concatenate(parts[2:])])) == {1.0}
    parts = skewed_partition(y, 4, 0.0, seed=0)
    assert set(np.unique(y[np.concatenate(parts[:2])])) == {1.0}
    assert set(np.unique(y[np.concatenate(parts[2:])])) == {0.0}


def test_balanced_at_one_half() -> None:
    y = labels(6000, 4000)
    parts = skewed_partition(y, 4, 0.5, seed=11)
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1
    for part in parts:
        # Each party is a random quarter of the data: its class-1 share is near the global 0.4.
        assert abs(y[part].mean() - 0.4) < 0.03


def test_skew_shows_in_party_class_shares() -> None:
    y = labels(5000, 5000)
    parts = skewed_partition(y, 2, 0.9, seed=5)
    assert y[parts[0]].mean() == pytest.approx(0.1, abs=1e-9)  # 500 of class 1 among 4500 + 500
    assert y[parts[1]].mean() == pytest.approx(0.9, abs=1e-9)


def test_deterministic_given_seed() -> None:
    y = labels(500, 300)
    first = skewed_partition(y, 5, 0.7, seed=42)
    second = skewed_partition(y, 5, 0.7, seed=42)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    other = skewed_partition(y, 5, 0.7, seed=43)
    assert any(not np.array_equal(a, b) for a, b in zip(first, other, strict=True))


def test_label_coding_does_not_matter() -> None:
    y01 = labels(200, 100)
    ypm = np.where(y01 > 0, 1.0, -1.0)
    for a, b in zip(skewed_partition(y01, 3, 0.3, 9), skewed_partition(ypm, 3, 0.3, 9), strict=True):
        np.testing.assert_array_equal(a, b)


def test_single_party_takes_everything() -> None:
    y = labels(10, 5)
    (only,) = skewed_partition(y, 1, 0.9, seed=0)
    np.testing.assert_array_equal(only, np.arange(15))


def test_more_parties_than_rows_leaves_empty_parties() -> None:
    parts = skewed_partition(np.array([0.0, 1.0, 1.0]), 6, 0.5, seed=0)
    assert len(parts) == 6
    check_cover(parts, 3)
    assert sum(p.size == 0 for p in parts) == 3


def test_empty_labels() -> None:
    parts = skewed_partition(np.zeros(0), 3, 0.5, seed=0)
    assert [p.size for p in parts] == [0, 0, 0]


def test_regression_labels_use_the_median() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=1001)
    high = binary_classes(y)
    assert high.sum() == 500  # strictly above the median of 1001 distinct values
    parts = skewed_partition(y, 2, 1.0, seed=1)
    assert np.all(y[parts[0]] <= np.median(y)) and np.all(y[parts[1]] > np.median(y))


def test_binary_classes_rules() -> None:
    np.testing.assert_array_equal(binary_classes(np.array([1.0, 2.0, 1.0])), [False, True, False])
    np.testing.assert_array_equal(binary_classes(np.array([-1.0, 1.0])), [False, True])
    np.testing.assert_array_equal(binary_classes(np.array([1.0, 1.0])), [True, True])
    np.testing.assert_array_equal(binary_classes(np.array([0.0, 0.0])), [False, False])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.zeros(4), 0, 0.5, 0), "parties must be >= 1"),
        ((np.zeros(4), -2, 0.5, 0), "parties must be >= 1"),
        ((np.zeros(4), 2.5, 0.5, 0), "parties must be an integer"),
        ((np.zeros(4), True, 0.5, 0), "parties must be an integer"),
        ((np.zeros(4), 2, -0.1, 0), r"theta must be a number in \[0, 1\]"),
        ((np.zeros(4), 2, 1.5, 0), r"theta must be a number in \[0, 1\]"),
        ((np.zeros(4), 2, float("nan"), 0), r"theta must be a number in \[0, 1\]"),
        ((np.zeros((2, 2)), 2, 0.5, 0), "y must be 1-D"),
        ((np.array([0.0, np.nan]), 2, 0.5, 0), "NaN"),
    ],
)
def test_validation(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        skewed_partition(*args)


@settings(max_examples=150, deadline=None)
@given(
    y=st.lists(st.sampled_from([0.0, 1.0]), max_size=200).map(np.array),
    parties=st.integers(1, 9),
    theta=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_properties_on_random_binary_labels(y: np.ndarray, parties: int, theta: float, seed: int) -> None:
    y = y.astype(np.float64)
    parts = skewed_partition(y, parties, theta, seed)
    assert len(parts) == parties
    check_cover(parts, y.size)
    again = skewed_partition(y, parties, theta, seed)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    if parties == 1:
        return
    positive = binary_classes(y)
    n0, n1 = int((~positive).sum()), int(positive.sum())
    half = (parties + 1) // 2
    group_a = np.concatenate(parts[:half])
    assert int((~positive[group_a]).sum()) == rounded(theta * n0)
    assert int(positive[group_a].sum()) == rounded((1 - theta) * n1)
    for group in (parts[:half], parts[half:]):
        sizes = [p.size for p in group]
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=50, deadline=None)
@given(
    y=st.lists(st.floats(-1e6, 1e6), min_size=3, max_size=100).map(np.array),
    parties=st.integers(2, 6),
    theta=st.floats(0.0, 1.0),
    seed=st.integers(0, 1000),
)
def test_properties_on_regression_labels(y: np.ndarray, parties: int, theta: float, seed: int) -> None:
    parts = skewed_partition(y, parties, theta, seed)
    check_cover(parts, y.size)
    positive = binary_classes(y)
    if np.unique(y).size > 2:
        np.testing.assert_array_equal(positive, y > np.median(y))
    half = (parties + 1) // 2
    group_a = np.concatenate(parts[:half])
    assert int(positive[group_a].sum()) == rounded((1 - theta) * int(positive.sum()))
