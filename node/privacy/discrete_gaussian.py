"""Exact discrete Gaussian noise (Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020) for releases whose values are integers: row counts, and sums in fixed point.

Why: a Gaussian drawn in floating point and rounded is not the distribution the analysis assumes, and the gaps in
the floating-point values it can take leak the value it was added to (Mironov, "On significance of the least
significant bits for differential privacy", CCS 2012). The discrete Gaussian ``P[X = x] ~ exp(-x^2 / (2 sigma^2))``
on the integers gives an integer query of L2 sensitivity ``D`` the guarantee the continuous one gives,
``D^2 / (2 sigma^2)``-zCDP (their Theorem 14), so the accountant's Gaussian events hold for it as they are. It is
sampled here exactly, with integers and fractions only: Bernoulli(exp(-gamma)) by their Algorithm 1, the discrete
Laplace by Algorithm 2, and the discrete Gaussian by rejection from the discrete Laplace of scale
``t = floor(sigma) + 1`` (Algorithm 3). The only randomness consumed is uniform integers below a bound
(:class:`Uniform`), from a seeded generator in experiments or the operating system's entropy.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import numpy as np

WORD_BITS = 62
"""Bits of one uniform word (a numpy generator's integers are int64)."""
BLOCK = 4096
"""Words drawn from a numpy generator at once: one call per block, not per draw."""


class Uniform:
    """Uniform integers below a bound, by rejection on uniform random bits: from ``rng`` (seeded experiments), or
    the operating system's entropy when ``rng`` is None."""

    def __init__(self, rng: np.random.Generator | None) -> None:
        self.rng = rng
        self._words: list[int] = []

    def _word(self) -> int:
        if self.rng is None:
            return secrets.randbits(WORD_BITS)
        if not self._words:
            self._words = self.rng.integers(0, 1 << WORD_BITS, size=BLOCK, dtype=np.int64).tolist()
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


def discrete_laplace(t: int, uniform: Uniform) -> int:
    """``P[X = x] ~ exp(-|x| / t)`` on the integers, ``t >= 1`` an integer, exactly (Algorithm 2 with s = 1)."""
    if t < 1:
        raise ValueError(f"the discrete Laplace scale must be a positive integer, got {t}")
    while True:
        u = uniform.below(t)
        if not bernoulli_exp(u, t, uniform):
            continue
        v = 0
        while bernoulli_exp(1, 1, uniform):
            v += 1
        x = u + t * v
        negative = uniform.bits(1) == 1
        if negative and x == 0:
            continue
        return -x if negative else x


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


def discrete_gaussians(sigma: float, size: int | tuple[int, ...], rng: np.random.Generator | None) -> np.ndarray:
    """An array of independent discrete Gaussians of parameter ``sigma`` (a finite float >= 0, taken exactly as the
    rational it is), as Python integers (an object array: fixed-point scales exceed 64 bits)."""
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma}")
    shape = (size,) if isinstance(size, int) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    sigma2 = Fraction(sigma) ** 2
    uniform = Uniform(rng)
    out = np.empty(count, dtype=object)
    for i in range(count):
        out[i] = discrete_gaussian(sigma2, uniform)
    return out.reshape(shape)


VECTOR_VARIANCE = 1 << 24
"""The largest variance (rounded up to an integer) the vectorised sampler takes: every integer it forms stays below
2^60, within numpy's int64; above it, :func:`discrete_gaussians` draws one by one with Python integers."""


def _bernoulli_exp_vec(num: np.ndarray, den: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """:func:`bernoulli_exp` of int64 arrays ``num / den``, every entry its own draw (Algorithm 1, vectorised)."""
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
    while going.any():
        at = np.flatnonzero(going)
        hit = rng.integers(0, d[at] * k[at]) < n[at]
        k[at[hit]] += 1
        going[at[~hit]] = False
    out[rest] = k % 2 == 1
    return out


def _discrete_laplace_vec(t: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """:func:`discrete_laplace` of scale ``t``, ``size`` independent draws (Algorithm 2, vectorised)."""
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
        x = u + t * v
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
    if variance > VECTOR_VARIANCE:
        return discrete_gaussians(math.sqrt(variance), shape, rng).astype(np.int64)
    generator = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    return _discrete_gaussians_vec(variance, count, generator).reshape(shape)
