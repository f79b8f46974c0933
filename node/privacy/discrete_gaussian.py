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
