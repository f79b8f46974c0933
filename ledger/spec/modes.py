"""The names of every mode a task or a run chooses, and the contract's code of each.

Why one module: the command line, the REST API (its ``Literal`` request types), the Python API, the party nodes and
the audit all take or show these names, and the contract stores the codes (``FGBDTConfig.Config``). Each name is
written here once; ``api.models`` builds its types from these aliases and ``ledger.spec.parameters`` its choices.
"""

from __future__ import annotations

from typing import Literal, get_args

# what plays the hessian in gains and leaves (``Config.hessianMode``): the hessian sums (second order), or the row
# counts times ONE in their place (the paper's formulas, and its Table 3)
HESSIAN_SECOND_ORDER: int = 0
HESSIAN_COUNT: int = 1
HessianModeName = Literal["hessian", "count"]
HESSIAN_MODES: dict[HessianModeName, int] = {"hessian": HESSIAN_SECOND_ORDER, "count": HESSIAN_COUNT}
HESSIAN_MODE_NAMES: dict[int, HessianModeName] = {code: name for name, code in HESSIAN_MODES.items()}

# top-2 tie rules (``Config.tieBreak``): the lower feature index, or a per-node pseudo-random order
# (``reference.tie_key``)
TIE_LOWER_INDEX: int = 0
TIE_HASHED: int = 1
TieRuleName = Literal["hashed", "index"]
TIE_RULES: dict[TieRuleName, int] = {"hashed": TIE_HASHED, "index": TIE_LOWER_INDEX}
TIE_RULE_NAMES: dict[int, TieRuleName] = {code: name for name, code in TIE_RULES.items()}

# loss functions (``Config.objective``): the exact bounds of per-bin sums (``ledger.spec.histogram_rules``)
OBJECTIVE_BINARY: int = 0
OBJECTIVE_SQUARED: int = 1
ObjectiveName = Literal["binary", "regression"]
OBJECTIVES: dict[ObjectiveName, int] = {"binary": OBJECTIVE_BINARY, "regression": OBJECTIVE_SQUARED}
OBJECTIVE_NAMES: dict[int, ObjectiveName] = {code: name for name, code in OBJECTIVES.items()}

# how verifiers decide to endorse (``Config.endorseRule``): the calibrated statistical test of
# ``node.protocol.verify`` with a stated false-refusal rate, or the paper's equation 11 against a fixed overlap
# threshold
ENDORSE_STATISTICAL: int = 0
ENDORSE_OVERLAP: int = 1
EndorseRuleName = Literal["statistical", "overlap"]
ENDORSE_RULES: dict[EndorseRuleName, int] = {"statistical": ENDORSE_STATISTICAL, "overlap": ENDORSE_OVERLAP}
ENDORSE_RULE_NAMES: dict[int, EndorseRuleName] = {code: name for name, code in ENDORSE_RULES.items()}

# how a party's contribution is measured: the split Shapley value of every split over the training histograms plus
# alpha times the voting contribution (the paper's equations 8 to 10), or the cross-fitted leave-one-out value of every
# split, judged on rows the coalition did not train on (``ledger.spec.loo``), or that value on each party's sums centred
# at its own base rate, which judges a split's contrast and not its level (``ledger.spec.centred``), or the centred
# value with each judge applying a coalition's tree at its best fraction of the steps, shared with negative totals
# withheld (``ledger.spec.scaled``)
CONTRIBUTION_SHAPLEY: int = 0
CONTRIBUTION_LOO: int = 1
CONTRIBUTION_CENTRED: int = 2
CONTRIBUTION_SCALED: int = 3
ContributionName = Literal["shapley", "loo", "centred", "scaled"]
CONTRIBUTIONS: dict[ContributionName, int] = {
    "shapley": CONTRIBUTION_SHAPLEY,
    "loo": CONTRIBUTION_LOO,
    "centred": CONTRIBUTION_CENTRED,
    "scaled": CONTRIBUTION_SCALED,
}
CONTRIBUTION_NAMES: dict[int, ContributionName] = {code: name for name, code in CONTRIBUTIONS.items()}

OnChainAlgorithmName = Literal["fvtree", "drawn"]
ON_CHAIN_ALGORITHMS: tuple[OnChainAlgorithmName, ...] = get_args(OnChainAlgorithmName)
"""The algorithms a task on chain runs, told apart by ``Config.votedTrees`` (``drawn``: 0): ``fvtree`` votes for each
node's candidates in its first ``voted_trees`` trees, ``drawn`` draws them from a public seed in every tree."""

BinningName = Literal["dp", "dp-equal-width", "exact", "uniform"]
BINNING_METHODS: tuple[BinningName, ...] = get_args(BinningName)
"""How the common bin edges are made (``node.privacy.binning``); on chain always ``dp``, merged from the parties'
private sketches."""
