"""Task parameters by name: the one mapping between what people set and the contract's ``Config``.

Why one module: the command line, the REST API, the requester, the party nodes and the audit all turn named,
real-valued parameters into the contract's integers (fixed point, mode codes) or back. Done in several places, they
drifted (the API truncated reals the CLI rounded, so "chain equals simulate" failed for API-created tasks). Here
every field is converted once: reals by ``reference.to_fixed`` / ``from_fixed``, modes by the name tables of
``ledger.spec.reference``.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED, MAX_PARTIES, ONE, Params


@dataclass(frozen=True)
class TaskConfig:
    """``FGBDTChain.Config``, field for field and in order (real values in fixed point)."""

    trees: int = 1
    depth: int = 3
    bins: int = 16
    hessian_mode: int = 0
    tie_break: int = 1
    voted_trees: int = ALL_TREES_VOTED
    objective: int = 0
    endorse_rule: int = 0
    quorum_num: int = 2
    quorum_den: int = 3
    min_parties: int = 2
    max_parties: int = MAX_PARTIES
    join_blocks: int = 1000
    step_blocks: int = 50
    lam: int = ONE
    learning_rate: int = ONE // 10
    min_rows: int = 1
    alpha: int = ONE // 2
    refusal_rate: int = ONE // 10**9
    overlap_threshold: int = ONE // 2
    epsilon: int = 0
    """Every party's differential-privacy budget (fixed point); 0: no privacy noise."""
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


DEFAULT_REFUSAL_RATE = 1e-9
"""The verifiers' default false-refusal probability per check (``node.protocol.verify``). A task of 500 trees x 8
parties makes 4,000 root submissions, each checked by 7 verifiers: at most 2.8e-5 expected honest refusals of one check,
and a submission is refused only when more than a third of its verifiers refuse it."""
DEFAULT_VOTED_TREES = 50
"""Trees whose candidates the parties vote for; later trees draw them from a public seed (``Config.votedTrees``).

Why a switch: votes learn fast (20 trees of depth 5 on a9a: 0.157 test error voted, 0.228 drawn) but each one pulls
the model towards the voter's own rows, so an honest party's gradient sums drift away from what its verifiers expect
as voted trees accumulate, until long tasks refuse honest parties (HIGGS, M = 2: over the test's limit near tree 80,
``bench.endorse_drift``). Drawn trees add no pull, so the drift stops where the votes stop. Why 50: over 50 trees,
votes on every tree passed every configuration of the endorsement figures (7 datasets, M = 2, 4, 8, theta 0.5 and
0.8, 5 seeds: no honest submission refused, and no stretch paid on the classification sets), while drawn trees let
a small stretch pay there (README, "Endorsement"); so a task of up to 50 trees runs the paper's protocol unchanged,
and a longer one keeps the statistics where 50 voted trees left them (HIGGS: 0.66 of the limit at most, over 500
trees no honest refusal). ``ref.ALL_TREES_VOTED`` is the paper."""
DEFAULT_DELTA = 1e-5
"""A private task's default delta: below one over the rows of any party this system is meant for, the usual rule."""
DEFAULT_OVERLAP_THRESHOLD = 0.3
"""With the paper's rule (``endorse = overlap``): verifiers sign a level whose equation-11 overlap is below it."""


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
    """Every field of a task's ``Config`` by name; reals as floats, modes by name."""

    trees: int = 1
    depth: int = 3
    bins: int = 16
    hessian: ref.HessianModeName = "hessian"
    tie_break: ref.TieRuleName = "hashed"
    voted_trees: int = DEFAULT_VOTED_TREES
    """Trees whose candidates are voted; later trees draw them from a public seed (no vote round)."""
    objective: ref.ObjectiveName = "binary"
    endorse: ref.EndorseRuleName = "statistical"
    quorum_num: int = 2
    quorum_den: int = 3
    min_parties: int = 2
    max_parties: int = ref.MAX_PARTIES
    join_blocks: int = 1000
    step_blocks: int = 50
    lam: float = 1.0
    learning_rate: float = 0.1
    min_rows: int = 1
    alpha: float = 0.5
    refusal_rate: float = DEFAULT_REFUSAL_RATE
    overlap_threshold: float = DEFAULT_OVERLAP_THRESHOLD
    epsilon: float = math.inf
    """Every party's differential-privacy budget for all it releases (``node.privacy.accountant``); inf: no privacy
    noise."""
    delta: float = DEFAULT_DELTA
    label_min: float | None = None
    """The label's smallest value in the task's schema, as the features' ranges are given (``createTask``): every
    party's PSD splits the label over [label_min, label_max], so all of them must use the same range. A binary
    task's is [0, 1] (None means that); a regression task must state it."""
    label_max: float | None = None

    def label_range(self) -> tuple[float, float]:
        """``[label_min, label_max]`` by the module's ``label_range``."""
        return label_range(self.objective, self.label_min, self.label_max)

    @property
    def label_scale(self) -> float:
        """What the task's labels are divided by before training (the module's ``label_scale``)."""
        return label_scale(*self.label_range())

    def config(self) -> TaskConfig:
        """The contract's ``Config`` (integers, fixed point where real)."""
        label_min, label_max = self.label_range()
        return TaskConfig(
            trees=self.trees,
            depth=self.depth,
            bins=self.bins,
            hessian_mode=ref.HESSIAN_MODES[self.hessian],
            tie_break=ref.TIE_RULES[self.tie_break],
            voted_trees=min(self.voted_trees, ref.ALL_TREES_VOTED),
            objective=ref.OBJECTIVES[self.objective],
            endorse_rule=ref.ENDORSE_RULES[self.endorse],
            quorum_num=self.quorum_num,
            quorum_den=self.quorum_den,
            min_parties=self.min_parties,
            max_parties=self.max_parties,
            join_blocks=self.join_blocks,
            step_blocks=self.step_blocks,
            lam=ref.to_fixed(self.lam),
            learning_rate=ref.to_fixed(self.learning_rate),
            min_rows=self.min_rows,
            alpha=ref.to_fixed(self.alpha),
            refusal_rate=ref.to_fixed(self.refusal_rate),
            overlap_threshold=ref.to_fixed(self.overlap_threshold),
            epsilon=ref.to_fixed(self.epsilon) if self.private else 0,
            delta=ref.to_fixed(self.delta) if self.private else 0,
            label_min=ref.to_fixed(label_min),
            label_max=ref.to_fixed(label_max),
        )

    @property
    def private(self) -> bool:
        """Whether the parties add differential-privacy noise (a finite ``epsilon``)."""
        return math.isfinite(self.epsilon)

    @classmethod
    def of(cls, cfg: TaskConfig) -> TaskParameters:
        """The named parameters of a contract ``Config``."""
        binary = cfg.objective == ref.OBJECTIVES["binary"]
        return cls(
            trees=cfg.trees,
            depth=cfg.depth,
            bins=cfg.bins,
            hessian=ref.HESSIAN_MODE_NAMES[cfg.hessian_mode],
            tie_break=ref.TIE_RULE_NAMES[cfg.tie_break],
            voted_trees=cfg.voted_trees,
            objective=ref.OBJECTIVE_NAMES[cfg.objective],
            endorse=ref.ENDORSE_RULE_NAMES[cfg.endorse_rule],
            quorum_num=cfg.quorum_num,
            quorum_den=cfg.quorum_den,
            min_parties=cfg.min_parties,
            max_parties=cfg.max_parties,
            join_blocks=cfg.join_blocks,
            step_blocks=cfg.step_blocks,
            lam=ref.from_fixed(cfg.lam),
            learning_rate=ref.from_fixed(cfg.learning_rate),
            min_rows=cfg.min_rows,
            alpha=ref.from_fixed(cfg.alpha),
            refusal_rate=ref.from_fixed(cfg.refusal_rate),
            overlap_threshold=ref.from_fixed(cfg.overlap_threshold),
            epsilon=ref.from_fixed(cfg.epsilon) if cfg.epsilon > 0 else math.inf,
            delta=ref.from_fixed(cfg.delta) if cfg.epsilon > 0 else DEFAULT_DELTA,
            # a binary task's range is implied (None), as it was given
            label_min=None if binary else ref.from_fixed(cfg.label_min),
            label_max=None if binary else ref.from_fixed(cfg.label_max),
        )
