"""The split Shapley estimator: efficiency, the stated bound, determinism from the seed, and the reference's switch."""

from __future__ import annotations

import random
from math import ceil, log

import pytest

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec import shapley_estimate as se
from fgbdt_chain.ledger.spec.fixed_point import tdiv
from fgbdt_chain.ledger.spec.hashing import keccak256
from fgbdt_chain.ledger.spec.parameters import MAX_PARTIES

ONE = ref.ONE


def sides(m: int, seed: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """Fixed-point sides of M parties as a logistic split gives them: gradients of either sign, hessians below
    counts/4, a few parties far larger than the rest, one party empty on the right."""
    rng = random.Random(seed)
    gl, hl, gr, hr = [], [], [], []
    for p in range(m):
        rows = rng.randint(5, 400) * (20 if p % 5 == 0 else 1)
        left = rng.randint(0, rows)
        gl.append(rng.randint(-left, left) * ONE // 3)
        hl.append(left * ONE // 4)
        right = 0 if p == 1 else rows - left
        gr.append(rng.randint(-right, right) * ONE // 3)
        hr.append(right * ONE // 4)
    return gl, hl, gr, hr


def test_permutations_follow_the_stated_delta_and_tolerance() -> None:
    k = se.permutations_for(64, 10_000, 100_000)
    assert k == ceil(log(2 * 64 / 0.01) / (2 * 0.1**2)) == 473
    assert se.permutations_for(MAX_PARTIES) == se.PERMUTATIONS
    # the bound at K permutations is the tolerance times S (plus truncation) at the largest federation
    assert se.error_bound(MAX_PARTIES, 10**6) <= se.TOLERANCE_PPM + 1
    with pytest.raises(ValueError, match="delta"):
        se.permutations_for(4, 0, 100_000)


def test_exact_up_to_the_threshold_estimated_beyond() -> None:
    assert not se.estimated(se.EXACT_MAX_PARTIES)
    assert se.estimated(se.EXACT_MAX_PARTIES + 1)


def test_permutation_is_a_deterministic_shuffle_of_the_seed() -> None:
    seed = se.node_seed(12345, 3, 9)
    assert seed == int.from_bytes(keccak256(b"".join(v.to_bytes(32, "big") for v in (12345, 3, 9))), "big")
    a = se.permutation(seed, 0, 64)
    assert sorted(a) == list(range(64))
    assert a == se.permutation(seed, 0, 64)
    assert a != se.permutation(seed, 1, 64)
    assert a != se.permutation(se.node_seed(12346, 3, 9), 0, 64)
    assert se.node_seed(12345, 3, 9) != se.node_seed(12345, 3, 10) != se.node_seed(12345, 4, 9)


def test_orders_are_uniform_enough_at_three_parties() -> None:
    counts: dict[tuple[int, ...], int] = {}
    for k in range(6000):
        order = tuple(se.permutation(7, k, 3))
        counts[order] = counts.get(order, 0) + 1
    assert len(counts) == 6
    assert all(abs(c - 1000) < 150 for c in counts.values())  # 4.7 standard deviations


@pytest.mark.parametrize("m", [2, 5, 9])
def test_estimate_keeps_efficiency_and_the_bound(m: int) -> None:
    gl, hl, gr, hr = sides(m, m)
    lam = ONE // 10
    gain, exact = ref.split_shapley(gl, hl, gr, hr, lam)
    width = se.marginal_range(gl, hl, gr, hr, lam)
    assert width is not None and width > 0
    for seed in range(5):
        est_gain, phi = se.split_shapley_estimate(gl, hl, gr, hr, lam, se.node_seed(seed, 0, 1))
        assert est_gain == gain
        assert abs(sum(phi) - gain) <= m
        bound = se.error_bound(m, width)
        assert max(abs(a - b) for a, b in zip(phi, exact, strict=True)) <= bound


def test_many_permutations_converge_to_the_exact_values() -> None:
    gl, hl, gr, hr = sides(4, 11)
    gain, exact = ref.split_shapley(gl, hl, gr, hr, 0)
    _, phi = se.split_shapley_estimate(gl, hl, gr, hr, 0, 99, permutations=20_000)
    # 20,000 orders: Hoeffding at delta = 1e-6 puts every estimate within 2.3% of S; in practice far closer
    assert max(abs(a - b) for a, b in zip(phi, exact, strict=True)) <= 0.02 * gain


def test_every_marginal_lies_in_the_stated_range() -> None:
    gl, hl, gr, hr = sides(6, 3)
    lam = ONE
    b = [se.side_bound(gl[p], hl[p]) + se.side_bound(gr[p], hr[p]) for p in range(6)]  # type: ignore[operator]
    width = se.marginal_range(gl, hl, gr, hr, lam)
    assert width is not None and width == sum(b)

    def u(mask: int) -> int:
        members = [p for p in range(6) if mask >> p & 1]
        return ref.split_gain(
            sum(gl[p] for p in members), sum(hl[p] for p in members), sum(gr[p] for p in members),
            sum(hr[p] for p in members), lam,
        )  # fmt: skip

    for mask in range(64):
        for p in range(6):
            if not mask >> p & 1:
                marginal = u(mask | 1 << p) - u(mask)
                assert -(width - b[p]) <= marginal <= b[p]


def test_no_bound_without_usable_hessians() -> None:
    assert se.side_bound(5, 0) is None
    assert se.side_bound(0, -1) is None
    assert se.side_bound(0, 0) == 0
    assert se.marginal_range([1], [1], [1], [1], -1) is None


def test_resolve_node_estimates_above_the_threshold_and_needs_the_seed() -> None:
    m = se.EXACT_MAX_PARTIES + 1
    rng = random.Random(5)
    hists = []
    for _ in range(m):
        n = [rng.randint(1, 30) for _ in range(3)]
        g = [rng.randint(-k, k) * ONE // 2 for k in n]
        h = [k * ONE // 4 for k in n]
        hists.append(ref.NodeHistograms(features=(0, 1), g=(tuple(g), tuple(g)), h=(tuple(h), tuple(h)),
                                        n=(tuple(n), tuple(n))))  # fmt: skip
    params = ref.Params(lam=ONE // 10, learning_rate=ONE // 10, min_rows=1, alpha=ONE // 2)
    with pytest.raises(ValueError, match="seed"):
        ref.resolve_node(hists, [0] * m, None, False, params)
    a = ref.resolve_node(hists, [0] * m, None, False, params, shapley_seed=1)
    b = ref.resolve_node(hists, [0] * m, None, False, params, shapley_seed=2)
    assert a.split == b.split and a.credited_gain == b.credited_gain
    assert a.phi != b.phi
    assert abs(sum(a.phi) - a.credited_gain) <= m
    # at the exact size the seed changes nothing
    k = se.EXACT_MAX_PARTIES
    exact = ref.resolve_node(hists[:k], [0] * k, None, False, params)
    assert ref.resolve_node(hists[:k], [0] * k, None, False, params, shapley_seed=3) == exact


def _checked_estimate(
    gl: list[int], hl: list[int], gr: list[int], hr: list[int], lam: int, seed: int, k: int
) -> tuple[int, list[int]]:
    """The estimator as its docstring states it: each order from ``permutation``, every partial sum, utility and
    accumulator checked against int256 at every step."""
    acc, grand = [0] * len(gl), 0
    for index in range(k):
        a = b = c = d = before = 0
        for p in se.permutation(seed, index, len(gl)):
            a, b, c, d = a + gl[p], b + hl[p], c + gr[p], d + hr[p]
            ref.check_all_int256((a, b, c, d))
            u = ref.split_gain(a, b, c, d, lam)
            acc[p] = ref.check_int256(acc[p] + u - before)
            before = u
        grand = before
    return grand, [tdiv(x, k) for x in acc]


@pytest.mark.parametrize("m", [13, 20])
def test_the_estimate_is_its_stated_form_with_or_without_the_per_step_checks(m: int) -> None:
    """The orders built from shared message prefixes are ``permutation``'s, and the loop without per-step checks (all
    sums small enough) gives the checked loop's integers; past ``UNCHECKED_GRADIENT_BITS`` the checked loop runs."""
    gl, hl, gr, hr = sides(m, m)
    seed = se.node_seed(99, m, 5)
    assert se.split_shapley_estimate(gl, hl, gr, hr, ONE, seed, 40) == _checked_estimate(gl, hl, gr, hr, ONE, seed, 40)
    assert se._unchecked(gl, hl, gr, hr, ONE)
    shift = 122 - sum(map(abs, gl)).bit_length()
    big = [g << shift for g in gl]  # gradient sums past 2^120 but squares within int256: checked, the same integers
    assert not se._unchecked(big, hl, gr, hr, ONE)
    assert se.split_shapley_estimate(big, hl, gr, hr, ONE, seed, 40) == _checked_estimate(
        big, hl, gr, hr, ONE, seed, 40
    )
    huge = [ref.INT256_MAX // 2] * m  # partial sums leave int256: both revert
    with pytest.raises(ref.FixedPointOverflow):
        se.split_shapley_estimate(huge, hl, gr, hr, ONE, seed, 3)
    with pytest.raises(ref.FixedPointOverflow):
        _checked_estimate(huge, hl, gr, hr, ONE, seed, 3)
