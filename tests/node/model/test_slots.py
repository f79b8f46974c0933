"""Histograms as wide as the common edges need (``ledger.spec.edges.histogram_slots``, ``TrainParams.fitted``): the same
model, contributions and verdicts as histograms of ``bins + 1`` slots, on data whose features all have fewer than
``bins`` distinct values."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.model.trees import slot_widths
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, federation, prepare
from fgbdt_chain.node.sim.fvtree import Federation, TrainResult


def _few_levels(seed: int, rows: int = 2400) -> tuple[Dataset, Dataset]:
    """Integer counts, one-hot, constant-heavy and missing-value columns, none with 16 distinct values; the label
    depends on several of them."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(2.0, rows).astype(float)
    onehot = (rng.random(rows) < 0.3).astype(float)
    mostly_zero = np.where(rng.random(rows) < 0.95, 0.0, rng.integers(1, 4, rows)).astype(float)
    missing = np.where(rng.random(rows) < 0.2, np.nan, rng.integers(0, 6, rows).astype(float))
    constant = np.ones(rows)
    X = np.column_stack([counts, onehot, mostly_zero, missing, constant])
    logit = 0.6 * counts - 1.5 * onehot + np.nan_to_num(missing, nan=2.0) * 0.3 - 2.0
    y = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(float)
    cut = rows * 4 // 5
    names = ["counts", "onehot", "mostly_zero", "missing", "constant"]
    return Dataset(X[:cut], y[:cut], names, "few-levels"), Dataset(X[cut:], y[cut:], names, "few-levels-test")


def _train(prep: Prepared, params: TrainParams) -> TrainResult:
    """``experiment.federation``'s federation with the given histogram width."""
    return Federation(
        prep.party_slots(),
        prep.party_y(),
        params,
        algo="fvtree",
        party_weights=prep.weights(),
        endorsement=prep.config.endorsement(prep.params),
        estimators=prep.estimators(),
        widths=slot_widths(prep.edges),
        keep_levels=True,
    ).train()


@pytest.mark.parametrize("seed", [0, 1])
def test_narrow_histograms_train_the_same_model(seed: int) -> None:
    train, test = _few_levels(seed)
    prep = prepare(train, test, TrainParams(trees=6, depth=4, bins=16, min_rows=5), PrepConfig(parties=3, seed=seed))
    fitted = prep.params.fitted(prep.edges)
    assert fitted.nbins == max(len(e) for e in prep.edges) + 2 < prep.params.nbins  # the test bites: narrower
    wide, narrow = _train(prep, prep.params), _train(prep, fitted)
    assert narrow.trees == wide.trees
    assert any(not n.is_leaf for t in narrow.trees for n in t.nodes.values())
    assert (narrow.phi, narrow.kappa, narrow.total, narrow.credits) == (wide.phi, wide.kappa, wide.total, wide.credits)
    assert narrow.refusals == wide.refusals
    # what the parties send shrinks with the width
    assert sum(narrow.comm_bytes) < sum(wide.comm_bytes)
    # and the simulator trains with the narrow width
    assert federation(prep, "fvtree").params.nbins == fitted.nbins


def test_edges_beyond_the_bins_are_refused() -> None:
    with pytest.raises(ValueError, match="3 cut points on a feature do not fit 3 bins"):
        TrainParams(bins=3).fitted([[0.1, 0.2, 0.3]])
    assert TrainParams(bins=3).fitted([[0.1, 0.2]]).bins == 3
    assert TrainParams(bins=16).fitted([[], []]).bins == 2  # constant features: two value bins at least
