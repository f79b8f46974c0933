"""One simulated run: partition, common bins, PSDs and weights, training, evaluation and the report.

Every algorithm of a run sees the same partition, bins and test rows, so their figures compare directly; the
benchmarks call ``prepare`` once and ``run`` per algorithm.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.parameters import default
from fgbdt_chain.ledger.spec.task_params import label_scale
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.baselines.seed_systems import SeedInputs
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.data.partition import feature_skewed, skewed_partition
from fgbdt_chain.node.model.metrics import auc, error_rate, rmse
from fgbdt_chain.node.model.trees import Model, Tree, bin_matrix, slot_widths
from fgbdt_chain.node.privacy.accountant import (
    NO_PRIVACY,
    SPLIT,
    LeafPlan,
    PrivacyPlan,
    check_private_objective,
    leaf_plan,
    loss_bounds,
    noise_seed,
    plan,
)
from fgbdt_chain.node.privacy.binning import (
    DEFAULT_RESOLUTION,
    edges_and_sketch_bytes,
    fixed_round,
    schema_integers,
    schema_label_range,
    schema_ranges,
)
from fgbdt_chain.node.privacy.psd import PSD, build_psd, label_levels_for, psd_budget, psd_rng
from fgbdt_chain.node.privacy.schema import (
    DECLARED,
    POOLED,
    REQUESTER_ROWS,
    Declared,
    clip_rows,
    private_schema_refusal,
)
from fgbdt_chain.node.privacy.weights import distribution_weights
from fgbdt_chain.node.protocol.endorsement import EndorsementRule, estimators_for
from fgbdt_chain.node.protocol.verify import PartyEstimator
from fgbdt_chain.node.sim.algorithms import LEAVES, PROTOCOL, Job, algorithm, budget_refusal
from fgbdt_chain.node.sim.fvtree import Federation, LevelView, TrainResult, params_dict


def declared_label_range(value: Any) -> tuple[float, float]:
    """A declared label range as ``(low, high)`` floats: two finite numbers with low < high (the table's
    ``label_min`` below its ``label_max``), or a ValueError naming them. Why strict: the range sets the label's PSD
    splits and, under a budget, the gradients' bound, half its width, which an empty range makes zero."""
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"the label range (label_min, label_max) must be a pair of numbers (low, high), got {value!r}"
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(
            f"the label range (label_min, label_max) must be finite with label_min < label_max, got {value!r}"
        )
    return low, high


def check_label_range(algo: str, config: PrepConfig, objective: str, names: str = "label_min and label_max") -> None:
    """Refuse, before any work, a private regression task that cannot train: FV-tree's noise is calibrated to the
    logistic loss (``check_private_objective``), and random-split trees need the declared label range that bounds
    the gradients (``node.privacy.accountant.loss_bounds``); ``names`` is how the caller's surface sets it."""
    if objective == "binary" or not math.isfinite(config.epsilon):
        return
    spends = algorithm(algo).privacy
    if spends == PROTOCOL:
        check_private_objective(config.epsilon, objective)
    if spends == LEAVES and config.label_range is None:
        raise ValueError(
            f"a private regression task needs its label range declared: set {names} (the label's documented "
            "domain, known before any party joins, never the parties' rows): every row's gradient is bounded by "
            "half its width, which sets the noise, and the parties' labels are clipped to it"
        )


def default_algorithm(epsilon: float) -> str:
    """What a task trains when the user names no algorithm: FV-tree, the protocol with its split Shapley
    contributions, unless a privacy budget is set; then random-split trees with private leaves, the model a private
    task is asked for. Why: FV-tree releases every party's histograms at every level of every tree, and at epsilon 1
    its noise drowns them (UCI credit, 10 seeds: AUC 0.609 against 0.769 for random splits, LightGBM 0.782;
    ``bench.privacy --part curve`` and ``curve-randomsplit-depth4``); the user who wants FV-tree's contributions
    under privacy asks for it by name."""
    return "randomsplit" if math.isfinite(epsilon) else "fvtree"


def privacy_of(algo: str, config: PrepConfig, params: TrainParams) -> PrivacyPlan | LeafPlan:
    """What an algorithm's releases spend of the budget: random splits their leaf plan, the federated algorithms
    FV-tree's plan, and the baselines nothing (LightGBM on pooled rows adds no noise: their rows say no privacy).
    Calling it before training calibrates the budget for the mechanisms the algorithm runs: a refusal says why."""
    spends = algorithm(algo).privacy
    if spends == LEAVES:
        return config.leaf_privacy(params)
    if spends == PROTOCOL:
        return config.privacy(params)
    return NO_PRIVACY


def default_shape(algo: str) -> tuple[int, int]:
    """The trees and depth of an algorithm's task when the user sets none: its registered shape (random-split trees:
    ``node.sim.random_split.DEFAULT_TREES``), else ``TrainParams``'s."""
    return algorithm(algo).shape or (TrainParams.trees, TrainParams.depth)


@dataclass(frozen=True)
class PrepConfig:
    """How the parties are formed and what they publish before training."""

    parties: int = 4
    theta: float = 0.8
    seed: int = 0
    shapley_seed: int = 0
    """The task's seed of the estimated split Shapley values above ``shapley_estimate.EXACT_MAX_PARTIES`` parties
    (on chain: the ``ShapleySeedFixed`` event's, ``ledger.spec.shapley_estimate``); nothing at fewer parties."""
    feature_skew: float = 0.0
    """On top of the label skew theta, how strongly the parties of a label group differ in one feature
    (``node.data.partition.feature_skewed``): 0 none, 1 disjoint ranges."""
    binning: str = "dp"
    binning_epsilon: float = 1.0
    binning_resolution: int = DEFAULT_RESOLUTION
    psd_depth: int = 8
    psd_max_rows: int = 500
    psd_epsilon: float = 1.0
    psd_label_first: bool = True
    psd_label_levels: int | None = None
    """Levels of every PSD that split the label; None: ``node.privacy.psd.label_levels_for`` the task."""
    endorse: str = default("endorse")
    """How verifiers decide, as on chain: ``statistical`` (the default), ``overlap`` (the paper's equation 11) or
    ``none`` (every histogram accepted as sent, at neutral credit: the model of an all-honest federation)."""
    refusal_rate: float = default("refusal_rate")
    overlap_threshold: float = default("overlap_threshold")
    quorum_num: int = default("quorum_num")
    quorum_den: int = default("quorum_den")
    """The endorsement quorum, ``quorum_num / quorum_den`` of the other parties (the task's ``quorumNum``,
    ``quorumDen``)."""
    epsilon: float = default("epsilon")
    """Every party's differential-privacy budget for all it releases (``node.privacy.accountant``): it then sets the
    sketch's
    and the PSD's epsilon (``binning_epsilon`` and ``psd_epsilon`` are for ``inf`` only); inf: votes and histograms
    exact."""
    dp_delta: float = default("delta")
    """With a finite ``epsilon``: the budget's delta."""
    tree_features: str = "auto"
    """``randomsplit`` only: how many features a tree splits on (``node.sim.random_split.TREE_FEATURES``)."""
    colluders: int | None = None
    """``randomsplit`` with a budget only: how many other parties may pool their views against one party with its
    guarantee intact (``node.privacy.accountant.LeafPlan``); None: ``node.privacy.accountant.default_colluders``."""
    schema: Declared | None = None
    """The requester's declared feature ranges and integer flags (``node.privacy.schema``); under a budget without
    one, the test rows (the requester's) set them."""
    label_range: tuple[float, float] | None = None
    """The requester's declared label range ``(low, high)`` (the task's ``label_min``, ``label_max``, the parameter
    table's): a regression task needs it under a budget, where it bounds the gradients
    (``node.privacy.accountant.loss_bounds``); whenever declared it is the schema's label range, the parties' labels
    are clipped to it and the scores start at its midpoint. None: a binary task's [0, 1], or without a budget the
    training labels' range. A binary task may declare only ``(0, 1)``."""
    dp_noise: str | None = None
    """Where the privacy noise comes from (``node.privacy.accountant.NOISE_SOURCES``): ``seeded`` from ``seed``
    (an experiment that repeats, asked for by name; the guarantee line says so), ``entropy`` from the operating
    system. None: entropy under a budget (a guarantee over seeded noise holds only against those who do not know
    the seed), seeded without one (nothing is promised, and runs repeat)."""

    def __post_init__(self) -> None:
        if self.label_range is not None:
            object.__setattr__(self, "label_range", declared_label_range(self.label_range))

    @property
    def noise_source(self) -> str:
        """``dp_noise`` resolved: entropy under a budget unless seeded noise was asked for."""
        if self.dp_noise is not None:
            return self.dp_noise
        return "entropy" if math.isfinite(self.epsilon) else "seeded"

    @property
    def noise_seed(self) -> int | None:
        """The seed of every noise stream of the task (sketch, PSD, votes, histograms, leaves, secure-sum keys):
        ``seed``, or None for the operating system's entropy."""
        return noise_seed(self.noise_source, self.seed)

    def privacy(self, params: TrainParams) -> PrivacyPlan:
        """The parties' mechanisms for a task of these GBDT parameters (FV-tree: a budget needs a binary task)."""
        check_private_objective(self.epsilon, params.objective)
        return plan(self.epsilon, self.dp_delta, params.trees, params.depth)

    def leaf_privacy(self, params: TrainParams) -> LeafPlan:
        """The parties' leaf releases for random-split trees of these parameters
        (``node.privacy.accountant.leaf_plan``)."""
        private = math.isfinite(self.epsilon)
        bounds = loss_bounds(params.objective, self.label_range) if private else loss_bounds("binary")
        return leaf_plan(self.epsilon, self.dp_delta, params.trees, self.parties, self.colluders, bounds)

    def sketch_epsilon(self, params: TrainParams) -> float:
        """The bin sketch's epsilon: its ``SPLIT`` share of the budget (every algorithm's plan gives it that), or
        ``binning_epsilon`` without a budget. Not read from :meth:`privacy`: FV-tree's calibration may refuse a
        budget that random splits can still spend."""
        return SPLIT["sketch"] * self.epsilon if math.isfinite(self.epsilon) else self.binning_epsilon

    def psd_budget_epsilon(self, params: TrainParams) -> float:
        """The PSD's epsilon: the privacy plan's share, or ``psd_epsilon`` without a budget."""
        p = self.privacy(params)
        return p.psd_epsilon if p.private else self.psd_epsilon

    def endorsement(self, params: TrainParams | None = None) -> EndorsementRule | None:
        """The verifiers' rule (with the privacy noise of a task of ``params``), or None when endorsement is not
        modelled."""
        if self.endorse == "none":
            return None
        if self.endorse not in ref.ENDORSE_RULES:
            raise ValueError(f"unknown endorsement rule {self.endorse!r}; use none or {', '.join(ref.ENDORSE_RULES)}")
        privacy = self.privacy(params) if params is not None else NO_PRIVACY
        return EndorsementRule.of(ref.ENDORSE_RULES[self.endorse], self.refusal_rate, self.overlap_threshold, privacy)


@dataclass
class Prepared:
    """The federation's common ground: partition, edges, binned rows and (lazily) the PSD weights."""

    train: Dataset
    test: Dataset
    config: PrepConfig
    params: TrainParams
    parts: list[np.ndarray]
    edges: list[np.ndarray]
    train_slots: np.ndarray
    test_slots: np.ndarray
    prep_seconds: float
    ranges: tuple[np.ndarray, np.ndarray]
    label_range: tuple[float, float] = (0.0, 1.0)
    """The label's range in the task's schema (``node.privacy.binning.schema_label_range``), over which every PSD
    splits it."""
    integers: np.ndarray | None = None
    """The schema's integer features (``node.privacy.binning.schema_integers``), whose cuts sit at half-integers."""
    schema_source: str = POOLED
    """Where the ranges and integer flags came from (``node.privacy.schema``): declared, the requester's rows, or
    the pooled training rows (no budget only)."""
    _weights: list[np.ndarray] | None = None
    _matrices: list[np.ndarray] | None = None
    _estimators: list[list[PartyEstimator]] | None = None
    psd_bytes: list[int] | None = None
    sketch_bytes: list[int] | None = None
    """Each party's published binning sketch in bytes (``node.privacy.binning.encode_sketch``; 0 for
    ``exact``/``uniform``)."""
    lam_given: float | None = None
    """The lambda asked for, before a private task raised it to FV-tree's noise floor (``PrivacyPlan.regularisation``):
    an algorithm with another noise (``randomsplit``) raises it to its own."""
    given_parts: bool = False
    """Whether the parties came already split (``prepare``'s ``parts``): theta and the feature skew then played no
    part, and the reports say so with None."""

    def skew(self) -> tuple[float | None, float | None]:
        """The partition's ``(theta, feature_skew)`` as reports record them: None for parties given already split."""
        return (None, None) if self.given_parts else (self.config.theta, self.config.feature_skew)

    def party_slots(self) -> list[np.ndarray]:
        return [self.train_slots[idx] for idx in self.parts]

    def party_y(self) -> list[np.ndarray]:
        return [self.train.y[idx] for idx in self.parts]

    def matrices(self) -> list[np.ndarray]:
        """Each party's distribution matrix W (its rows x M): what its endorsement verifier weights with."""
        self.weights()
        assert self._matrices is not None
        return self._matrices

    def estimators(self) -> list[list[PartyEstimator]]:
        """``estimators()[j][m]``: verifier j's view of party m (its weights and PSD leaves), for endorsement."""
        self.weights()
        assert self._estimators is not None
        return self._estimators

    @property
    def label_levels(self) -> int:
        """Levels of every party's PSD that split the label (``node.privacy.psd.label_levels_for``; 0 without
        ``psd_label_first``)."""
        c = self.config
        if c.psd_label_levels is not None:
            return c.psd_label_levels
        return label_levels_for(self.params.objective, self.params.bins) if c.psd_label_first else 0

    def psds(self) -> list[PSD]:
        """Every party's PSD of its own rows, each drawing its noise from its own stream (``psd_rng``: with a noise
        seed, the same PSDs on every call; without one, fresh entropy)."""
        c = self.config
        low, high = self.ranges
        lows, highs = np.append(low, self.label_range[0]), np.append(high, self.label_range[1])
        return [
            build_psd(
                self.train.X[idx],
                self.train.y[idx],
                lows,
                highs,
                depth=c.psd_depth,
                max_rows=c.psd_max_rows,
                epsilon=c.psd_budget_epsilon(self.params),
                rng=psd_rng(c.noise_seed, p),
                label_levels=self.label_levels,
            )
            for p, idx in enumerate(self.parts)
        ]

    def weights(self) -> list[np.ndarray]:
        """Each party's w* from all parties' PSDs (Algorithm 2, equation 3), computed once per run."""
        if self._weights is None:
            start = time.perf_counter()
            c = self.config
            psds = self.psds()
            self.psd_bytes = [len(psd.encode()) for psd in psds]
            pairs = [
                distribution_weights(self.train.X[idx], self.train.y[idx], psds, self.params.delta)
                for idx in self.parts
            ]
            self._matrices = [W for W, _ in pairs]
            self._weights = [w for _, w in pairs]
            scale = psd_budget(
                c.psd_budget_epsilon(self.params),
                c.psd_depth,
                self.train.n_features + 1,
                label_levels=self.label_levels,
            ).leaf_scale
            self._estimators = [
                estimators_for(self.train.X[idx], self.train.y[idx], W, psds, [scale] * len(psds))
                for idx, W in zip(self.parts, self._matrices, strict=True)
            ]
            self.prep_seconds += time.perf_counter() - start
        return self._weights


def partition(train: Dataset, config: PrepConfig) -> list[np.ndarray]:
    """The simulator's parties: the seeded label skew ``theta`` (SimFL's partition), then the feature skew, over
    ``config.parties``; each party's sorted row indices into ``train``."""
    parts = skewed_partition(train.y, config.parties, config.theta, config.seed)
    return feature_skewed(parts, train.X, config.parties, config.feature_skew, config.seed)


def task_schema(
    train: Dataset, test: Dataset, config: PrepConfig
) -> tuple[Dataset, tuple[np.ndarray, np.ndarray], np.ndarray | None, str]:
    """The training rows as the parties use them, the schema's ranges and integer flags, and where they came from.

    Without a budget the pooled training rows stand in for the schema. Under a budget (``node.privacy.schema``) the
    requester's declaration (``config.schema``) or its own rows (``test``) set them, the parties' rows are clipped to
    them, and a task with neither is refused; exact binning, which cuts at the pooled rows' quantiles, is refused."""
    if not math.isfinite(config.epsilon):
        return train, schema_ranges(train.X), schema_integers(train.X), POOLED
    if config.binning == "exact":
        raise ValueError(
            "binning 'exact' cuts at the pooled training rows' quantiles, which no privacy budget covers: use "
            "binning 'dp' (the parties' private sketches) or 'uniform' under a budget"
        )
    if config.schema is not None:
        if len(config.schema.ranges) != train.n_features:
            raise ValueError(f"{len(config.schema.ranges)} feature_ranges for {train.n_features} features")
        pairs = np.array(config.schema.ranges, dtype=np.float64).reshape(-1, 2)
        low, high = fixed_round(pairs[:, 0]), fixed_round(pairs[:, 1])
        given = config.schema.integers
        integers = np.array(given, dtype=bool) if given is not None else np.zeros(train.n_features, dtype=bool)
        source = DECLARED
    elif test.n_rows > 0:
        low, high = schema_ranges(test.X)
        integers = schema_integers(test.X)
        source = REQUESTER_ROWS
    else:
        raise private_schema_refusal(train.n_features)
    clipped = dataclasses.replace(train, X=clip_rows(train.X, low, high))
    return clipped, (low, high), integers, source


def prepare(
    train: Dataset,
    test: Dataset,
    params: TrainParams,
    config: PrepConfig,
    parts: Sequence[np.ndarray] | None = None,
) -> Prepared:
    """Partition the training rows and fix the common bin edges (``node.data.partition``, ``node.privacy.binning``).

    ``parts`` (each party's row indices into ``train``) gives parties that are already split, as the Python API's
    ``train`` has them: the partition rules (``theta``, ``feature_skew``) are then not applied, and everything else
    (schema ranges, DP bin edges from the parties' sketches, and later the PSDs, weights and estimators, all seeded
    by ``config.seed``) is exactly what a partitioned run does with the same parties.
    """
    if train.n_features != test.n_features:
        raise ValueError(f"train has {train.n_features} features but test has {test.n_features}")
    if config.parties < 1:
        raise ValueError("parties must be at least 1")
    start = time.perf_counter()
    lam_given = params.lam
    try:
        privacy = config.privacy(params)
    except ValueError:  # FV-tree cannot spend this budget; random splits may (they calibrate their own, in run)
        privacy = NO_PRIVACY
    if privacy.private:  # noisy leaves need a regularisation at the noise's scale (PrivacyPlan.regularisation)
        params = dataclasses.replace(params, lam=privacy.regularisation(params.lam, config.parties))
    given = parts is not None
    if parts is None:
        parts = partition(train, config)
    else:
        parts = [np.asarray(idx, dtype=np.int64) for idx in parts]
        if len(parts) != config.parties:
            raise ValueError(f"{len(parts)} parties' rows given but the configuration has {config.parties} parties")
        if any(idx.ndim != 1 or (idx.size and not 0 <= idx.min() <= idx.max() < train.n_rows) for idx in parts):
            raise ValueError(f"party rows must be 1-D indices in [0, {train.n_rows})")
    parts = list(parts)
    if any(len(idx) == 0 for idx in parts):
        raise ValueError(f"{config.parties} parties leave some party without rows ({len(train.y)} training rows)")
    train, ranges, integers, schema_source = task_schema(train, test, config)
    edges, sketch_bytes = edges_and_sketch_bytes(
        [train.X[idx] for idx in parts],
        params.bins,
        method=config.binning,
        epsilon=config.sketch_epsilon(params),
        resolution=config.binning_resolution,
        seed=config.noise_seed,
        ranges=ranges,
        integers=integers,
    )
    if params.objective == "binary" and config.label_range not in (None, (0.0, 1.0)):
        raise ValueError(f"a binary task's labels are 0 and 1; the label range {config.label_range} says otherwise")
    if math.isfinite(config.epsilon) and params.objective == "regression":
        # under a budget the label's range is the requester's declaration, never the parties' rows (loss_bounds)
        loss_bounds(params.objective, config.label_range)
    if config.label_range is not None and params.objective == "regression":
        low, high = fixed_round(np.array(config.label_range, dtype=np.float64))
        label_range = (float(low), float(high))
        train = dataclasses.replace(train, y=np.clip(train.y, low, high))
    else:
        label_range = schema_label_range(params.objective, train.y)
    params = dataclasses.replace(params, label_scale=label_scale(*label_range))
    prepared = Prepared(
        train, test, config, params, parts, edges, bin_matrix(train.X, edges), bin_matrix(test.X, edges), 0.0, ranges
    )
    prepared.integers = integers
    prepared.schema_source = schema_source
    prepared.label_range = label_range
    prepared.given_parts = given
    prepared.lam_given = lam_given
    prepared.sketch_bytes = sketch_bytes
    prepared.prep_seconds = time.perf_counter() - start
    return prepared


def evaluate(params: TrainParams, y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """Test metrics: error rate and AUC for binary tasks, RMSE for regression."""
    if params.objective == "binary":
        return {"test_error": error_rate(y, pred), "test_auc": auc(y, pred)}
    return {"test_rmse": rmse(y, pred)}


def standalone_errors(prep: Prepared, threads: int = 1) -> list[dict[str, float]]:
    """LightGBM on each party's rows alone, evaluated on the common test set."""
    from fgbdt_chain.node.baselines import centralized as baselines  # LightGBM: loaded by the runs that train it

    out = []
    for slots, y in zip(prep.party_slots(), prep.party_y(), strict=True):
        booster = baselines.train_lightgbm(slots, y, prep.params, threads=threads, seed=prep.config.seed)
        out.append(
            evaluate(prep.params, prep.test.y, baselines.predict_lightgbm(booster, prep.test_slots, prep.params))
        )
    return out


def seed_inputs(prep: Prepared, threads: int = 1) -> SeedInputs:
    """The prepared federation as the seed systems (``node.baselines.seed_systems``) take it: the same parties, bins,
    test rows and seed as every other algorithm of the run."""
    return SeedInputs(
        party_X=[prep.train.X[idx] for idx in prep.parts],
        party_slots=prep.party_slots(),
        party_y=prep.party_y(),
        edges=prep.edges,
        test_X=prep.test.X,
        test_slots=prep.test_slots,
        params=prep.params,
        seed=prep.config.seed,
        threads=threads,
    )


def make_model(prep: Prepared, result: TrainResult | list[Tree], algo: str) -> Model:
    """The trained trees with the task's bins, ready to predict, save and export. A federation's trees (a
    ``TrainResult``) have leaves in labels / ``label_scale`` (``LocalParty``); the other algorithms' tree lists are
    trained on the labels themselves."""
    return Model(
        objective=prep.params.objective,
        feature_names=list(prep.train.feature_names),
        edges=[list(e) for e in prep.edges],
        bins=prep.params.bins,
        trees=result if isinstance(result, list) else result.trees,
        label_scale=prep.params.label_scale if isinstance(result, TrainResult) else 1.0,
        params={**params_dict(prep.params), "algo": algo},
        meta={
            "dataset": prep.train.name,
            "parties": prep.config.parties,
            "theta": prep.skew()[0],
            "seed": prep.config.seed,
        },
    )


def contributions_report(result: TrainResult) -> list[dict[str, Any]]:
    """Per-party contribution figures: reals for reading, fixed-point strings for exact comparison."""
    shares = result.shares()
    return [
        {
            "party": i,
            "phi": ref.from_fixed(result.phi[i]),
            "kappa": ref.from_fixed(result.kappa[i]),
            "total": ref.from_fixed(result.total[i]),
            "share": shares[i],
            "finished": result.finished[i] if result.finished else True,
            "phi_fixed": str(result.phi[i]),
            "kappa_fixed": str(result.kappa[i]),
            "total_fixed": str(result.total[i]),
        }
        for i in range(len(result.total))
    ]


def federation(
    prep: Prepared,
    algo: str,
    *,
    keep_levels: bool = False,
    attacks: dict[int, Attack] | None = None,
    observer: Callable[[LevelView], None] | None = None,
    threads: int | None = None,
) -> Federation:
    """The simulated federation ``run`` trains: the prepared parties, the endorsement rule of ``prep.config``
    (with every verifier's view of every party) and the attacks; ready to ``train`` (in parts, if wanted). The
    parties' work runs on ``threads`` threads (default: every core; ``node.kernels.parallel``)."""
    rule = prep.config.endorsement(prep.params)
    private = math.isfinite(prep.config.epsilon)
    if private:
        # Under a budget the distribution weights would divide by each party's exact rows per PSD leaf (one row
        # added moves every weight of its leaf, beyond any stated sensitivity) and the verifiers' credits and
        # statistics come from their exact rows: rows weigh delta each and endorsement keeps the exact rules only
        # (node.privacy.inventory).
        # (delta capped at 1: the per-row bounds every sensitivity rests on hold for weights up to 1)
        weights: list[np.ndarray] | None = [np.full(len(idx), min(prep.params.delta, 1.0)) for idx in prep.parts]
    else:
        weights = prep.weights() if publishes_psds(algo, rule) else None
    fed = Federation(
        prep.party_slots(),
        prep.party_y(),
        prep.params.fitted(prep.edges),
        algo=algo,
        party_weights=weights if algorithm(algo).psd_weights else None,
        keep_levels=keep_levels,
        endorsement=rule,
        estimators=prep.estimators() if rule is not None and not private else None,
        attacks=attacks,
        privacy=prep.config.privacy(prep.params),
        noise_seed=prep.config.noise_seed,
        widths=slot_widths(prep.edges),
        threads=threads,
        quorum_fraction=(prep.config.quorum_num, prep.config.quorum_den),
        exact_rules_only=private,
        shapley_seed=prep.config.shapley_seed,
    )
    fed.level_observer = observer
    return fed


def publishes_psds(algo: str, rule: EndorsementRule | None) -> bool:
    """Whether the parties of a federated run publish their PSDs: FV-tree weights its rows by them, and verifiers
    (``rule``) weight what they expect of every party by them."""
    return algorithm(algo).psd_weights or rule is not None


def endorsement_report(result: TrainResult, attacks: dict[int, Attack] | None) -> dict[str, Any]:
    """Who stopped taking part and why, each party's mean credit, and the attacks played."""
    trees = max(len(result.credits), 1)
    return {
        "refusals": [asdict(r) for r in result.refusals],
        "mean_credit": [
            {q: sum(getattr(tc[i], q) for tc in result.credits) / trees / ref.ONE for q in ("g", "h", "n")}
            for i in range(len(result.total))
        ],
        "attacks": {str(i): {"kind": a.kind, "factor": a.factor} for i, a in (attacks or {}).items()},
    }


def run(
    prep: Prepared,
    algo: str,
    *,
    progress: Callable[[int], None] | None = None,
    with_standalone: bool = False,
    threads: int = 1,
    keep_levels: bool = False,
    attacks: dict[int, Attack] | None = None,
    observer: Callable[[LevelView], None] | None = None,
) -> tuple[dict[str, Any], Model | None, TrainResult | None]:
    """Train ``algo`` on the prepared federation; returns the JSON report, the model and the protocol record.

    ``attacks`` makes parties greedy (``node.attacks.histograms``); ``observer`` sees every level (``LevelView``).
    What ``algo`` trains and adds to the report is its trainer's (``node.sim.algorithms``)."""
    spec = algorithm(algo)
    p, c = prep.params, prep.config
    refused = budget_refusal(algo, c.epsilon)
    if refused:
        raise ValueError(f"{refused}; run it with epsilon inf")
    privacy = privacy_of(algo, c, p)
    private = math.isfinite(c.epsilon)  # exact counts are released by no mechanism: the report keeps none
    report: dict[str, Any] = {
        "algo": algo,
        "dataset": prep.train.name,
        "test_dataset": prep.test.name,
        "parties": c.parties,
        "theta": prep.skew()[0],
        "feature_skew": prep.skew()[1],
        "trees": p.trees,
        "depth": p.depth,
        "bins": p.bins,
        "seed": c.seed,
        "params": {
            **params_dict(p),
            "binning": c.binning,
            "binning_epsilon": c.binning_epsilon,
            "binning_resolution": c.binning_resolution,
            "psd_depth": c.psd_depth,
            "psd_max_rows": c.psd_max_rows,
            "psd_epsilon": c.psd_epsilon,
            "endorse": c.endorse,
            "refusal_rate": c.refusal_rate,
            "overlap_threshold": c.overlap_threshold,
        },
        "privacy": {**privacy.report(), "noise": c.noise_source, "schema": prep.schema_source},
        "train_rows": None if private else prep.train.n_rows,
        "test_rows": prep.test.n_rows,
        "features": prep.train.n_features,
    }
    job = Job(
        prep,
        algo,
        report,
        privacy,
        standalone_errors(prep, threads) if with_standalone else None,
        progress,
        threads,
        keep_levels,
        attacks,
        observer,
    )
    trained = spec.train(job)
    standalone = job.standalone
    report["train_seconds"] = trained.seconds
    report["prep_seconds"] = prep.prep_seconds
    report["per_party"] = [
        {
            "party": i,
            "rows": None if private else len(idx),
            "positives": int(np.sum(prep.train.y[idx] > 0.5)) if p.objective == "binary" and not private else None,
            **({f"standalone_{k}": v for k, v in standalone[i].items()} if standalone else {}),
        }
        for i, idx in enumerate(prep.parts)
    ]
    return report, trained.model, trained.result
