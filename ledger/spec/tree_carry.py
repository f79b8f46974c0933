"""What a party's previous tree fixes of its next root: the carry rule, by which verifiers tie consecutive trees.

Why: the inherited-totals rule (``ledger.spec.histogram_rules``) ties every node of a tree to the party's own sums at
the tree's root, so a stretch of whole rows must start at a root. Nothing tied one root to the next, and at a root a
stretch could only be caught by the verifiers' statistical test, whose power is set by the PSD's resolution: it
refused no gradient stretch at all on the regression sets and few at theta 0.5 (docs: design decisions, endorsement).
But a party's root totals are not free: they are sums over the same rows at the next scores, and the scores move by the
public leaf values of the previous tree, applied to rows whose per-leaf sums the party itself released (its side
sums at the last split above each leaf). So the previous tree predicts the next root's totals:

* **counts**: the same rows, ``N_t = N_{t-1}`` exactly;
* **squared error**: ``g = score - y`` moves by the leaf value ``v`` of the row's leaf, so
  ``G_t = G_{t-1} + sum_l v_l n_l`` exactly (in reals), and ``H = n`` is fixed by the bin rules;
* **binary logistic loss**: ``g = sigmoid(score) - y``, so by Taylor's theorem a row moves by
  ``v h + r`` with ``|r| <= v^2 sup|sigmoid''| / 2``, and its hessian ``h = sigmoid'`` by at most
  ``|v| sup|sigmoid''|``; ``sup|sigmoid''| = 1/(6 sqrt 3)``. Summed over the leaves:
  ``|G_t - G_{t-1} - sum_l v_l H_l| <= sum_l n_l v_l^2 / (12 sqrt 3)`` and
  ``|H_t - H_{t-1}| <= sum_l n_l |v_l| / (6 sqrt 3)``.

These are bounds that hold for every honest party on any data (no noise model, no error rate), so a verifier
refuses a root that breaks them outright, and the audit replays the check from the chain's records alone. A
stretch by F that starts at tree t moves the root by ``(F - 1)`` times its totals, which the bounds leave no room
for unless those totals are nearly zero; a stretch that goes on from tree to tree moves every difference by F as
well. What the computation adds: every row's values are floats rounded to fixed-point units, off by at most one
unit plus a few float roundings of magnitudes no larger than the score bound ``S`` (the sum over the trees so far of
their largest leaf value) plus the loss's gradient bound ``L`` (1 for the logistic loss; the fixed-point range for
squared error); ``FLOAT_REL`` times that magnitude is 64 roundings' worth per row.

What it trusts: the previous tree's per-leaf sums, which below the root only the exact rules check. A party that
moves rows between its bins at the splits of the previous tree (keeping every total) moves its leaf sums and so the
root the carry allows: a fabrication planned a tree ahead, which docs/threat-model.md discusses.

Why the verifiers and not the contract: the check needs each party's per-leaf sums of the previous tree, which the
contract holds only as hashes (``_sides``), and ``FGBDTChain`` has no code space left under EIP-170 to accumulate
them. A quorum of colluding verifiers could endorse a root that breaks the carry; the audit names it.
A differentially private task adds noise to the totals, which no exact bound survives: there the carry does not
apply (``applies``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from fgbdt_chain.ledger.spec.histogram_rules import Sides, candidate_totals
from fgbdt_chain.ledger.spec.reference import (
    ENDORSE_STATISTICAL,
    OBJECTIVE_BINARY,
    OBJECTIVE_SQUARED,
    ONE,
    NodeHistograms,
    Totals,
)

SIGMOID2_MAX = Fraction(96225045, 10**9)
"""``sup |sigmoid''| = 1/(6 sqrt 3) = 0.0962250448...``, rounded up: the bound of a row's hessian change per unit of
score, and twice that of its gradient's Taylor remainder per unit of score squared."""
FLOAT_REL = Fraction(1, 2**46)
"""Relative float error allowed per row: 64 roundings of 2^-52 (the score update, the sigmoid, ``p - y`` and
``p (1 - p)`` each take one to a few)."""
GRADIENT_LIMIT = {OBJECTIVE_BINARY: ONE, OBJECTIVE_SQUARED: 2**80}
"""The largest per-row gradient magnitude, in fixed-point units: the logistic loss's 1, and for squared error the
range a row's value is quantised into (``node.kernels.histogram.FixedRows``)."""


class CarryError(ValueError):
    """A root whose totals the party's previous tree does not allow; ``name`` says which quantity."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name


def applies(endorse_rule: int, objective: int, private: bool) -> bool:
    """Whether a task's verifiers check each root from the second tree on against the previous tree: under the
    statistical endorsement rule (the overlap rule is the paper's reading, kept as it was), in a task without
    differential privacy (whose noisy totals keep no exact bound)."""
    return endorse_rule == ENDORSE_STATISTICAL and not private and objective in GRADIENT_LIMIT


def next_score_bound(bound: int, leaf_values: Iterable[int]) -> int:
    """The bound on every row's |score| after a tree: the bound before it plus its largest |leaf value|."""
    return bound + max((abs(v) for v in leaf_values), default=0)


class ScoreBounds:
    """``next_score_bound`` over a task's finished trees, each tree's leaf values read once (``leaf_values``)."""

    def __init__(self, leaf_values: Callable[[int], Iterable[int]]) -> None:
        self.leaf_values = leaf_values
        self.bounds = [0]

    def before(self, tree: int) -> int:
        """The bound on every score after the trees before ``tree``."""
        while len(self.bounds) <= tree:
            t = len(self.bounds) - 1
            self.bounds.append(next_score_bound(self.bounds[t], self.leaf_values(t)))
        return self.bounds[tree]


def leaf_sums(
    levels: Sequence[Mapping[int, NodeHistograms]], splits: Mapping[int, tuple[int, int]], leaves: Mapping[int, int]
) -> list[tuple[int, Totals]]:
    """A party's (leaf value, totals) at every leaf of a finished tree, from its histograms of each level (open node
    id -> histograms) and the tree's splits (node -> feature, threshold) and leaf values: a node that became a leaf
    holds the party's candidate totals there; a split whose children opened no level holds them as its side sums."""
    out: list[tuple[int, Totals]] = []
    for depth, level in enumerate(levels):
        below = levels[depth + 1] if depth + 1 < len(levels) else {}
        for node in sorted(level):
            hist = level[node]
            if node in leaves:
                out.append((leaves[node], candidate_totals(hist, 0)))
            elif node in splits and 2 * node not in below and 2 * node in leaves:
                feature, threshold = splits[node]
                sides = Sides.of(hist, hist.features.index(feature), threshold)
                out += [(leaves[2 * node], sides.left), (leaves[2 * node + 1], sides.right)]
    return out


@dataclass(frozen=True)
class Carry:
    """The root totals a party's previous tree allows: exact counts, the expected gradient sum and the room either
    side of it, and the room for the hessian sum around the previous one."""

    root: Totals
    g: Fraction
    g_slack: Fraction
    h_slack: Fraction

    @classmethod
    def of(cls, objective: int, root: Totals, leaves: Iterable[tuple[int, Totals]], score_bound: int) -> Carry:
        """The carry of a party whose root totals at the previous tree were ``root`` and whose sums at that
        tree's leaves were ``(leaf value, totals)``; ``score_bound`` bounds every |score| after that tree."""
        if objective not in GRADIENT_LIMIT:
            raise ValueError(f"unknown objective {objective}")
        row = 1 + FLOAT_REL * (score_bound + GRADIENT_LIMIT[objective])  # units, per row and value
        # integer sums first, one exact fraction each after: the leaves of a deep tree are hundreds
        v_h = v_n = n_v2 = n_abs_v = rows = 0
        for v, t in leaves:
            v_h += v * t.h
            v_n += v * t.n
            n_v2 += t.n * v * v
            n_abs_v += t.n * abs(v)
            rows += t.n
        if objective == OBJECTIVE_SQUARED:
            return cls(root, Fraction(root.g + v_n), 2 * row * rows, Fraction(0))
        g = Fraction(root.g * ONE + v_h, ONE)
        g_slack = Fraction(n_v2, ONE) * SIGMOID2_MAX / 2 + row * (2 * rows + Fraction(n_abs_v, ONE))
        h_slack = n_abs_v * SIGMOID2_MAX + 2 * row * rows
        return cls(root, g, g_slack, h_slack)

    def check(self, totals: Totals) -> None:
        """Raises :class:`CarryError` when ``totals`` (a root's, the next tree's) are not what the carry allows."""
        if totals.n != self.root.n:
            raise CarryError(
                "CarriedCountMismatch", f"{totals.n} rows at this root, {self.root.n} at the previous tree's"
            )
        if abs(totals.g - self.g) > self.g_slack:
            raise CarryError(
                "CarriedGradientOutOfRange",
                f"gradient sum {totals.g / ONE:.6g}, the previous tree allows {float(self.g) / ONE:.6g} "
                f"± {float(self.g_slack) / ONE:.3g}",
            )
        if abs(totals.h - self.root.h) > self.h_slack:
            raise CarryError(
                "CarriedHessianOutOfRange",
                f"hessian sum {totals.h / ONE:.6g}, the previous tree allows {self.root.h / ONE:.6g} "
                f"± {float(self.h_slack) / ONE:.3g}",
            )

    def allows(self, totals: Totals) -> bool:
        """Whether :meth:`check` passes."""
        try:
            self.check(totals)
        except CarryError:
            return False
        return True
