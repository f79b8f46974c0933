"""``fgbdt_chain.train``: the federation in process, on data already split by party, in LightGBM's shape.

Why a second entry point next to ``fgbdt simulate``: a data scientist holds arrays, not files, and the parties'
rows are usually split already (one hospital's rows per party), so the simulator's partition rule (label skew
``theta``, feature skew) must not apply. Everything else is the simulator's, through the same functions
(``node.sim.experiment.prepare`` with ``parts``, then ``run``): common DP bin edges from the parties' sketches, the PSDs
and distribution weights, the endorsement round with every verifier's estimators, the seed. So the same parties and
seed give the model ``fgbdt simulate`` gives, bit for bit, and the same contributions.

``params`` is a LightGBM-style dict. :data:`PARAMS` is the one table that maps its keys (and LightGBM's obvious
aliases) to ``TrainParams``, ``PrepConfig`` or the algorithm; an unknown key is an error naming it and the valid ones.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import numbers
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.parameters import parameter
from fgbdt_chain.ledger.spec.reference import MAX_PARTIES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.inputs import column_names, dense_features, labels, names_for
from fgbdt_chain.node.data.loaders import Dataset, check_labels
from fgbdt_chain.node.data.parquet import read_party
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.privacy.accountant import NOISE_SOURCES
from fgbdt_chain.node.privacy.binning import BINNING_METHODS
from fgbdt_chain.node.privacy.schema import Declared
from fgbdt_chain.node.protocol.shapley_cost import SlowShapleyWarning, slow_shapley_message
from fgbdt_chain.node.sim.experiment import (
    PrepConfig,
    check_label_range,
    declared_label_range,
    default_algorithm,
    default_shape,
    prepare,
    run,
)
from fgbdt_chain.node.sim.fvtree import ALGORITHMS
from fgbdt_chain.node.sim.random_split import TREE_FEATURES

__all__ = ["MAX_PARTIES", "MIN_PARTIES", "PARAMS", "Param", "Settings", "parse_params", "train"]

MIN_PARTIES = 2
"""A federation needs two parties: with one there is nobody to endorse its histograms nor to share credit with."""

Target = Literal["train", "prep", "run"]


@dataclass(frozen=True)
class Param:
    """One accepted key of ``params``: where it goes (``TrainParams``, ``PrepConfig`` or the run's algorithm), its
    type, the values it may take (when a fixed set) and the other names it is known by (LightGBM's aliases)."""

    name: str
    target: Target
    field: str
    kind: type
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    help: str = ""


def _described(name: str) -> str:
    """The table's help of parameter ``name`` with its range (``ledger.spec.parameters``)."""
    p = parameter(name)
    return p.help if p.choices else f"{p.help} Range {p.range_text()}."


PARAMS: tuple[Param, ...] = (
    Param(
        "objective",
        "train",
        "objective",
        str,
        ("objective_type", "app", "application", "loss"),
        parameter("objective").choices,
        f"{_described('objective')} LightGBM's regression_l2/l2/mse/mean_squared_error mean regression.",
    ),
    Param(
        "num_iterations",
        "train",
        "trees",
        int,
        (
            "num_trees",
            "num_iteration",
            "n_iter",
            "num_tree",
            "num_round",
            "num_rounds",
            "nrounds",
            "num_boost_round",
            "n_estimators",
            "max_iter",
            "trees",
        ),
        help=_described("trees"),
    ),
    Param("max_depth", "train", "depth", int, ("depth",), help=_described("depth")),
    Param(
        "learning_rate", "train", "learning_rate", float, ("shrinkage_rate", "eta"), help=_described("learning_rate")
    ),
    Param("lambda_l2", "train", "lam", float, ("reg_lambda", "lambda", "lam"), help=_described("lam")),
    Param("max_bin", "train", "bins", int, ("max_bins", "bins"), help=_described("bins")),
    Param(
        "min_data_in_leaf",
        "train",
        "min_rows",
        int,
        ("min_data_per_leaf", "min_data", "min_child_samples", "min_samples_leaf", "min_rows"),
        help=_described("min_rows"),
    ),
    Param("delta", "train", "delta", float, help=_described("refit_delta")),
    Param("alpha", "train", "alpha", float, help=f"{_described('alpha')} Not LightGBM's alpha."),
    Param("hessian", "train", "hessian", str, choices=parameter("hessian").choices, help=_described("hessian")),
    Param("tie_break", "train", "tie_break", str, choices=parameter("tie_break").choices, help=_described("tie_break")),
    Param("voted_trees", "train", "voted_trees", int, help=_described("voted_trees")),
    Param(
        "contribution",
        "train",
        "contribution",
        str,
        choices=parameter("contribution").choices,
        help=_described("contribution"),
    ),
    Param("seed", "prep", "seed", int, ("random_seed", "random_state"), help="bin sketches, PSD noise, estimators"),
    Param("binning", "prep", "binning", str, choices=BINNING_METHODS),
    Param("binning_epsilon", "prep", "binning_epsilon", float),
    Param("binning_resolution", "prep", "binning_resolution", int),
    Param("psd_depth", "prep", "psd_depth", int),
    Param("psd_max_rows", "prep", "psd_max_rows", int),
    Param("psd_epsilon", "prep", "psd_epsilon", float, help="PSD privacy budget (inf: no noise)"),
    Param("psd_label_first", "prep", "psd_label_first", bool),
    Param(
        "endorse",
        "prep",
        "endorse",
        str,
        choices=("none", *parameter("endorse").choices),
        help=f"{_described('endorse')} none: every histogram accepted (no verifiers modelled).",
    ),
    Param("refusal_rate", "prep", "refusal_rate", float, help=_described("refusal_rate")),
    Param("overlap_threshold", "prep", "overlap_threshold", float, help=_described("overlap_threshold")),
    Param(
        "epsilon",
        "prep",
        "epsilon",
        float,
        ("dp_epsilon",),
        help=_described("epsilon"),
    ),
    Param("dp_delta", "prep", "dp_delta", float, help=_described("delta")),
    Param(
        "feature_ranges",
        "prep",
        "feature_ranges",
        list,
        help="the requester's declared (low, high) per feature; rows are clipped to them. With epsilon: needed "
        "unless valid_set gives the ranges (never taken from the parties' rows, node.privacy.schema)",
    ),
    Param("label_min", "prep", "label_min", float, help=parameter("label_min").help),
    Param("label_max", "prep", "label_max", float, help=parameter("label_max").help),
    Param(
        "integer_features",
        "prep",
        "integer_features",
        list,
        help="with feature_ranges: per feature, whether it holds integers only (its cuts sit at half-integers)",
    ),
    Param(
        "dp_colluders",
        "prep",
        "colluders",
        int,
        help="randomsplit with epsilon: other parties that may pool their views with the guarantee intact",
    ),
    Param("tree_features", "prep", "tree_features", str, choices=TREE_FEATURES, help="randomsplit: one or all"),
    Param(
        "shapley_seed",
        "prep",
        "shapley_seed",
        int,
        help="the task seed of the split Shapley values estimated above shapley_estimate.EXACT_MAX_PARTIES parties, "
        "a uint256 (on chain: the ShapleySeedFixed event's seed, which reproduces a task's contributions)",
    ),
    Param(
        "dp_noise",
        "prep",
        "dp_noise",
        str,
        choices=NOISE_SOURCES,
        help="privacy noise from the seed (seeded, repeatable) or the operating system (entropy, the default with "
        "epsilon: train() is for real data)",
    ),
    Param(
        "algo",
        "run",
        "algo",
        str,
        choices=(*ALGORITHMS, "randomsplit"),
        help="fvtree (the protocol: votes, then drawn candidates after voted_trees), drawn, pvtree, allfeatures, "
        "or randomsplit (private leaves, no contributions); default: node.experiment.default_algorithm",
    ),
)
"""Every key ``train`` accepts, once; defaults are those of ``fgbdt simulate``: ``TrainParams``'s and
``PrepConfig``'s, the algorithm ``fvtree`` (random splits with ``epsilon``, ``node.sim.experiment.default_algorithm``)
and that algorithm's trees and depth (``node.sim.experiment.default_shape``)."""

_BY_NAME: dict[str, Param] = {n: p for p in PARAMS for n in (p.name, *p.aliases)}
assert len(_BY_NAME) == sum(1 + len(p.aliases) for p in PARAMS), "a name of PARAMS is used twice"

_OBJECTIVE_VALUES: dict[str, ref.ObjectiveName] = {
    **{name: name for name in ref.OBJECTIVES},
    **{alias: "regression" for alias in ("regression_l2", "l2", "mean_squared_error", "mse")},
}

_NOT_HERE = {
    "theta": "theta splits pooled rows over parties",
    "feature_skew": "feature_skew splits pooled rows over parties",
    "parties": "the number of parties is len(parties)",
    "num_parties": "the number of parties is len(parties)",
}
"""Keys of ``fgbdt simulate`` that have no meaning for parties already split."""


@dataclass(frozen=True)
class Settings:
    """``params`` sorted by destination: the ``TrainParams`` and ``PrepConfig`` fields given, and the algorithm."""

    train: dict[str, Any]
    prep: dict[str, Any]
    algo: str = "fvtree"
    keys: dict[str, str] = dataclasses.field(default_factory=dict)
    """Field -> the key it was given as, for messages."""

    def _given(self, values: dict[str, Any]) -> str:
        return ", ".join(f"{self.keys.get(f, f)}={v!r}" for f, v in values.items()) or "defaults only"

    def train_params(self) -> TrainParams:
        """``TrainParams`` with the given fields over its defaults; its range checks, with the keys as given."""
        trees, depth = default_shape(self.algo)  # the algorithm's own shape where none is given
        try:
            return TrainParams(**{"trees": trees, "depth": depth, **self.train})
        except ValueError as exc:
            raise ValueError(f"invalid params: {exc} (given: {self._given(self.train)})") from exc

    def prep_config(self, parties: int) -> PrepConfig:
        """``PrepConfig`` with the given fields; ``feature_ranges`` and ``integer_features`` as its ``schema``,
        ``label_min`` and ``label_max`` as its ``label_range``."""
        prep = dict(self.prep)
        ranges, integers = prep.pop("feature_ranges", None), prep.pop("integer_features", None)
        if integers is not None and ranges is None:
            raise ValueError("integer_features needs feature_ranges: they declare one schema together")
        label = prep.pop("label_min", None), prep.pop("label_max", None)
        if (label[0] is None) != (label[1] is None):
            raise ValueError("label_min and label_max declare the label range together; give both")
        try:
            schema = None if ranges is None else Declared.of(ranges, integers)
            label_range = None if label[0] is None else declared_label_range(label)
        except (TypeError, IndexError, ValueError) as exc:
            raise ValueError(f"invalid params: {exc}") from exc
        return dataclasses.replace(PrepConfig(), parties=parties, schema=schema, label_range=label_range, **prep)


def valid_keys() -> str:
    """The accepted keys, each with its aliases, for error messages."""
    return "; ".join(f"{p.name} ({', '.join(p.aliases)})" if p.aliases else p.name for p in PARAMS)


def parse_params(params: Mapping[str, Any] | None) -> Settings:
    """Map a LightGBM-style dict through :data:`PARAMS`, checking keys, types and fixed choices; a value of None
    keeps the default. Errors name the key as given."""
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict, got {type(params).__name__}")
    out: dict[Target, dict[str, Any]] = {"train": {}, "prep": {}, "run": {}}
    seen: dict[str, str] = {}
    keys: dict[str, str] = {}
    for key, value in params.items():
        if not isinstance(key, str):
            raise TypeError(f"params keys must be strings, got {key!r}")
        param = _BY_NAME.get(key)
        if param is None:
            why = f" ({_NOT_HERE[key]}; train takes parties already split)" if key in _NOT_HERE else ""
            raise ValueError(f"unknown parameter {key!r}{why}; valid keys (aliases): {valid_keys()}")
        if param.name in seen:
            raise ValueError(f"parameters {seen[param.name]!r} and {key!r} both set {param.name}; give one")
        seen[param.name] = key
        if value is None:
            continue
        out[param.target][param.field] = _checked(param, key, value)
        keys[param.field] = key
    seed = out["prep"].get("shapley_seed", 0)
    if not 0 <= seed < 2**256:
        raise ValueError(f"{keys['shapley_seed']}={seed!r}: the task seed is a uint256, in [0, 2^256)")
    epsilon = out["prep"].get("epsilon", math.inf)
    algo = out["run"].get("algo") or default_algorithm(epsilon)
    if algo != "randomsplit":
        stray = [keys[f] for f in ("colluders", "tree_features") if f in out["prep"]]
        if stray:
            raise ValueError(f"{' and '.join(map(repr, stray))} apply to algo 'randomsplit' only, not {algo!r}")
    if "colluders" in out["prep"] and not math.isfinite(epsilon):
        raise ValueError(f"{keys['colluders']!r} needs a privacy budget (epsilon): without one nothing is noised")
    if math.isfinite(epsilon):
        # a budget asks for a guarantee, which seeded noise gives only against those who do not know the seed
        out["prep"].setdefault("dp_noise", "entropy")
    return Settings(out["train"], out["prep"], algo, keys)


def _checked(param: Param, key: str, value: Any) -> Any:
    """``value`` as ``param``'s type (an integral float counts as an int), or a ValueError naming ``key``."""
    wrong = ValueError(f"parameter {key!r} must be {param.kind.__name__}, got {value!r}")
    if param.kind is bool:
        if not isinstance(value, bool | np.bool_):
            raise wrong
        return bool(value)
    if isinstance(value, bool | np.bool_):
        raise wrong
    if param.kind is int:
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real) and float(value).is_integer():
            return int(float(value))
        raise wrong
    if param.kind is list:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
            raise wrong
        return list(value)
    if param.kind is float:
        if not isinstance(value, numbers.Real) or math.isnan(float(value)):
            raise wrong
        return float(value)
    if not isinstance(value, str):
        raise wrong
    if param.name == "objective":
        if value not in _OBJECTIVE_VALUES:
            raise ValueError(
                f"parameter {key!r}: unknown objective {value!r}; use one of {', '.join(_OBJECTIVE_VALUES)}"
            )
        return _OBJECTIVE_VALUES[value]
    if param.choices and value not in param.choices:
        raise ValueError(f"parameter {key!r}: unknown value {value!r}; use one of {', '.join(param.choices)}")
    return value


# ------------------------------------------------------------------------------------------------------ the parties


def pool_parties(
    parties: Sequence[tuple[Any, Any] | str | os.PathLike[str]], feature_names: Sequence[str] | None = None
) -> tuple[Dataset, list[np.ndarray]]:
    """The parties' rows stacked in party order, and each party's row indices into the stack (``prepare``'s
    ``parts``). Checks what a federation needs: 2 to ``MAX_PARTIES`` parties, each with rows, the same features
    everywhere, finite values or NaN, one finite label per row."""
    if isinstance(parties, tuple) and len(parties) == 2 and not isinstance(parties[0], tuple):
        raise TypeError("parties must be a list of (X, y) pairs, one per party, e.g. [(X0, y0), (X1, y1)]")
    try:
        pairs = list(parties)
    except TypeError as exc:
        raise TypeError(f"parties must be a list of (X, y) pairs, got {type(parties).__name__}") from exc
    if not MIN_PARTIES <= len(pairs) <= MAX_PARTIES:
        raise ValueError(
            f"{len(pairs)} part{'y' if len(pairs) == 1 else 'ies'}: a federation has {MIN_PARTIES} to {MAX_PARTIES} "
            f"parties (at most MAX_PARTIES = {MAX_PARTIES}, what a task on chain accepts)"
        )
    Xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    given: list[Any] = []  # each party's X as given (its column names, if any)
    for i, pair in enumerate(pairs):
        if isinstance(pair, str | os.PathLike):  # a party's rows as a Parquet dataset (node.data.parquet)
            X, y, columns = read_party(pair)
            pair = (X, y)
            feature_names = columns if feature_names is None else feature_names
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise TypeError(f"party {i}: expected an (X, y) pair, got {type(pair).__name__}")
        X = dense_features(pair[0], finite=True, what=f"party {i}: X")
        y = labels(pair[1], what=f"party {i}: y")
        if X.shape[0] == 0:
            raise ValueError(f"party {i} has no rows")
        if y.size != X.shape[0]:
            raise ValueError(f"party {i}: X has {X.shape[0]} rows but y has {y.size} labels")
        if Xs and X.shape[1] != Xs[0].shape[1]:
            raise ValueError(f"party {i} has {X.shape[1]} features but party 0 has {Xs[0].shape[1]}")
        Xs.append(X)
        ys.append(y)
        given.append(pair[0])
    if Xs[0].shape[1] == 0:
        raise ValueError("the parties' X have no features")
    names = _feature_names(given, Xs[0].shape[1], feature_names)
    bounds = np.cumsum([0, *(len(y) for y in ys)])
    parts = [np.arange(a, b, dtype=np.int64) for a, b in itertools.pairwise(bounds)]
    return Dataset(np.vstack(Xs), np.concatenate(ys), names, name="parties"), parts


def _feature_names(frames: Sequence[Any], n_features: int, given: Sequence[str] | None) -> list[str]:
    """The given names, else pandas column names (the same in every party, in the same order), else f0, f1, ..."""
    if given is not None:
        return names_for(n_features, given)
    columns = [column_names(X) for X in frames]
    if columns[0] is None:
        return names_for(n_features, None)
    for i, cols in enumerate(columns[1:], start=1):
        if cols != columns[0]:
            raise ValueError(f"party {i}'s columns {cols} differ from party 0's {columns[0]} (same order needed)")
    return names_for(n_features, columns[0], what="column names")


def check_objective_labels(y: np.ndarray, objective: str, *, what: str = "y", both: bool = True) -> None:
    """Binary tasks train on labels 0 and 1 (as LightGBM's binary objective), both present in the task (``both``;
    one party alone may hold one class under a skewed split); regression on any finite values. The whole task's
    labels also go through ``node.data.loaders.check_labels``, the loaders' rules, so a one-class task is refused (and a
    constant regression target warned about) in the same words as from a file."""
    if both:
        check_labels(y, objective, source=what)
    if objective != "binary":
        return
    values = np.unique(y)
    if not np.isin(values, (0.0, 1.0)).all():
        shown = ", ".join(f"{v:g}" for v in values[:5]) + (", ..." if values.size > 5 else "")
        raise ValueError(
            f"{what}: the binary objective needs labels 0 and 1, found {values.size} value(s): {shown} (map the "
            "classes to 0/1, use FGBDTClassifier for other labels, or objective='regression')"
        )
    if both and values.size < 2:
        raise ValueError(
            f"{what}: every label is {values[0]:g}, only one class: binary classification needs both classes"
        )


def train(
    params: Mapping[str, Any] | None,
    parties: Sequence[tuple[Any, Any] | str | os.PathLike[str]],
    feature_names: Sequence[str] | None = None,
    *,
    valid_set: tuple[Any, Any] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Model:
    """Train a federated model on ``parties``, one ``(X, y)`` pair per party, as ``lightgbm.train`` trains one.

    ``X``: a numpy array, scipy sparse matrix (absent entries are 0) or pandas frame, NaN for missing values;
    ``y``: 0/1 labels for ``objective='binary'`` (the default), any finite numbers for ``'regression'``; a private
    regression task (``epsilon``) declares its label range with ``label_min`` and ``label_max``.
    A party may instead be the path of its rows as a Parquet dataset (``node.data.parquet``: every column but ``y`` a
    feature, read chunk by chunk; the ``scale`` extra): the same rows as an ``(X, y)`` pair give the same model.
    ``feature_names`` default to pandas column names (or a Parquet party's), else ``f0, f1, ...``. ``params``: see
    :data:`PARAMS` (``fgbdt simulate``'s defaults otherwise). ``valid_set=(X, y)`` adds its test metrics to the
    report, as simulate's test set does. ``progress(t)`` is called after tree ``t``.

    The model's ``contributions`` (per party: ``phi``, ``kappa``, ``total`` and ``share``, as simulate reports them)
    and ``report`` (simulate's JSON report) come with it; neither is saved by ``Model.save``.

    A greedy party that changes its rows before joining (copies, synthetic rows, several identities) is played by
    changing its pair first: ``parties, ids = node.attacks.data.apply_to_parties(parties, i, DataAttack(kind, k))``,
    then ``holder_share(model.contributions, ids)`` is its combined share (``fgbdt simulate`` and ``fgbdt train``
    play the same with ``--greedy i --attack kind --inflate k``).
    """
    settings = parse_params(params)
    pooled, parts = pool_parties(parties, feature_names)
    tp = settings.train_params()
    config = settings.prep_config(len(parts))
    check_label_range(settings.algo, config, tp.objective)
    for i, idx in enumerate(parts):
        check_objective_labels(pooled.y[idx], tp.objective, what=f"party {i}: y", both=False)
    check_objective_labels(pooled.y, tp.objective, what="y (all parties)")
    if valid_set is None:
        test = Dataset(np.zeros((0, pooled.n_features)), np.zeros(0), pooled.feature_names, name="")
    else:
        if not isinstance(valid_set, tuple | list) or len(valid_set) != 2:
            raise TypeError("valid_set must be an (X, y) pair")
        vX = dense_features(valid_set[0], what="valid_set X")
        vy = labels(valid_set[1], vX.shape[0], what="valid_set y")
        if vX.shape[1] != pooled.n_features:
            raise ValueError(f"valid_set X has {vX.shape[1]} features but the parties have {pooled.n_features}")
        check_objective_labels(vy, tp.objective, what="valid_set y", both=False)
        test = Dataset(vX, vy, pooled.feature_names, name="valid_set")
    slow = slow_shapley_message(len(parts), tp.trees, tp.depth) if settings.algo != "randomsplit" else None
    if slow:
        warnings.warn(f"{slow}; fewer parties, num_trees or max_depth run faster", SlowShapleyWarning, stacklevel=2)
    prep = prepare(pooled, test, tp, config, parts=parts)
    report, model, _ = run(prep, settings.algo, progress=progress)
    assert model is not None  # federated algorithms always give one
    model.contributions = report.get("contributions")  # random splits have none
    model.report = report
    return model
