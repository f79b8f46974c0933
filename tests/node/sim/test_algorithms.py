"""The registry of the simulator's algorithms (``node.sim.algorithms``): one registration is what ``run`` trains,
what ``fgbdt simulate --algo`` offers and checks, and what its help lists; a run imports its own trainer only."""

from __future__ import annotations

import argparse
import subprocess
import sys

import numpy as np
import pytest

from fgbdt_chain.deploy.cmd_simulate import register as register_simulate
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines.seed_systems import SEED_ALGORITHMS, TREE_MODELS
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.sim.algorithms import (
    ALGORITHMS,
    LEAVES,
    PROTOCOL,
    REFUSED,
    REGISTRY,
    SUMMARY_BASELINES,
    Algorithm,
    Job,
    Trained,
    algorithm,
    budget_refusal,
    register,
)
from fgbdt_chain.node.sim.experiment import PrepConfig, default_shape, prepare, run
from fgbdt_chain.node.sim.fvtree import ALGORITHMS as FEDERATION_VARIANTS


def _simulate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    register_simulate(parser.add_subparsers())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["simulate"]


def test_the_command_line_offers_and_describes_every_registered_algorithm() -> None:
    simulate = _simulate_parser()
    algo = next(a for a in simulate._actions if a.dest == "algo")
    assert tuple(algo.choices or ()) == ALGORITHMS == tuple(REGISTRY)
    help_text = " ".join((algo.help or "").split())
    for spec in REGISTRY.values():
        assert f"{spec.name} ({' '.join(spec.summary.split())})" in help_text


def test_what_each_family_needs_and_reports() -> None:
    """The protocol's variants are ``Federation``'s, with contributions and FV-tree's plan; the seed systems refuse a
    budget and save models where their trees are on the task's bins; only LightGBM trains the summary's baselines."""
    assert {n for n, a in REGISTRY.items() if a.contributions} == set(FEDERATION_VARIANTS)
    assert {n for n, a in REGISTRY.items() if a.privacy == PROTOCOL} == set(FEDERATION_VARIANTS)
    assert [n for n, a in REGISTRY.items() if a.privacy == LEAVES] == ["randomsplit"]
    assert {n for n, a in REGISTRY.items() if a.privacy == REFUSED} == set(SEED_ALGORITHMS)
    assert [n for n, a in REGISTRY.items() if a.psd_weights] == ["fvtree"]
    assert {n for n in SEED_ALGORITHMS if algorithm(n).no_model is None} == set(TREE_MODELS)
    assert SUMMARY_BASELINES == ("centralized", "lightgbm", "lightgbm-defaults")
    assert default_shape("randomsplit") == (200, 4)
    assert default_shape("fvtree") == (TrainParams.trees, TrainParams.depth)
    assert budget_refusal("simfl", 1.0) == "simfl has no differential privacy for what it shares"
    assert budget_refusal("simfl", float("inf")) is None and budget_refusal("centralized", 1.0) is None


def test_a_name_is_registered_once_and_an_unknown_one_is_named() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(REGISTRY["fvtree"])
    with pytest.raises(ValueError, match=r"unknown algorithm 'xgboost'; choose one of fvtree, pvtree"):
        algorithm("xgboost")


def constant(job: Job) -> Trained:
    """A trainer registered by the test below: it predicts the training rows' mean label."""
    job.report["test_rmse"] = float(np.sqrt(np.mean((job.prep.test.y - job.prep.train.y.mean()) ** 2)))
    return Trained(0.25)


def test_one_registration_adds_an_algorithm_to_run() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] + rng.normal(size=200)
    train, test = Dataset(X[:150], y[:150]), Dataset(X[150:], y[150:])
    prep = prepare(train, test, TrainParams(trees=2, depth=2, bins=4, objective="regression"), PrepConfig(parties=2))
    register(Algorithm("mean", "the training rows' mean label", (__name__, "constant")))
    try:
        report, model, result = run(prep, "mean")
    finally:
        del REGISTRY["mean"]
    assert report["algo"] == "mean" and report["train_seconds"] == 0.25 and model is None and result is None
    assert report["test_rmse"] == pytest.approx(float(np.sqrt(np.mean((test.y - train.y.mean()) ** 2))))
    assert [pp["rows"] for pp in report["per_party"]] == [len(idx) for idx in prep.parts]


def test_a_run_of_fvtree_imports_no_seed_system_and_no_lightgbm() -> None:
    """Trainers are imported when their algorithm first runs: FV-tree loads neither SimFL and the other seed systems
    nor LightGBM (whose import also loads scikit-learn)."""
    code = (
        "import sys, numpy as np\n"
        "from fgbdt_chain.ledger.spec.train_params import TrainParams\n"
        "from fgbdt_chain.node.data.loaders import Dataset\n"
        "from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run\n"
        "rng = np.random.default_rng(0)\n"
        "X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0).astype(float)\n"
        "prep = prepare(Dataset(X[:150], y[:150]), Dataset(X[150:], y[150:]), TrainParams(trees=2, depth=2, bins=4),"
        " PrepConfig(parties=2))\n"
        "report, model, result = run(prep, 'fvtree')\n"
        "assert result is not None\n"
        "names = ('simfl', 'tfl', 'federboost', 'fedxgbllr')\n"
        "print(sorted(m for m in sys.modules if m == 'lightgbm' or m.split('.')[-1] in names"
        " or m.endswith('lightgbm_trainers')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
