"""Private spatial decomposition (PSD): the DP summary of a party's data that it publishes to join a task.

The tree is a kd-tree over the F features plus the label (dimension F). Only three things in the released object
depend on the data: which nodes stop early (decided on noisy counts), a real label's split points (quantiles from a
private sketch of the labels, ``label_sketched``) and the leaf counts (discrete Laplace noise, clipped at 0). The
counts and the stopping tests' counts are integers of sensitivity 1, so their noise is the discrete Laplace
(two-sided geometric) mechanism, sampled exactly (``node.privacy.discrete_gaussian.discrete_laplaces``): the
guarantee rests on no floating-point noise. The privacy
accounting is in docs/how-it-works.md ("The PSD"); `psd_budget` is the single place that implements it.

Layout: nodes are stored in breadth-first order and the k-th internal node (in node order) has children 2k+1 (left)
and 2k+2 (right). Fixing the layout makes the encoding canonical, so the keccak digest of a PSD is a function of the
tree alone and two parties that decode the same bytes get the same object.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from eth_utils import keccak

from fgbdt_chain.ledger.spec.task_params import label_scale
from fgbdt_chain.node.kernels.psd_leaves import leaves_of
from fgbdt_chain.node.privacy.binning import local_sketch, mass_cuts, merged_mass
from fgbdt_chain.node.privacy.discrete_gaussian import discrete_laplaces

FORMAT_NAME = "fgbdt-psd"
FORMAT_VERSION = 1
_MAGIC = b"PSD"
_HEADER = struct.Struct(">3sBHI")  # magic, version, num_dims, num_nodes (big-endian like the EVM)
# Hard caps so that decoding a hostile payload cannot allocate without bound. A paper-sized PSD (depth 8) has at most
# 511 nodes; int16 dims bound the dimension count.
MAX_NODES = 1 << 20
MAX_DIMS = 32767


class PSDFormatError(ValueError):
    """A PSD payload (bytes or JSON) that is malformed, inconsistent or not in canonical form."""


@dataclass(frozen=True)
class PSDBudget:
    """How epsilon is spent by `build_psd`; see docs/how-it-works.md ("The PSD") for why this adds up to epsilon."""

    epsilon: float
    test_levels: int  # depth levels at which a noisy stopping test runs (0 = none)
    epsilon_per_test_level: float  # budget of each level's stopping test (inf = exact test, 0 = no test)
    epsilon_leaves: float  # budget of the released leaf counts
    epsilon_label: float = 0.0  # budget of the label's private sketch (0 = none: the label splits at midpoints)

    @property
    def stop_scale(self) -> float:
        """Discrete Laplace scale of the stopping-test noise (sensitivity 1)."""
        return 0.0 if math.isinf(self.epsilon_per_test_level) else 1.0 / self.epsilon_per_test_level

    @property
    def leaf_scale(self) -> float:
        """Discrete Laplace scale of the leaf-count noise (sensitivity 1)."""
        return 0.0 if math.isinf(self.epsilon_leaves) else 1.0 / self.epsilon_leaves

    @property
    def spent(self) -> float:
        """Total epsilon actually consumed (sequential composition of the levels and the leaf release)."""
        return self.test_levels * self.epsilon_per_test_level + self.epsilon_leaves + self.epsilon_label


def psd_budget(
    epsilon: float, depth: int, num_dims: int, structure_fraction: float = 0.5, label_levels: int = 0
) -> PSDBudget:
    """Split epsilon between the stopping tests, the label's sketch and the leaf counts.

    Stopping tests happen below the ``label_levels`` levels that always split the label and above
    ``split_levels(depth, num_dims, label_levels)``: below that a node cannot split (depth reached or every
    dimension already used on its path), so no count is looked at there and no budget is spent on it. Where the label
    splits at private quantiles (``label_sketched``), its sketch takes the share of one more test level. With
    structure_fraction == 0 there are no count-based stops and no label sketch: the tree is the full data-independent
    tree and the whole budget goes to the leaves.
    """
    if not (epsilon > 0):  # also rejects NaN
        raise ValueError(f"epsilon must be > 0 (inf allowed), got {epsilon}")
    if not (0.0 <= structure_fraction < 1.0):
        raise ValueError(f"structure_fraction must be in [0, 1), got {structure_fraction}")
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    levels = split_levels(depth, num_dims, label_levels) - min(label_levels, depth) if structure_fraction > 0 else 0
    sketch = 1 if structure_fraction > 0 and label_sketched(label_levels) and depth > 0 else 0
    if math.isinf(epsilon):
        return PSDBudget(epsilon, levels, math.inf if levels else 0.0, math.inf, math.inf if sketch else 0.0)
    per_level = structure_fraction * epsilon / (levels + sketch) if levels + sketch else 0.0
    leaves = (1.0 - structure_fraction) * epsilon if levels + sketch else epsilon
    return PSDBudget(epsilon, levels, per_level if levels else 0.0, leaves, per_level if sketch else 0.0)


def label_sketched(label_levels: int) -> bool:
    """Whether the label levels split at the party's private quantiles of its labels rather than at midpoints: for a
    real label (more than one label level), whose range a few outliers can set.

    Why: the label levels exist so that each PSD leaf holds rows of like labels (``label_levels_for``). Midpoints of
    the task's label range do that for bounded labels, but a heavy-tailed label (claim amounts from 0 to millions)
    leaves nearly every row in the first interval, and under label skew the verifiers' estimates were then biased:
    ``bench.stress.claims_data`` at theta 0.8 refused two honest parties of four at the first root in every seed,
    their gradient sums 17 to 32 sd from the estimates. The quantiles come from a private sketch of the party's labels
    (``node.privacy.binning.local_sketch``, the features' binning sketch), so they follow the mass at any scale; a
    binary label keeps its one midpoint, which separates its two values exactly."""
    return label_levels > 1


def _label_cuts(
    y: np.ndarray, low: float, high: float, intervals: int, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """Up to ``intervals - 1`` cut points of the label at equal mass, from an ``epsilon``-DP sketch of the party's
    labels on the features' binning grid (post-processing of the sketch, as the task's bin edges are of the
    features' sketches). The sketch is taken of the labels as trained, divided by the task's ``label_scale`` (a power
    of two), and its cuts multiplied back: so the cuts, like the trees, do not depend on the labels' unit."""
    if not high > low:
        return np.zeros(0)
    scale = label_scale(low, high)
    lo, hi = low / scale, high / scale
    sketch = local_sketch(y[:, None] / scale, np.array([lo]), np.array([hi]), epsilon=epsilon, rng=rng)
    bounds, mass = merged_mass([sketch.features[0]], lo, hi)
    return mass_cuts(bounds, mass, intervals) * scale if mass.sum() > 0 else np.zeros(0)


def _label_split(cuts: np.ndarray | None, low: float, high: float) -> float:
    """Where a label node with interval (low, high] splits: the middle of the label's cuts inside it, so that the
    label levels halve the mass at every level (the median, then the quartiles...), or its midpoint where no cut
    falls inside (no sketch, or too few cuts)."""
    if cuts is not None:
        inside = cuts[(cuts > low) & (cuts < high)]
        if inside.size:
            return float(inside[(inside.size - 1) // 2]) + 0.0
    return 0.5 * (low + high) + 0.0


def label_levels_for(objective: str, bins: int) -> int:
    """How many levels of a party's PSD split the label, always (data-independent).

    Why: a verifier estimates another party's histograms from its own rows with the same PSD leaf, which is unbiased
    only if the two parties' rows in a leaf follow one distribution. Parties' labels differ (label skew), and a
    gradient depends on the label, so the label must be resolved: a binary label by one split (its two values fall
    apart exactly), a real label into as many intervals as the model resolves any feature (``bins``), since a
    difference finer than a bin is one the trees cannot see either. Measured on abalone (theta 0.8): one label split
    left the honest gradient statistics 4 to 7 times wider than the model, ``bins`` intervals about 1.
    """
    if objective == "binary":
        return 1
    return max(1, math.ceil(math.log2(max(bins, 2))))


def split_levels(depth: int, num_dims: int, label_levels: int) -> int:
    """How many levels can split: every dimension once, the label ``label_levels`` times, at most ``depth``."""
    return min(depth, num_dims + max(label_levels - 1, 0))


def _column_values(X: np.ndarray, y: np.ndarray, rows: np.ndarray, dims: np.ndarray) -> np.ndarray:
    """Value of dimension dims[k] for row rows[k]; dimension F is the label. Avoids stacking X and y (a copy of X)."""
    F = X.shape[1]
    out = np.empty(rows.shape[0], dtype=np.float64)
    is_label = dims == F
    out[is_label] = y[rows[is_label]]
    feat = ~is_label
    out[feat] = X[rows[feat], dims[feat]]
    return out


def _check_data(X: np.ndarray, y: np.ndarray, num_dims: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(f"expected X (n, F) and y (n,), got {X.shape} and {y.shape}")
    if num_dims is not None and X.shape[1] + 1 != num_dims:
        raise ValueError(f"PSD has {num_dims} dims (F + label), X has {X.shape[1]} features")
    return X, y


def _position_choice(key: bytes, path: str, n: int) -> int:
    """Uniform choice among n options for the node at `path` (string of 0/1 from the root).

    Deriving the choice from (rng-drawn key, tree position) rather than from a running stream means the dimension at a
    position does not depend on how many noise draws happened before it, so trees built with the same seed but
    different epsilon share their splits wherever both split (useful for ablations). A 256-bit hash modulo a small n
    has negligible bias.
    """
    digest = hashlib.sha256(key + b"/" + path.encode("ascii")).digest()
    return int.from_bytes(digest, "big") % n


def psd_rng(seed: int | None, party: int) -> np.random.Generator:
    """Party ``party``'s own noise stream for its PSD, so a party process reproduces the simulator's PSD (as
    ``node.privacy.binning.sketch_rng`` for the sketch); without a seed, the operating system's entropy."""
    return np.random.default_rng(None if seed is None else [seed, 0x95D, party])


def build_psd(
    X: np.ndarray,
    y: np.ndarray,
    lows: np.ndarray,
    highs: np.ndarray,
    *,
    depth: int = 8,
    max_rows: int = 500,
    epsilon: float = 1.0,
    rng: np.random.Generator,
    structure_fraction: float = 0.5,
    label_first: bool = False,
    label_levels: int | None = None,
) -> PSD:
    """Build the epsilon-DP PSD of one party's rows (X with NaN = missing, y the label).

    lows/highs are the task's global [min, max] per dimension (F features, then the label), which makes the split
    values public knowledge. Rows with NaN in a split dimension go left, as missing values go left in the trees.
    """
    X, y = _check_data(X, y)
    return build_psd_of(
        X.shape[1],
        y,
        lambda rows, dims: _column_values(X, y, rows, dims),
        lows,
        highs,
        depth=depth,
        max_rows=max_rows,
        epsilon=epsilon,
        rng=rng,
        structure_fraction=structure_fraction,
        label_first=label_first,
        label_levels=label_levels,
    )


ColumnValues = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``column(rows, dims)``: dimension ``dims[k]`` of row ``rows[k]`` (dimension F is the label; ``rows`` increasing)."""


def build_psd_of(
    F: int,
    y: np.ndarray,
    column: ColumnValues,
    lows: np.ndarray,
    highs: np.ndarray,
    *,
    depth: int = 8,
    max_rows: int = 500,
    epsilon: float = 1.0,
    rng: np.random.Generator,
    structure_fraction: float = 0.5,
    label_first: bool = False,
    label_levels: int | None = None,
) -> PSD:
    """``build_psd`` of rows read through ``column``, one call per level (a party reading its rows chunk by chunk
    from disk: ``node.protocol.parquet_party``): the same PSD for the same values, labels and noise stream."""
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    D = F + 1
    lows = np.asarray(lows, dtype=np.float64)
    highs = np.asarray(highs, dtype=np.float64)
    if lows.shape != (D,) or highs.shape != (D,):
        raise ValueError(f"lows/highs must have shape ({D},) (F features + label), got {lows.shape}, {highs.shape}")
    if not (np.all(np.isfinite(lows)) and np.all(np.isfinite(highs)) and np.all(lows <= highs)):
        raise ValueError("lows/highs must be finite with lows <= highs")
    if D > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported, got {D}")
    if max_rows < 0:
        raise ValueError(f"max_rows must be >= 0, got {max_rows}")
    label_levels = (1 if label_first else 0) if label_levels is None else label_levels
    if label_levels < 0:
        raise ValueError(f"label_levels must be >= 0, got {label_levels}")
    budget = psd_budget(epsilon, depth, D, structure_fraction, label_levels)
    forced = min(label_levels, depth)
    midpoints = 0.5 * (lows + highs) + 0.0  # + 0.0 turns -0.0 into 0.0 (canonical bytes)

    key = rng.bytes(16)  # the only randomness the structure uses besides the noisy stopping decisions
    label_cuts = None
    if budget.epsilon_label > 0:  # a real label: its levels split at the party's private quantiles
        label_cuts = _label_cuts(
            y, float(lows[D - 1]), float(highs[D - 1]), 1 << label_levels, budget.epsilon_label, rng
        )
    split_dim: list[int] = []
    split_value: list[float] = []
    leaf_exact: list[np.ndarray] = []

    # Current level: one (path, used dims) per node, in node order; each active row's node as a level-local index.
    # per node: its path, the feature dims used on it, and its label interval (split inside it while the label
    # levels last: ``_label_split``)
    level_nodes: list[tuple[str, frozenset[int]]] = [("", frozenset())]
    label_box: dict[str, tuple[float, float]] = {"": (float(lows[D - 1]), float(highs[D - 1]))}
    rows = np.arange(n)
    loc = np.zeros(n, dtype=np.int64)
    level = 0
    while level_nodes:
        k = len(level_nodes)
        exact = np.bincount(loc, minlength=k)
        if level < forced:
            split = np.ones(k, dtype=bool)  # the label levels: data-independent, no count looked at
        elif level - forced < budget.test_levels:
            noisy = exact + discrete_laplaces(budget.stop_scale, k, rng)
            split = noisy > max_rows
        else:
            # Past the test levels a node splits iff depth and dims allow it: data-independent.
            split = np.full(k, level < split_levels(depth, D, label_levels))
        dims = np.full(k, -1, dtype=np.int64)
        split_at = np.zeros(k, dtype=np.float64)
        next_nodes: list[tuple[str, frozenset[int]]] = []
        for i, (path, used) in enumerate(level_nodes):
            if split[i]:
                free = [d for d in range(D) if d not in used]
                # the first label_levels levels split the label (dimension D - 1) inside the node's label interval:
                # at its midpoint, or at the party's private label quantiles (``label_sketched``)
                lo, hi = label_box[path]
                if len(path) < label_levels:
                    d, value = D - 1, _label_split(label_cuts, lo, hi)
                    label_box[path + "0"], label_box[path + "1"] = (lo, value), (value, hi)
                else:
                    d = free[_position_choice(key, path, len(free))]
                    value = float(midpoints[d])
                    label_box[path + "0"] = label_box[path + "1"] = (lo, hi)
                dims[i] = d
                split_at[i] = value
                split_dim.append(d)
                split_value.append(value)
                next_nodes += [(path + "0", used | {d}), (path + "1", used | {d})]
            else:
                split_dim.append(-1)
                split_value.append(0.0)
        leaf_exact.append(exact[~split])
        keep = split[loc]
        rows, loc = rows[keep], loc[keep]
        rank = np.cumsum(split) - 1
        node_dims = dims[loc]
        go_right = column(rows, node_dims) > split_at[loc]  # NaN > v is False: NaN goes left
        loc = 2 * rank[loc] + go_right
        level_nodes = next_nodes
        level += 1

    exact_counts = np.concatenate(leaf_exact)
    counts = (exact_counts + discrete_laplaces(budget.leaf_scale, exact_counts.shape[0], rng)).astype(np.float64)
    counts = np.maximum(counts, 0.0) + 0.0  # clipping is post-processing; + 0.0 normalises -0.0
    return PSD(
        num_dims=D,
        split_dim=np.asarray(split_dim, dtype=np.int16),
        split_value=np.asarray(split_value, dtype=np.float64),
        counts=counts,
    )


def _int_array(value: Any, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)) or arr.dtype == np.bool_:
        raise PSDFormatError(f"{name} must be a 1-D array of integers")
    return arr.astype(np.int64)


def _float_array(value: Any, name: str) -> np.ndarray:
    arr = np.asarray(value)
    ok = arr.size == 0 or np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    if arr.ndim != 1 or not ok or arr.dtype == np.bool_:
        raise PSDFormatError(f"{name} must be a 1-D array of numbers")
    return arr.astype(np.float64)


@dataclass(frozen=True, eq=False)
class PSD:
    """A released PSD: tree structure plus noisy, clipped leaf counts (everything here is public).

    Per node (breadth-first order): `split_dim` (-1 for a leaf; dimension F is the label) and `split_value` (0.0 for
    a leaf); a row goes right iff its value is > split_value (NaN goes left). `counts[l]` is the released count of the
    l-th leaf in node order. `left`, `right`, `leaf_index` (per node, -1 for internal nodes) and `height` are derived.
    """

    num_dims: int
    split_dim: np.ndarray
    split_value: np.ndarray
    counts: np.ndarray
    left: np.ndarray = field(init=False, repr=False)
    right: np.ndarray = field(init=False, repr=False)
    leaf_index: np.ndarray = field(init=False, repr=False)
    height: int = field(init=False)

    def __post_init__(self) -> None:
        if isinstance(self.num_dims, bool) or not isinstance(self.num_dims, int | np.integer):
            raise PSDFormatError("num_dims must be an integer")
        D = int(self.num_dims)
        if not 1 <= D <= MAX_DIMS:
            raise PSDFormatError(f"num_dims must be in [1, {MAX_DIMS}], got {D}")
        dims = _int_array(self.split_dim, "split_dim")
        values = _float_array(self.split_value, "split_value")
        counts = _float_array(self.counts, "counts")
        n_nodes = dims.shape[0]
        if not 1 <= n_nodes <= MAX_NODES:
            raise PSDFormatError(f"node count must be in [1, {MAX_NODES}], got {n_nodes}")
        if values.shape[0] != n_nodes:
            raise PSDFormatError(f"split_value has {values.shape[0]} entries for {n_nodes} nodes")
        if np.any(dims < -1) or np.any(dims >= D):
            raise PSDFormatError(f"split_dim entries must be -1 (leaf) or in [0, {D})")
        internal = np.flatnonzero(dims >= 0)
        n_int = internal.shape[0]
        if n_nodes != 2 * n_int + 1:
            raise PSDFormatError(f"{n_nodes} nodes but {n_int} internal ones: not a binary tree")
        # Canonical breadth-first layout: the k-th internal node's children 2k+1, 2k+2 must come after it,
        # otherwise the arrays describe a cycle rather than a tree.
        if np.any(2 * np.arange(n_int) + 1 <= internal):
            raise PSDFormatError("nodes are not in canonical breadth-first order")
        is_leaf = dims < 0
        if not np.all(np.isfinite(values[~is_leaf])):
            raise PSDFormatError("split values must be finite")
        if np.any(values[is_leaf] != 0.0):
            raise PSDFormatError("leaf split_value must be 0.0")
        if counts.shape[0] != n_nodes - n_int:
            raise PSDFormatError(f"{counts.shape[0]} counts for {n_nodes - n_int} leaves")
        if not (np.all(np.isfinite(counts)) and np.all(counts >= 0.0)):
            raise PSDFormatError("released counts must be finite and >= 0")

        left = np.full(n_nodes, -1, dtype=np.int64)
        right = np.full(n_nodes, -1, dtype=np.int64)
        left[internal] = 2 * np.arange(n_int) + 1
        right[internal] = 2 * np.arange(n_int) + 2
        leaf_index = np.full(n_nodes, -1, dtype=np.int64)
        leaf_index[is_leaf] = np.arange(n_nodes - n_int)
        # Each feature may be split at most once per root path (midpoint splits of the global box); the label
        # (dimension D - 1) may be split again, inside the interval its earlier splits left (``build_psd``).
        used = [0] * n_nodes
        level = [0] * n_nodes
        for k, p in enumerate(internal.tolist()):
            bit = 0 if int(dims[p]) == D - 1 else 1 << int(dims[p])
            if used[p] & bit:
                raise PSDFormatError(f"node {p} splits dimension {int(dims[p])} already used on its path")
            for c in (2 * k + 1, 2 * k + 2):
                used[c] = used[p] | bit
                level[c] = level[p] + 1

        for name, arr in (
            ("split_dim", dims.astype(np.int16)),
            ("split_value", values + 0.0),  # normalise -0.0 so equal trees encode equally
            ("counts", counts + 0.0),
            ("left", left),
            ("right", right),
            ("leaf_index", leaf_index),
        ):
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "num_dims", D)
        object.__setattr__(self, "height", max(level))

    # -- queries -------------------------------------------------------------------------------------------------

    @property
    def num_nodes(self) -> int:
        return int(self.split_dim.shape[0])

    @property
    def num_leaves(self) -> int:
        return int(self.counts.shape[0])

    @property
    def total(self) -> float:
        """N_j as the other parties see it. fsum so every party gets the same float regardless of summation order."""
        return math.fsum(self.counts.tolist())

    def leaf_of(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Leaf index of every row (``node.kernels.psd_leaves``: one compiled descent per row)."""
        X, y = _check_data(X, y, self.num_dims)
        return leaves_of(X, y, (self.split_dim, self.left, self.right, self.leaf_index), self.split_value, self.height)

    def check_bounds(self, lows: np.ndarray, highs: np.ndarray) -> None:
        """Raise ValueError unless every feature split is at the midpoint of the task's [low, high] and every label
        split inside its node's label interval (what the label splits above it left of the task's range): at its
        midpoint, or at a real label's private quantile (``label_sketched``), which only the interval bounds.

        Lets an approver check that a submitted PSD has the split points the protocol prescribes (the choice of
        dimension is not checkable, but choosing it from data only hurts the submitter's privacy).
        """
        lows = np.asarray(lows, dtype=np.float64)
        highs = np.asarray(highs, dtype=np.float64)
        if lows.shape != (self.num_dims,) or highs.shape != (self.num_dims,):
            raise ValueError(f"lows/highs must have shape ({self.num_dims},)")
        mid = 0.5 * (lows + highs) + 0.0
        label = self.num_dims - 1
        box = {0: (float(lows[label]), float(highs[label]))}  # each node's label interval, filled top-down
        for node in range(self.split_dim.shape[0]):
            d = int(self.split_dim[node])
            if d < 0:
                continue
            lo, hi = box[node]
            value = float(self.split_value[node])
            if d == label and not (lo < value < hi or value == 0.5 * (lo + hi) + 0.0):
                raise ValueError(f"node {node}: the label's split value is outside its interval ({lo}, {hi})")
            if d != label and value != float(mid[d]):
                raise ValueError(f"node {node}: split value is not the midpoint of its interval of dimension {d}")
            left, right = int(self.left[node]), int(self.right[node])
            box[left], box[right] = ((lo, value), (value, hi)) if d == label else ((lo, hi), (lo, hi))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PSD):
            return NotImplemented
        return self.encode() == other.encode()

    __hash__ = None  # type: ignore[assignment]

    # -- serialisation -------------------------------------------------------------------------------------------

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-ready dict; floats survive a json round trip exactly (Python writes shortest repr)."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "num_dims": self.num_dims,
            "split_dim": [int(v) for v in self.split_dim],
            "split_value": [float(v) for v in self.split_value],
            "counts": [float(v) for v in self.counts],
        }

    @classmethod
    def from_json_dict(cls, data: Any) -> PSD:
        """Inverse of to_json_dict; raises PSDFormatError (a ValueError) on anything it would not produce."""
        keys = {"format", "version", "num_dims", "split_dim", "split_value", "counts"}
        if not isinstance(data, dict) or set(data) != keys:
            raise PSDFormatError(f"PSD JSON must be an object with exactly the keys {sorted(keys)}")
        if data["format"] != FORMAT_NAME or data["version"] != FORMAT_VERSION:
            raise PSDFormatError(f"unsupported PSD format {data['format']!r} version {data['version']!r}")
        for name in ("split_dim", "split_value", "counts"):
            if not isinstance(data[name], list):
                raise PSDFormatError(f"{name} must be a list")
        if any(isinstance(v, bool) or not isinstance(v, int) for v in data["split_dim"]):
            raise PSDFormatError("split_dim must hold integers")
        for name in ("split_value", "counts"):
            if any(isinstance(v, bool) or not isinstance(v, int | float) for v in data[name]):
                raise PSDFormatError(f"{name} must hold numbers")
        if any(v < -1 or v > MAX_DIMS for v in data["split_dim"]):  # before the int16 cast can wrap
            raise PSDFormatError("split_dim out of range")
        return cls(
            num_dims=data["num_dims"],
            split_dim=np.asarray(data["split_dim"], dtype=np.int64),
            split_value=np.asarray(data["split_value"], dtype=np.float64),
            counts=np.asarray(data["counts"], dtype=np.float64),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> PSD:
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise PSDFormatError(f"PSD JSON does not parse: {exc}") from exc
        return cls.from_json_dict(data)

    def encode(self) -> bytes:
        """Canonical calldata payload, big-endian.

        header: b"PSD", u8 version, u16 num_dims, u32 num_nodes; then int16 split_dim per node; float64 split_value
        per internal node (node order); float64 count per leaf. Children are implied by the breadth-first layout and
        leaf split values are not stored, so a depth-8 tree costs at most 10 + 511*2 + 255*8 + 256*8 = 5130 bytes.
        """
        internal = self.split_dim >= 0
        return b"".join(
            (
                _HEADER.pack(_MAGIC, FORMAT_VERSION, self.num_dims, self.num_nodes),
                self.split_dim.astype(">i2").tobytes(),
                self.split_value[internal].astype(">f8").tobytes(),
                self.counts.astype(">f8").tobytes(),
            )
        )

    @classmethod
    def decode(cls, payload: bytes) -> PSD:
        """Inverse of encode. Rejects truncated, padded, garbled or non-canonical bytes with PSDFormatError, so that
        a PSD object and its digest correspond one to one."""
        payload = bytes(payload)
        if len(payload) < _HEADER.size:
            raise PSDFormatError(f"PSD payload truncated: {len(payload)} bytes, header needs {_HEADER.size}")
        magic, version, num_dims, num_nodes = _HEADER.unpack_from(payload)
        if magic != _MAGIC:
            raise PSDFormatError(f"not a PSD payload (magic {magic!r})")
        if version != FORMAT_VERSION:
            raise PSDFormatError(f"unsupported PSD payload version {version}")
        if not 1 <= num_nodes <= MAX_NODES:
            raise PSDFormatError(f"node count must be in [1, {MAX_NODES}], got {num_nodes}")
        pos = _HEADER.size
        if len(payload) < pos + 2 * num_nodes:
            raise PSDFormatError(f"PSD payload truncated: {len(payload)} bytes, node table needs {pos + 2 * num_nodes}")
        dims = np.frombuffer(payload, dtype=">i2", count=num_nodes, offset=pos).astype(np.int64)
        pos += 2 * num_nodes
        n_int = int(np.count_nonzero(dims >= 0))
        expected = pos + 8 * n_int + 8 * (num_nodes - n_int)
        if len(payload) != expected:
            kind = "truncated" if len(payload) < expected else "has trailing bytes"
            raise PSDFormatError(f"PSD payload {kind}: {len(payload)} bytes, expected {expected}")
        values_int = np.frombuffer(payload, dtype=">f8", count=n_int, offset=pos).astype(np.float64)
        pos += 8 * n_int
        counts = np.frombuffer(payload, dtype=">f8", count=num_nodes - n_int, offset=pos).astype(np.float64)
        values = np.zeros(num_nodes, dtype=np.float64)
        values[dims >= 0] = values_int
        psd = cls(num_dims=num_dims, split_dim=dims, split_value=values, counts=counts)
        if psd.encode() != payload:  # e.g. -0.0 where the canonical form has 0.0
            raise PSDFormatError("PSD payload is not in canonical form")
        return psd

    def digest(self) -> bytes:
        """keccak256 of encode(): the same hash a contract computes over the calldata."""
        return bytes(keccak(self.encode()))
