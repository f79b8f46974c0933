"""The Python API: ``fgbdt_chain.train``, ``Model`` and the scikit-learn estimators.

``train`` must give the model and contributions ``fgbdt simulate``'s ``run`` gives on the same parties and seed, bit
for bit; and the estimators must pass scikit-learn's own checks. (The README's and the quickstart's examples run in
``tests/docs/test_quickstarts.py``.)
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.impute import SimpleImputer
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import estimator_checks_generator

import fgbdt_chain
from fgbdt_chain import FGBDTClassifier, FGBDTRegressor, Model, train
from fgbdt_chain.ledger.spec.reference import MAX_PARTIES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.protocol.shapley_cost import SlowShapleyWarning
from fgbdt_chain.node.sim.engine import PARAMS, parse_params
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run

SMALL = {"num_trees": 6, "max_depth": 3, "min_data_in_leaf": 5, "learning_rate": 0.3}


def make_data(n: int = 900, features: int = 5, seed: int = 0, task: str = "binary") -> tuple[np.ndarray, np.ndarray]:
    """Rows with a learnable target and 3% missing values."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, features))
    signal = X[:, 0] + 0.8 * X[:, 1] - 0.5 * X[:, 2] + 0.3 * rng.normal(size=n)
    X[rng.random(X.shape) < 0.03] = np.nan
    y = (signal > 0).astype(np.float64) if task == "binary" else 3.0 * signal + 1.0
    return X, y


def split(X: np.ndarray, y: np.ndarray, k: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(X[idx], y[idx]) for idx in np.array_split(np.arange(len(y)), k)]


# ------------------------------------------------------------------------------------- train equals simulate's run


@pytest.mark.parametrize("objective", ["binary", "regression"])
def test_train_gives_simulates_model_on_the_same_split(objective: str) -> None:
    X, y = make_data(task=objective)
    names = [f"col{j}" for j in range(X.shape[1])]
    train_set, test_set = Dataset(X[:700], y[:700], names), Dataset(X[700:], y[700:], names)
    params = TrainParams(trees=6, depth=3, min_rows=5, learning_rate=0.3, objective=objective)  # type: ignore[arg-type]
    prep = prepare(train_set, test_set, params, PrepConfig(parties=3, theta=0.7, seed=11))
    report, expected, _ = run(prep, "fvtree")
    assert expected is not None

    model = train(
        {**SMALL, "objective": objective, "seed": 11},
        [(train_set.X[idx], train_set.y[idx]) for idx in prep.parts],
        feature_names=names,
        valid_set=(test_set.X, test_set.y),
    )
    assert model.trees == expected.trees and model.edges == expected.edges
    np.testing.assert_array_equal(model.predict(test_set.X), expected.predict(test_set.X))
    assert model.contributions == report["contributions"]
    assert model.report is not None
    for key in ("test_error", "test_auc", "test_rmse", "per_party", "endorsement", "comm_bytes_per_party"):
        assert model.report.get(key) == report.get(key), key
    assert model.report["theta"] is None and model.meta["theta"] is None  # no skew rule was applied
    assert model.meta["parties"] == 3 and model.meta["seed"] == 11


def test_predict_is_lightgbms_probability_for_binary_models() -> None:
    X, y = make_data()
    model = train(SMALL, split(X, y))
    proba = model.predict(X)
    assert proba.dtype == np.float64 and np.all((proba > 0) & (proba < 1))
    np.testing.assert_array_equal(proba, model.predict_proba(X))
    np.testing.assert_array_equal(model.predict(X, raw_score=True), model.predict_raw(X))
    assert np.mean((proba > 0.5) == (y > 0.5)) > 0.85


def test_sparse_parties_equal_dense_and_keep_stored_nan() -> None:
    X, y = make_data()
    X = np.where(np.abs(X) < 0.5, 0.0, X)  # zeros to leave out of the sparse matrices
    dense = train(SMALL, split(X, y))
    sparse = train(SMALL, [(sp.csr_matrix(a), b) for a, b in split(X, y)])
    assert sparse.trees == dense.trees and sparse.edges == dense.edges
    np.testing.assert_array_equal(sparse.predict(sp.csc_matrix(X)), dense.predict(X))
    nan_row = sp.csr_matrix(np.full((1, X.shape[1]), np.nan))
    np.testing.assert_array_equal(dense.predict(nan_row), dense.predict(np.full((1, X.shape[1]), np.nan)))


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    X, y = make_data()
    names = ["age", "income", "visits", "score", "days"]
    model = train(SMALL, split(X, y), feature_names=names)
    path = tmp_path / "m.json"
    model.save(path)
    saved = json.loads(path.read_text())
    assert "contributions" not in saved and "report" not in saved
    loaded = Model.load(path)
    assert loaded.feature_names == names and loaded.trees == model.trees
    assert loaded.contributions is None and loaded.report is None
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded == model  # the attributes of training do not count in equality


def test_contributions_are_simulates_figures() -> None:
    X, y = make_data()
    model = train(SMALL, split(X, y, 4))
    assert model.contributions is not None and [c["party"] for c in model.contributions] == [0, 1, 2, 3]
    for c in model.contributions:
        assert c["total"] == int(c["total_fixed"]) / 10**18 and 0.0 <= c["share"] <= 1.0
    assert sum(c["share"] for c in model.contributions) == pytest.approx(1.0)


def test_feature_importance() -> None:
    X, y = make_data()
    model = train(SMALL, split(X, y))
    splits = [n for t in model.trees for n in t.nodes.values() if not n.is_leaf]
    counts = model.feature_importance("split")
    assert counts.sum() == len(splits) and counts[0] == sum(n.feature == 0 for n in splits)
    gains = model.feature_importance("gain")
    assert gains.sum() == pytest.approx(sum(int(n.gain_fixed or 0) for n in splits) / 10**18)
    assert gains[:3].min() > gains[3:].max()  # the target depends on features 0-2 only
    with pytest.raises(ValueError, match="importance_type must be one of split, gain"):
        model.feature_importance("cover")


# ----------------------------------------------------------------------------------------------------- params


def test_params_aliases_map_to_one_field() -> None:
    for names, field in (
        (("num_iterations", "num_trees", "n_estimators", "num_boost_round"), "trees"),
        (("lambda_l2", "reg_lambda", "lambda"), "lam"),
        (("max_bin", "bins"), "bins"),
        (("min_data_in_leaf", "min_child_samples", "min_data"), "min_rows"),
    ):
        for name in names:
            assert parse_params({name: 7}).train == {field: 7}, name
    assert parse_params({"random_state": 3}).prep == {"seed": 3}
    assert parse_params({"objective": "mse"}).train_params().objective == "regression"
    assert parse_params({"max_depth": None}).train == {}  # None keeps the default
    assert parse_params({"psd_epsilon": float("inf")}).prep_config(2).psd_epsilon == float("inf")
    assert parse_params({"algo": "pvtree"}).algo == "pvtree"
    # every key reaches a real field of its destination
    for p in PARAMS:
        if p.target == "train":
            assert p.field in TrainParams.__dataclass_fields__
        elif p.target == "prep":  # the declared schema's and label range's two keys make one field together
            declared = {"feature_ranges", "integer_features", "label_min", "label_max"}
            assert p.field in {*PrepConfig.__dataclass_fields__, *declared}
    schema = parse_params({"feature_ranges": [(0, 1), (2, 5)], "integer_features": [True, False]}).prep_config(2)
    assert schema.schema is not None and schema.schema.ranges == ((0.0, 1.0), (2.0, 5.0))
    assert schema.schema.integers == (True, False)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"num_leaves": 31}, r"unknown parameter 'num_leaves'; valid keys \(aliases\): objective .*max_depth"),
        ({"theta": 0.5}, "unknown parameter 'theta' .*already split"),
        ({"num_trees": 5, "n_estimators": 6}, "'num_trees' and 'n_estimators' both set num_iterations"),
        ({"max_depth": 2.5}, "'max_depth' must be int, got 2.5"),
        ({"learning_rate": "0.1"}, "'learning_rate' must be float"),
        ({"psd_label_first": 1}, "'psd_label_first' must be bool"),
        ({"hessian": "second"}, "'hessian': unknown value 'second'; use one of hessian, count"),
        ({"contribution": "banzhaf"}, "'contribution': unknown value 'banzhaf'; use one of shapley, loo"),
        ({"objective": "multiclass"}, "unknown objective 'multiclass'"),
        ({"max_depth": 0}, r"depth must be in \[1, 8\], got 0 \(given: max_depth=0\)"),
    ],
)
def test_bad_params_are_named(params: dict[str, Any], message: str) -> None:
    X, y = make_data(n=200)
    with pytest.raises(ValueError, match=message):
        train(params, split(X, y, 2))


# ----------------------------------------------------------------------------------------------------- errors


def test_bad_parties_get_clear_errors() -> None:
    X, y = make_data(n=400)
    ok = split(X, y, 2)
    (X0, y0), (X1, y1) = ok
    y_nan = y0.copy()
    y_nan[5] = np.nan
    X_inf = X0.copy()
    X_inf[2, 1] = np.inf
    cases: list[tuple[Any, type[Exception], str]] = [
        ([ok[0]], ValueError, f"1 party: a federation has 2 to {MAX_PARTIES} parties"),
        (ok * (MAX_PARTIES // 2 + 1), ValueError, f"{MAX_PARTIES + 2} parties: .*MAX_PARTIES = {MAX_PARTIES}"),
        ([ok[0], (X1[:0], y1[:0])], ValueError, "party 1 has no rows"),
        ([ok[0], (X1[:, :3], y1)], ValueError, "party 1 has 3 features but party 0 has 5"),
        ([ok[0], (X1, y1[:-1])], ValueError, "party 1: X has 200 rows but y has 199 labels"),
        ([ok[0], (X1[:, 0], y1)], ValueError, r"party 1: X must be a 2-D array .*shape \(200,\)"),
        ([(X0, y_nan), ok[1]], ValueError, "party 0: y has a missing or infinite label .*row 5"),
        ([(X_inf, y0), ok[1]], ValueError, r"party 0: X contains inf \(first at row 2, feature 1\)"),
        ([(X0, np.ones(200)), (X1, np.ones(200))], ValueError, "every label is 1: task='binary' needs both classes"),
        ([(X0, 2 * y0 - 1), ok[1]], ValueError, "party 0: y: the binary objective needs labels 0 and 1"),
        ((X0, y0), TypeError, r"parties must be a list of \(X, y\) pairs"),
        ([ok[0], X1], TypeError, r"party 1: expected an \(X, y\) pair"),
        ([(np.array([["a"] * 5] * 200), y0), ok[1]], ValueError, "party 0: X: values must be numbers"),
    ]
    for parties, kind, message in cases:
        with pytest.raises(kind, match=message):
            train(SMALL, parties)
    with pytest.raises(ValueError, match="feature_names: 2 names for 5 features"):
        train(SMALL, ok, feature_names=["a", "b"])
    with pytest.raises(ValueError, match="valid_set X has 4 features but the parties have 5"):
        train(SMALL, ok, valid_set=(X0[:, :4], y0))
    # one class in one party alone is fine: a skewed split gives exactly that
    assert train(SMALL, [(X0[y0 == 1], y0[y0 == 1]), (X1, y1)]).trees


def test_model_predict_checks_the_feature_count() -> None:
    X, y = make_data()
    model = train(SMALL, split(X, y))
    with pytest.raises(ValueError, match="X has 4 features, the model expects 5"):
        model.predict(X[:, :4])


# ----------------------------------------------------------------------------------------------------- pandas


def test_pandas_frames_name_the_features() -> None:
    pd = pytest.importorskip("pandas", reason="pandas is optional; the frame path needs it installed")
    X, y = make_data()
    columns = ["age", "income", "visits", "score", "days"]
    frames = [(pd.DataFrame(a, columns=columns), pd.Series(b)) for a, b in split(X, y)]
    model = train(SMALL, frames)
    assert model.feature_names == columns
    np.testing.assert_array_equal(model.predict(pd.DataFrame(X, columns=columns)), train(SMALL, split(X, y)).predict(X))
    swapped = [frames[0], (frames[1][0][columns[::-1]], frames[1][1]), frames[2]]
    with pytest.raises(ValueError, match=r"party 1's columns .* differ from party 0's"):
        train(SMALL, swapped)
    text = frames[0][0].assign(city="x")
    with pytest.raises(ValueError, match=r"columns \['city'\] are not numeric"):
        train(SMALL, [(text, frames[0][1]), (text, frames[1][1][: len(text)])])

    clf = FGBDTClassifier(n_estimators=4, max_depth=3, parties=3).fit(pd.DataFrame(X, columns=columns), y)
    assert list(clf.feature_names_in_) == columns and clf.model_.feature_names == columns


# ------------------------------------------------------------------------------------------------- estimators

CHECKED = [
    FGBDTClassifier(n_estimators=10, max_depth=3, min_child_samples=5),
    FGBDTRegressor(n_estimators=20, max_depth=3, learning_rate=0.3, min_child_samples=5),
]


def _check_name(check: Any) -> str:
    return str(check.func.__name__ if isinstance(check, functools.partial) else check.__name__)


SKLEARN_CHECKS = [
    pytest.param(estimator, check, id=f"{type(estimator).__name__}-{_check_name(check)}")
    for checked in CHECKED
    for estimator, check in estimator_checks_generator(checked, mark=None)
    # needs SCIPY_ARRAY_API=1 before scipy is imported, or scikit-learn skips it: run in a subprocess below
    if _check_name(check) != "check_array_api_input"
]


@pytest.mark.filterwarnings("ignore:Can't check dok sparse matrix:UserWarning")  # scikit-learn's own note
@pytest.mark.parametrize(("estimator", "check"), SKLEARN_CHECKS)
def test_sklearn_check_estimator(estimator: Any, check: Any) -> None:
    """Every check scikit-learn yields for these estimators (``check_array_api_input`` in a fresh interpreter
    below, where it can run)."""
    check(estimator)


def test_sklearn_array_api_check_with_scipy_array_api() -> None:
    """``check_array_api_input`` needs ``SCIPY_ARRAY_API=1`` before scipy is first imported: a fresh interpreter."""
    code = (
        "from sklearn.utils.estimator_checks import check_estimator\n"
        "from fgbdt_chain.node.sim.sklearn import FGBDTClassifier, FGBDTRegressor\n"
        "for est in (FGBDTClassifier(n_estimators=3, max_depth=2), FGBDTRegressor(n_estimators=3, max_depth=2)):\n"
        "    for r in check_estimator(est, on_fail=None):\n"
        "        if r['check_name'] == 'check_array_api_input':\n"
        "            print(type(est).__name__, r['status'], r['exception'])\n"
    )
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["FGBDTClassifier passed None", "FGBDTRegressor passed None"], out.stdout


def test_classifier_maps_any_two_labels_back() -> None:
    X, y = make_data()
    for labels in (np.array([-1, 1]), np.array(["no", "yes"])):
        target = labels[y.astype(int)]
        clf = FGBDTClassifier(n_estimators=6, max_depth=3, min_child_samples=5, parties=3).fit(X, target)
        assert list(clf.classes_) == list(labels)
        pred = clf.predict(X)
        # mapped back, and clearly learnt: 6 trees on 300 rows per party reach 0.84-0.86 with any bins (exact
        # quantiles included), so the bar sits below that seed-to-seed spread
        assert set(pred) <= set(labels) and np.mean(pred == target) > 0.8
        proba = clf.predict_proba(X)
        assert proba.shape == (len(y), 2)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        np.testing.assert_array_equal(pred, labels[(proba[:, 1] > 0.5).astype(int)])


def test_classifier_without_party_uses_simulates_split() -> None:
    X, y = make_data()
    clf = FGBDTClassifier(n_estimators=6, max_depth=3, min_child_samples=5, learning_rate=0.3, parties=3, theta=0.7)
    clf.set_params(random_state=4).fit(X, y)
    params = TrainParams(trees=6, depth=3, min_rows=5, learning_rate=0.3)
    prep = prepare(Dataset(X, y), Dataset(X[:0], y[:0]), params, PrepConfig(parties=3, theta=0.7, seed=4))
    _, expected, _ = run(prep, "fvtree")
    assert expected is not None and clf.model_.trees == expected.trees
    assert clf.n_parties_ == 3 and clf.contributions_ == clf.model_.contributions


def test_classifier_party_argument_equals_train() -> None:
    X, y = make_data()
    owner = np.array(["clinic-b", "clinic-a", "clinic-c"])[np.arange(len(y)) % 3]
    clf = FGBDTClassifier(n_estimators=6, max_depth=3, min_child_samples=5, learning_rate=0.3).fit(X, y, party=owner)
    parties = [(X[owner == name], y[owner == name]) for name in ("clinic-a", "clinic-b", "clinic-c")]
    assert clf.model_.trees == train(SMALL, parties).trees
    assert clf.n_parties_ == 3
    with pytest.raises(ValueError, match="party must give one party per row: 900 rows"):
        clf.fit(X, y, party=owner[:-1])
    with pytest.raises(ValueError, match=f"1 party: a federation has 2 to {MAX_PARTIES} parties"):
        clf.fit(X, y, party=np.zeros(len(y)))


def test_a_private_classifier_trains_the_same_private_model_as_train() -> None:
    """``epsilon`` and ``dp_delta`` reach the federation from both Python surfaces alike: the same noisy model,
    different from the public one, and the guarantee in the report."""
    X, y = make_data()
    owner = np.arange(len(y)) % 3
    ranges = [(float(lo), float(hi)) for lo, hi in zip(np.nanmin(X, axis=0), np.nanmax(X, axis=0), strict=True)]
    clf = FGBDTClassifier(
        n_estimators=4,
        max_depth=3,
        min_child_samples=5,
        epsilon=2.0,
        dp_delta=1e-6,
        dp_noise="seeded",
        feature_ranges=ranges,
    )
    clf.fit(X, y, party=owner)
    parties = [(X[owner == p], y[owner == p]) for p in range(3)]
    seeded = {
        "num_trees": 4,
        "max_depth": 3,
        "min_data_in_leaf": 5,
        "epsilon": 2.0,
        "dp_delta": 1e-6,
        "dp_noise": "seeded",
        "feature_ranges": ranges,
    }
    private = train(seeded, parties)
    public = train({"num_trees": 4, "max_depth": 3, "min_data_in_leaf": 5}, parties)
    assert clf.model_.trees == private.trees != public.trees
    assert private.report["privacy"]["epsilon"] == 2.0 and private.report["privacy"]["delta"] == 1e-6
    assert private.report["privacy"]["accounted_epsilon"] <= 2.0
    # a budget without an algorithm trains random splits (node.experiment.default_algorithm): no contributions
    assert private.report["algo"] == "randomsplit" and private.contributions is None and clf.contributions_ == []
    fv = train(
        {
            "num_trees": 4,
            "max_depth": 3,
            "min_data_in_leaf": 5,
            "epsilon": 2.0,
            "algo": "fvtree",
            "feature_ranges": ranges,
        },
        parties,
    )
    assert fv.report["algo"] == "fvtree" and fv.contributions is not None and fv.trees != private.trees
    colluders = {"num_trees": 4, "max_depth": 3, "epsilon": 2.0, "dp_colluders": 2, "tree_features": "one"}
    alone = train({**colluders, "feature_ranges": ranges}, parties)
    assert alone.report["privacy"]["colluders"] == 2 and alone.report["params"]["tree_features"] == "one"
    assert train({"epsilon": 2.0, "feature_ranges": ranges}, parties).report["trees"] == 200  # their own shape
    # with a budget and no noise source named, train() draws its noise from the operating system: real data
    fresh = [train({"num_trees": 4, "max_depth": 3, "epsilon": 2.0, "feature_ranges": ranges}, parties) for _ in "ab"]
    assert fresh[0].report["privacy"]["noise"] == "entropy" and fresh[0].trees != fresh[1].trees
    assert train(seeded, parties).trees == private.trees  # seeded: repeatable
    with pytest.raises(ValueError, match="'dp_colluders' apply to algo 'randomsplit' only, not 'fvtree'"):
        train({"epsilon": 2.0, "algo": "fvtree", "dp_colluders": 1}, parties)
    with pytest.raises(ValueError, match="'dp_colluders' needs a privacy budget"):
        train({"algo": "randomsplit", "dp_colluders": 1}, parties)  # as simulate refuses it without --epsilon
    clf_rs = FGBDTClassifier(
        n_estimators=30, epsilon=2.0, dp_colluders=2, tree_features="all", feature_ranges=ranges
    ).fit(X, y, party=owner)
    assert clf_rs.model_.report["privacy"]["colluders"] == 2
    assert clf_rs.model_.report["params"]["tree_features"] == "all"
    steps: list[int] = []
    train({"num_trees": 3, "epsilon": 2.0, "feature_ranges": ranges}, parties, progress=steps.append)
    assert steps == [0, 1, 2]


def test_a_private_regression_without_a_label_range_is_refused_by_its_name() -> None:
    """Random splits (the private default) need the declared range and say which parameters set it; FV-tree's noise
    rests on the logistic loss, which no range changes."""
    X, y = make_data(task="regression")
    ranges = [(-5.0, 5.0)] * X.shape[1]
    with pytest.raises(ValueError, match="needs its label range declared: set label_min and label_max"):
        FGBDTRegressor(n_estimators=2, epsilon=1.0, parties=3, feature_ranges=ranges).fit(X, y)
    with pytest.raises(ValueError, match="needs its label range declared: set label_min and label_max"):
        train({"objective": "regression", "epsilon": 1.0, "feature_ranges": ranges}, split(X, y))
    declared = {"objective": "regression", "epsilon": 1.0, "label_min": -10.0, "label_max": 10.0}
    with pytest.raises(ValueError, match="a privacy budget \\(epsilon\\) needs a binary task"):
        train({**declared, "algo": "fvtree", "feature_ranges": ranges}, split(X, y))
    with pytest.raises(ValueError, match="label_min and label_max declare the label range together; give both"):
        train({"objective": "regression", "label_min": 1.0}, split(X, y))
    with pytest.raises(ValueError, match=r"must be finite with label_min < label_max, got \(3.0, 3.0\)"):
        train({"objective": "regression", "label_min": 3.0, "label_max": 3.0}, split(X, y))
    with pytest.raises(ValueError, match="parameter 'label_max' must be float"):
        train({"objective": "regression", "label_min": 3.0, "label_max": "high"}, split(X, y))


@pytest.mark.parametrize("low, high", [(-10.0, 10.0), (20.0, 100.0)])
def test_a_private_regression_trains_from_its_declared_label_range(low: float, high: float) -> None:
    """With the range declared, every score starts at its midpoint (a first tree at a negligible learning rate
    predicts it everywhere, whatever the labels) and the gradients' bound is half its width."""
    X, y = make_data(task="regression")
    params = {
        "objective": "regression",
        "epsilon": 1.0,
        "label_min": low,
        "label_max": high,
        "feature_ranges": [(-5.0, 5.0)] * X.shape[1],
        "num_trees": 1,
        "max_depth": 2,
        "learning_rate": 1e-9,
        "dp_noise": "seeded",
    }
    model = train(params, split(X, y))
    assert np.allclose(model.predict(X), (low + high) / 2, atol=1e-3)
    privacy = model.report["privacy"]
    assert privacy["gradient_bound"] == (high - low) / 2 and privacy["accounted_epsilon"] <= 1.0
    reg = FGBDTRegressor(parties=3, n_estimators=1, learning_rate=1e-9, epsilon=1.0, label_min=low, label_max=high)
    reg.set_params(feature_ranges=params["feature_ranges"], dp_noise="seeded")
    assert np.allclose(reg.fit(X, y).predict(X), (low + high) / 2, atol=1e-3)


def test_a_declared_label_range_is_the_schemas_and_clips_the_labels() -> None:
    """Without a budget too, a declared range replaces the training labels' own: the PSDs split the label over it
    and the rows' labels are clipped into it; a binary task may declare only [0, 1]."""
    X, y = make_data(task="regression")
    data = Dataset(X, y, [f"f{i}" for i in range(X.shape[1])])
    test = Dataset(X[:0], y[:0], data.feature_names)
    params = TrainParams(trees=1, depth=2, objective="regression")
    prep = prepare(data, test, params, PrepConfig(parties=2, label_range=(-1.0, 2.0)))
    assert prep.label_range == (-1.0, 2.0)
    assert prep.train.y.min() == -1.0 and prep.train.y.max() == 2.0 < y.max()
    assert prepare(data, test, params, PrepConfig(parties=2)).label_range == (y.min(), y.max())
    with pytest.raises(ValueError, match="a binary task's labels are 0 and 1"):
        prepare(data, test, TrainParams(trees=1, depth=2), PrepConfig(parties=2, label_range=(0.0, 2.0)))
    with pytest.raises(ValueError, match="finite with label_min < label_max"):
        PrepConfig(label_range=(0.0, float("inf")))


def test_regressor_fits() -> None:
    X, y = make_data(task="regression")
    reg = FGBDTRegressor(n_estimators=20, max_depth=3, learning_rate=0.3, min_child_samples=5, parties=3).fit(X, y)
    assert reg.score(X, y) > 0.8
    assert reg.model_.objective == "regression"
    np.testing.assert_array_equal(reg.predict(X), reg.model_.predict(X))


def test_the_labels_unit_does_not_change_the_trees_and_millions_train() -> None:
    """Labels in dollars (millions) overflowed the fixed point's 1.2e6 per row mid-training. A task's labels are now
    divided by a power of two from its label range (``ledger.spec.task_params.label_scale``) before training, so labels
    times 2^20 train the very trees the labels train, and the model predicts 2^20 times as much."""
    X, y = make_data(task="regression")
    y = y - y.min()  # both ranges start at 0, so both scales are the powers of two above their maxima
    models = []
    for factor in (1.0, 2.0**20):
        data = Dataset(X, y * factor, [f"x{i}" for i in range(X.shape[1])])
        params = TrainParams(trees=8, depth=3, min_rows=5, learning_rate=0.3, objective="regression")
        prep = prepare(data, data, params, PrepConfig(parties=3, theta=0.8, seed=0))
        assert prep.params.label_scale >= float(np.max(y * factor)) > prep.params.label_scale / 2
        report, model, _ = run(prep, "fvtree")
        assert model is not None and report["endorsement"]["refusals"] == []
        models.append(model)
    small, large = models
    assert large.trees == small.trees and large.label_scale == small.label_scale * 2.0**20
    np.testing.assert_array_equal(large.predict(X), small.predict(X) * 2.0**20)
    assert float(np.max(y)) * 2.0**20 > 1.2e6  # beyond what a row's fixed-point limbs carry unscaled


def test_estimator_errors() -> None:
    X, y = make_data(n=300)
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        FGBDTClassifier(n_estimators=2).fit(X, np.arange(300) % 3)
    with pytest.raises(ValueError, match="one class"):
        FGBDTClassifier(n_estimators=2).fit(X, np.ones(300))
    with pytest.raises(ValueError, match="Input y contains NaN"):
        FGBDTRegressor(n_estimators=2).fit(X, np.where(y > 0, np.nan, 1.0))
    with pytest.raises(ValueError, match="3 sample"):
        FGBDTClassifier(n_estimators=2, parties=4).fit(X[:3], [0, 1, 1])
    with pytest.raises(ValueError, match="parties must be an integer >= 2"):
        FGBDTClassifier(n_estimators=2, parties=1).fit(X, y)
    with pytest.raises(ValueError, match="leaves part"):
        FGBDTClassifier(n_estimators=2, parties=4, theta=1.0).fit(X[:6], [0, 0, 0, 0, 0, 1])
    with pytest.raises(ValueError, match="unknown value 'newton'"):
        FGBDTClassifier(n_estimators=2, hessian="newton").fit(X, y)
    with pytest.raises(ValueError, match="Input X contains infinity"):
        FGBDTClassifier(n_estimators=2).fit(np.where(X > 2, np.inf, X), y)


def test_feature_importances() -> None:
    X, y = make_data()
    clf = FGBDTClassifier(n_estimators=6, max_depth=3, min_child_samples=5, parties=3).fit(X, y)
    np.testing.assert_array_equal(clf.feature_importances_, clf.model_.feature_importance("split"))
    gain = clone(clf).set_params(importance_type="gain").fit(X, y)
    np.testing.assert_array_equal(gain.feature_importances_, gain.model_.feature_importance("gain"))
    assert clf.feature_importances_.shape == (5,)
    assert gain.feature_importances_[:3].min() > gain.feature_importances_[3:].max()


def test_cross_val_score_and_pipeline() -> None:
    X, y = make_data(n=1200)
    clf = FGBDTClassifier(n_estimators=8, max_depth=3, min_child_samples=5, learning_rate=0.3, parties=3)
    scores = cross_val_score(clf, X, y, cv=3, scoring="roc_auc")
    assert scores.shape == (3,) and scores.min() > 0.85
    # the party column travels with the rows of each fold
    owner = np.arange(len(y)) % 2
    routed = cross_val_score(clf, X, y, cv=3, params={"party": owner})
    assert routed.min() > 0.8
    pipe = make_pipeline(SimpleImputer(), clf)
    pipe.fit(X[:900], y[:900], fgbdtclassifier__party=owner[:900])
    assert pipe[-1].n_parties_ == 2 and np.mean(pipe.predict(X[900:]) == y[900:]) > 0.8
    reg = FGBDTRegressor(n_estimators=8, max_depth=3, min_child_samples=5, learning_rate=0.3, parties=3)
    Xr, yr = make_data(n=1200, task="regression")
    assert cross_val_score(reg, Xr, yr, cv=3).min() > 0.5


def test_public_surface_is_lazy() -> None:
    """``import fgbdt_chain`` must not import the engine (numba, scikit-learn: about two seconds)."""
    code = "import sys, fgbdt_chain; print('fgbdt_chain.node.sim.engine' in sys.modules, 'sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    assert {"train", "Model", "FGBDTClassifier", "FGBDTRegressor", "__version__"} <= set(fgbdt_chain.__all__)
    assert fgbdt_chain.train is train and fgbdt_chain.Model is Model
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        fgbdt_chain.nope  # noqa: B018


def test_train_warns_before_a_slow_exact_shapley() -> None:
    """The estimate ``simulate`` prints (``node.protocol.shapley_cost``) is a warning of ``train`` too, given before any
    work: 12 parties at 500 trees of depth 8 is minutes of exact Shapley."""
    rng = np.random.default_rng(0)
    parties = [(rng.normal(size=(4, 2)), np.array([0.0, 1.0, 0.0, 1.0])) for _ in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowShapleyWarning)  # raised where it is given: nothing trains after it
        with pytest.raises(SlowShapleyWarning, match="exact split Shapley for 12 parties"):
            fgbdt_chain.train({"num_trees": 500, "max_depth": 8}, parties)
