"""Every task parameter once: its type, range, default, unit and meaning, and the contract field it becomes.

Why one table: the command line (``fgbdt simulate``, ``fgbdt train``), the Python API (``fgbdt_chain.train`` and the
scikit-learn estimators), the REST API's request models, the party nodes and the contract's ``Config`` all take the
same parameters. Written out in each of them, their defaults and limits drifted apart (a task created through the REST
API without parameters trained one tree of depth 3 where ``simulate`` trained 100 of depth 6), so "the chain trains
what simulate trains" held only for parameters given explicitly. Each surface now reads its defaults, ranges, choices
and help from :data:`PARAMETERS`, and ``TaskParameters.config`` encodes them by the table's ``config`` field and
encoding; ``tests/ledger/spec/test_parameters.py`` checks every default through every surface.

The defaults are the ones that give the documented accuracy (docs: benchmarks page, "Default shape"): LightGBM's
capacity of 100 trees of depth 6 at learning rate 0.1, lambda 0.1 and 20 rows per leaf. The ranges are the contract's
(``FGBDTConfigLib.check``) where it checks one, narrowed where the parties can train less than it accepts (``bins``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fgbdt_chain.ledger.spec import modes
from fgbdt_chain.ledger.spec.fixed_point import from_fixed, to_fixed
from fgbdt_chain.ledger.spec.tx_size import largest_fitting

MAX_PARTIES: int = 64
"""Most parties a task can approve (the contract's ``MAX_PARTIES``; a test reads it from the deployed contract): a
party's bit fits the contract's 64-bit mask of the parties whose histograms are in. Split Shapley is exact up to
``shapley_estimate.EXACT_MAX_PARTIES`` parties (``M * 2^M`` per split) and estimated with a stated error bound above
(``ledger.spec.shapley_estimate``)."""

MAX_DEPTH: int = 8
"""The deepest tree a task may ask for: the contract's ``MAX_DEPTH`` (``FGBDTConfigLib.check`` reverts above it), the
binding limit. Why 8: the contract keeps a level's open nodes as one 256-bit mask indexed by heap id, and level
``d``'s nodes are ``2^d .. 2^(d+1) - 1``, so level 7, the last that splits in a tree of depth 8, is the deepest whose
nodes fit the mask. The simulator, the Python API and the model format refuse deeper trees too: a shape no task can
train would give a model and contributions no chain can reproduce (a one-feature random-split tree over 255 slots is
``ceil(log2(255)) = 8`` deep, within the limit)."""

DEFAULT_BINS: int = 16
"""Value bins per feature when nobody says (each histogram has one more slot, for missing values)."""

DEFAULT_MAX_PARTIES: int = largest_fitting(None, DEFAULT_BINS, MAX_DEPTH)
"""The most parties a task approves when nobody says: the largest federation whose widest node resolution at the
default bins and the deepest tree fits a transaction a geth network relays (``tx_size.check_resolution_fits``; 36
at 16 bins and depth 8), so that the defaults, with any depth, make a task every real network can train. A task of
up to :data:`MAX_PARTIES` parties asks for them with fewer bins (at most 8 bins at 64 parties and depth 8)."""

ALL_TREES_VOTED: int = 2**16 - 1
"""The largest ``votedTrees`` (uint16): every tree of any task votes, the paper's FV-tree. ``Config.votedTrees`` says
how each node's two candidates are chosen: in the trees before it by the parties' votes, in later trees drawn from a
public seed when each level opens (the top-2 of empty ballots under the hashed tie key: no vote round, no voting
contribution; ``node.sim.fvtree`` explains why)."""

UINT16_MAX: int = 2**16 - 1
"""The largest tree count and quorum term (``Config.trees``, ``quorumNum``, ``quorumDen`` are uint16)."""

PAPER_TREES, PAPER_DEPTH = 500, 8
"""The paper's settings (Gao et al., "Towards Fair and Decentralized Federated Learning System for Gradient Boosting
Decision Trees", 2022, section 6): what the paper's figures and the project's reproductions of them train."""

DEFAULT_TREES, DEFAULT_DEPTH = 100, 6
"""What a task trains when nobody says: LightGBM's default capacity (100 rounds at learning rate 0.1; depth 6 gives
at most 64 leaves where LightGBM grows 31 best-first), not the paper's 500 trees of depth 8. Why: measured on every
data set here, the paper's shape overfits wherever the rows are noisy: FV-tree at 500 x 8 ends 0.014-0.026 AUC below
LightGBM with its own defaults on HIGGS, SUSY, UCI credit, the stress set and the heavy-tailed credit-shaped set,
and at 100 x 6 within 0.0074 of it on all six classification sets (``bench.default_shape``, 3 seeds; the benchmarks
page)."""

DEFAULT_VOTED_TREES = 50
"""Trees whose candidates the parties vote for; later trees draw them from a public seed (``Config.votedTrees``).

Why a switch: votes learn fast (20 trees of depth 5 on a9a: 0.157 test error voted, 0.228 drawn) but each one pulls
the model towards the voter's own rows, so an honest party's gradient sums drift away from what its verifiers expect
as voted trees accumulate, until long tasks refuse honest parties (HIGGS, M = 2: over the test's limit near tree 80,
``bench.endorse_drift``). Drawn trees add no pull, so the drift stops where the votes stop. Why 50: over 50 trees,
votes on every tree passed every configuration of the endorsement figures (7 datasets, M = 2, 4, 8, theta 0.5 and
0.8, 5 seeds: no honest submission refused, and no stretch paid on the classification sets), while drawn trees let
a small stretch pay there (docs: design decisions, endorsement); so a task of up to 50 trees runs the paper's protocol
unchanged,
and a longer one keeps the statistics where 50 voted trees left them (HIGGS: 0.66 of the limit at most, over 500
trees no honest refusal). :data:`ALL_TREES_VOTED` is the paper."""

DEFAULT_REFUSAL_RATE = 1e-9
"""The verifiers' default false-refusal probability per check (``node.protocol.verify``). A task of 500 trees x 8
parties makes 4,000 root submissions, each checked by 7 verifiers: at most 2.8e-5 expected honest refusals of one check,
and a submission is refused only when more than a third of its verifiers refuse it."""

DEFAULT_DELTA = 1e-5
"""A private task's default delta: below one over the rows of any party this system is meant for, the usual rule."""

DEFAULT_OVERLAP_THRESHOLD = 0.3
"""With the paper's rule (``endorse = overlap``): verifiers sign a level whose equation-11 overlap is below it."""

DEFAULT_STEP_BLOCKS = 120
"""Blocks a party has for each step (votes, histograms, resolutions) before the step's deadline passes without it.
What ``fgbdt train``, the demo and the end-to-end tests run with: at the devnet's block clock (an empty block every
0.25 s while nobody transacts) 30 s, through which four parties on two shared cores never missed a step."""

DEFAULT_JOIN_BLOCKS = 100_000
"""Blocks after a task's creation during which parties may ask to join: long enough that the requester never races
it (on a 12-second chain about two weeks to recruit the parties)."""

Encoding = Literal["integer", "fixed", "mode"]
"""How a value becomes its ``Config`` field: as is (an integer), in 18-decimal fixed point (``to_fixed``), or as the
code of a mode name (``ledger.spec.modes``)."""


@dataclass(frozen=True)
class Parameter:
    """One task parameter: what it is, which values it takes, and how it reaches the contract.

    ``minimum``/``maximum`` bound a number (``min_open``/``max_open``: the bound itself excluded; None: unbounded);
    ``choices`` list a mode's names. ``config`` names the ``TaskConfig`` field the value becomes, by ``encoding``;
    None for a parameter each party chooses for itself (``refit_delta``). ``cli`` is the command-line option that sets
    it, where one does."""

    name: str
    kind: type
    default: Any
    help: str
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    min_open: bool = False
    max_open: bool = False
    choices: tuple[str, ...] = ()
    codes: Mapping[Any, int] = field(default_factory=dict)
    config: str | None = None
    encoding: Encoding = "integer"
    cli: str | None = None
    nullable: bool = False
    """Whether None is a value (the label range of a binary task, implied)."""
    infinite: bool = False
    """Whether ``inf`` is a value (``epsilon``: no privacy noise)."""

    @property
    def contract_field(self) -> str | None:
        """The field's name in the Solidity struct (``FGBDTConfigLib.Config``): ``config`` in camel case, ``lam``
        being ``lambda``."""
        if self.config is None:
            return None
        if self.config == "lam":
            return "lambda"
        head, *rest = self.config.split("_")
        return head + "".join(word.title() for word in rest)

    @property
    def type_name(self) -> str:
        """The Python type as a reader writes it (``float | None``)."""
        return self.kind.__name__ + (" | None" if self.nullable else "")

    def range_text(self) -> str:
        """The accepted values: ``[1, 8]``, ``(0, 1]``, ``[0, inf)`` or ``hashed, index``."""
        if self.choices:
            return ", ".join(self.choices)
        low = "-inf" if self.minimum is None else _number(self.minimum)
        high = "inf" if self.maximum is None else _number(self.maximum)
        left = "(" if self.min_open or self.minimum is None else "["
        right = ")" if (self.max_open or self.maximum is None) and not self.infinite else "]"
        return f"{left}{low}, {high}{right}"

    def check(self, value: Any, label: str | None = None) -> None:
        """Raise ValueError naming ``label`` (default: the parameter's name) when ``value`` is out of range."""
        label = label or self.name
        if value is None and self.nullable:
            return
        if self.choices:
            if value not in self.choices:
                raise ValueError(f"{label} must be one of {', '.join(self.choices)}, got {value!r}")
            return
        if isinstance(value, float) and math.isnan(value):
            raise ValueError(f"{label} must be in {self.range_text()}, got nan")
        below = self.minimum is not None and (value <= self.minimum if self.min_open else value < self.minimum)
        above = self.maximum is not None and (value >= self.maximum if self.max_open else value > self.maximum)
        if below or above:
            raise ValueError(f"{label} must be in {self.range_text()}, got {value!r}")

    def bounds(self) -> dict[str, float]:
        """The range as pydantic's ``Field`` constraints (``ge``/``gt``, ``le``/``lt``)."""
        out: dict[str, float] = {}
        if self.minimum is not None:
            out["gt" if self.min_open else "ge"] = self.minimum
        if self.maximum is not None:
            out["lt" if self.max_open else "le"] = self.maximum
        return out

    def encode(self, value: Any) -> int:
        """The value as its ``Config`` field holds it."""
        if self.encoding == "mode":
            return self.codes[value]
        if self.encoding == "fixed":
            return to_fixed(value)
        return int(value)

    def decode(self, code: int) -> Any:
        """The value of a ``Config`` field (the inverse of :meth:`encode`)."""
        if self.encoding == "mode":
            return {c: name for name, c in self.codes.items()}[code]
        if self.encoding == "fixed":
            return from_fixed(code)
        return int(code)


def _number(x: float) -> str:
    """A bound as the docs and messages print it: integers whole, powers of two as such when large."""
    if float(x).is_integer():
        n = int(x)
        if n >= 2**20 and n & (n - 1) == 0:
            return f"2^{n.bit_length() - 1}"
        if n >= 2**16 and (n + 1) & n == 0:
            return f"2^{n.bit_length()} - 1"
        return str(n)
    return f"{x:g}"


PARAMETERS: tuple[Parameter, ...] = (
    Parameter(
        "trees",
        int,
        DEFAULT_TREES,
        "Boosting rounds: the trees the task grows.",
        "trees",
        1,
        UINT16_MAX,
        config="trees",
        cli="--trees",
    ),
    Parameter(
        "depth",
        int,
        DEFAULT_DEPTH,
        "Split levels per tree (LightGBM's max_depth); at most the contract's MAX_DEPTH, whose open-node mask is "
        "256 bits.",
        "levels",
        1,
        MAX_DEPTH,
        config="depth",
        cli="--depth",
    ),
    Parameter(
        "bins",
        int,
        DEFAULT_BINS,
        "Value bins per feature; each feature's histogram has one more slot, for missing values.",
        "bins",
        2,
        254,
        config="bins",
        cli="--bins",
    ),
    Parameter(
        "hessian",
        str,
        "hessian",
        "What plays the hessian in gains and leaves: the second-order sums (`hessian`), or the row counts (`count`, "
        "the paper's formulas).",
        choices=tuple(modes.HESSIAN_MODES),
        codes=modes.HESSIAN_MODES,
        config="hessian_mode",
        encoding="mode",
        cli="--hessian",
    ),
    Parameter(
        "tie_break",
        str,
        "hashed",
        "Top-2 vote ties: `hashed` orders the features pseudo-randomly per node, `index` puts the lower index first "
        "(which favours low-index features on single-feature ballots).",
        choices=tuple(modes.TIE_RULES),
        codes=modes.TIE_RULES,
        config="tie_break",
        encoding="mode",
        cli="--tie-break",
    ),
    Parameter(
        "voted_trees",
        int,
        DEFAULT_VOTED_TREES,
        "Trees whose two candidate features per node are the top-2 of the parties' votes (the paper's FV-tree); later "
        "trees draw them from a public seed as each level opens (no vote round, no voting contribution), which keeps "
        f"an honest party's sums where its verifiers expect them. 0: every tree draws; {ALL_TREES_VOTED}: every tree "
        "votes.",
        "trees",
        0,
        ALL_TREES_VOTED,
        config="voted_trees",
        cli="--voted-trees",
    ),
    Parameter(
        "objective",
        str,
        "binary",
        "The loss the parties boost: `binary` (logistic, labels 0 and 1) or `regression` (squared error).",
        choices=tuple(modes.OBJECTIVES),
        codes=modes.OBJECTIVES,
        config="objective",
        encoding="mode",
    ),
    Parameter(
        "endorse",
        str,
        "statistical",
        "How verifiers decide to sign a party's histograms: a statistical test with a stated false-refusal rate "
        "(`statistical`), or the paper's equation 11 against a fixed overlap threshold (`overlap`).",
        choices=tuple(modes.ENDORSE_RULES),
        codes=modes.ENDORSE_RULES,
        config="endorse_rule",
        encoding="mode",
        cli="--endorse",
    ),
    Parameter(
        "quorum_num",
        int,
        2,
        "Numerator of the endorsement quorum: a submission needs ceil(quorum_num * (M - 1) / quorum_den) signatures "
        "of the other M - 1 approved parties.",
        "",
        0,
        UINT16_MAX,
        config="quorum_num",
    ),
    Parameter(
        "quorum_den",
        int,
        3,
        "Denominator of the endorsement quorum (at least quorum_num).",
        "",
        1,
        UINT16_MAX,
        config="quorum_den",
    ),
    Parameter(
        "min_parties",
        int,
        2,
        "Fewest approved parties the task starts with.",
        "parties",
        1,
        MAX_PARTIES,
        config="min_parties",
    ),
    Parameter(
        "max_parties",
        int,
        DEFAULT_MAX_PARTIES,
        "Most parties the task approves (split Shapley is exact up to 12 parties, estimated above); with every party "
        "submitting, a node's resolution must fit one transaction, which bounds parties times bins.",
        "parties",
        1,
        MAX_PARTIES,
        config="max_parties",
    ),
    Parameter(
        "join_blocks",
        int,
        DEFAULT_JOIN_BLOCKS,
        "Blocks after the task's creation during which parties may ask to join.",
        "blocks",
        0,
        2**32,
        config="join_blocks",
    ),
    Parameter(
        "step_blocks",
        int,
        DEFAULT_STEP_BLOCKS,
        "Blocks each step (votes, histograms, resolutions) stays open before its deadline.",
        "blocks",
        1,
        2**32,
        config="step_blocks",
        cli="--step-blocks",
    ),
    Parameter(
        "lam",
        float,
        0.1,
        "L2 regularisation lambda of gains and leaf values.",
        "",
        0.0,
        config="lam",
        encoding="fixed",
        cli="--lambda",
    ),
    Parameter(
        "learning_rate",
        float,
        0.1,
        "Shrinkage of every leaf value.",
        "",
        0.0,
        min_open=True,
        config="learning_rate",
        encoding="fixed",
        cli="--lr",
    ),
    Parameter(
        "min_rows",
        int,
        20,
        "Fewest rows on each side of a split (LightGBM's min_data_in_leaf).",
        "rows",
        1,
        2**62,
        config="min_rows",
        cli="--min-rows",
    ),
    Parameter(
        "alpha",
        float,
        1.0,
        "Weight of the voting contribution kappa in a party's contribution alpha * kappa + phi.",
        "",
        0.0,
        1.0,
        min_open=True,
        config="alpha",
        encoding="fixed",
        cli="--alpha",
    ),
    Parameter(
        "refusal_rate",
        float,
        DEFAULT_REFUSAL_RATE,
        "With `endorse = statistical`: a verifier's false-refusal probability per check of an honest party.",
        "probability",
        0.0,
        1.0,
        min_open=True,
        max_open=True,
        config="refusal_rate",
        encoding="fixed",
        cli="--refusal-rate",
    ),
    Parameter(
        "overlap_threshold",
        float,
        DEFAULT_OVERLAP_THRESHOLD,
        "With `endorse = overlap`: verifiers sign a level whose equation-11 overlap is below it.",
        "",
        0.0,
        config="overlap_threshold",
        encoding="fixed",
        cli="--overlap-threshold",
    ),
    Parameter(
        "epsilon",
        float,
        math.inf,
        "Every party's differential-privacy budget for all it releases (bin sketch, PSD, votes, histograms); inf: no "
        "privacy noise (Config.epsilon 0). A private FV-tree task trains the binary objective; random-split trees also "
        "train regression with a declared label range (label_min, label_max).",
        "",
        0.0,
        min_open=True,
        infinite=True,
        config="epsilon",
        encoding="fixed",
        cli="--epsilon",
    ),
    Parameter(
        "delta",
        float,
        DEFAULT_DELTA,
        "With a finite epsilon: the privacy budget's delta (Config.delta 0 without privacy).",
        "probability",
        0.0,
        1.0,
        min_open=True,
        max_open=True,
        config="delta",
        encoding="fixed",
        cli="--dp-delta",
    ),
    Parameter(
        "label_min",
        float,
        None,
        "The label's smallest value in the data schema: every party's PSD splits the label over [label_min, "
        "label_max], the labels are clipped to it, and they are divided by the power of two at or above its largest "
        "magnitude before training. Required for regression on chain and for private regression anywhere, declared "
        "by the requester from the label's documented domain, never read from the parties' rows: under a budget it "
        "bounds every row's gradient by (label_max - label_min) / 2 around the scores' start at its midpoint, and "
        "so sets the noise. Without a budget the simulator takes the training labels' range when none is declared. "
        "A binary task's range is [0, 1] (None means that).",
        nullable=True,
        config="label_min",
        encoding="fixed",
        cli="--label-min",
    ),
    Parameter(
        "label_max",
        float,
        None,
        "The label's largest value in the data schema (see label_min); above label_min.",
        nullable=True,
        config="label_max",
        encoding="fixed",
        cli="--label-max",
    ),
    Parameter(
        "contribution",
        str,
        "shapley",
        "How a party's contribution is measured: `shapley`, the split Shapley value of every split over the training "
        "histograms plus alpha times the voting contribution (the paper's equations 8 to 10), or `loo`, what the "
        "party's rows add to every split's leaves as each other party's rows judge it, rows that coalition did not "
        "train on (cross-fitted leave-one-out); or `centred`, that value on each party's sums centred at its own base "
        "rate, judging a split's contrast rather than its level, so that label skew does not make the others look "
        "harmful; or `scaled`, that value with each judge applying a coalition's tree at the fraction of its steps "
        "that suits the judge's rows best, and negative totals withheld from the reward rather than handed to the "
        "others (threat model: what each measure pays for copied rows, synthetic near-copies and extra identities). "
        "Simulated only so far: a task on chain computes `shapley`.",
        choices=tuple(modes.CONTRIBUTIONS),
        codes=modes.CONTRIBUTIONS,
    ),
    Parameter(
        "refit_delta",
        float,
        1.0,
        "Each party's own distribution-fitting degree delta of its refit weights (the paper's equation 3); not on "
        "chain.",
        "",
        0.0,
        min_open=True,
        cli="--delta",
    ),
)
"""Every task parameter, in the order of the contract's ``Config`` (the party's own ``refit_delta`` last)."""

BY_NAME: dict[str, Parameter] = {p.name: p for p in PARAMETERS}


def parameter(name: str) -> Parameter:
    """The table's entry of ``name``."""
    return BY_NAME[name]


def default(name: str) -> Any:
    """The default of ``name``: the one every surface uses."""
    return BY_NAME[name].default


def check(name: str, value: Any, label: str | None = None) -> None:
    """Raise ValueError (naming ``label``, default ``name``) when ``value`` is outside ``name``'s range."""
    BY_NAME[name].check(value, label)


def endorsement_quorum(parties: int, num: int = default("quorum_num"), den: int = default("quorum_den")) -> int:
    """Signatures of other parties a histogram submission needs: ``ceil(num * (M - 1) / den)`` of the M approved
    parties (the paper's two thirds by default), as the contract's ``_checkEndorsements`` computes it. The simulator,
    the party nodes and the audit all count it here."""
    if den <= 0 or not 0 <= num <= den:
        raise ValueError(f"the quorum {num}/{den} must be a fraction in [0, 1]")
    return -(-num * (parties - 1) // den)


def markdown_table() -> str:
    """The docs page's table: every parameter's name, type, range, default, unit and meaning."""
    header = ["name", "type", "range", "default", "unit", "meaning"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for p in PARAMETERS:
        if p.choices:
            values = ", ".join(f"`{c}`" for c in p.choices)
        elif p.minimum is None and p.maximum is None:
            values = "any number"
        else:
            values = f"`{p.range_text()}`"
        shown = p.default if isinstance(p.default, str) else repr(p.default)
        row = [f"`{p.name}`", _cell(f"`{p.type_name}`"), values, f"`{shown}`", p.unit, _cell(p.help)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _cell(s: str) -> str:
    """Text for one Markdown table cell: on one line, a ``|`` escaped (a table needs it escaped in code spans too)."""
    return " ".join(s.split()).replace("|", r"\|")
