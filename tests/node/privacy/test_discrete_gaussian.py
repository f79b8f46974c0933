"""The exact samplers against the distributions they claim: frequencies within four standard errors of the
probabilities, on enough draws that a wrong constant (a scale off by 10%, a missing sign) fails; every draw an
integer."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fgbdt_chain.node.privacy.discrete_gaussian import (
    LAPLACE_GRID,
    LATTICE_SIGMA_BITS,
    SCALAR_BELOW,
    Uniform,
    _integer_sigma_gaussians_vec,
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussians,
    discrete_gaussians_at_least,
    discrete_laplace,
    discrete_laplaces,
    exponential_choice,
    laplace_steps,
    lattice_release,
    lattice_step,
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


def _discrete_laplace_pmf(b: float, v: int) -> float:
    q = math.exp(-1 / b)
    return (1 - q) / (1 + q) * q ** abs(v)


@pytest.mark.parametrize("scale", [0.7, 3.0, 12.5])
def test_discrete_laplaces_have_the_probabilities_of_the_rounded_up_scale(scale: float) -> None:
    """Frequencies within four standard errors of ``(1 - q) / (1 + q) q^|x|`` for the scale rounded up to the
    grid; the variance within four standard errors of a variance (``sqrt((kurtosis - 1) / N)`` relative, the
    Laplace's kurtosis 6: 0.016 at 20,000 draws), the mean within four of ``sd / sqrt(N)``; integers."""
    x = discrete_laplaces(scale, DRAWS, np.random.default_rng(int(scale * 10)))
    assert x.dtype == np.int64
    b = laplace_steps(scale) / LAPLACE_GRID
    assert scale <= b < scale + 1 / LAPLACE_GRID  # rounded up: at least the noise asked for
    for v in range(-int(4 * b) - 1, int(4 * b) + 2):
        p = _discrete_laplace_pmf(b, v)
        if p > 1e-3:
            assert within(int(np.sum(x == v)), p), v
    q = math.exp(-1 / b)
    variance = 2 * q / (1 - q) ** 2
    assert abs(np.var(x) / variance - 1) < 4 * math.sqrt(5 / DRAWS)
    assert abs(np.mean(x)) < 4 * math.sqrt(variance / DRAWS)


def test_discrete_laplaces_repeat_under_a_seed_and_refuse_bad_scales() -> None:
    a = discrete_laplaces(4.0, (3, 5), np.random.default_rng(1))
    assert a.shape == (3, 5) and a.tolist() == discrete_laplaces(4.0, (3, 5), np.random.default_rng(1)).tolist()
    assert discrete_laplaces(4.0, 4, None).dtype == np.int64  # the operating system's entropy
    assert discrete_laplaces(0.0, 3, None).tolist() == [0, 0, 0]
    for bad in (-1.0, math.inf, math.nan, 2.0**31):
        with pytest.raises(ValueError, match="discrete Laplace scale"):
            discrete_laplaces(bad, 3, None)


@pytest.mark.parametrize("t", [1, 3, 17])
def test_the_integer_sigma_sampler_has_the_discrete_gaussians_probabilities(t: int) -> None:
    x = _integer_sigma_gaussians_vec(t, DRAWS, np.random.default_rng(t))
    support = np.arange(-12 * t - 2, 12 * t + 3)
    weights = np.exp(-(support.astype(float) ** 2) / (2 * t * t))
    pmf = weights / weights.sum()
    for v, p in zip(support, pmf, strict=True):
        if p > 1e-3:
            assert within(int(np.sum(x == v)), float(p)), v


def test_the_integer_sigma_sampler_keeps_its_spread_at_2_to_the_30() -> None:
    """At the largest sigma the lattice release uses: mean and standard deviation within four standard errors
    (``sigma / sqrt(N)``, and ``1 / sqrt(2 N)`` relative for the standard deviation)."""
    t = 1 << LATTICE_SIGMA_BITS
    x = _integer_sigma_gaussians_vec(t, DRAWS, np.random.default_rng(5))
    assert abs(np.mean(x.astype(float))) < 4 * t / math.sqrt(DRAWS)
    assert abs(np.std(x.astype(float)) / t - 1) < 4 / math.sqrt(2 * DRAWS)


def test_a_lattice_release_is_the_gaussian_mechanism_it_claims() -> None:
    """Sums of fixed-point gradients (bound 1 = ONE steps) at a noise of 87.3: rounded to a power-of-two lattice
    ``gamma`` with at most 2^30 of it per standard deviation, noise in multiples of gamma, and the raised parameter
    keeps ``(bound + gamma) / sigma'`` equal to ``bound / sigma``: the zCDP the accountant counts, exactly."""
    one, sd = 10**18, 87.3
    gamma, sigma = lattice_step(sd, one, 1.0)
    assert gamma & (gamma - 1) == 0 and sigma / gamma <= 1 << LATTICE_SIGMA_BITS
    assert Fraction(one + gamma) / sigma == Fraction(one) / (Fraction(sd) * one)
    assert sigma / (Fraction(sd) * one) < 1 + Fraction(1, 1 << 20)  # the extra noise is negligible
    sums = np.array([3 * one + 12345, -7 * one, 0, one // 3] * 5000, dtype=object)
    out = lattice_release(sums, sd, one, 1.0, np.random.default_rng(2))
    assert all(isinstance(v, int) and v % gamma == 0 for v in out)
    noise = np.array([float(o - s) for o, s in zip(out, sums, strict=True)])
    assert abs(np.std(noise) / float(sigma) - 1) < 4 / math.sqrt(2 * noise.size)
    assert abs(np.mean(noise)) < 4 * float(sigma) / math.sqrt(noise.size)
    # a noise small enough keeps the lattice (gamma 1) and the sums' own values on it
    assert lattice_step(100.0, 1, 1.0) == (1, Fraction(100))
    small = lattice_release(np.array([5, 9], dtype=object), 0.0, 1, 1.0, None)
    assert small.tolist() == [5, 9]
    again = lattice_release(sums, sd, one, 1.0, np.random.default_rng(2))
    assert again.tolist() == out.tolist()  # seeded: the same draws
    with pytest.raises(ValueError, match="bound"):
        lattice_release(sums, sd, one, 0.0, None)


def test_the_exponential_choice_has_its_probabilities() -> None:
    """``P[j] ~ exp(-gap_j)``: frequencies within four standard errors; bad gaps refused."""
    gaps = [Fraction(0), Fraction(1), Fraction(5, 2), Fraction(10**6)]
    uniform = Uniform(np.random.default_rng(8))
    x = np.array([exponential_choice(gaps, uniform) for _ in range(DRAWS)])
    weights = [math.exp(-float(g)) for g in gaps]
    for j, w in enumerate(weights):
        assert within(int(np.sum(x == j)), w / sum(weights)), j
    for bad in ([], [Fraction(1)], [Fraction(0), Fraction(-1)]):
        with pytest.raises(ValueError, match="gaps"):
            exponential_choice(bad, uniform)


def test_few_discrete_laplaces_are_drawn_one_by_one_from_the_same_distribution() -> None:
    """Below SCALAR_BELOW draws the one-by-one sampler (Algorithm 2 with ``s > 1``) serves: the same frequencies."""
    rng = np.random.default_rng(12)
    x = np.concatenate([discrete_laplaces(2.5, SCALAR_BELOW - 1, rng) for _ in range(DRAWS // (SCALAR_BELOW - 1))])
    for v in range(-6, 7):
        assert within(int(np.sum(x == v)), _discrete_laplace_pmf(2.5, v), x.size), v
