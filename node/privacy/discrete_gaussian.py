"""Exact discrete Gaussian and discrete Laplace noise (Canonne, Kamath and Steinke, "The Discrete Gaussian for
Differential Privacy", NeurIPS 2020) for releases whose values are integers: row counts, and sums in fixed point. The
package's only noise samplers for differentially private releases: every mechanism draws here.

Why: a Gaussian drawn in floating point and rounded is not the distribution the analysis assumes, and the gaps in
the floating-point values it can take leak the value it was added to (Mironov, "On significance of the least
significant bits for differential privacy", CCS 2012). The discrete Gaussian ``P[X = x] ~ exp(-x^2 / (2 sigma^2))``
on the integers gives an integer query of L2 sensitivity ``D`` the guarantee the continuous one gives,
``D^2 / (2 sigma^2)``-zCDP (their Theorem 14), so the accountant's Gaussian events hold for it as they are. It is
sampled here exactly, with integers and fractions only: Bernoulli(exp(-gamma)) by their Algorithm 1, the discrete
Laplace by Algorithm 2, and the discrete Gaussian by rejection from the discrete Laplace of scale
``t = floor(sigma) + 1`` (Algorithm 3); the exponential mechanism likewise by rejection with Bernoulli(exp(-gap))
(:func:`exponential_choice`). The only randomness consumed is uniform integers below a bound
(:class:`Uniform`, or numpy's ``integers``, which is uniform on integers too), from a seeded generator in experiments
or the operating system's entropy.

Where a release is a sum of reals (gradients, hessians), it is made on a lattice (:func:`lattice_release`): every
row's value is rounded to ``1 / ONE`` (18-decimal fixed point) or to ``2^-bits`` (the secure sum's scale) before the
sum, so the sum is an integer in those steps and a row of bound ``B`` moves it by at most ``B`` steps. The noise,
about 10^18 steps, is beyond int64; rather than drawing it one by one with Python integers (about 20 microseconds a
draw), the sum is rounded to a coarser lattice of ``gamma = 2^e`` steps, with ``e`` the smallest that keeps the noise
below 2^30 of them, and gets ``gamma`` times an integer discrete Gaussian, drawn vectorised in int64. Rounding to
``gamma Z`` moves each sum by at most ``gamma / 2``, so two neighbouring datasets' rounded sums differ by at most ``B
+ gamma``; the noise parameter is raised by the factor ``(B + gamma) / B`` (``gamma`` is at most ``2^-28 sigma``, so
the factor is at most ``1 + 2^-28 sigma / B``: ``1 + 1.2e-6`` for noise 300 times a row's bound), which makes ``rho =
(B + gamma)^2 / (2 sigma'^2) = B^2 / (2 sigma^2)``: the zCDP the accountant counts for the Gaussian mechanism of
``sigma``, exactly. Counts (variances up to :data:`VECTOR_VARIANCE`) and the discrete Laplace are drawn vectorised
too.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import numpy as np

WORD_BITS = 62
"""Bits of one uniform word (a numpy generator's integers are int64)."""
BLOCK = 4096
"""The most words drawn from a numpy generator at once: one call per block, not per draw."""
FIRST_BLOCK = 64
"""The first block's words, doubled at every refill up to :data:`BLOCK`: a release of a few draws (one tree's
leaves) then does not pay for thousands of words it never uses."""


class Uniform:
    """Uniform integers below a bound, by rejection on uniform random bits: from ``rng`` (seeded experiments), or
    the operating system's entropy when ``rng`` is None."""

    def __init__(self, rng: np.random.Generator | None) -> None:
        self.rng = rng
        self._words: list[int] = []
        self._block = FIRST_BLOCK

    def _word(self) -> int:
        if self.rng is None:
            return secrets.randbits(WORD_BITS)
        if not self._words:
            self._words = self.rng.integers(0, 1 << WORD_BITS, size=self._block, dtype=np.int64).tolist()
            self._block = min(BLOCK, 2 * self._block)
        return self._words.pop()

    def bits(self, count: int) -> int:
        """``count`` uniform random bits as an integer."""
        x, have = 0, 0
        while have < count:
            x = (x << WORD_BITS) | self._word()
            have += WORD_BITS
        return x >> (have - count)

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)``: ``n.bit_length()`` random bits, drawn again while they are ``>= n``
        (fewer than two draws on average)."""
        if n < 1:
            raise ValueError(f"need a positive bound, got {n}")
        width = n.bit_length()
        while True:
            x = self.bits(width)
            if x < n:
                return x


def bernoulli_exp(num: int, den: int, uniform: Uniform) -> bool:
    """True with probability ``exp(-num / den)``, ``num >= 0``, ``den >= 1``, exactly (Algorithm 1): for
    ``gamma <= 1``, the parity of the first ``k`` with Bernoulli(gamma / k) false; above 1, one ``exp(-1)`` per
    whole unit first."""
    if num < 0 or den < 1:
        raise ValueError(f"need gamma = num / den >= 0, got {num} / {den}")
    while num > den:
        if not bernoulli_exp(1, 1, uniform):
            return False
        num -= den
    k = 1
    while uniform.below(den * k) < num:
        k += 1
    return k % 2 == 1


def discrete_laplace(t: int, uniform: Uniform, s: int = 1) -> int:
    """``P[X = x] ~ exp(-|x| s / t)`` on the integers, ``t, s >= 1`` integers, exactly (Algorithm 2): with ``s = 1``
    the proposal of :func:`discrete_gaussian`. Noise of a real scale: :func:`discrete_laplaces`."""
    if t < 1 or s < 1:
        raise ValueError(f"the discrete Laplace scale must be a ratio of positive integers, got {t} / {s}")
    while True:
        u = uniform.below(t)
        if not bernoulli_exp(u, t, uniform):
            continue
        v = 0
        while bernoulli_exp(1, 1, uniform):
            v += 1
        x = (u + t * v) // s
        negative = uniform.bits(1) == 1
        if negative and x == 0:
            continue
        return -x if negative else x


def exponential_choice(gaps: list[Fraction], uniform: Uniform) -> int:
    """An index ``j`` with probability proportional to ``exp(-gaps[j])`` (rational gaps >= 0, one of them 0), exactly:
    a uniform index, kept with probability ``exp(-gaps[j])`` (:func:`bernoulli_exp`). The exponential mechanism with
    the gaps ``(u_max - u_j) / scale``; the 0 gap keeps the expected number of draws at most ``len(gaps)``, and each
    refusal costs about 1.6 Bernoulli draws whatever the gap (it stops at the first failed ``exp(-1)``)."""
    if not gaps or min(gaps) != 0 or any(g < 0 for g in gaps):
        raise ValueError("the exponential choice needs gaps >= 0 with the best one at 0")
    while True:
        j = uniform.below(len(gaps))
        if bernoulli_exp(gaps[j].numerator, gaps[j].denominator, uniform):
            return j


def discrete_gaussian(sigma2: Fraction, uniform: Uniform) -> int:
    """``P[X = x] ~ exp(-x^2 / (2 sigma2))`` on the integers, exactly (Algorithm 3): a discrete Laplace draw ``y``
    of scale ``t = floor(sigma) + 1``, kept with probability ``exp(-(|y| - sigma2 / t)^2 / (2 sigma2))``, in
    integers: ``(|y| t d - n)^2 / (2 t^2 d n)`` for ``sigma2 = n / d``. ``sigma2 = 0`` gives 0."""
    if sigma2 < 0:
        raise ValueError(f"the variance must be >= 0, got {sigma2}")
    if sigma2 == 0:
        return 0
    n, d = sigma2.numerator, sigma2.denominator
    t = math.isqrt(n // d) + 1
    den = 2 * t * t * d * n
    while True:
        y = discrete_laplace(t, uniform)
        gap = abs(y) * t * d - n
        if bernoulli_exp(gap * gap, den, uniform):
            return y


def discrete_gaussians(
    sigma: float | Fraction, size: int | tuple[int, ...], rng: np.random.Generator | None
) -> np.ndarray:
    """An array of independent discrete Gaussians of parameter ``sigma`` (a finite number >= 0, a float taken
    exactly as the rational it is, or a Fraction such as a float times a fixed-point scale), as Python integers (an
    object array: fixed-point scales exceed 64 bits)."""
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma}")
    return _one_by_one(Fraction(sigma) ** 2, size, rng)


def _one_by_one(sigma2: Fraction, size: int | tuple[int, ...], rng: np.random.Generator | None) -> np.ndarray:
    """Independent :func:`discrete_gaussian` draws of variance parameter ``sigma2``, shaped ``size``."""
    shape = (size,) if isinstance(size, int) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    uniform = Uniform(rng)
    out = np.empty(count, dtype=object)
    for i in range(count):
        out[i] = discrete_gaussian(sigma2, uniform)
    return out.reshape(shape)


SCALAR_BELOW = 128
"""Fewer draws than this are made one by one with Python integers (about 20 microseconds each), more vectorised in
numpy (a few microseconds each, but every call pays a fixed cost for its rejection loops, about a millisecond, so a
release of one tree's 17 leaves costs less one by one). Both are the same exact distribution."""

VECTOR_VARIANCE = 1 << 24
"""The largest variance (rounded up to an integer) the vectorised sampler takes: every integer it forms stays below
2^60, within numpy's int64; above it, :func:`discrete_gaussians` draws one by one with Python integers."""


def _bernoulli_exp_vec(num: np.ndarray, den: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """:func:`bernoulli_exp` of int64 arrays ``num / den`` (``den < 2^62``), every entry its own draw (Algorithm 1,
    vectorised)."""
    out = np.ones(num.shape[0], dtype=bool)
    num = num.copy()
    while True:  # whole units: one exp(-1) each
        whole = np.flatnonzero(out & (num > den))
        if whole.size == 0:
            break
        unit = np.ones(whole.size, dtype=np.int64)
        out[whole[~_bernoulli_exp_vec(unit, unit, rng)]] = False
        num[whole] -= den[whole]
    rest = np.flatnonzero(out)
    k = np.ones(rest.size, dtype=np.int64)
    going = np.ones(rest.size, dtype=bool)
    n, d = num[rest], den[rest]
    small = d.size == 0 or int(d.max()) < 1 << 40  # then d k (k below 2^20 in any real run) stays in int64
    while going.any():
        at = np.flatnonzero(going)
        if small:
            hit = rng.integers(0, d[at] * k[at]) < n[at]
        else:  # Bernoulli(n / (d k)) as independent Bernoulli(n / d) and Bernoulli(1 / k): d k could pass int64
            hit = (rng.integers(0, d[at]) < n[at]) & (rng.integers(0, k[at]) == 0)
        k[at[hit]] += 1
        going[at[~hit]] = False
    out[rest] = k % 2 == 1
    return out


def _discrete_laplace_vec(t: int, size: int, rng: np.random.Generator, s: int = 1) -> np.ndarray:
    """``P[X = x] ~ exp(-|x| s / t)`` on the integers, ``size`` independent draws (Algorithm 2, vectorised): a
    geometric ``x`` of ratio ``exp(-1 / t)`` (a uniform ``u < t`` kept with probability ``exp(-u / t)``, plus ``t``
    times the number of successes of ``exp(-1)``), divided by ``s`` and floored, which is geometric of ratio
    ``exp(-s / t)``; a random sign, a negative zero drawn again."""
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        m = todo.size
        u = rng.integers(0, t, m)
        ok = _bernoulli_exp_vec(u, np.full(m, t, dtype=np.int64), rng)
        v = np.zeros(m, dtype=np.int64)
        going = ok.copy()
        while going.any():
            at = np.flatnonzero(going)
            unit = np.ones(at.size, dtype=np.int64)
            more = _bernoulli_exp_vec(unit, unit, rng)
            v[at[more]] += 1
            going[at[~more]] = False
        x = (u + t * v) // s
        negative = rng.integers(0, 2, m) == 1
        ok &= ~(negative & (x == 0))
        out[todo[ok]] = np.where(negative, -x, x)[ok]
        todo = todo[~ok]
    return out


def _discrete_gaussians_vec(variance: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """:func:`discrete_gaussian` of integer ``variance`` (at most :data:`VECTOR_VARIANCE`), ``size`` independent
    draws (Algorithm 3, vectorised): the acceptance ``exp(-(|y| t - n)^2 / (2 t^2 n))`` in int64; a draw whose
    ``|y| t`` passes 2^28 (probability below ``exp(-2^14)``) is decided with Python integers."""
    t = math.isqrt(variance) + 1
    den = 2 * t * t * variance
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    uniform = Uniform(rng)
    while todo.size:
        y = _discrete_laplace_vec(t, todo.size, rng)
        far = np.abs(y) * t > 1 << 28
        gap = np.where(far, 0, np.abs(y) * t - variance)
        keep = _bernoulli_exp_vec(gap * gap, np.full(y.size, den, dtype=np.int64), rng)
        for i in np.flatnonzero(far):
            g = abs(int(y[i])) * t - variance
            keep[i] = bernoulli_exp(g * g, den, uniform)
        out[todo[keep]] = y[keep]
        todo = todo[~keep]
    return out


def discrete_gaussians_at_least(
    sigma: float, size: int | tuple[int, ...], rng: np.random.Generator | None
) -> np.ndarray:
    """Independent discrete Gaussians whose variance is ``sigma^2`` rounded up to an integer: at least the noise
    asked for, so at least its guarantee, drawn vectorised (int64) where the variance allows and a seeded generator
    is given, else one by one (:func:`discrete_gaussians`). For counts, whose noise is hundreds of rows."""
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma}")
    shape = (size,) if isinstance(size, int) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    variance = math.ceil(Fraction(sigma) ** 2)
    if variance == 0:
        return np.zeros(shape, dtype=np.int64)
    if variance > VECTOR_VARIANCE or count < SCALAR_BELOW:
        return _one_by_one(Fraction(variance), shape, rng).astype(np.int64)
    generator = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    return _discrete_gaussians_vec(variance, count, generator).reshape(shape)


LAPLACE_GRID = 1 << 20
"""A discrete Laplace scale is rounded up to a multiple of ``1 / LAPLACE_GRID``: ``b' = t / LAPLACE_GRID`` with an
integer ``t``, the rational Algorithm 2 samples exactly. Rounding up adds at most ``2^-20`` to the scale, so the
mechanism is at least as private as the scale asked for (``epsilon = sensitivity / b' <= sensitivity / b``)."""
MAX_LAPLACE_SCALE = float(1 << 30)
"""The largest discrete Laplace scale taken: ``t`` then stays below 2^50, and every integer the vectorised sampler
forms below 2^62 (a count's noise of a billion rows hides every count)."""


def laplace_steps(scale: float) -> int:
    """``t``: the scale in units of ``1 / LAPLACE_GRID``, rounded up (:data:`LAPLACE_GRID`)."""
    return math.ceil(Fraction(scale) * LAPLACE_GRID)


def discrete_laplaces(scale: float, size: int | tuple[int, ...], rng: np.random.Generator | None) -> np.ndarray:
    """Independent discrete Laplace draws ``P[X = x] ~ exp(-|x| / b)`` on the integers (int64), ``b`` the scale
    rounded up to the grid of :data:`LAPLACE_GRID` (zeros when ``scale`` is 0): the discrete Laplace (two-sided
    geometric) mechanism of Ghosh, Roughgarden and Sundararajan (2009), ``sensitivity / b``-DP on integer queries of
    that L1 sensitivity, sampled exactly (Algorithm 2 of Canonne, Kamath and Steinke with ``t / s = b``). Its variance
    is ``2q / (1 - q)^2``, ``q = exp(-1 / b)``: about ``2 b^2``, as for Laplace noise of the same scale. From ``rng``
    (an experiment's seed), or the operating system's entropy when None."""
    if not (math.isfinite(scale) and 0 <= scale <= MAX_LAPLACE_SCALE):
        raise ValueError(f"the discrete Laplace scale must be a finite number in [0, 2^30], got {scale}")
    shape = (size,) if isinstance(size, int) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    if scale == 0:
        return np.zeros(shape, dtype=np.int64)
    t, s = laplace_steps(scale), LAPLACE_GRID
    common = math.gcd(t, s)
    t, s = t // common, s // common
    if count < SCALAR_BELOW:
        uniform = Uniform(rng)
        return np.array([discrete_laplace(t, uniform, s) for _ in range(count)], dtype=np.int64).reshape(shape)
    generator = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    return _discrete_laplace_vec(t, count, generator, s).reshape(shape)


LATTICE_SIGMA_BITS = 30
""":func:`lattice_release` draws the noise in steps of ``gamma`` with at most ``2^30`` of them per standard
deviation: then ``2 sigma^2 < 2^62`` and every integer the vectorised sampler forms fits int64."""


def _integer_sigma_gaussians_vec(t: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Discrete Gaussians of parameter ``sigma = t`` (an integer, ``1 <= t <= 2^30``), ``size`` independent draws,
    int64: Algorithm 3 with the proposal's scale ``t`` itself (correct for any scale; its proof needs none), so the
    acceptance ``exp(-(|y| - sigma^2 / t)^2 / (2 sigma^2))`` is ``exp(-A^2 / (2 t^2))`` with ``A = ||y| - t|``. With
    ``A = q t + r`` (``0 <= r < t``) that is ``exp(-q^2 / 2) exp(-q r / t) exp(-r^2 / (2 t^2))``: three independent
    Bernoulli draws whose numerators and denominators stay below 2^62."""
    if not 1 <= t <= 1 << LATTICE_SIGMA_BITS:
        raise ValueError(f"the vectorised integer sigma must be in [1, 2^30], got {t}")
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        m = todo.size
        y = _discrete_laplace_vec(t, m, rng)
        q, r = np.divmod(np.abs(np.abs(y) - t), t)
        keep = _bernoulli_exp_vec(q * q, np.full(m, 2, dtype=np.int64), rng)
        keep &= _bernoulli_exp_vec(q * r, np.full(m, t, dtype=np.int64), rng)
        keep &= _bernoulli_exp_vec(r * r, np.full(m, 2 * t * t, dtype=np.int64), rng)
        out[todo[keep]] = y[keep]
        todo = todo[~keep]
    return out


def lattice_step(sd: float, steps: int, bound: float) -> tuple[int, Fraction]:
    """``(gamma, sigma')`` of :func:`lattice_release`: the coarse lattice step (a power of two, in lattice steps)
    and the raised noise parameter, also in steps (module docstring)."""
    sigma = Fraction(sd) * steps
    delta = Fraction(bound) * steps
    if delta <= 0:
        raise ValueError(f"the per-row bound must be positive, got {bound}")
    exponent = max(0, math.ceil(sigma).bit_length() - LATTICE_SIGMA_BITS + 1)
    gamma = 1 << exponent
    return gamma, (sigma if gamma == 1 else sigma * (delta + gamma) / delta)


def lattice_release(
    sums: np.ndarray, sd: float, steps: int, bound: float, rng: np.random.Generator | None
) -> np.ndarray:
    """Integer sums of real values on a lattice of ``1 / steps`` (``ONE``, or ``2^bits``), each row of at most
    ``bound`` in absolute value, released with discrete Gaussian noise of at least ``sd`` (in the values' units),
    exactly the Gaussian mechanism of ``sd / bound`` (module docstring): rounded to ``gamma Z`` and given ``gamma``
    times an integer discrete Gaussian of parameter ``ceil(sigma' / gamma)``. Python integers (an object array of the
    sums' shape). From ``rng`` (an experiment's seed), or the operating system's entropy when None."""
    if not (math.isfinite(sd) and sd >= 0):
        raise ValueError(f"the noise's standard deviation must be a finite number >= 0, got {sd}")
    if steps < 1:
        raise ValueError(f"a lattice needs a positive number of steps per unit, got {steps}")
    values = np.asarray(sums, dtype=object)
    if sd == 0:
        return values.copy()
    gamma, sigma = lattice_step(sd, steps, bound)
    t = math.ceil(sigma / gamma)
    if values.size < SCALAR_BELOW:
        noise = _one_by_one(Fraction(t * t), values.shape, rng)
    else:
        generator = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
        noise = _integer_sigma_gaussians_vec(t, values.size, generator).astype(object).reshape(values.shape)
    if gamma > 1:
        half = gamma // 2
        values = np.array([(int(v) + half) // gamma * gamma for v in values.ravel()], dtype=object).reshape(
            values.shape
        )
    return values + noise * gamma
