"""The exact rules a party's histograms must keep, checked by the contract in the transaction that submits them.

Why exact rules: a verifier's endorsement is a statistical judgement with an error rate; these are identities that
hold for every honest party on any data, so the contract can refuse a violation outright. Parties quantise each
row's gradient and hessian once (``node.protocol.local_party.LocalParty``), so every sum is an exact integer sum of
the same row values and the identities hold to the last unit:

* **candidate totals**: a node's two candidate histograms hold the same rows, so their totals (g, h, n) are equal;
* **inherited totals**: a party's totals at a node equal its own left/right sums at the parent's chosen split, so a
  stretched histogram must be stretched from the root of the tree down, where the most rows stand behind every bin
  and the verifiers' test is strongest (the contract stores a hash of each party's side sums when it resolves a split
  node and compares the children's totals with it);
* **continuity**: a party that did not submit at the previous step (refused, declined or silent) takes no further
  part in the task, since its later histograms could no longer be tied to its earlier ones;
* **per-bin bounds of the loss**: binary logistic loss has ``g = p - y`` and ``h = p(1 - p)`` per row, so
  ``|G| <= n``, ``0 <= H <= n/4`` and, by the concavity of ``a(1 - a)``, ``H <= |G|(1 - |G|/n)`` whenever
  ``|G| > n/2``; at the first tree every score is 0, so ``p = 1/2`` exactly, ``H = n/4`` and ``n/2 - G`` is the
  bin's count of positive labels, an integer. Squared error has ``h = 1``, so ``H = n``.

The rows' floats are rounded once each (18 decimals), and ``g``, ``h`` are floats of ``p``, so the concavity bound
allows ``ROW_SLACK`` units per row; the other bounds are exact. Each rule has the contract's custom error as its
name (``HistogramRuleError.name``); the contract checks them in the order of :func:`check_node`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fgbdt_chain.ledger.spec.reference import (
    OBJECTIVE_BINARY,
    OBJECTIVE_SQUARED,
    ONE,
    NodeHistograms,
    Totals,
    check_int256,
    raw_side_sums,
)

ROW_SLACK: int = 1000
"""Fixed-point units per row by which a bin's hessian sum may exceed the logistic concavity bound: the float error
of computing ``g = p - y`` and ``h = p(1 - p)`` from the same ``p`` (about 1e-16 relative) plus the rounding of both
to 18 decimals. It gives a stretching party 1e-15 per row, nothing measurable."""


RULE_ERRORS: frozenset[str] = frozenset(
    {
        "CandidateTotalsMismatch",
        "CountOutOfRange",
        "GradientOutOfRange",
        "HessianOutOfRange",
        "LogisticBound",
        "FirstTreeLabels",
        "InheritedTotalsMismatch",
    }
)
"""The contract's custom errors for histograms that break an exact rule: the names a :class:`HistogramRuleError`
carries, which a party that sent such histograms takes as a refusal (not a race to retry)."""


class HistogramRuleError(ValueError):
    """Histograms that break an exact rule; ``name`` is the contract's custom error (one of :data:`RULE_ERRORS`),
    ``node`` the heap id."""

    def __init__(self, name: str, node: int, detail: str) -> None:
        if name not in RULE_ERRORS:
            raise ValueError(f"{name!r} is not a histogram rule's error (RULE_ERRORS)")
        super().__init__(f"{name} at node {node}: {detail}")
        self.name = name
        self.node = node


@dataclass(frozen=True)
class Sides:
    """A party's (g, h, n) left and right sums at a split node: its children's totals at the next level."""

    left: Totals
    right: Totals

    @classmethod
    def of(cls, hist: NodeHistograms, rank: int, threshold: int) -> Sides:
        g_l, h_l, n_l, g_r, h_r, n_r = raw_side_sums(hist, rank, threshold)
        return cls(Totals(g_l, h_l, n_l), Totals(g_r, h_r, n_r))


_SAFE_TERM = 1 << 247
"""Below this in magnitude, 256 terms cannot carry a partial sum out of int256: their checked sum is their sum."""


def _checked_sum(values: Sequence[int]) -> int:
    """The contract's checked sum (reverting where a partial sum leaves int256), at C speed where no partial sum can:
    a verifier sums every candidate of every node it checks."""
    if len(values) <= 256 and values and min(values) > -_SAFE_TERM and max(values) < _SAFE_TERM:
        return sum(values)
    acc = 0
    for v in values:
        acc = check_int256(acc + v)
    return acc


def candidate_totals(hist: NodeHistograms, rank: int) -> Totals:
    """The (g, h, n) totals of one candidate histogram (the contract's checked sums)."""
    return Totals(_checked_sum(hist.g[rank]), _checked_sum(hist.h[rank]), _checked_sum(hist.n[rank]))


BOUNDS_NONE = 2
"""The ``bounds`` of a differentially private task (``FGBDTRulesLib.BOUNDS_NONE``): its histograms carry noise, which
no per-bin bound survives, so only the totals identities are checked (the parties project their noisy bins onto
noisy totals, which is post-processing)."""


def bounds_of(objective: int, epsilon: int) -> int:
    """The per-bin bounds a task's histograms keep: its objective's, or none when it is private (``epsilon`` > 0)."""
    return BOUNDS_NONE if epsilon > 0 else objective


def check_bins(hist: NodeHistograms, node: int, objective: int, first_tree: bool) -> None:
    """The per-bin bounds of the loss (module docstring), in slot order (candidate rank times nbins plus bin);
    ``objective`` is the task's ``bounds_of``."""
    if objective == BOUNDS_NONE:
        return
    nbins = len(hist.n[0])
    for rank in range(len(hist.features)):
        for b, (g, h, n) in enumerate(zip(hist.g[rank], hist.h[rank], hist.n[rank], strict=True)):
            slot = rank * nbins + b
            if n < 0:
                raise HistogramRuleError("CountOutOfRange", node, f"slot {slot} holds {n} rows")
            n_one = check_int256(n * ONE)
            if objective == OBJECTIVE_SQUARED:
                if h != n_one:
                    raise HistogramRuleError("HessianOutOfRange", node, f"slot {slot}: H = {h}, squared error has {n}")
                continue
            if objective != OBJECTIVE_BINARY:
                raise ValueError(f"unknown objective {objective}")
            a = check_int256(-g) if g < 0 else g
            if a > n_one:
                raise HistogramRuleError("GradientOutOfRange", node, f"slot {slot}: |G| = {a} > {n} rows")
            if h < 0 or check_int256(4 * h) > n_one:
                raise HistogramRuleError("HessianOutOfRange", node, f"slot {slot}: H = {h} outside [0, {n}/4]")
            if check_int256(2 * a) > n_one:
                lhs = check_int256(h * n_one)
                rhs = check_int256(check_int256(a * (n_one - a)) + check_int256(check_int256(ROW_SLACK * n) * n_one))
                if lhs > rhs:
                    raise HistogramRuleError("LogisticBound", node, f"slot {slot}: H = {h} > |G|(1 - |G|/n)")
            if first_tree and (4 * h != n_one or check_int256(n_one // 2 - g) % ONE != 0):
                raise HistogramRuleError(
                    "FirstTreeLabels", node, f"slot {slot}: at score 0 every row has h = 1/4 and g = 1/2 - y"
                )


def check_node(hist: NodeHistograms, node: int, objective: int, first_tree: bool) -> None:
    """One node's rules that need no earlier state: equal candidate totals, then the per-bin bounds."""
    first = candidate_totals(hist, 0)
    for rank in range(1, len(hist.features)):
        if candidate_totals(hist, rank) != first:
            raise HistogramRuleError(
                "CandidateTotalsMismatch", node, f"candidate {rank} totals differ from candidate 0"
            )
    check_bins(hist, node, objective, first_tree)


def check_level(
    hists: Sequence[NodeHistograms],
    nodes: Sequence[int],
    objective: int,
    first_tree: bool,
    inherited: Mapping[int, Sides] | None,
) -> None:
    """A party's whole level, as ``submitHistograms`` checks it: each node in increasing id, then (below the root)
    each pair of siblings against the party's own side sums at their parent (``inherited``, by parent node id;
    None at a tree's root)."""
    if len(hists) != len(nodes):
        raise ValueError(f"{len(hists)} node histograms for {len(nodes)} open nodes")
    for hist, node in zip(hists, nodes, strict=True):
        check_node(hist, node, objective, first_tree)
    if inherited is None:
        return
    for i in range(0, len(nodes), 2):
        parent = nodes[i] // 2
        expected = inherited.get(parent)
        got = (candidate_totals(hists[i], 0), candidate_totals(hists[i + 1], 0)) if i + 1 < len(nodes) else None
        if expected is None or got is None or nodes[i + 1] != nodes[i] + 1 or got != (expected.left, expected.right):
            raise HistogramRuleError(
                "InheritedTotalsMismatch", nodes[i], "the totals differ from this party's own sums at the parent split"
            )
