"""The simulator's batched contract side against the reference: limbs, top-2 and whole levels, node by node."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import reference as ref
from ledger.reference import ONE
from node.fvtree import LocalParty, TrainParams, quantise
from node.resolve import LIMB, FixedLevel, quantise_level, resolve_level, top2_level


def _party() -> LocalParty:
    """A party only used for its ``messages`` (the reference path's quantisation)."""
    return LocalParty(np.zeros((1, 1), dtype=np.uint8), np.zeros(1), TrainParams())


def _level_sums(
    rng: np.random.Generator, m: int, k: int, nbins: int, scale: float
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Float (g, h, n) sums of M parties, (K, 2, nbins) each, with empty slots and a party that has no rows."""
    sums = []
    for p in range(m):
        n = rng.integers(0, 12, (k, 2, nbins))
        n[rng.random(n.shape) < 0.6] = 0  # mostly empty slots, as in sparse data
        if p == m - 1 and m > 1:
            n[:] = 0  # a null player
        g = np.where(n > 0, rng.normal(size=n.shape) * scale, 0.0)
        h = np.where(n > 0, rng.random(n.shape) * scale, 0.0)
        g[(n > 0) & (rng.random(n.shape) < 0.05)] = -0.0
        sums.append((g, h, n.astype(np.int64)))
    return sums


def test_limbs_are_the_quantised_integers() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=500) * 10.0 ** rng.integers(-20, 6, 500), [0.0, -0.0, 0.5e-18, -1.5e-18]])
    sums = [(x.reshape(1, 1, -1), np.abs(x).reshape(1, 1, -1), np.ones((1, 1, x.size), dtype=np.int64))]
    level = quantise_level(sums)
    assert level is not None
    for hi, lo, want in ((level.g_hi, level.g_lo, quantise(x)), (level.h_hi, level.h_lo, quantise(np.abs(x)))):
        assert np.all((lo >= 0) & (lo < LIMB))
        assert [int(a) * LIMB + int(b) for a, b in zip(hi.ravel(), lo.ravel(), strict=True)] == want


@pytest.mark.parametrize(
    "bad",
    [
        lambda g, h, n: (np.where(g == g.flat[0], np.nan, g), h, n),  # NaN: the reference's int() raises
        lambda g, h, n: (g, h * 2e6, n),  # beyond 2**80 once scaled by ONE
        lambda g, h, n: (g.astype(np.float32), h, n),  # quantise multiplies in float32 then
        lambda g, h, n: (g, h, n.astype(np.float64)),  # counts from a noise hook
    ],
)
def test_sums_the_limbs_cannot_carry_go_to_the_reference(bad) -> None:  # type: ignore[no-untyped-def]
    sums = _level_sums(np.random.default_rng(1), 2, 3, 5, 1.0)
    assert quantise_level(sums) is not None
    assert quantise_level([bad(*sums[0]), sums[1]]) is None


def _reference_level(
    sums: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    cands: list[tuple[int, ...]],
    votes: list[list[int]],
    inherited: list[ref.Totals | None],
    last: bool,
    params: ref.Params,
) -> tuple[list[ref.NodeResult], list[ref.Totals]]:
    party = _party()
    hists = [party.messages(s, cands) for s in sums]
    results, totals = [], []
    for j, inh in enumerate(inherited):
        node = [h[j] for h in hists]
        results.append(ref.resolve_node(node, votes[j], inh, last, params))
        agg = ref.aggregate(node)
        totals.append(inh if inh is not None else ref.Totals(sum(agg.g[0]), sum(agg.h[0]), sum(agg.n[0])))
    return results, totals


@pytest.mark.parametrize("seed", range(12))
def test_levels_resolve_as_resolve_node_does(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, k, nbins, features = int(rng.integers(1, 6)), int(rng.integers(1, 9)), int(rng.integers(2, 9)), 6
    sums = _level_sums(rng, m, k, nbins, float(10.0 ** rng.integers(-3, 4)))
    cands = [tuple(int(f) for f in rng.choice(features, 2, replace=bool(rng.random() < 0.2))) for _ in range(k)]
    votes = rng.integers(-1, features, (k, m)).tolist()
    inherited = [
        None if rng.random() < 0.4 else ref.Totals(int(g) * 10**5, 10**19, int(n))
        for g, n in zip(rng.integers(-(10**15), 10**15, k), rng.integers(1, 99, k), strict=True)
    ]
    for hessian in (ref.HESSIAN_SECOND_ORDER, ref.HESSIAN_COUNT):
        for lam, min_rows in ((ONE // 10, 1), (0, 1), (ONE, 4), (0, 15)):
            params = ref.Params(lam, ONE // 10, min_rows, ONE // 2, hessian)
            for last in (False, True):
                level = quantise_level(sums)
                assert level is not None
                got = resolve_level(level, cands, votes, inherited, last, params)
                assert got == _reference_level(sums, cands, votes, inherited, last, params)


def test_resolve_level_splits_and_pays_like_the_reference_on_a_clear_split() -> None:
    """A level where every node splits: the Shapley values and contributions are the reference's."""
    g = np.zeros((1, 2, 3))
    g[0, 0] = [-4.0, 0.0, 4.0]
    h = np.ones((1, 2, 3))
    n = np.full((1, 2, 3), 10, dtype=np.int64)
    sums = [(g, h, n), (g * 0.5, h, n)]
    params = ref.Params(ONE // 10, ONE // 10, 1, ONE, ref.HESSIAN_SECOND_ORDER)
    level = quantise_level(sums)
    assert isinstance(level, FixedLevel)
    results, _ = resolve_level(level, [(3, 1)], [[3, 1]], [None], False, params)
    assert results[0].split is not None and results[0].split.feature == 3
    assert results[0].kappa[0] == results[0].split.gain and results[0].kappa[1] == 0
    assert (results, _) == _reference_level(sums, [(3, 1)], [[3, 1]], [None], False, params)


def test_resolve_level_needs_a_valid_min_rows() -> None:
    sums = _level_sums(np.random.default_rng(2), 2, 1, 3, 1.0)
    level = quantise_level(sums)
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
