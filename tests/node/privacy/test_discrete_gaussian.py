"""The exact samplers against the distributions they claim: frequencies within four standard errors of the
probabilities, on enough draws that a wrong constant (a scale off by 10%, a missing sign) fails."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fgbdt_chain.node.privacy.discrete_gaussian import (
    Uniform,
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussians,
    discrete_gaussians_at_least,
    discrete_laplace,
)

DRAWS = 20_000


def within(count: int, p: float, draws: int = DRAWS) -> bool:
    """Whether ``count`` successes out of ``draws`` lie within four standard errors of probability ``p``."""
    return abs(count / draws - p) <= 4 * math.sqrt(p * (1 - p) / draws) + 1e-12


@pytest.mark.parametrize(("num", "den"), [(0, 1), (1, 2), (1, 1), (5, 2), (7, 3)])
def test_bernoulli_exp_is_true_with_probability_exp_minus_gamma(num: int, den: int) -> None:
    uniform = Uniform(np.random.default_rng(num * 10 + den))
    hits = sum(bernoulli_exp(num, den, uniform) for _ in range(DRAWS))
    assert within(hits, math.exp(-num / den))


def test_discrete_laplace_has_its_probabilities() -> None:
    uniform = Uniform(np.random.default_rng(1))
    t = 3
    x = np.array([discrete_laplace(t, uniform) for _ in range(DRAWS)])
    r = math.exp(-1 / t)
    for v in (-4, -1, 0, 1, 2, 7):
        assert within(int(np.sum(x == v)), (1 - r) / (1 + r) * r ** abs(v)), v


@pytest.mark.parametrize("sigma", [0.6, 1.5, 4.0])
def test_discrete_gaussian_has_its_probabilities(sigma: float) -> None:
    x = discrete_gaussians(sigma, DRAWS, np.random.default_rng(int(sigma * 10))).astype(np.int64)
    support = np.arange(-int(12 * sigma) - 2, int(12 * sigma) + 3)
    weights = np.exp(-(support.astype(float) ** 2) / (2 * sigma * sigma))
    pmf = weights / weights.sum()
    for v, p in zip(support, pmf, strict=True):
        if p > 1e-3:
            assert within(int(np.sum(x == v)), float(p)), v
    variance = float(np.sum(pmf * support.astype(float) ** 2))
    assert np.var(x) == pytest.approx(variance, rel=0.05)
    assert abs(np.mean(x)) < 4 * math.sqrt(variance / DRAWS)


def test_a_fixed_point_scale_beyond_64_bits_keeps_its_spread() -> None:
    sigma = 214.0 * 10**18  # a histogram gradient's noise in fixed point
    x = discrete_gaussians(sigma, 4000, np.random.default_rng(3))
    assert all(isinstance(v, int) for v in x)
    assert np.std(x.astype(float)) / sigma == pytest.approx(1.0, abs=0.05)


def test_uniform_draws_below_a_bound_beyond_one_word() -> None:
    n = 3 * 2**100 + 7
    uniform = Uniform(np.random.default_rng(4))
    x = [uniform.below(n) for _ in range(4000)]
    assert all(0 <= v < n for v in x)
    assert np.mean(np.array(x, dtype=float)) / n == pytest.approx(0.5, abs=0.02)


def test_seeded_draws_repeat_and_entropy_draws_work() -> None:
    a = discrete_gaussians(2.5, 50, np.random.default_rng(9))
    b = discrete_gaussians(2.5, 50, np.random.default_rng(9))
    assert a.tolist() == b.tolist()
    assert discrete_gaussians(2.5, (3, 4), None).shape == (3, 4)
    assert discrete_gaussians(0.0, 5, None).tolist() == [0] * 5
    assert discrete_gaussian(Fraction(0), Uniform(None)) == 0


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="sigma"):
        discrete_gaussians(-1.0, 3, None)
    with pytest.raises(ValueError, match="sigma"):
        discrete_gaussians(math.inf, 3, None)
    with pytest.raises(ValueError, match="scale"):
        discrete_laplace(0, Uniform(None))
    with pytest.raises(ValueError, match="gamma"):
        bernoulli_exp(-1, 2, Uniform(None))


@pytest.mark.parametrize("sigma", [0.6, 2.0, 150.0])
def test_the_vectorised_sampler_has_the_probabilities_of_the_rounded_up_variance(sigma: float) -> None:
    x = discrete_gaussians_at_least(sigma, DRAWS, np.random.default_rng(int(sigma * 7)))
    assert x.dtype == np.int64
    variance = math.ceil(sigma * sigma)  # at least the noise asked for
    support = np.arange(-12 * math.isqrt(variance) - 12, 12 * math.isqrt(variance) + 13)
    weights = np.exp(-(support.astype(float) ** 2) / (2 * variance))
    pmf = weights / weights.sum()
    for v, p in zip(support, pmf, strict=True):
        if p > 2e-3:
            assert within(int(np.sum(x == v)), float(p)), v
    assert np.var(x) == pytest.approx(float(np.sum(pmf * support.astype(float) ** 2)), rel=0.05)


def test_the_vectorised_sampler_falls_back_beyond_int64_and_refuses_bad_sigma() -> None:
    big = discrete_gaussians_at_least(5000.0, 300, np.random.default_rng(2))  # variance above VECTOR_VARIANCE
    assert np.std(big) / 5000.0 == pytest.approx(1.0, abs=0.15)
    assert discrete_gaussians_at_least(0.0, 4, None).tolist() == [0] * 4
    assert discrete_gaussians_at_least(3.0, (2, 3), None).shape == (2, 3)
    with pytest.raises(ValueError, match="sigma"):
        discrete_gaussians_at_least(float("nan"), 3, None)
