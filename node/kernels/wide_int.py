"""256-bit integers for compiled kernels: what the contract's int256 arithmetic needs where int64 does not reach.

Why: the contract side's exact arithmetic (split Shapley values over credited sums, ``ledger.spec.reference``) squares
sums of order 2^80 and divides them, so it ran on Python integers, about 12 microseconds a split. These helpers let a
numba kernel do the same integer operations on fixed-width values.

A value is eight 32-bit digits, least significant first, each held in a ``uint64`` (so that a product of two digits
and a carry fit), two's complement over 256 bits. Every function writes its result into an array the caller owns:
the kernels allocate their scratch once per call, not per operation. Unsigned operations take non-negative values;
callers keep every result below 2^255 by bounds they check first (and fall back to Python integers otherwise).
"""

from __future__ import annotations

import numpy as np
from numba import njit

DIGITS = 8
_MASK = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)


@njit(cache=True, nogil=True, inline="always")
def set_i64(out: np.ndarray, x: int) -> None:  # pragma: no cover - compiled
    """``out = x`` for an int64 ``x``, sign-extended."""
    ux = np.uint64(x)  # the same 64 bits
    out[0] = ux & _MASK
    out[1] = (ux >> _SHIFT) & _MASK
    fill = _MASK if x < 0 else np.uint64(0)
    for i in range(2, DIGITS):
        out[i] = fill


@njit(cache=True, nogil=True, inline="always")
def add(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = a + b`` modulo 2^256 (``out`` may be ``a`` or ``b``)."""
    carry = np.uint64(0)
    for i in range(DIGITS):
        s = a[i] + b[i] + carry
        out[i] = s & _MASK
        carry = s >> _SHIFT


@njit(cache=True, nogil=True, inline="always")
def negate(a: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = -a`` modulo 2^256 (``out`` may be ``a``)."""
    carry = np.uint64(1)
    for i in range(DIGITS):
        s = (a[i] ^ _MASK) + carry
        out[i] = s & _MASK
        carry = s >> _SHIFT


@njit(cache=True, nogil=True, inline="always")
def sub(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = a - b`` modulo 2^256 (``out`` may be ``a`` or ``b``)."""
    carry = np.uint64(1)
    for i in range(DIGITS):
        s = a[i] + (b[i] ^ _MASK) + carry
        out[i] = s & _MASK
        carry = s >> _SHIFT


@njit(cache=True, nogil=True, inline="always")
def is_negative(a: np.ndarray) -> bool:  # pragma: no cover - compiled
    return (a[DIGITS - 1] >> np.uint64(31)) != 0


@njit(cache=True, nogil=True, inline="always")
def is_zero(a: np.ndarray) -> bool:  # pragma: no cover - compiled
    for i in range(DIGITS):  # noqa: SIM110 - a loop numba compiles, not a generator
        if a[i] != 0:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def magnitude(a: np.ndarray, out: np.ndarray) -> bool:  # pragma: no cover - compiled
    """``out = |a|``; returns whether ``a`` was negative."""
    if is_negative(a):
        negate(a, out)
        return True
    for i in range(DIGITS):
        out[i] = a[i]
    return False


@njit(cache=True, nogil=True, inline="always")
def below_pow2(a: np.ndarray, k: int) -> bool:  # pragma: no cover - compiled
    """Whether a non-negative value is below 2^k (0 <= k < 256)."""
    top = k // 32
    for i in range(DIGITS - 1, top, -1):
        if a[i] != 0:
            return False
    return (a[top] >> np.uint64(k % 32)) == 0


@njit(cache=True, nogil=True, inline="always")
def multiply(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = a * b`` for non-negative values whose product is below 2^256 (the caller's bound); ``out`` must not
    be ``a`` or ``b``. Schoolbook over ``b``'s significant digits only: the kernels multiply by small values (a
    coefficient, a credit, ``ONE``) far more often than by wide ones."""
    for i in range(DIGITS):
        out[i] = 0
    nb = DIGITS
    while nb > 0 and b[nb - 1] == 0:
        nb -= 1
    for i in range(DIGITS):
        ai = a[i]
        if ai == 0:
            continue
        carry = np.uint64(0)
        for j in range(min(nb, DIGITS - i)):
            t = ai * b[j] + out[i + j] + carry  # < 2^64: (2^32 - 1)^2 + 2 (2^32 - 1)
            out[i + j] = t & _MASK
            carry = t >> _SHIFT
        if i + nb < DIGITS:
            out[i + nb] = carry  # no row before this one reached that digit


@njit(cache=True, nogil=True)
def divide(u: np.ndarray, v: np.ndarray, q: np.ndarray, work: np.ndarray) -> None:  # pragma: no cover - compiled
    """``q = u // v`` for non-negative ``u`` and positive ``v`` (Knuth's algorithm D on 32-bit digits, as in Hacker's
    Delight's ``divmnu``). ``work`` is scratch of at least ``2 * DIGITS + 1`` digits."""
    for i in range(DIGITS):
        q[i] = 0
    n = DIGITS
    while n > 0 and v[n - 1] == 0:
        n -= 1
    m = DIGITS
    while m > 0 and u[m - 1] == 0:
        m -= 1
    if n == 0:
        raise ZeroDivisionError("division by zero")
    if m < n:
        return
    base = np.uint64(1) << _SHIFT
    if n == 1:
        d = v[0]
        rem = np.uint64(0)
        for j in range(m - 1, -1, -1):
            cur = (rem << _SHIFT) | u[j]
            q[j] = cur // d
            rem = cur - q[j] * d
        return
    # normalise: the divisor's top digit gets its top bit set
    s = np.uint64(0)
    top = v[n - 1]
    while top & np.uint64(0x80000000) == 0:
        top <<= np.uint64(1)
        s += np.uint64(1)
    vn = work[:DIGITS]
    un = work[DIGITS : 2 * DIGITS + 1]
    for i in range(n - 1, 0, -1):
        vn[i] = ((v[i] << s) | ((v[i - 1] >> (_SHIFT - s)) if s > 0 else np.uint64(0))) & _MASK
    vn[0] = (v[0] << s) & _MASK
    un[m] = (u[m - 1] >> (_SHIFT - s)) if s > 0 else np.uint64(0)
    for i in range(m - 1, 0, -1):
        un[i] = ((u[i] << s) | ((u[i - 1] >> (_SHIFT - s)) if s > 0 else np.uint64(0))) & _MASK
    un[0] = (u[0] << s) & _MASK
    for j in range(m - n, -1, -1):
        num = (un[j + n] << _SHIFT) | un[j + n - 1]
        qhat = num // vn[n - 1]
        rhat = num - qhat * vn[n - 1]
        while qhat >= base or qhat * vn[n - 2] > ((rhat << _SHIFT) | un[j + n - 2]):
            qhat -= np.uint64(1)
            rhat += vn[n - 1]
            if rhat >= base:
                break
        # multiply and subtract: un[j .. j + n] -= qhat * vn
        borrow = np.int64(0)
        carry = np.uint64(0)
        for i in range(n):
            p = qhat * vn[i] + carry
            carry = p >> _SHIFT
            t = np.int64(un[i + j]) - np.int64(p & _MASK) + borrow
            un[i + j] = np.uint64(t) & _MASK
            borrow = np.int64(-1) if t < 0 else np.int64(0)
        t = np.int64(un[j + n]) - np.int64(carry) + borrow
        un[j + n] = np.uint64(t) & _MASK
        if t < 0:  # qhat was one too large: add the divisor back
            qhat -= np.uint64(1)
            c = np.uint64(0)
            for i in range(n):
                s2 = un[i + j] + vn[i] + c
                un[i + j] = s2 & _MASK
                c = s2 >> _SHIFT
            un[j + n] = (un[j + n] + c) & _MASK
        q[j] = qhat


def to_digits(x: int) -> np.ndarray:
    """A Python integer in [-2^255, 2^255) as the eight digits the kernels take."""
    if not -(2**255) <= x < 2**255:
        raise OverflowError(f"{x} is outside int256")
    return np.frombuffer((x % 2**256).to_bytes(32, "little"), dtype="<u4").astype(np.uint64)


def from_digits(digits: np.ndarray) -> int:
    """The Python integer of eight digits (two's complement)."""
    return int.from_bytes(np.asarray(digits, dtype="<u4").tobytes(), "little", signed=True)
