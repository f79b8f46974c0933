"""Differential privacy: the budget's accounting, the mechanisms' noise, and a private federation that keeps every
exact rule and refuses no honest party."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.histogram_rules import BOUNDS_NONE, check_level
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.kernels.histogram import FixedSums
from fgbdt_chain.node.privacy.accountant import (
    HISTOGRAMS,
    NO_PRIVACY,
    SPLIT,
    exponential_votes,
    noise_rng,
    noisy_sums,
    plan,
    secret_noise_seed,
)
from fgbdt_chain.node.protocol.local_party import LocalParty, messages_of
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run


@pytest.mark.parametrize(("epsilon", "trees", "depth"), [(0.5, 20, 3), (1.0, 50, 6), (8.0, 500, 8)])
def test_the_plan_spends_the_budget_and_no_more(epsilon: float, trees: int, depth: int) -> None:
    p = plan(epsilon, 1e-5, trees, depth)
    assert epsilon * 0.99 <= p.accounted_epsilon <= epsilon
    assert p.sketch_epsilon == pytest.approx(SPLIT["sketch"] * epsilon)
    assert p.psd_epsilon == pytest.approx(SPLIT["psd"] * epsilon)
    # recomputed independently with the accountant from what the plan says each mechanism gets
    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(
        dp_event.ComposedDpEvent(
            [
                dp_event.ZCDpEvent(p.sketch_epsilon**2 / 2),
                dp_event.ZCDpEvent(p.psd_epsilon**2 / 2),
                dp_event.SelfComposedDpEvent(dp_event.ZCDpEvent(p.vote_epsilon**2 / 8), trees * depth),
                dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(p.noise_multiplier), trees * depth),
            ]
        )
    )
    assert accountant.get_epsilon(1e-5) == pytest.approx(p.accounted_epsilon, rel=1e-6)
    report = p.report()
    assert report["epsilon"] == epsilon and report["histogram_noise_sd"]["g"] == pytest.approx(3 * p.noise_multiplier)


def test_less_budget_means_more_noise_and_inf_means_none() -> None:
    plans = [plan(e, 1e-5, 20, 3) for e in (8.0, 2.0, 0.5)]
    assert plans[0].noise_multiplier < plans[1].noise_multiplier < plans[2].noise_multiplier
    assert plans[0].vote_epsilon > plans[1].vote_epsilon > plans[2].vote_epsilon
    assert plan(math.inf, 1e-5, 20, 3) is NO_PRIVACY and not NO_PRIVACY.private
    for bad in ((0.0, 1e-5), (-1.0, 1e-5), (1.0, 0.0), (1.0, 1.0), (math.nan, 1e-5)):
        with pytest.raises(ValueError):
            plan(*bad, 20, 3)


def _sums(rng: np.random.Generator, nodes: int = 3, nbins: int = 5) -> FixedSums:
    n = rng.integers(0, 9, (nodes, 1, nbins)).repeat(2, axis=1)  # small: every sum fits the low limb
    for j in range(nodes):  # the second candidate: the same rows in other bins
        n[j, 1] = rng.permutation(n[j, 0])
    g = (n * rng.uniform(-0.5, 0.5, n.shape) * 1e18).astype(np.int64)
    g[:, 1] = g[:, 0][:, ::-1]
    n[:, 1] = n[:, 0][:, ::-1]
    h = (n * 0.2 * 1e18).astype(np.int64)
    zero = np.zeros_like(g)
    return FixedSums(zero, g, zero, h, n)  # hi limbs 0: every value below 2^63 fits the low limb here


def test_noisy_histograms_keep_the_totals_rules_and_their_noise_scale() -> None:
    rng = np.random.default_rng(3)
    p = plan(1.0, 1e-5, 10, 3)
    sums = _sums(rng)
    cands = [(0, 1)] * 3
    noisy = noisy_sums(sums, None, p, noise_rng(0, 0, 0, 0, HISTOGRAMS))
    check_level(messages_of(noisy, cands), [4, 5, 6], BOUNDS_NONE, False, None)  # equal candidate totals
    # below a root, the totals are what the party released at the parents
    totals = [(7 * ref.ONE, 3 * ref.ONE, 11), (-2 * ref.ONE, ref.ONE, 4), (0, 0, 0)]
    child = messages_of(noisy_sums(sums, totals, p, noise_rng(0, 0, 0, 1, HISTOGRAMS)), cands)
    for hist, (g, h, n) in zip(child, totals, strict=True):
        for rank in range(2):
            assert (sum(hist.g[rank]), sum(hist.h[rank]), sum(hist.n[rank])) == (g, h, n)
    # the same seed draws the same noise; the noise has the plan's scale (before the projection, which shrinks it)
    again = noisy_sums(sums, None, p, noise_rng(0, 0, 0, 0, HISTOGRAMS))
    assert np.array_equal(again.n, noisy.n) and np.array_equal(again.g_lo, noisy.g_lo)
    draws = np.array(
        [noisy_sums(sums, None, p, noise_rng(s, 0, 0, 0, HISTOGRAMS)).n[0, 0] - sums.n[0, 0] for s in range(300)]
    )
    assert np.std(draws) == pytest.approx(p.noise_sd("n") * math.sqrt(1 - 1 / 5 + 1 / 25), rel=0.15)


def test_a_partys_secret_noise_seed_is_its_own_per_task_and_the_same_after_a_restart() -> None:
    """The production seed: an HMAC of the task under the party's key. A restarted party computes its histograms again
    and must draw the same noise (a second draw would show the verifiers a second release of the same sums)."""
    key, other = bytes(range(1, 33)), bytes(range(2, 34))
    contract = "0x" + "ab" * 20
    seed = secret_noise_seed(key, 1, contract, 7)
    assert seed == secret_noise_seed(key, 1, contract.upper().replace("0X", "0x"), 7)  # the address, any case
    assert len({seed, secret_noise_seed(other, 1, contract, 7), secret_noise_seed(key, 1, contract, 8)}) == 3
    assert seed != secret_noise_seed(key, 1, "0x" + "ac" * 20, 7)
    assert seed != secret_noise_seed(key, 31337, contract, 7)  # the same deployment on another chain
    rng = np.random.default_rng(5)
    sums, p = _sums(rng), plan(1.0, 1e-5, 10, 3)
    first = noisy_sums(sums, None, p, noise_rng(seed, 2, 4, 1, HISTOGRAMS))
    again = noisy_sums(sums, None, p, noise_rng(secret_noise_seed(key, 1, contract, 7), 2, 4, 1, HISTOGRAMS))
    assert np.array_equal(first.n, again.n) and np.array_equal(first.g_lo, again.g_lo)
    elsewhere = noisy_sums(sums, None, p, noise_rng(secret_noise_seed(other, 1, contract, 7), 2, 4, 1, HISTOGRAMS))
    assert not np.array_equal(first.g_lo, elsewhere.g_lo)
    with pytest.raises(ValueError, match="32 bytes"):
        secret_noise_seed(key[:31], 1, contract, 7)
    with pytest.raises(ValueError, match="non-negative"):
        secret_noise_seed(key, 1, contract, -1)


def test_noise_stays_inside_each_features_slots() -> None:
    """Slots above a feature's top bin hold no row (public, from the edges): they stay exactly 0 after the noise and
    the projection, which still meets the totals over the slots that exist."""
    rng = np.random.default_rng(4)
    p = plan(1.0, 1e-5, 10, 3)
    widths = np.array([[6, 3], [4, 4], [2, 6]])
    inside = np.arange(6)[None, None, :] < widths[:, :, None]
    raw = _sums(rng, nbins=6)
    sums = FixedSums(*(np.where(inside, a, 0) for a in (raw.g_hi, raw.g_lo, raw.h_hi, raw.h_lo, raw.n)))
    for s in range(20):
        noisy = noisy_sums(sums, None, p, noise_rng(s, 0, 0, 0, HISTOGRAMS), widths)
        for j in range(3):
            for c in range(2):
                w = widths[j, c]
                assert not noisy.n[j, c, w:].any() and not noisy.g_lo[j, c, w:].any() and not noisy.h_lo[j, c, w:].any()
            assert noisy.n[j, 0].sum() == noisy.n[j, 1].sum()
    with pytest.raises(ValueError, match="widths"):
        noisy_sums(sums, None, p, noise_rng(0, 0, 0, 0, HISTOGRAMS), widths[:2])


def test_a_private_model_never_splits_past_a_features_last_edge() -> None:
    """Features with far fewer edges than the task's bins (a binary column, a three-valued one): with noise on
    every slot a private party once invented splits above the last edge and the model failed validation."""
    train, test = _data(6_000)
    for d in (train, test):
        d.X[:, 2] = (d.X[:, 2] > 0).astype(float)
        d.X[:, 4] = np.round(np.clip(d.X[:, 4], -1, 1))
    params = TrainParams(trees=6, depth=3, bins=16, min_rows=5)
    for seed in range(3):
        prep = prepare(train, test, params, PrepConfig(parties=3, theta=0.8, seed=seed, epsilon=0.5))
        _, model, _ = run(prep, "fvtree")
        assert model is not None
        model.validate()  # raises ModelFormatError on a threshold past a feature's edges


def test_the_vote_is_an_exponential_mechanism() -> None:
    """Two features whose utilities differ by ``u``: the better one wins with probability
    ``1 / (1 + exp(-eps u / (2 sensitivity)))``, the exponential mechanism's."""
    p = plan(2.0, 1e-5, 2, 2)
    u = p.vote_scale  # a gap of one Gumbel scale: the better feature wins with e / (1 + e)
    best = np.tile(np.array([[0.0, u]]), (20_000, 1))
    votes = exponential_votes(best, p, np.random.default_rng(5))
    assert np.mean(votes == 1) == pytest.approx(math.e / (1 + math.e), abs=0.015)
    assert exponential_votes(np.array([[-np.inf, 0.0]]), p, np.random.default_rng(1))[0] == 1  # never infeasible


def _data(rows: int = 12_000) -> tuple[Dataset, Dataset]:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(rows, 5))
    X[:, 3] = np.exp(2 * X[:, 3])
    y = (X[:, 0] - X[:, 1] + 0.3 * np.log(X[:, 3]) + 0.4 * rng.normal(size=rows) > 0).astype(float)
    cut = rows * 3 // 4
    return Dataset(X[:cut], y[:cut]), Dataset(X[cut:], y[cut:])


@pytest.mark.parametrize("epsilon", [0.5, 4.0])
def test_a_private_federation_refuses_no_honest_party_and_reports_its_guarantee(epsilon: float) -> None:
    train, test = _data()
    params = TrainParams(trees=5, depth=3, bins=8, min_rows=5)
    prep = prepare(train, test, params, PrepConfig(parties=3, theta=0.8, seed=0, epsilon=epsilon))
    report, model, result = run(prep, "fvtree", keep_levels=True)
    assert result is not None and model is not None
    assert result.refusals == []
    assert report["privacy"]["epsilon"] == epsilon and report["privacy"]["accounted_epsilon"] <= epsilon
    assert report["params"]["lam"] >= prep.config.privacy(params).regularisation(0.0, 3) > params.lam


def test_a_private_federation_endorses_on_the_exact_rules_only() -> None:
    """Under a budget no verifier tests a party against its own rows (their statistics and credits are covered by
    no mechanism, ``node.privacy.inventory``): a stretch that keeps the exact rules is not refused, the price of the
    guarantee, and every credit is neutral."""
    train, test = _data()
    params = TrainParams(trees=4, depth=3, bins=8, min_rows=5)
    prep = prepare(train, test, params, PrepConfig(parties=3, theta=0.8, seed=0, epsilon=8.0))
    _, _, greedy = run(prep, "fvtree", attacks={1: Attack("gradients", 4.0, start_tree=1)})
    assert greedy is not None and greedy.refusals == []
    assert all(c == ref.NEUTRAL for tree in greedy.credits for c in tree)


def test_private_parties_need_bounded_gradients() -> None:
    p = plan(1.0, 1e-5, 2, 2)
    slots = np.zeros((4, 2), dtype=np.uint8)
    with pytest.raises(ValueError, match="binary"):
        LocalParty(slots, np.zeros(4), TrainParams(objective="regression"), privacy=p)
