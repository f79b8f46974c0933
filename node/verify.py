"""The endorsement check: a verifier compares another party's histograms with what its own rows say they should be.

Verifier j cannot see party m's rows, but it holds ``W[:, m]``, which re-weights j's rows to mimic m's distribution
(Algorithm 2), and the gradients of any row follow from the shared model. So j builds, cell by cell (an open node's
candidate bin), an estimate of m's sums of g, h and the row count: ``sum W x`` over its own rows in the cell.

**Why a test with an error rate, not an overlap threshold.** The estimate is noisy, and how noisy depends on how many
rows stand behind a cell: a threshold on a distance (the paper's equation 11, NOTES 8) that fits a9a's root refuses
honest parties at deep levels of smaller data sets and lets a 2x stretch through where thousands of rows stand behind
every bin. Here the differences are standardised by a model of their noise, and the verifier refuses only what that
model makes improbable at the task's false-refusal rate ``alpha`` (one per check, on chain in ``Config.refusalRate``).

**The noise model.** Under the hypothesis that m is honest, m's rows in a PSD leaf and j's rows in the same leaf come
from the same distribution, so a cell's claim minus its estimate is a sum of independent row terms: m's rows (each
``x``, variance estimated by j's rows re-weighted, ``sum W x^2``), j's rows (``-W x``, variance ``sum W^2 x^2``) and
the PSD's Laplace noise on every leaf count (scale ``b``, public: it comes with the PSD), which moves every estimate
of that leaf together. Other public noise (differential privacy on the histograms) adds its own variance here.

**The statistics**, each a weighted sum of claims minus estimates over a level's cells (both candidates averaged, so
that each row counts once): with weights ``w_c = est_c / V_c`` (a cell's estimate over its variance, floored at the
median cell variance so that no thin cell dominates), ``D = sum w (claim - est)`` is the score test of "the claims
are the estimates times s" at s = 1; it grows with a stretch (s > 1) and is refused when ``D / sd(D) > z``, ``z`` the
normal quantile at ``alpha`` split over the tests. ``A = sum w claim`` runs against the estimate when the claims are
flipped; refused when ``A / sd(D) < -z``. The same scale test runs on the hessians and the counts (a stretch of
those), and at a tree's root the party's total count is checked against its PSD's total, whose Laplace noise is
bounded exactly (a Chernoff bound, no normal approximation).

**Credit multipliers.** A verifier also attests how much of a party's histograms its estimate supports: per
quantity, ``c = sqrt(E_target / E_claim)``, the square root of the claims' energy ``sum claim^2 / V`` against the
energy an honest party's claims would have (the estimate's energy less its own noise, plus the party's noise). A
party that multiplies its histograms by F has ``E_claim`` times F^2 and so ``c`` divided by F: credited at
``claim * c`` (``ledger.reference.Credit``), it earns what it would have earned honestly, whatever F. The
verifiers' rows enter c the same way for every party, attacker or not.

Equation 11 (``level_overlap``) stays available as the paper's reading (``Config.endorseRule`` = overlap).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from ledger import reference as ref
from node.histogram import BinnedRows

TESTS = 5
"""Tests per check (gradient stretch, gradient flip, hessian stretch, count stretch, root count): ``alpha`` is
split evenly over them (Bonferroni), so a check refuses an honest party with probability at most ``alpha``."""

DEFAULT_REFUSAL_RATE = 1e-9
"""Default false-refusal probability per check. A task of 500 trees x 8 levels x 8 parties makes 32,000
submissions, each checked by 7 verifiers: at most 2.2e-4 expected honest refusals of one check, and a submission is
refused only when more than a third of its verifiers refuse it."""

_LIMB = 2.0**32
_ONE = float(ref.ONE)


@dataclass(frozen=True)
class PartyEstimator:
    """Verifier j's fixed view of party m: its rows' weights for m and where they fall in m's PSD."""

    weight: np.ndarray
    """``W[:, m]`` over j's rows (Algorithm 2)."""
    leaf: np.ndarray
    """Leaf of m's PSD of each of j's rows."""
    leaf_rows: np.ndarray
    """j's rows per leaf of m's PSD."""
    psd_scale: float
    """Laplace scale of m's released leaf counts (public, published with the PSD)."""
    psd_total: float
    """m's released total count."""

    @classmethod
    def build(cls, weight: np.ndarray, leaf: np.ndarray, num_leaves: int, psd_scale: float, psd_total: float):
        if weight.shape != leaf.shape:
            raise ValueError(f"weights {weight.shape} and leaves {leaf.shape} must have one entry per row")
        if not psd_scale >= 0:
            raise ValueError(f"the PSD noise scale must be >= 0, got {psd_scale}")
        rows = np.bincount(leaf, minlength=num_leaves).astype(np.float64)
        return cls(np.asarray(weight, dtype=np.float64), np.asarray(leaf, dtype=np.int64), rows, psd_scale, psd_total)


@dataclass(frozen=True)
class Claims:
    """A party's level histograms as the verifier reads them: float (g, h, n) sums of shape (nodes, 2, nbins)."""

    g: np.ndarray
    h: np.ndarray
    n: np.ndarray

    @classmethod
    def from_limbs(cls, g_hi: np.ndarray, g_lo: np.ndarray, h_hi: np.ndarray, h_lo: np.ndarray, n: np.ndarray):
        """From exact fixed-point sums held as two int64 limbs (``hi * 2**32 + lo``): every value is converted
        exactly as :meth:`from_messages` converts the same integer, so simulator and node read the same floats."""
        return cls(_limbs_to_float(g_hi, g_lo), _limbs_to_float(h_hi, h_lo), n.astype(np.float64))

    @classmethod
    def from_messages(cls, hists: Sequence[ref.NodeHistograms]) -> Claims:
        g = np.array([h.g for h in hists], dtype=object)
        h = np.array([x.h for x in hists], dtype=object)
        n = np.array([x.n for x in hists], dtype=np.float64)
        return cls(_ints_to_float(g), _ints_to_float(h), n)


def _limbs_to_float(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    # hi * 2**32 is exact and the sum is rounded once: the float of the integer, then divided by ONE
    return (hi.astype(np.float64) * _LIMB + lo.astype(np.float64)) / _ONE


def _ints_to_float(values: np.ndarray) -> np.ndarray:
    q = values.astype(object)
    hi = np.vectorize(lambda v: v >> 32, otypes=[object])(q)
    lo = q - hi * (1 << 32)
    return _limbs_to_float(hi.astype(np.float64), lo.astype(np.float64))


@dataclass(frozen=True)
class Verdict:
    """One verifier's decision on one party's level: sign or not, why, and the credit it attests."""

    sign: bool
    reasons: tuple[str, ...]
    credit: ref.Credit
    z: dict[str, float] = field(default_factory=dict)
    """The standardised statistics, for logs and benchmarks (positive = larger than the estimate)."""


@dataclass(frozen=True)
class _Quantity:
    """One quantity's statistics over a level: the score D, the flip score A, sd(D), and the energies."""

    d: float
    a: float
    sd: float
    e_claim: float
    e_target: float

    @property
    def z_stretch(self) -> float:
        return self.d / self.sd if self.sd > 0 else 0.0

    @property
    def z_flip(self) -> float:
        return self.a / self.sd if self.sd > 0 else 0.0

    def credit(self) -> int:
        """The attested multiplier (fixed point): ``sqrt(E_target / E_claim)``, 1 when nothing is claimed."""
        if not self.e_claim > 0:
            return ref.ONE
        c = math.sqrt(self.e_target / self.e_claim)
        return min(ref.MAX_CREDIT, round(c * ref.ONE))


def _quantity(
    cells: Sequence[np.ndarray],
    ncell: int,
    x: np.ndarray,
    weight: np.ndarray,
    leaf: np.ndarray,
    inv_rows: np.ndarray,
    num_leaves: int,
    b: float,
    claims: np.ndarray,
) -> _Quantity:
    """Statistics of one quantity (x = g, h or 1 per verifier row in the level's open nodes) against the claims
    (nodes, 2, nbins). ``cells[r]`` is each row's cell (node * nbins + bin) in candidate r."""
    wx = weight * x
    var_party = weight * x * x  # m's rows, estimated through j's rows re-weighted
    var_verifier = weight * wx * x + 2.0 * b * b * x * x * inv_rows  # j's sampling, and the PSD noise (bounded)
    d = a = e_claim = e_est = k_party = k_verifier = 0.0
    u = np.zeros(x.shape[0])
    for r, c in enumerate(cells):
        est = np.bincount(c, wx, ncell)
        vp = np.bincount(c, var_party, ncell)
        vv = np.bincount(c, var_verifier, ncell)
        v = vp + vv
        has = v > 0
        claim = claims[:, r, :].ravel()
        if not has.any():
            continue
        floor = float(np.median(v[has]))
        w = est / np.maximum(v, floor)
        d += 0.5 * float(np.dot(w, claim - est))
        a += 0.5 * float(np.dot(w, claim))
        u += 0.5 * w[c]
        e_claim += 0.5 * float(np.sum(claim[has] ** 2 / v[has]))
        e_est += 0.5 * float(np.sum(est[has] ** 2 / v[has]))
        k_party += 0.5 * float(np.sum(vp[has] / v[has]))
        k_verifier += 0.5 * float(np.sum(vv[has] / v[has]))
    # sd(D): m's rows and j's rows, each row once with its averaged weight, and every PSD leaf's noise
    leaf_sum = np.bincount(leaf, u * x * inv_rows, num_leaves)
    var_d = float(np.sum((weight + weight * weight) * u * u * x * x)) + 2.0 * b * b * float(np.sum(leaf_sum**2))
    e_target = max(e_est - k_verifier, 0.0) + k_party
    return _Quantity(d, a, math.sqrt(var_d), e_claim, e_target)


def count_bound(num_leaves: int, scale: float, alpha: float) -> float:
    """The t with P(sum of ``num_leaves`` Laplace(``scale``) >= t) <= alpha, by the Chernoff bound.

    Why exact: an honest party's true count N and its PSD's released total (every leaf ``max(0, n_l + noise_l)``)
    satisfy ``N - total <= -sum noise_l`` (a clipped leaf only adds), and the log-MGF of Laplace(b) is
    ``-log(1 - l^2 b^2)`` for ``l < 1/b``; the bound minimises ``exp(-l t) / (1 - l^2 b^2)^L`` over l.
    """
    if scale <= 0 or num_leaves <= 0:
        return 0.0
    log_alpha = math.log(alpha)

    def log_tail(t: float) -> float:
        # minimiser of -l t - L log(1 - l^2 b^2): l b = (sqrt(L^2 + (t/b)^2) - L) / (t/b)
        s = t / scale
        lb = (math.sqrt(num_leaves**2 + s * s) - num_leaves) / s
        return -lb * s - num_leaves * math.log(1 - lb * lb)

    lo, hi = 0.0, scale * (num_leaves + 10.0)
    while log_tail(hi) > log_alpha:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid <= 0 or log_tail(mid) > log_alpha:
            lo = mid
        else:
            hi = mid
    return hi


def check(
    rows: BinnedRows,
    k_of_row: np.ndarray,
    candidates: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    estimator: PartyEstimator,
    claims: Claims,
    alpha: float,
    *,
    root: bool,
) -> Verdict:
    """Verifier j's statistical check of party m's level (module docstring).

    ``k_of_row`` places j's rows among the level's open nodes (-1: elsewhere), ``candidates`` is (nodes, 2), ``g``
    and ``h`` are j's gradients and hessians, ``claims`` m's histograms, ``root`` whether this is a tree's root
    (where the count total is checked against m's PSD).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"the false-refusal rate must be in (0, 1), got {alpha}")
    k = int(candidates.shape[0])
    nbins = rows.nbins
    if claims.g.shape != (k, 2, nbins):
        raise ValueError(f"claims of shape {claims.g.shape}, expected {(k, 2, nbins)}")
    idx = np.flatnonzero(k_of_row >= 0)
    node = k_of_row[idx]
    cells = [node * nbins + rows.slots[idx, candidates[node, r]].astype(np.int64) for r in range(2)]
    weight = estimator.weight[idx]
    leaf = estimator.leaf[idx]
    inv_rows = 1.0 / np.maximum(estimator.leaf_rows[leaf], 1.0)
    num_leaves = estimator.leaf_rows.shape[0]
    b = estimator.psd_scale
    ncell = k * nbins
    qg = _quantity(cells, ncell, g[idx], weight, leaf, inv_rows, num_leaves, b, claims.g)
    qh = _quantity(cells, ncell, h[idx], weight, leaf, inv_rows, num_leaves, b, claims.h)
    qn = _quantity(cells, ncell, np.ones(idx.size), weight, leaf, inv_rows, num_leaves, b, claims.n)
    z = NormalDist().inv_cdf(1 - alpha / TESTS)
    stats = {"g": qg.z_stretch, "g_flip": qg.z_flip, "h": qh.z_stretch, "n": qn.z_stretch}
    reasons = []
    if qg.z_stretch > z:
        reasons.append(f"gradient sums {qg.z_stretch:.1f} sd above this verifier's estimate (limit {z:.1f})")
    if qg.z_flip < -z:
        reasons.append(f"gradient sums run against this verifier's estimate ({qg.z_flip:.1f} sd, limit -{z:.1f})")
    if qh.z_stretch > z:
        reasons.append(f"hessian sums {qh.z_stretch:.1f} sd above this verifier's estimate (limit {z:.1f})")
    if qn.z_stretch > z:
        reasons.append(f"row counts {qn.z_stretch:.1f} sd above this verifier's estimate (limit {z:.1f})")
    if root:
        excess = float(claims.n[:, 0, :].sum()) - estimator.psd_total
        limit = count_bound(num_leaves, b, alpha / TESTS)
        stats["count_excess"] = excess
        if b > 0 and excess > limit:
            reasons.append(f"{excess:.0f} more rows than the party's PSD releases (limit {limit:.0f})")
    credit = ref.Credit(qg.credit(), qh.credit(), qn.credit())
    return Verdict(not reasons, tuple(reasons), credit, stats)


# ---------------------------------------------------------------------------------------------------------------
# The paper's reading (Config.endorseRule = overlap): equation 11 against a fixed threshold, no credit.


def relative_differences(claimed: np.ndarray, estimate: np.ndarray) -> tuple[float, int]:
    """Sum of ``|a - b| / max(|a|, |b|)`` over entries, 0 where both are 0, and the number of non-zero terms."""
    a, b = np.abs(claimed), np.abs(estimate)
    scale = np.maximum(a, b)
    occupied = scale > 0
    terms = np.abs(claimed - estimate)[occupied] / scale[occupied]
    return float(terms.sum()), int(occupied.sum())


def overlap(claimed_g: np.ndarray, claimed_n: np.ndarray, est_g: np.ndarray, est_n: np.ndarray) -> float:
    """Equation 11 with magnitudes (NOTES 8): the gradient terms plus the count terms."""
    return relative_differences(claimed_g, est_g)[0] + relative_differences(claimed_n, est_n)[0]


def level_overlap(claimed_g: np.ndarray, claimed_n: np.ndarray, est_g: np.ndarray, est_n: np.ndarray) -> float:
    """Equation 11's terms over a whole level, each weighted by its magnitude, ``sum |a - b| / sum max(|a|, |b|)``,
    averaged over the gradient and the count histograms: a number in [0, 2] comparable across levels."""
    out = 0.0
    for a, b in ((claimed_g, est_g), (claimed_n, est_n)):
        den = float(np.maximum(np.abs(a), np.abs(b)).sum())
        out += float(np.abs(a - b).sum()) / den if den > 0 else 0.0
    return out / 2


def check_overlap(
    rows: BinnedRows,
    k_of_row: np.ndarray,
    candidates: np.ndarray,
    g: np.ndarray,
    estimator: PartyEstimator,
    claims: Claims,
    threshold: float,
) -> Verdict:
    """The paper's check: sign when the level overlap is below ``threshold``; an all-zero level (a party without
    rows in the level's nodes, a null player) is always signed. Credits are neutral."""
    if not (claims.g.any() or claims.h.any() or claims.n.any()):
        return Verdict(True, (), ref.NEUTRAL, {"overlap": 0.0})
    est_g, est_n = estimate_histograms(rows, k_of_row, candidates.shape[0], candidates, g, estimator.weight)
    value = level_overlap(claims.g, claims.n, est_g, est_n)
    reasons = () if value < threshold else (f"overlap {value:.4f} is not below the task's threshold {threshold:.4f}",)
    return Verdict(not reasons, reasons, ref.NEUTRAL, {"overlap": value})


def estimate_histograms(
    rows: BinnedRows,
    k_of_row: np.ndarray,
    num_nodes: int,
    candidates: np.ndarray,
    g: np.ndarray,
    weight: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The verifier's estimate of another party's (gradient, count) histograms of every open node's candidates,
    shapes (num_nodes, C, nbins)."""
    est_g, est_n, _ = rows.candidate_histograms(k_of_row, num_nodes, candidates, g * weight, weight)
    return est_g, est_n
