"""Task parameters by name: the one mapping between what people set and the contract's ``Config``.

Why one module: the command line, the REST API, the requester, the party nodes and the audit all turn named,
real-valued parameters into the contract's integers (fixed point, mode codes) or back. Done in several places, they
can disagree (a real truncated in one place and rounded in another breaks "chain equals simulate"). Here
every field is converted once, by its entry in ``ledger.spec.parameters`` (the one table of every parameter's range,
default and ``Config`` field): reals in fixed point, modes by the name tables of ``ledger.spec.modes``.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass
from typing import Any

from fgbdt_chain.ledger.spec import modes
from fgbdt_chain.ledger.spec.fixed_point import ONE, from_fixed, to_fixed
from fgbdt_chain.ledger.spec.parameters import DEFAULT_DELTA as DEFAULT_DELTA
from fgbdt_chain.ledger.spec.parameters import DEFAULT_OVERLAP_THRESHOLD as DEFAULT_OVERLAP_THRESHOLD
from fgbdt_chain.ledger.spec.parameters import DEFAULT_REFUSAL_RATE as DEFAULT_REFUSAL_RATE
from fgbdt_chain.ledger.spec.parameters import DEFAULT_VOTED_TREES as DEFAULT_VOTED_TREES
from fgbdt_chain.ledger.spec.parameters import PARAMETERS, default, parameter
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED, Params
from fgbdt_chain.ledger.spec.tx_size import check_resolution_fits


def _encoded(name: str) -> int:
    """The ``Config`` field of ``name``'s default."""
    return parameter(name).encode(default(name))


@dataclass(frozen=True)
class TaskConfig:
    """``FGBDTChain.Config``, field for field and in order (real values in fixed point); the defaults are
    ``TaskParameters()``'s, encoded (``ledger.spec.parameters``)."""

    trees: int = _encoded("trees")
    depth: int = _encoded("depth")
    bins: int = _encoded("bins")
    hessian_mode: int = _encoded("hessian")
    tie_break: int = _encoded("tie_break")
    voted_trees: int = _encoded("voted_trees")
    objective: int = _encoded("objective")
    endorse_rule: int = _encoded("endorse")
    quorum_num: int = _encoded("quorum_num")
    quorum_den: int = _encoded("quorum_den")
    min_parties: int = _encoded("min_parties")
    max_parties: int = _encoded("max_parties")
    join_blocks: int = _encoded("join_blocks")
    step_blocks: int = _encoded("step_blocks")
    lam: int = _encoded("lam")
    learning_rate: int = _encoded("learning_rate")
    min_rows: int = _encoded("min_rows")
    alpha: int = _encoded("alpha")
    refusal_rate: int = _encoded("refusal_rate")
    overlap_threshold: int = _encoded("overlap_threshold")
    epsilon: int = 0
    """Every party's differential-privacy budget (fixed point); 0: no privacy noise (the default epsilon, inf)."""
    delta: int = 0
    label_min: int = 0
    """The label's range in the task's schema (fixed point): every party's PSD splits the label over it. A binary
    task's is [0, 1], which the contract requires."""
    label_max: int = ONE

    def as_tuple(self) -> tuple[int, ...]:
        """The ABI tuple."""
        return astuple(self)

    def params(self) -> Params:
        """The integer parameters the contract resolves nodes with, as ``reference.resolve_node`` takes them."""
        return Params(self.lam, self.learning_rate, self.min_rows, self.alpha, self.hessian_mode)


def label_range(objective: str, label_min: float | None, label_max: float | None) -> tuple[float, float]:
    """A task's label range: [0, 1] for a binary task (None for both means that); for regression, as given, with a
    clear error if it is missing or not a range. Every party's PSD splits the label over it (``Config.labelMin``)."""
    given = (label_min, label_max)
    if objective == "binary":
        if given not in ((None, None), (0.0, 1.0)):
            raise ValueError(f"a binary task's labels are 0 and 1; label_min and label_max {given} say otherwise")
        return 0.0, 1.0
    if label_min is None or label_max is None:
        raise ValueError(
            "a regression task needs its label's range (label_min, label_max): every party's PSD splits the label "
            "over it"
        )
    if not (math.isfinite(label_min) and math.isfinite(label_max) and label_min <= label_max):
        raise ValueError(f"label_min and label_max must be finite with label_min <= label_max, got {given}")
    return label_min, label_max


def label_scale(label_min: float, label_max: float) -> float:
    """The power of two a task's labels are divided by before training: the smallest ``2^e`` at least the label
    range's largest magnitude (1 for a binary task), so that every trained label lies in [-1, 1].

    Why: histograms are exact sums of gradients in 18-decimal fixed point, whose per-row limbs carry magnitudes up
    to about 1.2e6; a squared-error gradient is the label's distance from the score, so house prices in dollars
    (labels of millions) overflowed mid-training. Dividing by a power of two is exact in floats, and it scales every
    gradient of a node alike, so the splits are the same (each gain scales by ``1 / scale^2``) and the leaf values
    scale by ``1 / scale``: the model multiplies its raw score back (``node.model.trees.Model.label_scale``). The scale
    comes from the task's public label range, so every party and the model read the same one from the chain."""
    largest = max(abs(label_min), abs(label_max))
    if not math.isfinite(largest):
        raise ValueError(f"the label range [{label_min}, {label_max}] must be finite")
    if largest == 0:
        return 1.0
    mantissa, exponent = math.frexp(largest)  # largest = mantissa * 2^exponent, mantissa in [0.5, 1)
    return math.ldexp(1.0, exponent - 1 if mantissa == 0.5 else exponent)


@dataclass(frozen=True)
class TaskParameters:
    """Every field of a task's ``Config`` by name; reals as floats, modes by name. Defaults, ranges and meanings:
    ``ledger.spec.parameters``."""

    trees: int = default("trees")
    depth: int = default("depth")
    bins: int = default("bins")
    hessian: modes.HessianModeName = default("hessian")  # noqa: RUF009 (a str)
    tie_break: modes.TieRuleName = default("tie_break")  # noqa: RUF009 (a str)
    voted_trees: int = default("voted_trees")
    """Trees whose candidates are voted; later trees draw them from a public seed (no vote round)."""
    objective: modes.ObjectiveName = default("objective")  # noqa: RUF009 (a str)
    endorse: modes.EndorseRuleName = default("endorse")  # noqa: RUF009 (a str)
    quorum_num: int = default("quorum_num")
    quorum_den: int = default("quorum_den")
    min_parties: int = default("min_parties")
    max_parties: int = default("max_parties")
    join_blocks: int = default("join_blocks")
    step_blocks: int = default("step_blocks")
    lam: float = default("lam")
    learning_rate: float = default("learning_rate")
    min_rows: int = default("min_rows")
    alpha: float = default("alpha")
    refusal_rate: float = default("refusal_rate")
    overlap_threshold: float = default("overlap_threshold")
    epsilon: float = default("epsilon")
    """Every party's differential-privacy budget for all it releases (``node.privacy.accountant``); inf: no privacy
    noise."""
    delta: float = default("delta")
    label_min: float | None = default("label_min")
    """The label's smallest value in the task's schema, as the features' ranges are given (``createTask``): every
    party's PSD splits the label over [label_min, label_max], so all of them must use the same range. A binary
    task's is [0, 1] (None means that); a regression task must state it."""
    label_max: float | None = default("label_max")

    def label_range(self) -> tuple[float, float]:
        """``[label_min, label_max]`` by the module's ``label_range``."""
        return label_range(self.objective, self.label_min, self.label_max)

    @property
    def label_scale(self) -> float:
        """What the task's labels are divided by before training (the module's ``label_scale``)."""
        return label_scale(*self.label_range())

    def config(self) -> TaskConfig:
        """The contract's ``Config`` (integers, fixed point where real), each field by its parameter's encoding;
        the privacy budget is 0 without privacy, and the label range a binary task's [0, 1] when implied. Refuses a
        task one of whose node resolutions could not be sent in one transaction (``tx_size.check_resolution_fits``):
        every surface that creates a task comes through here."""
        check_resolution_fits(self.max_parties, self.bins, self.depth)
        fields: dict[str, Any] = {
            p.config: p.encode(getattr(self, p.name)) for p in PARAMETERS if p.config and p.name not in _DERIVED
        }
        label_min, label_max = self.label_range()
        return TaskConfig(
            **fields,
            voted_trees=min(self.voted_trees, ALL_TREES_VOTED),
            epsilon=to_fixed(self.epsilon) if self.private else 0,
            delta=to_fixed(self.delta) if self.private else 0,
            label_min=to_fixed(label_min),
            label_max=to_fixed(label_max),
        )

    @property
    def private(self) -> bool:
        """Whether the parties add differential-privacy noise (a finite ``epsilon``)."""
        return math.isfinite(self.epsilon)

    @classmethod
    def of(cls, cfg: TaskConfig) -> TaskParameters:
        """The named parameters of a contract ``Config`` (the inverse of :meth:`config`)."""
        values: dict[str, Any] = {
            p.name: p.decode(getattr(cfg, p.config)) for p in PARAMETERS if p.config and p.name not in _DERIVED
        }
        private = cfg.epsilon > 0
        binary = cfg.objective == modes.OBJECTIVE_BINARY
        return cls(
            **values,
            voted_trees=cfg.voted_trees,
            epsilon=from_fixed(cfg.epsilon) if private else math.inf,
            delta=from_fixed(cfg.delta) if private else DEFAULT_DELTA,
            # a binary task's range is implied (None), as it was given
            label_min=None if binary else from_fixed(cfg.label_min),
            label_max=None if binary else from_fixed(cfg.label_max),
        )


_DERIVED = ("voted_trees", "epsilon", "delta", "label_min", "label_max")
"""The parameters whose ``Config`` field is not their value's plain encoding: ``votedTrees`` at most
``ALL_TREES_VOTED``, a privacy budget of 0 without privacy, a binary task's implied label range."""
