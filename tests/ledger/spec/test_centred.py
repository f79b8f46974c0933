"""Centred cross-fitted leave-one-out values (``ledger.spec.centred``): the integer definition the contract will
mirror, and the properties its docstring states."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from party_sides import party

from fgbdt_chain.ledger.spec import centred, loo
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.fixed_point import ONE, to_fixed

LAM = to_fixed(0.1)


def mean_values(
    measure: Callable[[list[loo.Sides], int], list[int]],
    make: Callable[[np.random.Generator], list[loo.Sides]],
    reps: int = 200,
    seed: int = 0,
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.mean([measure(make(rng), LAM) for _ in range(reps)], axis=0) / ONE


def test_centring_takes_the_gradients_at_the_partys_own_parent_step() -> None:
    s = loo.Sides(to_fixed(-3.0), to_fixed(2.0), to_fixed(5.0), to_fixed(4.0))
    c = centred.centre(s, LAM)
    w = -2.0 / 6.1
    assert c.h_left == s.h_left and c.h_right == s.h_right
    assert abs(c.g_left / ONE - (-3.0 + 2.0 * w)) < 1e-15 and abs(c.g_right / ONE - (5.0 + 4.0 * w)) < 1e-15
    assert abs((c.g_left + c.g_right) / ONE) < 0.1 * 2.0 / 6.1 + 1e-15  # the residual left is lambda's shrinkage


def test_a_shifted_base_rate_leaves_the_centred_sums_alone() -> None:
    """Gradients taken at a score shifted by a constant (``g + c h`` on both sides) centre to the same sums up to
    lambda's shrinkage, which is the property that keeps label skew out of the verdicts."""
    rng = np.random.default_rng(0)
    s = party(rng, 2000, 0.2)
    shift = 0.7
    moved = loo.Sides(s.g_left + int(shift * s.h_left), s.h_left, s.g_right + int(shift * s.h_right), s.h_right)
    a, b = centred.centre(s, LAM), centred.centre(moved, LAM)
    h = (s.h_left + s.h_right) / ONE
    assert abs(a.g_left - b.g_left) / ONE <= shift * s.h_left / ONE * 0.1 / h + 1e-9


def test_the_offsets_are_the_contrast_of_the_coalitions_steps() -> None:
    est = loo.Sides(to_fixed(-4.0), to_fixed(2.0), to_fixed(4.0), to_fixed(2.0))
    leaves = loo.Leaves.of(est, LAM)
    off = centred.offsets(est, LAM)
    assert off.parent == 0 and off.left == leaves.left - leaves.parent and off.right == leaves.right - leaves.parent


def test_a_party_without_rows_earns_nothing_and_changes_nobody_elses_value() -> None:
    """The null player, exactly: sums of 0 centre to 0, add nothing to any coalition and judge nothing."""
    rng = np.random.default_rng(4)
    sides = [party(rng, 300, 0.2) for _ in range(3)]
    values = centred.node_values([*sides, loo.Sides(0, 0, 0, 0)], LAM)
    assert values[3] == 0
    assert values[:3] == centred.node_values(sides, LAM)


def test_parties_with_the_same_sums_earn_the_same() -> None:
    """Symmetry, exactly."""
    rng = np.random.default_rng(5)
    a, b = party(rng, 300, 0.2), party(rng, 300, 0.1)
    values = centred.node_values([a, b, a], LAM)
    assert values[0] == values[2]
    assert centred.node_values([b, a, a], LAM) == [values[1], values[0], values[2]]


def test_copies_leave_a_partys_own_contrast_alone_without_lambda() -> None:
    """Duplicate-invariance where it is exact: k copies of a party's rows give its own estimate of the split's
    contrast to within one unit of truncation when lambda is 0 (k times the sums, the same Newton steps)."""
    rng = np.random.default_rng(6)
    s = party(rng, 400, 0.2)
    for k in (2, 3, 5):
        kk = loo.Sides(k * s.g_left, k * s.h_left, k * s.g_right, k * s.h_right)
        a, b = centred.offsets(centred.centre(s, 0), 0), centred.offsets(centred.centre(kk, 0), 0)
        assert abs(a.left - b.left) <= 2 and abs(a.right - b.right) <= 2


def test_label_skew_does_not_make_the_others_look_harmful() -> None:
    """Parties that share a split's contrast but not a base rate: loo judges each one harmful to the others on
    average (negative values, paid nothing); centred pays each a positive value."""

    def skewed(rng: np.random.Generator) -> list[loo.Sides]:
        return [party(rng, 400, 0.15, base) for base in (0.2, 0.5, 0.8)]

    assert mean_values(loo.node_values, skewed, 200).min() < 0
    assert mean_values(centred.node_values, skewed, 200).min() > 0


def test_copies_and_noise_do_not_pay() -> None:
    """On average over draws: a party whose labels ignore the cut earns less than nothing; the same rows twice earn
    no more than once; a quarter of the rows earns less than all of them."""
    noise = mean_values(centred.node_values, lambda r: [party(r, 400, 0.0), *(party(r, 400, 0.2) for _ in range(3))])
    assert noise[0] < 0 < min(noise[1:])

    def holder(copies: int, rows: int = 400) -> Callable[[np.random.Generator], list[loo.Sides]]:
        return lambda r: [party(r, rows, 0.2, copies=copies), *(party(r, 400, 0.2) for _ in range(3))]

    once = mean_values(centred.node_values, holder(1), 400, seed=3)
    assert mean_values(centred.node_values, holder(2), 400, seed=3)[0] <= once[0]
    assert mean_values(centred.node_values, holder(1, 100), 400, seed=3)[0] < once[0]


def test_tree_values_from_histograms_match_the_sides() -> None:
    hist = [
        ref.NodeHistograms((3, 5), ((-4, 1, 4), (0, 0, 1)), ((2, 1, 2), (1, 1, 1)), ((8, 4, 8), (3, 3, 3)))
        for _ in range(3)
    ]
    scaled = [ref.NodeHistograms(h.features, tuple(tuple(v * ONE for v in r) for r in h.g), h.h, h.n) for h in hist]
    params = ref.Params(lam=LAM, learning_rate=ONE, min_rows=1, alpha=ONE, hessian_mode=ref.HESSIAN_COUNT)
    sides = [loo.Sides.of(h, 0, 0, ref.HESSIAN_COUNT) for h in scaled]
    got = centred.tree_values([(scaled, 0, 0)], [20, 20, 20], params)
    assert got == loo.per_judged_row(centred.node_values(sides, LAM), [20, 20, 20])
    with pytest.raises(ValueError, match="histograms"):
        centred.tree_values([(scaled[:2], 0, 0)], [20, 20, 20], params)
