"""Pure parts of the party node: the check that a level's opening splits are all known before rows are routed, and
the reading of a resolution revert that means the node's events lag its state."""

from __future__ import annotations

from fgbdt_chain.ledger.errors import ContractRevert
from fgbdt_chain.node.party_node import _fewer_histograms_than_chain, splits_open


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
