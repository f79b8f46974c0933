"""One privacy budget per party for everything it releases, split over its mechanisms and accounted by RDP.

Why one budget: a party releases a bin sketch, a PSD, a vote per open node and level, and histograms per open node and
level; an epsilon per mechanism says nothing about what the party as a whole gives away. The task fixes ``(epsilon,
delta)`` per party; :func:`plan` splits it (``SPLIT``, below) and calibrates every mechanism so that the composition
of all of them over the whole task is ``(epsilon, delta)``-DP, computed by Google's ``dp-accounting`` RDP accountant,
not by hand.

The mechanisms, and what their guarantee rests on (neighbouring datasets differ by one row of the party):

* **bin sketch** and **PSD**: pure ``eps``-DP each (``node.privacy.binning``, ``node.privacy.psd``, discrete
  Laplace noise on integer counts); any pure ``eps``-DP mechanism is ``eps^2 / 2``-zCDP (Bun and Steinke 2016),
  which is how they enter the accountant;
* **votes**: at every level the party votes, per open node, for one feature by the exponential mechanism (sampled
  exactly by rejection, :func:`exponential_votes`) with utility the count-hessian gain ``G_L^2/(n_L+l) +
  G_R^2/(n_R+l) - G^2/(n+l)`` of the feature's best split on clipped gradients (``|g| <= 1``): one row moves each
  of the three terms by at most 3 (for ``|G| <= n``, ``l >= 0``), so the utility's sensitivity is
  ``VOTE_SENSITIVITY = 6``. The rows of a level fall in disjoint nodes (parallel composition), so a level's votes
  are one ``eps_v``-DP exponential mechanism, which is ``eps_v^2 / 8``-zCDP (bounded range, Cesar and Rogers 2021);
* **histograms**: at every level the party releases, per open node, its (G, H, n) sums of both candidates' bins plus,
  at a tree's root, the node totals (below the root the totals are the parent's released sides). One row changes one
  bin of each candidate (g by at most 1, h by 1/4 for the logistic loss, n by 1) and the totals, so with every
  quantity in units of its own sensitivity the release has L2 sensitivity ``sqrt(9) = 3``; discrete Gaussian noise
  (Canonne, Kamath and Steinke 2020) of parameter ``noise_multiplier * 3`` in those units, on the integer sums
  (fixed point, row counts), makes it a Gaussian mechanism of that noise multiplier: the discrete Gaussian has the
  continuous one's zCDP on integer queries, so the accountant's Gaussian events hold for it as they are (their
  Theorem 14). Projections that keep the exact rules (both candidates summing to the totals) are post-processing.

FV-tree's plan is for the binary logistic loss only: its per-row gradient and hessian are bounded (``|g| <= 1``,
``h <= 1/4``), the sensitivities above need it. Random-split trees (:func:`leaf_plan`) also take squared error with
a declared label range (:func:`loss_bounds`).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from fgbdt_chain.ledger.spec.fixed_point import ONE
from fgbdt_chain.node.kernels import limbs
from fgbdt_chain.node.kernels.histogram import FixedSums
from fgbdt_chain.node.privacy.discrete_gaussian import (
    Uniform,
    discrete_gaussians_at_least,
    exponential_choice,
    lattice_release,
)

SPLIT: dict[str, float] = {"sketch": 0.05, "psd": 0.15, "votes": 0.15, "histograms": 0.65}
"""Shares of the party's budget, in zCDP terms (rho) for the training mechanisms and of epsilon for the two pure ones.

Why these: the histograms carry the model (every split and leaf value is computed from them), so they get most of it;
the votes only rank features, which survives much more noise (a wrong runner-up costs little); the PSD feeds the
refit and the verifiers' estimate and the sketch the bin edges, both one-off releases whose noise the task absorbs
once."""

VOTE_SENSITIVITY = 6.0
"""Sensitivity of the vote utility (module docstring): two gain terms change, each by at most 3."""
HISTOGRAM_SENSITIVITY = 3.0
"""L2 sensitivity of one level's histogram release, every quantity in units of its own per-row bound."""
ROW_BOUNDS = {"g": 1.0, "h": 0.25, "n": 1.0}
"""Per-row bounds of the logistic loss's gradient, hessian and count: the units of the histogram noise."""


@dataclass(frozen=True)
class PrivacyPlan:
    """What every mechanism of one party gets, for a task of ``trees`` trees of ``depth`` levels."""

    epsilon: float
    delta: float
    sketch_epsilon: float
    psd_epsilon: float
    vote_epsilon: float
    """Per level (all the level's nodes at once: parallel composition)."""
    noise_multiplier: float
    """Of each level's Gaussian histogram release (standard deviation over L2 sensitivity)."""
    releases: int
    """Levels released: votes and histograms each ``trees * depth`` times."""
    accounted_epsilon: float
    """What the RDP accountant gives for the whole composition at ``delta`` (at most ``epsilon``)."""

    @property
    def private(self) -> bool:
        return math.isfinite(self.epsilon)

    def noise_sd(self, quantity: str) -> float:
        """Standard deviation of the noise on one bin's sum of ``quantity`` (g, h or n), in its own units."""
        return self.noise_multiplier * HISTOGRAM_SENSITIVITY * ROW_BOUNDS[quantity]

    def regularisation(self, lam: float, parties: int) -> float:
        """The L2 regularisation a private task trains with: at least the standard deviation of the aggregated
        gradient noise, ``sqrt(M) * noise_sd("g")``.

        Why: a leaf value is ``-G / (H + lambda)`` on noisy sums; where a node's true hessian sum is of the order of
        its noise, ``H + lambda`` can come close to 0 and one leaf can move the scores by hundreds of logits. With
        lambda at the gradient noise's scale, noise moves a leaf by at most about one logit before the learning
        rate. The lambda every epsilon trains with is in the tables of ``bench/privacy.py``.
        """
        if not self.private:
            return lam
        return max(lam, math.sqrt(parties) * self.noise_sd("g"))

    @property
    def vote_scale(self) -> float:
        """Scale of the exponential mechanism, ``2 * sensitivity / eps_v``: weights ``exp(u / scale)`` (0: exact
        argmax)."""
        return 2.0 * VOTE_SENSITIVITY / self.vote_epsilon if self.private else 0.0

    def report(self) -> dict[str, Any]:
        """The ``privacy`` section of reports, the API and the audit."""
        out = asdict(self)
        out["accountant"] = "RDP (dp-accounting); pure mechanisms as eps^2/2-zCDP, exponential as eps^2/8-zCDP"
        out["split"] = dict(SPLIT)
        out["histogram_noise_sd"] = {q: self.noise_sd(q) for q in ROW_BOUNDS} if self.private else None
        return out


NO_PRIVACY = PrivacyPlan(math.inf, 0.0, math.inf, math.inf, math.inf, 0.0, 0, 0.0)


def _composed_epsilon(
    delta: float, sketch_eps: float, psd_eps: float, vote_rho: float, noise_multiplier: float, releases: int
) -> float:
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    events: list[Any] = [
        dp_event.ZCDpEvent(sketch_eps**2 / 2),
        dp_event.ZCDpEvent(psd_eps**2 / 2),
        dp_event.SelfComposedDpEvent(dp_event.ZCDpEvent(vote_rho), releases),
        dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(noise_multiplier), releases),
    ]
    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(dp_event.ComposedDpEvent(events))
    return float(accountant.get_epsilon(delta))


def plan(epsilon: float, delta: float, trees: int, depth: int) -> PrivacyPlan:
    """Calibrate every mechanism of a party so that the whole task is ``(epsilon, delta)``-DP (module docstring).

    The sketch and the PSD take their ``SPLIT`` shares of epsilon as pure DP; the training mechanisms share a zCDP
    budget ``rho`` in the ``SPLIT`` ratio of votes to histograms, and ``rho`` is the largest (found by bisection) for
    which the accountant's epsilon of the whole composition is at most ``epsilon``.
    """
    if math.isinf(epsilon) and epsilon > 0:
        return NO_PRIVACY
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive (inf: no privacy), got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if trees < 1 or depth < 1:
        raise ValueError("a private task needs at least one tree of depth 1")
    releases = trees * depth
    sketch_eps, psd_eps = SPLIT["sketch"] * epsilon, SPLIT["psd"] * epsilon
    training = SPLIT["votes"] + SPLIT["histograms"]

    def at(rho: float) -> tuple[float, float, float]:
        vote_rho = rho * SPLIT["votes"] / training / releases
        hist_rho = rho * SPLIT["histograms"] / training / releases
        noise = 1.0 / math.sqrt(2.0 * hist_rho)  # a Gaussian mechanism of multiplier s is 1/(2 s^2)-zCDP
        return vote_rho, noise, _composed_epsilon(delta, sketch_eps, psd_eps, vote_rho, noise, releases)

    lo, hi = 0.0, epsilon**2
    while at(hi)[2] <= epsilon:
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        if at(mid)[2] <= epsilon:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:
        raise ValueError(f"epsilon {epsilon} leaves nothing for training after the sketch and the PSD")
    vote_rho, noise, accounted = at(lo)
    return PrivacyPlan(
        epsilon=epsilon,
        delta=delta,
        sketch_epsilon=sketch_eps,
        psd_epsilon=psd_eps,
        vote_epsilon=math.sqrt(8.0 * vote_rho),
        noise_multiplier=noise,
        releases=releases,
        accounted_epsilon=accounted,
    )


LEAF_GRADIENT_SHARE = 0.8
"""The share ``a`` of a leaf release's budget that goes to the gradient sums (``1 - a`` to the hessian sums).

A row sits in one leaf and moves its gradient sum by at most 1 and its hessian sum by at most 1/4. Noise of
standard deviation ``z / sqrt(a)`` on the gradient sums and ``z / (4 sqrt(1 - a))`` on the hessian sums makes the
release one Gaussian mechanism of noise multiplier ``z``: in units of the noise, the row moves it by
``sqrt(a + (1 - a)) = 1``. Why 0.8, derived rather than fitted: a leaf value ``-G / (H + lambda)`` has, to first
order, the variance ``s_G^2 / (H + lambda)^2 + r^2 s_H^2 / (H + lambda)^2`` where ``r = |G| / (H + lambda)`` is the
leaf's Newton step in logits, and with the noise above it is smallest at ``a = 4 / (4 + r)``. A boosting step of
the logistic loss moves a leaf by at most about one logit (``r <= 1``), so the best share lies in [0.8, 1); 0.8 is
its conservative end, best at ``r = 1``; for small steps its variance is at most 25% above the best (at ``r -> 0``,
``1.25`` against ``1``), where an even split (``a = 1/2``, the choice before, best only at ``r = 4``) is 100% above.
An unrecorded prototype with 0.9 (3 seeds, UCI credit and the heavy-tailed set, epsilon 1) gained nothing over 0.8."""


def leaf_noise_scale(quantity: str, bound: float | None = None) -> float:
    """Standard deviation of a leaf release's noise on ``quantity`` (g or h) per unit of noise multiplier, in the
    quantity's own units (:data:`LEAF_GRADIENT_SHARE`), for a per-row ``bound`` (the logistic loss's by default)."""
    share = {"g": LEAF_GRADIENT_SHARE, "h": 1.0 - LEAF_GRADIENT_SHARE}[quantity]
    return (ROW_BOUNDS[quantity] if bound is None else bound) / math.sqrt(share)


def loss_bounds(objective: str, label_range: tuple[float, float] | None = None) -> tuple[float, float]:
    """The per-row bounds ``(|g|, h)`` a private leaf release is calibrated to: the logistic loss's ``(1, 1/4)``;
    for squared error, from the requester's declared label range ``[lo, hi]``, ``((hi - lo) / 2, 1)``.

    Why half the range: random-split regression starts every score at the range's midpoint, where every declared
    label is at most ``(hi - lo) / 2`` away, so no row's first gradient ``score - y`` is clipped; later trees move
    the scores towards the labels, and a gradient beyond the bound (a score that overshoots) is clipped to it, which
    biases that step but keeps the sensitivity. Squared error's hessian is 1 per row. The range must be declared,
    not read from the parties' rows: it sets the noise, and rows outside it are clipped into it."""
    if objective == "binary":
        return ROW_BOUNDS["g"], ROW_BOUNDS["h"]
    if objective != "regression":
        raise ValueError(f"no per-row bounds for the objective {objective!r}")
    if label_range is None:
        raise ValueError(
            "a private regression task needs its label range declared (label_range: the label's documented "
            "domain, (low, high)): the gradients' bound and so the noise come from it"
        )
    lo, hi = float(label_range[0]), float(label_range[1])
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"the declared label range must be finite with low < high, got {label_range!r}")
    return (hi - lo) / 2.0, 1.0


def default_colluders(parties: int) -> int:
    """How many other parties may pool what they know against one party, by default, with its leaf releases'
    guarantee intact (:class:`LeafPlan`): half of the others, rounded down (an honest majority, the usual trust
    assumption of multi-party computation), and at least one, so that no single party, whoever it is, learns more
    than the budget allows; with two parties that is the other party, as without secure sums."""
    if parties < 1:
        raise ValueError(f"a task needs at least one party, got {parties}")
    return min(parties - 1, max(1, (parties - 1) // 2))


def check_colluders(parties: int, colluders: int) -> None:
    """Refuse a coalition bound the guarantee cannot mean. At least one: every party reads the released sum and
    knows its own noise, so with ``colluders = 0`` any single other party would hold a weaker guarantee than the
    one reported; at most ``parties - 1``, the others."""
    low = 1 if parties > 1 else 0
    if not low <= colluders < parties:
        raise ValueError(
            f"colluders must be from {low} to parties - 1 = {parties - 1}, got {colluders} (every party knows its "
            "own noise, so one colluder is the least a guarantee can hold against)"
        )


NOISE_SOURCES = ("seeded", "entropy")
"""Where a task's privacy noise comes from (sketch, PSD, votes, histograms, leaves, secure-sum keys): ``seeded``
from the task's seed, so that experiments repeat and the chain's parties draw what ``simulate`` draws; ``entropy``
from the operating system. A known seed is no secret: whoever knows it can remove seeded noise, so a guarantee
over seeded noise holds only against those who do not know the seed; ``entropy`` is for real data."""


def noise_seed(source: str, seed: int) -> int | None:
    """The seed a task's noise streams take: ``seed`` when ``source`` is ``seeded``, None (the operating system's
    entropy, see :func:`noise_rng`) for ``entropy``."""
    if source not in NOISE_SOURCES:
        raise ValueError(f"noise source must be one of {', '.join(NOISE_SOURCES)}, got {source!r}")
    return seed if source == "seeded" else None


def check_private_objective(epsilon: float, objective: str) -> None:
    """Refuse a budget on an FV-tree task whose per-row gradients have no bound: every sensitivity of
    :func:`plan` rests on the logistic loss's ``|g| <= 1``, ``h <= 1/4``. (Random-split trees take a regression
    task under a budget with a declared label range: :func:`loss_bounds`.)"""
    if math.isfinite(epsilon) and objective != "binary":
        raise ValueError(
            "a privacy budget (epsilon) needs a binary task: the noise is calibrated to the logistic loss's bounded "
            f"gradients (|g| <= 1), and a {objective} task's gradients have no bound"
        )


MAX_NOISE_MULTIPLIER = 1e4
"""The largest leaf noise multiplier a task may ask for: beyond it the accountant's arithmetic overflows (epsilon
below about 0.005 over 1,000 trees), and a leaf sum of even a million rows is below the noise."""


@dataclass(frozen=True)
class LeafPlan:
    """A party's budget when it releases only leaf sums, once per tree (``node.sim.random_split``): the bin sketch's
    share as in :func:`plan`, the rest to ``trees`` Gaussian releases composed by the RDP accountant.

    The parties' leaf sums are added by secure aggregation (``node.privacy.secure_agg``): what anyone reads is the sum
    over the parties, never one party's release. The noise that protects a party's row is then the sum of every party's
    noise, less what a coalition of other parties knows of its own: with ``colluders`` others pooling their rows and
    noise, ``parties - colluders`` parties' noise is left. So each party adds ``1 / (parties - colluders)`` of the
    variance that the calibrated ``noise_multiplier`` asks for, and the guarantee ``(epsilon, delta)`` holds against
    every reader and every coalition of up to ``colluders`` others; ``all_others_epsilon`` says what is left if all
    the others pool. Why: noise each party adds for itself alone is ``parties - colluders`` times the variance on the
    sum; at four parties and one colluder that is 3x the noise on every leaf value for the same epsilon against the
    same coalition. With ``colluders = parties - 1`` each party's noise alone carries the guarantee (local noise)."""

    epsilon: float
    delta: float
    sketch_epsilon: float
    noise_multiplier: float
    """Of the noise on the released sum that no coalition of ``colluders`` others can remove (standard deviation
    over the per-row bound, :func:`leaf_noise_scale`)."""
    releases: int
    accounted_epsilon: float
    parties: int = 1
    colluders: int = 0
    all_others_epsilon: float = 0.0
    """The accountant's epsilon if all ``parties - 1`` others pool their rows and noise against one party."""
    gradient_bound: float = ROW_BOUNDS["g"]
    """Per-row bound of ``|g|`` the noise is calibrated to (:func:`loss_bounds`); rows are clipped to it."""
    hessian_bound: float = ROW_BOUNDS["h"]
    """Per-row bound of ``h`` (:func:`loss_bounds`)."""

    @property
    def private(self) -> bool:
        return math.isfinite(self.epsilon)

    def bound(self, quantity: str) -> float:
        """The per-row bound of ``quantity`` (g or h)."""
        return {"g": self.gradient_bound, "h": self.hessian_bound}[quantity]

    def noise_sd(self, quantity: str) -> float:
        """Standard deviation of the noise one party adds to one leaf's sum of ``quantity`` (g or h), in its own
        units: its share of the variance (class docstring)."""
        scale = leaf_noise_scale(quantity, self.bound(quantity))
        return self.noise_multiplier * scale / math.sqrt(self.parties - self.colluders)

    def sum_noise_sd(self, quantity: str) -> float:
        """Standard deviation of the noise on the released sum of one leaf's ``quantity`` over all parties."""
        return math.sqrt(self.parties) * self.noise_sd(quantity)

    def regularisation(self, lam: float) -> float:
        """As :meth:`PrivacyPlan.regularisation`: lambda at least the released sum's gradient noise over the
        gradient bound, so that noise moves a leaf by at most about one bound (one logit for the logistic loss)."""
        return max(lam, self.sum_noise_sd("g") / self.gradient_bound) if self.private else lam

    def report(self) -> dict[str, Any]:
        out = asdict(self)
        out["accountant"] = "RDP (dp-accounting); the sketch as eps^2/2-zCDP, one Gaussian leaf release per tree"
        out["leaf_noise_sd"] = {q: self.noise_sd(q) for q in ("g", "h")} if self.private else None
        out["sum_noise_sd"] = {q: self.sum_noise_sd(q) for q in ("g", "h")} if self.private else None
        out["gradient_share"] = LEAF_GRADIENT_SHARE
        out["guarantee"] = (
            f"(epsilon, delta) for each party against every reader of the summed leaf releases and any "
            f"{self.colluders} other parties pooling their rows and noise"
            if self.private
            else "none: exact sums"
        )
        return out


def smallest_noise_multiplier(accounted: Callable[[float], float], epsilon: float, what: str) -> float:
    """The smallest Gaussian noise multiplier ``z`` with ``accounted(z) <= epsilon`` (``accounted`` falls as ``z``
    grows): doubled from 1 until it fits, then bisected 60 times, the upper end kept so the budget is never
    exceeded. Refused beyond :data:`MAX_NOISE_MULTIPLIER`, ``what`` naming the task in the message."""
    lo, hi = 1e-3, 1.0
    while accounted(hi) > epsilon:
        if hi > MAX_NOISE_MULTIPLIER:
            raise ValueError(
                f"{what} needs noise beyond {MAX_NOISE_MULTIPLIER:g} times a row's effect on every leaf: no signal "
                "would survive; raise epsilon or train fewer trees"
            )
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        if accounted(mid) > epsilon:
            lo = mid
        else:
            hi = mid
    return hi


def leaf_plan(
    epsilon: float,
    delta: float,
    trees: int,
    parties: int = 1,
    colluders: int | None = None,
    bounds: tuple[float, float] = (ROW_BOUNDS["g"], ROW_BOUNDS["h"]),
) -> LeafPlan:
    """Calibrate the leaf releases of ``trees`` trees so that, with the sketch's share, each of ``parties`` parties
    is ``(epsilon, delta)``-DP against any ``colluders`` others (:class:`LeafPlan`; None: :func:`default_colluders`):
    the smallest noise multiplier (bisection) whose composition the accountant puts at most at ``epsilon``.
    ``bounds``: the per-row ``(|g|, h)`` of the task's loss (:func:`loss_bounds`). ``inf``: no noise."""
    if parties < 1:
        raise ValueError(f"a task needs at least one party, got {parties}")
    colluders = default_colluders(parties) if colluders is None else colluders
    check_colluders(parties, colluders)
    if not all(math.isfinite(b) and b > 0 for b in bounds):
        raise ValueError(f"the per-row bounds must be positive and finite, got {bounds!r}")
    if math.isinf(epsilon) and epsilon > 0:
        return LeafPlan(math.inf, 0.0, math.inf, 0.0, 0, 0.0, parties, colluders, 0.0, *bounds)
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive (inf: no privacy), got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if trees < 1:
        raise ValueError("a private task needs at least one tree")
    sketch_eps = SPLIT["sketch"] * epsilon

    def accounted(z: float) -> float:
        return _composed_epsilon(delta, sketch_eps, 0.0, 0.0, z, trees)

    hi = smallest_noise_multiplier(accounted, epsilon, f"epsilon {epsilon} over {trees} trees")
    # all others pooled: only the party's own share of the noise is left
    alone = accounted(hi / math.sqrt(parties - colluders))
    return LeafPlan(epsilon, delta, sketch_eps, hi, trees, accounted(hi), parties, colluders, alone, *bounds)


VOTES, HISTOGRAMS, LEAVES = 0, 1, 2
"""Purposes of a party's noise streams (``noise_rng``)."""


_SECRET_NOISE_CONTEXT = b"fgbdt-chain/dp-noise/v2"


def secret_noise_seed(private_key: bytes, chain_id: int, contract: str, task_id: int) -> int:
    """A production party's noise seed for one task: an HMAC of the task (chain id, contract and id) under the
    party's own private key. The chain id keeps a key used on two chains from drawing the same noise for the same
    task id at the same contract address (a contract's address depends only on its deployer and nonce).

    Why not fresh entropy: a party restarted mid-level computes its histograms again, and with new noise it would
    show the verifiers a second, independent noisy copy of the same sums (twice the release its budget accounts
    for). Keyed to its key, a restarted party draws the noise it drew before, so every copy it shows is the same
    release. The seed is as secret as the key, which only the party holds, and differs between tasks."""
    if len(private_key) != 32:
        raise ValueError(f"a private key is 32 bytes, got {len(private_key)}")
    if task_id < 0 or chain_id < 0:
        raise ValueError(f"chain and task ids must be non-negative, got {chain_id} and {task_id}")
    message = (
        _SECRET_NOISE_CONTEXT
        + chain_id.to_bytes(32, "big")
        + bytes.fromhex(contract.removeprefix("0x").lower())
        + task_id.to_bytes(32, "big")
    )
    return int.from_bytes(hmac.new(private_key, message, hashlib.sha256).digest(), "big")


def noise_rng(seed: int | None, party: int, tree: int, level: int, purpose: int) -> np.random.Generator:
    """The generator of one party's noise for one level and purpose: from the operating system's entropy in
    production (``seed`` None), from a seed in experiments, where ``simulate`` and the party nodes must draw the
    same noise (a known seed is no secret: never use one for real data)."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng([seed, 0xD9, party, tree, level, purpose])


def vote_floor(group_of_row: np.ndarray, groups: int, g_vote: np.ndarray, h_vote: np.ndarray, lam: float) -> np.ndarray:
    """Per node, the gain of the split that leaves every row of the node on one side, ``G^2 / (H + lambda)`` (0 for
    a node without rows): the utility of every public threshold past the node's rows.

    Why: a party's kernel scans only the thresholds between the slots its rows use (``BinnedRows.best_gains``), and
    gives no utility (-inf) to a node without rows or to a feature whose rows share one slot. Taken as it is, the
    vote would tell: a node where the party holds no row never got its vote, and one row added made it vote, or
    made a feature electable whose gain then jumps from nothing to about ``G^2 / n``; the sensitivity search
    (tests/node/privacy/test_sensitivity.py) found both. The maximum over *all* public thresholds, which this floor
    completes, moves by at most 3 when one row comes or goes (one side's term changes), within
    :data:`VOTE_SENSITIVITY`. Rows of group -1 (closed nodes) take no part."""
    inside = np.asarray(group_of_row) >= 0
    where = np.asarray(group_of_row)[inside]
    G = np.bincount(where, weights=np.asarray(g_vote, dtype=np.float64)[inside], minlength=groups)
    H = np.bincount(where, weights=np.asarray(h_vote, dtype=np.float64)[inside], minlength=groups)
    denominator = np.maximum(H, 0.0) + lam
    return np.where(denominator > 0, G * G / np.where(denominator > 0, denominator, 1.0), 0.0)


VOTE_LATTICE = 2.0**-18
"""The votes' utilities are rounded to multiples of this before the exponential mechanism draws from them, so that
its probabilities are exact rationals: rounding moves a neighbour's utility by at most ``VOTE_SENSITIVITY +
VOTE_LATTICE``, the sensitivity the mechanism is then calibrated to (``1 + 2^-20`` times the noise)."""


def exponential_votes(
    best: np.ndarray, plan: PrivacyPlan, rng: np.random.Generator, floor: np.ndarray | None = None
) -> np.ndarray:
    """Each node's vote by the exponential mechanism: feature ``j`` with probability proportional to
    ``exp(eps_v u_j / (2 sensitivity))``, sampled exactly (``node.privacy.discrete_gaussian.exponential_choice``,
    with the utilities on the lattice of :data:`VOTE_LATTICE` and the sensitivity raised by it), not by Gumbel
    noise drawn in floating point. ``best`` is (nodes, F); with ``floor`` (:func:`vote_floor`, one per node) every
    utility is at least the node's one-sided gain, so every feature is electable in every node whatever the rows;
    without it a feature with no finite utility is never chosen (a node with none votes -1)."""
    if floor is not None:
        best = np.maximum(best, np.asarray(floor, dtype=np.float64)[:, None])
    steps = 1.0 / VOTE_LATTICE
    scale = 2 * (Fraction(VOTE_SENSITIVITY) + Fraction(VOTE_LATTICE)) / Fraction(plan.vote_epsilon)
    per_step = 1 / (scale * Fraction(steps))  # a utility gap of one lattice step, in the mechanism's units
    uniform = Uniform(rng)
    votes = np.full(best.shape[0], -1, dtype=np.int64)
    for node in range(best.shape[0]):
        finite = np.flatnonzero(np.isfinite(best[node]))
        if finite.size == 0:
            continue
        u = [int(v) for v in np.rint(best[node, finite] * steps).tolist()]
        top = max(u)
        votes[node] = finite[exponential_choice([(top - v) * per_step for v in u], uniform)]
    return votes


def _release(quantity: str, values: np.ndarray, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Exact integer sums of ``quantity`` (an object array) with noise of standard deviation ``sd`` in its units,
    every draw an exact discrete Gaussian (``node.privacy.discrete_gaussian``), as Python integers: row counts get
    the variance ``sd^2`` rounded up (at least the noise the plan asks for); the gradient and hessian sums, integers
    in fixed point (every row's g and h rounded to ``1 / ONE`` before summing, so a row moves a sum by at most its
    bound, 1 or 1/4, in those steps), are released by ``lattice_release``: exactly the Gaussian mechanism the
    accountant counts, at least ``sd``."""
    if quantity == "n":
        return values + discrete_gaussians_at_least(sd, values.size, rng).astype(object).reshape(values.shape)
    return lattice_release(values, sd, ONE, ROW_BOUNDS[quantity], rng)


def _project(bins: np.ndarray, total: int) -> np.ndarray:
    """Integer bins (object array, last axis the bins) shifted to sum to ``total``: the difference spread evenly,
    its remainder one unit each over the first bins. Deterministic post-processing of released values."""
    width = bins.shape[-1]
    diff = total - int(sum(bins.tolist()))
    base, rest = divmod(diff, width)
    out = bins + base
    out[:rest] += 1
    return out


def noisy_sums(
    sums: FixedSums,
    totals: Sequence[tuple[int, int, int]] | None,
    plan: PrivacyPlan,
    rng: np.random.Generator,
    widths: np.ndarray | None = None,
) -> FixedSums:
    """A level's histograms with the party's Gaussian noise, kept to the exact totals rules.

    Every bin of both candidates gets noise of ``plan.noise_sd`` (g and h in fixed point, n in whole rows; all from
    the exact discrete Gaussian, :func:`_release`). The node
    totals are ``totals`` (below a tree's root: the party's own released sides at the parent split) or, at a root,
    the exact totals plus noise of the same scale; each candidate's noisy bins are then shifted to sum to them, so
    both candidates hold the same totals and children inherit their parent's released sides exactly
    (``ledger.spec.histogram_rules``), all post-processing of the Gaussian release.

    ``widths`` (nodes, candidates): how many slots each candidate feature has (``node.model.trees.slot_widths``); the
    slots above stay exactly 0, as no row can be there, so no split past a feature's last edge is ever chosen.
    """
    nodes, ncand, nbins = sums.n.shape
    width = np.full((nodes, ncand), nbins, dtype=np.int64) if widths is None else np.asarray(widths, dtype=np.int64)
    if width.shape != (nodes, ncand):
        raise ValueError(f"widths must have shape {(nodes, ncand)}, got {width.shape}")
    inside = np.arange(nbins)[None, None, :] < width[:, :, None]
    exact = {
        "g": limbs.join(sums.g_hi, sums.g_lo),
        "h": limbs.join(sums.h_hi, sums.h_lo),
        "n": sums.n.astype(object),
    }
    out: dict[str, np.ndarray] = {}
    for q, (name, values) in enumerate(exact.items()):
        sd = plan.noise_sd(name)
        noisy = values.copy()
        noisy[inside] = _release(name, values[inside], sd, rng)
        for j in range(nodes):
            if totals is None:
                target = int(_release(name, np.array([int(sum(values[j, 0].tolist()))], dtype=object), sd, rng)[0])
            else:
                target = int(totals[j][q])
            for c in range(ncand):
                w = int(width[j, c])
                noisy[j, c, :w] = _project(noisy[j, c, :w], target)
        out[name] = noisy
    g_hi, g_lo = limbs.split(out["g"])
    h_hi, h_lo = limbs.split(out["h"])
    return FixedSums(g_hi, g_lo, h_hi, h_lo, out["n"].astype(np.int64))
