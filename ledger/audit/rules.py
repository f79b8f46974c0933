"""The rules a submission's histograms keep: the contract's exact rules and the verifiers' carry between trees.

Why both here: the exact rules (``ledger.spec.histogram_rules``) are what ``submitHistograms`` reverts on, and the
carry (``ledger.spec.tree_carry``) is what the verifiers refuse to endorse; the inputs of both are on chain, so the
audit names a submission that breaks either (the second only a colluding quorum could have endorsed).
"""

from __future__ import annotations

from collections.abc import Mapping

from fgbdt_chain.ledger.audit.record import KIND_LEAF, KIND_SPLIT, NodeState
from fgbdt_chain.ledger.audit.report import fail
from fgbdt_chain.ledger.audit.task import Task
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.histogram_rules import HistogramRuleError, Sides, candidate_totals, check_level
from fgbdt_chain.ledger.spec.tree_carry import Carry, CarryError, ScoreBounds, applies, leaf_sums


def check_rules(
    task: Task,
    hists: list[ref.NodeHistograms],
    tree: int,
    level: int,
    open_nodes: list[int],
    party: str,
    sides: Mapping[int, Sides],
) -> None:
    """The exact rules ``submitHistograms`` applies, on the submitted data; ``sides``: the party's side sums at the
    previous level's splits (unused at a root)."""
    try:
        check_level(hists, open_nodes, task.bounds, tree == 0, None if level == 0 else sides)
    except (HistogramRuleError, ref.FixedPointOverflow) as exc:
        broken = "none broken" if isinstance(exc, HistogramRuleError) else "no overflow"
        fail("exact histogram rules (the contract would revert)", broken, str(exc), tree=tree, level=level, party=party)


class CarryCheck:
    """The verifiers' carry rule over the replay: each party's histograms of the current and the previous tree, level
    by level, the previous tree's splits and leaves (read from the replay's ``nodes``), and the bound on every score
    after each finished tree."""

    def __init__(self, task: Task, nodes: Mapping[tuple[int, int], NodeState]) -> None:
        self.task = task
        self.nodes = nodes
        self.tree_hists: dict[int, dict[str, list[dict[int, ref.NodeHistograms]]]] = {}
        self.tree_nodes: dict[int, tuple[dict[int, tuple[int, int]], dict[int, int]]] = {}
        self.score_bounds = ScoreBounds(lambda t: self._tree_nodes(t)[1].values())

    def record(self, tree: int, party: str, open_nodes: list[int], hists: list[ref.NodeHistograms]) -> None:
        """A party's accepted histograms of one level, for the carry into the next tree."""
        self.tree_hists.setdefault(tree, {}).setdefault(party, []).append(dict(zip(open_nodes, hists, strict=True)))

    def check(self, root: ref.NodeHistograms, tree: int, party: str) -> None:
        """An endorsed root within what the party's previous tree allows (``ledger.spec.tree_carry``)."""
        self.tree_hists.pop(tree - 2, None)
        self.tree_nodes.pop(tree - 2, None)
        cfg = self.task.cfg
        rule = cfg.get("endorseRule", ref.ENDORSE_STATISTICAL)
        if tree == 0 or not applies(rule, self.task.objective, cfg.get("epsilon", 0) > 0):
            return
        levels = self.tree_hists.get(tree - 1, {}).get(party, [])
        if not levels:
            return  # it did not take part in the previous tree: continuity refuses it (checked with the rules)
        splits, leaves = self._tree_nodes(tree - 1)
        previous = candidate_totals(levels[0][1], 0)
        carry = Carry.of(
            self.task.objective, previous, leaf_sums(levels, splits, leaves), self.score_bounds.before(tree)
        )
        try:
            carry.check(candidate_totals(root, 0))
        except CarryError as exc:
            fail(
                "root totals within what the party's previous tree allows (its verifiers must refuse them)",
                "within",
                str(exc),
                tree=tree,
                level=0,
                party=party,
            )

    def _tree_nodes(self, tree: int) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
        """A finished replayed tree's splits (node -> feature, threshold) and leaf values (node -> value), read once
        for all its parties."""
        if tree in self.tree_nodes:
            return self.tree_nodes[tree]
        splits: dict[int, tuple[int, int]] = {}
        leaves: dict[int, int] = {}
        for nd in range(1, 2 << self.task.depth):
            s = self.nodes.get((tree, nd))
            if s is not None and s.kind == KIND_SPLIT:
                splits[nd] = (s.feature, s.threshold)
            elif s is not None and s.kind == KIND_LEAF:
                leaves[nd] = s.value
        self.tree_nodes[tree] = (splits, leaves)
        return splits, leaves
