"""Scaled judged contributions: ``centred`` with each judge applying a coalition's tree at the fraction of its steps
that suits the judge's rows best, and shares that withhold harm instead of handing it to the others.

Why: two failures of ``centred`` measured on identical trees (``bench.manipulation``, the threat model page).

* Label skew changes the *scale* of a party's split contrasts, not only their level: a party whose rows are mostly of
  one class has gradient contrasts compressed by its own base rate, and the Newton steps of the others' sums
  overshoot its rows. A judge that applies a coalition's steps as they are then finds them harmful whenever they are
  more than twice its own, and at M = 2 under skew (theta 0.8) one of the two parties is judged negative on most data
  sets and earns nothing: honest shares are all or nothing there, and any change of the holder's rows flips them.
  Here a judge r applies a coalition's tree that points its way (it lowers r's loss at some step length) at the
  best fraction ``alpha`` in ``[0, 1]`` of its steps, fitted over the tree's splits on r's own centred sums (a line
  search of the tree's step length, as gradient boosting does per tree after Friedman, "Greedy Function
  Approximation: A Gradient Boosting Machine", Annals of Statistics 2001). The fraction is capped at 1: a judge may
  shrink a step it finds too long, never lengthen one, so a coalition is never credited with more than its own
  steps achieve on the judge's rows. A tree that points the wrong way is charged at the full step, as ``centred``
  charges it: the model applies it, whatever length the judge would have picked, and a coalition of noise must not
  earn the positive part of its noise (measured on identical trees at M = 2 under skew, over six data sets, a
  floor at 0 paid a holder of shuffled features 47.9% of the reward against 24.7% for its own rows; with the charge,
  0.8% against 21.5%).
* Reward shares over positive totals only (``reference.reward_shares``) hand a party's negative total to the
  positive ones, so a holder that makes the others look harmful (weighing more as their judge) takes their part.
  Here a party's share is its positive total over the sum of *every* total's magnitude
  (:func:`withheld_shares`): a negative total is harm done to the other parties' rows, and its amount stays with
  the requester. Lowering another party's value then pays only while that value stays positive.

The measure, per tree, from every party's sums at each split's cut (``loo.Sides``), centred as in ``centred``:

* for a judge r and a coalition S (the parties but r, or but r and p), each split adds to two integers:
  ``A = -(g~_rL d_L + g~_rR d_R)`` and ``B = h_rL d_L^2 + h_rR d_R^2`` (``d``: S's offsets, ``centred.offsets``);
  ``A - B / 2`` is ``centred``'s value of S to r, the tree's loss reduction on r's rows at the full step;
* r's verdict on S for the tree is ``max over alpha in [0, 1] of alpha A - alpha^2 B / 2`` when ``A > 0``:
  ``A - B / 2`` when ``A >= B`` (the full step is best), else ``A^2 / (2 B)``; and the full step's ``A - B / 2``
  when ``A <= 0``;
* party p's value of the tree is ``sum_{r != p} [verdict_r(N \\ r) - verdict_r(N \\ {r, p})]``, divided by the
  judges' rows at the tree's root (``loo.per_judged_row``).

Properties (proof sketches; measurements in ``bench.manipulation`` and the threat model page):

* symmetry: two parties with equal sums at every split get equal values (every formula is symmetric in the order);
* null player: a party with no rows at a split adds nothing to A or B of any coalition there, so both verdicts of
  its marginal see the same integers at that split; with no rows in the tree its value is exactly 0;
* not efficient: the values are marginals, not a division of the federation's total;
* copies: a duplicated party's centred sums scale by k as a judge and as a member; its own offsets do not change,
  and the coalitions' offsets move towards its noise, which the other judges' fitted fractions cannot undo (one
  fraction scales every split's step alike); measured, not exact;
* false names: not proof against them. A holder split into s parties is judged partly by its own pieces, which
  credit each other for rows of their common distribution, and the other parties' marginals fall where the pieces
  substitute for them; no measure built on per-party sums of gradients and hessians both pays a party for what
  its rows tell other parties' rows (cross-fitting, which is what makes copies unprofitable) and pays a merged
  holder for what its rows tell each other (which is what the pieces collect). Measured, the threat model page.

Cost: ``centred``'s ``M (M + 1) / 2`` coalition estimates a split, and ``M^2`` pairs of accumulators a tree. Integers
throughout, truncating divisions (``fixed_point.tdiv``): the function the contract would mirror.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fgbdt_chain.ledger.spec import centred, loo
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.fixed_point import ONE, tdiv


def terms(offsets: loo.Leaves, judge: loo.Sides) -> tuple[int, int]:
    """One split's ``(A, B)`` of a coalition's ``offsets`` (``centred.offsets``: parent 0) on a judge's centred
    sums, each truncated once (fixed point)."""
    dl, dr = offsets.left, offsets.right
    linear = ref.check_int256(-(judge.g_left * dl + judge.g_right * dr))
    quadratic = ref.check_int256(judge.h_left * dl * dl + judge.h_right * dr * dr)
    return tdiv(linear, ONE), tdiv(quadratic, ONE * ONE)


def verdict(a: int, b: int) -> int:
    """A judge's verdict on a coalition's tree from its accumulated ``(A, B)`` (``b >= 0``): ``max over alpha in
    [0, 1] of alpha a - alpha^2 b / 2`` for a tree that points the judge's way (``a > 0``), else the full step's
    ``a - b / 2``; truncated once."""
    if b < 0:
        raise ValueError(f"the quadratic term of a verdict must be >= 0, got {b}")
    if a <= 0 or a >= b:
        return a - tdiv(b, 2)
    return tdiv(ref.check_int256(a * a), 2 * b)


@dataclass
class TreeFits:
    """One tree's accumulators for ``m`` parties: judge r's ``(A, B)`` of the coalition without r (``full[r]``)
    and without r and p (``pair[r][p]``)."""

    m: int
    full: list[list[int]] = field(init=False)
    pair: list[list[list[int]]] = field(init=False)

    def __post_init__(self) -> None:
        if self.m < 1:
            raise ValueError(f"a tree needs at least one party, got {self.m}")
        self.full = [[0, 0] for _ in range(self.m)]
        self.pair = [[[0, 0] for _ in range(self.m)] for _ in range(self.m)]

    def add(self, sides: Sequence[loo.Sides], lam: int) -> None:
        """One split: every party's sums at its cut, in party order (zeros for a party without rows there)."""
        if len(sides) != self.m:
            raise ValueError(f"a split with {len(sides)} parties' sums in a tree of {self.m} parties")
        c = [centred.centre(s, lam) for s in sides]
        total = loo.Sides(*(sum(getattr(s, f) for s in c) for f in ("g_left", "h_left", "g_right", "h_right")))
        pairs: dict[tuple[int, int], loo.Leaves] = {}
        for r in range(self.m):
            without_r = total - c[r]
            _add(self.full[r], terms(centred.offsets(without_r, lam), c[r]))
            for p in range(self.m):
                if p == r:
                    continue
                key = (min(p, r), max(p, r))
                if key not in pairs:
                    pairs[key] = centred.offsets(without_r - c[p], lam)
                _add(self.pair[r][p], terms(pairs[key], c[r]))

    def values(self) -> list[int]:
        """Each party's summed marginal verdict of the tree, ``sum_{r != p} [verdict_r(N \\ r) -
        verdict_r(N \\ {r, p})]``, before ``loo.per_judged_row``."""
        out = [0] * self.m
        for r in range(self.m):
            base = verdict(*self.full[r])
            for p in range(self.m):
                if p != r:
                    out[p] += base - verdict(*self.pair[r][p])
        return out


def _add(acc: list[int], ab: tuple[int, int]) -> None:
    acc[0] += ab[0]
    acc[1] += ab[1]


def tree_values(
    splits: Sequence[tuple[Sequence[ref.NodeHistograms], int, int]], rows: Sequence[int], params: ref.Params
) -> list[int]:
    """Each party's contribution of one tree (the arguments of ``loo.tree_values``): the tree's fitted marginal
    verdicts (:class:`TreeFits`), then ``loo.per_judged_row``."""
    fits = TreeFits(len(rows))
    for hists, rank, threshold in splits:
        if len(hists) != len(rows):
            raise ValueError(f"a split with {len(hists)} parties' histograms in a tree of {len(rows)} parties")
        fits.add([loo.Sides.of(h, rank, threshold, params.hessian_mode) for h in hists], params.lam)
    return loo.per_judged_row(fits.values(), rows)


def withheld_shares(totals: Sequence[int], finished: Sequence[bool]) -> list[float]:
    """Each party's share of the reward: its positive total over the sum of every total's magnitude if it took part
    to the last step, else 0; what negative totals weigh stays with the requester (module docstring)."""
    if len(finished) != len(totals):
        raise ValueError(f"{len(totals)} totals but {len(finished)} finished flags")
    weight = sum(abs(t) for t in totals)
    return [max(t, 0) / weight if weight and done else 0.0 for t, done in zip(totals, finished, strict=True)]


SCALED = "scaled"
"""This measure's contribution name (``modes.CONTRIBUTIONS``)."""
JUDGED: tuple[str, ...] = (*centred.NODE_VALUES, SCALED)
"""Every judged measure's contribution name: paid by the tree's cross-fitted values instead of split Shapley."""
