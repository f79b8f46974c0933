"""What a transaction may weigh on a real network, and how the protocol's widest calls are cut to fit.

Why: a local devnet takes a transaction of any size, but a permissioned geth network relays none over 128 KiB and
mines none over its block's gas. A level's histograms at depth 8 come to 417 KB in one call and a party's share of a
level's resolutions to several blocks of gas; both are cut here, by the same limits that the train report checks
(:mod:`ledger.rpc.usage`), so that every transaction the protocol sends fits whatever the depth, bins and party count.
"""

from __future__ import annotations

POOL_TX_LIMIT = 128 * 1024
"""geth's transaction pool limit (``txMaxSize``, 4 slots of 32 KiB): the largest transaction a geth network relays."""
BLOCK_GAS_LIMIT = 30_000_000
"""A public-network-sized block, the gas every single transaction must fit in."""
CALLDATA_LIMIT = POOL_TX_LIMIT - 2048
"""The calldata a part may carry: room is left for the signed transaction's own fields (about 120 bytes) and for the
ERC-2771 forwarder's envelope around a relayed call (a request struct and a 65-byte signature, under 1 KiB)."""
WORD = 32


class TooWideForTransaction(ValueError):
    """The smallest unit the protocol can send (one node, or one pair of siblings) is over the size limit."""


def submit_overhead(endorsements: int) -> int:
    """Calldata bytes of a ``submitHistograms`` call beyond its node blocks: selector, five head words, the data
    array's length, and per endorsement its offset, four head words and a 65-byte signature padded to 96 bytes with
    its length word (exactly what the ABI codes)."""
    return 4 + 5 * WORD + WORD + WORD + endorsements * (WORD + 4 * WORD + WORD + 3 * WORD)


def histogram_parts(
    open_nodes: int, nbins: int, level: int, endorsements: int, limit: int = CALLDATA_LIMIT
) -> list[int]:
    """How many node blocks each transaction of a level's histogram submission carries: ``commitHistograms`` parts
    first, the ``submitHistograms`` with the endorsements last. One entry when the whole level fits, the common case.

    Every part but the last holds as many nodes as fit, an even number below the root (the contract checks each
    pair of siblings against their parent together, so a part never separates them)."""
    node_bytes = 6 * nbins * WORD
    unit = 1 if level == 0 else 2
    commit_room = (limit - (4 + 4 * WORD + WORD)) // node_bytes // unit * unit
    last_room = (limit - submit_overhead(endorsements)) // node_bytes // unit * unit
    if min(commit_room, last_room) < unit:
        raise TooWideForTransaction(
            f"{unit} node block(s) of {nbins} slots per candidate take {unit * node_bytes} bytes, over the "
            f"{limit} a transaction may carry: use fewer bins"
        )
    if open_nodes <= last_room:
        return [open_nodes]
    parts: list[int] = []
    left = open_nodes
    while left > last_room:  # the last part may be empty: the endorsements alone then close the level
        parts.append(min(commit_room, left))
        left -= parts[-1]
    return [*parts, left]


RESOLVE_OVERHEAD = 4 + 6 * WORD + 5 * WORD
"""Calldata bytes of a ``resolveNodes`` call beyond its nodes: selector, six head words, five array lengths."""


def resolution_node_bytes(submitters: int, nbins: int, proof: int) -> int:
    """Calldata bytes one node adds to a ``resolveNodes`` call: every submitter's three arrays (g, h, n) of two
    candidates' ``nbins`` slots and its ``proof`` Merkle hashes, and the node's id."""
    return submitters * (3 * 2 * nbins + proof) * WORD + WORD


def widest_resolution_bytes(parties: int, bins: int, depth: int) -> int:
    """Calldata of the largest single node resolution a task can need: every one of ``parties`` submitting, at the
    deepest level that splits (level ``depth - 1``, ``2^(depth - 1)`` open nodes, so ``depth - 1`` proof hashes),
    each candidate's histogram ``bins + 1`` slots (one for missing values)."""
    return RESOLVE_OVERHEAD + resolution_node_bytes(parties, bins + 1, max(0, depth - 1))


def largest_fitting(parties: int | None, bins: int | None, depth: int, limit: int = CALLDATA_LIMIT) -> int:
    """The most bins (given ``parties``) or the most parties (given ``bins``) whose widest node resolution fits
    ``limit``; 0 if none does. Exactly one of ``parties`` and ``bins`` is given."""
    if (parties is None) == (bins is None):
        raise ValueError("give exactly one of parties and bins")
    proof = max(0, depth - 1)
    room = limit - RESOLVE_OVERHEAD - WORD
    if parties is not None:
        # parties * (6 * (bins + 1) + proof) * WORD <= room
        return max(0, (room // (parties * WORD) - proof) // 6 - 1)
    assert bins is not None
    return max(0, room // ((6 * (bins + 1) + proof) * WORD))


def check_resolution_fits(parties: int, bins: int, depth: int, limit: int = CALLDATA_LIMIT) -> None:
    """Refuse a task one of whose nodes could not be resolved in one transaction a geth network relays.

    Why: a node is resolved in one call that carries every submitter's histograms of both candidates (the contract
    checks them against the committed Merkle roots and computes the split Shapley values from all of them at once),
    so it cannot be cut like a level's submissions. With ``parties`` approved, all may submit; a task whose widest
    resolution is over :data:`CALLDATA_LIMIT` would train on a devnet and stop at its deepest level on a real network.
    Raises :class:`TooWideForTransaction` naming the limit, the most bins that fit at these parties and the most
    parties at these bins."""
    size = widest_resolution_bytes(parties, bins, depth)
    if size <= limit:
        return
    most_bins = largest_fitting(parties, None, depth, limit)
    most_parties = largest_fitting(None, bins, depth, limit)
    fix = [f"at most {most_bins} bins at {parties} parties" if most_bins >= 2 else None]
    fix.append(f"at most {most_parties} parties at {bins} bins" if most_parties >= 1 else None)
    raise TooWideForTransaction(
        f"a node's resolution at {parties} parties, {bins} bins and depth {depth} carries {size:,} bytes of calldata, "
        f"over the {limit:,} a transaction may carry (geth relays none over {POOL_TX_LIMIT // 1024} KiB): use "
        + " or ".join(f for f in fix if f)
    )


def resolution_batches(
    nodes: int, submitters: int, nbins: int, open_nodes: int, per_node_gas: int, batch: int, limit: int = CALLDATA_LIMIT
) -> int:
    """How many nodes one ``resolveNodes`` call may carry: at most ``batch``, as many as fit the calldata limit
    (every submitter's three arrays of ``2 * nbins`` words and its Merkle proof per node), and as many as fit a
    block's gas at ``per_node_gas`` each (the most a node was seen to cost, with a fifth of the block spare; 0: no
    cost seen yet, one node)."""
    proof = max(0, (open_nodes - 1).bit_length())
    by_bytes = (limit - RESOLVE_OVERHEAD) // resolution_node_bytes(submitters, nbins, proof)
    by_gas = BLOCK_GAS_LIMIT * 4 // 5 // per_node_gas if per_node_gas > 0 else 1
    return max(1, min(nodes, batch, by_bytes, by_gas))
