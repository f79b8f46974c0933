"""The GBDT parameters a run trains with (``TrainParams``): the simulator, the party nodes and every baseline read them.

Why here, in the specification and not in the simulator: a party node and the baselines need the parameters of a
task but none of the simulator, and a party's parameters are a task's (``TaskParameters``, what the chain records)
plus its own refit degree. Defaults and ranges are the table's (``ledger.spec.parameters``), so a run that sets
nothing trains what a task created with no parameters trains.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence, Sized
from dataclasses import dataclass
from typing import Any

from fgbdt_chain.ledger.spec import modes
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.edges import histogram_slots
from fgbdt_chain.ledger.spec.parameters import check, default
from fgbdt_chain.ledger.spec.task_params import TaskParameters

_CHECKED = (
    ("trees", "trees"),
    ("depth", "depth"),
    ("bins", "bins"),
    ("learning_rate", "learning_rate"),
    ("lam", "lam"),
    ("min_rows", "min_rows"),
    ("delta", "refit_delta"),
    ("alpha", "alpha"),
    ("hessian", "hessian"),
    ("objective", "objective"),
    ("tie_break", "tie_break"),
    ("voted_trees", "voted_trees"),
    ("contribution", "contribution"),
)
"""Each ``TrainParams`` field and the parameter of the table whose range it keeps (``delta`` is ``refit_delta``)."""


@dataclass(frozen=True)
class TrainParams:
    """GBDT and protocol parameters, defaults and ranges from ``ledger.spec.parameters`` (100 trees of depth 6).
    Gains and leaf values use the hessian sums, as LightGBM does (``hessian="count"``: the row counts, as the paper's
    formulas); ``depth`` counts split levels, as LightGBM's ``max_depth``."""

    trees: int = default("trees")
    depth: int = default("depth")
    bins: int = default("bins")
    learning_rate: float = default("learning_rate")
    lam: float = default("lam")
    min_rows: int = default("min_rows")
    delta: float = default("refit_delta")
    """The refit degree of the party's distribution weights (the paper's equation 3), each party's own choice."""
    alpha: float = default("alpha")
    hessian: modes.HessianModeName = default("hessian")  # noqa: RUF009 (a str)
    objective: modes.ObjectiveName = default("objective")  # noqa: RUF009 (a str)
    tie_break: modes.TieRuleName = default("tie_break")  # noqa: RUF009 (a str)
    voted_trees: int = default("voted_trees")
    """Trees whose candidates are voted (``fvtree``, ``pvtree``); later trees draw them
    (``ledger.spec.parameters.DEFAULT_VOTED_TREES``)."""
    contribution: modes.ContributionName = default("contribution")  # noqa: RUF009 (a str)
    """How contributions are measured (``ledger.spec.loo`` for ``loo``): simulated only, a task on chain computes
    split Shapley values."""
    label_scale: float = 1.0
    """The power of two every party divides its labels by before training (``ledger.spec.task_params.label_scale`` of
    the task's label range; ``prepare`` and ``of_task`` set it): the trees' leaves are in labels / label_scale, and the
    model multiplies its raw score back."""

    def __post_init__(self) -> None:
        for name, entry in _CHECKED:
            check(entry, getattr(self, name), name)
        if not (self.label_scale > 0 and math.frexp(self.label_scale)[0] == 0.5):
            raise ValueError(f"label_scale must be a positive power of two, got {self.label_scale}")

    @property
    def nbins(self) -> int:
        """Histogram slots per feature: the value bins plus the missing-value slot 0."""
        return self.bins + 1

    def fitted(self, edges: Sequence[Sized]) -> TrainParams:
        """These parameters with histograms as wide as the common ``edges`` need
        (``ledger.spec.edges.histogram_slots``):
        what training on chain and in simulation uses once the edges are fixed. The requested ``bins`` still bound
        the edges (their sketches and the model's format); only the histogram width changes, and with it no split,
        gain or Shapley value, since the slots dropped hold no row on any data."""
        slots = histogram_slots(edges)
        if slots > self.nbins:
            raise ValueError(f"edges with {slots - 2} cut points on a feature do not fit {self.bins} bins")
        return dataclasses.replace(self, bins=slots - 1)

    @classmethod
    def of_task(cls, task: TaskParameters, delta: float = default("refit_delta")) -> TrainParams:
        """The GBDT parameters of an on-chain task (``delta``, the refit degree, is each party's own choice)."""
        return cls(
            trees=task.trees,
            depth=task.depth,
            bins=task.bins,
            learning_rate=task.learning_rate,
            lam=task.lam,
            min_rows=task.min_rows,
            delta=delta,
            alpha=task.alpha,
            hessian=task.hessian,
            objective=task.objective,
            tie_break=task.tie_break,
            voted_trees=task.voted_trees,
            label_scale=task.label_scale,
        )

    def task(self, **protocol: Any) -> TaskParameters:
        """These GBDT parameters as a task's, with the protocol's own (quorum, parties, deadlines, endorsement)."""
        return TaskParameters(
            trees=self.trees,
            depth=self.depth,
            bins=self.bins,
            hessian=self.hessian,
            tie_break=self.tie_break,
            voted_trees=self.voted_trees,
            objective=self.objective,
            lam=self.lam,
            learning_rate=self.learning_rate,
            min_rows=self.min_rows,
            alpha=self.alpha,
            **protocol,
        )

    def contract_params(self) -> ref.Params:
        """The integer parameters the contract computes with."""
        return ref.Params(
            lam=ref.to_fixed(self.lam),
            learning_rate=ref.to_fixed(self.learning_rate),
            min_rows=self.min_rows,
            alpha=ref.to_fixed(self.alpha),
            hessian_mode=modes.HESSIAN_MODES[self.hessian],
        )


def task_voted_trees(algo: str, params: TrainParams) -> int:
    """The task's ``votedTrees`` for ``algo`` on chain (``ledger.spec.modes.ON_CHAIN_ALGORITHMS``): ``drawn`` votes on
    no tree."""
    if algo not in modes.ON_CHAIN_ALGORITHMS:
        raise ValueError(f"{algo} does not run on chain; choose one of {', '.join(modes.ON_CHAIN_ALGORITHMS)}")
    return 0 if algo == "drawn" else min(params.voted_trees, ref.ALL_TREES_VOTED)
