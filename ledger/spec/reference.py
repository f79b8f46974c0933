"""Pure-Python reference of everything the FGBDT-Chain contracts compute.

This module is the specification the Solidity code is checked against, bit for bit: the simulator and the party
nodes call it, the contracts re-implement it, and the differential tests compare the two on the same inputs. It
therefore works on Python integers only (no floats), in the project's fixed point: real values carry 18 decimals
(``ONE`` is 1.0) and counts are plain integers. Every division truncates toward zero, as Solidity's ``/`` on
``int256`` does (Python's ``//`` floors, which differs for negative quotients).

Conventions shared with the contracts (see ``docs/how-it-works.md``):

* A histogram of one feature has ``nbins = bins + 1`` slots: slot 0 holds the rows whose value is missing, slots
  ``1..bins`` the value bins in increasing order. A split at threshold ``t`` sends slots ``0..t`` left and
  ``t+1..nbins-1`` right, so missing values always go left (LightGBM's default-left).
* ``hessian_mode`` 0 uses the hessian sums (second order), 1 uses the row counts times ``ONE`` in their place (the
  paper's formulas, and its Table 3).
* Votes are feature indices; ``ABSTAIN`` (-1) is a vote for nothing.
* Solidity 0.8 reverts on any int256 overflow; the reference raises ``FixedPointOverflow`` at the intermediates
  that can grow (squares, products, aggregated and coalition sums, the Shapley accumulator, contributions).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from math import factorial, isqrt
from operator import mul

from fgbdt_chain.ledger.spec.fixed_point import ONE as ONE
from fgbdt_chain.ledger.spec.fixed_point import from_fixed as from_fixed
from fgbdt_chain.ledger.spec.fixed_point import tdiv as tdiv
from fgbdt_chain.ledger.spec.fixed_point import to_fixed as to_fixed
from fgbdt_chain.ledger.spec.modes import ENDORSE_OVERLAP as ENDORSE_OVERLAP
from fgbdt_chain.ledger.spec.modes import ENDORSE_RULE_NAMES as ENDORSE_RULE_NAMES
from fgbdt_chain.ledger.spec.modes import ENDORSE_RULES as ENDORSE_RULES
from fgbdt_chain.ledger.spec.modes import ENDORSE_STATISTICAL as ENDORSE_STATISTICAL
from fgbdt_chain.ledger.spec.modes import HESSIAN_COUNT as HESSIAN_COUNT
from fgbdt_chain.ledger.spec.modes import HESSIAN_MODE_NAMES as HESSIAN_MODE_NAMES
from fgbdt_chain.ledger.spec.modes import HESSIAN_MODES as HESSIAN_MODES
from fgbdt_chain.ledger.spec.modes import HESSIAN_SECOND_ORDER as HESSIAN_SECOND_ORDER
from fgbdt_chain.ledger.spec.modes import OBJECTIVE_BINARY as OBJECTIVE_BINARY
from fgbdt_chain.ledger.spec.modes import OBJECTIVE_NAMES as OBJECTIVE_NAMES
from fgbdt_chain.ledger.spec.modes import OBJECTIVE_SQUARED as OBJECTIVE_SQUARED
from fgbdt_chain.ledger.spec.modes import OBJECTIVES as OBJECTIVES
from fgbdt_chain.ledger.spec.modes import TIE_HASHED as TIE_HASHED
from fgbdt_chain.ledger.spec.modes import TIE_LOWER_INDEX as TIE_LOWER_INDEX
from fgbdt_chain.ledger.spec.modes import TIE_RULE_NAMES as TIE_RULE_NAMES
from fgbdt_chain.ledger.spec.modes import TIE_RULES as TIE_RULES
from fgbdt_chain.ledger.spec.modes import EndorseRuleName as EndorseRuleName
from fgbdt_chain.ledger.spec.modes import HessianModeName as HessianModeName
from fgbdt_chain.ledger.spec.modes import ObjectiveName as ObjectiveName
from fgbdt_chain.ledger.spec.modes import TieRuleName as TieRuleName
from fgbdt_chain.ledger.spec.parameters import ALL_TREES_VOTED as ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.parameters import MAX_PARTIES as MAX_PARTIES
from fgbdt_chain.ledger.spec.parameters import endorsement_quorum as endorsement_quorum
from fgbdt_chain.ledger.spec.shapley_estimate import estimated, split_shapley_estimate

# fixed point (``ledger.spec.fixed_point``), the mode names and codes (``ledger.spec.modes``) and the task's limits
# and quorum rule (``ledger.spec.parameters``) are defined once there and named here too, as the contracts use them

ABSTAIN: int = -1
"""A vote for no feature: the party has no valid local split at that node."""

_MASK64 = (1 << 64) - 1

INT256_MIN: int = -(2**255)
INT256_MAX: int = 2**255 - 1


class FixedPointOverflow(ArithmeticError):
    """A value left the int256 range, where the contract would revert."""


def check_int256(x: int) -> int:
    """Return ``x`` unchanged, or raise where Solidity's checked arithmetic would revert."""
    if x < INT256_MIN or x > INT256_MAX:
        raise FixedPointOverflow(f"value {x} does not fit int256")
    return x


def check_all_int256(values: Iterable[int]) -> None:
    """Raise where any value leaves int256 (the contract's checked sums would revert)."""
    for x in values:
        if x < INT256_MIN or x > INT256_MAX:
            raise FixedPointOverflow(f"value {x} does not fit int256")


def side_score(g: int, h: int, lam: int) -> int:
    """``g^2 / (h + lambda)`` in fixed point, 0 when the denominator is 0 (an empty side with lambda = 0)."""
    d = check_int256(h + lam)
    if d <= 0:
        return 0
    # g*g >= 0 and d > 0, so floor division is the truncating division here
    return check_int256(g * g) // d


def split_gain(g_left: int, h_left: int, g_right: int, h_right: int, lam: int) -> int:
    """The paper's equation 7: left score plus right score, no 1/2 factor and no parent term."""
    return check_int256(side_score(g_left, h_left, lam) + side_score(g_right, h_right, lam))


def leaf_value(g: int, h: int, lam: int, learning_rate: int) -> int:
    """Equation 6 times the learning rate: ``-G * lr / (H + lambda)``, 0 for an empty leaf with lambda = 0."""
    d = check_int256(h + lam)
    if d <= 0:
        return 0
    return tdiv(check_int256(check_int256(-g) * learning_rate), d)


def hessian_of(h: int, n: int, hessian_mode: int) -> int:
    """The value that plays the hessian in gains and leaves: the sum of h, or the count times ONE."""
    return check_int256(n * ONE) if hessian_mode == HESSIAN_COUNT else h


def tie_key(rule: int, tree: int, node: int, feature: int) -> int:
    """Where ``feature`` ranks among equally voted features of ``node`` in ``tree`` (lower first).

    The index rule favours the lower index. With single-feature ballots and a handful of parties nearly every node's
    second candidate is a tie, so that rule hands it to the low-index features whatever they are worth (on HIGGS,
    where the informative features have high indices, it costs over a point of test error). ``TIE_HASHED`` orders the
    features by the SplitMix64 finaliser of ``tree << 40 | node << 16 | feature``: a bijection of 64-bit words, so
    a node's features never share a key (for features < 2^16, nodes and trees < 2^24, which the contract's limits
    guarantee), and a different order at every node, so no feature is favoured. ``tree`` counts from 0 and ``node``
    is the heap id (root 1).
    """
    if rule == TIE_LOWER_INDEX:
        return feature
    if rule != TIE_HASHED:
        raise ValueError(f"unknown tie rule {rule}; use {TIE_LOWER_INDEX} (lower index) or {TIE_HASHED} (hashed)")
    z = ((tree << 40) | (node << 16) | feature) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def top2(votes: Sequence[int], num_features: int, rule: int, tree: int = 0, node: int = 0) -> tuple[int, int]:
    """The two candidate features of one node: the two most voted (ties by ``tie_key``).

    Features are ranked by vote count, then by ``tie_key``, then by index; abstentions count for nothing. ``tree``
    and ``node`` matter only to the hashed rule, which needs the real ones (0-based tree, heap node id). With one
    distinct vote the second candidate is the best of the rest, which all have zero votes and so rank by key alone.
    With a single feature both candidates are feature 0.
    """
    if num_features < 1:
        raise ValueError("num_features must be at least 1")
    counts: dict[int, int] = {}
    for v in votes:
        if v == ABSTAIN:
            continue
        if not 0 <= v < num_features:
            raise ValueError(f"vote {v} is not a feature index in [0, {num_features})")
        counts[v] = counts.get(v, 0) + 1
    if rule not in (TIE_LOWER_INDEX, TIE_HASHED):  # checked after the votes, in the contract's order
        raise ValueError(f"unknown tie rule {rule}; use {TIE_LOWER_INDEX} (lower index) or {TIE_HASHED} (hashed)")
    if num_features == 1:
        return (0, 0)
    # voted features outrank the zero-vote ones, so the keys of all features are needed only with < 2 voted
    pool = counts if len(counts) >= 2 else range(num_features)
    # the index last: keys can only coincide for features >= 2^16 (bits shared with the node), and the contract's
    # scan keeps the lower index then
    first, second = sorted(pool, key=lambda f: (-counts.get(f, 0), tie_key(rule, tree, node, f), f))[:2]
    return (first, second)


@dataclass(frozen=True)
class Split:
    """The best split of one node over its candidate features, as the contract records it.

    ``rank`` is the position of ``feature`` among the candidates (0 or 1), ``threshold`` the last slot that goes
    left, ``gain`` equation 7 at that split; the side sums are the aggregated (all parties) histogram sums.
    """

    rank: int
    feature: int
    threshold: int
    gain: int
    g_left: int
    h_left: int
    n_left: int
    g_right: int
    h_right: int
    n_right: int


@dataclass(frozen=True)
class NodeHistograms:
    """Aggregated histograms of one node's candidate features: ``g[k][b]``, ``h[k][b]``, ``n[k][b]``."""

    features: tuple[int, ...]
    g: tuple[tuple[int, ...], ...]
    h: tuple[tuple[int, ...], ...]
    n: tuple[tuple[int, ...], ...]


def draws(tree: int, voted_trees: int) -> bool:
    """Whether tree ``tree`` (from 0) draws its candidates instead of voting (the contract's ``_drawn``)."""
    return tree >= voted_trees


def ahead_ballot(ahead: Sequence[int], previous_open: Sequence[int], open_nodes: Sequence[int]) -> list[int]:
    """A party's votes sent ahead, while the level before resolves, as its ballot of the level that opened
    (``FGBDTBallotLib.aheadBallot``): ``ahead`` holds two votes per node of ``previous_open`` (left child, right
    child; increasing ids), and each node of ``open_nodes`` (increasing ids, children of those) keeps its own. At a
    tree's root (``previous_open`` empty: sent while the tree before resolved its last level) it is the root's one
    vote.

    Why ahead: a party that resolved the level itself knows the next level's nodes before the chain does, so its votes
    travel with the resolution round instead of in a round of their own (two dependent rounds per level, not three);
    one that resolved a tree's last level knows the tree, hence its next gradients and its vote on the next root."""
    if not previous_open:
        if len(ahead) != 1 or list(open_nodes) != [1]:
            raise ValueError(f"{len(ahead)} votes sent ahead of a root for nodes {list(open_nodes)}: one, for node 1")
        return [ahead[0]]
    if len(ahead) != 2 * len(previous_open):
        raise ValueError(f"{len(ahead)} votes sent ahead for {len(previous_open)} nodes: two per node are needed")
    slot = {2 * parent + c: 2 * i + c for i, parent in enumerate(previous_open) for c in (0, 1)}
    missing = [n for n in open_nodes if n not in slot]
    if missing:
        raise ValueError(f"nodes {missing} are not children of the level before's open nodes")
    return [ahead[slot[n]] for n in open_nodes]


def drawn_candidates(num_features: int, tree: int, node: int) -> tuple[int, int]:
    """A node's candidates in a tree that draws them: the top-2 of empty ballots, so the two features with the
    lowest hashed tie keys of (``tree``, ``node``): fixed by public values alone, as the contract fixes them when the
    node's level opens."""
    return top2([], num_features, TIE_HASHED, tree, node)


def aggregate(parts: Sequence[NodeHistograms]) -> NodeHistograms:
    """Sum the parties' histograms of one node bin by bin (they must share the candidate features)."""
    if not parts:
        raise ValueError("nothing to aggregate")
    features = parts[0].features
    for p in parts:
        if p.features != features:
            raise ValueError(f"candidate features differ: {p.features} != {features}")

    def add(field: str) -> tuple[tuple[int, ...], ...]:
        per_party = [getattr(p, field) for p in parts]
        out = tuple(tuple(map(sum, zip(*(hist[k] for hist in per_party), strict=True))) for k in range(len(features)))
        check_all_int256(v for row in out for v in row)
        return out

    return NodeHistograms(features, add("g"), add("h"), add("n"))


def best_split(hist: NodeHistograms, lam: int, min_rows: int, hessian_mode: int = HESSIAN_SECOND_ORDER) -> Split | None:
    """The best split of a node, or None when the node becomes a leaf.

    Candidates are scanned in rank order and thresholds upward; only a strictly larger gain replaces the current
    best, so ties keep the first. A threshold is valid when both sides hold at least ``min_rows`` rows. The node
    splits only when the best gain beats the unsplit score ``G^2 / (H + lambda)`` of the same feature's totals, as
    LightGBM requires a positive gain over the parent.
    """
    if min_rows < 1:
        raise ValueError("min_rows must be at least 1")
    best: Split | None = None
    best_parent = 0
    for k, feature in enumerate(hist.features):
        gs, hs, ns = hist.g[k], hist.h[k], hist.n[k]
        g_tot, h_tot, n_tot = _checked_sums(gs, hs, ns)
        g_l = h_l = n_l = 0
        for t in range(len(gs) - 1):
            if gs[t] == 0 and hs[t] == 0 and ns[t] == 0:
                # same sums as threshold t - 1, so the same gain: under "strictly greater replaces" it never wins
                continue
            g_l = check_int256(g_l + gs[t])
            h_l = check_int256(h_l + hs[t])
            n_l = check_int256(n_l + ns[t])
            n_r = check_int256(n_tot - n_l)
            if n_l < min_rows or n_r < min_rows:
                continue
            g_r, h_r = check_int256(g_tot - g_l), check_int256(h_tot - h_l)
            gain = split_gain(g_l, hessian_of(h_l, n_l, hessian_mode), g_r, hessian_of(h_r, n_r, hessian_mode), lam)
            if best is None or gain > best.gain:
                best = Split(k, feature, t, gain, g_l, h_l, n_l, g_r, h_r, n_r)
                best_parent = side_score(g_tot, hessian_of(h_tot, n_tot, hessian_mode), lam)
    if best is None or best.gain <= best_parent:
        return None
    return best


_SAFE_TERM = 1 << 247
"""Below this in magnitude, 256 terms cannot carry a partial sum out of int256: their checked sum is their sum."""


def _checked_sums(gs: Sequence[int], hs: Sequence[int], ns: Sequence[int]) -> tuple[int, int, int]:
    """The sums of a candidate's slots as the contract adds them, slot by slot, each partial sum checked (it reverts
    where one leaves int256 although the total may fit); at C speed where no partial sum can."""
    values = (*gs, *hs, *ns)
    if len(gs) <= 256 and values and min(values) > -_SAFE_TERM and max(values) < _SAFE_TERM:
        return sum(gs), sum(hs), sum(ns)
    g = h = n = 0
    for gv, hv, nv in zip(gs, hs, ns, strict=True):
        g, h, n = check_int256(g + gv), check_int256(h + hv), check_int256(n + nv)
    return g, h, n


@cache
def _coalition_weights(m: int) -> tuple[int, ...]:
    """``|B|! (M - |B| - 1)!`` for every coalition mask B of M parties (0 for the grand coalition, never used)."""
    size = 1 << m
    return tuple(
        factorial(bin(mask).count("1")) * factorial(m - bin(mask).count("1") - 1) if mask != size - 1 else 0
        for mask in range(size)
    )


def split_shapley(
    g_left: Sequence[int], h_left: Sequence[int], g_right: Sequence[int], h_right: Sequence[int], lam: int
) -> tuple[int, list[int]]:
    """Exact split Shapley values (equation 8) of M parties at a fixed split, and the grand coalition's gain.

    The utility of a coalition is equation 7 on its summed left/right sums (``h`` already the hessian or count
    times ONE), the empty coalition scores 0. Each ``phi_m`` is accumulated times ``M!`` with the integer weights
    ``|B|! (M - |B| - 1)!`` and divided once at the end, so the values add up to the gain up to M units.
    """
    m = len(g_left)
    if not (len(h_left) == len(g_right) == len(h_right) == m):
        raise ValueError("gL, hL, gR, hR must have the same length")
    if m == 0:
        return 0, []
    size = 1 << m
    sum_gl = [0] * size
    sum_hl = [0] * size
    sum_gr = [0] * size
    sum_hr = [0] * size
    utility = [0] * size
    for mask in range(1, size):
        low = mask & -mask
        i = low.bit_length() - 1
        rest = mask ^ low
        sum_gl[mask] = sum_gl[rest] + g_left[i]
        sum_hl[mask] = sum_hl[rest] + h_left[i]
        sum_gr[mask] = sum_gr[rest] + g_right[i]
        sum_hr[mask] = sum_hr[rest] + h_right[i]
        check_all_int256((sum_gl[mask], sum_hl[mask], sum_gr[mask], sum_hr[mask]))
        utility[mask] = split_gain(sum_gl[mask], sum_hl[mask], sum_gr[mask], sum_hr[mask], lam)
    mask_weight = _coalition_weights(m)
    total = factorial(m)
    phi = []
    for p in range(m):
        bit = 1 << p
        acc = 0
        for mask in range(size):
            if not mask & bit:
                acc += mask_weight[mask] * (utility[mask | bit] - utility[mask])
        phi.append(tdiv(check_int256(acc), total))
    return utility[size - 1], phi


_ISQRT_INT256_MAX = isqrt(INT256_MAX)
"""The largest magnitude whose square still fits int256."""


@cache
def _shapley_plan(m: int) -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, ...], ...], int]:
    """What ``split_shapley_fast`` needs for M parties, computed once per M.

    Every non-empty coalition as (mask, its lowest member, the mask without it), in increasing mask order (the
    recurrence ``split_shapley`` uses), and every party's integer coefficients ``c[p][mask]``:
    ``w(mask - {p})`` when p is in the mask, ``-w(mask)`` when not, so that ``sum_mask c[p][mask] * u(mask)``
    equals ``split_shapley``'s accumulator ``sum_{B without p} w(B) (u(B + p) - u(B))`` term by term rearranged
    (integers, so exactly); and ``M!``.
    """
    size = 1 << m
    weight = _coalition_weights(m)
    steps = tuple((mask, (mask & -mask).bit_length() - 1, mask & (mask - 1)) for mask in range(1, size))
    coef = tuple(
        tuple(weight[mask ^ (1 << p)] if mask >> p & 1 else -weight[mask] for mask in range(size)) for p in range(m)
    )
    return steps, coef, factorial(m)


def split_shapley_fast(
    g_left: Sequence[int], h_left: Sequence[int], g_right: Sequence[int], h_right: Sequence[int], lam: int
) -> tuple[int, list[int]]:
    """``split_shapley``, same results and same errors, for the simulator's hot path (a node of every level).

    Why it may skip the per-coalition overflow checks: every coalition sum is bounded by the sum of the parties'
    magnitudes, so when those bounds keep all sums in int256 and all ``g`` squares below ``INT256_MAX``, no check of
    ``split_shapley``'s loop can fail; otherwise this defers to ``split_shapley`` itself, which raises where the
    contract reverts. The utilities are the same integer expressions (``side_score`` inlined), and each party's
    accumulator is the same integer sum in another order, checked and divided as in ``split_shapley``.
    """
    m = len(g_left)
    if not (len(h_left) == len(g_right) == len(h_right) == m):
        raise ValueError("gL, hL, gR, hR must have the same length")
    if m == 0:
        return 0, []
    if (
        sum(map(abs, g_left)) > _ISQRT_INT256_MAX
        or sum(map(abs, g_right)) > _ISQRT_INT256_MAX
        or sum(map(abs, h_left)) > INT256_MAX
        or sum(map(abs, h_right)) > INT256_MAX
    ):
        return split_shapley(g_left, h_left, g_right, h_right, lam)
    steps, coef, total = _shapley_plan(m)
    size = 1 << m
    sum_gl = [0] * size
    sum_hl = [0] * size
    sum_gr = [0] * size
    sum_hr = [0] * size
    utility = [0] * size
    for mask, i, rest in steps:
        gl = sum_gl[mask] = sum_gl[rest] + g_left[i]
        hl = sum_hl[mask] = sum_hl[rest] + h_left[i]
        gr = sum_gr[mask] = sum_gr[rest] + g_right[i]
        hr = sum_hr[mask] = sum_hr[rest] + h_right[i]
        dl, dr = hl + lam, hr + lam
        # side_score: g*g >= 0 and d > 0, so floor division is the truncating division
        utility[mask] = (gl * gl // dl if dl > 0 else 0) + (gr * gr // dr if dr > 0 else 0)
    phi = [tdiv(check_int256(sum(map(mul, c, utility))), total) for c in coef]
    return utility[size - 1], phi


def voting_contribution(vote: int, split_feature: int, gain: int) -> int:
    """kappa (equation 9): the split's gain when the party voted for the chosen feature, else 0.

    The paper prints the opposite (0 on a hit, the gain on a miss), against its stated purpose: rewarding votes for the
    most informative feature."""
    return gain if vote == split_feature else 0


def contribution(phi: int, kappa: int, alpha: int) -> int:
    """c = alpha * kappa + phi (equation 10), alpha in fixed point."""
    return check_int256(tdiv(check_int256(alpha * kappa), ONE) + phi)


@dataclass(frozen=True)
class Credit:
    """The multipliers a party's histograms are credited at (fixed point, ``ONE`` = as claimed), one per quantity.

    Verifiers attest them with their endorsement of a tree's root (``node.protocol.verify``): the ratio between what a
    party claims and what their own rows say it should hold, inverted. The contract credits a party's split sums times
    these, so a party that stretches its histograms by any factor is credited as if it had not (the model still
    uses what it sent). ``NEUTRAL`` credits everything as claimed.
    """

    g: int = ONE
    h: int = ONE
    n: int = ONE

    def __post_init__(self) -> None:
        for name in ("g", "h", "n"):
            value = getattr(self, name)
            if not 0 <= value <= MAX_CREDIT:
                raise ValueError(f"credit {name} = {value} is outside [0, {MAX_CREDIT}]")


MAX_CREDIT: int = 2**80 - 1
"""Largest credit multiplier the contract stores (uint80, about 1.2 million times ``ONE``)."""

NEUTRAL = Credit()


def credited(value: int, multiplier: int) -> int:
    """``value`` times a credit multiplier (fixed point), truncated toward zero as the contract does."""
    return tdiv(check_int256(value * multiplier), ONE)


def credited_sides(
    sides: tuple[int, int, int, int, int, int], credit: Credit, hessian_mode: int
) -> tuple[int, int, int, int]:
    """One party's credited (gL, hL, gR, hR) from its raw (gL, hL, nL, gR, hR, nR) at a split: the gradients times
    ``credit.g``, and what plays the hessian (the hessian sums, or the counts times ONE) times ``credit.h`` or
    ``credit.n``."""
    g_l, h_l, n_l, g_r, h_r, n_r = sides
    if hessian_mode == HESSIAN_COUNT:
        hl, hr = credited(check_int256(n_l * ONE), credit.n), credited(check_int256(n_r * ONE), credit.n)
    else:
        hl, hr = credited(h_l, credit.h), credited(h_r, credit.h)
    return credited(g_l, credit.g), hl, credited(g_r, credit.g), hr


@dataclass(frozen=True)
class Params:
    """The task parameters the contract math needs, all integers (fixed point where real)."""

    lam: int
    learning_rate: int
    min_rows: int
    alpha: int
    hessian_mode: int = HESSIAN_SECOND_ORDER


@dataclass(frozen=True)
class Totals:
    """Aggregated sums of a node: gradient, hessian and row count."""

    g: int
    h: int
    n: int


@dataclass(frozen=True)
class NodeResult:
    """What the contract records for one node of a level.

    Exactly one of ``split`` and ``leaf`` is set. ``left``/``right`` are the children's totals when the node
    splits; ``left_leaf``/``right_leaf`` their leaf values when the level was the last one. ``phi``, ``kappa`` and
    ``contribution`` are per submitting party, in the order of ``party_hists``.
    """

    split: Split | None
    leaf: int | None
    left: Totals | None
    right: Totals | None
    left_leaf: int | None
    right_leaf: int | None
    phi: tuple[int, ...]
    kappa: tuple[int, ...]
    contribution: tuple[int, ...]
    credited_gain: int = 0


def raw_side_sums(hist: NodeHistograms, rank: int, threshold: int) -> tuple[int, int, int, int, int, int]:
    """One party's (gL, hL, nL, gR, hR, nR) at a split, as sent: what its children's totals must equal."""
    g, h, n = hist.g[rank], hist.h[rank], hist.n[rank]
    cut = threshold + 1
    return sum(g[:cut]), sum(h[:cut]), sum(n[:cut]), sum(g[cut:]), sum(h[cut:]), sum(n[cut:])


def party_side_sums(hist: NodeHistograms, rank: int, threshold: int, hessian_mode: int) -> tuple[int, int, int, int]:
    """One party's (gL, hL, gR, hR) at a split, ``h`` already the hessian or count times ONE."""
    g, h, n = hist.g[rank], hist.h[rank], hist.n[rank]
    g_l, h_l, n_l = sum(g[: threshold + 1]), sum(h[: threshold + 1]), sum(n[: threshold + 1])
    g_r, h_r, n_r = sum(g[threshold + 1 :]), sum(h[threshold + 1 :]), sum(n[threshold + 1 :])
    return g_l, hessian_of(h_l, n_l, hessian_mode), g_r, hessian_of(h_r, n_r, hessian_mode)


def resolve_node(
    party_hists: Sequence[NodeHistograms],
    votes: Sequence[int],
    inherited: Totals | None,
    last_level: bool,
    params: Params,
    credits: Sequence[Credit] | None = None,
    shapley_seed: int | None = None,
) -> NodeResult:
    """Resolve one node once its level is complete (every party submitted, or the deadline closed the step).

    ``party_hists`` holds the accepted histograms of the node, one per submitting party in party order, ``votes``
    the same parties' votes for the node and ``credits`` their credit multipliers for the tree (``NEUTRAL`` when
    None). ``inherited`` is the node's totals from its parent's split (None for the root, whose totals are the sums
    of candidate 0). The split and the leaves use the sums as sent; the split Shapley values and the voting
    contributions use the credited sums. Parties without accepted histograms take no part and earn nothing.
    Above ``shapley_estimate.EXACT_MAX_PARTIES`` submitting parties the split Shapley values are estimated from the
    node's seed ``shapley_seed`` (``shapley_estimate.node_seed``), which such a node requires.
    """
    hm = params.hessian_mode
    if len(votes) != len(party_hists):
        raise ValueError("one vote per submitting party is required")
    party_credits = list(credits) if credits is not None else [NEUTRAL] * len(party_hists)
    if len(party_credits) != len(party_hists):
        raise ValueError("one credit per submitting party is required")
    agg = aggregate(party_hists) if party_hists else None
    if inherited is None:
        inherited = Totals(sum(agg.g[0]), sum(agg.h[0]), sum(agg.n[0])) if agg is not None else Totals(0, 0, 0)
    split = best_split(agg, params.lam, params.min_rows, hm) if agg is not None else None
    if split is None:
        value = leaf_value(inherited.g, hessian_of(inherited.h, inherited.n, hm), params.lam, params.learning_rate)
        zeros = (0,) * len(party_hists)
        return NodeResult(None, value, None, None, None, None, zeros, zeros, zeros)
    sides = [
        credited_sides(raw_side_sums(p, split.rank, split.threshold), c, hm)
        for p, c in zip(party_hists, party_credits, strict=True)
    ]
    columns = ([s[0] for s in sides], [s[1] for s in sides], [s[2] for s in sides], [s[3] for s in sides])
    if estimated(len(sides)):
        if shapley_seed is None:
            raise ValueError(f"{len(sides)} parties: an estimated split Shapley value needs the node's seed")
        credited_gain, phi = split_shapley_estimate(*columns, params.lam, shapley_seed)
    else:
        credited_gain, phi = split_shapley(*columns, params.lam)
    kappa = tuple(voting_contribution(v, split.feature, credited_gain) for v in votes)
    contrib = tuple(contribution(p, k, params.alpha) for p, k in zip(phi, kappa, strict=True))
    left = Totals(split.g_left, split.h_left, split.n_left)
    right = Totals(split.g_right, split.h_right, split.n_right)
    left_leaf = right_leaf = None
    if last_level:
        left_leaf = leaf_value(left.g, hessian_of(left.h, left.n, hm), params.lam, params.learning_rate)
        right_leaf = leaf_value(right.g, hessian_of(right.h, right.n, hm), params.lam, params.learning_rate)
    return NodeResult(split, None, left, right, left_leaf, right_leaf, tuple(phi), kappa, contrib, credited_gain)


@dataclass(frozen=True)
class Payouts:
    """The contract's ``_complete``: what each party is owed, what it forfeits, and the requester's remainder."""

    positive: int
    """Sum of the positive totals, finished or not: the denominator, so nobody's amount grows when another leaves."""
    paid: tuple[int, ...]
    forfeited: tuple[int, ...]
    requester: int
    """The rounding remainder plus every forfeited amount (everything when no total is positive)."""


def payouts(totals: Sequence[int], finished: Sequence[bool], reward: int) -> Payouts:
    """Party p's amount is ``reward * c_p / positive`` (truncated; both shifted right together while ``positive`` is
    2^128 or more, so the product fits) for a positive total ``c_p``; it is paid only when p took part to the last
    step, and otherwise forfeited to the requester.

    Why a party that left earns nothing: a party's split Shapley values can be negative (the utility of equation 7
    is not monotone: a party whose rows sit on the other side of the pooled model's residuals lowers the coalition's
    gain), and then getting itself refused, by stretching its histograms until the rules or the verifiers stop it,
    freezes its total before the losses; measured on credit at M = 2 that paid +5 to +8 points of share. Paid on
    completion only, a refusal never raises what a party earns."""
    if len(finished) != len(totals):
        raise ValueError(f"{len(totals)} totals but {len(finished)} finished flags")
    positive = check_int256(sum(max(t, 0) for t in totals))  # the contract's int256 sum of the positive totals
    paid = [0] * len(totals)
    forfeited = [0] * len(totals)
    if positive > 0:
        shift = 0
        while (positive >> shift) >= 1 << 128:
            shift += 1
        den = positive >> shift
        for p, cp in enumerate(totals):
            if cp > 0:
                amount = reward * (cp >> shift) // den
                if finished[p]:
                    paid[p] = amount
                else:
                    forfeited[p] = amount
    return Payouts(positive, tuple(paid), tuple(forfeited), reward - sum(paid))


def reward_shares(totals: Sequence[int], finished: Sequence[bool]) -> list[float]:
    """Each party's share of the reward before rounding: its positive total over every positive total if it took
    part to the last step, else 0 (:func:`payouts`)."""
    if len(finished) != len(totals):
        raise ValueError(f"{len(totals)} totals but {len(finished)} finished flags")
    positive = sum(max(t, 0) for t in totals)
    return [max(t, 0) / positive if positive and done else 0.0 for t, done in zip(totals, finished, strict=True)]
