"""A party from its raw Parquet rows, chunk by chunk: its binning sketch, its slots, its distribution weights w* and a
whole FV-tree model, each the in-memory party's (the simulator's) to the last bit; its configuration refused by name
when wrong."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.data.parquet import write_rows
from fgbdt_chain.node.privacy.binning import encode_sketch, local_sketch, sketch_rng
from fgbdt_chain.node.privacy.psd import build_psd, psd_rng
from fgbdt_chain.node.privacy.weights import distribution_weights
from fgbdt_chain.node.protocol.chunked_party import DaskPart
from fgbdt_chain.node.protocol.endorsement import estimators_for
from fgbdt_chain.node.protocol.local_party import LocalParty
from fgbdt_chain.node.protocol.parquet_party import ParquetParty
from fgbdt_chain.node.protocol.party_rounds import PartyWork, train_rounds
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, federation, prepare


def _data(rows: int, features: int = 5, seed: int = 11) -> Dataset:
    rng = np.random.default_rng(seed)
    X = rng.lognormal(size=(rows, features))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(np.log(X[:, 0])) + rng.normal(size=rows) > 0).astype(float)
    return Dataset(X, y)


@pytest.fixture(scope="module")
def prep() -> Prepared:
    params = TrainParams(trees=4, depth=3, bins=8)
    return prepare(_data(1500), _data(60, seed=12), params, PrepConfig(parties=3, theta=0.6, seed=2, endorse="none"))


def test_a_party_from_its_raw_parquet_rows_trains_the_simulator_s_model(prep: Prepared, tmp_path: Path) -> None:
    idx = prep.parts[2]
    raw = prep.train.subset(idx)
    path = write_rows(tmp_path / "raw", raw.X, raw.y, rows_per_file=150, row_group_rows=40)
    party = ParquetParty(path, tmp_path / "slots", chunk_rows=64)
    fitted = prep.params.fitted(prep.edges)
    slots = party.bin(prep.edges, fitted.nbins)
    assert len(list(slots.chunks())) > 5
    np.testing.assert_array_equal(np.vstack([s for _, s in slots.chunks()]), prep.party_slots()[2])
    low, high = prep.ranges
    for epsilon in (1.0, 0.1):
        sketch = local_sketch(raw.X, low, high, epsilon=epsilon, rng=sketch_rng(5, 2))
        chunked = party.sketch(low, high, epsilon=epsilon, rng=sketch_rng(5, 2))
        assert encode_sketch(chunked) == encode_sketch(sketch)
        assert sum(len(f.counts) for f in chunked.features) > 2 * raw.X.shape[1]  # both stages, every feature
    psds = prep.psds()
    c = prep.config
    lows, highs = np.append(low, prep.label_range[0]), np.append(high, prep.label_range[1])
    epsilon = c.psd_budget_epsilon(prep.params)
    own = party.psd(
        lows,
        highs,
        depth=c.psd_depth,
        max_rows=c.psd_max_rows,
        epsilon=epsilon,
        rng=psd_rng(c.noise_seed, 2),
        label_levels=prep.label_levels,
    )
    assert own == psds[2]
    # a deeper PSD, whose nodes stop on their noisy counts: one pass over the chunks per level
    deep = party.psd(lows, highs, depth=6, max_rows=40, epsilon=epsilon, rng=psd_rng(7, 2), label_levels=1)
    assert deep == build_psd(
        raw.X, raw.y, lows, highs, depth=6, max_rows=40, epsilon=epsilon, rng=psd_rng(7, 2), label_levels=1
    )
    assert deep.num_leaves > 8
    np.testing.assert_array_equal(distribution_weights(raw.X, raw.y, psds, prep.params.delta)[1], prep.weights()[2])
    w = party.weights(psds, prep.params.delta)
    np.testing.assert_array_equal(w, prep.weights()[2])
    assert len(np.unique(w)) > 1  # weights that differ from row to row
    # a verifier's view of every party: W and each row's leaf in every PSD, the in-memory estimators' arrays
    W, w_star, leaves = party.distribution(psds, prep.params.delta)
    want_W = distribution_weights(raw.X, raw.y, psds, prep.params.delta)[0]
    np.testing.assert_array_equal(W, want_W)
    np.testing.assert_array_equal(w_star, w)
    scales = [0.5, 1.0, 2.0]
    for got_e, want_e in zip(
        party.estimators(W, leaves, psds, scales), estimators_for(raw.X, raw.y, want_W, psds, scales), strict=True
    ):
        for name in ("weight", "leaf", "leaf_rows", "psd_scale", "psd_total"):
            np.testing.assert_array_equal(getattr(got_e, name), getattr(want_e, name))

    sim = federation(prep, "fvtree").train()
    works = [
        PartyWork(LocalParty(s, y, fitted, wi))
        for s, y, wi in zip(prep.party_slots()[:2], prep.party_y()[:2], prep.weights()[:2], strict=True)
    ]
    works.append(PartyWork(party.party(fitted, w, raw.X.shape[1])))
    got = train_rounds(works, fitted, raw.X.shape[1], "fvtree")
    assert [t.nodes for t in got.trees] == [t.nodes for t in sim.trees]
    assert (got.phi, got.kappa, got.total) == (sim.phi, sim.kappa, sim.total)


def test_a_parquet_party_s_configuration(tmp_path: Path) -> None:
    config: dict[str, Any] = {
        "rows": str(tmp_path / "rows"),
        "slots": str(tmp_path / "slots"),
        "chunk_rows": 1000,
        "scheduler": "tcp://10.0.0.2:8786",
        "parts": [{"path": "/data/a", "start": 0, "rows": 10}, {"path": "/data/b", "start": 10, "rows": 5}],
    }
    party = ParquetParty.of(config)
    assert party.chunk_rows == 1000 and party.scheduler == "tcp://10.0.0.2:8786"
    assert party.parts == (DaskPart("/data/a", 0, 10), DaskPart("/data/b", 10, 5))
    with pytest.raises(ValueError, match=r"unknown Parquet party setting\(s\) chunks"):
        ParquetParty.of({**config, "chunks": 5})
    with pytest.raises(ValueError, match="needs 'slots'"):
        ParquetParty.of({"rows": "r"})
    with pytest.raises(ValueError, match=r"parts\[1\]: needs path, start and rows"):
        ParquetParty.of({**config, "parts": [config["parts"][0], {"path": "/x"}]})
    with pytest.raises(ValueError, match="need the scheduler"):
        ParquetParty.of({k: v for k, v in config.items() if k != "scheduler"})
    with pytest.raises(ValueError, match="chunk_rows must be at least 1"):
        ParquetParty.of({**config, "chunk_rows": 0})
    with pytest.raises(FileNotFoundError, match="no such Parquet file or directory"):
        ParquetParty.of(config).features()


def test_the_quickstart_s_settings_are_taken() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "quickstart.md").read_text()
    section = text.split("### A party whose rows outgrow one process", 1)[1]
    block = section.split("```toml\n", 1)[1].split("```", 1)[0]
    party = ParquetParty.of(tomllib.loads(block))
    assert party.scheduler is not None and [p.start for p in party.parts] == [0, party.parts[0].rows]
