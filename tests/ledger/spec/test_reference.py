"""The contract-math reference: Solidity-exact arithmetic, Table 3, Shapley axioms, top-2 and best split rules."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from itertools import combinations
from math import factorial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.reference import ONE

# --- arithmetic -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "q"),
    [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-7, -2, 3), (0, 5, 0), (-1, 3, 0), (10**40 + 1, -(10**20), -(10**20))],
)
def test_tdiv_truncates_toward_zero(a: int, b: int, q: int) -> None:
    assert ref.tdiv(a, b) == q


def test_tdiv_by_zero_raises() -> None:
    with pytest.raises(ZeroDivisionError):
        ref.tdiv(1, 0)


@given(st.integers(-(10**60), 10**60), st.integers(-(10**30), 10**30).filter(lambda b: b != 0))
def test_tdiv_matches_exact_quotient_truncated(a: int, b: int) -> None:
    exact = Fraction(a, b)
    q = ref.tdiv(a, b)
    assert abs(q) <= abs(exact) < abs(q) + 1
    assert q == 0 or (q > 0) == (exact > 0)


def test_to_fixed_rounds_half_to_even_and_int256_guard() -> None:
    assert ref.to_fixed(0.1) == 100000000000000000
    assert ref.to_fixed(-1.5) == -1500000000000000000
    assert ref.from_fixed(ref.to_fixed(0.25)) == 0.25
    with pytest.raises(ref.FixedPointOverflow):
        ref.check_int256(2**255)
    assert ref.check_int256(-(2**255)) == -(2**255)


def test_leaf_value_is_minus_g_lr_over_h_lambda() -> None:
    # -G*lr/(H+lambda) = -(3 * 0.1) / (2 + 1) = -0.1
    assert ref.leaf_value(3 * ONE, 2 * ONE, 1 * ONE, ONE // 10) == -ONE // 10
    assert ref.leaf_value(0, 0, 0, ONE) == 0  # empty leaf with lambda 0
    # truncation toward zero on a negative quotient: -1/3 -> -333...3, not -333...4
    assert ref.leaf_value(ONE, 3 * ONE, 0, ONE) == -333333333333333333


# --- Table 3 (the paper's worked example: lambda 0, hessian = count) -----------------------------------------------


def _table3(h2_gradients: tuple[int, int]) -> tuple[int, list[int]]:
    h1 = ref.NodeHistograms((0,), ((1 * ONE, 2 * ONE),), ((0, 0),), ((10, 10),))
    h2 = ref.NodeHistograms((0,), (tuple(g * ONE for g in h2_gradients),), ((0, 0),), ((10, 10),))
    sides = [ref.party_side_sums(h, 0, 0, ref.HESSIAN_COUNT) for h in (h1, h2)]
    return ref.split_shapley(
        [s[0] for s in sides], [s[1] for s in sides], [s[2] for s in sides], [s[3] for s in sides], 0
    )


def test_table3_honest() -> None:
    gain, phi = _table3((-1, 1))
    assert gain == 450000000000000000  # 0.45
    assert phi == [375000000000000000, 75000000000000000]  # 0.375, 0.075


def test_table3_tampered() -> None:
    gain, phi = _table3((-2, 2))
    assert gain == 850000000000000000  # 0.85
    assert phi == [275000000000000000, 575000000000000000]  # 0.275, 0.575


def test_table3_through_resolve_node() -> None:
    h1 = ref.NodeHistograms((0, 1), ((ONE, 2 * ONE), (0, 3 * ONE)), ((0, 0), (0, 0)), ((10, 10), (0, 20)))
    h2 = ref.NodeHistograms((0, 1), ((-ONE, ONE), (0, 0)), ((0, 0), (0, 0)), ((10, 10), (0, 20)))
    params = ref.Params(lam=0, learning_rate=ONE, min_rows=1, alpha=ONE // 2, hessian_mode=ref.HESSIAN_COUNT)
    res = ref.resolve_node([h1, h2], [0, 1], None, True, params)
    assert res.split is not None and res.split.feature == 0 and res.split.threshold == 0
    assert res.split.gain == 450000000000000000
    assert res.phi == (375000000000000000, 75000000000000000)
    assert res.kappa == (450000000000000000, 0)  # party 0 voted for the split feature, party 1 did not
    assert res.contribution == (375000000000000000 + 225000000000000000, 75000000000000000)
    # last level: leaves from the side sums, -G*lr/N
    assert res.left_leaf == 0 and res.right_leaf == -3 * ONE // 20


# --- Shapley axioms on random histograms ---------------------------------------------------------------------------

party = st.tuples(
    st.integers(-(10**22), 10**22), st.integers(0, 10**22), st.integers(-(10**22), 10**22), st.integers(0, 10**22)
)


def _unpack(parties: list[tuple[int, int, int, int]]) -> tuple[list[int], list[int], list[int], list[int]]:
    return [p[0] for p in parties], [p[1] for p in parties], [p[2] for p in parties], [p[3] for p in parties]


@settings(max_examples=150, deadline=None)
@given(st.lists(party, min_size=1, max_size=7), st.integers(0, 10**18))
def test_shapley_efficiency(parties: list[tuple[int, int, int, int]], lam: int) -> None:
    gain, phi = ref.split_shapley(*_unpack(parties), lam)
    assert gain == ref.split_gain(
        sum(p[0] for p in parties),
        sum(p[1] for p in parties),
        sum(p[2] for p in parties),
        sum(p[3] for p in parties),
        lam,
    )
    assert abs(sum(phi) - gain) <= len(parties)


@settings(max_examples=100, deadline=None)
@given(st.lists(party, min_size=1, max_size=6), party, st.integers(1, 10**18))
def test_shapley_symmetry(others: list[tuple[int, int, int, int]], twin: tuple[int, int, int, int], lam: int) -> None:
    _, phi = ref.split_shapley(*_unpack([twin, *others, twin]), lam)
    assert phi[0] == phi[-1]


@settings(max_examples=100, deadline=None)
@given(st.lists(party, min_size=1, max_size=6), st.integers(0, len(range(7))), st.integers(1, 10**18))
def test_shapley_null_player(parties: list[tuple[int, int, int, int]], where: int, lam: int) -> None:
    where = min(where, len(parties))
    with_null = [*parties[:where], (0, 0, 0, 0), *parties[where:]]
    gain, phi = ref.split_shapley(*_unpack(with_null), lam)
    assert phi[where] == 0
    gain_without, phi_without = ref.split_shapley(*_unpack(parties), lam)
    assert gain == gain_without
    assert phi[:where] + phi[where + 1 :] == phi_without


@settings(max_examples=60, deadline=None)
@given(st.lists(party, min_size=1, max_size=5), st.integers(1, 10**18))
def test_shapley_matches_textbook_formula(parties: list[tuple[int, int, int, int]], lam: int) -> None:
    """Equation 8 written the paper's way (average over coalition sizes), in exact rationals."""
    m = len(parties)
    gl, hl, gr, hr = _unpack(parties)

    def u(coalition: tuple[int, ...]) -> int:
        return ref.split_gain(
            sum(gl[i] for i in coalition),
            sum(hl[i] for i in coalition),
            sum(gr[i] for i in coalition),
            sum(hr[i] for i in coalition),
            lam,
        )

    _, phi = ref.split_shapley(gl, hl, gr, hr, lam)
    for p in range(m):
        rest = [i for i in range(m) if i != p]
        exact = Fraction(0)
        for size in range(m):
            marginal = sum(u((*b, p)) - u(b) for b in combinations(rest, size))
            exact += Fraction(marginal, factorial(m - 1) // (factorial(size) * factorial(m - 1 - size)))
        exact /= m
        assert abs(phi[p] - exact) < 1


def _shapley_or_error(fn: Callable[..., tuple[int, list[int]]], args: tuple[object, ...]) -> object:
    try:
        return fn(*args)
    except ref.FixedPointOverflow as exc:
        return ("overflow", str(exc))


any_side = st.integers(-(2**130), 2**130) | st.sampled_from([0, 1, -1, 2**127, -(2**127), 2**200, -(2**254)])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(any_side, any_side, any_side, any_side), max_size=6),
    st.sampled_from([0, 1, 10**17, 10**18, 2**200]),
)
def test_fast_shapley_equals_the_reference_results_and_errors(
    parties: list[tuple[int, int, int, int]], lam: int
) -> None:
    """Same values and the same overflow errors, for sums near and beyond int256 and negative hessians."""
    args = (*_unpack(parties), lam)
    assert _shapley_or_error(ref.split_shapley_fast, args) == _shapley_or_error(ref.split_shapley, args)


@settings(max_examples=100, deadline=None)
@given(st.lists(party, min_size=1, max_size=7), st.integers(0, 10**18))
def test_fast_shapley_equals_the_reference_on_histogram_sums(
    parties: list[tuple[int, int, int, int]], lam: int
) -> None:
    assert ref.split_shapley_fast(*_unpack(parties), lam) == ref.split_shapley(*_unpack(parties), lam)


def test_fast_shapley_rejects_ragged_input() -> None:
    with pytest.raises(ValueError, match="same length"):
        ref.split_shapley_fast([1, 2], [1], [1, 2], [1, 2], 0)
    assert ref.split_shapley_fast([], [], [], [], ONE) == (0, [])


# --- top-2: the two most voted features, ties by tie_key -----------------------------------------------------------


@pytest.mark.parametrize(
    ("votes", "f", "expected"),
    [
        ([3, 3, 2, 1], 5, (3, 1)),  # 2 and 1 tie with one vote each: the lower index wins
        ([4, 4, 4], 5, (4, 0)),  # one distinct vote: the best of the rest is the lowest other index
        ([0, 0], 3, (0, 1)),
        ([], 3, (0, 1)),  # nobody voted
        ([-1, -1, 2], 4, (2, 0)),  # abstentions count for nothing
        ([2, 1, 1, 2], 3, (1, 2)),  # a tie at the top goes to the lower index
        ([0], 1, (0, 0)),  # a single feature
    ],
)
def test_top2_rules(votes: list[int], f: int, expected: tuple[int, int]) -> None:
    assert ref.top2(votes, f, ref.TIE_LOWER_INDEX) == expected


def test_top2_rejects_out_of_range_votes_and_unknown_rules() -> None:
    with pytest.raises(ValueError, match="not a feature index"):
        ref.top2([5], 5, ref.TIE_HASHED)
    with pytest.raises(ValueError, match="unknown tie rule 2"):
        ref.top2([1], 5, 2)
    with pytest.raises(ValueError, match="unknown tie rule 7"):
        ref.tie_key(7, 0, 1, 0)


@given(
    st.lists(st.integers(-1, 9), max_size=12),
    st.sampled_from([ref.TIE_LOWER_INDEX, ref.TIE_HASHED]),
    st.integers(0, 2**16 - 1),
    st.integers(1, 511),
)
def test_top2_ranks_by_count_then_key(votes: list[int], rule: int, tree: int, node: int) -> None:
    first, second = ref.top2(votes, 10, rule, tree, node)
    count = [votes.count(f) for f in range(10)]
    key = [ref.tie_key(rule, tree, node, f) for f in range(10)]
    assert len(set(key)) == 10  # a node's features never share a key, so the ranking is total
    ranked = sorted(range(10), key=lambda f: (-count[f], key[f]))
    assert (first, second) == (ranked[0], ranked[1])
    assert count[first] == max(count)


def test_tie_key_is_splitmix64_and_index_rule_is_the_index() -> None:
    # SplitMix64's first output for seed 0 is the finaliser of its increment 0x9E3779B97F4A7C15
    assert ref.tie_key(ref.TIE_HASHED, 0, 0x9E3779B97F4A, 0x7C15) == 0xE220A8397B1DCDAF
    assert [ref.tie_key(ref.TIE_LOWER_INDEX, 3, 9, f) for f in range(4)] == [0, 1, 2, 3]


def test_hashed_ties_do_not_favour_low_indices() -> None:
    """The reason for the hashed rule: with ``[a, a, b, c]`` ballots the runner-up is a tie between b and c, which
    the index rule always gives to the lower index; per node, the hashed rule gives it to either about half the time."""
    wins = [ref.top2([0, 0, 3, 27], 28, ref.TIE_HASHED, tree, node)[1] for tree in range(20) for node in range(1, 51)]
    assert set(wins) == {3, 27}
    assert 0.4 < wins.count(27) / len(wins) < 0.6
    assert {ref.top2([0, 0, 3, 27], 28, ref.TIE_LOWER_INDEX, tree, 1)[1] for tree in range(20)} == {3}
    # one distinct vote: the runner-up, among zero-vote features, also varies from node to node
    assert len({ref.top2([5, 5], 28, ref.TIE_HASHED, 0, node)[1] for node in range(1, 200)}) > 20


# --- best split -----------------------------------------------------------------------------------------------------

hist_values = st.lists(
    st.tuples(st.integers(-(10**20), 10**20), st.integers(0, 10**20), st.integers(0, 30)), min_size=2, max_size=8
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(hist_values, min_size=1, max_size=3),
    st.integers(0, 10**18),
    st.integers(1, 20),
    st.sampled_from([ref.HESSIAN_SECOND_ORDER, ref.HESSIAN_COUNT]),
)
def test_best_split_is_the_first_maximum_over_valid_thresholds(
    feats: list[list[tuple[int, int, int]]], lam: int, min_rows: int, mode: int
) -> None:
    nb = min(len(f) for f in feats)
    feats = [f[:nb] for f in feats]
    hist = ref.NodeHistograms(
        tuple(range(len(feats))),
        tuple(tuple(b[0] for b in f) for f in feats),
        tuple(tuple(b[1] for b in f) for f in feats),
        tuple(tuple(b[2] for b in f) for f in feats),
    )
    options = []
    for k in range(len(feats)):
        g, h, n = hist.g[k], hist.h[k], hist.n[k]
        for t in range(nb - 1):
            nl, nr = sum(n[: t + 1]), sum(n[t + 1 :])
            if nl >= min_rows and nr >= min_rows:
                gl, hl = sum(g[: t + 1]), ref.hessian_of(sum(h[: t + 1]), nl, mode)
                gr, hr = sum(g[t + 1 :]), ref.hessian_of(sum(h[t + 1 :]), nr, mode)
                parent = ref.side_score(sum(g), ref.hessian_of(sum(h), sum(n), mode), lam)
                options.append((ref.split_gain(gl, hl, gr, hr, lam), k, t, parent))
    split = ref.best_split(hist, lam, min_rows, mode)
    if not options:
        assert split is None
        return
    best_gain = max(o[0] for o in options)
    first = next(o for o in options if o[0] == best_gain)
    if best_gain <= first[3]:
        assert split is None
    else:
        assert split is not None
        assert (split.gain, split.rank, split.threshold) == first[:3]
        assert split.n_left >= min_rows and split.n_right >= min_rows


def test_best_split_requires_gain_over_parent() -> None:
    # two bins with the same mean gradient: any split gains nothing over the parent when lambda > 0
    hist = ref.NodeHistograms((0,), ((ONE, ONE),), ((ONE, ONE),), ((5, 5),))
    assert ref.best_split(hist, ONE, 1) is None
    assert ref.best_split(hist, 0, 1) is None  # equal, not greater


def test_resolve_node_leaf_uses_inherited_totals_and_pays_nothing() -> None:
    flat = ref.NodeHistograms((0, 1), ((ONE, ONE), (2 * ONE, 0)), ((ONE, ONE), (2 * ONE, 0)), ((5, 5), (10, 0)))
    params = ref.Params(lam=ONE, learning_rate=ONE // 10, min_rows=1, alpha=ONE)
    res = ref.resolve_node([flat], [0], ref.Totals(4 * ONE, 3 * ONE, 10), False, params)
    assert res.split is None
    assert res.leaf == ref.leaf_value(4 * ONE, 3 * ONE, ONE, ONE // 10) == -ONE // 10
    assert res.phi == (0,) and res.contribution == (0,)


def test_resolve_node_without_submissions_is_a_leaf() -> None:
    params = ref.Params(lam=ONE, learning_rate=ONE, min_rows=1, alpha=ONE)
    res = ref.resolve_node([], [], ref.Totals(-2 * ONE, ONE, 3), False, params)
    assert res.split is None and res.leaf == ONE and res.phi == ()


def test_aggregate_rejects_mismatched_candidates() -> None:
    a = ref.NodeHistograms((0, 1), ((1, 2), (3, 4)), ((1, 2), (3, 4)), ((1, 1), (1, 1)))
    b = ref.NodeHistograms((0, 2), ((1, 2), (3, 4)), ((1, 2), (3, 4)), ((1, 1), (1, 1)))
    with pytest.raises(ValueError, match="candidate features differ"):
        ref.aggregate([a, b])
    assert ref.aggregate([a, a]).g == ((2, 4), (6, 8))


def test_payouts_pay_finishers_pro_rata_and_forfeit_to_the_requester() -> None:
    due = ref.payouts([5, -3, 2], [True, True, False], 70)
    assert due.positive == 7 and due.paid == (50, 0, 0) and due.forfeited == (0, 0, 20) and due.requester == 20
    # nobody's amount grows when another party leaves: the denominator keeps every positive total
    assert ref.payouts([5, -3, 2], [True, True, True], 70).paid == (50, 0, 20)
    assert ref.reward_shares([5, -3, 2], [True, True, False]) == [5 / 7, 0.0, 0.0]
    nothing = ref.payouts([-1, 0], [True, True], 9)
    assert nothing.positive == 0 and nothing.paid == (0, 0) and nothing.requester == 9
    with pytest.raises(ValueError, match="2 totals but 1 finished"):
        ref.payouts([1, 2], [True], 1)


@given(
    st.lists(st.integers(-(2**200), 2**200), min_size=1, max_size=6),
    st.integers(0, 2**128 - 1),
    st.data(),
)
def test_payouts_never_pay_more_than_the_reward_and_leaving_never_pays(totals: list[int], reward: int, data) -> None:  # type: ignore[no-untyped-def]
    finished = data.draw(st.lists(st.booleans(), min_size=len(totals), max_size=len(totals)))
    due = ref.payouts(totals, finished, reward)
    assert sum(due.paid) + due.requester == reward and due.requester >= sum(due.forfeited) >= 0
    everyone = ref.payouts(totals, [True] * len(totals), reward)
    for p, done in enumerate(finished):
        assert due.paid[p] + due.forfeited[p] == everyone.paid[p]
        assert due.paid[p] == (everyone.paid[p] if done else 0)
