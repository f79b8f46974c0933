"""Centred cross-fitted leave-one-out contributions: ``loo`` on each party's sums centred at its own parent step.

Why centre: under label skew (a partition's theta) the parties' base rates differ. In ``loo`` a judge r values a
coalition's leaves by how well their *level* fits r's rows, so the other parties, whose rows pull the leaves towards
their own base rates, look harmful to r and are judged negative; reward shares count positive totals only
(``reference.reward_shares``), so a party that weighs more as a judge (duplicated rows, synthetic near-copies)
pushes the others below zero and takes their share (``bench.manipulation``: +4 to +9 points on average at theta
0.8, up to +64 at one point). A prior shift moves the Bayes log-odds by a constant, the same on both sides of a
cut, so what a split tells a party about rows it never saw is the *contrast* between the children, not their level.

The measure, at each split the model makes, from every party's sums at the cut (``loo.Sides``):

* each party's sums are centred at its own parent Newton step ``w_p = -G_p / (H_p + lambda)``: a side's gradient
  becomes ``g_side + w_p h_side`` (the residual after the party's own base rate), its hessian stays;
* a coalition ``S`` estimates the split's contrast from its members' centred sums: the children's Newton steps less
  the parent's, ``d_L, d_R`` (the parent's step of centred sums is zero up to lambda);
* a judge r values ``S`` by the second-order loss reduction of the offsets on its own centred sums:
  ``v_r(S) = -(g~_rL d_L + h_rL d_L^2 / 2 + g~_rR d_R + h_rR d_R^2 / 2)``;
* party p's value is ``sum_{r != p} [v_r(N \\ r) - v_r(N \\ {r, p})]``, divided by the judges' rows at the tree's
  root (``loo.per_judged_row``), exactly as in ``loo``.

Properties (proof sketch here, measurements in ``bench.manipulation`` and the threat model page):

* symmetry: two parties with equal sums get equal values (every formula is symmetric in the parties' order);
* null player: a party with no rows at the cut (zero sums) changes no coalition's estimate and gets exactly 0; a party
  whose rows carry no contrast (features independent of the label) moves every coalition's contrast towards 0,
  which its judges see as a loss: its value is at most 0 in expectation, and it earns nothing;
* duplicated rows: the holder's own estimate (``d`` from its sums alone) is unchanged by copies, and its centred
  sums scale by k as a judge and as a member, the same as genuine rows would; copies carry no new information, so
  the leave-one-out value the others see (judged on rows the copies never saw) falls with the extra weight on the
  holder's noise; measured, not exact;
* not efficient: values are marginals, not a division of the coalition's total (no ``2^M`` coalitions), and they
  can sum to less than the federation's gain; shares divide the reward over the positive values.

Cost: ``loo``'s ``M (M + 1) / 2`` coalition estimates a split, plus one centring per party. Integers throughout,
truncating divisions (``fixed_point.tdiv``): the function the contract mirrors.
"""

from __future__ import annotations

from collections.abc import Sequence

from fgbdt_chain.ledger.spec import loo
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.fixed_point import ONE, tdiv


def centre(s: loo.Sides, lam: int) -> loo.Sides:
    """A party's sums at the cut with its gradients taken at its own parent Newton step (``g + w_p h`` per side),
    truncated once per side."""
    w = ref.leaf_value(s.g_left + s.g_right, s.h_left + s.h_right, lam, ONE)
    return loo.Sides(s.g_left + tdiv(w * s.h_left, ONE), s.h_left, s.g_right + tdiv(w * s.h_right, ONE), s.h_right)


def offsets(s: loo.Sides, lam: int) -> loo.Leaves:
    """A coalition's split contrast from its centred sums: the children's Newton steps less the parent's, as a
    ``loo.Leaves`` with parent 0 (so that ``loo.value`` judges the offsets at the judge's own parent step)."""
    leaves = loo.Leaves.of(s, lam)
    return loo.Leaves(0, leaves.left - leaves.parent, leaves.right - leaves.parent)


def node_values(sides: Sequence[loo.Sides], lam: int) -> list[int]:
    """Each party's summed judged marginal at one split (module docstring), from every submitting party's sums at
    the model's cut, in party order."""
    return loo.node_values([centre(s, lam) for s in sides], lam, estimate=offsets)


def tree_values(
    splits: Sequence[tuple[Sequence[ref.NodeHistograms], int, int]], rows: Sequence[int], params: ref.Params
) -> list[int]:
    """Each party's contribution of one tree: ``node_values`` summed over the tree's splits, then
    ``loo.per_judged_row`` (the arguments of ``loo.tree_values``)."""
    m = len(rows)
    out = [0] * m
    for hists, rank, threshold in splits:
        if len(hists) != m:
            raise ValueError(f"a split with {len(hists)} parties' histograms in a tree of {m} parties")
        sides = [loo.Sides.of(h, rank, threshold, params.hessian_mode) for h in hists]
        for p, v in enumerate(node_values(sides, params.lam)):
            out[p] += v
    return loo.per_judged_row(out, rows)


NODE_VALUES = {"loo": loo.node_values, "centred": node_values}
"""The judged measures' value of one split by contribution name (``modes.CONTRIBUTIONS``; ``shapley`` is paid by
``reference``)."""
