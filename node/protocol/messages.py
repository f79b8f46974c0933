"""Sizes of the protocol messages a party sends, for communication accounting.

Counted as the bytes the party puts on the wire in the chain protocol: ABI-encoded transactions (4-byte
selector, 32-byte words, dynamic arrays as offset + length + elements) and, for endorsements, the same histogram
payload sent to each verifier plus the 65-byte signatures and three credit words it returns as a verifier. The
simulator builds the same per-level messages a node would send and sums these sizes, so the figures follow the
protocol rather than a formula.
"""

from __future__ import annotations

from dataclasses import dataclass

WORD = 32
SELECTOR = 4
SIGNATURE = 65


def abi_array(length: int) -> int:
    """Bytes of a dynamic array of static 32-byte elements: head offset, length word, elements."""
    return WORD + WORD + WORD * length


def abi_bytes_array(count: int, item: int) -> int:
    """Bytes of a ``bytes[]`` of ``count`` items of ``item`` bytes each."""
    padded = -(-item // WORD) * WORD
    return WORD + WORD + count * (WORD + WORD + padded)


CREDIT_WORDS = 3
"""Words of the credit an endorsement attests (gradients, hessians, counts)."""


def abi_endorsements(count: int) -> int:
    """Bytes of an ``Endorsement[]`` (a 65-byte signature and three credit words each) of ``count`` items: head
    offset and length, then per item its offset, the tuple head (bytes offset + credits) and the padded bytes."""
    padded = -(-SIGNATURE // WORD) * WORD
    return WORD + WORD + count * (WORD + WORD * (1 + CREDIT_WORDS) + WORD + padded)


@dataclass(frozen=True)
class LevelTraffic:
    """What one party sends during one level: its votes, its histogram transaction and the endorsement round."""

    votes: int
    histograms: int
    endorsement_requests: int
    signatures: int

    @property
    def total(self) -> int:
        return self.votes + self.histograms + self.endorsement_requests + self.signatures


def level_traffic(
    open_nodes: int,
    candidates: int,
    nbins: int,
    parties: int,
    quorum: int,
    *,
    voting: bool = True,
    ahead_of: int | None = None,
) -> LevelTraffic:
    """Bytes one party sends in a level with ``open_nodes`` nodes and ``candidates`` histograms per node.
    ``ahead_of``: the open nodes of the level before, when the votes went ahead with its resolution (two per node,
    ``submitVotes`` ahead), else the votes are one per open node (a tree's root)."""
    header = SELECTOR + 3 * WORD  # task, tree, level
    cells = open_nodes * candidates * nbins
    votes = header + abi_array(open_nodes if ahead_of is None else 2 * ahead_of) if voting else 0
    payload = header + 3 * abi_array(cells)  # g, h, n
    histograms = payload + abi_endorsements(quorum)
    others = parties - 1
    return LevelTraffic(votes, histograms, others * payload, others * (SIGNATURE + CREDIT_WORDS * WORD))
