"""Random-split trees with private leaves: the design that lifts differential privacy's accuracy floor.

Why: FV-tree releases every party's histograms at every level of every tree, T x d releases composed into one
budget, so at epsilon 1 the noise on a bin is larger than the rows behind it below the root (docs: privacy page,
random-split trees). Here, as in Maddock et al. ("Federated Boosted Decision Trees with Differential
Privacy", CCS 2022), each tree's split features and thresholds are drawn from a public seed over the public bin
edges, independently of every row, so they cost no privacy; each party then releases, once per tree, its gradient
and hessian sums per leaf with discrete Gaussian noise (``node.privacy.accountant.leaf_plan``: one release per tree, the
leaves disjoint, T releases composed by the RDP accountant; exact integer noise on sums kept on a lattice,
:func:`party_leaf_sums`), and the leaf values are ``-lr * G / (H + lambda)`` of the
parties' noisy sums, with lambda raised to the aggregated gradient noise as FV-tree's private tasks do.

Under privacy every tree splits on one feature (``tree_features``, Maddock et al.'s cyclic one-way interactions,
as in an explainable boosting machine): the features take turns in a public random order, and each of the feature's
bins (the missing slot included) is a leaf of its own (:func:`bin_tree`), so a tree is one noisy histogram of that
feature, as a DP-EBM round is. Why: the leaves of a tree drawn over all features cut the rows into small cells whose
sums drown in the noise, while bins of one feature keep each leaf's rows together and the model additive, which
noise cannot tangle; and the bins are the finest intervals the task can split at, fixed by mass from the sketch, where
random thresholds on one feature give uneven intervals, some of them empty, at the same cost (a row still sits in one
leaf). Measured at epsilon 1 it gains on every data set where ``auto`` chooses it (``bench.privacy --part
curve-randomsplit-depth4`` and ``figure9-randomsplit``; the benchmarks page), and costs on one-hot columns, whose
one-feature trees are stumps; without noise, trees over all features keep the interactions and stay the default there.

What it gives up: the trees do not look for good splits, only for good leaf values; and there are no per-split
histograms, so no split Shapley contributions and nothing for the verifiers to check. It runs in ``simulate``
only (``--algo randomsplit``), as the measured alternative to the private FV-tree, not on chain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.model.objective import gradients
from fgbdt_chain.node.model.trees import Node, Tree
from fgbdt_chain.node.privacy.accountant import LEAVES, LeafPlan, noise_rng
from fgbdt_chain.node.privacy.discrete_gaussian import lattice_release
from fgbdt_chain.node.privacy.secure_agg import SecureSum, fraction_bits, to_fixed

DEFAULT_TREES, DEFAULT_DEPTH = 200, 4
"""``simulate --algo randomsplit``'s trees and depth when the user sets none: Maddock et al.'s depth 4, and enough
trees that every feature gets turns. Deeper trees (the paper's depth 8: 256 leaves) cut the rows into leaves each too
small for its noise. The depth shapes trees over all features; a one-feature tree has a leaf per bin."""

TREE_FEATURES = ("auto", "one", "all")
"""How many features a tree splits on: ``one`` (the features take turns), ``all`` (each node draws its own), or
``auto``: one under a privacy budget when every feature gets a turn, all otherwise (:func:`one_feature_per_tree`)."""

SPLIT_SEED_TAG = 0x5EED
"""Mixed into the public seed of the split draws, so that they never share a stream with any party's noise."""


@dataclass(frozen=True)
class RandomSplitResult:
    """The trained trees and what they cost: the privacy plan, the lambda trained with, the bytes each party sent,
    and whether each tree split on one feature."""

    trees: list[Tree]
    plan: LeafPlan
    lam: float
    comm_bytes_per_party_per_tree: float
    tree_features: str
    """``one`` or ``all``: what ``auto`` resolved to."""


def splittable(widths: np.ndarray) -> np.ndarray:
    """The features a split can separate: those with at least one edge (two bins besides the missing slot)."""
    usable = np.flatnonzero(np.asarray(widths) >= 3)
    if usable.size == 0:
        raise ValueError("no feature has two bins: random splits need at least one feature with an edge")
    return usable


def one_feature_per_tree(tree_features: str, private: bool, features: int, trees: int) -> bool:
    """Whether the trees split on one feature each (:data:`TREE_FEATURES`).

    ``auto`` takes one feature per tree under privacy when the task has at least as many trees as splittable
    features, so that every feature gets a turn: an additive model of one-feature trees knows nothing of a feature
    its trees never reach. Why: a9a has 123 binary columns and Figure 9 gives it 40 trees; with one feature per tree
    they reached a third of the columns, each tree a stump, and the model stayed at the majority class (test error
    0.2362 at every epsilon, against 0.2299 with trees over all features). Nothing private decides: the features
    that have an edge (the task's bin edges, fixed from the parties' differentially private sketches) and the
    task's trees."""
    if tree_features not in TREE_FEATURES:
        raise ValueError(f"tree_features must be one of {', '.join(TREE_FEATURES)}, got {tree_features!r}")
    if tree_features != "auto":
        return tree_features == "one"
    return private and trees >= features


def draw_splits(widths: np.ndarray, depth: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every internal node's (feature, threshold slot) of one tree over all features, heap order (node ``i`` at
    index ``i - 1``).

    Features with at least one edge are drawn uniformly, thresholds uniformly among the slots that leave a bin on
    each side (``slot <= t`` goes left, the missing slot 0 included)."""
    usable = splittable(widths)
    features = rng.choice(usable, size=2**depth - 1)
    thresholds = rng.integers(1, np.asarray(widths)[features] - 1)
    return features.astype(np.int64), thresholds.astype(np.int64)


def feature_turns(widths: np.ndarray, trees: int, rng: np.random.Generator) -> list[int]:
    """Each tree's one feature: every splittable feature once per round, in a fresh public random order each
    round, so that no feature waits more than two rounds for its turn."""
    usable = splittable(widths)
    turns: list[int] = []
    while len(turns) < trees:
        turns.extend(int(f) for f in rng.permutation(usable))
    return turns[:trees]


def leaf_index(slots: np.ndarray, features: np.ndarray, thresholds: np.ndarray, depth: int) -> np.ndarray:
    """Each row's leaf, 0 .. 2^depth - 1 from left to right, routed as ``Model.predict`` routes it."""
    rows = np.arange(slots.shape[0])
    node = np.ones(slots.shape[0], dtype=np.int64)
    for _ in range(depth):
        right = slots[rows, features[node - 1]] > thresholds[node - 1]
        node = 2 * node + right
    return node - 2**depth


def bin_tree(feature: int, width: int, values: Sequence[int]) -> Tree:
    """A one-feature tree whose leaves are the feature's ``width`` slots in order, ``values[s]`` on slot ``s``.

    The splits halve the slot range (``slot <= mid - 1`` goes left), so a row's leaf is its slot itself and the tree
    is ``ceil(log2(width))`` levels deep: the model format and ``Model.predict`` need nothing new."""
    if width < 2 or len(values) != width:
        raise ValueError(f"a bin tree needs a value for each of at least two slots, got {len(values)} for {width}")
    nodes: dict[int, Node] = {}
    pending = [(1, 0, width)]
    while pending:
        node, lo, hi = pending.pop()
        if hi - lo == 1:
            nodes[node] = Node.leaf(values[lo], 0)
            continue
        mid = (lo + hi) // 2
        nodes[node] = Node.split(feature, mid - 1, 0, 0)
        pending += [(2 * node, lo, mid), (2 * node + 1, mid, hi)]
    return Tree(nodes)


def party_leaf_sums(
    leaf: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    leaves: int,
    plan: LeafPlan,
    rng: np.random.Generator,
    bits: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """What one party releases for one tree: its gradient and hessian sums per leaf, every leaf (empty ones too:
    which leaves hold rows is itself private).

    Without privacy, the sums as floats. Under a plan, integers at the secure sum's scale ``2^bits`` with exact
    discrete Gaussian noise (``node.privacy.discrete_gaussian.lattice_release``): every row's g and h is rounded
    to a multiple of ``2^-bits`` first and clipped to the plan's bounds there (rounded down to that lattice), so
    the sums are integers and one row moves each by at most its bound in steps of ``2^-bits``; the noise of at
    least the plan's standard deviation is then exactly the Gaussian mechanism the accountant counts, and no
    floating-point noise is involved."""
    if not plan.private:
        g_sum: np.ndarray = np.bincount(leaf, g, minlength=leaves).astype(np.float64)
        h_sum: np.ndarray = np.bincount(leaf, h, minlength=leaves).astype(np.float64)
        return g_sum, h_sum
    out = []
    for q, values in (("g", g), ("h", h)):
        top = math.floor(plan.bound(q) * 2.0**bits)  # the bound on the lattice, rounded down
        steps = np.clip(to_fixed(values, bits), -top, top)
        sums = np.zeros(leaves, dtype=np.int64)
        np.add.at(sums, leaf, steps)
        out.append(lattice_release(sums, plan.noise_sd(q), 1 << bits, top / 2.0**bits, rng).astype(np.int64))
    return out[0], out[1]


def masked_leaf_sums(
    released: Sequence[tuple[np.ndarray, np.ndarray]], secure: SecureSum, bits: int
) -> tuple[np.ndarray, np.ndarray]:
    """The sums over the parties of their noisy leaf releases ``(g, h)``, integers at ``2^bits``
    (:func:`party_leaf_sums`), added by secure aggregation: each party masks its release; the masks cancel in the
    sum, so the sum is all that anyone reads (``LeafPlan`` rests its guarantee on it). Returned as reals."""
    leaves = released[0][0].size
    vectors = [np.concatenate([g, h]).astype(np.int64) for g, h in released]
    total = secure.sum(vectors).astype(np.float64) / 2.0**bits
    return total[:leaves], total[leaves:]


def train_random_split(
    party_slots: Sequence[np.ndarray],
    party_y: Sequence[np.ndarray],
    params: TrainParams,
    widths: np.ndarray,
    plan: LeafPlan,
    seed: int,
    tree_features: str = "auto",
    noise_seed: int | Literal["seed"] | None = "seed",
    progress: Callable[[int], None] | None = None,
    base_score: float = 0.0,
) -> RandomSplitResult:
    """Boost ``params.trees`` random-split trees of ``params.depth`` on the parties' rows (bin slots).

    Every party's noise comes from its own stream (``noise_rng``, purpose ``LEAVES``, from ``noise_seed``: ``seed``
    unless told, None for the operating system's entropy); the split draws from a public one, from ``seed``.
    ``progress(t)`` is called after tree ``t``; every score starts at ``base_score`` (a public value: for
    regression the midpoint of the task's label range), which the first tree's leaves carry. A private plan's
    sensitivities rest on its per-row bounds (``LeafPlan.gradient_bound``, ``hessian_bound``: the logistic loss's
    ``|g| <= 1``, ``h <= 1/4``, or the squared error's from a declared label range, ``accountant.loss_bounds``), to
    which every row's gradient is clipped; its releases are added by secure aggregation (:func:`masked_leaf_sums`),
    so only their sum is read."""
    if len(party_slots) != len(party_y) or len(party_slots) < 1:
        raise ValueError("need one label array per party and at least one party")
    if plan.private and params.objective != "binary" and plan.hessian_bound < 1.0:
        raise ValueError(
            "private random-split trees of a regression task need the squared error's bounds in their plan "
            "(node.privacy.accountant.loss_bounds of the declared label range); this plan holds the binary loss's"
        )
    if plan.private and plan.parties != len(party_slots):
        raise ValueError(f"the privacy plan is for {plan.parties} parties, the task has {len(party_slots)}")
    noisy = seed if noise_seed == "seed" else noise_seed
    single = one_feature_per_tree(tree_features, plan.private, len(splittable(widths)), params.trees)
    depth, m = params.depth, len(party_slots)
    lam = plan.regularisation(params.lam)
    secure = SecureSum(m, seed=noisy) if plan.private else None
    # the sum's scale: every row moves a leaf's sums by at most its bounds, and the noise stays far inside 64 sd
    rows = sum(len(y) for y in party_y)
    if plan.private:
        largest = max(plan.gradient_bound, plan.hessian_bound)
        bits = fraction_bits(rows * largest + 64 * max(plan.sum_noise_sd("g"), plan.sum_noise_sd("h")))
    else:
        bits = 0
    scores = [np.zeros(len(y)) for y in party_y]  # the base score comes with the first tree's leaves
    public = np.random.default_rng([seed, SPLIT_SEED_TAG])
    turns: list[int | None] = [*feature_turns(widths, params.trees, public)] if single else [None] * params.trees
    trees: list[Tree] = []
    released = 0
    for t in range(params.trees):
        feature = turns[t]
        if feature is None:
            features, thresholds = draw_splits(widths, depth, public)
            leaves = 2**depth
        else:
            leaves = int(np.asarray(widths)[feature])
        released_sums = []
        where = []
        for i, (slots, y) in enumerate(zip(party_slots, party_y, strict=True)):
            g, h = gradients(params.objective, y, scores[i] + base_score if t == 0 else scores[i])
            if feature is None:
                leaf = leaf_index(slots, features, thresholds, depth)
            else:
                leaf = np.asarray(slots[:, feature], dtype=np.int64)
            where.append(leaf)
            released_sums.append(party_leaf_sums(leaf, g, h, leaves, plan, noise_rng(noisy, i, t, 0, LEAVES), bits))
        if secure is None:
            g_sum, h_sum = np.sum(released_sums, axis=0)
        else:
            g_sum, h_sum = masked_leaf_sums(released_sums, secure, bits)
        step = -params.learning_rate * g_sum / (np.maximum(h_sum, 0.0) + lam)
        values = [ref.to_fixed(v) for v in (step + base_score if t == 0 else step)]
        applied = np.array([ref.from_fixed(v) for v in values])  # what the model will predict, to the last bit
        for i, leaf in enumerate(where):
            scores[i] += applied[leaf]
        released += leaves
        if feature is None:
            nodes = {n + 1: Node.split(int(features[n]), int(thresholds[n]), 0, 0) for n in range(leaves - 1)}
            nodes.update({leaves + j: Node.leaf(values[j], 0) for j in range(leaves)})
            trees.append(Tree(nodes))
        else:
            trees.append(bin_tree(feature, leaves, values))
        if progress is not None:
            progress(t)
    # a party sends its leaf sums once per tree: two masked 64-bit words per leaf, or two 32-byte words in the clear
    sent = float(secure.bytes_sent[0]) if secure is not None else 2 * 32 * released
    return RandomSplitResult(trees, plan, lam, sent / params.trees, "one" if single else "all")
