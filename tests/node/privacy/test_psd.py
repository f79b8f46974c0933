"""Tests of the private spatial decomposition (node/privacy/psd.py)."""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgbdt_chain.node.privacy.psd import PSD, PSDFormatError, build_psd, label_levels_for, psd_budget


def make_data(n: int = 3000, F: int = 5, seed: int = 0, nan_frac: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 3.0, size=(n, F))
    X[:, 0] = rng.beta(0.5, 2.0, size=n) * 5.0 - 2.0  # a skewed feature, so counts differ between leaves
    X[rng.random((n, F)) < nan_frac] = np.nan
    y = (rng.random(n) < 0.3).astype(np.float64)
    return X, y


def bounds(F: int) -> tuple[np.ndarray, np.ndarray]:
    lows = np.r_[np.full(F, -2.0), 0.0]
    highs = np.r_[np.full(F, 3.0), 1.0]
    return lows, highs


def slow_leaf_of(psd: PSD, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-row reference descent, written independently of the vectorised one."""
    out = []
    for i in range(X.shape[0]):
        row = np.r_[X[i], y[i]]
        node = 0
        while psd.split_dim[node] >= 0:
            v = row[psd.split_dim[node]]
            node = int(psd.left[node]) if (math.isnan(v) or v <= psd.split_value[node]) else int(psd.right[node])
        out.append(int(psd.leaf_index[node]))
    return np.array(out, dtype=np.int64)


def node_rows(psd: PSD, X: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """Row indices reaching each node (exact, for checking the stopping rule)."""
    data = np.column_stack([X, y])
    reach = [np.arange(X.shape[0])] + [np.empty(0, dtype=np.int64)] * (psd.num_nodes - 1)
    for p in range(psd.num_nodes):
        d = int(psd.split_dim[p])
        if d >= 0:
            rows = reach[p]
            right = data[rows, d] > psd.split_value[p]
            reach[int(psd.left[p])] = rows[~right]
            reach[int(psd.right[p])] = rows[right]
    return reach


def path_dims(psd: PSD) -> list[list[int]]:
    paths: list[list[int]] = [[] for _ in range(psd.num_nodes)]
    for p in range(psd.num_nodes):
        d = int(psd.split_dim[p])
        if d >= 0:
            paths[int(psd.left[p])] = [*paths[p], d]
            paths[int(psd.right[p])] = [*paths[p], d]
    return paths


# -- budget -----------------------------------------------------------------------------------------------------


def test_budget_split_adds_up_to_epsilon() -> None:
    b = psd_budget(1.0, depth=8, num_dims=10)
    assert b.test_levels == 8
    assert b.epsilon_per_test_level == pytest.approx(0.5 / 8)
    assert b.epsilon_leaves == pytest.approx(0.5)
    assert b.spent == pytest.approx(1.0)
    assert b.leaf_scale == pytest.approx(2.0)
    # Fewer dims than depth: the tree cannot get deeper than the dims, so only those levels test (and pay).
    b = psd_budget(2.0, depth=8, num_dims=3, structure_fraction=0.25)
    assert b.test_levels == 3
    assert b.epsilon_per_test_level == pytest.approx(0.5 / 3)
    assert b.spent == pytest.approx(2.0)
    # No count-based stopping: everything goes to the leaves.
    b = psd_budget(1.0, depth=8, num_dims=10, structure_fraction=0.0)
    assert (b.test_levels, b.epsilon_leaves, b.spent) == (0, 1.0, 1.0)
    b = psd_budget(math.inf, depth=8, num_dims=10)
    assert b.stop_scale == 0.0 and b.leaf_scale == 0.0
    # a real label's levels split at its private quantiles: its sketch takes one more test level's share
    b = psd_budget(1.0, depth=8, num_dims=10, label_levels=4)
    assert (b.test_levels, b.epsilon_per_test_level, b.epsilon_label) == (4, pytest.approx(0.1), pytest.approx(0.1))
    assert b.spent == pytest.approx(1.0) and b.leaf_scale == pytest.approx(2.0)
    assert psd_budget(1.0, depth=8, num_dims=10, label_levels=1).epsilon_label == 0.0  # a binary label: midpoint
    assert psd_budget(1.0, depth=8, num_dims=10, structure_fraction=0.0, label_levels=4).epsilon_label == 0.0


@pytest.mark.parametrize(
    ("eps", "frac", "depth"),
    [(0.0, 0.5, 8), (-1.0, 0.5, 8), (math.nan, 0.5, 8), (1.0, 1.0, 8), (1.0, -0.1, 8), (1.0, 0.5, -1)],
)
def test_budget_rejects_bad_parameters(eps: float, frac: float, depth: int) -> None:
    with pytest.raises(ValueError):
        psd_budget(eps, depth, 5, frac)


# -- structure and counts ----------------------------------------------------------------------------------------


def test_exact_counts_and_midpoint_structure_without_noise() -> None:
    X, y = make_data()
    lows, highs = bounds(X.shape[1])
    psd = build_psd(X, y, lows, highs, depth=4, max_rows=200, epsilon=math.inf, rng=np.random.default_rng(3))
    leaves = psd.leaf_of(X, y)
    np.testing.assert_array_equal(psd.counts, np.bincount(leaves, minlength=psd.num_leaves))
    assert psd.total == X.shape[0]
    psd.check_bounds(lows, highs)
    mid = 0.5 * (lows + highs)
    for p in range(psd.num_nodes):
        d = int(psd.split_dim[p])
        if d >= 0:
            assert psd.split_value[p] == mid[d]
    for dims in path_dims(psd):
        assert len(dims) == len(set(dims))
    # Stopping rule on exact counts: internal nodes hold > max_rows rows; a leaf is at the depth limit or small.
    depth_of = [len(d) for d in path_dims(psd)]
    for p, rows in enumerate(node_rows(psd, X, y)):
        if psd.split_dim[p] >= 0:
            assert rows.size > 200
        else:
            assert depth_of[p] == 4 or rows.size <= 200


def test_tree_stops_when_dimensions_run_out() -> None:
    X, y = make_data(n=2000, F=2)
    lows, highs = bounds(2)
    psd = build_psd(X, y, lows, highs, depth=8, max_rows=0, epsilon=math.inf, rng=np.random.default_rng(0))
    assert psd.height == 3  # F + 1 dims, each used once per path
    assert psd.num_leaves == 8  # all 8 cells hold rows, so nothing stops before the dims run out
    np.testing.assert_array_equal(psd.counts, np.bincount(psd.leaf_of(X, y), minlength=8))


def test_depth_zero_is_a_single_noisy_count() -> None:
    X, y = make_data(n=100)
    psd = build_psd(X, y, *bounds(X.shape[1]), depth=0, epsilon=math.inf, rng=np.random.default_rng(0))
    assert (psd.num_nodes, psd.num_leaves, psd.total) == (1, 1, 100.0)


def test_noisy_counts_are_clipped_and_finite() -> None:
    X, y = make_data(n=400, F=8, nan_frac=0.0)
    psd = build_psd(
        X, y, *bounds(8), depth=8, max_rows=1, epsilon=0.5, rng=np.random.default_rng(11), structure_fraction=0.0
    )
    assert psd.num_leaves == 256  # structure_fraction = 0: full data-independent tree
    assert np.all(np.isfinite(psd.counts)) and np.all(psd.counts >= 0.0)
    assert np.any(psd.counts == 0.0)  # ~1.6 rows per leaf with scale-2 noise: many clip
    assert not np.any(np.signbit(psd.counts))  # no -0.0 (canonical bytes)


def test_determinism_given_seed() -> None:
    X, y = make_data()
    lows, highs = bounds(X.shape[1])
    a = build_psd(X, y, lows, highs, rng=np.random.default_rng(42), max_rows=100)
    b = build_psd(X, y, lows, highs, rng=np.random.default_rng(42), max_rows=100)
    c = build_psd(X, y, lows, highs, rng=np.random.default_rng(43), max_rows=100)
    assert a.encode() == b.encode() and a.digest() == b.digest()
    assert a.encode() != c.encode()


def test_dimension_choice_does_not_depend_on_data_or_noise() -> None:
    """Same seed: the dimension at a tree position is the same whatever the data and epsilon."""
    X1, y1 = make_data(seed=1)
    X2, y2 = make_data(seed=2, n=5000)
    lows, highs = bounds(X1.shape[1])
    kw = {"depth": 6, "max_rows": 0}
    trees = [
        build_psd(X1, y1, lows, highs, epsilon=math.inf, rng=np.random.default_rng(5), **kw),
        build_psd(X2, y2, lows, highs, epsilon=0.3, rng=np.random.default_rng(5), **kw),
    ]

    def dims_by_path(psd: PSD) -> dict[str, int]:
        out, paths = {}, {0: ""}
        for p in range(psd.num_nodes):
            if psd.split_dim[p] >= 0:
                out[paths[p]] = int(psd.split_dim[p])
                paths[int(psd.left[p])] = paths[p] + "0"
                paths[int(psd.right[p])] = paths[p] + "1"
        return out

    a, b = (dims_by_path(t) for t in trees)
    common = a.keys() & b.keys()
    assert len(common) > 10
    assert all(a[k] == b[k] for k in common)


def test_leaf_of_matches_slow_reference() -> None:
    X, y = make_data(n=1500, nan_frac=0.2)
    psd = build_psd(X, y, *bounds(X.shape[1]), depth=8, max_rows=20, epsilon=1.0, rng=np.random.default_rng(9))
    assert psd.height >= 4
    np.testing.assert_array_equal(psd.leaf_of(X, y), slow_leaf_of(psd, X, y))
    # Out-of-range values and other data still route like the reference.
    X2, y2 = make_data(n=300, seed=7, nan_frac=0.3)
    X2 *= 3.0
    np.testing.assert_array_equal(psd.leaf_of(X2, y2), slow_leaf_of(psd, X2, y2))


def test_nan_goes_left() -> None:
    X = np.array([[np.nan, 0.0], [0.9, 0.0], [0.1, 0.0], [np.nan, 1.0]])
    y = np.array([1.0, 1.0, 0.0, 0.0])
    psd = PSD(
        num_dims=3, split_dim=np.array([0, -1, -1]), split_value=np.array([0.5, 0.0, 0.0]), counts=np.array([3.0, 1.0])
    )
    np.testing.assert_array_equal(psd.leaf_of(X, y), [0, 1, 0, 0])
    # And build_psd routes NaN the same way when it counts.
    built = build_psd(
        X, y, np.zeros(3), np.ones(3), depth=1, max_rows=0, epsilon=math.inf, rng=np.random.default_rng(0)
    )
    d = int(built.split_dim[0])
    col = np.column_stack([X, y])[:, d]
    assert built.counts[0] == np.sum(np.isnan(col) | (col <= 0.5))


def test_leaf_noise_scale_matches_budget() -> None:
    """The leaf noise is the discrete Laplace of scale b: integers, mean |noise| ``2q / (1 - q^2)`` and variance
    ``2q / (1 - q)^2`` for ``q = exp(-1 / b)``, within four standard errors over the 1,024 leaves; with the default
    split the leaves get epsilon/2, so b = 2/epsilon."""
    rng = np.random.default_rng(123)
    n, F = 300_000, 10
    X = rng.random((n, F))
    y = (rng.random(n) < 0.5).astype(np.float64)
    eps = 2.0  # leaf counts ~293 >> stop scale 10 and leaf scale 1: clipping never bites, max_rows=0 never stops
    psd = build_psd(
        X, y, np.zeros(F + 1), np.ones(F + 1), depth=10, max_rows=0, epsilon=eps, rng=np.random.default_rng(321)
    )
    assert psd.num_leaves == 1024
    exact = np.bincount(psd.leaf_of(X, y), minlength=psd.num_leaves)
    noise = psd.counts - exact
    assert np.all(noise == np.round(noise))  # integer noise on integer counts
    b = psd_budget(eps, 10, F + 1).leaf_scale
    assert b == pytest.approx(1.0)
    q = math.exp(-1 / b)
    mean_abs, second = 2 * q / (1 - q * q), 2 * q / (1 - q) ** 2
    se_abs, se_mean = math.sqrt((second - mean_abs**2) / 1024), math.sqrt(second / 1024)
    assert abs(np.mean(np.abs(noise)) - mean_abs) < 4 * se_abs
    assert abs(np.mean(noise)) < 4 * se_mean  # centred


def test_bad_inputs_are_rejected() -> None:
    X, y = make_data(n=50)
    lows, highs = bounds(X.shape[1])
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        build_psd(X, y, lows[:-1], highs[:-1], rng=rng)
    with pytest.raises(ValueError):
        build_psd(X, y, highs, lows, rng=rng)
    with pytest.raises(ValueError):
        build_psd(X, y[:-1], lows, highs, rng=rng)
    psd = build_psd(X, y, lows, highs, max_rows=0, epsilon=math.inf, rng=rng)
    assert psd.num_nodes > 1
    with pytest.raises(ValueError):
        psd.leaf_of(X[:, :-1], y)
    with pytest.raises(ValueError, match="midpoint"):
        psd.check_bounds(lows, highs + 1.0)


# -- serialisation -----------------------------------------------------------------------------------------------


def sample_psd() -> PSD:
    X, y = make_data(n=2000)
    return build_psd(X, y, *bounds(X.shape[1]), depth=8, max_rows=50, epsilon=1.0, rng=np.random.default_rng(77))


def test_encode_decode_round_trip_is_exact() -> None:
    psd = sample_psd()
    blob = psd.encode()
    back = PSD.decode(blob)
    assert back == psd and back.encode() == blob
    np.testing.assert_array_equal(back.counts, psd.counts)
    np.testing.assert_array_equal(back.split_value, psd.split_value)
    np.testing.assert_array_equal(back.split_dim, psd.split_dim)
    assert len(psd.digest()) == 32 and psd.digest() == back.digest()
    assert len(blob) == 10 + 2 * psd.num_nodes + 8 * psd.num_nodes


def test_json_round_trip_is_exact() -> None:
    psd = sample_psd()
    back = PSD.from_json(json.dumps(psd.to_json_dict()))
    assert back.encode() == psd.encode()
    assert PSD.from_json(psd.to_json()) == psd


def test_keccak_digest_known_value() -> None:
    psd = PSD(num_dims=1, split_dim=np.array([-1]), split_value=np.array([0.0]), counts=np.array([5.0]))
    assert psd.encode() == b"PSD\x01\x00\x01\x00\x00\x00\x01" + b"\xff\xff" + struct.pack(">d", 5.0)
    from eth_utils import keccak

    assert psd.digest() == keccak(psd.encode())


def test_decode_rejects_every_truncation_and_padding() -> None:
    blob = sample_psd().encode()
    for cut in range(len(blob)):
        with pytest.raises(ValueError, match=r"truncated|node count|magic"):
            PSD.decode(blob[:cut])
    with pytest.raises(ValueError, match="trailing"):
        PSD.decode(blob + b"\x00")


def _patched(blob: bytes, offset: int, new: bytes) -> bytes:
    return blob[:offset] + new + blob[offset + len(new) :]


def test_decode_rejects_garbled_payloads() -> None:
    psd = sample_psd()
    blob = psd.encode()
    n = psd.num_nodes
    counts_at = len(blob) - 8 * psd.num_leaves
    values_at = 10 + 2 * n
    cases = {
        "magic": _patched(blob, 0, b"XSD"),
        "version": _patched(blob, 3, b"\x07"),
        "dim out of range": _patched(blob, 10, struct.pack(">h", psd.num_dims)),
        "dim below -1": _patched(blob, 10, struct.pack(">h", -2)),
        "root leaf": _patched(blob, 10, struct.pack(">h", -1)),
        "negative count": _patched(blob, counts_at, struct.pack(">d", -1.0)),
        "nan count": _patched(blob, counts_at, struct.pack(">d", math.nan)),
        "inf value": _patched(blob, values_at, struct.pack(">d", math.inf)),
        "negative zero": _patched(blob, counts_at, struct.pack(">d", -0.0)),
        "zero nodes": _patched(blob, 6, struct.pack(">I", 0)),
        "huge node count": _patched(blob, 6, struct.pack(">I", 2**31)),
    }
    for name, bad in cases.items():
        with pytest.raises(ValueError):
            PSD.decode(bad)
        assert name  # keeps the case name visible in a failing traceback


def test_structure_validation() -> None:
    def make(dims: list[int], D: int = 3) -> PSD:
        dims_a = np.array(dims)
        values = np.where(dims_a >= 0, 0.5, 0.0)
        return PSD(num_dims=D, split_dim=dims_a, split_value=values, counts=np.ones(int(np.sum(dims_a < 0))))

    make([0, 1, -1, -1, -1])  # valid
    with pytest.raises(PSDFormatError, match="already used"):
        make([0, 0, -1, -1, -1])
    with pytest.raises(PSDFormatError, match="breadth-first"):
        make([0, -1, -1, 1, -1])  # not a tree: the second internal node would be its own child's sibling
    with pytest.raises(PSDFormatError, match="binary tree"):
        make([0, -1])
    with pytest.raises(PSDFormatError, match="leaf split_value"):
        PSD(num_dims=1, split_dim=np.array([-1]), split_value=np.array([1.0]), counts=np.array([1.0]))


def test_from_json_dict_rejects_malformed() -> None:
    good = sample_psd().to_json_dict()
    bad_variants = [
        {**good, "version": 2},
        {**good, "format": "other"},
        {**good, "extra": 1},
        {k: v for k, v in good.items() if k != "counts"},
        {**good, "counts": good["counts"][:-1]},
        {**good, "counts": [*good["counts"][:-1], -3.0]},
        {**good, "counts": [*good["counts"][:-1], "1"]},
        {**good, "split_dim": [True, *good["split_dim"][1:]]},
        {**good, "split_dim": [70000, *good["split_dim"][1:]]},
        {**good, "num_dims": 2.5},
        {**good, "split_value": "x"},
        [],
    ]
    for bad in bad_variants:
        with pytest.raises(ValueError):
            PSD.from_json_dict(bad)
    with pytest.raises(ValueError):
        PSD.from_json("{not json")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_decode_random_bytes_never_crashes_otherwise(blob: bytes) -> None:
    try:
        psd = PSD.decode(blob)
    except ValueError:
        return
    assert psd.encode() == blob


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=1, max_size=4), st.integers(min_value=0, max_value=10_000))
def test_decode_rejects_single_byte_corruptions(junk: bytes, where: int) -> None:
    blob = sample_psd_cached()
    at = where % len(blob)
    bad = _patched(blob, at, junk)[: len(blob)]
    try:
        psd = PSD.decode(bad)
    except ValueError:
        return
    assert psd.encode() == bad  # accepted only if it is itself a canonical PSD (e.g. a changed count)


_CACHE: dict[str, bytes] = {}


def sample_psd_cached() -> bytes:
    if "blob" not in _CACHE:
        _CACHE["blob"] = sample_psd().encode()
    return _CACHE["blob"]


def test_label_levels_always_split_the_label_into_intervals() -> None:
    """The label levels split the label whatever the counts (a party smaller than ``max_rows`` still gets them), at
    the party's private label quantiles (here exact: epsilon inf), so that each interval holds an equal share of its
    rows; they decode, route and check like any split. Without a structure budget they split at midpoints."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(64, 3))
    y = rng.uniform(0.0, 8.0, 64)
    lows, highs = np.array([-5.0, -5.0, -5.0, 0.0]), np.array([5.0, 5.0, 5.0, 8.0])
    psd = build_psd(X, y, lows, highs, depth=5, max_rows=500, epsilon=math.inf, rng=rng, label_levels=3)
    internal = psd.split_dim >= 0
    assert np.count_nonzero(psd.split_dim[internal] == 3) == 1 + 2 + 4  # the label's first three levels
    psd.check_bounds(lows, highs)
    assert PSD.decode(psd.encode()) == psd
    leaves = psd.leaf_of(X, y)
    assert psd.counts.sum() == 64 and np.array_equal(np.bincount(leaves, minlength=psd.num_leaves), psd.counts)
    cuts = np.sort(psd.split_value[:7])
    per_interval = np.bincount(np.searchsorted(cuts, y, side="left"), minlength=8)
    assert per_interval.min() >= 6 and per_interval.max() <= 10  # 8 each at equal mass, to the sketch's grid
    for leaf in np.unique(leaves):  # every leaf holds one label interval
        assert len(set(np.searchsorted(cuts, y[leaves == leaf], side="left").tolist())) == 1
    mid = build_psd(
        X, y, lows, highs, depth=5, max_rows=500, epsilon=math.inf, rng=rng, label_levels=3, structure_fraction=0.0
    )
    assert sorted(set(mid.split_value[:7].tolist())) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    mid.check_bounds(lows, highs)


def test_a_heavy_tailed_label_is_cut_where_its_rows_are() -> None:
    """Claim amounts: 0 for most rows, log-normal otherwise, one of millions. Midpoints of the range leave every row
    but the outlier in the first label interval; the private quantiles (epsilon 1, noise included) spread them, so
    that a PSD leaf holds rows of like labels (``label_sketched``)."""
    rng = np.random.default_rng(5)
    n = 4000
    X = rng.normal(size=(n, 2))
    y = np.where(rng.random(n) < 0.5, 0.0, np.exp(6.0 + 1.2 * rng.normal(size=n)))
    y[0] = 4e6
    lows, highs = np.array([-9.0, -9.0, 0.0]), np.array([9.0, 9.0, 4e6])
    levels = label_levels_for("regression", 16)
    psd = build_psd(X, y, lows, highs, depth=4, max_rows=0, epsilon=1.0, rng=rng, label_levels=levels)
    psd.check_bounds(lows, highs)
    cuts = np.sort(psd.split_value[psd.split_dim == 2])
    shares = np.bincount(np.searchsorted(cuts, y, side="left"), minlength=cuts.size + 1) / n
    assert cuts.size >= 8 and shares.max() <= 0.55  # the zeros are one value: half the rows in one interval at most
    assert np.count_nonzero(shares[1:] > 0.02) >= 7  # the amounts spread over the intervals above it
    midpoints = 4e6 * np.arange(1, 16) / 16
    assert np.mean(y <= midpoints[0]) > 0.999

    assert label_levels_for("binary", 16) == 1 and label_levels_for("regression", 16) == 4
    assert label_levels_for("regression", 17) == 5
