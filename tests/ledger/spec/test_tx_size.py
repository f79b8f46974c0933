"""The cuts that keep every transaction under what a geth network relays, checked against the real ABI coding."""

from __future__ import annotations

from typing import Any

import pytest
from eth_abi import encode
from eth_utils import keccak

from fgbdt_chain.ledger.rpc.abi_codec import canonical_type
from fgbdt_chain.ledger.spec.tx_size import (
    CALLDATA_LIMIT,
    POOL_TX_LIMIT,
    TooWideForTransaction,
    check_resolution_fits,
    histogram_parts,
    largest_fitting,
    resolution_batches,
    submit_overhead,
    widest_resolution_bytes,
)
from fgbdt_chain.ledger.toolchain.compile import load_artifacts

SIGNATURE = bytes(range(65))


def _calldata(name: str, *args: Any) -> bytes:
    abi = load_artifacts()["FGBDTChain"].abi
    fn = next(i for i in abi if i.get("type") == "function" and i["name"] == name)
    types = [canonical_type(i) for i in fn["inputs"]]
    return keccak(text=f"{name}({','.join(types)})")[:4] + encode(types, list(args))


def _endorsements(k: int) -> list[tuple[bytes, int, int, int]]:
    return [(SIGNATURE, 2**80 - 1, 2**80 - 1, 2**80 - 1) for _ in range(k)]


@pytest.mark.parametrize("endorsements", [0, 1, 15])
def test_submit_overhead_is_the_abi_coding(endorsements: int) -> None:
    words = 6 * 17 * 3
    got = len(_calldata("submitHistograms", 1, 2, 3, [-(2**200)] * words, _endorsements(endorsements)))
    assert got == submit_overhead(endorsements) + words * 32


@pytest.mark.parametrize(
    ("open_nodes", "bins", "level", "endorsements"),
    [
        (1, 16, 0, 3),
        (2, 16, 1, 3),
        (128, 16, 7, 3),
        (128, 16, 7, 15),
        (128, 64, 7, 15),
        (64, 255, 6, 1),
        (98, 32, 7, 7),
    ],
)
def test_every_part_fits_and_none_separates_siblings(open_nodes: int, bins: int, level: int, endorsements: int) -> None:
    nbins = bins + 1
    parts = histogram_parts(open_nodes, nbins, level, endorsements)
    assert sum(parts) == open_nodes
    if level > 0:
        assert all(p % 2 == 0 for p in parts)
    block = [2**255 - 1] * (6 * nbins)
    for p in parts[:-1]:
        assert p > 0
        assert len(_calldata("commitHistograms", 1, 2, level, block * p)) <= CALLDATA_LIMIT
    last = _calldata("submitHistograms", 1, 2, level, block * parts[-1], _endorsements(endorsements))
    assert len(last) <= CALLDATA_LIMIT < POOL_TX_LIMIT
    if 6 * nbins * 32 * open_nodes + submit_overhead(endorsements) <= CALLDATA_LIMIT:
        assert parts == [open_nodes]  # a level that fits goes in one transaction, as before


def test_the_depth_8_level_that_was_417_kb_goes_in_four_parts() -> None:
    assert histogram_parts(128, 17, 7, 3) == [38, 38, 38, 14]


def test_a_node_too_wide_for_any_transaction_is_refused_before_sending() -> None:
    with pytest.raises(TooWideForTransaction, match="use fewer bins"):
        histogram_parts(2, 400, 1, 3)
    assert histogram_parts(1, 400, 0, 3) == [1]  # at the root one node is the unit


@pytest.mark.parametrize(("submitters", "nodes"), [(2, 64), (4, 128), (8, 128), (16, 128)])
def test_resolution_batches_fit_the_calldata_limit(submitters: int, nodes: int) -> None:
    nbins, open_nodes = 17, nodes
    batch = resolution_batches(nodes, submitters, nbins, open_nodes, per_node_gas=1, batch=1000)
    proof = (open_nodes - 1).bit_length()
    width = 2 * nbins
    args = (
        1,
        list(range(batch)),
        [2**255 - 1] * (batch * submitters * width),
        [2**255 - 1] * (batch * submitters * width),
        [2**255 - 1] * (batch * submitters * width),
        [b"\x01" * 32] * (batch * submitters * proof),
    )
    assert len(_calldata("resolveNodes", *args)) <= CALLDATA_LIMIT
    more = (1, list(range(batch + 1)), *(a + a[: len(a) // batch] for a in args[2:]))
    if batch < nodes:
        assert len(_calldata("resolveNodes", *more)) > CALLDATA_LIMIT  # and it is the most that fits


def test_resolution_batches_fit_a_block_of_gas() -> None:
    assert resolution_batches(128, 4, 17, 128, per_node_gas=0, batch=16) == 1  # no cost seen yet: one node
    assert resolution_batches(128, 4, 17, 128, per_node_gas=30_000_000, batch=16) == 1  # a node fills a block
    assert resolution_batches(128, 2, 5, 128, per_node_gas=2_000_000, batch=16) == 12  # 24M of a 30M block
    assert resolution_batches(128, 4, 17, 128, per_node_gas=2_000_000, batch=16) == 9  # 9 nodes: 126 KB
    assert resolution_batches(3, 4, 17, 128, per_node_gas=10, batch=16) == 3


def _widest_resolution(parties: int, bins: int, depth: int) -> bytes:
    """The real ``resolveNodes`` calldata of one node at a task's deepest splitting level, every party submitting."""
    width, proof = 2 * (bins + 1), max(0, depth - 1)
    words = [2**255 - 1] * (parties * width)
    return _calldata("resolveNodes", 1, [2**depth - 1], words, words, words, [b"\x01" * 32] * (parties * proof))


@pytest.mark.parametrize(("parties", "bins", "depth"), [(64, 16, 8), (36, 16, 8), (12, 53, 8), (3, 4, 1), (64, 8, 6)])
def test_widest_resolution_is_the_abi_coding(parties: int, bins: int, depth: int) -> None:
    assert widest_resolution_bytes(parties, bins, depth) == len(_widest_resolution(parties, bins, depth))


def test_a_task_whose_node_cannot_resolve_in_a_transaction_is_refused() -> None:
    with pytest.raises(TooWideForTransaction) as err:
        check_resolution_fits(64, 16, 8)
    text = str(err.value)
    assert "223,620 bytes" in text and f"{CALLDATA_LIMIT:,}" in text and "128 KiB" in text
    assert "at most 8 bins at 64 parties" in text and "at most 36 parties at 16 bins" in text
    # the largest sizes named are the boundary: they fit and one more does not
    for parties, bins, depth in [(64, 16, 8), (12, 60, 8), (40, 16, 3), (2, 254, 8)]:
        most_bins = largest_fitting(parties, None, depth)
        most_parties = largest_fitting(None, bins, depth)
        assert len(_widest_resolution(parties, most_bins, depth)) <= CALLDATA_LIMIT
        assert len(_widest_resolution(parties, most_bins + 1, depth)) > CALLDATA_LIMIT
        assert len(_widest_resolution(most_parties, bins, depth)) <= CALLDATA_LIMIT
        assert len(_widest_resolution(most_parties + 1, bins, depth)) > CALLDATA_LIMIT
        check_resolution_fits(parties, most_bins, depth)
        check_resolution_fits(most_parties, bins, depth)
    with pytest.raises(ValueError, match="exactly one"):
        largest_fitting(4, 16, 8)
