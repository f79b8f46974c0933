"""The split Shapley values of a whole level's splits in one compiled call, on 256-bit integers
(``node.kernels.wide_int``).

Why: ``node.protocol.resolve`` computed each split's credited sides and Shapley values (``ref.credited_sides``,
``ref.split_shapley_fast``) on Python integers, about 20 microseconds a split at M = 4 and the largest piece of the
contract side's time in ``simulate``. Here the same integer expressions run compiled: each party's credited sides
(``value * credit / ONE`` truncated toward zero, counts times ONE in count mode), every coalition's sums by the same
recurrence (each coalition is its rest plus its lowest member, the hessian sums starting from lambda), each
coalition's utility ``gL^2 // dL + gR^2 // dR`` (0 for a side whose denominator is not positive), each party's
accumulator ``sum_mask coef[p][mask] * u(mask)`` and ``phi_p`` its quotient by ``M!`` truncated toward zero. Integers,
so the same values exactly.

Where the Python path could raise (an int256 overflow the contract reverts on) or take ``ref.split_shapley``'s
checked loop, the kernel leaves the split to it: a split is done here only when every party's sides are below 2^96
before crediting, every credited gradient sum over the parties below 2^126 (so its square is below 2^252), every
hessian sum and lambda below 2^250 and every utility below 2^190 (so no accumulator reaches 2^255 at M <= 16).
"""

from __future__ import annotations

from functools import cache, lru_cache

import numpy as np
from numba import njit

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.shapley_estimate import EXACT_MAX_PARTIES
from fgbdt_chain.node.kernels import wide_int as wi

_D = wi.DIGITS


@njit(cache=True, nogil=True, inline="always")
def _from_limbs(hi: int, lo: int, out: np.ndarray, tmp: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = hi * 2^32 + lo`` (int64 limbs, ``lo`` not necessarily below 2^32)."""
    wi.set_i64(tmp, hi)
    for i in range(_D - 1, 0, -1):
        out[i] = tmp[i - 1]
    out[0] = 0
    wi.set_i64(tmp, lo)
    wi.add(out, tmp, out)


@njit(cache=True, nogil=True)
def _credited(  # pragma: no cover - compiled
    value: np.ndarray, credit: np.ndarray, one: np.ndarray, out: np.ndarray, s: np.ndarray
) -> None:
    """``out = value * credit / ONE`` truncated toward zero (``ref.credited``); ``credit`` non-negative. ``s`` is
    scratch of shape (3, 2 * DIGITS + 1)."""
    negative = wi.magnitude(value, s[0])
    wi.multiply(s[0], credit, s[1])
    wi.divide(s[1], one, out, s[2])
    if negative:
        wi.negate(out, out)


@njit(cache=True, nogil=True)
def _side(g: np.ndarray, d: np.ndarray, out: np.ndarray, s: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = g * g // d``, 0 when ``d <= 0`` (``ref.side_score``); ``s`` scratch as for ``_credited``."""
    if wi.is_negative(d) or wi.is_zero(d):
        for i in range(_D):
            out[i] = 0
        return
    wi.magnitude(g, s[0])
    wi.multiply(s[0], s[0], s[1])
    wi.divide(s[1], d, out, s[2])


@njit(cache=True, nogil=True)
def level_shapley(  # pragma: no cover - compiled
    at: np.ndarray,
    whole: np.ndarray,
    credit: np.ndarray,
    neutral: bool,
    count_mode: bool,
    lam: np.ndarray,
    one: np.ndarray,
    steps: np.ndarray,
    coef: np.ndarray,
    total: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per split ``s`` (the last axis of ``at`` and ``whole``, each (5, M, S): every party's limbs of g and h and its
    count, at the split's threshold and over the whole node): the credited gain (the grand coalition's utility),
    every party's phi, as digits (S, DIGITS) and (S, M, DIGITS), and whether the split was done here (else the
    caller computes it). ``credit`` is (M, 3, DIGITS): each party's g, h and n multipliers."""
    m, splits = at.shape[1], at.shape[2]
    size = 1 << m
    gain = np.zeros((splits, _D), dtype=np.uint64)
    phi = np.zeros((splits, m, _D), dtype=np.uint64)
    done = np.zeros(splits, dtype=np.bool_)
    sides = np.zeros((m, 4, _D), dtype=np.uint64)  # gL, hL, gR, hR of each party, credited
    raw = np.zeros((4, _D), dtype=np.uint64)
    coal = np.zeros((4, size, _D), dtype=np.uint64)  # gL, dL, gR, dR of each coalition
    util = np.zeros((size, _D), dtype=np.uint64)
    acc = np.zeros(_D, dtype=np.uint64)
    term = np.zeros(_D, dtype=np.uint64)
    tmp = np.zeros(_D, dtype=np.uint64)
    mag = np.zeros(_D, dtype=np.uint64)
    cdig = np.zeros(_D, dtype=np.uint64)
    s = np.zeros((3, 2 * _D + 1), dtype=np.uint64)
    total_d = np.zeros(_D, dtype=np.uint64)
    wi.set_i64(total_d, total)
    for sp in range(splits):
        ok = True
        for p in range(m):
            _from_limbs(at[0, p, sp], at[1, p, sp], raw[0], tmp)  # gL
            _from_limbs(whole[0, p, sp], whole[1, p, sp], raw[2], tmp)
            wi.sub(raw[2], raw[0], raw[2])  # gR = whole - left
            n_l, n_r = at[4, p, sp], whole[4, p, sp] - at[4, p, sp]
            if count_mode:
                if n_l < 0 or n_r < 0:
                    ok = False
                    break
                wi.set_i64(tmp, n_l)
                wi.multiply(tmp, one, raw[1])
                wi.set_i64(tmp, n_r)
                wi.multiply(tmp, one, raw[3])
            else:
                _from_limbs(at[2, p, sp], at[3, p, sp], raw[1], tmp)
                _from_limbs(whole[2, p, sp], whole[3, p, sp], raw[3], tmp)
                wi.sub(raw[3], raw[1], raw[3])
            for q in range(4):
                wi.magnitude(raw[q], mag)
                if not wi.below_pow2(mag, 96):
                    ok = False
            if not ok:
                break
            if neutral:
                for q in range(4):
                    for i in range(_D):
                        sides[p, q, i] = raw[q, i]
            else:
                hq = 2 if count_mode else 1
                _credited(raw[0], credit[p, 0], one, sides[p, 0], s)
                _credited(raw[1], credit[p, hq], one, sides[p, 1], s)
                _credited(raw[2], credit[p, 0], one, sides[p, 2], s)
                _credited(raw[3], credit[p, hq], one, sides[p, 3], s)
        if not ok:
            continue
        # the bounds: sums of magnitudes over the parties
        for q in range(4):
            for i in range(_D):
                acc[i] = 0
            for p in range(m):
                wi.magnitude(sides[p, q], mag)
                wi.add(acc, mag, acc)
            if not wi.below_pow2(acc, 126 if q % 2 == 0 else 250):
                ok = False
        wi.magnitude(lam, mag)
        if not wi.below_pow2(mag, 250):
            ok = False
        if not ok:
            continue
        for st in range(steps.shape[0]):
            mask, i, rest = steps[st, 0], steps[st, 1], steps[st, 2]
            for q in range(4):
                if rest == 0:
                    if q % 2 == 0:
                        for k in range(_D):
                            coal[q, mask, k] = sides[i, q, k]
                    else:
                        wi.add(lam, sides[i, q], coal[q, mask])
                else:
                    wi.add(coal[q, rest], sides[i, q], coal[q, mask])
            _side(coal[0, mask], coal[1, mask], util[mask], s)
            _side(coal[2, mask], coal[3, mask], tmp, s)
            wi.add(util[mask], tmp, util[mask])
            if not wi.below_pow2(util[mask], 190):
                ok = False
                break
        if not ok:
            continue
        for p in range(m):
            for k in range(_D):
                acc[k] = 0
            for mask in range(1, size):
                c = coef[p, mask]
                if c == 0:
                    continue
                wi.set_i64(cdig, c if c > 0 else -c)
                wi.multiply(util[mask], cdig, term)
                if c > 0:
                    wi.add(acc, term, acc)
                else:
                    wi.sub(acc, term, acc)
            negative = wi.magnitude(acc, mag)
            wi.divide(mag, total_d, phi[sp, p], s[2])
            if negative:
                wi.negate(phi[sp, p], phi[sp, p])
        for k in range(_D):
            gain[sp, k] = util[size - 1, k]
        done[sp] = True
    return gain, phi, done


@cache
def plan_arrays(m: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``ref._shapley_plan(m)`` as the kernel's arrays: steps (2^M - 1, 3), coefficients (M, 2^M) and M!."""
    steps, coef, total = ref._shapley_plan(m)
    return np.array(steps, dtype=np.int64).reshape(-1, 3), np.array(coef, dtype=np.int64), int(total)


ONE_DIGITS = wi.to_digits(ref.ONE)


def warm_up() -> None:
    """Load (or compile) the kernel on a one-party, one-split level."""
    limbs = np.ones((5, 1, 1), dtype=np.int64)
    steps, coef, total = plan_arrays(1)
    level_shapley(
        limbs, limbs * 2, credit_digits((ref.NEUTRAL,))[0], False, False, ONE_DIGITS, ONE_DIGITS, steps, coef, total
    )


def credit_digits(credits: tuple[ref.Credit, ...]) -> tuple[np.ndarray, bool]:
    """The parties' g, h and n multipliers as digits (M, 3, DIGITS), and whether every one is neutral;
    ``ref.Credit`` holds each in [0, MAX_CREDIT], which the kernel's bounds assume.

    Remembered by the credits' identities, checked: a tree's credit objects come back at every level, and hashing
    their values cost more than the digits (the cache keeps the objects, so their ids are not reused meanwhile)."""
    key = tuple(map(id, credits))
    kept = _CREDITS.get(key)
    if kept is not None and all(a is b for a, b in zip(kept[0], credits, strict=True)):
        return kept[1]
    digits = np.array([[wi.to_digits(v) for v in (c.g, c.h, c.n)] for c in credits], dtype=np.uint64)
    out = digits, all(c == ref.NEUTRAL for c in credits)
    if len(_CREDITS) >= 256:
        _CREDITS.pop(next(iter(_CREDITS)))
    _CREDITS[key] = credits, out
    return out


_CREDITS: dict[tuple[int, ...], tuple[tuple[ref.Credit, ...], tuple[np.ndarray, bool]]] = {}


@lru_cache(maxsize=1024)
def digits_of(value: int) -> np.ndarray:
    """``wi.to_digits``, remembered: a tree's credits and the task's lambda come back at every level."""
    return wi.to_digits(value)


def level_phis(
    at: np.ndarray, whole: np.ndarray, credits: list[ref.Credit], hessian_mode: int, lam: int
) -> list[tuple[int, list[int]] | None]:
    """Each split's (credited gain, phi per party) as ``split_shapley`` over ``ref.credited_sides`` gives them, or
    None where the split is left to those (bounds the kernel does not cover, see the module's docstring, and every
    federation above ``EXACT_MAX_PARTIES``, whose values are estimated, ``ledger.spec.shapley_estimate``)."""
    m, splits = at.shape[1], at.shape[2]
    # credits for another number of parties: the Python path says what is wrong
    if splits == 0 or not 0 < m <= EXACT_MAX_PARTIES or len(credits) != m or not -(2**250) < lam < 2**250:
        return [None] * splits
    digits, neutral = credit_digits(tuple(credits))
    steps, coef, total = plan_arrays(m)
    gain, phi, done = level_shapley(
        np.ascontiguousarray(at, dtype=np.int64),
        np.ascontiguousarray(whole, dtype=np.int64),
        digits,
        neutral,
        hessian_mode == ref.HESSIAN_COUNT,
        digits_of(lam),
        ONE_DIGITS,
        steps,
        coef,
        total,
    )
    gain_bytes = gain.astype("<u4").tobytes()
    phi_bytes = phi.astype("<u4").tobytes()
    width = 4 * wi.DIGITS
    out: list[tuple[int, list[int]] | None] = []
    for sp in range(splits):
        if not done[sp]:
            out.append(None)
            continue
        g = int.from_bytes(gain_bytes[sp * width : (sp + 1) * width], "little", signed=True)
        base = sp * m * width
        out.append(
            (
                g,
                [
                    int.from_bytes(phi_bytes[base + p * width : base + (p + 1) * width], "little", signed=True)
                    for p in range(m)
                ],
            )
        )
    return out
