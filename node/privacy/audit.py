"""An empirical lower bound on epsilon from one training run: the audit of Steinke, Nasr and Jagielski ("Privacy
auditing with one (1) training run", NeurIPS 2023).

Why: the accountant proves an upper bound for the mechanisms as written; it cannot see a mechanism that is not what
it says (noise left off, a value released outside the accounting). An audit attacks what was actually released. Its
design: ``m`` canary rows, each put into one party's rows independently with probability 1/2; after training, an
attacker scores every canary from what was released, guesses "in" for the ``k_in`` highest scores and "out" for the
``k_out`` lowest and abstains on the rest. If the training is ``(epsilon, delta)``-DP in each canary, the number of
correct guesses among the ``r = k_in + k_out`` is, up to a ``delta`` term, stochastically dominated by
``Binomial(r, e^epsilon / (1 + e^epsilon))``, the accuracy of randomized response (their Theorem 3.1; the ``delta``
term is their Section 5's: ``2 m delta`` times the largest ``P[v - i <= B < v] / i``). So a count of correct guesses
that this binomial reaches with probability below ``1 - confidence`` refutes ``epsilon``; the largest refuted epsilon
is the lower bound (:func:`epsilon_lower_bound`). A mechanism whose lower bound at 95% exceeds its claim is not what
it claims, with 95% confidence.

Independent runs pool (:func:`pool`): a canary of one run moves only that run's output, so the runs together are one
mechanism on all their canaries, DP in each, and their guesses add up.

This module is the statistics alone: the canaries, the attack and the runs are the benchmark's
(``bench.privacy_audit``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
"""The confidence of a reported lower bound."""
MAX_EPSILON = 64.0
"""The search's upper end: a bound above it is reported as this (no confidence level needs more)."""


def guess_accuracy(epsilon: float) -> float:
    """``e^epsilon / (1 + e^epsilon)``: the probability that an epsilon-DP mechanism's best guess of one canary's
    coin is right (randomized response)."""
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    return 1.0 / (1.0 + math.exp(-epsilon))


def binomial_pmf(r: int, q: float) -> np.ndarray:
    """``P[Binomial(r, q) = k]`` for ``k = 0 .. r``, from log-gamma (stable for thousands of trials)."""
    k = np.arange(r + 1, dtype=np.float64)
    if q <= 0.0 or q >= 1.0:
        out = np.zeros(r + 1)
        out[0 if q <= 0.0 else r] = 1.0
        return out
    log_comb = np.array([math.lgamma(r + 1) - math.lgamma(i + 1) - math.lgamma(r - i + 1) for i in range(r + 1)])
    return np.exp(log_comb + k * math.log(q) + (r - k) * math.log1p(-q))


def p_value(m: int, r: int, v: int, epsilon: float, delta: float = 0.0) -> float:
    """The probability of at least ``v`` correct guesses out of ``r`` under the hypothesis that the training is
    ``(epsilon, delta)``-DP in each of ``m`` canaries: ``P[B >= v] + 2 m delta max_{1 <= i <= v} P[v - i <= B < v] / i``
    with ``B ~ Binomial(r, e^epsilon / (1 + e^epsilon))`` (Steinke, Nasr and Jagielski 2023, Theorem 3.1 and Section
    5), at most 1."""
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= correct ({v}) <= guesses ({r}) <= canaries ({m})")
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must be in [0, 1], got {delta}")
    pmf = binomial_pmf(r, guess_accuracy(epsilon))
    tail = float(pmf[v:].sum())
    worst = 0.0
    if delta > 0.0 and v > 0:
        below = np.cumsum(pmf[:v][::-1])  # below[i - 1] = P[v - i <= B < v]
        worst = float(np.max(below / np.arange(1, v + 1)))
    return min(1.0, tail + 2.0 * m * delta * worst)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float = 0.0, confidence: float = CONFIDENCE) -> float:
    """The largest epsilon that ``v`` correct guesses out of ``r`` (``m`` canaries) refute at ``confidence``: the
    supremum of the epsilons whose :func:`p_value` is below ``1 - confidence`` (bisection; the p-value grows with
    epsilon). 0 when not even epsilon 0 is refuted."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    beta = 1.0 - confidence
    if p_value(m, r, v, 0.0, delta) >= beta:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value(m, r, v, hi, delta) < beta:
        if hi >= MAX_EPSILON:
            return MAX_EPSILON
        lo, hi = hi, min(2.0 * hi, MAX_EPSILON)
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if p_value(m, r, v, mid, delta) < beta:
            lo = mid
        else:
            hi = mid
    return lo


def guesses(scores: Sequence[float] | np.ndarray, k_in: int, k_out: int) -> np.ndarray:
    """The attacker's guesses: +1 ("in") for the ``k_in`` highest scores, -1 ("out") for the ``k_out`` lowest, 0
    (abstain) for the rest. Ties go by canary order, which the coins do not depend on."""
    s = np.asarray(scores, dtype=np.float64)
    if k_in < 0 or k_out < 0 or k_in + k_out > s.size:
        raise ValueError(f"need k_in, k_out >= 0 with k_in + k_out <= {s.size} canaries, got {k_in} and {k_out}")
    if np.isnan(s).any():
        raise ValueError("a canary's score is NaN")
    order = np.argsort(-s, kind="stable")
    out = np.zeros(s.size, dtype=np.int64)
    out[order[:k_in]] = 1
    if k_out:
        out[order[-k_out:]] = -1
    return out


@dataclass(frozen=True)
class Audit:
    """One audit's counts and what they refute: ``m`` canaries, ``r`` guesses, ``v`` of them right."""

    m: int
    r: int
    v: int
    delta: float
    confidence: float = CONFIDENCE

    @property
    def epsilon_lower_bound(self) -> float:
        return epsilon_lower_bound(self.m, self.r, self.v, self.delta, self.confidence)

    def flags(self, claimed_epsilon: float) -> bool:
        """Whether the audit refutes the claim: its lower bound is above the claimed epsilon."""
        return self.epsilon_lower_bound > claimed_epsilon


def audit(
    scores: Sequence[float] | np.ndarray,
    included: Sequence[bool] | np.ndarray,
    k_in: int,
    k_out: int,
    delta: float,
    confidence: float = CONFIDENCE,
) -> Audit:
    """The audit of one run: the guesses from ``scores`` (:func:`guesses`) checked against the canaries' coins."""
    inside = np.asarray(included, dtype=bool)
    g = guesses(scores, k_in, k_out)
    if inside.shape != g.shape:
        raise ValueError(f"{inside.size} coins for {g.size} scores")
    right = int(np.sum((g == 1) & inside) + np.sum((g == -1) & ~inside))
    return Audit(int(g.size), int(np.sum(g != 0)), right, delta, confidence)


def pool(audits: Sequence[Audit]) -> Audit:
    """Independent runs as one audit: their canaries, guesses and right guesses added up (module docstring)."""
    if not audits:
        raise ValueError("nothing to pool")
    first = audits[0]
    if any(a.delta != first.delta or a.confidence != first.confidence for a in audits):
        raise ValueError("pooled audits must share delta and confidence")
    return Audit(
        sum(a.m for a in audits), sum(a.r for a in audits), sum(a.v for a in audits), first.delta, first.confidence
    )
