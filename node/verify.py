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
normal quantile at ``alpha`` split over the tests. The same scale test runs on the hessians and the counts (a stretch
of those), and at a tree's root the party's total count is checked against its PSD's total, whose Laplace noise is
bounded exactly (a Chernoff bound, no normal approximation).

**Where the test runs: a tree's root.** The model's premise, m's rows and j's rows in a cell drawn alike, holds
where the cells are the global bins of every row. Below the root the cells are nodes the tree chose with m's own
rows, and the statistics spread wider than the model says, more so the deeper (``bench.endorse``, per-level
figures). The exact inherited-totals rule makes the deeper tests unnecessary for stretches: a party's totals at
every node are its own sums at the parent's split, down from the root, so a stretch must already be there
(``node.endorsement.decide``).

**Over-dispersion.** The premise is only as good as the PSD's resolution: where the parties differ inside a leaf
(a feature the PSD did not split, a real label within its interval), the claims move away from the estimate by
more than the noise. Each quantity's claims are fitted to the estimate (``claims = s * estimate``, weighted least
squares) and their scatter about the fit, in units of s and relative to the model's variance, estimates how much
wider than the model the claims run (the over-dispersion factor of quasi-likelihood, at least 1); the test's
variance is multiplied by it. A stretch moves the fit, not the scatter in units of s, so it cannot widen its own
test; an attacker that adds noise to widen it lowers its credit (below) by the same energy. Measured on the stress
data with feature skew, the honest statistics ran 1.6 times wider than the model without it.

The label is resolved by the PSD itself (``node.psd.label_levels_for``): a binary label by one split, a real one
into as many intervals as a feature has bins, since a gradient depends on the label and the parties' labels differ.

**Flipped gradients.** The projection of the gradient claims on the estimate, ``sum w claim`` over its standard
deviation, is positive for an honest party at a tree's root and negative for a flip; it is refused below ``-z``.
Only at the root: boosting fits the pooled rows, noise included, and below the root the nodes were chosen with the
party's own rows, so there honest residuals run against another party's (measured on a9a, M = 2, 100 trees: a fitted
scale of -1.2 at deep levels, what a flip looks like). At the root the measured projections of honest parties stay
above -2.4 standard deviations on every data set of the figures, while a flip times 4 on squared error (no loss bound
stops it) raised a two-party attacker's share by 36 points (abalone) when it went untested.

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
from functools import cached_property, lru_cache
from statistics import NormalDist
from typing import Any, TypeVar, cast

import numpy as np
from numba import njit, prange
from numba.typed import List

from fgbdt_chain.ledger import reference as ref
from fgbdt_chain.node import limbs
from fgbdt_chain.node.histogram import BinnedRows
from fgbdt_chain.node.party_kernels import blocks_of, compile_both, run_on_cores

TESTS = 5
"""Tests per check (gradient, hessian and count stretch, gradient flip, and the root count): ``alpha`` is split evenly
over them (Bonferroni), so a check refuses an honest party with probability at most ``alpha``."""


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

    @cached_property
    def inv_rows(self) -> np.ndarray:
        """``1 / S_l`` of each row's leaf ``l`` (at least one row counted), computed once for every check."""
        return 1.0 / np.maximum(self.leaf_rows[self.leaf], 1.0)

    @classmethod
    def build(cls, weight: np.ndarray, leaf: np.ndarray, num_leaves: int, psd_scale: float, psd_total: float):
        if weight.shape != leaf.shape:
            raise ValueError(f"weights {weight.shape} and leaves {leaf.shape} must have one entry per row")
        if not psd_scale >= 0:
            raise ValueError(f"the PSD noise scale must be >= 0, got {psd_scale}")
        rows = np.bincount(leaf, minlength=num_leaves).astype(np.float64)
        weight = np.ascontiguousarray(weight, dtype=np.float64)  # a column of W: contiguous for the kernel
        return cls(weight, np.ascontiguousarray(leaf, dtype=np.int64), rows, psd_scale, psd_total)


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
    return _limbs_to_float(*limbs.split(values, np.float64))


@dataclass(frozen=True)
class Verdict:
    """One verifier's decision on one party's level: sign or not, why, and the credit it attests."""

    sign: bool
    reasons: tuple[str, ...]
    credit: ref.Credit
    z: dict[str, float] = field(default_factory=dict)
    """The standardised statistics, for logs and benchmarks (positive = larger than the estimate)."""


@dataclass(frozen=True)
class Quantity:
    """One quantity's statistics over a level (g, h or the counts): the weighted claims ``a = sum w claim``, the
    weighted estimates ``b = sum w est``, the standard deviation of ``a - b`` for an honest party, and the energies
    the credit compares. Linear in the claims, so the statistics of claims times F follow exactly (:meth:`scaled`)."""

    a: float
    b: float
    sd: float
    e_claim: float
    e_target: float
    dispersion: float = 1.0
    """How much wider than the model the claims scatter about the estimate (at least 1): the test's variance is
    multiplied by it (module docstring, over-dispersion). The same for the claims times any factor."""

    @property
    def z_stretch(self) -> float:
        """The score of "claims = estimates times s" at s = 1, in standard deviations (the model's, widened by the
        over-dispersion): large when stretched."""
        if not (self.sd > 0 and math.isfinite(self.dispersion)):
            return 0.0
        return (self.a - self.b) / (self.sd * math.sqrt(self.dispersion))

    @property
    def z_flip(self) -> float:
        """The claims' projection on the estimates, in standard deviations (the model's, widened by the
        over-dispersion): positive for an honest party at a root, negative for a flip."""
        if not (self.sd > 0 and math.isfinite(self.dispersion)):
            return 0.0
        return self.a / (self.sd * math.sqrt(self.dispersion))

    def scaled(self, factor: float) -> Quantity:
        """The statistics of the same claims times ``factor``."""
        f = factor
        return Quantity(f * self.a, self.b, self.sd, f * f * self.e_claim, self.e_target, self.dispersion)

    def credit(self) -> int:
        """The attested multiplier (fixed point): ``sqrt(E_target / E_claim)``, 1 when nothing is claimed."""
        if not self.e_claim > 0:
            return ref.ONE
        c = math.sqrt(self.e_target / self.e_claim)
        return min(ref.MAX_CREDIT, round(c * ref.ONE))


@njit(cache=True, nogil=True)
def _measure(  # pragma: no cover - compiled
    cells: np.ndarray,
    ncell: int,
    xs: np.ndarray,
    weight: np.ndarray,
    leaf: np.ndarray,
    inv_rows: np.ndarray,
    num_leaves: int,
    b: float,
    claims: np.ndarray,
    noise_var: np.ndarray,
) -> np.ndarray:
    """Every quantity's (a, b, var(a - b), E_claim, E_target) for rows' cells ``cells`` (2, rows), quantities
    ``xs`` (Q, rows) and claims (Q, 2, ncell).

    Per cell: the estimate ``sum W x``, the party's own sampling variance estimated by ``sum W x^2`` and the
    verifier's, ``sum W^2 x^2`` plus the PSD noise bounded per row by ``2 b^2 x^2 / S_l``; the weight of a cell is
    its estimate over its variance floored at the median cell variance. ``var(a - b)`` sums each row once with its
    weight averaged over the two candidates, and each PSD leaf's noise on the weighted sum of its rows.

    Two passes over the verifier's rows serve every quantity and candidate at once (the cells' sums, then the rows'
    averaged weights); each sum still adds its terms in row order with the same float operations as one pass per
    quantity and candidate would (``tests/test_verify.py`` compares the two bit for bit), so the statistics are the
    same floats, only the independent sums are interleaved.
    """
    nq, rows = xs.shape
    out = np.zeros((nq, 6))
    est = np.zeros((nq, 2, ncell))
    vp = np.zeros((nq, 2, ncell))
    vv = np.zeros((nq, 2, ncell))
    w = np.zeros((nq, 2, ncell))
    used = np.zeros((nq, 2), dtype=np.bool_)
    two_b2 = 2.0 * b * b
    for i in range(rows):
        wi, ir = weight[i], inv_rows[i]
        c0, c1 = cells[0, i], cells[1, i]
        for q in range(nq):
            x = xs[q, i]
            wx = wi * x
            p = wx * x
            v = wi * wx * x + two_b2 * x * x * ir
            est[q, 0, c0] += wx
            vp[q, 0, c0] += p
            vv[q, 0, c0] += v
            est[q, 1, c1] += wx
            vp[q, 1, c1] += p
            vv[q, 1, c1] += v
    for q in range(nq):
        a = est_sum = e_claim = e_est = k_party = k_verifier = 0.0
        dispersion = noise_d = 0.0
        for r in range(2):
            e, pv, vr, wr = est[q, r], vp[q, r], vv[q, r], w[q, r]
            if noise_var[q] > 0:  # the party's public privacy noise, on every cell it sends
                pv[:] += noise_var[q]
            nhas = 0
            for c in range(ncell):
                if pv[c] + vr[c] > 0:
                    nhas += 1
            if nhas == 0:
                continue
            used[q, r] = True
            v = pv + vr
            floor = np.median(v[v > 0])
            # over-dispersion: the claims' scatter about their best fit ``s * est``, relative to the model's variance
            # and in units of s (so the same for claims times any F), over the cells' degrees of freedom
            cross = fit = 0.0
            for c in range(ncell):
                if v[c] > 0:
                    cross += claims[q, r, c] * e[c] / v[c]
                    fit += e[c] * e[c] / v[c]
            if nhas > 1 and fit > 0 and cross != 0:
                s = cross / fit
                resid = 0.0
                for c in range(ncell):
                    if v[c] > 0:
                        d = claims[q, r, c] - s * e[c]
                        resid += d * d / v[c]
                dispersion += 0.5 * resid / (s * s * (nhas - 1))
            elif nhas > 1:
                dispersion += 0.5 * np.inf
            for c in range(ncell):
                vc = v[c]
                wr[c] = e[c] / (vc if vc > floor else floor)
                claim = claims[q, r, c]
                a += 0.5 * wr[c] * claim
                noise_d += 0.25 * wr[c] * wr[c] * noise_var[q]  # each cell's own privacy noise in the claims
                est_sum += 0.5 * wr[c] * e[c]
                if vc > 0:
                    e_claim += 0.5 * claim * claim / vc
                    e_est += 0.5 * e[c] * e[c] / vc
                    k_party += 0.5 * pv[c] / vc
                    k_verifier += 0.5 * vr[c] / vc
        out[q, 0] = a
        out[q, 1] = est_sum
        out[q, 3] = e_claim
        out[q, 4] = max(e_est - k_verifier, 0.0) + k_party
        out[q, 5] = max(dispersion, 1.0)
        out[q, 2] = noise_d  # var(a - b) without the rows' terms, added below
    var_d = np.zeros(nq)
    leaf_sum = np.zeros((nq, num_leaves))
    for i in range(rows):
        wi, ir = weight[i], inv_rows[i]
        ww = wi + wi * wi
        lf = leaf[i]
        c0, c1 = cells[0, i], cells[1, i]
        for q in range(nq):
            u = 0.0
            if used[q, 0]:
                u += 0.5 * w[q, 0, c0]
            if used[q, 1]:
                u += 0.5 * w[q, 1, c1]
            ux = u * xs[q, i]
            var_d[q] += ww * ux * ux
            leaf_sum[q, lf] += ux * ir
    for q in range(nq):
        d = var_d[q]
        for lf in range(num_leaves):
            d += two_b2 * leaf_sum[q, lf] * leaf_sum[q, lf]
        out[q, 2] = d + out[q, 2]
    return out


@lru_cache(maxsize=4096)
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


@dataclass(frozen=True)
class Measurement:
    """Verifier j's statistics of party m's level: per quantity, and at a tree's root the party's claimed total
    count with what its PSD releases."""

    g: Quantity
    h: Quantity
    n: Quantity
    root_rows: float | None
    psd_total: float
    psd_leaves: int
    psd_scale: float
    count_noise_sd: float = 0.0
    """Standard deviation of the privacy noise on the claimed root total (a private task's released totals)."""

    def scaled(self, g: float = 1.0, h: float = 1.0, n: float = 1.0) -> Measurement:
        """The measurement of the same level with the gradient, hessian and count sums times these factors: what a
        verifier would measure of a party stretching its rows (``node.attacks``), exactly for every statistic."""
        rows = None if self.root_rows is None else self.root_rows * n
        return Measurement(
            self.g.scaled(g),
            self.h.scaled(h),
            self.n.scaled(n),
            rows,
            self.psd_total,
            self.psd_leaves,
            self.psd_scale,
            self.count_noise_sd,
        )


@dataclass(frozen=True)
class VerifierLevel:
    """A verifier's own side of a level, the same whichever party it checks: its rows in the open nodes, each
    row's cell (node * nbins + bin) in both candidates, and the quantities (g, h, 1) of those rows."""

    idx: np.ndarray
    cells: np.ndarray
    xs: np.ndarray
    nodes: int
    nbins: int

    @classmethod
    def of(
        cls, rows: BinnedRows, k_of_row: np.ndarray, candidates: np.ndarray, g: np.ndarray, h: np.ndarray
    ) -> VerifierLevel:
        """``k_of_row`` places the rows among the level's open nodes (-1: elsewhere), ``candidates`` is
        (nodes, 2), ``g`` and ``h`` are the verifier's gradients and hessians."""
        nbins = rows.nbins
        cand = np.asarray(candidates, dtype=np.int64)
        if cand.shape[0] == 1 and k_of_row.size and int(k_of_row.min()) == 0:
            # a tree's root (one node holding every row): each candidate's cells are its column of slots
            idx = np.arange(k_of_row.size)
            cells = np.stack([rows.slots_t[cand[0, r]].astype(np.int64) for r in range(2)])
            return cls(idx, cells, np.stack([g, h, np.ones(idx.size)]), 1, nbins)
        idx = np.flatnonzero(k_of_row >= 0)
        node = k_of_row[idx]
        cells = np.stack([node * nbins + rows.slots[idx, cand[node, r]].astype(np.int64) for r in range(2)])
        xs = np.stack([g[idx], h[idx], np.ones(idx.size)])
        return cls(idx, cells, xs, int(cand.shape[0]), nbins)


def measure(
    level: VerifierLevel,
    estimator: PartyEstimator,
    claims: Claims,
    *,
    root: bool,
    noise_sd: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> Measurement:
    """Verifier j's statistics of party m's level (module docstring); ``root`` says whether this is a tree's root
    (where the count total is checked against m's PSD); ``noise_sd`` is the standard deviation of the privacy noise
    on every bin of g, h and n (public: ``node.privacy``), which the claims carry on top of their sampling noise."""
    _check_claims(level, claims)
    weight, leaf, inv_rows = _rows(level, estimator)
    num_leaves = estimator.leaf_rows.shape[0]
    claimed, noise_var = _claimed(claims), _noise_var(noise_sd)
    b = float(estimator.psd_scale)
    ncell = level.nodes * level.nbins
    stats = _measure(level.cells, ncell, level.xs, weight, leaf, inv_rows, num_leaves, b, claimed, noise_var)
    return _measurement(stats, estimator, claims, root, noise_sd)


def measure_many(
    checks: Sequence[tuple[VerifierLevel, PartyEstimator, Claims]],
    *,
    root: bool,
    noise_sd: tuple[float, float, float] = (0.0, 0.0, 0.0),
    threads: int = 1,
    compile_only: bool = False,
    cache: dict[tuple[int, ...], Any] | None = None,
) -> list[Measurement]:
    """``measure`` of every (verifier's side, its view of a party, the party's claims), the statistics of all of them
    in one call spread over ``threads`` threads (``node.party_kernels.run_on_cores``): the same floats, each check's
    sums in its own row order. A side or claims shared by several checks (one verifier checking every party, one
    party checked by every verifier) are passed once. ``compile_only``: load (or compile) the kernels for these
    arguments without running them (a warm-up that starts no thread). ``cache``: where the estimators' row lists of
    checks of every row (a tree's root) are kept from one call to the next, the same estimators coming back at every
    tree (a numba list costs 5 us per array to build); its owner drops them with it."""
    if not checks:
        return []
    sides, side_of = _distinct([level for level, _, _ in checks])
    parties, claims_of = _distinct([claims for _, _, claims in checks])
    for level, _, claims in checks:
        _check_claims(level, claims)
    ncell = {level.nodes * level.nbins for level in sides}
    if len(ncell) != 1:
        raise ValueError("every check of a level has as many cells")
    weight, leaf, inv_rows = _rows_of(checks, cache)
    out = np.zeros((len(checks), 3, 6))
    args = (
        List([level.cells for level in sides]),
        List([level.xs for level in sides]),
        side_of,
        ncell.pop(),
        weight,
        leaf,
        inv_rows,
        np.array([estimator.leaf_rows.shape[0] for _, estimator, _ in checks], dtype=np.int64),
        np.array([estimator.psd_scale for _, estimator, _ in checks], dtype=np.float64),
        List([_claimed(claims) for claims in parties]),
        claims_of,
        _noise_var(noise_sd),
        out,
    )
    blocks = blocks_of([level.idx.size for level, _, _ in checks], threads)
    if compile_only:
        compile_both(_measure_parallel, _measure_serial, *blocks, *args)
    else:
        run_on_cores(threads, blocks, _measure_parallel, _measure_serial, *args)
    return [
        _measurement(stats, estimator, claims, root, noise_sd)
        for stats, (_, estimator, claims) in zip(out, checks, strict=True)
    ]


T = TypeVar("T")


def _distinct(items: Sequence[T]) -> tuple[list[T], np.ndarray]:
    """The distinct objects (by identity), in first-seen order, and each item's index among them."""
    seen: dict[int, int] = {}
    out: list[T] = []
    index = np.empty(len(items), dtype=np.int64)
    for k, item in enumerate(items):
        at = seen.setdefault(id(item), len(out))
        if at == len(out):
            out.append(item)
        index[k] = at
    return out, index


def _rows_of(
    checks: Sequence[tuple[VerifierLevel, PartyEstimator, Claims]], cache: dict[tuple[int, ...], Any] | None
) -> tuple[Any, Any, Any]:
    """Each check's (weight, leaf, 1 / leaf rows) of the verifier's rows in the level, as three numba lists (kept in
    ``cache`` for checks of every row, at most 8 sets of estimators)."""
    estimators = tuple(estimator for _, estimator, _ in checks)
    rows = [_rows(level, estimator) for level, estimator, _ in checks]
    if all(r[0] is e.weight for r, e in zip(rows, estimators, strict=True)):  # every row: the estimators' own arrays
        key = tuple(map(id, estimators))
        cached = None if cache is None else cache.get(key)
        if cached is not None and all(a is b for a, b in zip(cached[0], estimators, strict=True)):
            return cast(tuple[Any, Any, Any], cached[1])
        lists = tuple(List([r[q] for r in rows]) for q in range(3))
        if cache is not None:
            if len(cache) >= 8:
                cache.pop(next(iter(cache)))
            cache[key] = estimators, lists  # the estimators kept: their ids cannot be reused while cached
        return lists
    return tuple(List([r[q] for r in rows]) for q in range(3))


def _check_claims(level: VerifierLevel, claims: Claims) -> None:
    if claims.g.shape != (level.nodes, 2, level.nbins):
        raise ValueError(f"claims of shape {claims.g.shape}, expected {(level.nodes, 2, level.nbins)}")


def _rows(level: VerifierLevel, estimator: PartyEstimator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The estimator's (weight, leaf, 1 / leaf rows) of the verifier's rows in the level: its own arrays where the
    level holds every row (a tree's root), else copies of those rows."""
    if level.idx.size == estimator.weight.size:
        return estimator.weight, estimator.leaf, estimator.inv_rows
    return estimator.weight[level.idx], estimator.leaf[level.idx], estimator.inv_rows[level.idx]


def _claimed(claims: Claims) -> np.ndarray:
    """A party's claims as the kernel reads them: (quantity, candidate, node * nbins + bin)."""
    k, _, nbins = claims.g.shape
    return np.stack([c.transpose(1, 0, 2).reshape(2, k * nbins) for c in (claims.g, claims.h, claims.n)])


def _noise_var(noise_sd: tuple[float, float, float]) -> np.ndarray:
    return np.array([s * s for s in noise_sd], dtype=np.float64)


def _measurement(
    stats: np.ndarray, estimator: PartyEstimator, claims: Claims, root: bool, noise_sd: tuple[float, float, float]
) -> Measurement:
    qg, qh, qn = (Quantity(s[0], s[1], math.sqrt(s[2]), s[3], s[4], s[5]) for s in stats.tolist())
    root_rows = float(claims.n[:, 0, :].sum()) if root else None
    num_leaves = estimator.leaf_rows.shape[0]
    return Measurement(qg, qh, qn, root_rows, estimator.psd_total, num_leaves, estimator.psd_scale, noise_sd[2])


@njit(cache=True, nogil=True)
def _measure_one(  # pragma: no cover - compiled
    p: int,
    cells: Sequence[np.ndarray],
    xs: Sequence[np.ndarray],
    side_of: np.ndarray,
    ncell: int,
    weight: Sequence[np.ndarray],
    leaf: Sequence[np.ndarray],
    inv_rows: Sequence[np.ndarray],
    num_leaves: np.ndarray,
    b: np.ndarray,
    claims: Sequence[np.ndarray],
    claims_of: np.ndarray,
    noise_var: np.ndarray,
    out: np.ndarray,
) -> None:
    s = side_of[p]
    out[p] = _measure(
        cells[s], ncell, xs[s], weight[p], leaf[p], inv_rows[p], num_leaves[p], b[p], claims[claims_of[p]], noise_var
    )


@njit(cache=True, nogil=True, parallel=True)
def _measure_parallel(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    cells: Sequence[np.ndarray],
    xs: Sequence[np.ndarray],
    side_of: np.ndarray,
    ncell: int,
    weight: Sequence[np.ndarray],
    leaf: Sequence[np.ndarray],
    inv_rows: Sequence[np.ndarray],
    num_leaves: np.ndarray,
    b: np.ndarray,
    claims: Sequence[np.ndarray],
    claims_of: np.ndarray,
    noise_var: np.ndarray,
    out: np.ndarray,
) -> None:
    for block in prange(block_start.shape[0] - 1):
        for t in range(block_start[block], block_start[block + 1]):
            _measure_one(
                block_party[t],
                cells,
                xs,
                side_of,
                ncell,
                weight,
                leaf,
                inv_rows,
                num_leaves,
                b,
                claims,
                claims_of,
                noise_var,
                out,
            )


@njit(cache=True, nogil=True)
def _measure_serial(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    cells: Sequence[np.ndarray],
    xs: Sequence[np.ndarray],
    side_of: np.ndarray,
    ncell: int,
    weight: Sequence[np.ndarray],
    leaf: Sequence[np.ndarray],
    inv_rows: Sequence[np.ndarray],
    num_leaves: np.ndarray,
    b: np.ndarray,
    claims: Sequence[np.ndarray],
    claims_of: np.ndarray,
    noise_var: np.ndarray,
    out: np.ndarray,
) -> None:
    for block in range(block_start.shape[0] - 1):
        for t in range(block_start[block], block_start[block + 1]):
            _measure_one(
                block_party[t],
                cells,
                xs,
                side_of,
                ncell,
                weight,
                leaf,
                inv_rows,
                num_leaves,
                b,
                claims,
                claims_of,
                noise_var,
                out,
            )


@lru_cache(maxsize=64)
def limit(alpha: float) -> float:
    """The standard-normal quantile each one-sided test refuses beyond: ``alpha`` split over the ``TESTS``."""
    return NormalDist().inv_cdf(1 - alpha / TESTS)


def judge(m: Measurement, alpha: float) -> Verdict:
    """The verdict on a measurement at false-refusal rate ``alpha`` (split over the ``TESTS`` tests)."""
    if not 0 < alpha < 1:
        raise ValueError(f"the false-refusal rate must be in (0, 1), got {alpha}")
    z = limit(alpha)
    stats = {"g": m.g.z_stretch, "g_flip": m.g.z_flip, "h": m.h.z_stretch, "n": m.n.z_stretch}
    reasons = []
    if m.g.z_stretch > z:
        reasons.append(f"gradient sums {m.g.z_stretch:.1f} sd above this verifier's estimate (limit {z:.1f})")
    if m.g.z_flip < -z:
        reasons.append(f"gradient sums point against this verifier's estimate ({m.g.z_flip:.1f} sd, limit {-z:.1f})")
    if m.h.z_stretch > z:
        reasons.append(f"hessian sums {m.h.z_stretch:.1f} sd above this verifier's estimate (limit {z:.1f})")
    if m.n.z_stretch > z:
        reasons.append(f"row counts {m.n.z_stretch:.1f} sd above this verifier's estimate (limit {z:.1f})")
    if m.root_rows is not None:
        excess = m.root_rows - m.psd_total
        bound = count_bound(m.psd_leaves, m.psd_scale, alpha / TESTS)
        if m.count_noise_sd > 0:  # the released total's Gaussian noise on top: half the test's rate to each
            half = alpha / TESTS / 2
            bound = count_bound(m.psd_leaves, m.psd_scale, half) + NormalDist().inv_cdf(1 - half) * m.count_noise_sd
        stats["count_excess"] = excess
        if m.psd_scale > 0 and excess > bound:
            reasons.append(f"{excess:.0f} more rows than the party's PSD releases (limit {bound:.0f})")
    credit = ref.Credit(m.g.credit(), m.h.credit(), m.n.credit())
    return Verdict(not reasons, tuple(reasons), credit, stats)


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
    """Verifier j's check of party m's level: :func:`judge` of :func:`measure`."""
    if not 0 < alpha < 1:
        raise ValueError(f"the false-refusal rate must be in (0, 1), got {alpha}")
    return judge(measure(VerifierLevel.of(rows, k_of_row, candidates, g, h), estimator, claims, root=root), alpha)


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


def warm_up(simulator: bool = True) -> None:
    """Load (or compile) the statistics kernel on a tiny level, so that a timed run measures the checks; with
    ``simulator``, also the checks of every party at once (``measure_many``), which a party node never runs."""
    rows = BinnedRows(np.array([[0, 1], [1, 0]], dtype=np.uint8), 2)
    ones = np.ones(2)
    level = VerifierLevel.of(rows, np.zeros(2, dtype=np.int64), np.array([[0, 1]]), ones, ones)
    estimator = PartyEstimator.build(ones, np.zeros(2, dtype=np.int64), 1, 1.0, 2.0)
    claims = Claims(np.ones((1, 2, 2)), np.ones((1, 2, 2)), np.ones((1, 2, 2)))
    measure(level, estimator, claims, root=True)
    if simulator:
        measure_many([(level, estimator, claims)] * 2, root=True, threads=2, compile_only=True)
