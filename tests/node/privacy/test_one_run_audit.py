"""The one-run audit's statistics against Steinke, Nasr and Jagielski's formula on inputs worked by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fgbdt_chain.node.privacy.audit import (
    Audit,
    audit,
    binomial_pmf,
    epsilon_lower_bound,
    guess_accuracy,
    guesses,
    p_value,
    pool,
)


def exact_tail(r: int, v: int, q: float) -> float:
    """``P[Binomial(r, q) >= v]`` summed term by term in exact arithmetic (q taken as the rational it is)."""
    qf = Fraction(q)
    return float(sum(math.comb(r, k) * qf**k * (1 - qf) ** (r - k) for k in range(v, r + 1)))


def test_all_guesses_right_gives_the_closed_form() -> None:
    # P[B >= r] = q^r = 0.05  =>  q = 0.05^(1/r), epsilon = log(q / (1 - q))
    for r in (10, 25, 100):
        q = 0.05 ** (1 / r)
        assert epsilon_lower_bound(r, r, r) == pytest.approx(math.log(q / (1 - q)), abs=1e-9)
    assert epsilon_lower_bound(100, 100, 100) == pytest.approx(3.4929, abs=1e-4)


def test_the_bound_is_where_the_binomial_tail_crosses_five_percent() -> None:
    for m, r, v in ((1000, 200, 140), (500, 100, 75), (60, 30, 24)):
        eps = epsilon_lower_bound(m, r, v)
        assert eps > 0
        assert exact_tail(r, v, guess_accuracy(eps)) == pytest.approx(0.05, rel=1e-6)
        assert exact_tail(r, v, guess_accuracy(eps * 1.01)) > 0.05 > exact_tail(r, v, guess_accuracy(eps * 0.99))


def test_the_delta_term_by_hand() -> None:
    # r = 2, v = 2: alpha = max(P[B = 1] / 1, P[0 <= B < 2] / 2)
    q = math.e / (1 + math.e)
    alpha = max(2 * q * (1 - q), (1 - q * q) / 2)
    assert p_value(10, 2, 2, 1.0, 1e-3) == pytest.approx(q * q + 2 * 10 * 1e-3 * alpha, rel=1e-12)
    assert p_value(10, 2, 2, 1.0) == pytest.approx(q * q, rel=1e-12)


def test_delta_only_lowers_the_bound() -> None:
    assert epsilon_lower_bound(1000, 200, 160, delta=1e-5) < epsilon_lower_bound(1000, 200, 160)
    assert epsilon_lower_bound(1000, 200, 160, delta=1e-5) > 0


def test_chance_accuracy_refutes_nothing() -> None:
    assert epsilon_lower_bound(100, 50, 25) == 0.0
    assert epsilon_lower_bound(100, 50, 10) == 0.0
    assert epsilon_lower_bound(100, 0, 0) == 0.0


def test_binomial_pmf_sums_to_one_and_matches_the_comb_formula() -> None:
    pmf = binomial_pmf(30, 0.3)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert pmf[7] == pytest.approx(math.comb(30, 7) * 0.3**7 * 0.7**23, rel=1e-10)


def test_guesses_take_the_extremes_and_abstain_between() -> None:
    g = guesses([0.1, 5.0, -3.0, 2.0, 0.0], k_in=2, k_out=1)
    assert g.tolist() == [0, 1, -1, 1, 0]
    with pytest.raises(ValueError, match="k_in"):
        guesses([1.0, 2.0], 2, 1)
    with pytest.raises(ValueError, match="NaN"):
        guesses([1.0, float("nan")], 1, 0)


def test_audit_counts_right_guesses_and_pools_runs() -> None:
    scores = np.array([3.0, 2.0, 1.0, -1.0, -2.0, -3.0])
    inside = np.array([True, True, False, False, True, False])
    one = audit(scores, inside, k_in=2, k_out=2, delta=1e-5)
    assert (one.m, one.r, one.v) == (6, 4, 3)  # in: 0, 1 right; out: 4 wrong, 5 right
    both = pool([one, one])
    assert (both.m, both.r, both.v) == (12, 8, 6)
    assert isinstance(both, Audit)
    perfect = Audit(200, 100, 100, 1e-5)
    assert perfect.flags(1.0) and not perfect.flags(10.0)
