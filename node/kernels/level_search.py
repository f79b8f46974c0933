"""The level's exact sums and the thresholds that may be a node's best split, compiled: the first steps of the
contract's resolution of a level in the simulator, shared by the compiled resolution (``node.kernels.resolve_kernel``)
and the one on Python integers (``node.protocol.resolve``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fgbdt_chain.node.kernels.limbs import LIMB


@njit(cache=True, nogil=True)
def _normalise(hi: int, lo: int) -> tuple[int, int]:  # pragma: no cover - compiled
    """The same value ``hi * 2**32 + lo`` with ``0 <= lo < 2**32`` (lo sums are non-negative), so that a value
    is zero exactly when both limbs are."""
    return hi + (lo >> 32), lo & 0xFFFFFFFF


@njit(cache=True, nogil=True)
def _level_sums(  # pragma: no cover - compiled
    g_hi: np.ndarray, g_lo: np.ndarray, h_hi: np.ndarray, h_lo: np.ndarray, n: np.ndarray, min_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Running sums, aggregated totals and the thresholds ``best_split`` evaluates, for a level (inputs
    (M, K, C, B)).

    Returns ``run`` (5, M, K, C, B): every party's sums of slots ``0..t`` (planes g hi, g lo, h hi, h lo, n);
    ``tot`` (5, K, C): the aggregated totals of every candidate; and, in ``best_split``'s scan order (node,
    candidate, threshold), every threshold it would evaluate, ``cand`` (Q, 3) as (node, candidate, threshold),
    with the aggregated left sums there, ``left`` (5, Q). ``best_split`` skips a threshold whose aggregated slot is
    all zero (same sums as the previous one) and one that leaves fewer than ``min_rows`` rows on a side; the row
    counts are exact integers here, so the filter is the same. Aggregated limbs are normalised.
    """
    m, k, c, b = n.shape
    run = np.empty((5, m, k, c, b), dtype=np.int64)
    tot = np.zeros((5, k, c), dtype=np.int64)
    cand = np.empty((k * c * b, 3), dtype=np.int64)
    left = np.empty((5, k * c * b), dtype=np.int64)
    q = 0
    for j in range(k):
        for r in range(c):
            for p in range(m):
                a0, a1, a2, a3, a4 = 0, 0, 0, 0, 0
                for t in range(b):
                    a0 += g_hi[p, j, r, t]
                    a1 += g_lo[p, j, r, t]
                    a2 += h_hi[p, j, r, t]
                    a3 += h_lo[p, j, r, t]
                    a4 += n[p, j, r, t]
                    run[0, p, j, r, t] = a0
                    run[1, p, j, r, t] = a1
                    run[2, p, j, r, t] = a2
                    run[3, p, j, r, t] = a3
                    run[4, p, j, r, t] = a4
            n_tot = 0
            for p in range(m):
                for z in range(5):
                    tot[z, j, r] += run[z, p, j, r, b - 1]
                n_tot += run[4, p, j, r, b - 1]
            tot[0, j, r], tot[1, j, r] = _normalise(tot[0, j, r], tot[1, j, r])
            tot[2, j, r], tot[3, j, r] = _normalise(tot[2, j, r], tot[3, j, r])
            for t in range(b - 1):
                s0, s1, s2, s3, s4 = 0, 0, 0, 0, 0
                for p in range(m):
                    s0 += g_hi[p, j, r, t]
                    s1 += g_lo[p, j, r, t]
                    s2 += h_hi[p, j, r, t]
                    s3 += h_lo[p, j, r, t]
                    s4 += n[p, j, r, t]
                s0, s1 = _normalise(s0, s1)
                s2, s3 = _normalise(s2, s3)
                if s0 == 0 and s1 == 0 and s2 == 0 and s3 == 0 and s4 == 0:
                    continue
                n_left = 0
                for p in range(m):
                    n_left += run[4, p, j, r, t]
                if n_left < min_rows or n_tot - n_left < min_rows:
                    continue
                cand[q, 0], cand[q, 1], cand[q, 2] = j, r, t
                for z in range(5):
                    acc = 0
                    for p in range(m):
                        acc += run[z, p, j, r, t]
                    left[z, q] = acc
                left[0, q], left[1, q] = _normalise(left[0, q], left[1, q])
                left[2, q], left[3, q] = _normalise(left[2, q], left[3, q])
                q += 1
    return run, tot, cand[:q], left[:, :q]


_ROUNDING = 2.0**-53
"""Unit roundoff of float64: each operation below errs by at most this much, relatively."""
_CONDITIONED = 1e-6
"""Largest relative error of a float denominator ``h + lambda`` for which its side's float score is trusted; a side
with a worse one (a near-zero or cancelling denominator) sends its threshold to the exact search."""


@njit(cache=True, nogil=True)
def _float_side(g: float, h: float, lam: float) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """Float ``side_score`` of one side, a bound on its distance to the exact one, and whether the bound holds (a
    well-conditioned positive denominator).

    ``g`` and ``h`` carry two roundings at most (``_contenders``: a high limb beyond 2^53 rounds, then the sum) and
    ``lam`` one; the sum ``h + lam`` adds one, so its absolute error is below ``3u (|h| + |lam|)`` (u the unit
    roundoff, second-order terms dropped), a relative error ``rho`` of the computed denominator. ``g * g / d`` then
    errs relatively by at most ``(1 + 2u)^2 (1 + u)^2 (1 + rho) / (1 - rho) - 1 < 7u + 3 rho`` for ``rho <= 1e-6``,
    and the exact score is the floor of the true quotient, one unit below at most. The bound doubles all that."""
    d = h + lam
    if not d > 0:
        return 0.0, 0.0, False
    rho = 3.0 * _ROUNDING * (abs(h) + abs(lam)) / d
    if rho > _CONDITIONED:
        return 0.0, 0.0, False
    score = g * g / d
    return score, 2.0 * ((7.0 * _ROUNDING + 3.0 * rho) * score + 1.0), True


@njit(cache=True, nogil=True)
def _contender_mask(  # pragma: no cover - compiled
    tot: np.ndarray, cand: np.ndarray, left: np.ndarray, num_nodes: int, lam: float, count_mode: bool, one: float
) -> np.ndarray:
    """``_contenders`` as a mask over ``cand``."""
    q_all = cand.shape[0]
    gain = np.empty(q_all)
    err = np.empty(q_all)
    trusted = np.empty(q_all, dtype=np.bool_)
    floor = np.full(num_nodes, -np.inf)
    limb = float(LIMB)
    for q in range(q_all):
        j, r = cand[q, 0], cand[q, 1]
        g_l = float(left[0, q]) * limb + float(left[1, q])
        g_r = float(tot[0, j, r] - left[0, q]) * limb + float(tot[1, j, r] - left[1, q])
        if count_mode:
            h_l = float(left[4, q]) * one
            h_r = float(tot[4, j, r] - left[4, q]) * one
        else:
            h_l = float(left[2, q]) * limb + float(left[3, q])
            h_r = float(tot[2, j, r] - left[2, q]) * limb + float(tot[3, j, r] - left[3, q])
        s_l, e_l, ok_l = _float_side(g_l, h_l, lam)
        s_r, e_r, ok_r = _float_side(g_r, h_r, lam)
        gain[q], err[q], trusted[q] = s_l + s_r, e_l + e_r, ok_l and ok_r
        if trusted[q] and gain[q] - err[q] > floor[j]:
            floor[j] = gain[q] - err[q]
    keep = np.empty(q_all, dtype=np.bool_)
    for q in range(q_all):
        keep[q] = not trusted[q] or gain[q] + err[q] >= floor[cand[q, 0]]
    return keep
