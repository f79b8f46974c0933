"""The endorsement check: a verifier compares another party's histograms with what its own rows say they should be.

Verifier j cannot see party m's rows, but it holds ``W[:, m]``, which re-weights j's rows to mimic m's distribution
(Algorithm 2), and the gradients of any row follow from the shared model. So j builds, cell by cell (an open node's
candidate bin), an estimate of m's sums of g, h and the row count: ``sum W x`` over its own rows in the cell.

**Why a test with an error rate, not an overlap threshold.** The estimate is noisy, and how noisy depends on how many
rows stand behind a cell: a threshold on a distance (the paper's equation 11) that fits a9a's root refuses
honest parties at deep levels of smaller data sets and lets a 2x stretch through where thousands of rows stand behind
every bin. Here the differences are standardised by a model of their noise, and the verifier refuses only what that
model makes improbable at the task's false-refusal rate ``alpha`` (one per check, on chain in ``Config.refusalRate``).

**The noise model.** Under the hypothesis that m is honest, m's rows in a PSD leaf and j's rows in the same leaf come
from the same distribution, so a cell's claim minus its estimate is a sum of independent row terms: m's rows (each
``x``, variance estimated by j's rows re-weighted, ``sum W x^2``), j's rows (``-W x``, variance ``sum W^2 x^2``) and
the PSD's discrete Laplace noise on every leaf count (``node.privacy.discrete_gaussian``; scale ``b``, public: it
comes with the PSD), which moves every estimate of that leaf together. The model counts it at the continuous
Laplace's variance ``2 b^2``; the discrete one's, ``2q / (1 - q)^2`` with ``q = exp(-1/b)``, is below it by up to
1/6 at the same scale. Other public noise (differential privacy on the histograms) adds its own variance here.

**The statistics**, each a weighted sum of claims minus estimates over a level's cells (both candidates averaged, so
that each row counts once): with weights ``w_c = est_c / V_c`` (a cell's estimate over its variance, floored at the
median cell variance so that no thin cell dominates), ``D = sum w (claim - est)`` is the score test of "the claims
are the estimates times s" at s = 1; it grows with a stretch (s > 1) and is refused when ``D / sd(D) > z``, ``z`` the
normal quantile at ``alpha`` split over the tests. The same scale test runs on the hessians and the counts (a stretch
of those), and at a tree's root the party's total count is checked against its PSD's total, whose discrete Laplace
noise is bounded exactly (a Chernoff bound, no normal approximation).

**Where the test runs: a tree's root.** The model's premise, m's rows and j's rows in a cell drawn alike, holds
where the cells are the global bins of every row. Below the root the cells are nodes the tree chose with m's own
rows, and the statistics spread wider than the model says, more so the deeper (``bench.endorse``, per-level
figures). The exact inherited-totals rule makes the deeper tests unnecessary for stretches: a party's totals at
every node are its own sums at the parent's split, down from the root, so a stretch must already be there
(``node.protocol.endorsement.decide``).

**Over-dispersion.** The premise is only as good as the PSD's resolution: where the parties differ inside a leaf
(a feature the PSD did not split, a real label within its interval), the claims move away from the estimate by
more than the noise. Each quantity's claims are fitted to the estimate (``claims = s * estimate``, weighted least
squares) and their scatter about the fit, in units of s and relative to the model's variance, estimates how much
wider than the model the claims run (the over-dispersion factor of quasi-likelihood, at least 1); the test's
variance is multiplied by it. A stretch moves the fit, not the scatter in units of s, so it cannot widen its own
test; an attacker that adds noise to widen it lowers its credit (below) by the same energy. Measured on the stress
data with feature skew, the honest statistics ran 1.6 times wider than the model without it.

The label is resolved by the PSD itself (``node.privacy.psd.label_levels_for``): a binary label by one split, a real one
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
``claim * c`` (``ledger.spec.reference.Credit``), it earns what it would have earned honestly, whatever F. The
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

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.fixed_point import ONE_FLOAT
from fgbdt_chain.node.kernels import limbs
from fgbdt_chain.node.kernels.histogram import BinnedRows
from fgbdt_chain.node.kernels.party_kernels import blocks_of, compile_both, run_on_cores
from fgbdt_chain.node.protocol.chunked_rows import ChunkedRows

TESTS = 5
"""Tests per check (gradient, hessian and count stretch, gradient flip, and the root count): ``alpha`` is split evenly
over them (Bonferroni), so a check refuses an honest party with probability at most ``alpha``."""


_LIMB = 2.0**32


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
    """Discrete Laplace scale of m's released leaf counts (public, published with the PSD)."""
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
    # hi * 2**32 is exact and the sum is rounded once: the float of the integer, then divided by ONE (in place: the
    # same operations on the same floats, ``lo`` converted by the addition as ``astype`` would, without temporaries)
    out = hi.astype(np.float64)
    out *= _LIMB
    out += lo
    out /= ONE_FLOAT
    return out


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
    """Every quantity's (a, b, var(a - b), E_claim, E_target, over-dispersion) for rows' cells ``cells`` (2, rows),
    the quantities ``xs`` (3, rows: g, h and the row count) and claims (3, 2, ncell).

    Per cell: the estimate ``sum W x``, the party's own sampling variance estimated by ``sum W x^2`` and the
    verifier's, ``sum W^2 x^2`` plus the PSD noise bounded per row by ``2 b^2 x^2 / S_l``; the weight of a cell is
    its estimate over its variance floored at the median cell variance. ``var(a - b)`` sums each row once with its
    weight averaged over the two candidates, and each PSD leaf's noise on the weighted sum of its rows.

    Two passes over the verifier's rows serve every quantity and candidate at once (the cells' sums, then the rows'
    averaged weights); each sum still adds its terms in row order with the same float operations as one pass per
    quantity and candidate would (``tests/node/protocol/test_verify.py`` compares the two bit for bit), so the
    statistics are the same floats, only the independent sums are interleaved.
    """
    if xs.shape[0] != 3:
        raise ValueError("the statistics are of three quantities: g, h and the row count")
    two_b2 = 2.0 * b * b
    sums = _cell_sums(cells, ncell, xs, weight, inv_rows, two_b2)
    out = np.zeros((3, 6))
    half_w = np.zeros((2, ncell, 3))
    for q in range(3):
        _fit(q, sums, claims, noise_var[q], out[q], half_w)
    _row_variances(cells, xs, weight, leaf, inv_rows, num_leaves, two_b2, half_w, out)
    return out


@njit(cache=True, nogil=True)
def _cell_sums(  # pragma: no cover - compiled
    cells: np.ndarray, ncell: int, xs: np.ndarray, weight: np.ndarray, inv_rows: np.ndarray, two_b2: float
) -> np.ndarray:
    """The first pass: every cell's ``sum W x``, ``sum W x^2`` and ``sum W^2 x^2 + 2 b^2 x^2 / S_l`` of each
    quantity, (candidate, cell, 3 * quantity + sum). Why this layout and three named quantities: the nine sums a
    row adds to are next to each other (two cache lines a candidate, not eighteen scattered ones), which took the
    pass from 67 to 53 us over a9a's 10,672 rows; each sum is still its rows' terms in row order."""
    acc = np.zeros((2, ncell, 9))
    xg, xh, xn = xs[0], xs[1], xs[2]
    for i in range(xs.shape[1]):
        wi, ir = weight[i], inv_rows[i]
        a0, a1 = acc[0, cells[0, i]], acc[1, cells[1, i]]
        for k, x in ((0, xg[i]), (3, xh[i]), (6, xn[i])):
            wx = wi * x
            p = wx * x
            v = wi * wx * x + two_b2 * x * x * ir
            a0[k] += wx
            a0[k + 1] += p
            a0[k + 2] += v
            a1[k] += wx
            a1[k + 1] += p
            a1[k + 2] += v
    return acc


@njit(cache=True, nogil=True)
def _fit(  # pragma: no cover - compiled
    q: int, sums: np.ndarray, claims: np.ndarray, noise_var: float, out: np.ndarray, half_w: np.ndarray
) -> None:
    """Quantity ``q``'s statistics from its cells' sums (``out``, but var(a - b) only its privacy noise: the rows'
    terms are added by ``_row_variances``), and half its cells' weights in ``half_w[:, :, q]`` (0 where a
    candidate has no cell with a variance, which then weighs no row)."""
    ncell = sums.shape[1]
    a = est_sum = e_claim = e_est = k_party = k_verifier = 0.0
    dispersion = noise_d = 0.0
    for r in range(2):
        e, pv, vr = sums[r, :, 3 * q], sums[r, :, 3 * q + 1], sums[r, :, 3 * q + 2]
        if noise_var > 0:  # the party's public privacy noise, on every cell it sends
            pv[:] += noise_var
        nhas = 0
        for c in range(ncell):
            if pv[c] + vr[c] > 0:
                nhas += 1
        if nhas == 0:
            continue
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
            w = e[c] / (vc if vc > floor else floor)
            half_w[r, c, q] = 0.5 * w
            claim = claims[q, r, c]
            a += 0.5 * w * claim
            noise_d += 0.25 * w * w * noise_var  # each cell's own privacy noise in the claims
            est_sum += 0.5 * w * e[c]
            if vc > 0:
                e_claim += 0.5 * claim * claim / vc
                e_est += 0.5 * e[c] * e[c] / vc
                k_party += 0.5 * pv[c] / vc
                k_verifier += 0.5 * vr[c] / vc
    out[0] = a
    out[1] = est_sum
    out[2] = noise_d  # var(a - b) without the rows' terms, added by ``_row_variances``
    out[3] = e_claim
    out[4] = max(e_est - k_verifier, 0.0) + k_party
    out[5] = max(dispersion, 1.0)


@njit(cache=True, nogil=True)
def _row_variances(  # pragma: no cover - compiled
    cells: np.ndarray,
    xs: np.ndarray,
    weight: np.ndarray,
    leaf: np.ndarray,
    inv_rows: np.ndarray,
    num_leaves: int,
    two_b2: float,
    half_w: np.ndarray,
    out: np.ndarray,
) -> None:
    """The second pass: each row's weight averaged over the candidates, ``u = 0 + w_0 / 2 + w_1 / 2`` (a candidate
    without weighed cells adds 0, the same float as leaving it out, since ``0 + y`` is never -0), its terms of
    var(a - b), ``(W + W^2) (u x)^2``, and its PSD leaf's noise on ``sum u x / S_l``, added to ``out[:, 2]``. The
    three quantities' sums are scalars, not an array (whose every row's store the next row waits for): 74 to 35 us
    over a9a's 10,672 rows."""
    xg, xh, xn = xs[0], xs[1], xs[2]
    leaf_sum = np.zeros((num_leaves, 3))
    dg = dh = dn = 0.0
    for i in range(xs.shape[1]):
        wi, ir = weight[i], inv_rows[i]
        ww = wi + wi * wi
        t0, t1 = half_w[0, cells[0, i]], half_w[1, cells[1, i]]
        ls = leaf_sum[leaf[i]]
        ux = (0.0 + t0[0] + t1[0]) * xg[i]
        dg += ww * ux * ux
        ls[0] += ux * ir
        ux = (0.0 + t0[1] + t1[1]) * xh[i]
        dh += ww * ux * ux
        ls[1] += ux * ir
        ux = (0.0 + t0[2] + t1[2]) * xn[i]
        dn += ww * ux * ux
        ls[2] += ux * ir
    for q, d in ((0, dg), (1, dh), (2, dn)):
        for lf in range(num_leaves):
            d += two_b2 * leaf_sum[lf, q] * leaf_sum[lf, q]
        out[q, 2] = d + out[q, 2]


@lru_cache(maxsize=4096)
def count_bound(num_leaves: int, scale: float, alpha: float) -> float:
    """The t with P(sum of ``num_leaves`` discrete Laplace(``scale``) >= t) <= alpha, by the Chernoff bound.

    Why exact: an honest party's true count N and its PSD's released total (every leaf ``max(0, n_l + noise_l)``)
    satisfy ``N - total <= -sum noise_l`` (a clipped leaf only adds), and the discrete Laplace's moment generating
    function, ``(1 - q)^2 / ((1 - q e^l)(1 - q e^-l))`` with ``q = exp(-1/b)``, is at most the continuous
    Laplace's of the same scale, ``1 / (1 - l^2 b^2)`` for ``l < 1/b``; the bound minimises
    ``exp(-l t) / (1 - l^2 b^2)^L`` over l, so it holds for the discrete noise the PSD draws.
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
        verifier would measure of a party stretching its rows (``node.attacks.histograms``), exactly for every
        statistic."""
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
    kept: bool = False
    """Whether ``cells`` and ``xs`` are buffers kept in a cache and rewritten at the next root of the same rows
    (``of`` with a cache): ``measure_many`` then keeps its numba lists of them in that cache too."""

    @classmethod
    def of(
        cls,
        rows: BinnedRows,
        k_of_row: np.ndarray,
        candidates: np.ndarray,
        g: np.ndarray,
        h: np.ndarray,
        *,
        cache: dict[tuple[object, ...], Any] | None = None,
    ) -> VerifierLevel:
        """``k_of_row`` places the rows among the level's open nodes (-1: elsewhere), ``candidates`` is
        (nodes, 2), ``g`` and ``h`` are the verifier's gradients and hessians. ``cache``: where a tree's root
        writes its arrays, into buffers kept for these rows from one root to the next (the level is then valid
        until the next root of these rows built with the same cache)."""
        nbins = rows.nbins
        cand = np.asarray(candidates, dtype=np.int64)
        if isinstance(rows, ChunkedRows):
            # slots on disk or on Dask workers: the same cells, read chunk by chunk; the statistics then run on
            # these per-row arrays exactly as in memory
            idx = np.flatnonzero(k_of_row >= 0)
            xs = np.stack([g[idx], h[idx], np.ones(idx.size)])
            return cls(idx, rows.level_cells(k_of_row, cand), xs, int(cand.shape[0]), nbins)
        if cand.shape[0] == 1 and k_of_row.size and int(k_of_row.min()) == 0:
            return cls._root(rows, k_of_row.size, cand[0], g, h, cache)
        idx = np.flatnonzero(k_of_row >= 0)
        node = k_of_row[idx]
        cells = np.stack([node * nbins + rows.slots[idx, cand[node, r]].astype(np.int64) for r in range(2)])
        xs = np.stack([g[idx], h[idx], np.ones(idx.size)])
        return cls(idx, cells, xs, int(cand.shape[0]), nbins)

    @classmethod
    def _root(
        cls,
        rows: BinnedRows,
        n: int,
        features: np.ndarray,
        g: np.ndarray,
        h: np.ndarray,
        cache: dict[tuple[object, ...], Any] | None,
    ) -> VerifierLevel:
        """A tree's root (one node holding every row): each candidate's cells are its column of slots, copied
        into the rows' kept buffers where there is a cache (a root's arrays cost 60 us a verifier to allocate and
        stack, 10 us to copy into place)."""
        if cache is None:
            idx, cells, xs = np.arange(n), np.empty((2, n), dtype=np.int64), np.empty((3, n))
            xs[2] = 1.0
        else:
            idx, cells, xs = _root_buffers(rows, n, cache)
        for r in range(2):
            np.copyto(cells[r], rows.slots_t[features[r]])
        np.copyto(xs[0], g)
        np.copyto(xs[1], h)
        return cls(idx, cells, xs, 1, rows.nbins, kept=cache is not None)


def _root_buffers(
    rows: BinnedRows, n: int, cache: dict[tuple[object, ...], Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (row indices, cells, quantities) buffers of a root of these ``n`` rows kept in ``cache``: the indices
    and the row counts' ones written once, the rest at every root. The entry holds ``rows``, so that its id is
    not reused while it is cached."""
    key = ("root buffers", id(rows))
    kept = cache.get(key)
    if kept is None or kept[0] is not rows or kept[1].size != n:
        idx = np.arange(n)
        idx.flags.writeable = False
        xs = np.empty((3, n))
        xs[2] = 1.0
        kept = cache[key] = (rows, idx, np.empty((2, n), dtype=np.int64), xs)
    return kept[1], kept[2], kept[3]


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
    on every bin of g, h and n (public: ``node.privacy.accountant``), which the claims carry on top of their sampling
    noise."""
    _check_claims(level, claims)
    weight, leaf, inv_rows = _rows(level, estimator)
    num_leaves = estimator.leaf_rows.shape[0]
    claimed, noise_var = _claimed(claims), _noise_var(noise_sd)
    b = float(estimator.psd_scale)
    ncell = level.nodes * level.nbins
    stats = _measure(level.cells, ncell, level.xs, weight, leaf, inv_rows, num_leaves, b, claimed, noise_var)
    return _measurement(stats.tolist(), estimator, _root_rows(claims, root), noise_sd[2])


def measure_many(
    checks: Sequence[tuple[VerifierLevel, PartyEstimator, Claims]],
    *,
    root: bool,
    noise_sd: tuple[float, float, float] = (0.0, 0.0, 0.0),
    threads: int = 1,
    compile_only: bool = False,
    cache: dict[tuple[object, ...], Any] | None = None,
) -> list[Measurement]:
    """``measure`` of every (verifier's side, its view of a party, the party's claims), the statistics of all of them
    in one call spread over ``threads`` threads (``node.kernels.party_kernels.run_on_cores``): the same floats, each
    check's sums in its own row order. A side or claims shared by several checks (one verifier checking every party, one
    party checked by every verifier) are passed once. ``compile_only``: load (or compile) the kernels for these
    arguments without running them (a warm-up that starts no thread). ``cache``: where what comes back at every
    tree's root is kept from one call to the next (the same estimators, the sides' kept buffers: a numba list costs
    5 us per array to build, 500 roots at a9a spent 0.1 s on them); its owner drops it with it."""
    if not checks:
        return []
    sides, side_of = _distinct([level for level, _, _ in checks])
    parties, claims_of = _distinct([claims for _, _, claims in checks])
    for level, _, claims in checks:
        _check_claims(level, claims)
    ncell = {level.nodes * level.nbins for level in sides}
    if len(ncell) != 1:
        raise ValueError("every check of a level has as many cells")
    cells, xs = _side_lists(sides, cache)
    rows = _rows_of(checks, cache)
    out = np.zeros((len(checks), 3, 6))
    args = (
        cells,
        xs,
        side_of,
        ncell.pop(),
        rows.weight,
        rows.leaf,
        rows.inv_rows,
        rows.num_leaves,
        rows.b,
        _claimed_all(parties),
        claims_of,
        _noise_var(noise_sd),
        out,
    )
    blocks = rows.blocks(threads)
    if compile_only:
        compile_both(_measure_parallel, _measure_serial, *blocks, *args)
    else:
        run_on_cores(threads, blocks, _measure_parallel, _measure_serial, *args)
    root_rows = [_root_rows(claims, root) for claims in parties]
    return [
        _measurement(stats, estimator, root_rows[k], noise_sd[2])
        for stats, (_, estimator, _), k in zip(out.tolist(), checks, claims_of.tolist(), strict=True)
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


_KEPT = 8
"""Entries of each kind (sides' lists, estimators' rows) a ``measure_many`` cache keeps, the oldest dropped first:
a federation's roots come back to the same few (its parties taking part change at most once a party)."""


def _keep(cache: dict[tuple[object, ...], Any], key: tuple[object, ...], value: T) -> T:
    """``value`` kept in ``cache`` under ``key``, with at most ``_KEPT`` entries of its kind (``key[0]``)."""
    same = [k for k in cache if k[0] == key[0]]
    if len(same) >= _KEPT:
        del cache[same[0]]
    cache[key] = value
    return value


def _side_lists(sides: Sequence[VerifierLevel], cache: dict[tuple[object, ...], Any] | None) -> tuple[Any, Any]:
    """The sides' cells and quantities as two numba lists, kept in ``cache`` where every side is in kept buffers
    (a tree's root: the same buffers at every tree). The entry holds the buffers, so their ids are not reused."""
    if cache is None or not all(level.kept for level in sides):
        return List([level.cells for level in sides]), List([level.xs for level in sides])
    key = ("side lists", *(id(level.cells) for level in sides), *(id(level.xs) for level in sides))
    kept = cache.get(key)
    if kept is None:
        arrays = [(level.cells, level.xs) for level in sides]
        kept = _keep(cache, key, (arrays, List([c for c, _ in arrays]), List([x for _, x in arrays])))
    return kept[1], kept[2]


@dataclass(frozen=True)
class _Rows:
    """The checks' rows as the kernels read them: each check's (weight, leaf, 1 / leaf rows) of the verifier's
    rows in the level (numba lists), its estimator's PSD leaves and noise scale, and the checks' rows."""

    weight: Any
    leaf: Any
    inv_rows: Any
    num_leaves: np.ndarray
    b: np.ndarray
    sizes: tuple[int, ...]
    estimators: tuple[PartyEstimator, ...]
    """Kept with the lists, so that a cache keyed by their ids cannot see the ids reused."""
    _blocks: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def of(cls, checks: Sequence[tuple[VerifierLevel, PartyEstimator, Claims]]) -> _Rows:
        estimators = tuple(estimator for _, estimator, _ in checks)
        rows = [_rows(level, estimator) for level, estimator, _ in checks]
        weight, leaf, inv_rows = (List([r[q] for r in rows]) for q in range(3))
        num_leaves = np.array([e.leaf_rows.shape[0] for e in estimators], dtype=np.int64)
        b = np.array([e.psd_scale for e in estimators], dtype=np.float64)
        return cls(weight, leaf, inv_rows, num_leaves, b, tuple(r[0].size for r in rows), estimators)

    def blocks(self, threads: int) -> tuple[np.ndarray, np.ndarray]:
        """The checks dealt into one block per thread (``blocks_of``), computed once per thread count."""
        if threads not in self._blocks:
            self._blocks[threads] = blocks_of(self.sizes, threads)
        return self._blocks[threads]


def _rows_of(
    checks: Sequence[tuple[VerifierLevel, PartyEstimator, Claims]], cache: dict[tuple[object, ...], Any] | None
) -> _Rows:
    """The checks' rows, kept in ``cache`` for checks of every row (a tree's root, where they are the estimators'
    own arrays, the same at every tree)."""
    every_row = all(level.idx.size == estimator.weight.size for level, estimator, _ in checks)
    if cache is None or not every_row:
        return _Rows.of(checks)
    key = ("rows", *(id(estimator) for _, estimator, _ in checks))
    kept = cache.get(key)
    if kept is None:
        kept = _keep(cache, key, _Rows.of(checks))
    return cast(_Rows, kept)


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
    out = np.empty((3, 2, claims.g[:, 0].size))
    _claimed_into(claims, out)
    return out


def _claimed_all(parties: Sequence[Claims]) -> np.ndarray:
    """Every party's claims as the kernels read them, (party, quantity, candidate, node * nbins + bin): one array,
    not a numba list (20 us to build, for four parties)."""
    out = np.empty((len(parties), 3, 2, parties[0].g[:, 0].size))
    for claims, into in zip(parties, out, strict=True):
        _claimed_into(claims, into)
    return out


def _claimed_into(claims: Claims, out: np.ndarray) -> None:
    for q, c in enumerate((claims.g, claims.h, claims.n)):
        out[q] = c.transpose(1, 0, 2).reshape(out.shape[1:])


def _noise_var(noise_sd: tuple[float, float, float]) -> np.ndarray:
    return np.array([s * s for s in noise_sd], dtype=np.float64)


def _root_rows(claims: Claims, root: bool) -> float | None:
    """The party's claimed total count at a tree's root (its first candidate's counts), None below it."""
    return float(claims.n[:, 0, :].sum()) if root else None


def _measurement(
    stats: list[list[float]], estimator: PartyEstimator, root_rows: float | None, count_noise_sd: float
) -> Measurement:
    qg, qh, qn = (Quantity(s[0], s[1], math.sqrt(s[2]), s[3], s[4], s[5]) for s in stats)
    num_leaves = estimator.leaf_rows.shape[0]
    return Measurement(qg, qh, qn, root_rows, estimator.psd_total, num_leaves, estimator.psd_scale, count_noise_sd)


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
    claims: np.ndarray,
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
    claims: np.ndarray,
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
    claims: np.ndarray,
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
    """Equation 11 with magnitudes (``|a - b| / max(|a|, |b|)`` per bin): the gradient terms plus the count terms."""
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
