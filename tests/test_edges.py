"""Bin edges as bytes: exact round trip and strict decoding."""

from __future__ import annotations

import pytest

from fgbdt_chain.ledger.edges import EdgesFormatError, decode_edges, encode_edges


def test_round_trip_is_exact() -> None:
    edges = [[0.1, 0.2 + 1e-17, 3.5], [], [-1e300, 5e-324, 1e300]]
    assert decode_edges(encode_edges(edges)) == edges


@pytest.mark.parametrize("edges", [[[1.0, 1.0]], [[2.0, 1.0]], [[float("nan")]], [[float("inf")]]])
def test_rejects_edges_that_are_not_strictly_increasing_and_finite(edges: list[list[float]]) -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        encode_edges(edges)


def test_rejects_bad_bytes_with_the_reason() -> None:
    good = encode_edges([[0.5], [1.0, 2.0]])
    with pytest.raises(EdgesFormatError, match="magic"):
        decode_edges(b"XXXX" + good[4:])
    with pytest.raises(EdgesFormatError, match="truncated"):
        decode_edges(good[:-3])
    with pytest.raises(EdgesFormatError, match="trailing"):
        decode_edges(good + b"\x00")
    with pytest.raises(EdgesFormatError, match="version"):
        decode_edges(good[:4] + b"\x09" + good[5:])
