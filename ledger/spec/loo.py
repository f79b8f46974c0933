"""Cross-fitted leave-one-out contributions: a party is paid for what its rows improve on rows that did not train.

Why not split Shapley for this: the split Shapley value of a node (``reference.split_shapley``) values coalitions by
their training gain ``G_L^2 / H_L + G_R^2 / H_R``, which grows with the rows behind the sums, so a party that copies
its rows or adds synthetic near-copies raises its share; and it is efficient over identities, so a holder that joins
as several parties adds players to every coalition and is paid more in total (``bench.manipulation``).

The measure, at each node the model splits (after Ghorbani and Zou, "Data Shapley: Equitable Valuation of Data for
Machine Learning", ICML 2019: value data by what it improves on data it did not train on):

* a coalition ``S`` estimates the node's leaves at the model's own cut from its summed histograms: the parent's and
  both children's Newton steps ``w = -G_S / (H_S + lambda)`` (``reference.leaf_value`` at learning rate 1);
* a party r judges ``S`` on its own sums at the cut: the second-order loss reduction of splitting,
  ``v_r(S) = l(w0; r) - l(wL; r_L) - l(wR; r_R)``, ``l(w; r) = G_r w + H_r w^2 / 2``;
* party p's value is what it adds, as every other party r judges it, to the coalition without r:
  ``sum_{r != p} [v_r(N \\ r) - v_r(N \\ {r, p})]``, divided by the judges' rows at the tree's root.

r's rows are out of sample for every coalition without r, so every row a party trains on also judges the others,
and nobody's own rows ever judge it: no validation fold, no row less for the model, no extra message. Copies of a
party's rows add no information its originals did not carry, and counting them twice only moves the coalitions'
leaves towards that party's noise, which the judges' rows see. A holder that joins as several identities is paid
for each identity's marginal to coalitions that keep the others, which is no more than its share of the whole
holder's marginal where the value is submodular (diminishing returns of rows for a leaf estimate); dividing by the
judges' rows keeps the extra judges a split makes from adding weight. ``bench.manipulation`` measures all of it.

Cost: ``M (M + 1) / 2`` coalition leaf estimates a split (each coalition without one party or two), no split search
and no ``2^M``. Integers throughout, truncating divisions (``fixed_point.tdiv``): the function the contract mirrors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.fixed_point import ONE, tdiv


@dataclass(frozen=True)
class Sides:
    """Sums at a node's cut, left and right, with what plays the hessian as ``reference.hessian_of`` gives it."""

    g_left: int
    h_left: int
    g_right: int
    h_right: int

    @classmethod
    def of(cls, hist: ref.NodeHistograms, rank: int, threshold: int, hessian_mode: int) -> Sides:
        return cls(*ref.party_side_sums(hist, rank, threshold, hessian_mode))

    def __sub__(self, other: Sides) -> Sides:
        return Sides(
            self.g_left - other.g_left,
            self.h_left - other.h_left,
            self.g_right - other.g_right,
            self.h_right - other.h_right,
        )


@dataclass(frozen=True)
class Leaves:
    """A coalition's Newton steps at a node (fixed point): the parent's and both children's."""

    parent: int
    left: int
    right: int

    @classmethod
    def of(cls, s: Sides, lam: int) -> Leaves:
        """The steps the sums ``s`` give (an empty coalition's are 0).

        Newton steps, learning rate 1: the learning rate shrinks every coalition's step alike, and a step shrunk by
        ``lr`` keeps only ``lr^2`` of the quadratic term, the term where the precision of an estimate (how many
        genuinely new rows stand behind it) shows."""
        return cls(
            ref.leaf_value(s.g_left + s.g_right, s.h_left + s.h_right, lam, ONE),
            ref.leaf_value(s.g_left, s.h_left, lam, ONE),
            ref.leaf_value(s.g_right, s.h_right, lam, ONE),
        )


def value(leaves: Leaves, judge: Sides) -> int:
    """``v_r``: the second-order loss reduction on the judge's sums of splitting with ``leaves`` instead of keeping
    the parent's step, truncated once (fixed point)."""
    w0, wl, wr = leaves.parent, leaves.left, leaves.right
    linear = (judge.g_left + judge.g_right) * w0 - judge.g_left * wl - judge.g_right * wr
    quadratic = (judge.h_left + judge.h_right) * w0 * w0 - judge.h_left * wl * wl - judge.h_right * wr * wr
    return tdiv(ref.check_int256(2 * ONE * linear + quadratic), 2 * ONE * ONE)


def node_values(sides: Sequence[Sides], lam: int, estimate: Callable[[Sides, int], Leaves] = Leaves.of) -> list[int]:
    """Each party's summed judged marginal at one split, ``sum_{r != p} [v_r(N \\ r) - v_r(N \\ {r, p})]``, from
    every submitting party's sums at the model's cut (``Sides.of``), in party order. The coalitions' sums are the
    total minus the parties left out (the same integers as summing the others). ``estimate``: a coalition's steps
    from its sums (``ledger.spec.centred`` passes the split's contrast)."""
    m = len(sides)
    out = [0] * m
    if m < 2:
        return out
    total = Sides(*(sum(getattr(s, f) for s in sides) for f in ("g_left", "h_left", "g_right", "h_right")))
    pair: dict[tuple[int, int], Leaves] = {}
    for r in range(m):
        judge = sides[r]
        without_r = total - judge
        base = value(estimate(without_r, lam), judge)
        for p in range(m):
            if p == r:
                continue
            key = (min(p, r), max(p, r))
            if key not in pair:
                pair[key] = estimate(without_r - sides[p], lam)
            out[p] += base - value(pair[key], judge)
    return out


def per_judged_row(values: Sequence[int], rows: Sequence[int]) -> list[int]:
    """Each party's value per row that judged it: ``value_p / sum_{r != p} rows_r`` (``rows``: each party's rows at
    the tree's root), truncated; 0 when nobody judged it."""
    if len(values) != len(rows):
        raise ValueError(f"{len(values)} values but {len(rows)} row counts")
    if any(r < 0 for r in rows):
        raise ValueError(f"row counts must be >= 0, got {list(rows)}")
    total = sum(rows)
    return [tdiv(v, total - r) if total > r else 0 for v, r in zip(values, rows, strict=True)]


def tree_values(
    splits: Sequence[tuple[Sequence[ref.NodeHistograms], int, int]], rows: Sequence[int], params: ref.Params
) -> list[int]:
    """Each party's contribution of one tree: ``node_values`` summed over the tree's splits (each given as every
    submitting party's histograms of the node, the chosen candidate rank and threshold), then ``per_judged_row``."""
    m = len(rows)
    out = [0] * m
    for hists, rank, threshold in splits:
        if len(hists) != m:
            raise ValueError(f"a split with {len(hists)} parties' histograms in a tree of {m} parties")
        sides = [Sides.of(h, rank, threshold, params.hessian_mode) for h in hists]
        for p, v in enumerate(node_values(sides, params.lam)):
            out[p] += v
    return per_judged_row(out, rows)
