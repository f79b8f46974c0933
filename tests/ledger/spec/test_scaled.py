"""Scaled judged contributions (``ledger.spec.scaled``): the integer definition the contract would mirror, and the
properties its docstring states."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from party_sides import party

from fgbdt_chain.ledger.spec import centred, loo, scaled
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.fixed_point import ONE, to_fixed

LAM = to_fixed(0.1)
SPLITS = 8


def tree_values(splits: list[list[loo.Sides]]) -> list[int]:
    fits = scaled.TreeFits(len(splits[0]))
    for sides in splits:
        fits.add(sides, LAM)
    return fits.values()


def mean_tree_values(
    make: Callable[[np.random.Generator, float], list[loo.Sides]], reps: int, seed: int = 0
) -> np.ndarray:
    """Mean values over ``reps`` trees of ``SPLITS`` splits, each split's contrast drawn in [0.05, 0.25]."""
    rng = np.random.default_rng(seed)
    out = [tree_values([make(rng, rng.uniform(0.05, 0.25)) for _ in range(SPLITS)]) for _ in range(reps)]
    return np.mean(out, axis=0) / ONE


def test_the_verdict_is_the_best_fraction_of_a_step_that_helps_and_the_full_step_of_one_that_harms() -> None:
    a, b = to_fixed(3.0), to_fixed(4.0)
    best = scaled.verdict(a, b)
    assert best == (a * a) // (2 * b)  # alpha = a / b = 0.75
    for alpha in np.linspace(0.0, 1.0, 41):
        assert best >= int(alpha * a - alpha * alpha * b / 2) - 1
    assert scaled.verdict(to_fixed(5.0), to_fixed(4.0)) == to_fixed(3.0)  # alpha capped at 1: a - b / 2
    assert scaled.verdict(to_fixed(-1.0), to_fixed(4.0)) == to_fixed(-3.0)  # the wrong way, charged in full
    assert scaled.verdict(to_fixed(1.0), 0) == to_fixed(1.0)
    with pytest.raises(ValueError, match="quadratic"):
        scaled.verdict(1, -1)


def test_at_the_full_step_a_verdict_is_the_centred_value() -> None:
    """``A - B / 2`` of one split is ``centred``'s value of the coalition to the judge, to truncation."""
    rng = np.random.default_rng(1)
    judge, est = centred.centre(party(rng, 500, 0.2), LAM), centred.centre(party(rng, 800, 0.2), LAM)
    off = centred.offsets(est, LAM)
    a, b = scaled.terms(off, judge)
    assert abs((a - b // 2) - loo.value(off, judge)) <= 2


def test_a_party_without_rows_earns_nothing_and_changes_nobody_elses_value() -> None:
    """The null player, exactly: zero sums at every split add nothing to any judge's fit and judge nothing."""
    rng = np.random.default_rng(4)
    splits = [[party(rng, 300, 0.2) for _ in range(3)] for _ in range(SPLITS)]
    values = tree_values([[*s, loo.Sides(0, 0, 0, 0)] for s in splits])
    assert values[3] == 0
    assert values[:3] == tree_values(splits)


def test_parties_with_the_same_sums_earn_the_same() -> None:
    """Symmetry, exactly."""
    rng = np.random.default_rng(5)
    pairs = [(party(rng, 300, 0.2), party(rng, 300, 0.1)) for _ in range(SPLITS)]
    values = tree_values([[a, b, a] for a, b in pairs])
    assert values[0] == values[2]
    assert tree_values([[b, a, a] for a, b in pairs]) == [values[1], values[0], values[2]]


def test_a_party_whose_steps_overshoot_the_others_is_still_paid_for_their_direction() -> None:
    """A party with three times the others' contrast (its steps overshoot their rows, as label skew makes them):
    ``centred`` charges the overshoot and judges it harmful on average; ``scaled`` lets each judge shrink the step
    and pays it for pointing the right way."""

    def make(rng: np.random.Generator, c: float) -> list[loo.Sides]:
        return [party(rng, 400, min(3 * c, 0.45)), *(party(rng, 400, c) for _ in range(2))]

    rng = np.random.default_rng(7)
    centred_values = np.mean(
        [
            np.sum([centred.node_values(make(rng, rng.uniform(0.05, 0.15)), LAM) for _ in range(SPLITS)], axis=0)
            for _ in range(60)
        ],
        axis=0,
    )
    assert centred_values[0] < 0
    assert mean_tree_values(lambda r, c: make(r, c * 0.6), 60, seed=7)[0] > 0


def test_noise_copies_and_fewer_rows_do_not_pay() -> None:
    """On average over trees: a party whose labels ignore the cuts earns less than nothing; the same rows twice earn
    no more than once; a quarter of the rows earns less than all of them."""
    noise = mean_tree_values(lambda r, c: [party(r, 400, 0.0), *(party(r, 400, c) for _ in range(3))], 60)
    assert noise[0] < 0 < min(noise[1:])

    def holder(copies: int, rows: int = 400) -> Callable[[np.random.Generator, float], list[loo.Sides]]:
        return lambda r, c: [party(r, rows, c, copies=copies), *(party(r, 400, c) for _ in range(3))]

    once = mean_tree_values(holder(1), 80, seed=3)
    assert mean_tree_values(holder(2), 80, seed=3)[0] <= once[0]
    assert mean_tree_values(holder(1, 100), 80, seed=3)[0] < once[0]


def test_negative_totals_are_withheld_not_handed_to_the_others() -> None:
    shares = scaled.withheld_shares([6, 2, -2], [True, True, True])
    assert shares == [0.6, 0.2, 0.0]
    # lowering another party's total below zero lowers everyone's share; under the positive rule it raised them
    lower = scaled.withheld_shares([6, 2, -8], [True, True, True])
    assert lower[0] < shares[0]
    assert ref.reward_shares([6, 2, -8], [True] * 3)[0] == ref.reward_shares([6, 2, -2], [True] * 3)[0] == 0.75
    assert scaled.withheld_shares([6, 2, -2], [True, False, True]) == [0.6, 0.0, 0.0]
    assert scaled.withheld_shares([0, 0], [True, True]) == [0.0, 0.0]
    with pytest.raises(ValueError, match="finished"):
        scaled.withheld_shares([1, 2], [True])


def test_tree_values_from_histograms_match_the_fits() -> None:
    hist = [
        ref.NodeHistograms((3, 5), ((-4, 1, 4), (0, 0, 1)), ((2, 1, 2), (1, 1, 1)), ((8, 4, 8), (3, 3, 3))),
        ref.NodeHistograms((3, 5), ((-2, 1, 5), (0, 0, 1)), ((2, 1, 2), (1, 1, 1)), ((7, 4, 9), (3, 3, 3))),
        ref.NodeHistograms((3, 5), ((-5, 0, 4), (0, 0, 1)), ((2, 1, 2), (1, 1, 1)), ((9, 3, 8), (3, 3, 3))),
    ]
    fixed = [ref.NodeHistograms(h.features, tuple(tuple(v * ONE for v in r) for r in h.g), h.h, h.n) for h in hist]
    params = ref.Params(lam=LAM, learning_rate=ONE, min_rows=1, alpha=ONE, hessian_mode=ref.HESSIAN_COUNT)
    splits = [(fixed, 0, 0), (fixed, 0, 1)]
    fits = scaled.TreeFits(3)
    for hs, rank, threshold in splits:
        fits.add([loo.Sides.of(h, rank, threshold, ref.HESSIAN_COUNT) for h in hs], LAM)
    assert scaled.tree_values(splits, [20, 20, 20], params) == loo.per_judged_row(fits.values(), [20, 20, 20])
    with pytest.raises(ValueError, match="histograms"):
        scaled.tree_values([(fixed[:2], 0, 0)], [20, 20, 20], params)
    with pytest.raises(ValueError, match="at least one party"):
        scaled.TreeFits(0)
