"""Cross-fitted leave-one-out values (``ledger.spec.loo``): the integer definition the contract will mirror."""

from __future__ import annotations

import numpy as np
import pytest
from party_sides import party

from fgbdt_chain.ledger.spec import loo
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.fixed_point import ONE, to_fixed

LAM = to_fixed(0.1)
PARAMS = ref.Params(lam=LAM, learning_rate=to_fixed(0.1), min_rows=1, alpha=ONE)


def mean_values(make: object, reps: int = 200, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.mean([loo.node_values(make(rng), LAM) for _ in range(reps)], axis=0) / ONE  # type: ignore[operator]


def test_value_is_the_second_order_loss_reduction() -> None:
    """A coalition's Newton steps at the cut, judged on another's sums: the float formula."""
    est = loo.Sides(to_fixed(-4.0), to_fixed(2.0), to_fixed(4.0), to_fixed(2.0))
    leaves = loo.Leaves.of(est, LAM)
    w0, wl, wr = 0.0, 4.0 / 2.1, -4.0 / 2.1
    assert abs(leaves.left / ONE - wl) < 1e-15 and abs(leaves.right / ONE - wr) < 1e-15 and leaves.parent == 0
    judge = loo.Sides(to_fixed(-2.0), to_fixed(1.0), to_fixed(2.0), to_fixed(1.0))
    want = (0 * w0) - (-2.0 * wl + 1.0 * wl * wl / 2) - (2.0 * wr + 1.0 * wr * wr / 2)
    assert abs(loo.value(leaves, judge) / ONE - want) < 1e-12
    assert loo.value(loo.Leaves.of(loo.Sides(0, 0, 0, 0), LAM), judge) == 0  # an empty coalition estimates nothing


def test_a_party_is_judged_by_the_others_on_coalitions_without_them() -> None:
    """Party 0's value is, summed over every other judge r, what it adds to the coalition without r, judged on r's
    sums: never on its own."""
    rng = np.random.default_rng(1)
    sides = [party(rng, 300, 0.2) for _ in range(3)]
    values = loo.node_values(sides, LAM)
    # recompute party 0's value by hand: judges 1 and 2, coalitions without the judge and without both
    total = loo.Sides(*(sum(getattr(s, f) for s in sides) for f in ("g_left", "h_left", "g_right", "h_right")))
    want = 0
    for r in (1, 2):
        without_r = total - sides[r]
        want += loo.value(loo.Leaves.of(without_r, LAM), sides[r])
        want -= loo.value(loo.Leaves.of(without_r - sides[0], LAM), sides[r])
    assert values[0] == want


def test_an_informative_party_earns_more_than_noise_and_more_rows_earn_more() -> None:
    """On average over draws: equal parties earn alike; a party whose labels ignore the cut earns less than nothing
    (it pulls the others' leaves towards zero); a party with a quarter of the rows earns less than a full one."""
    noise = mean_values(lambda rng: [party(rng, 400, 0.0), *(party(rng, 400, 0.2) for _ in range(3))])
    assert noise[0] < 0 < min(noise[1:])
    fewer = mean_values(lambda rng: [party(rng, 100, 0.2), *(party(rng, 400, 0.2) for _ in range(3))], 400)
    assert fewer[0] < min(fewer[1:])


def test_copies_do_not_raise_a_partys_value() -> None:
    """The same rows twice: on average no more than once (the copies' weight only pulls the coalitions' leaves
    towards the copier's noise)."""
    once = mean_values(lambda rng: [party(rng, 400, 0.2), *(party(rng, 400, 0.2) for _ in range(3))], 400, seed=3)
    twice = mean_values(
        lambda rng: [party(rng, 400, 0.2, copies=2), *(party(rng, 400, 0.2) for _ in range(3))], 400, seed=3
    )
    assert twice[0] <= once[0]


def test_per_judged_row_divides_by_the_others_rows() -> None:
    assert loo.per_judged_row([100, 60, -30], [1, 2, 3]) == [20, 15, -10]
    assert loo.per_judged_row([7], [5]) == [0]  # nobody judged it
    with pytest.raises(ValueError, match="row counts"):
        loo.per_judged_row([1, 2], [1])
    with pytest.raises(ValueError, match=">= 0"):
        loo.per_judged_row([1, 2], [1, -1])


def test_tree_values_from_histograms_match_the_sides() -> None:
    """``tree_values`` reads each party's sums at the chosen cut from its histograms, as the contract will."""
    hist = [
        ref.NodeHistograms((3, 5), ((-4, 1, 4), (0, 0, 1)), ((2, 1, 2), (1, 1, 1)), ((8, 4, 8), (3, 3, 3)))
        for _ in range(3)
    ]
    scaled = [ref.NodeHistograms(h.features, tuple(tuple(v * ONE for v in r) for r in h.g), h.h, h.n) for h in hist]
    params = ref.Params(lam=LAM, learning_rate=ONE, min_rows=1, alpha=ONE, hessian_mode=ref.HESSIAN_COUNT)
    got = loo.tree_values([(scaled, 0, 0)], [20, 20, 20], params)
    sides = [loo.Sides.of(h, 0, 0, ref.HESSIAN_COUNT) for h in scaled]
    assert sides[0] == loo.Sides(-4 * ONE, 8 * ONE, 5 * ONE, 12 * ONE)
    assert got == loo.per_judged_row(loo.node_values(sides, LAM), [20, 20, 20])
    with pytest.raises(ValueError, match="histograms"):
        loo.tree_values([(scaled[:2], 0, 0)], [20, 20, 20], params)


def test_a_party_without_rows_earns_nothing_and_changes_nobody_elses_value() -> None:
    """The null player: sums of 0 add nothing to any coalition and judge nothing."""
    rng = np.random.default_rng(4)
    sides = [party(rng, 300, 0.2) for _ in range(3)]
    values = loo.node_values([*sides, loo.Sides(0, 0, 0, 0)], LAM)
    assert values[3] == 0
    assert values[:3] == loo.node_values(sides, LAM)


def test_parties_with_the_same_sums_earn_the_same() -> None:
    rng = np.random.default_rng(5)
    a, b = party(rng, 300, 0.2), party(rng, 300, 0.1)
    values = loo.node_values([a, b, a], LAM)
    assert values[0] == values[2]
