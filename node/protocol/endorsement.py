"""The endorsement round of one level, as the parties play it: who signs whose histograms, and at which credit.

A party node asks every other party for a signature (``node.party.party_node``) and the simulator plays the same round
for all parties at once (``node.sim.fvtree.Federation``); both decide with :func:`decide` and pick the signatures they
submit with :func:`choose`, so ``simulate`` refuses, and credits, exactly what the chain does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.task_params import DEFAULT_OVERLAP_THRESHOLD, DEFAULT_REFUSAL_RATE
from fgbdt_chain.node.kernels.histogram import BinnedRows
from fgbdt_chain.node.privacy.accountant import PrivacyPlan
from fgbdt_chain.node.privacy.psd import PSD
from fgbdt_chain.node.protocol.verify import (
    Claims,
    Measurement,
    PartyEstimator,
    Verdict,
    VerifierLevel,
    check_overlap,
    judge,
    measure,
)

quorum = ref.endorsement_quorum


@dataclass(frozen=True)
class EndorsementRule:
    """How verifiers decide (the task's ``endorseRule``, ``refusalRate`` and ``overlapThreshold``)."""

    rule: int = ref.ENDORSE_STATISTICAL
    refusal_rate: float = DEFAULT_REFUSAL_RATE
    overlap_threshold: float = DEFAULT_OVERLAP_THRESHOLD
    noise_sd: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """The privacy noise every party adds to each bin of g, h and n (``node.privacy.accountant``, public): part of the
    claims' variance in the test, so that no honest party is refused at any epsilon."""
    private: bool = False
    """Whether the task has a privacy budget: then a verifier endorses on the exact rules only, at neutral credit.
    Its statistics, credits and reasons would be computed from its own exact rows, which no mechanism of the budget
    covers (``node.privacy.inventory``)."""

    @classmethod
    def of(cls, rule: int, refusal_rate: float, overlap_threshold: float, privacy: PrivacyPlan) -> EndorsementRule:
        """The task's rule with its privacy noise."""
        noise = tuple(privacy.noise_sd(q) if privacy.private else 0.0 for q in ("g", "h", "n"))
        return cls(rule, refusal_rate, overlap_threshold, noise, privacy.private)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.rule not in ref.ENDORSE_RULE_NAMES:
            raise ValueError(f"unknown endorsement rule {self.rule}")
        if not 0 < self.refusal_rate < 1:
            raise ValueError(f"the false-refusal rate must be in (0, 1), got {self.refusal_rate}")
        if not self.overlap_threshold >= 0:
            raise ValueError("the overlap threshold must be non-negative")


def decide(
    rule: EndorsementRule,
    rows: BinnedRows,
    k_of_row: np.ndarray,
    candidates: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    estimator: PartyEstimator,
    claims: Claims | None,
    root: bool,
    level: VerifierLevel | None = None,
) -> tuple[Verdict, Measurement | None]:
    """One verifier's verdict on one party's level under the task's rule, with the statistics it rests on (None
    under the overlap rule and below a tree's root). ``level`` is the verifier's side of the level when already
    built (it does not depend on the party checked).

    Why the statistical test runs at a tree's root only: below it, the exact inherited-totals rule ties a party's
    every node total to its own sums at the root, so a stretch of whole rows must already show there, where the
    cells are the global bins of every row and the test's noise model holds. Deeper cells are nodes the tree chose
    with the party's own rows (each holding a few dozen of them at depth 7), a selection the model does not
    describe: on higgs (M = 4, theta = 0.8) honest statistics spread 2.5 times wider than the model at level 7
    (``bench.endorse``, per-level figures), so a deep test would refuse honest parties at any stated rate. Below
    the root a verifier signs what keeps the exact rules (checked by the caller, and by the contract again), at
    neutral credit (the contract takes a tree's credits from its root's endorsements). ``claims`` may be None where
    the rule does not read them (``reads_claims``): a verifier then skips converting the histograms.
    """
    if not reads_claims(rule, root):
        return statistical_verdict(rule, None), None
    if claims is None:
        raise ValueError("this rule reads the claims: pass them")
    if rule.rule == ref.ENDORSE_OVERLAP:
        return check_overlap(rows, k_of_row, candidates, g, estimator, claims, rule.overlap_threshold), None
    level = level if level is not None else VerifierLevel.of(rows, k_of_row, candidates, g, h)
    m = measure(level, estimator, claims, root=root, noise_sd=rule.noise_sd)
    return statistical_verdict(rule, m), m


def reads_claims(rule: EndorsementRule, root: bool) -> bool:
    """Whether ``decide`` looks at the claims and the verifier's rows: the overlap rule at every level, the
    statistical test at a tree's root only; neither under a privacy budget (``EndorsementRule.private``)."""
    return not rule.private and (rule.rule == ref.ENDORSE_OVERLAP or root)


def statistical_verdict(rule: EndorsementRule, root: Measurement | None) -> Verdict:
    """The statistical rule's verdict: the test of the statistics measured at a tree's root, and below it (None) a
    signature on what keeps the exact rules, at neutral credit (``decide``)."""
    if root is None:
        return Verdict(True, (), ref.NEUTRAL)
    return judge(root, rule.refusal_rate)


def choose(verdicts: dict[int, Verdict], need: int) -> tuple[list[int], ref.Credit] | None:
    """The signers a party submits and the credit the contract then applies, or None short of the quorum.

    The contract credits the smallest multiplier among the submitted endorsements, quantity by quantity, so a
    party submits the ``need`` signers with the largest gradient credits (ties to the lower party index): the
    credit is the ``need``-th largest attestation, whoever the submitter.
    """
    signers = sorted((p for p, v in verdicts.items() if v.sign), key=lambda p: (-verdicts[p].credit.g, p))
    if len(signers) < need:
        return None
    chosen = sorted(signers[:need])
    if not chosen:
        return chosen, ref.NEUTRAL
    credits = [verdicts[p].credit for p in chosen]
    return chosen, ref.Credit(min(c.g for c in credits), min(c.h for c in credits), min(c.n for c in credits))


def estimators_for(
    X: np.ndarray, y: np.ndarray, W: np.ndarray, psds: Sequence[PSD], scales: Sequence[float]
) -> list[PartyEstimator]:
    """A verifier's view of every party (its rows ``X, y``, its distribution matrix ``W``, every party's PSD and
    the PSD's published leaf noise scale), in party order; its own entry is built too and never used."""
    if W.shape != (X.shape[0], len(psds)) or len(scales) != len(psds):
        raise ValueError("one weight column, PSD and noise scale per party is required")
    return [
        PartyEstimator.build(W[:, m], psd.leaf_of(X, y), psd.num_leaves, float(scales[m]), psd.total)
        for m, psd in enumerate(psds)
    ]
