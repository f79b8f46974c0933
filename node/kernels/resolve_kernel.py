"""The contract's resolution of a whole level in one compiled call, on 256-bit integers (``node.kernels.wide_int``).

Why: ``node.protocol.resolve.resolve_level`` searched each node's split, made its leaves, credited gains, votes' shares
and contributions on Python integers, node by node, and built every ``NodeResult`` as it went: about 20 microseconds a
node, the largest per-level cost left in ``simulate`` once the kernels ran on every core. Here the
same integer expressions run compiled over every node of the level, and their results stay digits
(``node.protocol.resolved_level.ResolvedLevel``), turned into Python integers only where someone reads them: a tree
needs a split's gain and a leaf's value, the contributions only their sums per party.

The expressions are ``ledger.spec.reference``'s, in its order: ``split_gain`` of each threshold the float filter left
(``resolve._contenders``) in scan order, a strictly larger gain replacing the best, the best against ``side_score`` of
its candidate's totals, ``leaf_value`` of a leaf's totals (inherited from the parent's split, a root's from its
candidate 0) or of a last level's two sides, the split Shapley values of ``node.kernels.shapley_kernel``, kappa (the
credited
gain where a party voted for the split feature) and ``contribution`` (``alpha * kappa / ONE + phi``, truncated toward
zero). Integers, so the same values exactly; tests compare every field with ``resolve_node``'s.

Where a value could leave the bounds below, the kernel says so and the caller resolves the level on Python integers,
as it always did, which also raises the reference's errors where the contract reverts: every node's sums and totals
below 2^120 in magnitude (so a square is below 2^240), the learning rate below 2^120, lambda below 2^250, alpha below
2^64 (a credited gain is below 2^190, the Shapley kernel's bound), every Shapley value, kappa and contribution below
2^240 and at most 2^14 nodes (so their sums over the level stay below 2^255), counts non-negative.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fgbdt_chain.ledger.spec.fixed_point import ONE_FLOAT
from fgbdt_chain.node.kernels import wide_int as wi
from fgbdt_chain.node.kernels.level_search import _contender_mask, _level_sums
from fgbdt_chain.node.kernels.shapley_kernel import _from_limbs, _side, level_shapley

_D = wi.DIGITS

# the wide values of a node (``vals``' second axis)
V_GAIN, V_G_LEFT, V_H_LEFT, V_G_RIGHT, V_H_RIGHT = 0, 1, 2, 3, 4
V_LEAF, V_LEFT_LEAF, V_RIGHT_LEAF, V_CREDITED_GAIN, V_TOTAL_G, V_TOTAL_H = 5, 6, 7, 8, 9, 10
NUM_VALUES = 11
# the int64 fields of a node (``ints``' second axis)
I_RANK, I_FEATURE, I_THRESHOLD, I_N_LEFT, I_N_RIGHT, I_N = 0, 1, 2, 3, 4, 5
NUM_INTS = 6
# the per-party sums over the level (``sums``' first axis)
S_PHI, S_KAPPA, S_CONTRIBUTION = 0, 1, 2

LevelArrays = tuple[
    bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]
"""``resolve_arrays``' results: ok, is_split, ints, vals, phi, contribution, sums, the children's g and h and
counts, and what training reads."""

MAX_NODES = 1 << 14
"""Most nodes a level may have for the compiled path (their sums must stay below 2^255)."""


@njit(cache=True, nogil=True)
def _small(a: np.ndarray, bits: int, mag: np.ndarray) -> bool:  # pragma: no cover - compiled
    """Whether ``|a| < 2^bits``."""
    wi.magnitude(a, mag)
    return wi.below_pow2(mag, bits)


@njit(cache=True, nogil=True)
def _copy(src: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    for i in range(_D):
        out[i] = src[i]


@njit(cache=True, nogil=True)
def _load(hi: int, lo: int, out: np.ndarray, tmp: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = hi * 2^32 + lo`` (``shapley_kernel._from_limbs``), called, not inlined, as ``_small`` and ``_copy``
    are: the resolution uses them at forty places, and inlining every one made the first compilation from an empty
    cache 6 s longer (``resolve.warm_up`` 20.2 -> 14.3 s) for no measurable speed (80 us a level either way)."""
    _from_limbs(hi, lo, out, tmp)


@njit(cache=True, nogil=True)
def _hessian(h: np.ndarray, n: int, count_mode: bool, one: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    """``ref.hessian_of``: the hessian sum, or the count times ONE (``n`` non-negative: the caller checks)."""
    if count_mode:
        tmp = np.zeros(_D, dtype=np.uint64)
        wi.set_i64(tmp, n)
        wi.multiply(tmp, one, out)
    else:
        _copy(h, out)


@njit(cache=True, nogil=True)
def _side_score(  # pragma: no cover - compiled
    g: np.ndarray, hess: np.ndarray, lam: np.ndarray, out: np.ndarray, d: np.ndarray, s: np.ndarray
) -> None:
    """``ref.side_score``: ``g^2 // (h + lambda)``, 0 where the denominator is not positive."""
    wi.add(hess, lam, d)
    _side(g, d, out, s)


@njit(cache=True, nogil=True)
def _leaf_value(  # pragma: no cover - compiled
    g: np.ndarray, hess: np.ndarray, lam: np.ndarray, lr: np.ndarray, out: np.ndarray, s: np.ndarray
) -> None:
    """``ref.leaf_value``: ``-g * lr / (h + lambda)`` truncated toward zero, 0 where the denominator is not
    positive (``|g|, |lr| < 2^120``, so the product is below 2^240)."""
    d = np.zeros(_D, dtype=np.uint64)
    wi.add(hess, lam, d)
    if wi.is_negative(d) or wi.is_zero(d):
        for i in range(_D):
            out[i] = 0
        return
    a = np.zeros(_D, dtype=np.uint64)
    b = np.zeros(_D, dtype=np.uint64)
    neg_g = wi.magnitude(g, a)
    neg_lr = wi.magnitude(lr, b)
    wi.multiply(a, b, s[1])
    wi.divide(s[1], d, out, s[2])
    if neg_g == neg_lr and not wi.is_zero(out):  # -g * lr is negative: g and lr of one sign
        wi.negate(out, out)


@njit(cache=True, nogil=True)
def _greater(a: np.ndarray, b: np.ndarray, tmp: np.ndarray) -> bool:  # pragma: no cover - compiled
    """``a > b`` for values below 2^254 in magnitude (so that ``a - b`` does not wrap)."""
    wi.sub(a, b, tmp)
    return not wi.is_negative(tmp) and not wi.is_zero(tmp)


@njit(cache=True, nogil=True)
def resolve_arrays(  # pragma: no cover - compiled
    g_hi: np.ndarray,
    g_lo: np.ndarray,
    h_hi: np.ndarray,
    h_lo: np.ndarray,
    n: np.ndarray,
    min_rows: int,
    features: np.ndarray,
    votes: np.ndarray,
    inherited_has: np.ndarray,
    inherited_gh: np.ndarray,
    inherited_n: np.ndarray,
    last_level: bool,
    count_mode: bool,
    lam_float: float,
    lam: np.ndarray,
    lr: np.ndarray,
    alpha: np.ndarray,
    one: np.ndarray,
    credit: np.ndarray,
    neutral: bool,
    steps: np.ndarray,
    coef: np.ndarray,
    total: int,
) -> LevelArrays:
    """The level's resolution (module docstring). Inputs: the parties' candidate sums as limbs (each (M, K, C, B),
    ``node.protocol.resolve.FixedLevel``), the candidates' features (K, C), the votes (K, M), the inherited totals (a
    flag, g and h as digits (K, 2, DIGITS), the count), and the task's constants (lambda also as a float, for the
    contenders' filter) as digits. The level's sums and the thresholds that may win are ``node.kernels.level_search``'s.

    Returns ``ok`` (False: a bound does not hold, nothing else is meaningful), whether each node splits (K,), its
    int64 fields ``ints`` (K, NUM_INTS), its wide values ``vals`` (K, NUM_VALUES, DIGITS), every party's phi and
    contribution at each node (K, M, DIGITS; zero at a leaf), the per-party sums of phi, kappa and contribution
    over the level (3, M, DIGITS), the next level's inherited totals: each split's left then right child's g
    and h (2S, 2, DIGITS) and count (2S,), and what training reads, in the order ``ResolvedLevel`` takes it: per
    node its split's gain or its leaf value, at the last level each split's two children's leaf values, and the
    sums (K + 2S or K, plus 3M, DIGITS)."""
    run, tot, cand_all, left_all = _level_sums(g_hi, g_lo, h_hi, h_lo, n, min_rows)
    keep = np.flatnonzero(_contender_mask(tot, cand_all, left_all, features.shape[0], lam_float, count_mode, ONE_FLOAT))
    cand = cand_all[keep]
    left = left_all[:, keep]
    m, k, b = run.shape[1], features.shape[0], run.shape[4]
    is_split = np.zeros(k, dtype=np.bool_)
    ints = np.zeros((k, NUM_INTS), dtype=np.int64)
    vals = np.zeros((k, NUM_VALUES, _D), dtype=np.uint64)
    phi_out = np.zeros((k, m, _D), dtype=np.uint64)
    contrib = np.zeros((k, m, _D), dtype=np.uint64)
    sums = np.zeros((3, m, _D), dtype=np.uint64)
    mag = np.zeros(_D, dtype=np.uint64)
    tmp = np.zeros(_D, dtype=np.uint64)
    d = np.zeros(_D, dtype=np.uint64)
    s = np.zeros((3, 2 * _D + 1), dtype=np.uint64)
    child_gh = np.zeros((0, 2, _D), dtype=np.uint64)
    child_n = np.zeros(0, dtype=np.int64)
    read = np.zeros((0, _D), dtype=np.uint64)
    fail = (False, is_split, ints, vals, phi_out, contrib, sums, child_gh, child_n, read)
    if k > MAX_NODES or not _small(lam, 250, mag) or not _small(lr, 120, mag) or not _small(alpha, 64, mag):
        return fail
    g_l = np.zeros(_D, dtype=np.uint64)
    h_l = np.zeros(_D, dtype=np.uint64)
    g_r = np.zeros(_D, dtype=np.uint64)
    h_r = np.zeros(_D, dtype=np.uint64)
    g_t = np.zeros(_D, dtype=np.uint64)
    h_t = np.zeros(_D, dtype=np.uint64)
    hess = np.zeros(_D, dtype=np.uint64)
    gain = np.zeros(_D, dtype=np.uint64)
    score = np.zeros(_D, dtype=np.uint64)
    best = np.zeros((5, _D), dtype=np.uint64)  # gain, gL, hL, gR, hR of the best threshold so far
    q, num_cand = 0, cand.shape[0]
    for j in range(k):
        # the node's totals: inherited from the parent's split, a root's from its candidate 0
        if inherited_has[j]:
            _copy(inherited_gh[j, 0], vals[j, V_TOTAL_G])
            _copy(inherited_gh[j, 1], vals[j, V_TOTAL_H])
            n_node = inherited_n[j]
        else:
            _load(tot[0, j, 0], tot[1, j, 0], vals[j, V_TOTAL_G], tmp)
            _load(tot[2, j, 0], tot[3, j, 0], vals[j, V_TOTAL_H], tmp)
            n_node = tot[4, j, 0]
        ints[j, I_N] = n_node
        if not _small(vals[j, V_TOTAL_G], 120, mag) or not _small(vals[j, V_TOTAL_H], 120, mag):
            return fail
        if count_mode and n_node < 0:
            return fail
        best_r, best_t, best_nl, best_nr = -1, 0, 0, 0
        while q < num_cand and cand[q, 0] == j:
            r, t = cand[q, 1], cand[q, 2]
            _load(left[0, q], left[1, q], g_l, tmp)
            _load(left[2, q], left[3, q], h_l, tmp)
            _load(tot[0, j, r], tot[1, j, r], g_r, tmp)
            _load(tot[2, j, r], tot[3, j, r], h_r, tmp)
            wi.sub(g_r, g_l, g_r)
            wi.sub(h_r, h_l, h_r)
            n_l, n_r = left[4, q], tot[4, j, r] - left[4, q]
            q += 1
            if not (_small(g_l, 120, mag) and _small(h_l, 120, mag) and _small(g_r, 120, mag)):
                return fail
            if not _small(h_r, 120, mag) or (count_mode and (n_l < 0 or n_r < 0)):
                return fail
            _hessian(h_l, n_l, count_mode, one, hess)
            _side_score(g_l, hess, lam, gain, d, s)
            _hessian(h_r, n_r, count_mode, one, hess)
            _side_score(g_r, hess, lam, score, d, s)
            wi.add(gain, score, gain)
            if best_r < 0 or _greater(gain, best[0], tmp):
                best_r, best_t, best_nl, best_nr = r, t, n_l, n_r
                _copy(gain, best[0])
                _copy(g_l, best[1])
                _copy(h_l, best[2])
                _copy(g_r, best[3])
                _copy(h_r, best[4])
        split = False
        if best_r >= 0:
            # the best must beat its candidate's totals' own score (``best_split``)
            _load(tot[0, j, best_r], tot[1, j, best_r], g_t, tmp)
            _load(tot[2, j, best_r], tot[3, j, best_r], h_t, tmp)
            n_t = tot[4, j, best_r]
            if not _small(g_t, 120, mag) or not _small(h_t, 120, mag) or (count_mode and n_t < 0):
                return fail
            _hessian(h_t, n_t, count_mode, one, hess)
            _side_score(g_t, hess, lam, score, d, s)
            split = _greater(best[0], score, tmp)
        if not split:
            _hessian(vals[j, V_TOTAL_H], n_node, count_mode, one, hess)
            _leaf_value(vals[j, V_TOTAL_G], hess, lam, lr, vals[j, V_LEAF], s)
            continue
        is_split[j] = True
        ints[j, I_RANK], ints[j, I_FEATURE], ints[j, I_THRESHOLD] = best_r, features[j, best_r], best_t
        ints[j, I_N_LEFT], ints[j, I_N_RIGHT] = best_nl, best_nr
        for z in range(5):
            _copy(best[z], vals[j, z])  # V_GAIN .. V_H_RIGHT
        if last_level:
            _hessian(best[2], best_nl, count_mode, one, hess)
            _leaf_value(best[1], hess, lam, lr, vals[j, V_LEFT_LEAF], s)
            _hessian(best[4], best_nr, count_mode, one, hess)
            _leaf_value(best[3], hess, lam, lr, vals[j, V_RIGHT_LEAF], s)
    # every split's credited gain and Shapley values (``node.kernels.shapley_kernel``) from the parties' own sums at it
    nodes = np.flatnonzero(is_split)
    splits = nodes.shape[0]
    at = np.empty((5, m, splits), dtype=np.int64)
    whole = np.empty((5, m, splits), dtype=np.int64)
    for sp in range(splits):
        j = nodes[sp]
        r, t = ints[j, I_RANK], ints[j, I_THRESHOLD]
        for z in range(5):
            for p in range(m):
                at[z, p, sp] = run[z, p, j, r, t]
                whole[z, p, sp] = run[z, p, j, r, b - 1]
    child_gh = np.zeros((2 * splits, 2, _D), dtype=np.uint64)
    child_n = np.zeros(2 * splits, dtype=np.int64)
    for sp in range(splits):
        j = nodes[sp]
        for z in range(2):
            _copy(vals[j, V_G_LEFT + z], child_gh[2 * sp, z])
            _copy(vals[j, V_G_RIGHT + z], child_gh[2 * sp + 1, z])
        child_n[2 * sp], child_n[2 * sp + 1] = ints[j, I_N_LEFT], ints[j, I_N_RIGHT]
    gains, phis, done = level_shapley(at, whole, credit, neutral, count_mode, lam, one, steps, coef, total)
    ag = np.zeros(_D, dtype=np.uint64)
    for sp in range(splits):
        if not done[sp]:
            return fail
        j = nodes[sp]
        _copy(gains[sp], vals[j, V_CREDITED_GAIN])
        # alpha * kappa / ONE for a party that voted for the split feature (the same for every such party)
        neg = wi.magnitude(alpha, mag)
        wi.multiply(mag, gains[sp], s[1])  # a credited gain is non-negative and below 2^190
        wi.divide(s[1], one, ag, s[2])
        if neg:
            wi.negate(ag, ag)
        for p in range(m):
            _copy(phis[sp, p], phi_out[j, p])
            _copy(phis[sp, p], contrib[j, p])
            if votes[j, p] == ints[j, I_FEATURE]:
                wi.add(contrib[j, p], ag, contrib[j, p])
                wi.add(sums[S_KAPPA, p], gains[sp], sums[S_KAPPA, p])
            if not _small(phi_out[j, p], 240, mag) or not _small(contrib[j, p], 240, mag):
                return fail
            wi.add(sums[S_PHI, p], phi_out[j, p], sums[S_PHI, p])
            wi.add(sums[S_CONTRIBUTION, p], contrib[j, p], sums[S_CONTRIBUTION, p])
    kids = 2 * splits if last_level else 0
    read = np.empty((k + kids + 3 * m, _D), dtype=np.uint64)
    for j in range(k):
        _copy(vals[j, V_GAIN if is_split[j] else V_LEAF], read[j])
    for sp in range(kids // 2):
        _copy(vals[nodes[sp], V_LEFT_LEAF], read[k + 2 * sp])
        _copy(vals[nodes[sp], V_RIGHT_LEAF], read[k + 2 * sp + 1])
    for z in range(3):
        for p in range(m):
            _copy(sums[z, p], read[k + kids + z * m + p])
    return True, is_split, ints, vals, phi_out, contrib, sums, child_gh, child_n, read
