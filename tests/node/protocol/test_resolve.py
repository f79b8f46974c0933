"""The simulator's batched contract side against the reference: limbs, top-2 and whole levels, node by node."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.node.kernels import limbs
from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedRows, FixedSums, RowGroups
from fgbdt_chain.node.kernels.limbs import LIMB
from fgbdt_chain.node.protocol.local_party import messages_of
from fgbdt_chain.node.protocol.resolve import (
    FixedLevel,
    _contenders,
    _level_sums,
    level_of,
    level_splits,
    resolve_level,
    resolve_level_view,
    top2_level,
    tree_end,
)
from fgbdt_chain.node.protocol.resolved_level import Inherited, ResolvedLevel


def _fixed(g: np.ndarray, h: np.ndarray, n: np.ndarray) -> FixedSums:
    g_hi, g_lo = limbs.split(g)
    h_hi, h_lo = limbs.split(h)
    return FixedSums(g_hi, g_lo, h_hi, h_lo, n.astype(np.int64))


def _random_sums(rng: np.random.Generator, m: int, k: int, nbins: int, scale: int) -> list[FixedSums]:
    """Exact (g, h, n) sums of M parties, (K, 2, nbins) each, with empty slots and a party that has no rows."""
    sums = []
    for p in range(m):
        n = rng.integers(0, 12, (k, 2, nbins))
        n[rng.random(n.shape) < 0.6] = 0  # mostly empty slots, as in sparse data
        if p == m - 1 and m > 1:
            n[:] = 0  # a null player
        g = np.array([int(x) * scale for x in rng.integers(-(10**17), 10**17, n.size)], dtype=object).reshape(n.shape)
        h = np.array([int(x) * scale for x in rng.integers(0, 10**17, n.size)], dtype=object).reshape(n.shape)
        g[n == 0] = 0
        h[n == 0] = 0
        sums.append(_fixed(g, h, n))
    return sums


def test_fixed_rows_are_the_quantised_integers_and_sum_exactly() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=500) * 10.0 ** rng.integers(-20, 6, 500), [0.0, -0.0, 0.5e-18, -1.5e-18]])
    rows = FixedRows.of(x, np.abs(x))
    for hi, lo, values in ((rows.g_hi, rows.g_lo, x), (rows.h_hi, rows.h_lo, np.abs(x))):
        assert np.all((lo >= 0) & (lo < LIMB))
        assert [int(a) * LIMB + int(b) for a, b in zip(hi, lo, strict=True)] == [ref.to_fixed(float(v)) for v in values]
    # the candidate kernel's sums are the Python sums of those integers, bin by bin
    slots = rng.integers(0, 4, (x.size, 3)).astype(np.uint8)
    binned = BinnedRows(slots, 4)
    sums = binned.group_candidates_fixed(RowGroups.everything(x.size), np.array([[2, 0]]), rows)
    got = messages_of(sums, [(2, 0)])[0]
    for r, f in enumerate((2, 0)):
        for b in range(4):
            in_bin = slots[:, f] == b
            assert got.g[r][b] == sum(ref.to_fixed(float(v)) for v in x[in_bin])
            assert got.n[r][b] == int(in_bin.sum())


def test_rows_the_limbs_cannot_carry_are_refused() -> None:
    with pytest.raises(OverflowError, match="not finite"):
        FixedRows.of(np.array([np.nan]), np.zeros(1))
    with pytest.raises(OverflowError, match="beyond"):
        FixedRows.of(np.array([2e6]), np.zeros(1))


def test_sums_the_limbs_cannot_carry_go_to_the_reference() -> None:
    sums = _random_sums(np.random.default_rng(1), 2, 3, 5, 1)
    assert level_of(sums) is not None
    big = sums[0]
    big.g_hi[0, 0, 0] = 2**48  # a sum of 2**80: beyond what the level's limb sums carry
    assert level_of([big, sums[1]]) is None
    assert level_of([]) is None


def test_sums_already_stacked_make_the_same_level() -> None:
    """The simulator's kernels stack every party's sums (``node.kernels.party_kernels``): passed along, the level is the
    one stacking the parties' sums gives, refused alike where the limbs cannot carry it, and checked for its
    party count."""
    sums = _random_sums(np.random.default_rng(2), 3, 2, 4, 1)
    stacked = FixedSums(*(np.array([getattr(s, f) for s in sums]) for f in ("g_hi", "g_lo", "h_hi", "h_lo", "n")))
    one, other = level_of(sums), level_of(sums, stacked)
    assert one is not None and other is not None
    for f in ("g_hi", "g_lo", "h_hi", "h_lo", "n"):
        assert np.array_equal(getattr(one, f), getattr(other, f))
    stacked.h_hi[1, 0, 0, 0] = -(2**48)
    assert level_of(sums, stacked) is None
    with pytest.raises(ValueError, match="3 parties' sums stacked for 2 parties"):
        level_of(sums[:2], stacked)


def _reference_level(
    sums: list[FixedSums],
    cands: list[tuple[int, ...]],
    votes: list[list[int]],
    inherited: list[ref.Totals | None],
    last: bool,
    params: ref.Params,
    credits: list[ref.Credit] | None = None,
) -> tuple[list[ref.NodeResult], list[ref.Totals]]:
    hists = [messages_of(s, cands) for s in sums]
    results, totals = [], []
    for j, inh in enumerate(inherited):
        node = [h[j] for h in hists]
        results.append(ref.resolve_node(node, votes[j], inh, last, params, credits))
        agg = ref.aggregate(node)
        totals.append(inh if inh is not None else ref.Totals(sum(agg.g[0]), sum(agg.h[0]), sum(agg.n[0])))
    return results, totals


def _random_level(
    seed: int,
) -> tuple[list[FixedSums], list[tuple[int, ...]], list[list[int]], list[ref.Totals | None], list[ref.Credit]]:
    """A random level: 1-5 parties' sums (one a null player), candidates, votes, inherited totals (some nodes roots)
    and credits (most not neutral)."""
    rng = np.random.default_rng(seed)
    m, k, nbins, features = int(rng.integers(1, 6)), int(rng.integers(1, 9)), int(rng.integers(2, 9)), 6
    sums = _random_sums(rng, m, k, nbins, int(10 ** rng.integers(0, 4)))
    cands = [tuple(int(f) for f in rng.choice(features, 2, replace=bool(rng.random() < 0.2))) for _ in range(k)]
    votes = rng.integers(-1, features, (k, m)).tolist()
    inherited = [
        None if rng.random() < 0.4 else ref.Totals(int(g) * 10**5, 10**19, int(n))
        for g, n in zip(rng.integers(-(10**15), 10**15, k), rng.integers(1, 99, k), strict=True)
    ]
    credits = [
        ref.Credit(*(int(c) for c in rng.integers(ONE // 2, 2 * ONE, 3))) if rng.random() < 0.7 else ref.NEUTRAL
        for _ in range(m)
    ]
    return sums, cands, votes, inherited, credits


@pytest.mark.parametrize("seed", range(12))
def test_levels_resolve_as_resolve_node_does(seed: int) -> None:
    sums, cands, votes, inherited, credits = _random_level(seed)
    for hessian in (ref.HESSIAN_SECOND_ORDER, ref.HESSIAN_COUNT):
        for lam, min_rows in ((ONE // 10, 1), (0, 1), (ONE, 4), (0, 15)):
            params = ref.Params(lam, ONE // 10, min_rows, ONE // 2, hessian)
            for last in (False, True):
                level = level_of(sums)
                assert level is not None
                for cr in (None, credits):
                    got = resolve_level(level, cands, votes, inherited, last, params, cr)
                    assert got == _reference_level(sums, cands, votes, inherited, last, params, cr)


def test_resolve_level_splits_and_pays_like_the_reference_on_a_clear_split() -> None:
    """A level where every node splits: the Shapley values and contributions are the reference's."""
    g = np.zeros((1, 2, 3), dtype=object)
    g[0, 0] = [-4 * ONE, 0, 4 * ONE]
    h = np.full((1, 2, 3), ONE, dtype=object)
    n = np.full((1, 2, 3), 10, dtype=np.int64)
    sums = [_fixed(g, h, n), _fixed(g // 2, h, n)]
    params = ref.Params(ONE // 10, ONE // 10, 1, ONE, ref.HESSIAN_SECOND_ORDER)
    level = level_of(sums)
    assert isinstance(level, FixedLevel)
    results, _ = resolve_level(level, [(3, 1)], [[3, 1]], [None], False, params)
    assert results[0].split is not None and results[0].split.feature == 3
    assert results[0].kappa[0] == results[0].split.gain and results[0].kappa[1] == 0
    assert (results, _) == _reference_level(sums, [(3, 1)], [[3, 1]], [None], False, params)
    # credited at half their gradients, the parties' voting contribution follows the credited gain
    half = [ref.Credit(ONE // 2, ONE, ONE)] * 2
    credited, _ = resolve_level(level, [(3, 1)], [[3, 1]], [None], False, params, half)
    assert credited[0].split == results[0].split
    assert 0 < credited[0].kappa[0] < results[0].kappa[0]
    assert credited[0].kappa[0] == credited[0].credited_gain


@pytest.mark.parametrize("shift", [1, 3, 1000, 10**5, 3 * 10**5, 10**6])
@pytest.mark.parametrize("hessian", [ref.HESSIAN_SECOND_ORDER, ref.HESSIAN_COUNT])
def test_gains_float64_cannot_order_are_ordered_exactly(shift: int, hessian: int) -> None:
    """Each node's second candidate is its first with ``shift`` fixed-point units of g moved between two slots: the
    two gains differ by a few units in 10^21, far below float64's resolution, so the float pre-selection keeps
    both and the exact search decides, as the reference does, whichever way the difference goes."""
    rng = np.random.default_rng(shift)
    m, k, nbins = 2, 8, 4
    g = np.array([int(x) * 10**6 for x in rng.integers(-(10**15), 10**15, m * k * nbins)], dtype=object)
    g = g.reshape(m, k, 1, nbins).repeat(2, axis=2)
    h = np.array([int(x) * 10**6 for x in rng.integers(1, 10**15, m * k * nbins)], dtype=object)
    h = h.reshape(m, k, 1, nbins).repeat(2, axis=2)
    n = np.full((m, k, 2, nbins), 50, dtype=np.int64)
    sign = np.where(rng.random(k) < 0.5, 1, -1)
    for j in range(k):
        g[0, j, 1, 0] += int(sign[j]) * shift
        g[0, j, 1, 1] -= int(sign[j]) * shift
    sums = [_fixed(g[p], h[p], n[p]) for p in range(m)]
    level = level_of(sums)
    assert level is not None
    params = ref.Params(ONE, ONE // 10, 1, ONE // 2, hessian)
    cands = [(5, 2)] * k
    votes = [[5, 2]] * k
    _, tot, cand, left = _level_sums(level.g_hi, level.g_lo, level.h_hi, level.h_lo, level.n, 1)
    kept = cand[_contenders(tot, cand, left, k, params.lam, hessian)]
    # float64 cannot tell the two candidates apart at any node: both stay in the exact search
    assert all(set(kept[kept[:, 0] == j, 1].tolist()) == {0, 1} for j in range(k))
    got = resolve_level(level, cands, votes, [None] * k, True, params)
    assert got == _reference_level(sums, cands, votes, [None] * k, True, params)
    ranks = {res.split.rank for res in got[0] if res.split is not None}
    if hessian == ref.HESSIAN_SECOND_ORDER:
        assert ranks == {0, 1}  # the exact difference goes either way across the nodes, and decides each


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 2**32),
    st.sampled_from([0, 1, ONE // 10, ONE, 2**79]),
    st.sampled_from([ref.HESSIAN_SECOND_ORDER, ref.HESSIAN_COUNT]),
    st.integers(1, 3),
    st.booleans(),
)
def test_levels_with_cancelling_or_huge_sums_resolve_as_the_reference(
    seed: int, lam: int, hessian: int, min_rows: int, signed_h: bool
) -> None:
    """Sums where float64 is at its weakest: hessian sums that cancel lambda or each other (negative, as an attacker
    may send), zero denominators at lambda 0, near-copies of one candidate in the other, and values near 2^79 whose
    limb sums pass 2^53. Every threshold float64 cannot rule out goes to the exact search, so the level resolves as
    the reference does."""
    rng = np.random.default_rng(seed)
    m, k, nbins = int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(2, 6))
    big = bool(rng.random() < 0.3)
    sums = []
    for _ in range(m):
        n = rng.integers(0, 5, (k, 2, nbins))
        top = 2**79 if big else 10**20
        g = np.array([int(x) for x in rng.integers(-(2**62), 2**62, n.size)], dtype=object) * (top // 2**62)
        h = np.array([int(x) for x in rng.integers(-(2**62) if signed_h else 0, 2**62, n.size)], dtype=object)
        h = h * (top // 2**62)
        g, h = g.reshape(n.shape), h.reshape(n.shape)
        if rng.random() < 0.5:  # the second candidate a near-copy of the first: near-ties
            g[:, 1], h[:, 1], n[:, 1] = g[:, 0] + rng.integers(-2, 3), h[:, 0], n[:, 0]
        if rng.random() < 0.3 and lam:  # a slot whose hessian cancels lambda
            h[0, 0, 0] = -lam
        g[n == 0], h[n == 0] = 0, 0
        sums.append(_fixed(g, h, n))
    level = level_of(sums)
    if level is None:
        return
    cands = [(3, 1)] * k
    votes = [[3] * m] * k
    params = ref.Params(lam, ONE // 10, min_rows, ONE // 2, hessian)
    try:
        expected = _reference_level(sums, cands, votes, [None] * k, True, params)
    except ref.FixedPointOverflow:
        return  # where the contract reverts, the simulator falls back to the reference (``Federation._resolve``)
    assert resolve_level(level, cands, votes, [None] * k, True, params) == expected


def test_the_float_preselection_drops_only_clear_losers() -> None:
    """On random levels most thresholds are ruled out in float64, and every threshold ruled out has a smaller
    exact gain than one kept at its node."""
    rng = np.random.default_rng(7)
    dropped = 0
    for _ in range(20):
        sums = _random_sums(rng, 3, 6, 8, 10**3)
        level = level_of(sums)
        assert level is not None
        _, tot, cand, left = _level_sums(level.g_hi, level.g_lo, level.h_hi, level.h_lo, level.n, 1)
        keep = set(_contenders(tot, cand, left, 6, ONE // 10, ref.HESSIAN_SECOND_ORDER).tolist())
        gains = []
        for q, (j, r, _t) in enumerate(cand.tolist()):
            g_l, h_l = int(left[0, q]) * LIMB + int(left[1, q]), int(left[2, q]) * LIMB + int(left[3, q])
            g_t, h_t = int(tot[0, j, r]) * LIMB + int(tot[1, j, r]), int(tot[2, j, r]) * LIMB + int(tot[3, j, r])
            gains.append(ref.split_gain(g_l, h_l, g_t - g_l, h_t - h_l, ONE // 10))
        for q, (j, _r, _t) in enumerate(cand.tolist()):
            if q not in keep:
                dropped += 1
                assert gains[q] < max(gains[p] for p in keep if cand[p, 0] == j)
    assert dropped > 0


def test_resolve_level_needs_a_valid_min_rows() -> None:
    sums = _random_sums(np.random.default_rng(2), 2, 1, 3, 1)
    level = level_of(sums)
    assert level is not None
    with pytest.raises(ValueError, match="min_rows"):
        resolve_level(level, [(0, 1)], [[0, 0]], [None], False, ref.Params(ONE, ONE, 0, ONE))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(-1, 7), min_size=1, max_size=6), min_size=1, max_size=5),
    st.integers(1, 8),
    st.sampled_from([ref.TIE_LOWER_INDEX, ref.TIE_HASHED]),
    st.integers(0, 2**16 - 1),
    st.integers(1, 2**9 - 8),
)
def test_top2_of_a_level_is_the_reference_top2(
    node_votes: list[list[int]], features: int, rule: int, tree: int, first_node: int
) -> None:
    m = min(len(v) for v in node_votes)
    votes = np.array([v[:m] for v in node_votes], dtype=np.int64).T  # (M, K)
    nodes = [first_node + j for j in range(votes.shape[1])]
    try:
        want: list[tuple[int, ...]] | type[ValueError] = [
            ref.top2(v, features, rule, tree, n) for v, n in zip(votes.T.tolist(), nodes, strict=True)
        ]
    except ValueError:
        want = ValueError
    if want is ValueError:
        with pytest.raises(ValueError, match="not a feature index"):
            top2_level(votes, features, rule, tree, nodes)
    else:
        assert top2_level(votes, features, rule, tree, nodes) == want


def test_top2_level_checks_rule_and_node_ids() -> None:
    votes = np.zeros((2, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="unknown tie rule 5"):
        top2_level(votes, 4, 5, 0, [1, 2, 3])
    with pytest.raises(ValueError, match="not a feature index"):  # the votes are reported first, as on chain
        top2_level(votes + 7, 4, 5, 0, [1, 2, 3])
    with pytest.raises(ValueError, match="2 node ids for 3 nodes"):
        top2_level(votes, 4, ref.TIE_HASHED, 0, [1, 2])
    with pytest.raises(ValueError, match="needs the level's node ids"):
        top2_level(votes, 4, ref.TIE_HASHED, 0)


def test_credited_values_are_the_references_on_big_and_signed_values() -> None:
    from fgbdt_chain.node.protocol.resolve import _credited

    rng = np.random.default_rng(3)
    edges = [0, 1, -1, ONE, -ONE, ONE - 1, 2**80, -(2**80), 2**127, -(2**127), 2**175, -(2**175)]
    values = edges + [
        int(v) * int(w) for v, w in zip(rng.integers(-(2**62), 2**62, 200), rng.integers(1, 2**40, 200), strict=True)
    ]
    multipliers = [0, 1, ONE // 2, ONE, ONE + 1, ref.MAX_CREDIT] + [int(x) for x in rng.integers(0, 2**62, 50)]
    for v in values:
        for m in multipliers:
            try:
                want: int | None = ref.credited(v, m)
            except ref.FixedPointOverflow:
                want = None
            if want is None:
                with pytest.raises(ref.FixedPointOverflow):
                    _credited(v, m)
            else:
                assert _credited(v, m) == want


def _shapley_or_overflow(f, *args):  # type: ignore[no-untyped-def]
    try:
        return f(*args)
    except ref.FixedPointOverflow:
        return "overflow"


@pytest.mark.parametrize("m", range(1, 8))
def test_unrolled_split_shapley_equals_the_reference(m: int) -> None:
    from fgbdt_chain.node.protocol.resolve import split_shapley

    rng = np.random.default_rng(m)
    for trial in range(150):
        bits = int(rng.choice([10, 62, 80, 126, 127, 130]))

        def draw(signed: bool, scale: int = 2 ** max(bits - 62, 0)) -> list[int]:
            return [int(rng.integers(-(2**62) if signed else 0, 2**62)) * scale for _ in range(m)]

        g_l, h_l, g_r, h_r = draw(True), draw(False), draw(True), draw(False)
        if trial % 7 == 0:
            h_l = [-h for h in h_l]  # denominators at or below zero: utility 0
        if trial % 11 == 0:
            g_l = [0] * m
        lam = int(rng.choice([0, 1, ONE // 10, ONE, 2**200]))
        want = _shapley_or_overflow(ref.split_shapley, g_l, h_l, g_r, h_r, lam)
        assert _shapley_or_overflow(split_shapley, g_l, h_l, g_r, h_r, lam) == want
    with pytest.raises(ValueError, match="same length"):
        split_shapley([1] * m, [1] * (m + 1), [1] * m, [1] * m, 1)


def _scaled(hists: list[ref.NodeHistograms], factor: int) -> list[ref.NodeHistograms]:
    """The same histograms with every g and h times ``factor`` (the counts kept)."""
    return [
        ref.NodeHistograms(
            h.features,
            tuple(tuple(v * factor for v in row) for row in h.g),
            tuple(tuple(v * factor for v in row) for row in h.h),
            h.n,
        )
        for h in hists
    ]


@pytest.mark.parametrize("seed", range(8))
def test_level_splits_are_the_reference_best_splits(seed: int) -> None:
    """``level_splits`` (what a party votes ahead on) gives every node ``best_split`` of its aggregated histograms:
    through the compiled search, and through the reference where the limbs cannot carry the sums (times 2**40)."""
    rng = np.random.default_rng(seed)
    m, k, nbins = int(rng.integers(1, 6)), int(rng.integers(1, 9)), int(rng.integers(2, 9))
    sums = _random_sums(rng, m, k, nbins, int(10 ** rng.integers(0, 4)))
    cands = [tuple(int(f) for f in rng.choice(6, 2, replace=False)) for _ in range(k)]
    exact = [messages_of(s, cands) for s in sums]
    splits = 0
    for submissions in (exact, [_scaled(s, 2**40) for s in exact]):
        for hessian in (ref.HESSIAN_SECOND_ORDER, ref.HESSIAN_COUNT):
            for lam, min_rows in ((ONE // 10, 1), (0, 1), (ONE, 4)):
                params = ref.Params(lam, ONE // 10, min_rows, ONE // 2, hessian)
                want = [
                    ref.best_split(ref.aggregate([s[j] for s in submissions]), lam, min_rows, hessian) for j in range(k)
                ]
                assert level_splits(submissions, cands, params) == want
                splits += sum(w is not None for w in want)
    assert splits  # the comparison covers splits, not only leaves
    assert level_splits([], [(0, 1)], ref.Params(ONE, ONE, 1, ONE, 0)) == [None]


@pytest.mark.parametrize("seed", range(6))
def test_a_trees_end_is_the_reference_resolution_of_its_last_level(seed: int) -> None:
    """``tree_end`` (what a party votes on the next root ahead from) gives the splits and leaf values
    ``resolve_node`` makes at a tree's last level: a node that does not split is a leaf of its inherited totals, a
    split node's children leaves of its sides."""
    rng = np.random.default_rng(100 + seed)
    m, k, nbins = int(rng.integers(1, 6)), int(rng.integers(1, 9)), int(rng.integers(2, 9))
    sums = _random_sums(rng, m, k, nbins, int(10 ** rng.integers(0, 4)))
    cands = [tuple(int(f) for f in rng.choice(6, 2, replace=False)) for _ in range(k)]
    submissions = [messages_of(s, cands) for s in sums]
    open_nodes = sorted(int(n) for n in rng.choice(np.arange(8, 16), k, replace=False))
    inherited = [ref.Totals(int(rng.integers(-(10**9), 10**9)), int(rng.integers(1, 10**9)), 7) for _ in range(k)]
    params = ref.Params(ONE // 10, ONE // 10, 1, ONE // 2, ref.HESSIAN_SECOND_ORDER)
    end = tree_end(submissions, cands, open_nodes, inherited, params)
    assert end is not None
    splits, leaves = end
    want_splits, want_leaves = {}, {}
    for j, node in enumerate(open_nodes):
        r = ref.resolve_node([s[j] for s in submissions], [ref.ABSTAIN] * m, inherited[j], True, params)
        if r.split is None:
            want_leaves[node] = r.leaf
        else:
            want_splits[node] = (r.split.feature, r.split.threshold)
            want_leaves[2 * node], want_leaves[2 * node + 1] = r.left_leaf, r.right_leaf
    assert (splits, leaves) == (want_splits, want_leaves)
    # a root (no inherited totals) takes its candidate 0's; sums beyond the limbs are not known ahead
    root = tree_end([s[:1] for s in submissions], cands[:1], [1], [None], params)
    r = ref.resolve_node([s[0] for s in submissions], [ref.ABSTAIN] * m, None, True, params)
    assert root is not None and root[1] == ({1: r.leaf} if r.split is None else {2: r.left_leaf, 3: r.right_leaf})
    assert tree_end([_scaled(s, 2**80) for s in submissions], cands, open_nodes, inherited, params) is None
    assert tree_end([], cands, open_nodes, inherited, params) is None


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("hessian", [ref.HESSIAN_SECOND_ORDER, ref.HESSIAN_COUNT])
def test_a_level_within_the_bounds_resolves_on_digits_and_reads_as_its_results(
    seed: int, last: bool, hessian: int
) -> None:
    """Within ``node.kernels.resolve_kernel``'s bounds the level is resolved there, and what training reads of it
    (gains,
    leaf values, per-party sums, the children's inherited totals, every node's totals) is what its full results say,
    as for a level the reference's path resolved."""
    sums, cands, votes, inherited, credits = _random_level(seed)
    level = level_of(sums)
    assert level is not None
    params = ref.Params(ONE // 10, ONE // 10, 1, ONE // 2, hessian)
    compiled = resolve_level_view(level, cands, votes, Inherited(inherited), last, params, credits)
    want, totals = _reference_level(sums, cands, votes, inherited, last, params, credits)
    assert compiled.from_kernel
    python = ResolvedLevel.of_results(want, totals, len(sums), last)
    for view in (compiled, python):
        assert list(view) == want and view == want and view.totals() == totals
        assert view.gains() == [r.split.gain if r.split else 0 for r in want]
        assert view.leaves() == [r.leaf for r in want]
        assert view.child_leaves() == [
            (r.left_leaf, r.right_leaf) if r.split is not None and last else None for r in want
        ]
        assert view.leaf_values() == [r.leaf for r in want if r.leaf is not None] + [
            v for r in want if r.split is not None and last for v in (r.left_leaf, r.right_leaf)
        ]
        for name, field in (("phi_sums", "phi"), ("kappa_sums", "kappa"), ("contribution_sums", "contribution")):
            assert getattr(view, name) == [sum(getattr(r, field)[p] for r in want) for p in range(len(sums))]
        assert view.children().totals == [t for r in want if r.split is not None for t in (r.left, r.right)]
        assert view.feature.tolist() == [r.split.feature if r.split else -1 for r in want]
        assert view.threshold.tolist() == [r.split.threshold if r.split else 0 for r in want]
        assert view.ints[:, 5].tolist() == [t.n for t in totals]
    # the children's totals as digits carry the next level exactly as Python values do
    children = compiled.children()
    assert Inherited(children.totals).digits is not None
    for a, b in zip(children.digits or (), Inherited(children.totals).digits or (), strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize(
    "params",
    [
        ref.Params(2**250, ONE // 10, 1, ONE // 2),  # lambda beyond the digits' bound
        ref.Params(ONE // 10, 2**120, 1, ONE // 2),  # a learning rate whose products could leave int256
        ref.Params(ONE // 10, ONE // 10, 1, 2**64),  # an alpha whose products could leave int256
    ],
)
def test_a_level_beyond_the_bounds_is_resolved_on_python_integers(params: ref.Params) -> None:
    """Where a bound of the compiled path does not hold, the level goes to the reference's path, with its results
    or its error (where the contract reverts)."""
    sums, cands, votes, inherited, credits = _random_level(3)
    level = level_of(sums)
    assert level is not None
    try:
        want: tuple[list[ref.NodeResult], list[ref.Totals]] | str = _reference_level(
            sums, cands, votes, inherited, True, params, credits
        )
    except ref.FixedPointOverflow as exc:
        want = str(exc)
    try:
        view = resolve_level_view(level, cands, votes, Inherited(inherited), True, params, credits)
    except ref.FixedPointOverflow as exc:
        assert want == str(exc)
        return
    assert not view.from_kernel
    assert (list(view), view.totals()) == want


def test_inherited_totals_beyond_int256_go_to_the_reference() -> None:
    """Inherited totals the digits cannot hold leave the level to the reference's path (which reverts on them as
    the contract does), and either form of inherited totals gives the other."""
    huge = Inherited([ref.Totals(2**255, 0, 1)])
    assert huge.digits is None
    both = Inherited([None, ref.Totals(-(10**30), 10**20, 7)])
    digits = both.digits
    assert digits is not None and digits[0].tolist() == [False, True] and digits[2].tolist() == [0, 7]
    assert Inherited(digits=digits).totals == both.totals
    with pytest.raises(ValueError, match="one of them"):
        Inherited()


def test_a_resolved_level_copies_and_pickles_alike_whatever_was_read() -> None:
    """A level's nodes are made when read, and its children's totals turn into Python values when asked: neither
    shows in a copy or a pickle (experiments copy a federation part-way; tests compare pickles)."""
    import copy
    import pickle

    sums, cands, votes, inherited, credits = _random_level(5)
    level = level_of(sums)
    assert level is not None
    params = ref.Params(ONE // 10, ONE // 10, 1, ONE // 2)
    view = resolve_level_view(level, cands, votes, Inherited(inherited), False, params, credits)
    before = pickle.dumps(view)
    nodes = list(view)
    assert view.children().totals is not None
    assert pickle.dumps(view) == before
    copied = copy.deepcopy(view)
    assert list(copied) == nodes and copied.children().totals == view.children().totals
    assert pickle.loads(before) == nodes
