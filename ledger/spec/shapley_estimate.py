"""Split Shapley beyond the exact size: permutation sampling with a stated error bound and a seed nobody can steer.

Why: exact split Shapley (equation 8 of Gao et al., "Towards Fair and Decentralized Federated Learning System for
Gradient Boosting Decision Trees", 2022; ``reference.split_shapley``) sums over all 2^M coalitions, so its cost, on
chain and in the simulator, doubles with every party. Above :data:`EXACT_MAX_PARTIES` parties the value of each party
at a resolved split is estimated instead, from :data:`PERMUTATIONS` random orders of the parties, every one of which
adds each party's marginal gain ``u(B + p) - u(B)`` to it (B the parties before p in that order).

What holds, for every split:

* Efficiency: in every order the marginals add up to the grand coalition's gain, so the accumulators add up to
  ``K * u(all)`` exactly, and the estimates (each accumulator divided by K, truncated toward zero like Solidity) to
  ``u(all)`` up to M units.
* The bound: every party's marginal lies in ``[-(S - b_p), b_p]``, a range of width ``S`` (:func:`marginal_range`),
  so by Hoeffding's inequality and a union bound over the M parties, with probability at least ``1 - delta`` every
  party's estimate is within ``S * sqrt(ln(2M / delta) / (2K))`` of its exact value at once (:func:`error_bound`,
  plus the one unit of truncation). ``K`` follows from the stated ``delta`` and tolerance (:data:`DELTA_PPM`,
  :data:`TOLERANCE_PPM`) at the largest federation, :data:`~fgbdt_chain.ledger.spec.parameters.MAX_PARTIES`
  (:func:`permutations_for`); no data set tunes it.
* The orders are drawn from keccak256 of a task seed, the tree and the node (:func:`node_seed`), and every verifier,
  the simulator and the audit draw the same ones (:func:`permutation`). The task seed is keccak256 of the hash of the
  block that starts training and the task id, read by the first task transaction in a later block (event
  ``ShapleySeedFixed``): every party committed its data when it joined, and whoever sends ``start`` cannot know the
  hash of the block that will hold it, so nobody who sends a transaction can steer the seed (the block's producer,
  who could withhold a block it dislikes, is the one actor left). A block hash is readable for 256 blocks only: a
  seed not fixed by then is taken from the block of the transaction that finds it expired, and fixed by the next
  one. Every resolution needs the seed, estimated or not: one rule for every task.
* Integers only, Solidity's truncating division: the contract's library computes the same values bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import ceil, log, sqrt

from fgbdt_chain.ledger.spec.fixed_point import tdiv
from fgbdt_chain.ledger.spec.hashing import keccak256
from fgbdt_chain.ledger.spec.parameters import MAX_PARTIES

EXACT_MAX_PARTIES: int = 12
"""The largest federation whose split Shapley values are exact (``reference.split_shapley``); larger ones are
estimated. Why 12: the largest M whose exact resolution of one node stays within the budget :data:`TOLERANCE_PPM` is
derived from, 27M gas, a tenth under a 30M-gas block, so that a task of any size runs on a chain with that block gas
limit. The cost is ``M * 2^M`` split gains, doubling with every party. Measured on anvil 1.7.1 (``bench.gas``'s
``resolveNode`` of a root, plus the Merkle proofs of a depth-8 tree's widest level): 10.0M gas at M = 11 and 18.5M at
M = 12 with 16 bins, 21.0M at M = 12 with 53 bins (the most bins whose resolution fits a transaction at 12 parties,
``tx_size.check_resolution_fits``), 35.9M at M = 13 and 72.0M at M = 14. The contract's
``FGBDTEstimateLib.EXACT_MAX_PARTIES`` is the same number (a test reads it from the source)."""

DELTA_PPM: int = 10_000
"""The stated failure probability delta, in millionths (0.01): the bound of :func:`error_bound` holds for every party
of a split at once with probability at least ``1 - delta``."""

TOLERANCE_PPM: int = 115_000
"""The stated tolerance epsilon, in millionths (0.115): at the largest federation every estimate is within
``epsilon * S`` of its exact value (``S`` the width of the marginals' range, :func:`marginal_range`) with
probability at least ``1 - delta``; smaller federations get a tighter bound from the same K.

Why 0.115: the smallest tolerance whose K keeps one node's resolution at 64 parties within 27M gas, a tenth below a
30M-gas block, at the default 16 bins. Measured on anvil (``bench.shapley_estimate``): the resolution without the
estimate costs 9.8M gas there (plus 0.25M for the widest level's Merkle proofs at depth 8), and the estimate
46,700 gas per order, so K <= 362; 0.115 gives K = 358. A task of 64 parties fits a transaction with at most 8 bins
(``tx_size.check_resolution_fits``), whose histograms cost less to check: measured at 9 bins and depth 3, the most
that fit there, the largest resolution is 24.3M gas, within the budget."""


def permutations_for(parties: int, delta_ppm: int = DELTA_PPM, tolerance_ppm: int = TOLERANCE_PPM) -> int:
    """The K of Hoeffding's inequality: ``ceil(ln(2M / delta) / (2 epsilon^2))`` orders bound every one of the M
    parties' estimates within ``epsilon * S`` with probability at least ``1 - delta``."""
    if parties < 1:
        raise ValueError(f"{parties} parties: at least one")
    if not 0 < delta_ppm < 1_000_000 or not 0 < tolerance_ppm < 1_000_000:
        raise ValueError(f"delta {delta_ppm} ppm and tolerance {tolerance_ppm} ppm must both be in (0, 1e6)")
    delta, eps = delta_ppm / 1e6, tolerance_ppm / 1e6
    return ceil(log(2 * parties / delta) / (2 * eps * eps))


PERMUTATIONS: int = permutations_for(MAX_PARTIES)
"""K, the random orders every estimated split draws: :func:`permutations_for` at the largest federation, so the
stated tolerance holds at every size the estimator runs at (the contract's ``FGBDTEstimateLib.PERMUTATIONS``)."""


def estimated(parties: int) -> bool:
    """Whether a split of ``parties`` submitting parties is estimated (more than :data:`EXACT_MAX_PARTIES`)."""
    return parties > EXACT_MAX_PARTIES


def _word(*values: int) -> bytes:
    """``abi.encode`` of unsigned 256-bit words."""
    out = b""
    for v in values:
        if not 0 <= v < 1 << 256:
            raise ValueError(f"{v} is not a uint256")
        out += v.to_bytes(32, "big")
    return out


def task_seed(block_hash: bytes, task_id: int) -> int:
    """The task seed: ``uint256(keccak256(abi.encode(blockhash(seedBlock), taskId)))`` (``FGBDTChain._fixSeed``)."""
    return int.from_bytes(keccak256(block_hash + _word(task_id)), "big")


def node_seed(task_seed: int, tree: int, node: int) -> int:
    """The seed of one node's orders: ``uint256(keccak256(abi.encode(taskSeed, tree, node)))`` (tree from 0, node the
    heap id), so every node of every tree draws its own orders from the one task seed."""
    return int.from_bytes(keccak256(_word(task_seed, tree, node)), "big")


def permutation(seed: int, k: int, parties: int) -> list[int]:
    """Order ``k`` of a node: Fisher-Yates over ``0..M-1``, position ``i`` (from ``M - 1`` down to 1) swapped with
    ``j = uint256(keccak256(abi.encode(seed, k, i))) % (i + 1)``: a fresh 256-bit word per draw, so no draw's bias
    exceeds ``M / 2^256``."""
    return _shuffle(_word(seed, k), [_word(i) for i in range(parties)])


def _shuffle(prefix: bytes, draw_words: Sequence[bytes]) -> list[int]:
    """Fisher-Yates over ``0..len(draw_words)-1``, draw ``i`` hashing ``prefix`` (the seed's and the order's words)
    and ``draw_words[i]``."""
    order = list(range(len(draw_words)))
    for i in range(len(draw_words) - 1, 0, -1):
        j = int.from_bytes(keccak256(prefix + draw_words[i]), "big") % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


@lru_cache(maxsize=64)
def _orders(seed: int, k: int, parties: int) -> tuple[tuple[int, ...], ...]:
    """The K orders of a node (:func:`permutation` of each ``k``, the same draws): the seed's and the draws' words
    encoded once, not per draw. Drawn once for the last few nodes: a party that resolves a
    level itself and then checks the chain's result asks for the same node's orders twice (each node has its own
    seed, so an unbounded cache would grow with the model)."""
    seed_word = _word(seed)
    draw_words = [_word(i) for i in range(parties)]
    return tuple(tuple(_shuffle(seed_word + _word(order_index), draw_words)) for order_index in range(k))


UNCHECKED_GRADIENT_BITS = 120
"""Below this many bits for the sum of the parties' gradient magnitudes on each side, and with the hessians' and
lambda's magnitudes below 2^250, no partial sum, square, utility, marginal or accumulator of
:func:`split_shapley_estimate` can leave int256 (a utility is below 2^241 and K of the marginals stay below 2^251), so
the contract would not revert, and the loop skips its per-step checks: the same integers, about three times faster."""


def split_shapley_estimate(
    g_left: Sequence[int],
    h_left: Sequence[int],
    g_right: Sequence[int],
    h_right: Sequence[int],
    lam: int,
    seed: int,
    permutations: int = PERMUTATIONS,
) -> tuple[int, list[int]]:
    """Estimated split Shapley values of M parties at a fixed split, and the grand coalition's gain.

    For each of ``permutations`` orders (:func:`permutation` of ``seed``, the node's seed), the coalition grows one
    party at a time from the empty one (utility 0) by checked int256 sums, and each party's accumulator takes its
    marginal. ``phi_p`` is the accumulator divided by K, truncated toward zero. Raises
    ``reference.FixedPointOverflow`` where the contract reverts."""
    # the reference imports this module, so its helpers are looked up here (equation 7 is its ``split_gain``)
    from fgbdt_chain.ledger.spec.reference import check_all_int256, check_int256, split_gain

    m = len(g_left)
    if not (len(h_left) == len(g_right) == len(h_right) == m):
        raise ValueError("gL, hL, gR, hR must have the same length")
    if permutations < 1:
        raise ValueError(f"{permutations} permutations: at least one")
    if m == 0:
        return 0, []
    acc = [0] * m
    grand = 0
    orders = _orders(seed, permutations, m)
    if _unchecked(g_left, h_left, g_right, h_right, lam):
        sides = list(zip(g_left, h_left, g_right, h_right, strict=True))
        for order in orders:
            gl = hl = gr = hr = 0
            before = 0
            for p in order:
                a, b, c, d = sides[p]
                gl, hl, gr, hr = gl + a, hl + b, gr + c, hr + d
                dl, dr = hl + lam, hr + lam
                u = (gl * gl // dl if dl > 0 else 0) + (gr * gr // dr if dr > 0 else 0)
                acc[p] += u - before
                before = u
            grand = before
        return grand, [tdiv(a, permutations) for a in acc]
    for order in orders:
        gl = hl = gr = hr = 0
        before = 0
        for p in order:
            gl, hl, gr, hr = gl + g_left[p], hl + h_left[p], gr + g_right[p], hr + h_right[p]
            check_all_int256((gl, hl, gr, hr))
            u = split_gain(gl, hl, gr, hr, lam)
            acc[p] = check_int256(acc[p] + (u - before))
            before = u
        grand = before
    return grand, [tdiv(a, permutations) for a in acc]


def _unchecked(
    g_left: Sequence[int], h_left: Sequence[int], g_right: Sequence[int], h_right: Sequence[int], lam: int
) -> bool:
    """Whether :data:`UNCHECKED_GRADIENT_BITS` rules out every overflow of the estimate's loop."""
    limit = 1 << UNCHECKED_GRADIENT_BITS
    if sum(map(abs, g_left)) >= limit or sum(map(abs, g_right)) >= limit:
        return False
    return sum(map(abs, h_left)) + abs(lam) < 1 << 250 and sum(map(abs, h_right)) + abs(lam) < 1 << 250


def side_bound(g: int, h: int) -> int | None:
    """The most one side of a party can add to any coalition's (truncated) score: ``ceil(g^2 / h)``, by
    Cauchy-Schwarz ``(G + g)^2 / (H + h + lambda) <= G^2 / (H + lambda) + g^2 / h`` for ``H + lambda > 0``,
    ``h > 0`` (the difference of the two floors is an integer below ``1 + g^2 / h``); 0 for a side without gradient
    and a non-negative hessian (it only grows the denominator); None where no bound follows (a negative hessian, or a
    zero one with a non-zero gradient)."""
    if h < 0:
        return None
    if g == 0:
        return 0
    if h == 0:
        return None
    return -(-g * g // h)


def marginal_range(
    g_left: Sequence[int], h_left: Sequence[int], g_right: Sequence[int], h_right: Sequence[int], lam: int
) -> int | None:
    """``S``, the width of an interval holding every party's marginal, or None where no bound follows.

    With ``b_p`` the sum of party p's two :func:`side_bound` values and ``lambda >= 0``, a coalition's utility never
    exceeds the sum of its members' ``b`` (the inequality of :func:`side_bound`, member by member from the empty
    coalition), so p's marginal ``u(B + p) - u(B)`` lies in ``[-(S - b_p), b_p]`` with ``S = sum_p b_p``."""
    if lam < 0:
        return None
    total = 0
    for gl, hl, gr, hr in zip(g_left, h_left, g_right, h_right, strict=True):
        left, right = side_bound(gl, hl), side_bound(gr, hr)
        if left is None or right is None:
            return None
        total += left + right
    return total


def error_bound(parties: int, width: int, permutations: int = PERMUTATIONS, delta_ppm: int = DELTA_PPM) -> float:
    """Hoeffding's bound on every party's estimation error at once, with probability at least ``1 - delta``:
    ``S * sqrt(ln(2M / delta) / (2K))``, plus one unit for the truncating division."""
    return width * sqrt(log(2 * parties / (delta_ppm / 1e6)) / (2 * permutations)) + 1.0
