"""A tree's starting rows under the logistic loss, every party's in one compiled call: gradients, the votes' refitted
values and the fixed-point limbs, written into the kernels' own buffers.

Why: at a tree's start the simulator made each party's gradients (``objective.gradients``), its votes' values
(``LocalParty.vote_gradients``), its fixed-point rows (``FixedRows.of``) and then copied them into the kernels'
buffers (``PartyKernels.tree``): fourteen numpy passes and seven copies per party on one thread, 0.4 s of a9a's 500
trees while the other core waited. Here one pass per row does all of it, the parties split over the cores.

The floats are the same: ``e^-|x|`` is numpy's own (``np.exp`` may differ from the compiled one in the last bit),
written into a buffer by the same ufuncs, and the rest is the same IEEE operations in the same order
(``objective.sigmoid``, ``p - y``, ``p * (1 - p)``, times w*, ``rint(v * ONE)`` split into limbs by
``histogram.value_limbs``, as ``FixedRows.of`` does). Tests compare every array with the numpy path's. Only the
plain case runs here (the logistic loss, hessians as hessians, no privacy, no attack this tree, no observer that may
keep the gradients); the rest goes the old way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit, prange

from fgbdt_chain.node.kernels.histogram import value_limbs
from fgbdt_chain.node.kernels.party_kernels import Arrays


@njit(cache=True, nogil=True)
def _party_rows(  # pragma: no cover - compiled
    p: int,
    e: Arrays,
    score: Arrays,
    y: Arrays,
    w: Arrays,
    has_w: bool,
    g: Arrays,
    h: Arrays,
    g_vote: Arrays,
    h_vote: Arrays,
    g_hi: Arrays,
    g_lo: Arrays,
    h_hi: Arrays,
    h_lo: Arrays,
    count: Arrays,
    bound: np.ndarray,
) -> None:
    """Party ``p``'s rows; ``bound[p]`` becomes the largest high limb's magnitude, or -1 where a value is not finite
    or not below 2^80 in fixed point (the caller goes the old way, which raises)."""
    ep, xp, yp, wp = e[p], score[p], y[p], w[p]
    gp, hp, gvp, hvp = g[p], h[p], g_vote[p], h_vote[p]
    ghi, glo, hhi, hlo, cnt = g_hi[p], g_lo[p], h_hi[p], h_lo[p], count[p]
    top = 0
    for i in range(xp.shape[0]):
        ei = ep[i]
        pr = 1.0 / (1.0 + ei) if xp[i] >= 0 else ei / (1.0 + ei)
        gi = pr - yp[i]
        hi_ = pr * (1.0 - pr)
        gp[i] = gi
        hp[i] = hi_
        if has_w:
            gvp[i] = gi * wp[i]
            hvp[i] = hi_ * wp[i]
        else:
            gvp[i] = gi
            hvp[i] = hi_
        cnt[i] = 1
        ok_g, ghi[i], glo[i] = value_limbs(gi)
        ok_h, hhi[i], hlo[i] = value_limbs(hi_)
        if not (ok_g and ok_h):
            bound[p] = -1
            return
        top = max(top, abs(ghi[i]), abs(hhi[i]))
    bound[p] = top


@njit(cache=True, nogil=True, parallel=True)
def _rows_parallel(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    e: Arrays,
    score: Arrays,
    y: Arrays,
    w: Arrays,
    has_w: bool,
    g: Arrays,
    h: Arrays,
    g_vote: Arrays,
    h_vote: Arrays,
    g_hi: Arrays,
    g_lo: Arrays,
    h_hi: Arrays,
    h_lo: Arrays,
    count: Arrays,
    bound: np.ndarray,
) -> None:
    for b in prange(block_start.shape[0] - 1):
        for t in range(block_start[b], block_start[b + 1]):
            _party_rows(
                block_party[t], e, score, y, w, has_w, g, h, g_vote, h_vote, g_hi, g_lo, h_hi, h_lo, count, bound
            )


@njit(cache=True, nogil=True)
def _rows_serial(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    e: Arrays,
    score: Arrays,
    y: Arrays,
    w: Arrays,
    has_w: bool,
    g: Arrays,
    h: Arrays,
    g_vote: Arrays,
    h_vote: Arrays,
    g_hi: Arrays,
    g_lo: Arrays,
    h_hi: Arrays,
    h_lo: Arrays,
    count: Arrays,
    bound: np.ndarray,
) -> None:
    for b in range(block_start.shape[0] - 1):
        for t in range(block_start[b], block_start[b + 1]):
            _party_rows(
                block_party[t], e, score, y, w, has_w, g, h, g_vote, h_vote, g_hi, g_lo, h_hi, h_lo, count, bound
            )


def exp_neg_abs_into(out: Sequence[np.ndarray], scores: Sequence[np.ndarray]) -> None:
    """``np.exp(-np.abs(score))`` of every party into ``out``, by the same ufuncs (so the same floats)."""
    for buf, x in zip(out, scores, strict=True):
        np.abs(x, out=buf)
        np.negative(buf, out=buf)
        np.exp(buf, out=buf)
