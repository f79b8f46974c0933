"""The endorsement round as ``simulate`` plays it: honest parties pass, attacks are refused or earn nothing."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.reference import ONE, NodeHistograms
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.protocol.endorsement import choose
from fgbdt_chain.node.protocol.verify import Verdict
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, prepare, run

PARAMS = TrainParams(trees=6, depth=3, bins=8, min_rows=5)


def _prep(endorse: str = "statistical", parties: int = 3, theta: float = 0.8, skew: float = 0.0) -> Prepared:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(4000, 5))
    X[:, 3] = np.exp(2 * X[:, 3])  # a heavy tail
    y = (X[:, 0] - X[:, 1] + 0.3 * np.log(X[:, 3]) + 0.4 * rng.normal(size=4000) > 0).astype(float)
    train, test = Dataset(X[:3000], y[:3000]), Dataset(X[3000:], y[3000:])
    config = PrepConfig(parties=parties, theta=theta, seed=0, psd_max_rows=40, endorse=endorse, feature_skew=skew)
    return prepare(train, test, PARAMS, config)


@pytest.mark.parametrize(("theta", "skew"), [(0.5, 0.0), (0.8, 0.0), (0.8, 0.5)])
def test_honest_parties_are_never_refused_and_credited_near_what_they_sent(theta: float, skew: float) -> None:
    report, _, result = run(_prep(theta=theta, skew=skew), "fvtree")
    assert result is not None
    assert result.refusals == [] and report["endorsement"]["refusals"] == []
    credits = [c.g / ONE for tree in result.credits for c in tree]
    assert all(0.5 < c < 2.0 for c in credits), credits
    assert abs(float(np.median(credits)) - 1.0) < 0.15


def test_endorsement_changes_no_honest_model() -> None:
    """Endorsement decides who takes part and credits contributions; with everyone honest the trees are the ones an
    all-accepting federation grows."""
    with_checks = run(_prep(), "fvtree")[2]
    without = run(_prep(endorse="none"), "fvtree")[2]
    assert with_checks is not None and without is not None
    assert [t.nodes for t in with_checks.trees] == [t.nodes for t in without.trees]


@pytest.mark.parametrize(
    ("attack", "reason"),
    [
        (Attack("gradients", 4.0), "the contract refuses"),
        (Attack("gradients", 2.0, start_tree=1), ""),
        (Attack("counts", 2.0, start_tree=1), "the verifiers refuse the histograms: CarriedCountMismatch"),
        (Attack("targeted", 2.0, start_tree=1), "CandidateTotalsMismatch"),
    ],
)
def test_attackers_are_refused_and_out_of_the_task(attack: Attack, reason: str) -> None:
    prep = _prep()
    _, _, honest = run(prep, "fvtree")
    _, _, greedy = run(prep, "fvtree", attacks={1: attack}, keep_levels=True)
    assert honest is not None and greedy is not None
    [refusal] = greedy.refusals
    assert (refusal.party, refusal.tree, refusal.level) == (1, attack.start_tree, 0)
    assert reason in refusal.reason
    assert greedy.total[1] < honest.total[1]
    # paid on completion only: a refused party forfeits its reward, whatever its total
    assert greedy.finished == [True, False, True] and greedy.shares()[1] == 0.0 < honest.shares()[1]
    # out for good: it takes part in no later level
    later = [rec for rec in greedy.levels if (rec.tree, rec.level) > (refusal.tree, refusal.level)]
    assert later and all(1 not in rec.submitters for rec in later)


def test_a_flip_is_refused_at_the_root_and_earns_its_sender_less() -> None:
    """A flip from the first tree keeps the loss's bounds (it is a flip of the labels: ``n/2 - G`` stays a count)
    and no earlier tree ties it, but its gradient sums point against every verifier's estimate at the root."""
    prep = _prep()
    _, _, honest = run(prep, "fvtree")
    _, _, flipped = run(prep, "fvtree", attacks={1: Attack("sign-flip", 1.0)})
    assert honest is not None and flipped is not None
    [refusal] = flipped.refusals
    assert (refusal.party, refusal.tree, refusal.level) == (1, 0, 0) and "point against" in refusal.reason
    assert flipped.total[1] < honest.total[1]


@pytest.mark.parametrize(
    ("attack", "at_tree", "reason"),
    [
        (Attack("counts", 2.0, start_tree=1), 1, "row counts"),
        (Attack("gradients", 2.0, start_tree=1), 1, "gradient sums"),
        (Attack("sign-flip", 1.0, start_tree=1), 2, "point against"),
    ],
)
def test_a_private_task_endorses_on_the_exact_rules_only(attack: Attack, at_tree: int, reason: str) -> None:
    """Under a budget the verifiers' statistics and credits, computed from their exact rows, are neither computed nor
    released (``node.privacy.inventory``): a stretch that keeps the exact rules after the first tree is not refused
    by any verifier (the price of the guarantee), and whatever is refused is refused by an exact rule."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(4000, 5))
    y = (X[:, 0] - X[:, 1] + 0.4 * rng.normal(size=4000) > 0).astype(float)
    config = PrepConfig(parties=3, theta=0.8, seed=0, psd_max_rows=40, epsilon=4.0)
    prep = prepare(Dataset(X[:3000], y[:3000]), Dataset(X[3000:], y[3000:]), PARAMS, config)
    _, _, honest = run(prep, "fvtree")
    _, _, greedy = run(prep, "fvtree", attacks={1: attack})
    assert honest is not None and greedy is not None and honest.refusals == []
    assert all("endorsements needed" not in r.reason for r in greedy.refusals)
    assert all(c == ref.NEUTRAL for tree in greedy.credits for c in tree)
    assert prep.config.noise_source == "entropy" and at_tree >= 1 and reason


def test_overlap_rule_is_the_papers_reading() -> None:
    _, _, result = run(_prep(endorse="overlap"), "fvtree")
    assert result is not None
    assert all(c == ref.NEUTRAL for tree in result.credits for c in tree)


def test_a_submission_takes_the_quorum_with_the_best_credits() -> None:
    def v(sign: bool, g: float, h: float = 1.0) -> Verdict:
        return Verdict(sign, (), ref.Credit(round(g * ONE), round(h * ONE), ONE))

    verdicts = {0: v(True, 0.9, 0.5), 2: v(True, 1.1, 2.0), 3: v(False, 5.0), 4: v(True, 1.0)}
    chosen = choose(verdicts, 2)
    assert chosen is not None
    signers, credit = chosen
    assert signers == [2, 4]  # the two signers with the largest gradient credits; a refusal counts for nothing
    assert credit == ref.Credit(ONE, ONE, ONE)  # the least of theirs, quantity by quantity
    assert choose(verdicts, 4) is None
    assert choose({}, 0) == ([], ref.NEUTRAL)


def test_crediting_undoes_a_stretch() -> None:
    """Shapley values of a party that stretched its gradients by F, credited at 1/F, are those of its honest sums
    (the rounding of fixed point aside): what the verifiers' homogeneous credit buys."""
    h1 = NodeHistograms((0, 1), ((ONE, 2 * ONE, -3 * ONE),) * 2, ((ONE,) * 3,) * 2, ((4, 4, 4),) * 2)
    h2 = NodeHistograms((0, 1), ((ONE, ONE, -2 * ONE),) * 2, ((2 * ONE,) * 3,) * 2, ((8, 8, 8),) * 2)
    params = ref.Params(ONE // 10, ONE // 10, 1, ONE)
    honest = ref.resolve_node([h1, h2], [0, 1], None, False, params)
    for factor in (2, 3, 7):
        stretched = NodeHistograms(h2.features, tuple(tuple(factor * x for x in r) for r in h2.g), h2.h, h2.n)
        credits = [ref.NEUTRAL, ref.Credit(ONE // factor + 1, ONE, ONE)]
        got = ref.resolve_node([h1, stretched], [0, 1], None, False, params, credits)
        assert got.split is not None and honest.split is not None
        assert (got.split.feature, got.split.threshold) == (honest.split.feature, honest.split.threshold)
        assert all(abs(a - b) <= ONE // 10**6 for a, b in zip(got.phi, honest.phi, strict=True)), (got.phi, honest.phi)


def test_squared_error_honest_parties_pass_and_stretches_are_refused() -> None:
    """Under squared error the gradient depends on a real label; the PSD resolves it into ``bins`` intervals
    (``node.privacy.psd.label_levels_for``), so label-skewed honest parties pass the statistical test; stretches after
    the first tree are refused (by the carry rule: ``tests/ledger/spec/test_tree_carry.py``)."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(4000, 5))
    X[:, 3] = np.exp(2 * X[:, 3])
    y = 3 * X[:, 0] - X[:, 1] + 0.3 * np.log(X[:, 3]) + 0.4 * rng.normal(size=4000) + 10
    params = TrainParams(trees=6, depth=3, bins=8, min_rows=5, objective="regression")
    config = PrepConfig(parties=3, theta=0.8, seed=0, psd_max_rows=40)
    prep = prepare(Dataset(X[:3000], y[:3000]), Dataset(X[3000:], y[3000:]), params, config)
    _, _, honest = run(prep, "fvtree")
    assert honest is not None and honest.refusals == []
    for attack in (Attack("gradients", 2.0, start_tree=1), Attack("counts", 2.0, start_tree=1)):
        _, _, greedy = run(prep, "fvtree", attacks={1: attack})
        assert greedy is not None and [(r.party, r.tree, r.level) for r in greedy.refusals] == [(1, 1, 0)], attack
