"""A verifier whose rows are chunks on disk or parts on Dask workers measures another party's histograms as the
in-memory verifier does: the same cells, the same statistics to the last bit, so the same verdicts and credits, on
honest and on stretched histograms, at a tree's root and below it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fgbdt_chain.node.kernels.histogram import BinnedRows
from fgbdt_chain.node.protocol.chunked_party import ChunkedSlots, DaskPart
from fgbdt_chain.node.protocol.chunked_rows import ChunkedRows, DaskChunks, LocalChunks
from fgbdt_chain.node.protocol.verify import Claims, PartyEstimator, VerifierLevel, judge, measure

CHUNK = 97
NBINS = 8
ALPHA = 0.01


def _slots(rng: np.random.Generator, n: int) -> np.ndarray:
    slots = rng.integers(0, NBINS, size=(n, 4), dtype=np.uint8)
    slots[:, 3] = np.where(rng.random(n) < 0.8, 2, slots[:, 3])  # a feature with a dominant slot
    return slots


def _claims(slots: np.ndarray, k: np.ndarray, cand: np.ndarray, g: np.ndarray, h: np.ndarray) -> Claims:
    """A party's exact level histograms of its own rows, (nodes, 2, bins) of g, h and the row count."""
    out = np.zeros((3, cand.shape[0], 2, NBINS))
    at = np.flatnonzero(k >= 0)
    for r in range(2):
        bins = slots[at, cand[k[at], r]]
        for q, x in enumerate((g[at], h[at], np.ones(at.size))):
            np.add.at(out[q], (k[at], r, bins), x)
    return Claims(out[0], out[1], out[2])


def _levels(rng: np.random.Generator, n: int) -> list[tuple[np.ndarray, np.ndarray, bool]]:
    """A root (every row in one node) and a deeper level (three nodes, some rows in leaves)."""
    return [
        (np.zeros(n, dtype=np.int64), np.array([[0, 3]]), True),
        (rng.integers(-1, 3, size=n), np.array([[1, 2], [3, 0], [2, 2]]), False),
    ]


def _verdicts(rows: BinnedRows, levels, g, h, estimator, party_claims) -> list[tuple[object, ...]]:
    out = []
    for (k, cand, root), honest in zip(levels, party_claims, strict=True):
        level = VerifierLevel.of(rows, k, cand, g, h)
        for factor in (1.0, 2.0):
            claims = Claims(honest.g * factor, honest.h * factor, honest.n * factor)
            m = measure(level, estimator, claims, root=root)
            v = judge(m, ALPHA)
            out.append((level.idx.tolist(), level.cells.tolist(), level.xs.tolist(), m, v.sign, v.credit, v.z))
    return out


@pytest.fixture(scope="module")
def case() -> tuple:
    rng = np.random.default_rng(5)
    n, n_party = 1200, 900
    mine, theirs = _slots(rng, n), _slots(rng, n_party)
    g, h = rng.normal(size=n) + 0.3, rng.random(n) + 0.5
    pg, ph = rng.normal(size=n_party) + 0.3, rng.random(n_party) + 0.5
    leaf = rng.integers(0, 3, size=n)
    weight = n_party / n * (0.5 + rng.random(n))
    estimator = PartyEstimator.build(weight, leaf, 3, 1.0, float(n_party))
    levels = _levels(rng, n)
    party_levels = _levels(rng, n_party)
    party_claims = [
        _claims(theirs, pk, cand, pg, ph) for (pk, _, _), (_, cand, _) in zip(party_levels, levels, strict=True)
    ]
    want = _verdicts(BinnedRows(mine, NBINS), levels, g, h, estimator, party_claims)
    return mine, g, h, estimator, levels, party_claims, want


def test_the_in_memory_verifier_signs_honest_root_histograms_and_refuses_stretched_ones(case: tuple) -> None:
    want = case[-1]
    assert want[0][4] and not want[1][4]  # the root: honest signed, twice the sums refused
    assert want[1][5].g < want[0][5].g  # and credited less


def test_a_chunked_verifier_judges_as_the_in_memory_one(case: tuple, tmp_path: Path) -> None:
    mine, g, h, estimator, levels, party_claims, want = case
    chunks = LocalChunks(ChunkedSlots.write(tmp_path / "s", mine, NBINS, chunk_rows=CHUNK))
    assert chunks.slots.n_rows > 10 * CHUNK
    got = _verdicts(ChunkedRows(chunks), levels, g, h, estimator, party_claims)
    assert got == want


def test_a_verifier_on_two_dask_workers_judges_as_the_in_memory_one(case: tuple, tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    mine, g, h, estimator, levels, party_claims, want = case
    cut = 500
    a = ChunkedSlots.write(tmp_path / "a", mine[:cut], NBINS, chunk_rows=CHUNK)
    b = ChunkedSlots.write(tmp_path / "b", mine[cut:], NBINS, chunk_rows=CHUNK)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        workers = sorted(client.scheduler_info()["workers"])
        parts = [DaskPart(str(a.path), 0, cut, workers[0]), DaskPart(str(b.path), cut, mine.shape[0] - cut, workers[1])]
        rows = ChunkedRows(DaskChunks(client, parts, mine.shape[1], NBINS, CHUNK))
        got = _verdicts(rows, levels, g, h, estimator, party_claims)
    assert got == want


def test_a_chunked_verifier_s_cells_refuse_bad_levels_by_name(tmp_path: Path) -> None:
    rows = ChunkedRows(LocalChunks(ChunkedSlots.write(tmp_path / "s", np.zeros((10, 2), np.uint8), 4, chunk_rows=4)))
    with pytest.raises(ValueError, match="candidate features"):
        rows.level_cells(np.zeros(10, dtype=np.int64), np.array([[0, 2]]))
    with pytest.raises(ValueError, match="group is not below"):
        rows.level_cells(np.ones(10, dtype=np.int64), np.array([[0, 1]]))
    with pytest.raises(ValueError, match="shape"):
        rows.level_cells(np.zeros(10, dtype=np.int64), np.array([0, 1]))
