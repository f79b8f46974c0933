"""The seed systems in the harness (``node.baselines.seed_systems``, ``experiment.run``): every ``--algo`` of the
papers runs
on the same partition, bins and test rows as FV-tree, on binary and regression data with missing values, and its
report says what it predicted and what it sent."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines.seed_systems import SEED_ALGORITHMS, TREE_MODELS, train_seed
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.sim.algorithms import ALGORITHMS
from fgbdt_chain.node.sim.experiment import PrepConfig, evaluate, prepare, run, seed_inputs


def _data(task: str, rows: int = 2_400, seed: int = 5) -> tuple[Dataset, Dataset]:
    """Six features: a signal in the first two, a heavy tail, an integer count, missing values, a constant."""
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.normal(size=rows),
            rng.normal(size=rows),
            rng.pareto(1.5, size=rows),
            rng.poisson(2.0, size=rows).astype(float),
            np.where(rng.random(rows) < 0.2, np.nan, rng.normal(size=rows)),
            np.ones(rows),
        ]
    )
    signal = X[:, 0] - 0.7 * X[:, 1] + 0.2 * np.minimum(X[:, 3], 5)
    y = (signal + 0.5 * rng.normal(size=rows) > 0).astype(float) if task == "binary" else signal
    cut = rows * 3 // 4
    return Dataset(X[:cut], y[:cut]), Dataset(X[cut:], y[cut:])


@pytest.mark.parametrize("algo", SEED_ALGORITHMS)
@pytest.mark.parametrize("objective", ["binary", "regression"])
def test_every_seed_system_runs_in_the_harness(algo: str, objective: str) -> None:
    """The report's metrics are those of the system's own predictions on the common test rows, better than a
    constant, and its communication has one figure per party; trees on the task's bins come back as a model."""
    train, test = _data(objective)
    params = TrainParams(trees=12, depth=3, bins=8, objective=objective)  # type: ignore[arg-type]
    prep = prepare(train, test, params, PrepConfig(parties=3, theta=0.7, seed=2))
    report, model, result = run(prep, algo)
    assert report["algo"] == algo and result is None
    direct = train_seed(algo, seed_inputs(prep))
    assert {k: report[k] for k in evaluate(params, test.y, direct.test_pred)} == evaluate(
        params, test.y, direct.test_pred
    )  # deterministic for a seed, and what the report shows
    if objective == "binary":
        assert report["test_auc"] > 0.75
    else:
        assert report["test_rmse"] < 0.8 * float(np.std(test.y))
    comm = report["comm_bytes_per_party_per_tree"]
    assert len(comm) == 3 and all(c > 0 for c in comm) and report["comm_formula"]
    if algo in TREE_MODELS:
        assert model is not None
        np.testing.assert_allclose(model.predict(test.X), direct.test_pred, rtol=0, atol=1e-9)
    else:
        assert model is None


def test_seed_systems_are_algorithms_and_refuse_privacy() -> None:
    """They are ``run``'s algorithms, and a private task is refused before any work: they add no noise."""
    assert set(SEED_ALGORITHMS) <= set(ALGORITHMS)
    train, test = _data("binary", rows=400)
    params = TrainParams(trees=2, depth=2, bins=4)
    prep = prepare(train, test, params, PrepConfig(parties=2, theta=0.5, seed=0, epsilon=1.0))
    for algo in SEED_ALGORITHMS:
        with pytest.raises(ValueError, match="no differential privacy"):
            run(prep, algo)
    with pytest.raises(ValueError, match="unknown seed system"):
        train_seed("xgboost", seed_inputs(prep))
    assert math.isfinite(prep.config.epsilon)
