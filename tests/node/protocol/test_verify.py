"""The endorsement check: the statistical test and its stated error rate, the credit, equation 11, the estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedRows, RowGroups
from fgbdt_chain.node.privacy.psd import build_psd
from fgbdt_chain.node.privacy.weights import distribution_weights
from fgbdt_chain.node.protocol.endorsement import EndorsementRule, decide, reads_claims, statistical_verdict
from fgbdt_chain.node.protocol.verify import (
    Claims,
    PartyEstimator,
    VerifierLevel,
    _measure,
    check,
    check_overlap,
    count_bound,
    estimate_histograms,
    level_overlap,
    measure,
    measure_many,
    overlap,
    relative_differences,
)


def test_equation_11_with_magnitudes() -> None:
    claimed_g, est_g = np.array([1.0, -2.0, 0.0, 0.5]), np.array([0.5, -2.0, 0.0, -0.5])
    claimed_n, est_n = np.array([10.0, 4.0, 0.0, 0.0]), np.array([5.0, 4.0, 0.0, 2.0])
    # g terms: 0.5/1 + 0 + (both 0) + 1/0.5 -> 2.5 ; n terms: 5/10 + 0 + (both 0) + 2/2 -> 1.5
    assert overlap(claimed_g, claimed_n, est_g, est_n) == pytest.approx(4.0)
    assert relative_differences(claimed_n, est_n) == (pytest.approx(1.5), 3)


def test_level_overlap_is_zero_for_a_perfect_estimate_and_grows_with_inflation() -> None:
    rng = np.random.default_rng(0)
    g, n = rng.normal(size=(5, 2, 9)), rng.integers(0, 50, (5, 2, 9)).astype(float)
    assert level_overlap(g, n, g, n) == 0.0
    assert level_overlap(2 * g, n, g, n) == pytest.approx(0.25)  # |2a - a| / |2a| = 1/2 on g, 0 on n
    assert level_overlap(2 * g, 2 * n, g, n) == pytest.approx(0.5)
    assert level_overlap(-g, n, g, n) == pytest.approx(1.0)  # |-a - a| / |a| = 2 on g
    assert level_overlap(1.5 * g, n, g, n) < level_overlap(2 * g, n, g, n) < level_overlap(-g, n, g, n)


def test_verifier_estimate_reproduces_the_other_partys_counts_where_the_psd_is_exact() -> None:
    """A verifier whose rows cover the same cells as the checked party rebuilds its counts per PSD leaf exactly."""
    rng = np.random.default_rng(1)
    X = rng.integers(0, 2, (3000, 3)).astype(float)
    y = (rng.random(3000) < 0.3).astype(float)
    lows, highs = np.zeros(4), np.ones(4)
    mine, theirs = np.arange(0, 1500), np.arange(1500, 3000)
    psds = [
        build_psd(
            X[idx],
            y[idx],
            lows,
            highs,
            depth=4,
            max_rows=1,
            epsilon=np.inf,
            rng=np.random.default_rng(5),
            label_first=True,
        )
        for idx in (mine, theirs)
    ]
    assert psds[0].num_nodes > 1 and int(psds[0].split_dim[0]) == 3  # the label (dimension F = 3) at the root
    W, _ = distribution_weights(X[mine], y[mine], psds, 1.0)
    slots = (X[mine] + 1).astype(np.uint8)  # value 0 -> slot 1, value 1 -> slot 2
    rows = BinnedRows(slots, 3)
    node = np.zeros(len(mine), dtype=np.int64)
    cands = np.array([[0, 1]])
    g = rng.normal(size=len(mine))
    est_g, est_n = estimate_histograms(rows, node, 1, cands, g, W[:, 1])
    # with depth 4 over 4 binary dimensions every PSD leaf is one cell, so the counts are theirs exactly
    their_slots = (X[theirs] + 1).astype(np.uint8)
    for c, f in enumerate(cands[0]):
        np.testing.assert_allclose(est_n[0, c], np.bincount(their_slots[:, f], minlength=3), rtol=1e-9)
    assert est_g.shape == (1, 2, 3)


def test_an_all_zero_level_is_endorsed_and_anything_else_is_measured() -> None:
    rows = BinnedRows(np.array([[1, 2], [2, 1], [1, 1]], dtype=np.uint8), 3)
    est = PartyEstimator.build(np.ones(3), np.zeros(3, dtype=np.int64), 1, 0.0, 3.0)
    k_of_row, cands, g = np.zeros(3, dtype=np.int64), np.array([[0, 1]]), np.array([0.4, -0.2, 0.1])
    zero = Claims(np.zeros((1, 2, 3)), np.zeros((1, 2, 3)), np.zeros((1, 2, 3)))
    assert check_overlap(rows, k_of_row, cands, g, est, zero, 0.3).sign  # a null player: signed
    n = np.zeros((1, 2, 3))
    n[0, 0, 1] = 1.0  # one row somewhere the estimate does not expect it
    stray = Claims(np.zeros((1, 2, 3)), np.zeros((1, 2, 3)), n)
    verdict = check_overlap(rows, k_of_row, cands, g, est, stray, 0.3)
    assert not verdict.sign and verdict.z["overlap"] > 0.3 and "threshold" in verdict.reasons[0]


# ------------------------------------------------------------------------------------ the statistical test


def _federation(rng: np.random.Generator, rows: int, features: int = 4, bins: int = 6):  # type: ignore[no-untyped-def]
    """Two parties drawn from one logistic model: a verifier (rows, W from the other's PSD) and the checked party's
    exact histograms of one open node, at random scores (a tree past the first)."""
    X = rng.integers(0, bins, (2 * rows, features))
    y = (rng.random(2 * rows) < 1 / (1 + np.exp(-(X[:, 0] - bins / 2) * 0.6))).astype(float)
    score = rng.normal(scale=0.5, size=2 * rows)
    p = 1 / (1 + np.exp(-score))
    g, h = p - y, p * (1 - p)
    lows, highs = np.zeros(features + 1), np.append(np.full(features, bins - 1.0), 1.0)
    mine, theirs = np.arange(rows), np.arange(rows, 2 * rows)
    psds = [
        build_psd(
            X[i].astype(float),
            y[i],
            lows,
            highs,
            depth=4,
            max_rows=50,
            epsilon=1.0,
            rng=np.random.default_rng(int(rng.integers(1 << 30))),
            label_first=True,
        )
        for i in (mine, theirs)
    ]
    W, _ = distribution_weights(X[mine].astype(float), y[mine], psds, 1.0)
    scale = 2.0  # psd_budget(1.0, 4, 5).leaf_scale
    est = PartyEstimator.build(
        W[:, 1], psds[1].leaf_of(X[mine].astype(float), y[mine]), psds[1].num_leaves, scale, psds[1].total
    )
    slots = (X + 1).astype(np.uint8)
    verifier = BinnedRows(slots[mine], bins + 1)
    party = BinnedRows(slots[theirs], bins + 1)
    cands = np.array([[0, 1]])
    sums = party.group_candidates_fixed(RowGroups.everything(rows), cands, FixedRows.of(g[theirs], h[theirs]))
    claims = Claims.from_limbs(sums.g_hi, sums.g_lo, sums.h_hi, sums.h_lo, sums.n)
    return verifier, np.zeros(rows, dtype=np.int64), cands, g[mine], h[mine], est, claims


def test_honest_refusals_stay_within_the_stated_rate() -> None:
    """On a null the model describes (both parties drawn alike), a check at alpha refuses at most about alpha of
    the time: 200 independent federations at alpha = 0.05 (each test at 0.01)."""
    rng = np.random.default_rng(7)
    refused = 0
    for _ in range(200):
        verifier, k, cands, g, h, est, claims = _federation(rng, 400)
        refused += not check(verifier, k, cands, g, h, est, claims, 0.05, root=True).sign
    # binomial(200, 0.05): mean 10, sd 3.1; the variance model is conservative, so far fewer in practice
    assert refused <= 20


def test_stretched_flipped_and_counted_histograms_are_refused() -> None:
    rng = np.random.default_rng(3)
    verifier, k, cands, g, h, est, claims = _federation(rng, 3000)
    honest = check(verifier, k, cands, g, h, est, claims, 1e-9, root=True)
    assert honest.sign, honest.reasons
    cases = {
        "gradient sums": Claims(claims.g * 2, claims.h, claims.n),
        "hessian sums": Claims(claims.g, claims.h * 2, claims.n),
        "more rows than the party's PSD": Claims(claims.g, claims.h, claims.n * 2),
    }
    for reason, attacked in cases.items():
        verdict = check(verifier, k, cands, g, h, est, attacked, 1e-9, root=True)
        assert not verdict.sign and any(reason in r for r in verdict.reasons), (reason, verdict.reasons)


def test_a_flip_is_refused_and_credited_like_the_honest_sums() -> None:
    """At a root an honest party's gradient sums point along the verifier's estimate; a flip points against it."""
    rng = np.random.default_rng(3)
    verifier, k, cands, g, h, est, claims = _federation(rng, 3000)
    flipped = check(verifier, k, cands, g, h, est, Claims(-claims.g, claims.h, claims.n), 1e-9, root=True)
    honest = check(verifier, k, cands, g, h, est, claims, 1e-9, root=True)
    assert honest.sign and honest.z["g_flip"] > 0
    assert not flipped.sign and any("point against" in r for r in flipped.reasons), flipped.reasons
    assert flipped.z["g_flip"] == pytest.approx(-honest.z["g_flip"])
    assert flipped.credit == honest.credit  # same magnitudes, same credit


def test_a_stretch_is_credited_back_to_what_it_was() -> None:
    """The attested credit is homogeneous: histograms times F are credited at 1/F of the honest credit, so what
    the contract credits (sums times credit) does not depend on F."""
    rng = np.random.default_rng(4)
    verifier, k, cands, g, h, est, claims = _federation(rng, 2000)
    honest = check(verifier, k, cands, g, h, est, claims, 1e-9, root=False).credit
    assert abs(honest.g / ref.ONE - 1) < 0.2 and abs(honest.h / ref.ONE - 1) < 0.05
    for factor in (1.1, 1.5, 4.0):
        stretched = Claims(claims.g * factor, claims.h * factor, claims.n)
        got = check(verifier, k, cands, g, h, est, stretched, 1e-9, root=False).credit
        assert got.g * factor == pytest.approx(honest.g, rel=1e-9)
        assert got.h * factor == pytest.approx(honest.h, rel=1e-9)
        assert got.n == honest.n


def test_the_psd_count_bound_holds_its_rate() -> None:
    """``count_bound`` is a Chernoff bound on a sum of Laplace noises: exceeded at most alpha of the time."""
    rng = np.random.default_rng(5)
    for leaves, scale, alpha in ((20, 2.0, 0.01), (256, 2.0, 0.001), (1, 1.0, 0.05)):
        t = count_bound(leaves, scale, alpha)
        sums = rng.laplace(0.0, scale, (200_000, leaves)).sum(axis=1)
        assert np.mean(sums >= t) <= alpha
        assert t > scale * math.sqrt(2 * leaves)  # above one standard deviation: a real tail bound
    assert count_bound(10, 0.0, 0.01) == 0.0


def test_the_check_refuses_a_bad_rate_and_bad_shapes() -> None:
    verifier, k, cands, g, h, est, claims = _federation(np.random.default_rng(6), 100)
    with pytest.raises(ValueError, match="false-refusal rate"):
        check(verifier, k, cands, g, h, est, claims, 1.5, root=True)
    with pytest.raises(ValueError, match="claims of shape"):
        check(verifier, k, cands, g, h, est, Claims(claims.g[:, :1], claims.h, claims.n), 0.01, root=True)


def test_the_verifiers_test_runs_at_a_trees_root() -> None:
    """Below the root, inherited totals (an exact rule) tie every sum to the root's, so a verifier signs at neutral
    credit without measuring (``node.protocol.endorsement.decide``); the same stretched claims are refused at the
    root."""
    verifier, k, cands, g, h, est, claims = _federation(np.random.default_rng(8), 3000)
    stretched = Claims(claims.g * 2, claims.h, claims.n)
    rule = EndorsementRule()
    deep, measured = decide(rule, verifier, k, cands, g, h, est, stretched, root=False)
    assert deep.sign and deep.credit == ref.NEUTRAL and measured is None
    at_root, measured = decide(rule, verifier, k, cands, g, h, est, stretched, root=True)
    assert not at_root.sign and measured is not None
    assert at_root.credit.g < ref.ONE
    # where the rule does not read the claims, a verifier need not convert them; where it does, it must
    assert not reads_claims(rule, root=False) and reads_claims(rule, root=True)
    assert decide(rule, verifier, k, cands, g, h, est, None, root=False) == (deep, None)
    with pytest.raises(ValueError, match="reads the claims"):
        decide(rule, verifier, k, cands, g, h, est, None, root=True)
    overlap = EndorsementRule(rule=ref.ENDORSE_OVERLAP)
    assert reads_claims(overlap, root=False)
    with pytest.raises(ValueError, match="reads the claims"):
        decide(overlap, verifier, k, cands, g, h, est, None, root=False)


def test_over_dispersion_widens_the_test_and_ignores_a_stretch() -> None:
    """The claims' scatter about their best fit to the estimate, relative to the model, widens the test when the
    parties' distributions differ inside PSD leaves (what the model does not describe); it is the same for the
    claims times any factor, so a stretch cannot widen its own test."""
    rng = np.random.default_rng(9)
    verifier, k, cands, g, h, est, claims = _federation(rng, 3000)
    level = VerifierLevel.of(verifier, k, cands, g, h)
    honest = measure(level, est, claims, root=True)
    assert all(q.dispersion >= 1.0 for q in (honest.g, honest.h, honest.n))
    for factor in (0.5, 3.0, -2.0):
        stretched = measure(level, est, Claims(claims.g * factor, claims.h * factor, claims.n * factor), root=True)
        for a, b in ((stretched.g, honest.g), (stretched.h, honest.h), (stretched.n, honest.n)):
            assert a.dispersion == pytest.approx(b.dispersion, rel=1e-9)
    # claims that move rows between bins (a shift the PSD did not see) scatter wider than the model
    shifted = Claims(np.roll(claims.g, 1, axis=-1), np.roll(claims.h, 1, axis=-1), np.roll(claims.n, 1, axis=-1))
    wide = measure(level, est, shifted, root=True)
    assert wide.n.dispersion > 2.0 and wide.n.dispersion > honest.n.dispersion


# ---------------------------------------------------------------------------------------------------------------
# The statistics kernel: its fused passes give the same floats as one pass per quantity and candidate.


@njit(cache=True)
def _measure_by_quantity(  # pragma: no cover - compiled
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
    """The kernel as first written, one pass per quantity and candidate: what ``_measure`` must equal."""
    nq, rows = xs.shape
    out = np.zeros((nq, 6))
    est = np.zeros(ncell)
    vp = np.zeros(ncell)
    vv = np.zeros(ncell)
    w = np.zeros(ncell)
    u = np.zeros(rows)
    leaf_sum = np.zeros(num_leaves)
    two_b2 = 2.0 * b * b
    for q in range(nq):
        x = xs[q]
        u[:] = 0.0
        a = est_sum = e_claim = e_est = k_party = k_verifier = 0.0
        dispersion = noise_d = 0.0
        for r in range(2):
            est[:] = 0.0
            vp[:] = 0.0
            vv[:] = 0.0
            for i in range(rows):
                c = cells[r, i]
                wx = weight[i] * x[i]
                est[c] += wx
                vp[c] += wx * x[i]
                vv[c] += weight[i] * wx * x[i] + two_b2 * x[i] * x[i] * inv_rows[i]
            if noise_var[q] > 0:  # the party's public privacy noise, on every cell it sends
                vp[:] += noise_var[q]
            nhas = 0
            for c in range(ncell):
                if vp[c] + vv[c] > 0:
                    nhas += 1
            if nhas == 0:
                continue
            v = vp + vv
            floor = np.median(v[v > 0])
            # over-dispersion: the claims' scatter about their best fit ``s * est``, relative to the model's variance
            # and in units of s (so the same for claims times any F), over the cells' degrees of freedom
            cross = fit = 0.0
            for c in range(ncell):
                if v[c] > 0:
                    cross += claims[q, r, c] * est[c] / v[c]
                    fit += est[c] * est[c] / v[c]
            if nhas > 1 and fit > 0 and cross != 0:
                s = cross / fit
                resid = 0.0
                for c in range(ncell):
                    if v[c] > 0:
                        e = claims[q, r, c] - s * est[c]
                        resid += e * e / v[c]
                dispersion += 0.5 * resid / (s * s * (nhas - 1))
            elif nhas > 1:
                dispersion += 0.5 * np.inf
            for c in range(ncell):
                vc = v[c]
                w[c] = est[c] / (vc if vc > floor else floor)
                claim = claims[q, r, c]
                a += 0.5 * w[c] * claim
                noise_d += 0.25 * w[c] * w[c] * noise_var[q]  # each cell's own privacy noise in the claims
                est_sum += 0.5 * w[c] * est[c]
                if vc > 0:
                    e_claim += 0.5 * claim * claim / vc
                    e_est += 0.5 * est[c] * est[c] / vc
                    k_party += 0.5 * vp[c] / vc
                    k_verifier += 0.5 * vv[c] / vc
            for i in range(rows):
                u[i] += 0.5 * w[cells[r, i]]
        leaf_sum[:] = 0.0
        var_d = 0.0
        for i in range(rows):
            ux = u[i] * x[i]
            var_d += (weight[i] + weight[i] * weight[i]) * ux * ux
            leaf_sum[leaf[i]] += ux * inv_rows[i]
        for lf in range(num_leaves):
            var_d += two_b2 * leaf_sum[lf] * leaf_sum[lf]
        var_d += noise_d
        out[q, 0] = a
        out[q, 1] = est_sum
        out[q, 2] = var_d
        out[q, 3] = e_claim
        out[q, 4] = max(e_est - k_verifier, 0.0) + k_party
        out[q, 5] = max(dispersion, 1.0)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_fused_statistics_kernel_equals_one_pass_per_quantity_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 400))
    ncell = int(rng.integers(1, 40))
    num_leaves = int(rng.integers(1, 20))
    cells = rng.integers(0, ncell, size=(2, rows)).astype(np.int64)
    if seed % 4 == 0:  # a candidate whose rows sit in one cell, and rows with nothing to weigh
        cells[1] = 0
    xs = np.stack([rng.normal(size=rows), rng.uniform(0, 0.25, size=rows), np.ones(rows)])
    if seed % 5 == 1:
        xs[0, : rows // 2] = 0.0  # cells without variance
    weight = rng.exponential(size=rows) * (rng.uniform(size=rows) > 0.1)
    if seed % 6 == 2:
        weight[:] = 0.0  # nothing estimated: every cell skipped
    leaf = rng.integers(0, num_leaves, size=rows).astype(np.int64)
    inv_rows = 1.0 / np.maximum(np.bincount(leaf, minlength=num_leaves)[leaf], 1.0)
    b = float(rng.choice([0.0, 0.5, 3.0]))
    claims = rng.normal(size=(3, 2, ncell)) * rng.uniform(0, 50)
    noise = np.array([0.0, 0.0, 0.0]) if seed % 3 else rng.uniform(0, 2, size=3)
    args = (cells, ncell, xs, weight, leaf, inv_rows, num_leaves, b, claims, noise)
    got = _measure(*args)
    want = _measure_by_quantity(*args)
    assert got.tobytes() == want.tobytes(), (got, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_measuring_many_checks_at_once_is_measuring_each(threads: int) -> None:
    """``measure_many`` (every check of a level in one call, on the cores) gives each check's ``measure`` bit for
    bit: at a root, below it (the verifier's rows subset) and with privacy noise; and the statistical verdict on it
    is ``decide``'s."""
    rng = np.random.default_rng(7)
    feds = [_federation(rng, rows) for rows in (300, 120, 500)]
    rule = EndorsementRule(ref.ENDORSE_STATISTICAL, 0.01, noise_sd=(0.1, 0.05, 0.5))
    for root in (True, False):
        checks = []
        for verifier, k_of_row, cands, g, h, est, claims in feds:
            if not root:
                k_of_row = (rng.random(k_of_row.size) < 0.6).astype(np.int64) - 1  # some rows in the open node
            checks.append((VerifierLevel.of(verifier, k_of_row, cands, g, h), est, claims))
        many = measure_many(checks, root=root, noise_sd=rule.noise_sd, threads=threads)
        each = [measure(level, est, claims, root=root, noise_sd=rule.noise_sd) for level, est, claims in checks]
        assert many == each
    verifier, k_of_row, cands, g, h, est, claims = feds[0]
    verdict, m = decide(rule, verifier, k_of_row, cands, g, h, est, claims, True)
    assert m is not None and statistical_verdict(rule, m) == verdict
    assert statistical_verdict(rule, None) == decide(rule, verifier, k_of_row, cands, g, h, est, claims, False)[0]
    assert measure_many([], root=True) == []


def test_a_federations_cache_measures_every_root_as_without_it() -> None:
    """``measure_many`` with the cache a federation keeps from root to root (the verifiers' sides written into
    buffers kept for their rows, the numba lists of those and of the estimators' rows built once) measures what it
    measures without, root after root, as the candidates and gradients change and a party drops out."""
    rng = np.random.default_rng(11)
    feds = [_federation(rng, rows) for rows in (300, 120, 500)]
    cache: dict[tuple[object, ...], object] = {}
    buffers = set()
    for tree in range(4):
        cands = rng.permutation(4)[:2].reshape(1, 2)
        kept, fresh = [], []
        for verifier, k_of_row, _, g, h, est, claims in feds[: 3 if tree < 3 else 2]:
            g, h = g * rng.uniform(0.5, 2), h * rng.uniform(0.5, 2)
            level = VerifierLevel.of(verifier, k_of_row, cands, g, h, cache=cache)
            plain = VerifierLevel.of(verifier, k_of_row, cands, g, h)
            assert level.kept and not plain.kept
            for a, b in ((level.idx, plain.idx), (level.cells, plain.cells), (level.xs, plain.xs)):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
            buffers.add(id(level.cells))
            kept.append((level, est, claims))
            fresh.append((plain, est, claims))
        assert measure_many(kept, root=True, threads=2, cache=cache) == measure_many(fresh, root=True)
    assert len(buffers) == 3  # each verifier's rows: the same buffers at every root
