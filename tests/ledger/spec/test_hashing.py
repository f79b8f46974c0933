"""The fast keccak256 gives eth_utils' digests."""

from __future__ import annotations

import random

from eth_utils import keccak

from fgbdt_chain.ledger.spec.hashing import keccak256


def test_the_digests_are_eth_utils() -> None:
    rng = random.Random(4)
    for size in (0, 1, 31, 32, 33, 64, 135, 136, 137, 3264, 50_000):
        data = rng.randbytes(size)
        assert keccak256(data) == keccak(data)
