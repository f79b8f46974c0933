"""The trained model: trees over bin slots, its JSON file format, fast prediction and LightGBM export.

The engine grows trees on bin *slots* (``docs/how-it-works.md``, "Trees and levels"), so the model keeps exactly what
the contract recorded: per internal node a (feature, threshold slot) pair and per leaf a fixed-point value
(``ledger.spec.fixed_point``, already times the learning rate). Keeping the integers, rather than floats, means a
saved model can be checked against the chain bit for bit; floats only appear at prediction time, each leaf converted
once by ``fixed_point.from_fixed`` (Python's correctly rounded int division), so every consumer gets the same
doubles.

Raw values are mapped to slots by :func:`bin_matrix`, the single implementation of binning shared with the engine:
slot 0 is missing (NaN), slot ``k + 1`` holds ``edges[k - 1] < x <= edges[k]``. A split at slot ``t`` sends slots
``0..t`` left, which is LightGBM's ``x <= threshold`` with NaN default-left, so the export to LightGBM's text format
is exact (threshold ``edges[f][t - 1]``; ``t = 0``, "only missing goes left", becomes the most negative double).

Trees are heap-numbered (root 1, children ``2i`` and ``2i + 1``). Prediction compiles each tree into small dense
arrays indexed by heap id and walks all rows one level at a time with numpy, so the cost is
``trees x depth`` vectorised steps rather than a Python loop per row.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fgbdt_chain.ledger.spec.fixed_point import from_fixed
from fgbdt_chain.ledger.spec.modes import OBJECTIVES as OBJECTIVE_CODES
from fgbdt_chain.ledger.spec.parameters import MAX_DEPTH as MAX_DEPTH
from fgbdt_chain.node.data.inputs import dense_features

FORMAT_TAG = "fgbdt-model/1"
"""Tag of the JSON model format; bump it when the layout changes incompatibly."""
SCALED_FORMAT_TAG = "fgbdt-model/2"
"""The tag of a model whose leaves are in labels / ``label_scale`` (a regression task's): a reader of
``fgbdt-model/1`` ignores unknown fields, so it would predict such a model ``label_scale`` times too small; it refuses
the new tag instead. A model of scale 1 (every binary model) is written as ``fgbdt-model/1``, as before."""
FORMAT_TAGS = (FORMAT_TAG, SCALED_FORMAT_TAG)

OBJECTIVES = tuple(OBJECTIVE_CODES)
"""The losses a model predicts under (``ledger.spec.modes``)."""

IMPORTANCE_TYPES = ("split", "gain")
"""What ``Model.feature_importance`` measures, LightGBM's two kinds."""

# the deepest tree accepted is a task's (``ledger.spec.parameters.MAX_DEPTH``): heap ids grow as 2^depth and
# prediction uses dense per-tree arrays of that size, so the bound also keeps a corrupt file from asking for gigabytes

EdgesLike = Sequence[Sequence[float] | np.ndarray]
"""Cut points as the engine holds them (numpy arrays) or as JSON gives them (lists); the model stores lists."""

MAX_BINS = 255
"""Slots 0..bins must fit in uint8 (the engine's slot matrices), so at most 255 value bins."""

LIGHTGBM_MIN_THRESHOLD = -sys.float_info.max
"""Threshold for slot ``t = 0``: only NaN (and, unavoidably, -inf / -DBL_MAX itself) goes left in LightGBM."""

_FLOAT32_MAX = float(np.finfo(np.float32).max)


class ModelFormatError(ValueError):
    """A model file or object that does not describe a valid model; the message names what is wrong."""


# --------------------------------------------------------------------------------------------------------- binning


def bin_matrix(X: np.ndarray, edges: EdgesLike) -> np.ndarray:
    """Bin slots of raw values, shape (n, F), uint8: 0 for NaN, else ``1 + searchsorted(edges[f], x, 'left')``.

    This is the one implementation of binning raw values (the engine imports it), so training and prediction can
    never disagree on which side of an edge a value falls: a value equal to an edge lands in the lower bin, which is
    what makes ``x <= edge`` the exact raw-value form of a slot threshold.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (rows, features), got shape {X.shape}")
    if X.shape[1] != len(edges):
        raise ValueError(f"X has {X.shape[1]} features but there are edges for {len(edges)}")
    out = np.empty(X.shape, dtype=np.uint8)
    for f, e in enumerate(edges):
        cuts = np.asarray(e, dtype=np.float64)
        if cuts.ndim != 1 or cuts.size > MAX_BINS - 1:
            raise ValueError(f"feature {f}: edges must be a 1-D list of at most {MAX_BINS - 1} cut points")
        col = X[:, f]
        slots = np.searchsorted(cuts, col, side="left") + 1
        slots[np.isnan(col)] = 0
        out[:, f] = slots
    return out


def slot_widths(edges: EdgesLike) -> np.ndarray:
    """Per feature, how many bin slots ``bin_matrix`` can give it (missing, then one more than its edges).

    Why: a private party adds noise only where a row can be; the slots above a feature's top bin hold no row by
    construction (public, from the edges), so noise there would only invent splits past the last edge."""
    return np.asarray([len(e) + 2 for e in edges], dtype=np.int64)


# ----------------------------------------------------------------------------------------------------------- trees


@dataclass(frozen=True)
class Node:
    """One tree node: a split (``feature`` and ``threshold`` slot set, ``gain_fixed``) or a leaf (``value_fixed``).

    ``count`` is the number of training rows that reached the node; it is kept because LightGBM's export (and
    SHAP-style explanations) use it, and because it is on chain anyway.
    """

    count: int
    feature: int | None = None
    threshold: int | None = None
    gain_fixed: int | None = None
    value_fixed: int | None = None

    @classmethod
    def split(cls, feature: int, threshold: int, gain_fixed: int, count: int) -> Node:
        """An internal node: rows with ``slot(x[feature]) <= threshold`` go to the left child."""
        return cls(count=count, feature=feature, threshold=threshold, gain_fixed=gain_fixed)

    @classmethod
    def leaf(cls, value_fixed: int, count: int) -> Node:
        """A leaf with its fixed-point output (already times the learning rate)."""
        return cls(count=count, value_fixed=value_fixed)

    @property
    def is_leaf(self) -> bool:
        """Leaves are the nodes without a split feature."""
        return self.feature is None


def node_depth(node_id: int) -> int:
    """Depth of a heap id: the root (1) is at depth 0, ids ``2^l .. 2^(l+1) - 1`` at depth ``l``."""
    return node_id.bit_length() - 1


@dataclass
class Tree:
    """A heap-numbered tree: ``nodes[1]`` is the root, the children of ``i`` are ``2i`` (left) and ``2i + 1``."""

    nodes: dict[int, Node] = field(default_factory=dict)

    @classmethod
    def single_leaf(cls, value_fixed: int, count: int) -> Tree:
        """A tree whose root is a leaf (the root did not split)."""
        return cls({1: Node.leaf(value_fixed, count)})

    def leaf_ids(self) -> list[int]:
        """Leaf ids in increasing order (the LightGBM leaf numbering of the export)."""
        return sorted(i for i, n in self.nodes.items() if n.is_leaf)

    def internal_ids(self) -> list[int]:
        """Internal node ids in increasing order; the root comes first, as LightGBM requires."""
        return sorted(i for i, n in self.nodes.items() if not n.is_leaf)

    @property
    def depth(self) -> int:
        """Number of split levels on the longest path (0 for a single leaf)."""
        return max((node_depth(i) for i in self.nodes), default=0)

    def validate(self, num_features: int, edges: EdgesLike, where: str = "tree") -> None:
        """Raise :class:`ModelFormatError` unless this is a complete binary tree over valid splits.

        Checked: the root exists; every internal node has both children and every other node has an internal
        parent (so no node is unreachable and no leaf is missing); features and threshold slots are in range;
        counts are non-negative ints; fixed-point values are ints.
        """
        if 1 not in self.nodes:
            raise ModelFormatError(f"{where}: no root node (id 1)")
        for node_id, node in self.nodes.items():
            at = f"{where} node {node_id}"
            if not _is_int(node_id) or node_id < 1:
                raise ModelFormatError(f"{at}: node ids must be integers >= 1")
            if node_depth(node_id) > MAX_DEPTH:
                raise ModelFormatError(f"{at}: deeper than the maximum depth {MAX_DEPTH}")
            if not _is_int(node.count) or node.count < 0:
                raise ModelFormatError(f"{at}: count must be a non-negative integer, got {node.count!r}")
            if node_id > 1:
                parent = self.nodes.get(node_id // 2)
                if parent is None or parent.is_leaf:
                    raise ModelFormatError(
                        f"{at}: child ids inconsistent: its parent {node_id // 2} is "
                        f"{'missing' if parent is None else 'a leaf'}"
                    )
            if node.is_leaf:
                if node.threshold is not None or node.gain_fixed is not None:
                    raise ModelFormatError(f"{at}: a leaf (no feature) must not have a threshold or gain")
                if not _is_int(node.value_fixed):
                    raise ModelFormatError(f"{at}: leaf value_fixed must be an integer, got {node.value_fixed!r}")
                continue
            if node.value_fixed is not None:
                raise ModelFormatError(f"{at}: an internal node must not have a leaf value")
            for child in (2 * node_id, 2 * node_id + 1):
                if child not in self.nodes:
                    raise ModelFormatError(f"{at}: child ids inconsistent: child {child} is missing")
            f = node.feature
            if not _is_int(f) or not 0 <= f < num_features:  # type: ignore[operator]
                raise ModelFormatError(f"{at}: feature index {f!r} out of range 0..{num_features - 1}")
            assert f is not None
            top = len(edges[f])
            t = node.threshold
            if not _is_int(t) or not 0 <= t <= top:  # type: ignore[operator]
                raise ModelFormatError(
                    f"{at}: threshold slot {t!r} out of range 0..{top} for feature {f} ({top} edges)"
                )
            if not _is_int(node.gain_fixed):
                raise ModelFormatError(f"{at}: gain_fixed must be an integer, got {node.gain_fixed!r}")

    def to_json_dict(self) -> dict[str, Any]:
        """Nodes in increasing id order, each with only the fields of its kind."""
        out = []
        for node_id in sorted(self.nodes):
            n = self.nodes[node_id]
            if n.is_leaf:
                out.append({"id": node_id, "count": n.count, "value_fixed": n.value_fixed})
            else:
                out.append(
                    {
                        "id": node_id,
                        "count": n.count,
                        "feature": n.feature,
                        "threshold": n.threshold,
                        "gain_fixed": n.gain_fixed,
                    }
                )
        return {"nodes": out}

    @classmethod
    def from_json_dict(cls, d: Any, where: str = "tree") -> Tree:
        """Parse (not validate against the model: :meth:`Model.validate` does that) one tree object."""
        if not isinstance(d, dict) or not isinstance(d.get("nodes"), list):
            raise ModelFormatError(f"{where}: must be an object with a 'nodes' list")
        nodes: dict[int, Node] = {}
        for k, raw in enumerate(d["nodes"]):
            if not isinstance(raw, dict):
                raise ModelFormatError(f"{where}: node entry {k} must be an object")
            for key in ("id", "count"):
                if key not in raw:
                    raise ModelFormatError(f"{where}: node entry {k} is missing field '{key}'")
            node_id = raw["id"]
            if not _is_int(node_id) or node_id < 1:
                raise ModelFormatError(f"{where}: node entry {k}: id must be an integer >= 1, got {node_id!r}")
            if node_id in nodes:
                raise ModelFormatError(f"{where}: node {node_id} appears twice")
            at = f"{where} node {node_id}"
            unknown = set(raw) - {"id", "count", "feature", "threshold", "gain_fixed", "value_fixed"}
            if unknown:
                raise ModelFormatError(f"{at}: unknown fields {sorted(unknown)}")
            if "feature" in raw:
                if "value_fixed" in raw:
                    raise ModelFormatError(f"{at}: has both a split feature and a leaf value_fixed")
                missing = [key for key in ("threshold", "gain_fixed") if key not in raw]
                if missing:
                    raise ModelFormatError(f"{at}: internal node is missing field(s) {missing}")
                nodes[node_id] = Node.split(raw["feature"], raw["threshold"], raw["gain_fixed"], raw["count"])
            else:
                if "value_fixed" not in raw:
                    raise ModelFormatError(f"{at}: neither a split ('feature') nor a leaf ('value_fixed')")
                if "threshold" in raw or "gain_fixed" in raw:
                    raise ModelFormatError(f"{at}: a leaf must not have a threshold or gain_fixed")
                nodes[node_id] = Node.leaf(raw["value_fixed"], raw["count"])
        return cls(nodes)


def _is_int(x: object) -> bool:
    """JSON integers only: ``bool`` is an ``int`` subclass in Python but ``true`` is not a count."""
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass
class _CompiledTree:
    """Dense per-tree arrays indexed by heap id, for level-wise vectorised traversal.

    A leaf above the bottom level is given a pseudo-split that always goes left (feature 0, threshold 255, and a
    slot is at most 255), and its value is stored at the bottom-level id reached by going left all the way. Every row
    then takes exactly ``depth`` steps with no masking, and one gather reads the values.
    """

    depth: int
    feature: np.ndarray  # intp, size 2^depth (internal ids only are < 2^depth)
    threshold: np.ndarray  # uint8
    value: np.ndarray  # float64, size 2^(depth + 1)


def _compile(tree: Tree) -> _CompiledTree:
    depth = tree.depth
    feature = np.zeros(1 << depth, dtype=np.intp)
    threshold = np.full(1 << depth, 255, dtype=np.uint8)
    value = np.zeros(1 << (depth + 1), dtype=np.float64)
    for node_id, node in tree.nodes.items():
        if node.is_leaf:
            assert node.value_fixed is not None
            value[node_id << (depth - node_depth(node_id))] = from_fixed(node.value_fixed)
        else:
            assert node.feature is not None and node.threshold is not None
            feature[node_id] = node.feature
            threshold[node_id] = node.threshold
    return _CompiledTree(depth, feature, threshold, value)


def tree_values(tree: Tree, slots: np.ndarray) -> np.ndarray:
    """Each row's leaf value for rows given as bin slots (rows x features), as ``Model.predict_raw`` adds it: for
    trainers that update scores with the very values the saved model will predict."""
    ct = _compile(tree)
    rows = np.arange(slots.shape[0], dtype=np.intp)
    node = np.ones(slots.shape[0], dtype=np.intp)
    for _ in range(ct.depth):
        right = slots[rows, ct.feature[node]] > ct.threshold[node]
        node <<= 1
        node += right
    return ct.value[node]


# ----------------------------------------------------------------------------------------------------------- model


@dataclass
class Model:
    """A trained FGBDT model: binning, trees and the training parameters that produced them.

    ``edges`` may be given as numpy arrays (the engine's form); they are stored as lists of Python floats.

    ``edges`` are the task's common cut points (one strictly increasing list per feature) and ``bins`` the number
    of value bins they were made for; ``base_score`` is the initial raw score (0 in the protocol, kept for models
    that start from a prior). ``params`` and ``meta`` are free-form JSON-able dicts saved with the model (training
    parameters; provenance such as task id and chain references).
    """

    objective: str
    feature_names: list[str]
    edges: EdgesLike
    bins: int
    trees: list[Tree] = field(default_factory=list)
    base_score: float = 0.0
    label_scale: float = 1.0
    """What the leaf values are multiplied by to give labels: the power of two the task's labels were divided by
    before training (``ledger.spec.task_params.label_scale``; 1 for binary models). The raw score is ``base_score`` plus
    ``label_scale`` times the sum of the leaves."""
    params: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    contributions: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    """Per party, its split Shapley and voting contributions and its share, as ``fgbdt simulate`` reports them
    (``node.sim.experiment.contributions_report``); set by ``fgbdt_chain.train``, not saved (a loaded model has
    None)."""
    report: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """The training report ``fgbdt simulate`` writes (parameters, rows per party, endorsement, traffic, timings);
    set by ``fgbdt_chain.train``, not saved (a loaded model has None)."""

    def __post_init__(self) -> None:
        # the engine passes numpy arrays; plain float lists compare, copy and serialise exactly
        self.edges = [[float(v) for v in e] for e in self.edges]
        self.feature_names = [str(n) for n in self.feature_names]

    @property
    def num_features(self) -> int:
        return len(self.feature_names)

    # ------------------------------------------------------------------------------------------------ validation

    def validate(self) -> None:
        """Raise :class:`ModelFormatError` naming the first inconsistency; a valid model predicts and exports."""
        if self.objective not in OBJECTIVES:
            raise ModelFormatError(f"unknown objective {self.objective!r}; expected one of {', '.join(OBJECTIVES)}")
        if not _is_int(self.bins) or not 2 <= self.bins <= MAX_BINS:
            raise ModelFormatError(f"bins must be an integer in [2, {MAX_BINS}], got {self.bins!r}")
        if len(self.edges) != len(self.feature_names):
            raise ModelFormatError(
                f"edges has {len(self.edges)} features but feature_names has {len(self.feature_names)}"
            )
        for f, e in enumerate(self.edges):
            if len(e) > self.bins - 1:
                raise ModelFormatError(f"edges of feature {f}: {len(e)} cut points, at most bins - 1 = {self.bins - 1}")
            if not all(math.isfinite(v) for v in e):
                raise ModelFormatError(f"edges of feature {f}: cut points must be finite")
            if any(a >= b for a, b in itertools.pairwise(e)):
                raise ModelFormatError(f"edges of feature {f}: cut points must be strictly increasing")
        if not isinstance(self.base_score, float | int) or not math.isfinite(self.base_score):
            raise ModelFormatError(f"base_score must be a finite number, got {self.base_score!r}")
        scale = self.label_scale
        if isinstance(scale, bool) or not isinstance(scale, float | int) or not (math.isfinite(scale) and scale > 0):
            raise ModelFormatError(f"label_scale must be a positive finite number, got {scale!r}")
        if math.frexp(scale)[0] != 0.5 or (self.objective == "binary" and scale != 1):
            raise ModelFormatError(f"label_scale must be a power of two, and 1 for a binary model; got {scale!r}")
        for k, tree in enumerate(self.trees):
            tree.validate(self.num_features, self.edges, where=f"tree {k}")

    # ------------------------------------------------------------------------------------------------ prediction

    def _check_X(self, X: Any) -> np.ndarray:
        X = dense_features(X)
        if X.shape[1] != self.num_features:
            raise ValueError(f"X has {X.shape[1]} features, the model expects {self.num_features}")
        return X

    def predict_raw(self, X: Any, num_iteration: int | None = None) -> np.ndarray:
        """Raw scores: ``base_score`` plus the leaf values of every tree, added in tree order (float64).

        ``X``: rows by features, a numpy array, scipy sparse matrix (absent entries are 0) or pandas frame (by
        position, as LightGBM does); NaN is a missing value. ``num_iteration``: only the first that many trees, as
        LightGBM's argument of that name (convergence curves without retraining); None or <= 0: all of them."""
        self.validate()
        X = self._check_X(X)
        trees = self.trees if num_iteration is None or num_iteration <= 0 else self.trees[:num_iteration]
        n = X.shape[0]
        # feature-major layout: the slots of feature f for all rows are contiguous at f * n
        slots = np.ascontiguousarray(bin_matrix(X, self.edges).T).ravel()
        rows = np.arange(n, dtype=np.intp)
        scale = float(self.label_scale)
        # in the trees' units, scaled once at the end (a power of two: exact); as before for a scale of 1
        raw = np.full(n, float(self.base_score) / scale, dtype=np.float64)
        node = np.empty(n, dtype=np.intp)
        for tree in trees:
            ct = _compile(tree)
            offset = ct.feature * n
            node.fill(1)
            for _ in range(ct.depth):
                right = slots[offset[node] + rows] > ct.threshold[node]
                node <<= 1
                node += right
            raw += ct.value[node]
        return raw * scale if scale != 1.0 else raw

    def predict_proba(self, X: Any, num_iteration: int | None = None) -> np.ndarray:
        """Probability of class 1 (binary models only): the logistic function of the raw score."""
        if self.objective != "binary":
            raise ValueError(f"predict_proba needs a binary model; this model's objective is {self.objective!r}")
        return 1.0 / (1.0 + np.exp(-self.predict_raw(X, num_iteration)))

    def predict(self, X: Any, raw_score: bool = False, num_iteration: int | None = None) -> np.ndarray:
        """What ``lightgbm.Booster.predict`` returns: the probability of class 1 for a binary model, the predicted
        value for regression; ``raw_score=True`` gives the raw scores (log-odds for binary). Class labels are the
        caller's threshold (``predict(X) > 0.5``), or ``FGBDTClassifier.predict``."""
        if raw_score or self.objective != "binary":
            return self.predict_raw(X, num_iteration)
        return self.predict_proba(X, num_iteration)

    def feature_importance(self, importance_type: str = "split") -> np.ndarray:
        """Per feature, as ``lightgbm.Booster.feature_importance``: ``"split"`` counts the splits on it (int64),
        ``"gain"`` sums their split gains (float64: the grand coalition's gain, which split Shapley divides among
        the parties)."""
        if importance_type not in IMPORTANCE_TYPES:
            raise ValueError(f"importance_type must be one of {', '.join(IMPORTANCE_TYPES)}, got {importance_type!r}")
        splits = [n for tree in self.trees for n in tree.nodes.values() if not n.is_leaf]
        if importance_type == "split":
            used = np.array([n.feature for n in splits], dtype=np.intp)
            return np.bincount(used, minlength=self.num_features).astype(np.int64)
        out = np.zeros(self.num_features, dtype=np.float64)
        for n in splits:
            assert n.feature is not None and n.gain_fixed is not None
            out[n.feature] += from_fixed(n.gain_fixed)
        return out * float(self.label_scale) ** 2  # gains in the labels' units

    # ------------------------------------------------------------------------------------------------------ JSON

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON object of the ``fgbdt-model/1`` format; fixed-point values stay exact integers."""
        self.validate()
        scaled = {"label_scale": float(self.label_scale)} if self.label_scale != 1 else {}
        return {
            "format": SCALED_FORMAT_TAG if scaled else FORMAT_TAG,
            "objective": self.objective,
            "feature_names": list(self.feature_names),
            "bins": self.bins,
            "edges": [list(e) for e in self.edges],
            "base_score": float(self.base_score),
            **scaled,
            "params": self.params,
            "meta": self.meta,
            "trees": [t.to_json_dict() for t in self.trees],
        }

    @classmethod
    def from_json_dict(cls, d: Any) -> Model:
        """Parse and validate a ``fgbdt-model/1`` object; errors name the field, tree and node at fault."""
        if not isinstance(d, dict):
            raise ModelFormatError("a model must be a JSON object")
        if "format" not in d:
            raise ModelFormatError(f"missing field 'format' (expected {FORMAT_TAG!r})")
        if d["format"] not in FORMAT_TAGS:
            raise ModelFormatError(
                f"unknown model format tag {d['format']!r}; this version reads {' and '.join(map(repr, FORMAT_TAGS))}"
            )
        missing = [k for k in ("objective", "feature_names", "bins", "edges", "trees") if k not in d]
        if missing:
            raise ModelFormatError(f"missing field(s): {', '.join(missing)}")
        names = d["feature_names"]
        if not isinstance(names, list) or not all(isinstance(s, str) for s in names):
            raise ModelFormatError("feature_names must be a list of strings")
        edges = d["edges"]
        if not isinstance(edges, list) or not all(
            isinstance(e, list) and all(isinstance(v, float | int) and not isinstance(v, bool) for v in e)
            for e in edges
        ):
            raise ModelFormatError("edges must be a list (one per feature) of lists of numbers")
        if not isinstance(d["trees"], list):
            raise ModelFormatError("trees must be a list")
        for key in ("params", "meta"):
            if not isinstance(d.get(key, {}), dict):
                raise ModelFormatError(f"{key} must be an object")
        base = d.get("base_score", 0.0)
        if not isinstance(base, float | int) or isinstance(base, bool):
            raise ModelFormatError(f"base_score must be a number, got {base!r}")
        scale = d.get("label_scale", 1.0)  # fgbdt-model/1 has none: 1
        if not isinstance(scale, float | int) or isinstance(scale, bool):
            raise ModelFormatError(f"label_scale must be a number, got {scale!r}")
        if (scale != 1.0) != (d["format"] == SCALED_FORMAT_TAG):
            raise ModelFormatError(f"a label_scale other than 1 comes with the format tag {SCALED_FORMAT_TAG!r}")
        model = cls(
            objective=d["objective"],
            feature_names=names,
            edges=edges,
            bins=d["bins"],
            trees=[Tree.from_json_dict(t, where=f"tree {k}") for k, t in enumerate(d["trees"])],
            base_score=float(base),
            label_scale=float(scale),
            params=dict(d.get("params", {})),
            meta=dict(d.get("meta", {})),
        )
        model.validate()
        return model

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model as JSON (strict: NaN/inf in params or meta are rejected rather than written as non-JSON)."""
        d = self.to_json_dict()

        def dump(v: Any) -> str:
            return json.dumps(v, allow_nan=False, separators=(",", ":"))

        try:
            # one line per top-level field and per tree: diffable and greppable, yet compact for 500-tree models
            fields = [f"{json.dumps(k)}: {dump(v)}" for k, v in d.items() if k != "trees"]
            trees = ",\n  ".join(dump(t) for t in d["trees"])
            text = "{\n " + ",\n ".join([*fields, f'"trees": [\n  {trees}\n ]']) + "\n}\n"
        except (TypeError, ValueError) as exc:
            raise ModelFormatError(f"model is not JSON-serialisable (check params/meta): {exc}") from exc
        Path(path).write_text(text, encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Model:
        """Read and validate a model file; a file that is not JSON raises :class:`ModelFormatError` too."""
        text = Path(path).read_text(encoding="utf-8")
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ModelFormatError(f"{path}: not valid JSON: {exc}") from exc
        try:
            return cls.from_json_dict(d)
        except ModelFormatError as exc:
            raise ModelFormatError(f"{path}: {exc}") from exc

    # -------------------------------------------------------------------------------------------------- LightGBM

    def to_lightgbm(self, path: str | os.PathLike[str] | None = None) -> str:
        """LightGBM v4 text model with the same predictions; written to ``path`` if given, always returned.

        ``base_score`` is folded into the first tree's leaves (LightGBM does the same with its own initial score
        under ``boost_from_average``), and a model without trees exports one single-leaf tree holding it, so
        LightGBM's raw score is the same sum. Hessian sums are not kept by the protocol, so ``leaf_weight`` and
        ``internal_weight`` are written as 0; prediction does not read them.
        """
        self.validate()
        trees = self.trees or [Tree.single_leaf(0, 0)]
        blocks = []
        for k, tree in enumerate(trees):
            bias = float(self.base_score) if k == 0 else 0.0
            body = _lightgbm_tree(tree, self.edges, bias, float(self.label_scale))
            # LightGBM's SaveModelToString: "Tree=k\n" + Tree::ToString() + "\n", and tree_sizes are these lengths
            blocks.append(f"Tree={k}\n{body}\n")
        names = [_lightgbm_name(s, f) for f, s in enumerate(self.feature_names)]
        infos = [f"[{e[0]!r}:{e[-1]!r}]" if e else "none" for e in self.edges]
        objective = "binary sigmoid:1" if self.objective == "binary" else "regression"
        header = [
            "tree",
            "version=v4",
            "num_class=1",
            "num_tree_per_iteration=1",
            "label_index=0",
            f"max_feature_idx={self.num_features - 1}",
            f"objective={objective}",
            f"feature_names={' '.join(names)}",
            f"feature_infos={' '.join(infos)}",
            f"tree_sizes={' '.join(str(len(b.encode('utf-8'))) for b in blocks)}",
            "",
        ]
        params = [
            "[boosting: gbdt]",
            f"[objective: {self.objective}]",
            f"[num_iterations: {len(trees)}]",
            f"[max_depth: {max(t.depth for t in trees) or -1}]",
        ]
        text = (
            "\n".join(header)
            + "\n"
            + "".join(blocks)
            + "end of trees\n\nparameters:\n"
            + "\n".join(params)
            + "\n\nend of parameters\n"
        )
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text


def _lightgbm_name(name: str, f: int) -> str:
    """LightGBM splits feature_names on spaces and keys on '=' and ':', so those become '_' (as its Python API does)."""
    clean = "".join("_" if c.isspace() or c in '=:[]{},"' else c for c in name)
    return clean or f"Column_{f}"


def _num(x: float) -> str:
    """A double as LightGBM reads it back exactly: repr is the shortest round-tripping form."""
    return repr(float(x))


def _lightgbm_tree(tree: Tree, edges: EdgesLike, bias: float, scale: float = 1.0) -> str:
    """The body of one ``Tree=k`` block, as ``Tree::ToString`` lays it out (ending with the blank line); leaf values
    in the labels' units (times ``scale``, a power of two: the same sums as ``predict_raw``'s)."""
    leaf_ids = tree.leaf_ids()
    internal_ids = tree.internal_ids()
    leaf_index = {node_id: k for k, node_id in enumerate(leaf_ids)}
    internal_index = {node_id: k for k, node_id in enumerate(internal_ids)}

    def leaf_float(node_id: int) -> float:
        v = tree.nodes[node_id].value_fixed
        assert v is not None
        value = from_fixed(v) * scale
        return value + bias if bias != 0.0 else value

    def child_ref(node_id: int) -> int:
        return ~leaf_index[node_id] if node_id in leaf_index else internal_index[node_id]

    leaf_values = [leaf_float(i) for i in leaf_ids]
    leaf_counts = [tree.nodes[i].count for i in leaf_ids]
    if not internal_ids:
        lines = [
            "num_leaves=1",
            "num_cat=0",
            "split_feature=",
            "split_gain=",
            "threshold=",
            "decision_type=",
            "left_child=",
            "right_child=",
            f"leaf_value={_num(leaf_values[0])}",
            "leaf_weight=",
            f"leaf_count={leaf_counts[0]}",
            "internal_value=",
            "internal_weight=",
            "internal_count=",
            "is_linear=0",
            "shrinkage=1",
        ]
        return "\n".join(lines) + "\n\n"

    # count-weighted mean leaf output under each internal node, LightGBM's internal_value (informational only)
    sums: dict[int, tuple[float, int]] = {}
    for node_id in sorted(tree.nodes, reverse=True):
        node = tree.nodes[node_id]
        if node.is_leaf:
            sums[node_id] = (leaf_float(node_id) * node.count, node.count)
        else:
            (sl, cl), (sr, cr) = sums[2 * node_id], sums[2 * node_id + 1]
            sums[node_id] = (sl + sr, cl + cr)

    features, gains, thresholds, lefts, rights, ivalues, icounts = [], [], [], [], [], [], []
    for node_id in internal_ids:
        node = tree.nodes[node_id]
        assert node.feature is not None and node.threshold is not None and node.gain_fixed is not None
        features.append(str(node.feature))
        gain = max(-_FLOAT32_MAX, min(_FLOAT32_MAX, from_fixed(node.gain_fixed)))  # LightGBM reads gains as float32
        gains.append(_num(gain))
        t = node.threshold
        thresholds.append(_num(float(edges[node.feature][t - 1]) if t >= 1 else LIGHTGBM_MIN_THRESHOLD))
        lefts.append(str(child_ref(2 * node_id)))
        rights.append(str(child_ref(2 * node_id + 1)))
        s, c = sums[node_id]
        ivalues.append(_num(s / c if c > 0 else 0.0))
        icounts.append(str(node.count))
    # decision_type bits: 1 categorical (0), 2 default_left (set), bits 2-3 missing type (NaN = 2): 2 | 2 << 2 = 10
    lines = [
        f"num_leaves={len(leaf_ids)}",
        "num_cat=0",
        f"split_feature={' '.join(features)}",
        f"split_gain={' '.join(gains)}",
        f"threshold={' '.join(thresholds)}",
        f"decision_type={' '.join(['10'] * len(internal_ids))}",
        f"left_child={' '.join(lefts)}",
        f"right_child={' '.join(rights)}",
        f"leaf_value={' '.join(_num(v) for v in leaf_values)}",
        f"leaf_weight={' '.join(['0'] * len(leaf_ids))}",
        f"leaf_count={' '.join(str(c) for c in leaf_counts)}",
        f"internal_value={' '.join(ivalues)}",
        f"internal_weight={' '.join(['0'] * len(internal_ids))}",
        f"internal_count={' '.join(icounts)}",
        "is_linear=0",
        "shrinkage=1",
    ]
    return "\n".join(lines) + "\n\n"


def load_model(path: str | os.PathLike[str]) -> Model:
    """Shorthand for :meth:`Model.load`."""
    return Model.load(path)
