"""Pure parts of the party node: the check that a level's opening splits are all known before rows are routed, and
the reading of a resolution revert that means the node's events lag its state."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from fgbdt_chain.ledger.errors import ContractRevert
from fgbdt_chain.ledger.reference import ONE
from fgbdt_chain.node.fvtree import TrainParams
from fgbdt_chain.node.party_node import (
    ChainLag,
    NodeError,
    NodeSettings,
    PartyNode,
    _fewer_histograms_than_chain,
    splits_open,
)


def test_splits_open_the_level_exactly() -> None:
    splits = {1: (3, 2), 2: (0, 1), 3: (5, 4)}
    assert splits_open({}, 0, [1])
    assert splits_open(splits, 1, [2, 3])
    assert splits_open(splits, 2, [7, 6, 5, 4])  # any order
    # a split of the previous level not served yet (node 3's): its children look closed, routing would be wrong
    assert not splits_open({1: (3, 2), 2: (0, 1)}, 2, [4, 5, 6, 7])
    # a record from another level does not count
    assert not splits_open({1: (3, 2), 4: (1, 1)}, 2, [4, 5])


def test_a_resolution_short_of_submitters_reads_as_lag_not_failure() -> None:
    # the chain counts three submitters (3 x 18 words), the party read only two parties' events
    assert _fewer_histograms_than_chain(ContractRevert("LengthMismatch", (54, 36), function="resolveNodes"))
    # more histograms than the chain counts, or any other revert, is a real failure
    assert not _fewer_histograms_than_chain(ContractRevert("LengthMismatch", (36, 54)))
    assert not _fewer_histograms_than_chain(ContractRevert("NodeNotOpen", (1, 1)))
    assert not _fewer_histograms_than_chain(ContractRevert("LengthMismatch", ()))


def test_a_finished_tree_whose_leaves_are_not_served_yet_is_lag_then_failure() -> None:
    """A drawn tree's next level starts in the block that finished the tree, so a party can see the new tree in the
    state before the node serves the finished tree's leaves: that is lag (look again), and only a gap that outlasts
    the chain-outage window is an inconsistent chain."""

    class Trees:
        def __init__(self) -> None:
            self.splits: dict[int, dict[int, tuple[int, int]]] = {0: {1: (0, 1)}}
            self.leaves: dict[int, dict[int, int]] = {0: {2: ONE}}  # node 3's leaf not served yet
            self.next_block = 5

        def refresh(self) -> None:
            pass

    node = object.__new__(PartyNode)
    node.party = SimpleNamespace(rows=SimpleNamespace(slots=np.array([[1], [2], [3]])), score=np.zeros(3), n_rows=3)
    node.params = TrainParams(trees=2, depth=1, bins=4)
    node.trees = Trees()
    node.settings = NodeSettings(chain_outage_seconds=0.05)
    node.applied_trees = 0
    node._leaf_lag_since = {}
    with pytest.raises(ChainLag, match="not served yet"):
        node._apply_completed_trees(1)
    assert node.applied_trees == 0 and not node.party.score.any()
    time.sleep(0.1)
    with pytest.raises(NodeError, match="have no leaf value"):
        node._apply_completed_trees(1)
    node.trees.leaves[0][3] = -ONE  # served at last
    node._apply_completed_trees(1)
    assert node.applied_trees == 1 and node.party.score.tolist() == [1.0, -1.0, -1.0]
