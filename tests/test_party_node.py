"""Pure parts of the party node: the check that a level's opening splits are all known before rows are routed."""

from __future__ import annotations

from fgbdt_chain.node.party_node import splits_open


def test_splits_open_the_level_exactly() -> None:
    splits = {1: (3, 2), 2: (0, 1), 3: (5, 4)}
    assert splits_open({}, 0, [1])
    assert splits_open(splits, 1, [2, 3])
    assert splits_open(splits, 2, [7, 6, 5, 4])  # any order
    # a split of the previous level not served yet (node 3's): its children look closed, routing would be wrong
    assert not splits_open({1: (3, 2), 2: (0, 1)}, 2, [4, 5, 6, 7])
    # a record from another level does not count
    assert not splits_open({1: (3, 2), 4: (1, 1)}, 2, [4, 5])
