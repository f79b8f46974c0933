"""Bin edges as bytes: exact round trip and strict decoding; the requester fixes the simulator's edges from the
parties' join payloads."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import numpy as np
import pytest

from fgbdt_chain.deploy.requester import Requester
from fgbdt_chain.ledger.spec.edges import SLOTS_OFFSET, EdgesFormatError, decode_edges, encode_edges, histogram_slots
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.privacy.binning import local_sketch, sketch_rng
from fgbdt_chain.node.privacy.psd import build_psd
from fgbdt_chain.node.privacy.publish import PayloadError, decode_join, encode_join
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare


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


def test_the_header_names_the_histogram_slots_the_edges_need() -> None:
    """The missing slot plus the most value bins of any feature, three at least; a header naming another count, or
    an encoding of the version before the header, is refused by name."""
    assert histogram_slots([[0.5], [], [1.0, 2.0, 3.0]]) == 5
    assert histogram_slots([[], []]) == histogram_slots([[0.5]]) == histogram_slots([]) == 3
    good = encode_edges([[0.5], [1.0, 2.0, 3.0]])
    assert int.from_bytes(good[SLOTS_OFFSET : SLOTS_OFFSET + 2], "big") == 5
    for slots in (4, 6, 17):
        bad = good[:SLOTS_OFFSET] + slots.to_bytes(2, "big") + good[SLOTS_OFFSET + 2 :]
        with pytest.raises(EdgesFormatError, match=f"names {slots} histogram slots; the edges need 5"):
            decode_edges(bad)
    v1 = good[:4] + b"\x01" + good[5:SLOTS_OFFSET] + good[SLOTS_OFFSET + 2 :]
    with pytest.raises(EdgesFormatError, match="version 1"):
        decode_edges(v1)
    with pytest.raises(EdgesFormatError, match="truncated header"):
        decode_edges(good[: SLOTS_OFFSET + 1])


def test_the_requester_fixes_the_simulators_edges_from_the_published_join_payloads() -> None:
    """Each party publishes its sketch in its join payload as a party node does (its own seeded noise stream); the
    requester's ``edges_for`` merges the decoded sketches into exactly the encoded edges ``simulate`` trains with."""
    rng = np.random.default_rng(3)
    rows = 3000
    X = np.column_stack(
        [
            np.exp(rng.normal(size=rows) * 2.0),  # heavy tail
            np.where(rng.random(rows) < 0.9, 0.0, rng.exponential(50.0, rows)),  # 90% zeros
            rng.poisson(2.0, rows).astype(float),  # integer counts
            np.where(rng.random(rows) < 0.1, np.nan, rng.normal(size=rows)),  # missing values
        ]
    )
    y = (rng.random(rows) < 0.3).astype(float)
    train = Dataset(X[:2400], y[:2400], ["a", "b", "c", "d"], "toy")
    test = Dataset(X[2400:], y[2400:], ["a", "b", "c", "d"], "toy-test")
    params = TrainParams(trees=2, depth=2, bins=16)
    prep = prepare(train, test, params, PrepConfig(parties=3, seed=9))
    low, high = prep.ranges
    accounts = [SimpleNamespace(address=f"0x{p:040x}") for p in range(3)]
    payloads = {}
    for p, idx in enumerate(prep.parts):
        shard = train.subset(idx)
        sketch = local_sketch(shard.X, low, high, resolution=64, epsilon=1.0, rng=sketch_rng(9, p))
        psd = build_psd(
            shard.X, shard.y, np.append(low, 0.0), np.append(high, 1.0), depth=3, rng=np.random.default_rng(p)
        )
        payloads[accounts[p].address] = encode_join(psd, 1.0, sketch)
        assert len(decode_join(payloads[accounts[p].address]).sketch) == train.n_features
    chain = Requester.edges_for(SimpleNamespace(prep=prep, accounts=accounts), payloads)  # type: ignore[arg-type]
    assert chain == encode_edges([e.tolist() for e in prep.edges])
    assert decode_edges(chain) == [e.tolist() for e in prep.edges]
    assert prep.integers is not None and prep.integers.tolist() == [False, False, True, False]
    assert len(prep.edges[0]) == len(prep.edges[3]) == 15 and len(prep.edges[1]) >= 5  # heavy, missing; zero-heavy
    counts = prep.edges[2]  # the integer counts: a cut per gap between values at most, at the half-integers
    assert 3 <= len(counts) <= prep.ranges[1][2] - prep.ranges[0][2] and np.all(counts - np.floor(counts) == 0.5)


def test_join_payloads_of_the_equal_width_sketch_are_refused() -> None:
    """Version 2 (the equal-width sketch as doubles) would give other edges than the simulator: refused by name."""
    with pytest.raises(PayloadError, match="version 2"):
        decode_join(b"FGBJ" + struct.pack(">BI", 2, 0) + b"\x00" * 24)
