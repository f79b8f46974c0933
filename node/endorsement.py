"""The endorsement round of one level, as the parties play it: who signs whose histograms, and at which credit.

A party node asks every other party for a signature (``node.party_node``) and the simulator plays the same round
for all parties at once (``node.fvtree.Federation``); both decide with :func:`decide` and pick the signatures they
submit with :func:`choose`, so ``simulate`` refuses, and credits, exactly what the chain does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fgbdt_chain.ledger import reference as ref
from fgbdt_chain.node.histogram import BinnedRows
from fgbdt_chain.node.psd import PSD
from fgbdt_chain.node.verify import (
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
    refusal_rate: float = 1e-9
    overlap_threshold: float = 0.3

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
    claims: Claims,
    root: bool,
    level: VerifierLevel | None = None,
) -> tuple[Verdict, Measurement | None]:
    """One verifier's verdict on one party's level under the task's rule, with the statistics it rests on (None
    under the overlap rule). ``level`` is the verifier's side of the level when already built (it does not depend
    on the party checked)."""
    if rule.rule == ref.ENDORSE_OVERLAP:
        return check_overlap(rows, k_of_row, candidates, g, estimator, claims, rule.overlap_threshold), None
    level = level if level is not None else VerifierLevel.of(rows, k_of_row, candidates, g, h)
    m = measure(level, estimator, claims, root=root)
    return judge(m, rule.refusal_rate), m


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
