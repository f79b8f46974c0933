"""A federation trained party by party, one party's rows read from Parquet chunk by chunk or summed by two Dask
workers: the simulator's trees, contributions and every submitted histogram, bit for bit.

The reference is ``node.sim.fvtree.Federation`` without endorsement (the simulator); ``train_rounds`` asks each
party for its side of every level, so one party can be a ``LocalParty`` over ``ChunkedRows`` (chunks of 97 rows, so
dozens of chunks per pass) while the others hold their slots in memory.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedSums
from fgbdt_chain.node.privacy.accountant import plan
from fgbdt_chain.node.protocol.chunked_party import ChunkedSlots, DaskPart
from fgbdt_chain.node.protocol.chunked_rows import ChunkedRows, DaskChunks, LocalChunks
from fgbdt_chain.node.protocol.local_party import LocalParty, route
from fgbdt_chain.node.protocol.party_rounds import PartyWork, RoundsResult, train_rounds
from fgbdt_chain.node.protocol.verify import Claims
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, federation, prepare
from fgbdt_chain.node.sim.fvtree import LevelView, TrainResult

CHUNK = 97
Level = tuple[int, int, list[tuple[int, ...]], list[FixedSums]]


def _data(rows: int, features: int = 6, seed: int = 3) -> Dataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (X[:, 0] + 0.5 * np.nan_to_num(X[:, 1]) + rng.normal(size=rows) > 0).astype(float)
    return Dataset(X, y)


@pytest.fixture(scope="module")
def prep() -> Prepared:
    params = TrainParams(trees=6, depth=4, bins=8, voted_trees=4)  # four voted trees, then two drawn
    return prepare(_data(2400), _data(60, seed=4), params, PrepConfig(parties=3, theta=0.7, seed=1, endorse="none"))


@pytest.fixture(scope="module")
def simulated(prep: Prepared) -> tuple[TrainResult, list[LevelView]]:
    views: list[LevelView] = []
    return federation(prep, "fvtree", observer=views.append).train(), views


def _parties(prep: Prepared, chunked: dict[int, ChunkedRows]) -> list[PartyWork]:
    fitted = prep.params.fitted(prep.edges)
    out = []
    for i, (slots, y, w) in enumerate(zip(prep.party_slots(), prep.party_y(), prep.weights(), strict=True)):
        out.append(PartyWork(LocalParty(chunked.get(i, slots), y, fitted, w)))
    return out


def _train(prep: Prepared, chunked: dict[int, ChunkedRows]) -> tuple[RoundsResult, list[Level]]:
    seen: list[Level] = []
    fitted = prep.params.fitted(prep.edges)
    n_features = prep.party_slots()[0].shape[1]
    result = train_rounds(_parties(prep, chunked), fitted, n_features, "fvtree", lambda *a: seen.append(a))
    return result, seen


def _same_model(got: RoundsResult, sim: TrainResult) -> None:
    assert [t.nodes for t in got.trees] == [t.nodes for t in sim.trees]
    assert (got.phi, got.kappa, got.total, got.per_tree_total) == (sim.phi, sim.kappa, sim.total, sim.per_tree_total)


def _same_sums(a: FixedSums, b: FixedSums) -> None:
    for name in ("g_hi", "g_lo", "h_hi", "h_lo", "n"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def _same_levels(got: list[Level], views: list[LevelView], reference: list[Level] | None = None) -> None:
    assert [(t, lv, c) for t, lv, c, _ in got] == [(v.tree, v.level, v.candidates) for v in views]
    for (_, _, _, sums), view in zip(got, views, strict=True):
        for s, claims in zip(sums, view.claims, strict=True):
            mine = Claims.from_limbs(s.g_hi, s.g_lo, s.h_hi, s.h_lo, s.n)
            for name in ("g", "h", "n"):
                np.testing.assert_array_equal(getattr(mine, name), getattr(claims, name), err_msg=name)
    if reference is not None:  # and the exact limbs, level by level, the in-memory parties'
        for a, b in zip(got, reference, strict=True):
            for x, y in zip(a[3], b[3], strict=True):
                _same_sums(x, y)


def test_in_memory_parties_train_the_simulator_s_model(
    prep: Prepared, simulated: tuple[TrainResult, list[LevelView]]
) -> None:
    sim, views = simulated
    got, seen = _train(prep, {})
    _same_model(got, sim)
    _same_levels(seen, views)
    assert len(seen) > 6 and sum(len(t.nodes) for t in got.trees) > 6 * 7  # trees that split below their roots
    assert any(k for k in got.kappa) and len(set(got.phi)) == 3  # votes paid, parties told apart


def test_a_parquet_party_read_in_chunks_trains_the_same_model(
    prep: Prepared, simulated: tuple[TrainResult, list[LevelView]], tmp_path: Path
) -> None:
    sim, views = simulated
    nbins = prep.params.fitted(prep.edges).nbins
    slots = prep.party_slots()[1]
    chunks = LocalChunks(ChunkedSlots.write(tmp_path / "party1", slots, nbins, chunk_rows=CHUNK))
    assert slots.shape[0] > 5 * CHUNK
    _, reference = _train(prep, {})
    got, seen = _train(prep, {1: ChunkedRows(chunks)})
    _same_model(got, sim)
    _same_levels(seen, views, reference)


def test_a_party_on_two_dask_workers_trains_the_same_model(
    prep: Prepared, simulated: tuple[TrainResult, list[LevelView]], tmp_path: Path
) -> None:
    from distributed import Client, LocalCluster

    sim, views = simulated
    nbins = prep.params.fitted(prep.edges).nbins
    slots = prep.party_slots()[0]
    cut = slots.shape[0] // 3
    a = ChunkedSlots.write(tmp_path / "a", slots[:cut], nbins, chunk_rows=CHUNK)
    b = ChunkedSlots.write(tmp_path / "b", slots[cut:], nbins, chunk_rows=CHUNK)
    _, reference = _train(prep, {})
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        workers = sorted(client.scheduler_info()["workers"])
        parts = [
            DaskPart(str(b.path), cut, slots.shape[0] - cut, workers[1]),
            DaskPart(str(a.path), 0, cut, workers[0]),
        ]
        dask = DaskChunks(client, parts, slots.shape[1], nbins, CHUNK)
        got, seen = _train(prep, {0: ChunkedRows(dask)})
        with pytest.raises(ValueError, match="without gaps"):
            DaskChunks(client, parts[:1], slots.shape[1], nbins, CHUNK)
    _same_model(got, sim)
    _same_levels(seen, views, reference)


@pytest.mark.parametrize("min_rows", [0, 1, 5])
def test_chunked_votes_gains_and_routing_are_the_in_memory_party_s(tmp_path: Path, min_rows: int) -> None:
    rng = np.random.default_rng(7)
    n, f, nbins = 1000, 5, 9
    slots = rng.integers(0, nbins, size=(n, f), dtype=np.uint8)
    slots[:, 2] = np.where(rng.random(n) < 0.9, 4, slots[:, 2])  # a feature with a dominant slot
    slots[:, 3] = np.where(slots[:, 3] == 6, 7, slots[:, 3])  # and one with a slot no row takes
    slots[:, 4] = np.where(rng.random(n) < 0.3, 3, 0).astype(np.uint8)  # and a binary one (two slots)
    g, h = rng.normal(size=n), rng.random(n) + 0.1
    k_of_row = rng.integers(-1, 4, size=n)
    memory = BinnedRows(slots, nbins)
    chunked = ChunkedRows(LocalChunks(ChunkedSlots.write(tmp_path / "s", slots, nbins, chunk_rows=CHUNK)))
    want = memory.best_gains(k_of_row, 4, g, h, 0.1, min_rows)
    got = chunked.best_gains(k_of_row, 4, g, h, 0.1, min_rows)
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(want).sum() > 10
    node_id = rng.integers(1, 8, size=n)
    splits = {1: (2, 4), 3: (0, 3), 6: (4, 0), 7: (1, 5)}
    np.testing.assert_array_equal(chunked.route(node_id, splits), route(slots, node_id, splits))


def test_a_chunked_party_refuses_what_needs_its_slots_whole(tmp_path: Path) -> None:
    slots = np.zeros((10, 2), dtype=np.uint8)
    rows = ChunkedRows(LocalChunks(ChunkedSlots.write(tmp_path / "s", slots, 4, chunk_rows=4)))
    with pytest.raises(NotImplementedError, match="chunk by chunk"):
        _ = rows.slots
    with pytest.raises(ValueError, match="shape"):
        rows.best_gains(np.zeros(11, dtype=np.int64), 1, np.zeros(11), np.ones(11), 0.1)
    bad = ChunkedSlots.write(tmp_path / "bad", np.full((10, 2), 5, dtype=np.uint8), 4, chunk_rows=4)
    with pytest.raises(ValueError, match="out of range for 4 slots"):
        ChunkedRows(LocalChunks(bad))


def test_what_a_task_trained_party_by_party_does_not_play_is_refused_by_name() -> None:
    rng = np.random.default_rng(0)
    slots, y = rng.integers(0, 5, size=(50, 3), dtype=np.uint8), (rng.random(50) < 0.5).astype(float)
    params = TrainParams(trees=1, depth=2, bins=4)
    work = PartyWork(LocalParty(slots, y, params))
    with pytest.raises(ValueError, match="unknown algorithm 'allfeatures'"):
        train_rounds([work, work], params, 3, "allfeatures")
    with pytest.raises(ValueError, match="contribution 'loo'"):
        train_rounds([work, work], dataclasses.replace(params, contribution="loo"), 3)
    with pytest.raises(ValueError, match="0 parties"):
        train_rounds([], params, 3)
    private = LocalParty(slots, y, params, privacy=plan(1.0, 1e-6, params.trees, params.depth))
    with pytest.raises(ValueError, match="without differential privacy"):
        PartyWork(private)
    greedy = LocalParty(slots, y, params)
    greedy.attack = Attack("gradients", 2.0)
    with pytest.raises(ValueError, match="without attacks"):
        PartyWork(greedy)


@pytest.mark.parametrize(
    "params",
    [
        TrainParams(trees=3, depth=3, bins=8, hessian="count", tie_break="index"),
        TrainParams(trees=3, depth=3, bins=8, objective="regression", voted_trees=2),
    ],
    ids=["count-hessians-index-ties", "regression"],
)
def test_a_chunked_party_follows_the_task_s_loss_and_rules(params: TrainParams, tmp_path: Path) -> None:
    prep = prepare(_data(900, seed=5), _data(60, seed=6), params, PrepConfig(parties=3, seed=3, endorse="none"))
    sim = federation(prep, "pvtree").train()
    fitted = prep.params.fitted(prep.edges)
    slots = prep.party_slots()[0]
    chunked = ChunkedRows(LocalChunks(ChunkedSlots.write(tmp_path / "p0", slots, fitted.nbins, chunk_rows=CHUNK)))
    works = [PartyWork(LocalParty(chunked, prep.party_y()[0], fitted))]
    works += [
        PartyWork(LocalParty(s, y, fitted)) for s, y in zip(prep.party_slots()[1:], prep.party_y()[1:], strict=True)
    ]
    _same_model(train_rounds(works, fitted, slots.shape[1], "pvtree"), sim)


def test_parties_above_the_exact_size_train_the_simulator_s_estimates() -> None:
    """18 parties: the split Shapley values are estimated from the task seed, party by party as in the simulator."""
    params = TrainParams(trees=2, depth=2, bins=8)
    config = PrepConfig(parties=18, theta=0.7, seed=2, endorse="none", shapley_seed=99)
    prep = prepare(_data(1800), _data(60, seed=4), params, config)
    sim = federation(prep, "fvtree").train()
    fitted = prep.params.fitted(prep.edges)
    n_features = prep.party_slots()[0].shape[1]
    got = train_rounds(_parties(prep, {}), fitted, n_features, "fvtree", shapley_seed=99)
    _same_model(got, sim)
    other = train_rounds(_parties(prep, {}), fitted, n_features, "fvtree", shapley_seed=100)
    assert [t.nodes for t in other.trees] == [t.nodes for t in sim.trees] and other.phi != sim.phi
