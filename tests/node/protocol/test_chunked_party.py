"""A party's histograms from its slots on disk, chunk by chunk and over Dask workers: the in-memory party's, exactly.

The reference is ``LocalParty.level_sums``, what a party node submits; the levels are those of a real simulated
training (``node.sim.experiment.run`` with an observer), so the rows' positions, candidates and gradients are the
ones training produced, tree after tree.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.data.parquet import ParquetRows, write_rows
from fgbdt_chain.node.kernels.histogram import FixedSums
from fgbdt_chain.node.model.trees import bin_matrix
from fgbdt_chain.node.protocol.chunked_party import (
    ChunkedSlots,
    DaskHistograms,
    DaskPart,
    add_sums,
    chunk_sums,
    total_sums,
)
from fgbdt_chain.node.protocol.local_party import LocalParty
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, prepare, run
from fgbdt_chain.node.sim.fvtree import LevelView


def _data(rows: int = 900, features: int = 6, seed: int = 3) -> Dataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (X[:, 0] + 0.5 * np.nan_to_num(X[:, 1]) + rng.normal(size=rows) > 0).astype(float)
    return Dataset(X, y)


def _same(a: FixedSums, b: FixedSums) -> None:
    for name in ("g_hi", "g_lo", "h_hi", "h_lo", "n"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.fixture(scope="module")
def levels() -> tuple[Prepared, list[LevelView]]:
    """A small federation trained with every level's view recorded."""
    data = _data()
    params = TrainParams(trees=4, depth=3, bins=8)
    prep = prepare(data, _data(60, seed=4), params, PrepConfig(parties=3, theta=0.7, seed=1))
    seen: list[LevelView] = []
    run(prep, "fvtree", observer=seen.append)
    return prep, seen


def _reference(prep: Prepared, party: int, view: LevelView) -> FixedSums:
    slots, y = prep.party_slots()[party], prep.party_y()[party]
    local = LocalParty(slots, y, prep.params.fitted(prep.edges))
    cand = np.asarray(view.candidates, dtype=np.int64)
    groups = local.rows.groups(view.k_of_row[party], len(view.candidates))
    fixed = local.fixed_rows(view.g[party], view.h[party], view.tree)
    return local.rows.group_candidates_fixed(groups, cand, fixed)


def test_chunked_histograms_are_the_in_memory_party_s(levels: tuple[Prepared, list[LevelView]], tmp_path: Path) -> None:
    prep, seen = levels
    nbins = prep.params.fitted(prep.edges).nbins
    for party in range(3):
        slots = prep.party_slots()[party]
        chunked = ChunkedSlots.write(tmp_path / f"party{party}", slots, nbins, chunk_rows=37)
        assert chunked.n_rows == slots.shape[0]
        assert len(list(chunked.chunks())) == -(-slots.shape[0] // 37)  # several chunks, one ragged
        for view in seen:
            cand = np.asarray(view.candidates, dtype=np.int64)
            got = chunked.level_sums(view.k_of_row[party], cand, view.g[party], view.h[party])
            _same(got, _reference(prep, party, view))
    assert {v.level for v in seen} == {0, 1, 2} and len({v.tree for v in seen}) == 4


def test_the_order_of_the_chunks_changes_no_bit(levels: tuple[Prepared, list[LevelView]]) -> None:
    prep, seen = levels
    view = seen[-1]  # the deepest level of the last tree: many open nodes, rows in leaves
    slots = prep.party_slots()[0]
    nbins = prep.params.fitted(prep.edges).nbins
    cand = np.asarray(view.candidates, dtype=np.int64)
    k, g, h = view.k_of_row[0], view.g[0], view.h[0]
    cuts = [0, 5, 6, 90, 200, slots.shape[0]]
    parts = [chunk_sums(slots[a:b], k[a:b], cand, g[a:b], h[a:b], nbins) for a, b in itertools.pairwise(cuts)]
    whole = _reference(prep, 0, view)
    rng = np.random.default_rng(0)
    for _ in range(5):
        _same(total_sums([parts[i] for i in rng.permutation(len(parts))]), whole)
    # and the sums are not trivially equal: one part fewer differs
    partial = total_sums(parts[1:])
    assert not np.array_equal(partial.n, whole.n)
    assert add_sums(parts[0], partial).n.sum() == whole.n.sum()


def test_a_party_binned_from_its_raw_parquet_rows(levels: tuple[Prepared, list[LevelView]], tmp_path: Path) -> None:
    prep, seen = levels
    idx = prep.parts[1]
    raw = prep.train.subset(idx)
    rows = ParquetRows(write_rows(tmp_path / "raw", raw.X, raw.y, rows_per_file=100, row_group_rows=50), 64)
    assert rows.n_rows == len(idx)
    np.testing.assert_array_equal(rows.labels(), raw.y)
    nbins = prep.params.fitted(prep.edges).nbins
    features = rows.features()
    chunked = ChunkedSlots.binned(rows, features, lambda x: bin_matrix(x, prep.edges), tmp_path / "slots", nbins)
    np.testing.assert_array_equal(np.vstack([s for _, s in chunked.chunks()]), prep.party_slots()[1])
    view = seen[1]
    cand = np.asarray(view.candidates, dtype=np.int64)
    _same(chunked.level_sums(view.k_of_row[1], cand, view.g[1], view.h[1]), _reference(prep, 1, view))


def test_dask_workers_sum_the_parts(levels: tuple[Prepared, list[LevelView]], tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    prep, seen = levels
    slots = prep.party_slots()[2]
    nbins = prep.params.fitted(prep.edges).nbins
    cut = slots.shape[0] // 3
    a = ChunkedSlots.write(tmp_path / "a", slots[:cut], nbins, chunk_rows=25)
    b = ChunkedSlots.write(tmp_path / "b", slots[cut:], nbins, chunk_rows=25)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        workers = sorted(client.scheduler_info()["workers"])
        parts = [
            DaskPart(str(b.path), cut, slots.shape[0] - cut, workers[1]),
            DaskPart(str(a.path), 0, cut, workers[0]),
        ]
        dask = DaskHistograms(client, parts, slots.shape[1], nbins, chunk_rows=25)
        for view in seen[:5]:
            cand = np.asarray(view.candidates, dtype=np.int64)
            got = dask.level_sums(view.k_of_row[2], cand, view.g[2], view.h[2])
            _same(got, _reference(prep, 2, view))
        with pytest.raises(ValueError, match="rows given"):
            dask.level_sums(view.k_of_row[2][:-1], cand, view.g[2], view.h[2])
        with pytest.raises(ValueError, match="without gaps"):
            DaskHistograms(client, parts[:1], slots.shape[1], nbins)


def test_rows_that_do_not_match_the_slots_are_refused(tmp_path: Path) -> None:
    slots = np.zeros((10, 2), dtype=np.uint8)
    chunked = ChunkedSlots.write(tmp_path / "s", slots, 4, chunk_rows=4)
    cand = np.zeros((1, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="10 rows of slots but 12 rows given"):
        chunked.level_sums(np.zeros(12, dtype=np.int64), cand, np.zeros(12), np.ones(12))
    with pytest.raises(OverflowError):
        chunked.level_sums(np.zeros(10, dtype=np.int64), cand, np.full(10, 1e6), np.full(10, 1e6 * 2**40))


def test_train_takes_a_party_as_its_parquet_path(tmp_path: Path) -> None:
    from fgbdt_chain import train

    data = _data(600, 4, seed=9)
    params = {"num_trees": 4, "max_depth": 3, "min_data_in_leaf": 5}
    parts = [(data.X[a:b], data.y[a:b]) for a, b in ((0, 250), (250, 420), (420, 600))]
    names = ["f0", "f1", "f2", "f3"]
    path = write_rows(tmp_path / "party1", *parts[1], feature_names=names, rows_per_file=60, row_group_rows=25)
    in_memory = train(params, parts, names)
    from_parquet = train(params, [parts[0], path, parts[2]])
    assert from_parquet.feature_names == names
    assert from_parquet.trees == in_memory.trees and from_parquet.edges == in_memory.edges
    assert from_parquet.contributions == in_memory.contributions
