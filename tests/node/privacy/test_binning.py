"""Common bin edges: the mass-following private sketch, its accounting and payload, and the reference methods.

The edge-quality tests compare bins by the rows they hold (the largest share of a feature's present rows in one
bin), measured against exact pooled quantiles on the kinds of columns real parties hold: heavy tails, outliers,
a value holding 90% of the rows, integer counts, missing values, negative values and tiny ranges.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.edges import histogram_slots
from fgbdt_chain.ledger.spec.reference import from_fixed, to_fixed
from fgbdt_chain.node.model.trees import bin_matrix
from fgbdt_chain.node.privacy.binning import (
    BINNING_METHODS,
    DEFAULT_RESOLUTION,
    FALSE_SELECTION_RATE,
    FeatureSketch,
    Sketch,
    bucket_counts,
    cell_bounds,
    common_edges,
    decode_sketch,
    edges_from_sketch,
    encode_sketch,
    exact_edges,
    feature_ranges,
    local_sketch,
    party_sketches,
    schema_integers,
    schema_ranges,
    selection_threshold,
    sketch_noise_scale,
    sketch_rng,
)
from fgbdt_chain.node.privacy.discrete_gaussian import discrete_laplaces

BINS = 16


def _parties(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [rng.normal(size=4000), rng.integers(0, 2, 4000), np.full(4000, 3.0), rng.exponential(size=4000)]
    )
    X[rng.random(4000) < 0.05, 0] = np.nan
    return [X[:1500], X[1500:]]


def _heavy(seed: int, rows: int = 40_000) -> np.ndarray:
    """Heavy-tailed, outlier-ridden, constant-heavy, integer, signed and tiny-range columns (see the module doc)."""
    rng = np.random.default_rng(seed)
    return np.column_stack(
        [
            np.exp(rng.normal(size=rows) * 2.0),  # log-normal
            (rng.pareto(1.2, size=rows) + 1.0) * np.where(rng.random(rows) < 0.005, 1e4, 1.0),  # Pareto, outliers
            np.where(rng.random(rows) < 0.003, np.exp(rng.uniform(1, 10.8, rows)), rng.beta(0.6, 1.2, rows) * 1.1),
            rng.standard_t(1.5, size=rows) * 800.0,  # both signs, heavy tails
            np.where(rng.random(rows) < 0.9, 1.0, rng.exponential(3.0, rows)),  # 90% exactly 1
            rng.poisson(3.0, rows).astype(float),  # integer counts
            1000.0 + rng.random(rows) * 1e-3,  # a tiny range far from 0
        ]
    )


def _shares(col: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Share of the present rows in each bin."""
    slots = bin_matrix(col[:, None], [edges])[:, 0]
    slots = slots[slots > 0]
    return np.bincount(slots, minlength=len(edges) + 2)[1:] / slots.size


def _fixed_exact(values: np.ndarray) -> bool:
    return all(from_fixed(to_fixed(float(v))) == float(v) for v in values)


# ------------------------------------------------------------------------------------------------ every method


@pytest.mark.parametrize("method", BINNING_METHODS)
def test_edges_are_increasing_inside_the_range_and_at_most_bins_minus_one(method: str) -> None:
    parts = _parties()
    edges = common_edges(parts, BINS, method=method, seed=1)
    low, high = feature_ranges(np.vstack(parts))
    for f, e in enumerate(edges):
        assert len(e) <= BINS - 1
        assert np.all(np.diff(e) > 0)
        assert np.all((e >= low[f]) & (e < high[f]))
    assert len(edges[2]) == 0  # a constant feature has nothing to cut
    assert len(edges[1]) >= 1 and np.all((edges[1] >= 0) & (edges[1] < 1))  # binary: cuts between 0 and 1


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="bins"):
        common_edges(_parties(), 1)
    with pytest.raises(ValueError, match="unknown binning method"):
        common_edges(_parties(), 8, method="magic")
    with pytest.raises(ValueError, match="positive"):
        common_edges(_parties(), 8, epsilon=0.0)
    with pytest.raises(ValueError, match="resolution"):
        common_edges(_parties(), 8, resolution=0)


def test_equal_edges_give_equal_slots_for_every_party() -> None:
    parts = _parties()
    edges = common_edges(parts, BINS, seed=4)
    slots = bin_matrix(np.vstack(parts), edges)
    assert slots[:, 2].max() == 1 and np.all(slots[np.isnan(np.vstack(parts)[:, 0]), 0] == 0)
    assert slots.max() <= BINS


# ------------------------------------------------------------------------------------ privacy-relevant properties


def test_one_row_changes_one_count_per_present_feature() -> None:
    """The sensitivity the accounting rests on: a row adds one to one bucket of each feature it has a value for."""
    X = _heavy(0, rows=2000)
    low, high = schema_ranges(X)
    row = X[7].copy()
    row[3] = np.nan  # a missing value adds to no bucket
    for f in range(X.shape[1]):
        bounds = cell_bounds(low[f], high[f])
        before = bucket_counts(X[:, f], bounds)
        after = bucket_counts(np.append(X[:, f], row[f]), bounds)
        assert int(np.abs(after - before).sum()) == (0 if f == 3 else 1)


def test_noise_scale_is_features_over_the_stage_budget() -> None:
    # two stages of epsilon / 2 each, sensitivity F' (the features whose range is not a single point)
    assert sketch_noise_scale(1.0, 10) == 20.0
    assert sketch_noise_scale(4.0, 3, share=0.25) == 3.0
    assert sketch_noise_scale(math.inf, 10) == 0.0
    with pytest.raises(ValueError):
        sketch_noise_scale(-1.0, 10)


def test_discrete_laplace_has_the_documented_distribution() -> None:
    noise = discrete_laplaces(5.0, 200_000, np.random.default_rng(0))
    q = math.exp(-1 / 5.0)
    assert noise.dtype == np.int64
    assert abs(noise.mean()) < 0.1
    assert noise.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.03)
    # P(k) ~ q^|k|: the frequencies of 0 and 1 are in ratio q
    assert np.mean(noise == 1) / np.mean(noise == 0) == pytest.approx(q, rel=0.03)
    assert np.all(discrete_laplaces(0.0, 5, np.random.default_rng(0)) == 0)


def test_published_counts_carry_noise_of_the_stage_two_scale() -> None:
    """A party without rows publishes pure noise: its spread is that of the documented scale 2 F' / epsilon."""
    features, epsilon = 4, 2.0
    X, low, high = np.zeros((0, features)), np.zeros(features), np.ones(features)
    counts = np.concatenate(
        [
            fs.counts
            for seed in range(40)
            for fs in local_sketch(X, low, high, epsilon=epsilon, rng=np.random.default_rng(seed)).features
        ]
    )
    q = math.exp(-epsilon / (2 * features))
    assert counts.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.2)


def test_selection_threshold_bounds_false_selections() -> None:
    """An empty cell passes tau = b ln(O / alpha) with probability at most alpha / O."""
    cells, scale = 100, 8.0
    tau = selection_threshold(cells, scale)
    noise = discrete_laplaces(scale, 2_000_000, np.random.default_rng(1))
    assert np.mean(noise > tau) <= FALSE_SELECTION_RATE / cells
    assert tau == pytest.approx(scale * math.log(cells / FALSE_SELECTION_RATE))


def test_sketch_is_deterministic_given_the_seed_and_differs_between_parties() -> None:
    X = _heavy(2, rows=3000)
    low, high = schema_ranges(X)
    a = encode_sketch(local_sketch(X, low, high, epsilon=1.0, rng=sketch_rng(7, 0)))
    assert a == encode_sketch(local_sketch(X, low, high, epsilon=1.0, rng=sketch_rng(7, 0)))
    assert a != encode_sketch(local_sketch(X, low, high, epsilon=1.0, rng=sketch_rng(7, 1)))
    assert (
        common_edges([X[:1500], X[1500:]], BINS, seed=3, ranges=(low, high))[0].tolist()
        == common_edges([X[:1500], X[1500:]], BINS, seed=3, ranges=(low, high))[0].tolist()
    )


def test_constant_features_are_not_sketched_and_pay_no_noise() -> None:
    X = np.column_stack([np.full(100, 2.0), np.arange(100.0)])
    low, high = schema_ranges(X)
    sketch = local_sketch(X, low, high, epsilon=1.0, rng=np.random.default_rng(0))
    assert sketch.features[0].counts.size == 0 and sketch.features[0].starts.size == 0
    assert sketch.features[1].counts.size > 0


# ------------------------------------------------------------------------------------------------ edge quality


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_edges_follow_the_mass_of_heavy_tailed_columns(seed: int) -> None:
    """No bin holds more than 1/bins + 2/K of the rows where exact quantiles give 1/bins (a cut can be off by one
    grid bucket of 1/K of the rows on each side); the old equal-width sketch puts nearly every row in one bin."""
    X = _heavy(seed)
    parts = np.array_split(X, 4)
    low, high = schema_ranges(X)
    edges = common_edges(parts, BINS, seed=seed, ranges=(low, high))
    exact = exact_edges(X, BINS)
    old = common_edges(parts, BINS, method="dp-equal-width", seed=seed, ranges=(low, high))
    bound = 1 / BINS + 2 / DEFAULT_RESOLUTION
    for f in (0, 1, 2, 3, 6):  # continuous: heavy tails, outliers, both signs, tiny range
        assert _shares(X[:, f], exact[f]).max() <= 1 / BINS + 1e-3
        assert _shares(X[:, f], edges[f]).max() <= bound, f
    for f in (0, 1, 2):
        assert _shares(X[:, f], old[f]).max() > 0.9  # what this replaces
    for e in edges:
        assert np.all(np.diff(e) > 0) and _fixed_exact(e)


def test_a_value_holding_most_rows_gets_its_own_bin_and_the_rest_is_cut() -> None:
    X = _heavy(0)
    parts = np.array_split(X, 4)
    low, high = schema_ranges(X)
    edges = common_edges(parts, BINS, seed=0, ranges=(low, high))[4]
    col = X[:, 4]
    shares = _shares(col, edges)
    atom = np.mean(col == 1.0)
    slots = bin_matrix(col[:, None], [edges])[:, 0]
    own = slots == slots[col == 1.0][0]
    assert np.all(col[own] <= 1.0) and np.mean(own) - atom < 1e-3  # 1.0 with at most a sliver just below it
    assert np.sum(edges < 1.0) >= 1 and np.sum(edges > 1.0) >= 3  # values below and above 1 are still cut
    assert shares.max() <= _shares(col, exact_edges(X, BINS)[4]).max()  # exact quantiles merge 1 with neighbours


def test_integer_counts_get_a_bin_per_frequent_value() -> None:
    X = _heavy(1)
    parts = np.array_split(X, 4)
    low, high = schema_ranges(X)
    edges = common_edges(parts, BINS, seed=1, ranges=(low, high))[5]
    slots = bin_matrix(X[:, [5]], [edges])[:, 0]
    for value in range(8):  # each value holding more than 2% of the rows is alone in its bin
        assert np.mean(X[:, 5] == value) > 0.02
        assert set(np.unique(X[slots == slots[X[:, 5] == value][0], 5])) == {value}


def test_missing_values_are_ignored_and_only_present_rows_are_cut() -> None:
    rng = np.random.default_rng(5)
    col = np.exp(rng.normal(size=20_000) * 1.5)
    col[rng.random(20_000) < 0.4] = np.nan
    X = col[:, None]
    edges = common_edges(np.array_split(X, 4), BINS, seed=5, ranges=schema_ranges(X))[0]
    assert len(edges) == BINS - 1
    assert _shares(col, edges).max() <= 1 / BINS + 2 / DEFAULT_RESOLUTION
    assert np.all(bin_matrix(X, [edges])[np.isnan(col), 0] == 0)


@pytest.mark.parametrize(
    ("low", "high"),
    [(1000.0, 1000.001), (-1e-6, 1e-6), (0.0, 3e-18), (-5e40, 7e50), (-3.0, -2.5)],
    ids=["tiny-far-from-zero", "tiny-around-zero", "a-few-fixed-point-steps", "huge", "negative"],
)
def test_any_schema_range_gives_increasing_fixed_point_edges(low: float, high: float) -> None:
    rng = np.random.default_rng(2)
    col = low + (high - low) * rng.beta(1.5, 6.0, 8000)  # skewed towards low
    X = np.column_stack([col, col[::-1]])
    lo, hi = schema_ranges(X)
    edges = common_edges(np.array_split(X, 4), BINS, seed=2, ranges=(lo, hi))
    exact = exact_edges(X, BINS)
    for f, e in enumerate(edges):
        assert len(e) >= 1 and np.all(np.diff(e) > 0) and _fixed_exact(e)
        assert np.all((e > lo[f]) & (e < hi[f]))
        cells = cell_bounds(lo[f], hi[f])
        assert np.all(np.diff(cells) > 0) and _fixed_exact(cells)
        if hi[f] - lo[f] > 1e-15:  # wide enough in fixed point for 16 distinct bins
            assert _shares(X[:, f], e).max() <= 1 / BINS + 2 / DEFAULT_RESOLUTION
            assert _shares(X[:, f], exact[f]).max() <= 1 / BINS + 1e-3


def test_single_value_and_two_value_columns() -> None:
    X = np.column_stack([np.full(400, -7.5), np.where(np.arange(400) % 50 == 0, 1.0, 0.0)])
    lo, hi = schema_ranges(X)
    edges = common_edges(np.array_split(X, 4), BINS, seed=0, ranges=(lo, hi))
    assert len(edges[0]) == 0
    # 2% ones in parties of 100 rows drown in the noise, yet the two values are parted
    slots = bin_matrix(X, edges)[:, 1]
    assert len(set(slots[X[:, 1] == 0])) == 1 and set(slots[X[:, 1] == 0]).isdisjoint(slots[X[:, 1] == 1])


def test_noiseless_sketch_matches_exact_quantiles_in_rows() -> None:
    X = _heavy(3, rows=20_000)
    low, high = schema_ranges(X)
    parts = np.array_split(X, 4)
    edges = common_edges(parts, BINS, epsilon=math.inf, ranges=(low, high))
    for f in (0, 1, 2, 3):
        assert _shares(X[:, f], edges[f]).max() <= 1 / BINS + 1 / DEFAULT_RESOLUTION


# ------------------------------------------------------------------------------------------------------ payload


def test_sketch_round_trips_through_bytes_and_its_size_is_bounded() -> None:
    X = _heavy(4, rows=5000)
    low, high = schema_ranges(X)
    sketch = local_sketch(X, low, high, epsilon=1.0, rng=np.random.default_rng(0))
    data = encode_sketch(sketch)
    back, end = decode_sketch(data)
    assert end == len(data) and encode_sketch(back) == data
    for a, b in zip(sketch.features, back.features, strict=True):
        assert np.array_equal(a.starts, b.starts) and np.array_equal(a.splits, b.splits)
        assert np.array_equal(a.counts, b.counts)
    k = DEFAULT_RESOLUTION
    assert len(data) <= 4 + X.shape[1] * (4 + 4 * (2 * k + 1) + 4 * (4 * k + 2))
    assert len(data) < 700 * X.shape[1]  # measured: about 5 * 64 bytes per feature plus the spans


def test_decode_and_merge_refuse_malformed_sketches() -> None:
    X = _heavy(4, rows=2000)
    low, high = schema_ranges(X)
    sketch = local_sketch(X, low, high, epsilon=1.0, rng=np.random.default_rng(0))
    data = encode_sketch(sketch)
    with pytest.raises(ValueError, match="truncated"):
        decode_sketch(data[:-1])
    with pytest.raises(ValueError, match="claims"):
        decode_sketch(b"\xff\xff\xff\xff")
    fs = sketch.features[0]
    bad = [
        FeatureSketch(fs.starts + 1, fs.splits, fs.counts),  # does not start at cell 0
        FeatureSketch(fs.starts, fs.splits, fs.counts[:-1]),  # a count missing
        FeatureSketch(np.array([0, 10_000]), np.array([1, 1]), np.zeros(2, dtype=np.int64)),  # past the last cell
    ]
    for b in bad:
        with pytest.raises(ValueError):
            edges_from_sketch([Sketch((b, *sketch.features[1:]))], low, high, BINS)
    with pytest.raises(ValueError, match="features"):
        edges_from_sketch([Sketch(sketch.features[1:])], low, high, BINS)


def test_requester_merge_of_published_sketches_equals_the_simulator() -> None:
    """What party nodes publish (their own seeded sketch) merged by the requester gives the simulator's edges."""
    X = _heavy(6, rows=6000)
    parts = np.array_split(X, 3)
    low, high = schema_ranges(X)
    published = [
        decode_sketch(encode_sketch(local_sketch(P, low, high, epsilon=1.0, rng=sketch_rng(11, p))))[0]
        for p, P in enumerate(parts)
    ]
    merged = edges_from_sketch(published, low, high, BINS)
    simulated = common_edges(parts, BINS, seed=11, ranges=(low, high))
    assert [e.tolist() for e in merged] == [e.tolist() for e in simulated]
    assert [e.tolist() for e in merged] == [
        e.tolist() for e in edges_from_sketch(party_sketches(parts, low, high, epsilon=1.0, seed=11), low, high, BINS)
    ]


def test_schema_integers_names_the_columns_of_whole_values() -> None:
    X = np.array([[0.0, 1.5, np.nan, -3.0, 2.0**53], [1.0, 2.0, np.nan, 7.0, 1.0], [np.nan, 3.0, np.nan, 0.0, 0.0]])
    assert schema_integers(X).tolist() == [True, False, False, True, False]


@pytest.mark.parametrize("method", BINNING_METHODS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_integer_cuts_move_to_half_integers_and_part_the_rows_as_before(method: str, seed: int) -> None:
    """Flags, small counts, a wide integer range, negative codes and missing values: snapped and merged, every
    integer feature's cuts are half-integers, and every row keeps the side of every cut it had, so the bins hold
    the same rows in the same order (empty bins aside). A binary flag keeps one cut; a real-valued column keeps its
    cuts as they were."""
    rng = np.random.default_rng(seed)
    rows = 3000
    X = np.column_stack(
        [
            (rng.random(rows) < 0.1).astype(float),  # a rare one-hot flag
            rng.poisson(1.5, rows).astype(float),  # small counts
            rng.integers(-50, 5000, rows).astype(float),  # a wide integer range: more values than bins
            np.where(rng.random(rows) < 0.3, np.nan, rng.integers(-3, 3, rows).astype(float)),  # codes, missing
            rng.normal(size=rows),  # real-valued
        ]
    )
    parts = [X[:1000], X[1000:2200], X[2200:]]
    integers = schema_integers(X)
    assert integers.tolist() == [True, True, True, True, False]
    plain = common_edges(parts, 16, method=method, seed=seed, ranges=schema_ranges(X))
    snapped = common_edges(parts, 16, method=method, seed=seed, ranges=schema_ranges(X), integers=integers)
    assert snapped[-1].tolist() == plain[-1].tolist()
    assert snapped[0].tolist() == [0.5]
    for f in range(4):
        e = snapped[f]
        assert np.all(np.diff(e) > 0) and np.all(e - np.floor(e) == 0.5) and len(e) <= len(plain[f])
    before, after = bin_matrix(X, plain), bin_matrix(X, snapped)
    for f in range(X.shape[1]):
        pairs = np.unique(np.column_stack([before[:, f], after[:, f]]), axis=0)  # sorted by the bin before
        # one bin after per bin before and back (the same rows share a bin), in the same order
        assert len(np.unique(pairs[:, 0])) == len(np.unique(pairs[:, 1])) == len(pairs)
        assert np.all(np.diff(pairs[:, 1].astype(np.int64)) > 0)
    few = [0, 1, 3]  # the integer features with fewer values than bins: their histograms narrow
    narrow = histogram_slots([snapped[f] for f in few])
    low, high = schema_ranges(X)
    assert narrow <= max(high[f] - low[f] for f in few) + 2  # at most a cut per gap between integers
    assert narrow < histogram_slots([plain[f] for f in few]) or method == "exact"
