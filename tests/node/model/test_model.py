"""The model object: binning, prediction, the JSON format, LightGBM export parity and the model commands.

Prediction is checked against a deliberately naive per-row traversal written from the protocol's definitions (not
from ``bin_matrix``), on random trees that include single-leaf trees, threshold slot 0 and the top slot, and on
inputs with NaNs, infinities and values exactly on edges, where an off-by-one in binning would show.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
import pytest

from fgbdt_chain.deploy.cli import main as cli_main
from fgbdt_chain.ledger.spec.fixed_point import ONE
from fgbdt_chain.node.model.trees import (
    FORMAT_TAG,
    Model,
    ModelFormatError,
    Node,
    Tree,
    bin_matrix,
)

# ------------------------------------------------------------------------------------------------------- builders


def random_edges(rng: np.random.Generator, num_features: int, bins: int) -> list[list[float]]:
    edges = []
    for f in range(num_features):
        if f == 0:
            k = 0  # a constant feature: only slots 0 and 1 exist
        elif f == 1:
            k = bins - 1  # full edges: the top threshold slot is bins - 1
        else:
            k = int(rng.integers(0, bins))
        cuts = np.unique(rng.normal(0.0, 2.0, size=k).round(int(rng.integers(1, 6))))
        edges.append([float(v) for v in cuts])
    return edges


def random_tree(rng: np.random.Generator, edges: list[list[float]], max_depth: int, p_leaf: float) -> Tree:
    nodes: dict[int, Node] = {}

    def grow(node_id: int, depth: int) -> None:
        count = int(rng.integers(0, 1000))
        if depth == max_depth or rng.random() < p_leaf:
            value = int(rng.integers(-(2**62), 2**62)) * int(rng.integers(1, 4))  # beyond int64 sometimes
            nodes[node_id] = Node.leaf(value, count)
            return
        f = int(rng.integers(len(edges)))
        top = len(edges[f])
        choice = rng.random()
        t = 0 if choice < 0.2 else top if choice < 0.4 else int(rng.integers(0, top + 1))
        nodes[node_id] = Node.split(f, t, int(rng.integers(0, 2**62)) * 1000, count)
        grow(2 * node_id, depth + 1)
        grow(2 * node_id + 1, depth + 1)

    grow(1, 0)
    return Tree(nodes)


def random_model(
    seed: int,
    *,
    objective: str = "binary",
    num_features: int = 6,
    bins: int = 16,
    num_trees: int = 25,
    max_depth: int = 8,
    base_score: float = 0.0,
) -> Model:
    rng = np.random.default_rng(seed)
    edges = random_edges(rng, num_features, bins)
    trees = [Tree.single_leaf(int(rng.integers(-(2**60), 2**60)), 5)]  # a root leaf, first
    trees += [random_tree(rng, edges, max_depth, p_leaf=float(rng.uniform(0.05, 0.5))) for _ in range(num_trees)]
    return Model(
        objective=objective,
        feature_names=[f"feat_{i}" for i in range(num_features)],
        edges=edges,
        bins=bins,
        trees=trees,
        base_score=base_score,
        params={"learning_rate": 0.1, "depth": max_depth, "lambda": 1.0},
        meta={"task": 7, "note": "test"},
    )


def random_X(seed: int, model: Model, n: int = 3000, *, neg_inf: bool = True) -> np.ndarray:
    """Rows with NaNs, +-inf, zeros and values exactly on edges (every edge of every feature appears)."""
    rng = np.random.default_rng(seed + 1000)
    X = rng.normal(0.0, 2.5, size=(n, model.num_features))
    for f, e in enumerate(model.edges):
        if e:
            pos = rng.choice(n, size=n // 3, replace=False)
            X[pos, f] = rng.choice(e, size=pos.size)
            X[: len(e), f] = e
    X[rng.random(X.shape) < 0.08] = np.nan
    X[rng.random(X.shape) < 0.01] = np.inf
    if neg_inf:
        X[rng.random(X.shape) < 0.01] = -np.inf
    X[rng.random(X.shape) < 0.01] = 0.0
    return X


# --------------------------------------------------------------------------------------------- naive reference


def naive_slot(x: float, edges: Sequence[float] | np.ndarray) -> int:
    """The protocol's definition, directly: 0 for missing, else 1 + number of edges strictly below x."""
    if math.isnan(x):
        return 0
    return 1 + sum(1 for e in edges if e < x)


def naive_raw(model: Model, X: np.ndarray) -> np.ndarray:
    out = np.empty(X.shape[0])
    for r, row in enumerate(X):
        score = float(model.base_score)
        for tree in model.trees:
            node_id = 1
            while not tree.nodes[node_id].is_leaf:
                node = tree.nodes[node_id]
                assert node.feature is not None and node.threshold is not None
                slot = naive_slot(float(row[node.feature]), model.edges[node.feature])
                node_id = 2 * node_id + (0 if slot <= node.threshold else 1)
            value = tree.nodes[node_id].value_fixed
            assert value is not None
            score += value / 10**18
        out[r] = score
    return out


# ------------------------------------------------------------------------------------------------ binning, predict


def test_bin_matrix_matches_definition() -> None:
    model = random_model(1)
    X = random_X(1, model, n=400)
    slots = bin_matrix(X, model.edges)
    assert slots.dtype == np.uint8 and slots.shape == X.shape
    for r in range(X.shape[0]):
        for f in range(X.shape[1]):
            assert slots[r, f] == naive_slot(float(X[r, f]), model.edges[f])


def test_bin_matrix_edges_and_errors() -> None:
    edges = [[-1.0, 0.0, 2.5]]
    X = np.array([[np.nan], [-np.inf], [-1.0], [-0.5], [0.0], [2.5], [2.6], [np.inf]])
    assert bin_matrix(X, edges)[:, 0].tolist() == [0, 1, 1, 2, 2, 3, 4, 4]
    with pytest.raises(ValueError, match="features"):
        bin_matrix(np.zeros((2, 2)), edges)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("objective", ["binary", "regression"])
def test_predict_matches_naive_traversal(seed: int, objective: str) -> None:
    model = random_model(seed, objective=objective, base_score=0.25 * seed)
    X = random_X(seed, model, n=1500)
    raw = model.predict_raw(X)
    # same additions in the same order: bit-identical, not merely close
    np.testing.assert_array_equal(raw, naive_raw(model, X))
    if objective == "binary":
        proba = model.predict_proba(X)
        np.testing.assert_allclose(proba, 1.0 / (1.0 + np.exp(-raw)), rtol=0, atol=0)
        # predict is LightGBM's: probabilities for binary models, raw scores on request
        np.testing.assert_array_equal(model.predict(X), proba)
        np.testing.assert_array_equal(model.predict(X, raw_score=True), raw)
    else:
        np.testing.assert_array_equal(model.predict(X), raw)
        np.testing.assert_array_equal(model.predict(X, raw_score=True), raw)
        with pytest.raises(ValueError, match="binary"):
            model.predict_proba(X)


def test_predict_rejects_wrong_feature_count() -> None:
    model = random_model(3)
    with pytest.raises(ValueError, match="expects 6"):
        model.predict_raw(np.zeros((4, 5)))


def test_model_without_trees_predicts_base_score() -> None:
    model = Model("regression", ["a", "b"], [[0.0], []], 4, [], base_score=1.5)
    np.testing.assert_array_equal(model.predict(np.zeros((3, 2))), [1.5, 1.5, 1.5])


def test_edges_as_numpy_arrays_are_normalised() -> None:
    model = Model("binary", ["a"], [np.array([0.5, 1.5])], 4, [Tree.single_leaf(ONE, 3)])
    assert model.edges == [[0.5, 1.5]] and all(type(v) is float for v in model.edges[0])


# ---------------------------------------------------------------------------------------------------------- JSON


def test_save_load_round_trip(tmp_path: Path) -> None:
    model = random_model(4, base_score=-0.75)
    path = tmp_path / "m.json"
    model.save(path)
    loaded = Model.load(path)
    assert loaded == model
    d = json.loads(path.read_text())
    assert d["format"] == FORMAT_TAG
    # fixed-point values stay exact JSON integers, even beyond 64 bits
    leaves = [n for t in d["trees"] for n in t["nodes"] if "value_fixed" in n]
    assert all(isinstance(n["value_fixed"], int) for n in leaves)
    assert any(abs(n["value_fixed"]) >= 2**63 for n in leaves)
    assert not re.search(r'"(value|gain)_fixed":\s*-?\d+[.eE]', path.read_text())
    model.params["bad"] = float("nan")  # strict JSON: refused with a clear error rather than written as NaN
    with pytest.raises(ModelFormatError, match="not JSON-serialisable"):
        model.save(tmp_path / "nan.json")
    X = random_X(4, model, n=300)
    np.testing.assert_array_equal(loaded.predict_raw(X), model.predict_raw(X))
    assert Model.from_json_dict(model.to_json_dict()) == model


def small_model_dict() -> dict[str, Any]:
    tree = Tree(
        {
            1: Node.split(0, 1, 5 * ONE, 10),
            2: Node.leaf(-ONE // 10, 4),
            3: Node.split(1, 0, ONE, 6),
            6: Node.leaf(ONE // 5, 2),
            7: Node.leaf(3 * ONE // 10, 4),
        }
    )
    return Model("binary", ["a", "b"], [[0.0, 1.0], [2.0]], 4, [tree, Tree.single_leaf(7, 10)]).to_json_dict()


def _nodes(d: dict[str, Any], tree: int = 0) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = d["trees"][tree]["nodes"]
    return nodes


def _node(d: dict[str, Any], node_id: int) -> dict[str, Any]:
    return next(n for n in _nodes(d) if n["id"] == node_id)


def _set(d: dict[str, Any], key: str, value: Any) -> None:
    d[key] = value


MALFORMED: list[tuple[str, Any, str]] = [
    ("format tag", lambda d: _set(d, "format", "fgbdt-model/9"), "unknown model format tag 'fgbdt-model/9'"),
    ("no format", lambda d: d.pop("format"), "missing field 'format'"),
    ("no trees", lambda d: d.pop("trees"), "missing field(s): trees"),
    ("no edges", lambda d: d.pop("edges"), "missing field(s): edges"),
    ("objective", lambda d: _set(d, "objective", "poisson"), "unknown objective 'poisson'"),
    ("bins", lambda d: _set(d, "bins", 300), "bins must be an integer"),
    ("edges count", lambda d: d["edges"].pop(), "edges has 1 features but feature_names has 2"),
    ("edges order", lambda d: _set(d, "edges", [[1.0, 0.0], [2.0]]), "strictly increasing"),
    ("edges too many", lambda d: _set(d, "edges", [[0.0, 1.0, 2.0, 3.0], [2.0]]), "at most bins - 1 = 3"),
    ("missing child", lambda d: _nodes(d).remove(_node(d, 7)), "tree 0 node 3: child ids inconsistent: child 7"),
    ("orphan", lambda d: _nodes(d).append({"id": 12, "count": 1, "value_fixed": 0}), "node 12: child ids incons"),
    ("no root", lambda d: _nodes(d, 1).clear(), "tree 1: no root node (id 1)"),
    ("duplicate id", lambda d: _nodes(d).append(dict(_node(d, 2))), "node 2 appears twice"),
    ("threshold high", lambda d: _node(d, 3).update(threshold=2), "threshold slot 2 out of range 0..1"),
    ("threshold neg", lambda d: _node(d, 1).update(threshold=-1), "threshold slot -1 out of range 0..2"),
    ("feature", lambda d: _node(d, 1).update(feature=2), "feature index 2 out of range 0..1"),
    ("float value", lambda d: _node(d, 2).update(value_fixed=1.5), "value_fixed must be an integer"),
    ("bool count", lambda d: _node(d, 2).update(count=True), "count must be a non-negative integer"),
    ("leaf+split", lambda d: _node(d, 2).update(feature=0), "both a split feature and a leaf value_fixed"),
    ("no kind", lambda d: _node(d, 2).pop("value_fixed"), "neither a split"),
    ("split fields", lambda d: _node(d, 1).pop("gain_fixed"), "missing field(s) ['gain_fixed']"),
    ("node id", lambda d: _node(d, 2).pop("id"), "missing field 'id'"),
    ("unknown field", lambda d: _node(d, 2).update(colour="red"), "unknown fields ['colour']"),
]


@pytest.mark.parametrize(("mutate", "message"), [(m, msg) for _, m, msg in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_models_raise_clear_errors(mutate: Any, message: str) -> None:
    d = copy.deepcopy(small_model_dict())
    Model.from_json_dict(copy.deepcopy(d))  # the unmutated model is valid
    mutate(d)
    with pytest.raises(ModelFormatError, match=re.escape(message)):
        Model.from_json_dict(d)


def test_load_names_file_for_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(ModelFormatError, match=r"bad\.json: not valid JSON"):
        Model.load(path)
    d = small_model_dict()
    d["format"] = "other"
    path.write_text(json.dumps(d))
    with pytest.raises(ModelFormatError, match=r"bad\.json: unknown model format tag"):
        Model.load(path)


# ------------------------------------------------------------------------------------------------------ LightGBM


def lightgbm_blocks(text: str) -> tuple[list[int], list[str]]:
    """The tree_sizes header and the actual ``Tree=k`` blocks (each up to the next block or 'end of trees')."""
    sizes = [int(s) for s in re.search(r"^tree_sizes=(.*)$", text, re.M).group(1).split()]  # type: ignore[union-attr]
    body = text[text.index("\nTree=0\n") + 1 : text.index("end of trees\n")]
    starts = [m.start() for m in re.finditer(r"^Tree=\d+\n", body, re.M)] + [len(body)]
    return sizes, [body[a:b] for a, b in itertools.pairwise(starts)]


def test_tree_sizes_rule_matches_lightgbm_itself() -> None:
    """LightGBM's own output: tree_sizes[k] is the byte length of 'Tree=k' up to the next 'Tree=' line."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    X[::5, 0] = np.nan
    y = (X[:, 1] + 0.3 * rng.normal(size=300) > 0).astype(int)
    booster = lgb.train(
        {"objective": "binary", "num_leaves": 6, "verbose": -1, "min_data_in_leaf": 5}, lgb.Dataset(X, y), 3
    )
    sizes, blocks = lightgbm_blocks(booster.model_to_string())
    assert sizes == [len(b.encode()) for b in blocks]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("objective", ["binary", "regression"])
def test_lightgbm_export_parity(tmp_path: Path, seed: int, objective: str) -> None:
    model = random_model(seed, objective=objective, base_score=[0.0, 0.4, -1.25, 3.0][seed])
    if seed == 1:
        model.feature_names[2] = "has space=and:colon"  # sanitised for LightGBM's space-separated header
    # -inf is left out: LightGBM sends it left at a t = 0 split (see test_lightgbm_known_differences)
    X = random_X(seed, model, n=2000, neg_inf=False)
    path = tmp_path / "m.txt"
    text = model.to_lightgbm(path)
    assert path.read_text() == text
    sizes, blocks = lightgbm_blocks(text)
    assert sizes == [len(b.encode()) for b in blocks] and len(blocks) == len(model.trees)
    booster = lgb.Booster(model_file=str(path))
    assert booster.num_trees() == len(model.trees)
    assert booster.num_feature() == model.num_features
    raw = model.predict_raw(X)
    np.testing.assert_allclose(booster.predict(X, raw_score=True), raw, rtol=0, atol=1e-9)
    if objective == "binary":
        np.testing.assert_allclose(booster.predict(X), model.predict_proba(X), rtol=0, atol=1e-9)
    else:
        np.testing.assert_allclose(booster.predict(X), raw, rtol=0, atol=1e-9)
    # LightGBM re-serialises what it loaded without complaint (fields all parsed)
    again = lgb.Booster(model_str=booster.model_to_string())
    np.testing.assert_allclose(again.predict(X, raw_score=True), raw, rtol=0, atol=1e-9)
    # num_iteration means what LightGBM's argument of that name means: the first k trees
    for k in (1, len(model.trees) // 2):
        first_k = dataclasses.replace(model, trees=model.trees[:k])
        np.testing.assert_array_equal(model.predict(X, num_iteration=k), first_k.predict(X))
        np.testing.assert_allclose(
            booster.predict(X, raw_score=True, num_iteration=k), model.predict_raw(X, k), rtol=0, atol=1e-9
        )


def test_a_model_of_scaled_labels_predicts_and_exports_in_the_labels_units(tmp_path: Path) -> None:
    """A task's trees are trained on labels / ``label_scale`` (a power of two): the model multiplies its raw score
    back, saves the scale, exports leaves in the labels' units to LightGBM, and reads an older file as scale 1."""
    model = random_model(2, objective="regression", base_score=3.0)
    scaled = dataclasses.replace(model, label_scale=2.0**20)
    X = random_X(2, model, n=2000, neg_inf=False)
    np.testing.assert_allclose(scaled.predict_raw(X), (model.predict_raw(X) - 3.0) * 2.0**20 + 3.0, rtol=1e-12)
    assert Model.from_json_dict(scaled.to_json_dict()) == scaled
    # a reader of fgbdt-model/1 would ignore the scale: such a file has its own tag, and a model of scale 1 the old one
    assert scaled.to_json_dict()["format"] == "fgbdt-model/2" and "label_scale" not in model.to_json_dict()
    assert model.to_json_dict()["format"] == "fgbdt-model/1"
    path = tmp_path / "m.txt"
    scaled.to_lightgbm(path)
    booster = lgb.Booster(model_file=str(path))
    np.testing.assert_allclose(booster.predict(X, raw_score=True), scaled.predict_raw(X), rtol=1e-12, atol=1e-6)
    assert Model.from_json_dict(model.to_json_dict()).label_scale == 1.0
    untagged = {**scaled.to_json_dict(), "format": "fgbdt-model/1"}
    with pytest.raises(ModelFormatError, match="fgbdt-model/2"):
        Model.from_json_dict(untagged)
    for bad in (0.0, -2.0, math.inf, 3.0, "2", True):
        with pytest.raises(ModelFormatError, match="label_scale"):
            Model.from_json_dict({**scaled.to_json_dict(), "label_scale": bad})
    with pytest.raises(ModelFormatError, match="1 for a binary model"):
        dataclasses.replace(random_model(2), label_scale=2.0).validate()


def test_lightgbm_export_thresholds_and_single_leaf() -> None:
    d = small_model_dict()
    model = Model.from_json_dict(d)
    text = model.to_lightgbm()
    tree0, tree1 = lightgbm_blocks(text)[1]
    # root: feature 0 at slot 1 -> edges[0][0] = 0.0; node 3: slot 0 -> only missing left -> most negative double
    assert "threshold=0.0 -1.7976931348623157e+308\n" in tree0
    assert "decision_type=10 10\n" in tree0
    assert "left_child=-1 -2\nright_child=1 -3\n" in tree0
    assert "num_leaves=1\n" in tree1 and "leaf_value=7e-18\n" in tree1
    # no trees at all: one single-leaf tree carrying base_score
    empty = Model("binary", ["a"], [[0.0]], 4, [], base_score=-0.5)
    booster = lgb.Booster(model_str=empty.to_lightgbm())
    np.testing.assert_allclose(booster.predict(np.zeros((2, 1)), raw_score=True), [-0.5, -0.5])


def test_lightgbm_known_differences() -> None:
    """Documented limits of the export: -inf at a t = 0 split, and LightGBM zeroing |x| <= 1e-35 at prediction."""
    t0 = Tree({1: Node.split(0, 0, ONE, 10), 2: Node.leaf(-ONE, 5), 3: Node.leaf(ONE, 5)})
    model = Model("regression", ["a"], [[1.0]], 4, [t0])
    booster = lgb.Booster(model_str=model.to_lightgbm())
    X = np.array([[np.nan], [-1e308], [0.0], [np.inf], [-np.inf]])
    np.testing.assert_array_equal(model.predict_raw(X), [-1, 1, 1, 1, 1])
    np.testing.assert_array_equal(booster.predict(X), [-1, 1, 1, 1, -1])


# ----------------------------------------------------------------------------------------------------------- CLI


def test_cli_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = random_model(5, num_trees=5)
    mpath, out = tmp_path / "m.json", tmp_path / "m.txt"
    model.save(mpath)
    assert cli_main(["export", "--model", str(mpath), "--format", "lightgbm", "--out", str(out)]) == 0
    X = random_X(5, model, n=200, neg_inf=False)
    booster = lgb.Booster(model_file=str(out))
    np.testing.assert_allclose(booster.predict(X), model.predict_proba(X), rtol=0, atol=1e-9)

    assert cli_main(["export", "--model", str(mpath), "--format", "onnx", "--out", str(out)]) == 2
    assert "unknown export format 'onnx'" in capsys.readouterr().err
    assert cli_main(["export", "--model", str(tmp_path / "nope.json"), "--out", str(out)]) == 2
    assert "model file not found" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "fgbdt-model/0"}))
    assert cli_main(["export", "--model", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "invalid model file" in err and "unknown model format tag 'fgbdt-model/0'" in err


# the predict command on real files (by name, shuffled columns, IDs, wrong widths): tests/node/model/test_predict.py


def test_cli_predict_with_real_loader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """End to end through node.data on a CSV whose label is the last column, given by index and by name."""
    pytest.importorskip("fgbdt_chain.node.data.loaders")
    model = random_model(8, num_trees=6)
    X = np.random.default_rng(8).normal(0.0, 2.0, size=(40, model.num_features))
    X[:5, 1] = model.edges[1][:5]  # values exactly on edges survive the CSV round trip (repr)
    y = (X[:, 2] > 0).astype(int)
    rows = [",".join([*(f"feat_{j}" for j in range(model.num_features)), "label"])]
    rows += [",".join([*(repr(float(v)) for v in x), str(t)]) for x, t in zip(X, y, strict=True)]
    mpath, dpath, out = tmp_path / "m.json", tmp_path / "d.csv", tmp_path / "p.csv"
    dpath.write_text("\n".join(rows) + "\n")
    model.save(mpath)
    argv = ["predict", "--model", str(mpath), "--data", str(dpath), "--out", str(out), "--label-column", "-1"]
    assert cli_main(argv) == 0, capsys.readouterr().err
    lines = out.read_text().splitlines()
    assert lines[0] == "prediction"
    np.testing.assert_array_equal(np.array([float(v) for v in lines[1:]]), model.predict_proba(X))
    argv[argv.index("-1")] = "label"
    assert cli_main(argv) == 0, capsys.readouterr().err
    assert out.read_text().splitlines() == lines
    assert cli_main(["predict", "--model", str(mpath), "--data", str(tmp_path / "nope.csv"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nope.csv" in err and "not found" in err
