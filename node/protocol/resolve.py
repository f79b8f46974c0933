"""The contract's resolution of a whole level in the simulator, on exact integer limbs of the quantised sums.

``ledger.spec.reference.resolve_node`` takes every party's quantised histograms as Python integers, sums them bin by bin
and splits them again at the chosen threshold, one node at a time. For a simulated level that conversion and those
sums cost more than the split search itself, so here the parties' exact sums are carried as two int64 limbs
(``q = hi * 2**32 + lo`` with ``0 <= lo < 2**32``, as ``node.kernels.histogram.FixedSums`` builds them), summed over
parties
and bins in compiled code (integer sums, so exact in any order). The rest of the level (the exact split search, the
leaves, the Shapley values, kappa and the contributions) runs compiled on 256-bit integers
(``node.kernels.resolve_kernel``)
and is read through ``node.protocol.resolved_level.ResolvedLevel``, which makes a node's ``NodeResult`` only when read.
Where the kernel's bounds do not hold, the reference's own functions run on Python integers (``best_split``'s search,
``split_shapley_fast``, ``leaf_value``, ``contribution``...). Either way every ``NodeResult`` equals
``resolve_node``'s for the same messages (tests compare them).

The limbs are only used when they provably cannot overflow: every quantised value below ``2**80`` in magnitude
and at most ``2**14`` values summed per limb, so a limb sum stays below ``2**62``; the simulator falls back to the
messages and ``resolve_node`` otherwise (huge sums), which also keeps the reference's errors where the contract
would revert.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

import numpy as np
from numba import njit

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.fixed_point import ONE_FLOAT
from fgbdt_chain.ledger.spec.shapley_estimate import EXACT_MAX_PARTIES, estimated, split_shapley_estimate
from fgbdt_chain.node.kernels import limbs, resolve_kernel, shapley_kernel
from fgbdt_chain.node.kernels.histogram import FixedSums
from fgbdt_chain.node.kernels.level_search import _contender_mask, _level_sums
from fgbdt_chain.node.kernels.limbs import join
from fgbdt_chain.node.protocol.resolved_level import Inherited, ResolvedLevel

_MAX_HI = 2**48
"""Largest high limb (exclusive), i.e. values below 2**80 in magnitude, that the level sums carry."""
_MAX_TERMS = 1 << 14
"""Most values summed into one limb: parties times histogram slots."""


@njit(cache=True, nogil=True)
def _tie_key(rule: int, tree: int, node: int, feature: int) -> np.uint64:  # pragma: no cover - compiled
    """``ref.tie_key`` in wrapping 64-bit arithmetic (every operand a uint64, so numba never goes through floats)."""
    if rule == 0:
        return np.uint64(feature)
    z = (np.uint64(tree) << np.uint64(40)) | (np.uint64(node) << np.uint64(16)) | np.uint64(feature)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _top2(
    votes: np.ndarray, num_features: int, rule: int, tree: int, nodes: np.ndarray
) -> tuple[bool, np.ndarray]:  # pragma: no cover - compiled
    """``ref.top2`` of every node (votes (M, K), node ids (K,)); False when some vote is not a feature index (the
    reference raises then). The scan is the contract's: best two by (count descending, key ascending)."""
    m, k = votes.shape
    out = np.zeros((k, 2), dtype=np.int64)
    count = np.zeros(max(num_features, 1), dtype=np.int64)
    top = np.uint64(0xFFFFFFFFFFFFFFFF)
    for j in range(k):
        for i in range(m):
            v = votes[i, j]
            if v == -1:
                continue
            if v < 0 or v >= num_features:
                return False, out
            count[v] += 1
        if num_features == 1:
            out[j, 0], out[j, 1] = 0, 0
        else:
            first, c1, k1 = 0, -1, top
            second, c2, k2 = 0, -1, top
            for f in range(num_features):
                c = count[f]
                if c < c2:
                    continue
                key = _tie_key(rule, tree, nodes[j], f)
                if c > c1 or (c == c1 and key < k1):
                    second, c2, k2 = first, c1, k1
                    first, c1, k1 = f, c, key
                elif c > c2 or (c == c2 and key < k2):
                    second, c2, k2 = f, c, key
            out[j, 0], out[j, 1] = first, second
        for i in range(m):
            v = votes[i, j]
            if v >= 0:
                count[v] = 0
    return True, out


def top2_level(
    votes: np.ndarray, num_features: int, rule: int, tree: int = 0, nodes: Sequence[int] = ()
) -> list[tuple[int, ...]]:
    """``ledger.spec.reference.top2`` for every node of a level at once (``votes`` is (M, K), ``nodes`` the K node ids,
    which only the hashed rule reads); the reference itself runs when a vote is out of range, to raise its error."""
    if rule == ref.TIE_HASHED and len(nodes) == 0:
        raise ValueError("the hashed tie rule needs the level's node ids")
    node_ids = np.zeros(votes.shape[1], dtype=np.int64) if len(nodes) == 0 else np.asarray(nodes, dtype=np.int64)
    if node_ids.shape != (votes.shape[1],):
        raise ValueError(f"{len(node_ids)} node ids for {votes.shape[1]} nodes of votes")
    ok, top = _top2(np.ascontiguousarray(votes, dtype=np.int64), int(num_features), int(rule), int(tree), node_ids)
    if not ok or rule not in (ref.TIE_LOWER_INDEX, ref.TIE_HASHED):
        # the reference raises the error, votes first, as the contract
        return [
            ref.top2(v, num_features, rule, tree, int(n))
            for v, n in zip(votes.T.tolist(), node_ids.tolist(), strict=True)
        ]
    return [tuple(pair) for pair in top.tolist()]


UNROLLED_PARTIES = 6
"""Most parties whose split Shapley values run as generated straight-line code (``split_shapley``); 2^M lines."""


@cache
def _unrolled_shapley(m: int) -> Callable[..., tuple[int, list[int]]]:
    """``ref.split_shapley_fast`` for M parties as straight-line code: the same coalition recurrence (each
    coalition's sums are its rest's plus its lowest member's, the hessian sums starting from lambda, so that they
    are the denominators), the same utility expressions and each party's accumulator as the same integer sum of
    coefficient times utility, with no loop, list or tuple on the way (integers, so the same values exactly)."""
    steps, coef, total = ref._shapley_plan(m)
    lines = ["def shapley(g_left, h_left, g_right, h_right, lam):"]
    for q, name in (("a", "g_left"), ("b", "h_left"), ("c", "g_right"), ("d", "h_right")):
        lines.append(f"    {', '.join(f'{q}{i}' for i in range(m))}, = {name}")
    for mask, i, rest in steps:
        if rest == 0:
            lines.append(f"    gl{mask} = a{i}; dl{mask} = lam + b{i}; gr{mask} = c{i}; dr{mask} = lam + d{i}")
        else:
            lines.append(
                f"    gl{mask} = gl{rest} + a{i}; dl{mask} = dl{rest} + b{i}; "
                f"gr{mask} = gr{rest} + c{i}; dr{mask} = dr{rest} + d{i}"
            )
        lines.append(
            f"    u{mask} = (gl{mask} * gl{mask} // dl{mask} if dl{mask} > 0 else 0) + "
            f"(gr{mask} * gr{mask} // dr{mask} if dr{mask} > 0 else 0)"
        )
    phis = []
    for p in range(m):
        terms = " + ".join(f"({c}) * u{mask}" for mask, c in enumerate(coef[p]) if mask and c)
        lines.append(f"    s{p} = {terms or '0'}")
        lines.append(f"    if not {ref.INT256_MIN} <= s{p} <= {ref.INT256_MAX}: check(s{p})")
        lines.append(f"    phi{p} = s{p} // {total} if s{p} >= 0 else -(-s{p} // {total})")
        phis.append(f"phi{p}")
    lines.append(f"    return u{(1 << m) - 1}, [{', '.join(phis)}]")
    scope: dict[str, Any] = {"check": ref.check_int256}
    exec("\n".join(lines), scope)
    return cast(Callable[..., tuple[int, list[int]]], scope["shapley"])


def split_shapley(
    g_left: Sequence[int], h_left: Sequence[int], g_right: Sequence[int], h_right: Sequence[int], lam: int
) -> tuple[int, list[int]]:
    """``ref.split_shapley_fast``, same results and same errors: for at most ``UNROLLED_PARTIES`` parties whose
    magnitudes rule out every overflow check of ``ref.split_shapley`` (the condition ``split_shapley_fast`` tests),
    as generated straight-line code; otherwise the reference's function itself."""
    m = len(g_left)
    if (
        not 0 < m <= UNROLLED_PARTIES
        or not len(h_left) == len(g_right) == len(h_right) == m
        or sum(map(abs, g_left)) > ref._ISQRT_INT256_MAX
        or sum(map(abs, g_right)) > ref._ISQRT_INT256_MAX
        or sum(map(abs, h_left)) > ref.INT256_MAX
        or sum(map(abs, h_right)) > ref.INT256_MAX
    ):
        return ref.split_shapley_fast(g_left, h_left, g_right, h_right, lam)
    return _unrolled_shapley(m)(g_left, h_left, g_right, h_right, lam)


def _credited(value: int, multiplier: int) -> int:
    """``ref.credited``: ``value * multiplier / ONE`` truncated toward zero, the reference itself (to raise its error)
    where the product leaves int256."""
    p = value * multiplier
    if 0 <= p <= ref.INT256_MAX:
        return p // ref.ONE
    if ref.INT256_MIN <= p < 0:
        return -(-p // ref.ONE)
    return ref.credited(value, multiplier)


@dataclass(frozen=True)
class FixedLevel:
    """The parties' quantised candidate histograms of one level, as limbs: ``hi``/``lo`` for g and h, each
    (M, K, C, B) int64, and the counts ``n``."""

    g_hi: np.ndarray
    g_lo: np.ndarray
    h_hi: np.ndarray
    h_lo: np.ndarray
    n: np.ndarray


def level_of(parties: Sequence[FixedSums], stacked: FixedSums | None = None) -> FixedLevel | None:
    """The submitting parties' exact sums as one level, or None when the limbs cannot carry their sums (values of
    2**80 or more, or too many terms per limb): then the messages and ``resolve_node`` must be used.

    ``stacked``: the same sums already stacked party by party (each array (M, K, C, B)), as the simulator's
    kernels make them, which saves stacking them again."""
    m = len(parties)
    if m == 0 or m * parties[0].n.shape[-1] > _MAX_TERMS:
        return None
    if stacked is not None:
        if stacked.n.shape[0] != m:
            raise ValueError(f"{stacked.n.shape[0]} parties' sums stacked for {m} parties")
        g_hi, g_lo, h_hi, h_lo, n = stacked.g_hi, stacked.g_lo, stacked.h_hi, stacked.h_lo, stacked.n
    else:
        # ``np.array`` of equal-shaped arrays is ``np.stack``'s result at a quarter of its cost (five per level)
        g_hi, g_lo, h_hi, h_lo, n = (
            np.array([getattr(p, name) for p in parties]) for name in ("g_hi", "g_lo", "h_hi", "h_lo", "n")
        )
    if not _limbs_below(g_hi.reshape(-1), h_hi.reshape(-1), _MAX_HI):
        return None
    return FixedLevel(g_hi, g_lo, h_hi, h_lo, n)


@njit(cache=True, nogil=True)
def _limbs_below(a: np.ndarray, b: np.ndarray, bound: int) -> bool:  # pragma: no cover - compiled
    """Whether every value of both arrays is below ``bound`` in magnitude: one pass, no array made (``np.abs`` made
    two a level)."""
    for x in (a, b):
        for i in range(x.shape[0]):
            if x[i] >= bound or x[i] <= -bound:
                return False
    return True


def _contenders(
    tot: np.ndarray, cand: np.ndarray, left: np.ndarray, num_nodes: int, lam: int, hessian_mode: int
) -> np.ndarray:
    """The thresholds (indices into ``cand``, in its scan order) whose exact gain may be their node's largest.

    The exact search evaluates ``split_gain`` on Python integers, a few microseconds each, for every threshold of
    every node (30 per node with two candidates of 16 bins); nearly all of them lose by far more than rounding.
    Their gains in float64 with a rigorous error bound (``_float_side``) rule those out: a threshold whose float
    gain plus its bound is below another's minus that one's bound has a smaller exact gain, so it is neither the
    first largest nor tied with it. What is left, and every threshold whose bound does not hold, goes to the exact
    search in the same order, so the chosen split is the exact search's own."""
    mask = _contender_mask(tot, cand, left, num_nodes, float(lam), hessian_mode == ref.HESSIAN_COUNT, ONE_FLOAT)
    return np.flatnonzero(mask)


def _sides_as_ints(at: np.ndarray, whole: np.ndarray) -> tuple[list[list[int]], ...]:
    """Every party's raw (gL, hL, nL, gR, hR, nR) at each split as Python integers, each (S, M)."""
    g_left = join(at[0], at[1])
    h_left = join(at[2], at[3])
    return (
        g_left.T.tolist(),
        h_left.T.tolist(),
        at[4].T.tolist(),
        (join(whole[0], whole[1]) - g_left).T.tolist(),
        (join(whole[2], whole[3]) - h_left).T.tolist(),
        (whole[4] - at[4]).T.tolist(),
    )


def _python_shapley(
    sides: tuple[list[list[int]], ...],
    s: int,
    credits: Sequence[ref.Credit],
    hm: int,
    lam: int,
    seed: int | None = None,
) -> tuple[int, list[int]]:
    """Split ``s``'s credited gain and Shapley values on Python integers: ``ref.credited_sides`` of every party (its
    integer steps inlined) and ``split_shapley``, with their errors where the contract reverts; above
    ``EXACT_MAX_PARTIES`` parties ``split_shapley_estimate`` from the node's ``seed``, as ``ref.resolve_node``."""
    g_l, h_l, n_l, g_r, h_r, n_r = (side[s] for side in sides)
    if all(c == ref.NEUTRAL for c in credits):
        gl, gr = g_l, g_r
        hl, hr = h_l, h_r
        if hm == ref.HESSIAN_COUNT:
            hl = [ref.hessian_of(h, n, hm) for h, n in zip(hl, n_l, strict=True)]
            hr = [ref.hessian_of(h, n, hm) for h, n in zip(hr, n_r, strict=True)]
    else:
        gl = [_credited(v, c.g) for v, c in zip(g_l, credits, strict=True)]
        gr = [_credited(v, c.g) for v, c in zip(g_r, credits, strict=True)]
        if hm == ref.HESSIAN_COUNT:
            hl = [_credited(n * ref.ONE, c.n) for n, c in zip(n_l, credits, strict=True)]
            hr = [_credited(n * ref.ONE, c.n) for n, c in zip(n_r, credits, strict=True)]
        else:
            hl = [_credited(v, c.h) for v, c in zip(h_l, credits, strict=True)]
            hr = [_credited(v, c.h) for v, c in zip(h_r, credits, strict=True)]
    if estimated(len(gl)):
        if seed is None:
            raise ValueError(f"{len(gl)} parties: an estimated split Shapley value needs the node's seed")
        return split_shapley_estimate(gl, hl, gr, hr, lam, seed)
    return split_shapley(gl, hl, gr, hr, lam)


def resolve_level(
    level: FixedLevel,
    candidates: Sequence[tuple[int, ...]],
    node_votes: Sequence[Sequence[int]],
    inherited: Sequence[ref.Totals | None],
    last_level: bool,
    params: ref.Params,
    credits: Sequence[ref.Credit] | None = None,
    shapley_seeds: Sequence[int] | None = None,
) -> tuple[list[ref.NodeResult], list[ref.Totals]]:
    """``resolve_node`` for every open node of a level at once, the level's submitting parties in ``level`` (with
    their votes and credits in the same order); ``shapley_seeds``, one per node (``shapley_estimate.node_seed``),
    above ``EXACT_MAX_PARTIES`` submitting parties.

    Returns the results and each node's totals (the inherited ones, or the root's from its candidate 0).

    The split search is ``best_split``'s: candidates in rank order, thresholds upward, ``split_gain`` on the
    aggregated sums, a strictly larger gain replaces, and the best must beat ``side_score`` of its candidate's
    totals. Left out beforehand: the thresholds ``best_split`` would skip without a gain (an all-zero slot, too few
    rows on a side), by ``_level_sums`` on exact integers, and those whose gain provably loses to another's of the
    same node, by ``_contenders`` in float64 with an error bound; neither can change which threshold wins. The rest
    runs compiled on 256-bit integers (``node.kernels.resolve_kernel``) where its bounds hold, else on Python integers.
    """
    resolved = resolve_level_view(
        level, candidates, node_votes, Inherited(inherited), last_level, params, credits, shapley_seeds
    )
    return list(resolved), resolved.totals()


def resolve_level_view(
    level: FixedLevel,
    candidates: Sequence[tuple[int, ...]] | np.ndarray,
    node_votes: Sequence[Sequence[int]] | np.ndarray,
    inherited: Inherited,
    last_level: bool,
    params: ref.Params,
    credits: Sequence[ref.Credit] | None = None,
    shapley_seeds: Sequence[int] | None = None,
) -> ResolvedLevel:
    """``resolve_level`` as a ``ResolvedLevel``: what training reads of it without building every node's result.
    The candidates (nodes, C) and votes (nodes, parties) may come as arrays, as the simulator holds them: the
    compiled path takes them as they are (converting a deep level's lists cost 20-40 us)."""
    if params.min_rows < 1:
        raise ValueError("min_rows must be at least 1")
    resolved = _compiled(level, candidates, node_votes, inherited, last_level, params, credits)
    if resolved is not None:
        return resolved
    # the reference's path reads Python integers (arrays are what the compiled path takes without converting)
    cands: Sequence[tuple[int, ...]] = (
        [tuple(c) for c in candidates.tolist()] if isinstance(candidates, np.ndarray) else candidates
    )
    votes: Sequence[Sequence[int]] = node_votes.tolist() if isinstance(node_votes, np.ndarray) else node_votes
    searched = _searched(level, len(cands), params)
    results, totals = _resolve_python(
        searched, level, cands, votes, inherited.totals, last_level, params, credits, shapley_seeds
    )
    return ResolvedLevel.of_results(results, totals, level.n.shape[0], last_level)


_Searched = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``_level_sums``' running sums and totals, and the contending thresholds with their left sums."""


def _searched(level: FixedLevel, num_nodes: int, params: ref.Params) -> _Searched:
    """The level's sums and the thresholds that may be each node's best (``_level_sums``, ``_contenders``)."""
    run, tot, cand, left = _level_sums(level.g_hi, level.g_lo, level.h_hi, level.h_lo, level.n, params.min_rows)
    keep = _contenders(tot, cand, left, num_nodes, params.lam, params.hessian_mode)
    return run, tot, cand[keep], left[:, keep]


def _compiled(
    level: FixedLevel,
    candidates: Sequence[tuple[int, ...]] | np.ndarray,
    node_votes: Sequence[Sequence[int]] | np.ndarray,
    inherited: Inherited,
    last_level: bool,
    params: ref.Params,
    credits: Sequence[ref.Credit] | None,
) -> ResolvedLevel | None:
    """The level resolved by ``resolve_kernel.resolve_arrays``, or None where its bounds do not hold (or the inputs
    are not what it takes: the Python path then says what is wrong)."""
    m, k, c, _ = level.n.shape
    digits = inherited.digits
    party_credits = tuple(credits) if credits is not None else (ref.NEUTRAL,) * m
    features = np.array(candidates, dtype=np.int64)
    votes = np.array(node_votes, dtype=np.int64)
    if (
        digits is None
        or len(inherited) != k
        or not 0 < m <= EXACT_MAX_PARTIES
        or len(party_credits) != m
        or features.shape != (k, c)
        or votes.shape != (k, m)
    ):
        return None
    try:
        lam, lr, alpha = (shapley_kernel.digits_of(v) for v in (params.lam, params.learning_rate, params.alpha))
    except OverflowError:
        return None
    credit, neutral = shapley_kernel.credit_digits(party_credits)
    steps, coef, total = shapley_kernel.plan_arrays(m)
    out = resolve_kernel.resolve_arrays(
        level.g_hi,
        level.g_lo,
        level.h_hi,
        level.h_lo,
        level.n,
        params.min_rows,
        features,
        votes,
        *digits,
        last_level,
        params.hessian_mode == ref.HESSIAN_COUNT,
        float(params.lam),
        lam,
        lr,
        alpha,
        shapley_kernel.ONE_DIGITS,
        credit,
        neutral,
        steps,
        coef,
        total,
    )
    return ResolvedLevel.compiled(out, votes, last_level) if out[0] else None


def _resolve_python(
    searched: _Searched,
    level: FixedLevel,
    candidates: Sequence[tuple[int, ...]],
    node_votes: Sequence[Sequence[int]],
    inherited: Sequence[ref.Totals | None],
    last_level: bool,
    params: ref.Params,
    credits: Sequence[ref.Credit] | None = None,
    shapley_seeds: Sequence[int] | None = None,
) -> tuple[list[ref.NodeResult], list[ref.Totals]]:
    """``resolve_level`` on Python integers, the reference's functions themselves (which raise where the contract
    reverts), with the split Shapley values compiled where ``node.kernels.shapley_kernel``'s bounds hold."""
    if shapley_seeds is not None and len(shapley_seeds) != len(candidates):
        raise ValueError(f"{len(shapley_seeds)} Shapley seeds for {len(candidates)} nodes: one per node")
    hm, lam = params.hessian_mode, params.lam
    run, tot, cand, left = searched
    tot_g = join(tot[0], tot[1]).tolist()
    tot_h = join(tot[2], tot[3]).tolist()
    tot_n = tot[4].tolist()
    cand_node, cand_rank, cand_thr = cand.T.tolist()
    left_g = join(left[0], left[1]).tolist()
    left_h = join(left[2], left[3]).tolist()
    left_n = left[4].tolist()
    num_cand = len(cand_node)
    m = level.n.shape[0]
    zeros = (0,) * m
    results: list[ref.NodeResult | None] = []
    totals: list[ref.Totals] = []
    split_nodes: list[tuple[int, ref.Split]] = []
    q = 0
    for j, feats in enumerate(candidates):
        node_totals = inherited[j]
        if node_totals is None:
            node_totals = ref.Totals(tot_g[j][0], tot_h[j][0], tot_n[j][0])
        totals.append(node_totals)
        best: ref.Split | None = None
        best_parent = 0
        while q < num_cand and cand_node[q] == j:
            r, t = cand_rank[q], cand_thr[q]
            g_tot, h_tot, n_tot = tot_g[j][r], tot_h[j][r], tot_n[j][r]
            g_l, h_l, n_l = left_g[q], left_h[q], left_n[q]
            g_r, h_r, n_r = g_tot - g_l, h_tot - h_l, n_tot - n_l
            q += 1
            gain = ref.split_gain(g_l, ref.hessian_of(h_l, n_l, hm), g_r, ref.hessian_of(h_r, n_r, hm), lam)
            if best is None or gain > best.gain:
                best = ref.Split(r, feats[r], t, gain, g_l, h_l, n_l, g_r, h_r, n_r)
                best_parent = ref.side_score(g_tot, ref.hessian_of(h_tot, n_tot, hm), lam)
        if best is None or best.gain <= best_parent:
            value = ref.leaf_value(
                node_totals.g, ref.hessian_of(node_totals.h, node_totals.n, hm), lam, params.learning_rate
            )
            results.append(ref.NodeResult(None, value, None, None, None, None, zeros, zeros, zeros))
        else:
            results.append(None)
            split_nodes.append((j, best))
    if split_nodes:
        node = np.array([j for j, _ in split_nodes], dtype=np.int64)
        rank = np.array([s.rank for _, s in split_nodes], dtype=np.int64)
        thr = np.array([s.threshold for _, s in split_nodes], dtype=np.int64)
        at = run[:, :, node, rank, thr]  # (5, M, S): every party's left sums at its node's split
        whole = run[:, :, node, rank, level.n.shape[-1] - 1]
        alpha, lr = params.alpha, params.learning_rate
        party_credits = list(credits) if credits is not None else [ref.NEUTRAL] * m
        # every split's credited gain and Shapley values in one compiled call; what it leaves (bounds it does not
        # cover) is computed below on Python integers, as it always was
        compiled = shapley_kernel.level_phis(at, whole, party_credits, hm, lam)
        exact: tuple[list[list[int]], ...] | None = None
        for s, (j, split) in enumerate(split_nodes):
            done = compiled[s]
            if done is not None:
                credited_gain, phi = done
            else:
                if exact is None:
                    exact = _sides_as_ints(at, whole)
                seed = shapley_seeds[j] if shapley_seeds is not None else None
                credited_gain, phi = _python_shapley(exact, s, party_credits, hm, lam, seed)
            feature = split.feature
            kappa = tuple(ref.voting_contribution(v, feature, credited_gain) for v in node_votes[j])
            # contribution(phi, 0, alpha) is check_int256(phi): most parties did not vote for the split feature
            contrib = tuple(
                ref.contribution(p, k, alpha) if k else ref.check_int256(p) for p, k in zip(phi, kappa, strict=True)
            )
            lt = ref.Totals(split.g_left, split.h_left, split.n_left)
            rt = ref.Totals(split.g_right, split.h_right, split.n_right)
            left_leaf = right_leaf = None
            if last_level:
                left_leaf = ref.leaf_value(lt.g, ref.hessian_of(lt.h, lt.n, hm), lam, lr)
                right_leaf = ref.leaf_value(rt.g, ref.hessian_of(rt.h, rt.n, hm), lam, lr)
            results[j] = ref.NodeResult(
                split, None, lt, rt, left_leaf, right_leaf, tuple(phi), kappa, contrib, credited_gain
            )
    out = [r for r in results if r is not None]
    assert len(out) == len(results)
    return out, totals


def warm_up() -> None:
    """Load (or compile) this module's kernels on a tiny level, so that a timed run measures training."""
    half = np.full((1, 2, 2), 1 << 27, dtype=np.int64)
    sums = [FixedSums(half, half, half, half, np.ones((1, 2, 2), dtype=np.int64))] * 2
    level = level_of(sums)
    assert level is not None
    params = ref.Params(lam=ref.ONE, learning_rate=ref.ONE, min_rows=1, alpha=ref.ONE)
    resolve_level(level, [(0, 1)], [[0, 1]], [None], True, params)
    top2_level(np.zeros((2, 1), dtype=np.int64), 2, ref.TIE_HASHED, 0, [1])
    shapley_kernel.warm_up()


def level_splits(
    submissions: Sequence[Sequence[ref.NodeHistograms]], candidates: Sequence[tuple[int, ...]], params: ref.Params
) -> list[ref.Split | None]:
    """Each open node's split as the contract will make it from the submitting parties' level histograms (party
    order; each party's one per open node), None where the node becomes a leaf: ``reference.best_split`` of the
    aggregated histograms, which neither the votes, the inherited totals nor the credits change.

    Why: a party that votes ahead (``submitVotes`` while the level resolves) needs the next level's open nodes and
    where its rows go before the chain resolves the level. The level goes through ``resolve_level``'s compiled
    search where the limbs carry the sums, else node by node through the reference (which raises where the contract
    reverts)."""
    if not submissions:
        return [None] * len(candidates)
    level = _level_of_messages(submissions)
    if level is not None:
        with contextlib.suppress(ref.FixedPointOverflow):
            abstain = [[ref.ABSTAIN] * len(submissions)] * len(candidates)
            # the splits do not depend on the split Shapley values, so any seed does where they are estimated
            seeds = [0] * len(candidates)
            results, _ = resolve_level(level, candidates, abstain, [None] * len(candidates), False, params, None, seeds)
            return [r.split for r in results]
    return [
        ref.best_split(
            ref.aggregate([hists[j] for hists in submissions]), params.lam, params.min_rows, params.hessian_mode
        )
        for j in range(len(candidates))
    ]


def _level_of_messages(submissions: Sequence[Sequence[ref.NodeHistograms]]) -> FixedLevel | None:
    """``level_of`` the submitting parties' level histograms as sent (party order), None where the limbs cannot
    carry them."""
    sums = []
    try:
        for hists in submissions:
            g_hi, g_lo = limbs.split([h.g for h in hists])
            h_hi, h_lo = limbs.split([h.h for h in hists])
            sums.append(FixedSums(g_hi, g_lo, h_hi, h_lo, np.array([h.n for h in hists], dtype=np.int64)))
    except OverflowError:  # a high limb beyond int64
        return None
    return level_of(sums) if sums else None


def tree_end(
    submissions: Sequence[Sequence[ref.NodeHistograms]],
    candidates: Sequence[tuple[int, ...]],
    open_nodes: Sequence[int],
    inherited: Sequence[ref.Totals | None],
    params: ref.Params,
) -> tuple[dict[int, tuple[int, int]], dict[int, int]] | None:
    """The splits (node: (feature, threshold)) and leaf values the contract makes when it resolves a tree's last
    level from these submissions: an open node that does not split is a leaf of its totals (``inherited``: from its
    parent's split; None at a root), a split node's two children are leaves of its sides. None where the limbs
    cannot carry the sums or the contract would revert: then nothing is known ahead.

    Why: with the tree's leaves a party knows its next gradients, so it can send the next tree's root ballot with
    the last level's resolution (``submitVotes`` ahead of a root) instead of in a round of its own."""
    level = _level_of_messages(submissions) if submissions else None
    if level is None:
        return None
    abstain = [[ref.ABSTAIN] * len(submissions)] * len(candidates)
    try:
        # the splits and leaves do not depend on the split Shapley values: any seed does where they are estimated
        results, _ = resolve_level(level, candidates, abstain, inherited, True, params, None, [0] * len(candidates))
    except ref.FixedPointOverflow:
        return None
    splits: dict[int, tuple[int, int]] = {}
    leaves: dict[int, int] = {}
    for node, r in zip(open_nodes, results, strict=True):
        if r.split is None:
            assert r.leaf is not None
            leaves[node] = r.leaf
        else:
            assert r.left_leaf is not None and r.right_leaf is not None
            splits[node] = (r.split.feature, r.split.threshold)
            leaves[2 * node], leaves[2 * node + 1] = r.left_leaf, r.right_leaf
    return splits, leaves
