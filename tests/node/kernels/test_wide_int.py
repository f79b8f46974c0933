"""The compiled 256-bit integers (``node.kernels.wide_int``) against Python's integers, on random values and the edges
of
every digit: sums and differences modulo 2^256, products and quotients of magnitudes."""

from __future__ import annotations

import random

import numpy as np
import pytest
from numba import njit

from fgbdt_chain.node.kernels import wide_int as wi


@njit(cache=False)
def _all_ops(a, b, out, work):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """out[0] = a + b, out[1] = a - b, out[2] = |a| * |b|, out[3] = |a| // |b| (b != 0), out[4] = -a."""
    wi.add(a, b, out[0])
    wi.sub(a, b, out[1])
    ma = np.zeros(wi.DIGITS, np.uint64)
    mb = np.zeros(wi.DIGITS, np.uint64)
    wi.magnitude(a, ma)
    wi.magnitude(b, mb)
    wi.multiply(ma, mb, out[2])
    if not wi.is_zero(mb):
        wi.divide(ma, mb, out[3], work)
    wi.negate(a, out[4])


_EDGES = [0, 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**63 - 1, 2**64 - 1, 2**64, 2**96 - 1, 2**126, 2**127 - 1]


def _value(rng: random.Random) -> int:
    if rng.random() < 0.2:
        return rng.choice(_EDGES) * rng.choice([1, -1])
    return rng.getrandbits(rng.choice([1, 8, 31, 32, 33, 63, 64, 65, 96, 120, 127])) * rng.choice([1, -1])


@pytest.mark.parametrize("seed", range(3))
def test_wide_integers_compute_what_python_integers_do(seed: int) -> None:
    rng = random.Random(seed)
    work = np.zeros(2 * wi.DIGITS + 1, np.uint64)
    for _ in range(4000):
        a, b = _value(rng), _value(rng)
        if rng.random() < 0.05:
            a = b * rng.getrandbits(60) + rng.choice([0, 1, -1])  # quotients whose last digit is a near miss
        if not -(2**255) <= a < 2**255:
            continue
        out = np.zeros((5, wi.DIGITS), np.uint64)
        _all_ops(wi.to_digits(a), wi.to_digits(b), out, work)
        assert wi.from_digits(out[0]) == (a + b + 2**255) % 2**256 - 2**255
        assert wi.from_digits(out[1]) == (a - b + 2**255) % 2**256 - 2**255
        if abs(a) * abs(b) < 2**255:
            assert wi.from_digits(out[2]) == abs(a) * abs(b)
        if b:
            assert wi.from_digits(out[3]) == abs(a) // abs(b), (a, b)
        if a != -(2**255):
            assert wi.from_digits(out[4]) == -a


def test_long_quotients_and_bounds() -> None:
    """Numerators of up to 254 bits over divisors of every length, including the add-back step of algorithm D
    (quotient digits estimated one too high), and the bound checks the kernels rest on."""
    rng = random.Random(7)
    work = np.zeros(2 * wi.DIGITS + 1, np.uint64)
    q = np.zeros(wi.DIGITS, np.uint64)
    for _ in range(6000):
        b = rng.getrandbits(rng.randint(1, 200)) or 1
        if rng.random() < 0.2:
            b = max((1 << rng.randint(0, 190)) + rng.choice([0, 1, -1]), 1)
        a = rng.getrandbits(rng.randint(1, 254))
        if rng.random() < 0.2:
            a = min(b * rng.getrandbits(rng.randint(1, 60)) + rng.choice([0, 1]), 2**254)
        wi.divide(wi.to_digits(a), wi.to_digits(b), q, work)
        assert wi.from_digits(q) == a // b, (a, b)
    # divisors whose normalised top digits make the quotient digit estimate overshoot; the first is Hacker's
    # Delight's test case for the add-back step (divmnu: u = 7fffffff 80000000 0 0, v = 80000000 0 1)
    add_back = (0x7FFFFFFF << 96 | 0x80000000 << 64, 0x80000000 << 64 | 1)
    for a, b in [
        add_back,
        (2**191, 2**95 + 1),
        (2**223 - 1, 2**127 - 2**95 + 1),
        (2**128 * 0xFFFFFFFF, 2**64 + 2**32 - 1),
    ]:
        wi.divide(wi.to_digits(a), wi.to_digits(b), q, work)
        assert wi.from_digits(q) == a // b
    for k in (0, 31, 32, 96, 126, 190, 250):
        assert wi.below_pow2(wi.to_digits(2**k - 1), k) and not wi.below_pow2(wi.to_digits(2**k), k)
    with pytest.raises(OverflowError, match="int256"):
        wi.to_digits(2**255)
    with pytest.raises(ZeroDivisionError):
        wi.divide(wi.to_digits(5), wi.to_digits(0), q, work)
