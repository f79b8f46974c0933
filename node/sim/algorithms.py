"""The simulator's algorithms by name: each one's trainer, what it needs and reports, and its default shape.

Why a registry: ``node.sim.experiment.run`` trains them, ``fgbdt simulate`` offers them (``--algo``, and its checks
before any work: the party limit of split Shapley values, a privacy budget, ``--model``, ``--trees``) and the command
reference lists them (generated from that parser); each reads the algorithm's :class:`Algorithm` instead of testing
names, so adding an algorithm is one :func:`register` call here.

Trainers are named (module and function), not imported: a run imports the module of its own trainer only, so a run
of FV-tree loads neither LightGBM (``node.sim.lightgbm_trainers``) nor any seed system
(``node.baselines.seed_systems`` imports each on first use), and this module loads no training code at all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fgbdt_chain.node.baselines.seed_systems import TREE_MODELS
from fgbdt_chain.node.sim.random_split import DEFAULT_DEPTH as RANDOM_SPLIT_DEPTH
from fgbdt_chain.node.sim.random_split import DEFAULT_TREES as RANDOM_SPLIT_TREES

if TYPE_CHECKING:
    from fgbdt_chain.node.attacks.histograms import Attack
    from fgbdt_chain.node.model.trees import Model
    from fgbdt_chain.node.privacy.accountant import LeafPlan, PrivacyPlan
    from fgbdt_chain.node.sim.experiment import Prepared
    from fgbdt_chain.node.sim.fvtree import LevelView, TrainResult

PROTOCOL = "protocol"
"""Spends FV-tree's privacy plan (``node.privacy.accountant.plan``): votes and histograms at every level."""
LEAVES = "leaves"
"""Spends a leaf plan (``node.privacy.accountant.leaf_plan``): each tree's leaf sums only."""
NO_NOISE = "none"
"""Adds no noise and reports no privacy (LightGBM on pooled rows: a reference, not a federation)."""
REFUSED = "refused"
"""Shares without noise, so a task with a privacy budget is refused."""

_SIM = "fgbdt_chain.node.sim.trainers"
_LIGHTGBM = "fgbdt_chain.node.sim.lightgbm_trainers"


@dataclass
class Job:
    """One call of ``run``: the prepared federation, the algorithm, the report so far (the trainer adds its figures),
    the privacy its releases spend, and the caller's options."""

    prep: Prepared
    algo: str
    report: dict[str, Any]
    privacy: PrivacyPlan | LeafPlan
    standalone: list[dict[str, float]] | None = None
    """LightGBM on each party's rows alone, when asked for (the ``standalone`` algorithm computes it if not)."""
    progress: Callable[[int], None] | None = None
    threads: int = 1
    """LightGBM's threads (the baselines); the simulated parties use every core."""
    keep_levels: bool = False
    attacks: dict[int, Attack] | None = None
    observer: Callable[[LevelView], None] | None = None


@dataclass(frozen=True)
class Trained:
    """What a trainer hands back: its training seconds, the model to save (None: none on the task's bins) and the
    protocol's record (federated algorithms)."""

    seconds: float
    model: Model | None = None
    result: TrainResult | None = None


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of the simulator."""

    name: str
    summary: str
    """One line for ``--algo``'s help and the command reference (no parentheses: the help puts it in them)."""
    trainer: tuple[str, str]
    """Module and function: ``function(Job) -> Trained``, imported when the algorithm first runs."""
    privacy: str = NO_NOISE
    """What its releases spend of a privacy budget: :data:`PROTOCOL`, :data:`LEAVES`, :data:`NO_NOISE` or
    :data:`REFUSED`."""
    contributions: bool = False
    """Reports split Shapley contributions: the contract's party limit and the ``M 2^M`` cost per split apply."""
    psd_weights: bool = False
    """Its parties weight their rows by the PSDs (FV-tree's refit), so they publish PSDs even without verifiers."""
    draws_edges: bool = False
    """Draws split thresholds among the bin edges: a data set without an edge gives it nothing to draw."""
    no_model: str | None = None
    """Why it builds no model on the task's bins for ``--model``; None when it does."""
    shape: tuple[int, int] | None = None
    """Its default (trees, depth); None: ``TrainParams``'s."""
    own_shape: str | None = None
    """The shape it always trains (it takes no ``--trees``/``--depth``); None when it takes the task's."""
    summary_label: str | None = None
    """Trained beside every run for ``simulate``'s summary table (unless ``--no-baselines``), named so there."""

    def train(self, job: Job) -> Trained:
        """Run the trainer (importing its module on first use)."""
        module, function = self.trainer
        trainer: Callable[[Job], Trained] = getattr(importlib.import_module(module), function)
        return trainer(job)


REGISTRY: dict[str, Algorithm] = {}
"""Every algorithm by name, in the order ``--algo`` lists them."""


def register(algorithm: Algorithm) -> Algorithm:
    """Add an algorithm (a name is registered once)."""
    if algorithm.name in REGISTRY:
        raise ValueError(f"algorithm {algorithm.name!r} is already registered")
    REGISTRY[algorithm.name] = algorithm
    return algorithm


def algorithm(name: str) -> Algorithm:
    """The registered algorithm ``name``; a ValueError naming the choices otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {', '.join(REGISTRY)}") from None


def budget_refusal(name: str, epsilon: float) -> str | None:
    """Why ``name`` cannot run under the privacy budget ``epsilon`` (None when it can: no budget, or it adds noise)."""
    if algorithm(name).privacy == REFUSED and epsilon != float("inf"):
        return f"{name} has no differential privacy for what it shares"
    return None


def _federated(name: str, summary: str, **extra: Any) -> Algorithm:
    """An algorithm of the protocol (``node.sim.fvtree.Federation``): contributions, endorsement, FV-tree's plan."""
    return Algorithm(name, summary, (_SIM, "federated"), privacy=PROTOCOL, contributions=True, **extra)


def _seed(name: str, summary: str) -> Algorithm:
    """A seed system (``node.baselines.seed_systems``) on the run's partition, bins and test rows."""
    no_model = None if name in TREE_MODELS else f"--model needs trees on the task's bins; {name} does not build them"
    return Algorithm(name, summary, (_SIM, "seed_system"), privacy=REFUSED, no_model=no_model)


def _lightgbm(name: str, summary: str, function: str, **extra: Any) -> Algorithm:
    """A LightGBM baseline (``node.baselines.centralized``): boosters, not trees on the task's bins."""
    no_model = f"--model needs a federated algorithm; {name} trains LightGBM boosters"
    return Algorithm(name, summary, (_LIGHTGBM, function), no_model=no_model, **extra)


register(
    _federated(
        "fvtree",
        "FV-tree: votes on refitted gradients for the first --voted-trees trees, then candidates drawn from a "
        "public seed",
        psd_weights=True,
    )
)
register(_federated("pvtree", "votes on raw gradients, no refit, with the same switch to drawn candidates"))
register(
    _federated(
        "allfeatures",
        "no voting: the candidates are the two best features of the aggregated histograms of all features",
    )
)
register(_federated("drawn", "no voting: each node's two candidates drawn from a public seed"))
register(
    Algorithm(
        "randomsplit",
        "split features and thresholds drawn from a public seed, only each tree's leaf sums released: the private "
        "model, no contributions",
        (_SIM, "random_split"),
        privacy=LEAVES,
        draws_edges=True,
        shape=(RANDOM_SPLIT_TREES, RANDOM_SPLIT_DEPTH),
    )
)
register(_seed("simfl", "SimFL, Li, Wen and He, AAAI 2020: similarity-weighted gradients over LSH"))
register(_seed("tfl", "TFL, Zhao et al., INFOCOM 2018, without its noise: each party boosts on its own rows in turn"))
register(_seed("federboost", "FederBoost, Tian et al.: secure-aggregated quantile buckets and histograms"))
register(_seed("fedxgbllr", "FedXGBllr, Ma et al.: the clients' trees weighted by learnable learning rates"))
register(_lightgbm("standalone", "LightGBM on each party's rows alone, on the common test set", "standalone"))
register(
    _lightgbm(
        "centralized",
        "LightGBM on all training rows on the task's bins",
        "centralized",
        summary_label="centralized (task's bins)",
    )
)
register(
    _lightgbm(
        "lightgbm",
        "LightGBM on all training rows, binning the raw values itself",
        "raw_lightgbm",
        summary_label="lightgbm (own bins)",
    )
)
register(
    _lightgbm(
        "lightgbm-defaults",
        "LightGBM with all its defaults",
        "raw_lightgbm",
        own_shape="LightGBM's own 100 rounds of 31 leaves",
        summary_label="lightgbm (its defaults)",
    )
)

ALGORITHMS: tuple[str, ...] = tuple(REGISTRY)
"""Every algorithm's name, in registration order."""
SUMMARY_BASELINES: tuple[str, ...] = tuple(name for name, a in REGISTRY.items() if a.summary_label)
"""The baselines ``simulate`` trains beside any algorithm for its summary: all rows on the federation's bins (what
federating costs), LightGBM binning the raw values itself (what the private bins cost) and with all its defaults."""
