"""What every seed system (the published federated GBDT systems FV-tree is compared with: SimFL, TFL, FederBoost,
FedXGBllr) hands the harness, so that ``node.sim.experiment.run`` evaluates them on the same partition, test rows and
seed as FV-tree and reports their communication next to its own.

Why a separate result type: these systems do not all produce trees on the federation's bins (FedXGBllr's model is
LightGBM trees on raw values followed by a small neural aggregator), so the harness asks them for test predictions,
not for a ``Model``; where a system does produce heap trees on the federation's bins it also returns them, and the
harness saves and exports them like FV-tree's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.model.trees import Tree

SEED_ALGORITHMS = ("simfl", "tfl", "federboost", "fedxgbllr")
"""The seed systems' ``--algo`` names, in the order of the papers' comparison tables."""


@dataclass(frozen=True)
class SeedInputs:
    """One run's federation as a seed system sees it: each party's raw rows (NaN missing) and bin slots, the
    labels, the common bin edges (``node.privacy.binning``) and the test rows."""

    party_X: Sequence[np.ndarray]
    party_slots: Sequence[np.ndarray]
    party_y: Sequence[np.ndarray]
    edges: Sequence[np.ndarray]
    test_X: np.ndarray
    test_slots: np.ndarray
    params: TrainParams
    seed: int
    threads: int = 1


@dataclass(frozen=True)
class SeedResult:
    """A seed system's run: test predictions as ``node.sim.experiment.evaluate`` takes them (probabilities for
    ``binary``, values for ``regression``), the bytes each party sent per tree counted by the system's own formula
    (``comm_formula`` says which), the heap trees on the federation's bins when the system builds such trees, and
    what else its paper reports (``details``, JSON-serialisable)."""

    test_pred: np.ndarray
    comm_bytes_per_party_per_tree: list[float]
    comm_formula: str
    trees: list[Tree] | None = None
    details: dict[str, Any] = field(default_factory=dict)


_TRAINERS = {
    "simfl": ("simfl", "train_simfl"),
    "tfl": ("tfl", "train_tfl"),
    "federboost": ("federboost", "train_federboost"),
    "fedxgbllr": ("fedxgbllr", "train_fedxgbllr"),
}
"""Each seed system's module and trainer, imported when first asked for: a run of FV-tree loads none of them."""

TREE_MODELS = ("simfl", "tfl")
"""The seed systems whose trees are on the federation's bins, so that the harness can save them as a ``Model``;
FederBoost bins by its own secure quantiles and FedXGBllr adds a neural aggregator."""


def train_seed(algo: str, inputs: SeedInputs) -> SeedResult:
    """Train the seed system ``algo`` on ``inputs``."""
    if algo not in _TRAINERS:
        raise ValueError(f"unknown seed system {algo!r}; choose one of {', '.join(SEED_ALGORITHMS)}")
    module, name = _TRAINERS[algo]
    trainer: Callable[[SeedInputs], SeedResult] = getattr(
        importlib.import_module(f"fgbdt_chain.node.baselines.{module}"), name
    )
    return trainer(inputs)


def refusal(algo: str, parties: int, features: int, trees: int) -> str | None:
    """Why ``algo`` cannot run on this shape of task, before any work (None when it can): SimFL's LSH needs
    ``L = d - 1 >= 1`` hash functions, FedXGBllr at least one tree per client."""
    if algo == "simfl" and features < 2:
        return f"simfl hashes with d - 1 functions and needs at least 2 features; the data has {features}"
    if algo == "fedxgbllr" and trees < parties:
        return f"fedxgbllr shares the {trees} trees among {parties} clients and needs at least one each"
    return None
