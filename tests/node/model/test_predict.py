"""``fgbdt predict`` matches a data file's columns to the model's features by header name (``node.data.columns``).

The model comes from ``fgbdt simulate`` on a CSV whose label is its last column, the layout where reading by
position misreads it (measured: test error 0.590 instead of 0.235).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from fgbdt_chain.deploy.cli import main
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.node.data.columns import ColumnMismatch, align_columns
from fgbdt_chain.node.model.trees import Model, Tree

FEATURES = ["x0", "x1", "x2", "x3", "x4"]


def write_csv(path: Path, header: list[str] | None, rows: list[list[object]]) -> Path:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        if header is not None:
            writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    """(model file, its training CSV with the label last, test rows X, their labels)."""
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(size=(700, 5)), 5)
    y = (X[:, 0] - X[:, 3] + 0.3 * rng.normal(size=700) > 0).astype(int)
    folder = tmp_path_factory.mktemp("predict")
    data = write_csv(
        folder / "train.csv", [*FEATURES, "label"], [[*x, t] for x, t in zip(X[:500], y[:500], strict=True)]
    )
    model = folder / "m.json"
    argv = ["simulate", "--data", str(data), "--label-column", "label", "--parties", "2", "--trees", "6"]
    argv += ["--depth", "3", "--bins", "8", "--min-rows", "5", "--quiet", "--no-baselines", "--model", str(model)]
    assert main(argv) == 0
    return model, data, X[500:], y[500:]


def predict(model: Path, data: Path, out: Path, *flags: str) -> int:
    return main(["predict", "--model", str(model), "--data", str(data), "--out", str(out), *flags])


def read_out(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_model_keeps_the_header_names(trained: tuple[Path, Path, np.ndarray, np.ndarray]) -> None:
    assert Model.load(trained[0]).feature_names == FEATURES


def test_shuffled_columns_without_label_predict_the_same(
    trained: tuple[Path, Path, np.ndarray, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model_path, _, X, y = trained
    model = Model.load(model_path)
    original = write_csv(tmp_path / "test.csv", [*FEATURES, "label"], [[*x, t] for x, t in zip(X, y, strict=True)])
    assert predict(model_path, original, tmp_path / "p1.csv") == 0  # no --label-column: the label is just unused
    err = capsys.readouterr().err
    assert err.count("ignoring columns the model does not use: 'label'") == 1

    order = [3, 0, 4, 2, 1]
    shuffled = write_csv(
        tmp_path / "shuffled.csv",
        ["", "note", *(FEATURES[j] for j in order)],  # a pandas index and a text column too
        [[i, "some text", *x[order]] for i, x in enumerate(X)],
    )
    assert predict(model_path, shuffled, tmp_path / "p2.csv") == 0
    assert "ignoring columns the model does not use: column 0 (unnamed), 'note'" in capsys.readouterr().err

    first, second = read_out(tmp_path / "p1.csv"), read_out(tmp_path / "p2.csv")
    assert first[0] == second[0] == ["prediction"]
    assert second == first
    p = np.array([float(r[0]) for r in first[1:]])
    np.testing.assert_array_equal(p, model.predict_proba(X))  # the probability of class 1, as documented
    assert ((p > 0.5) != y).mean() < 0.3


def test_id_column_is_copied_next_to_the_prediction(
    trained: tuple[Path, Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    model_path, _, X, _ = trained
    ids = [f"client-{i:03d}" for i in range(len(X))]
    data = write_csv(
        tmp_path / "ids.csv", ["customer", *FEATURES[::-1]], [[i, *x[::-1]] for i, x in zip(ids, X, strict=True)]
    )
    assert predict(model_path, data, tmp_path / "p.csv", "--id-column", "customer") == 0
    rows = read_out(tmp_path / "p.csv")
    assert rows[0] == ["customer", "prediction"]
    assert [r[0] for r in rows[1:]] == ids
    np.testing.assert_array_equal([float(r[1]) for r in rows[1:]], Model.load(model_path).predict_proba(X))


def test_a_missing_feature_is_refused_by_name(
    trained: tuple[Path, Path, np.ndarray, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model_path, _, X, _ = trained
    names = ["x0", "x1", "X2", "x4"]  # x3 missing, x2 with another case
    data = write_csv(tmp_path / "short.csv", names, [list(x[[0, 1, 2, 4]]) for x in X])
    assert predict(model_path, data, tmp_path / "p.csv") == 2
    err = capsys.readouterr().err
    assert "lacks 2 of the model's 5 features: 'x2' (the file has 'X2'), 'x3'" in err
    assert not (tmp_path / "p.csv").exists()
    missing_id = write_csv(tmp_path / "noid.csv", FEATURES, [list(x) for x in X])
    assert predict(model_path, missing_id, tmp_path / "p.csv", "--id-column", "customer") == 2
    assert "ID column 'customer' is not in the header" in capsys.readouterr().err


def test_files_without_header_and_libsvm_go_by_position(
    trained: tuple[Path, Path, np.ndarray, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model_path, _, X, y = trained
    expected = Model.load(model_path).predict_proba(X)
    unlabelled = write_csv(tmp_path / "u.csv", None, [list(x) for x in X])
    label_first = write_csv(tmp_path / "l.csv", None, [[t, *x] for x, t in zip(X, y, strict=True)])
    label_last = write_csv(tmp_path / "e.csv", None, [[*x, t] for x, t in zip(X, y, strict=True)])
    libsvm = tmp_path / "d.libsvm"
    pairs = [" ".join(f"{j + 1}:{float(v)!r}" for j, v in enumerate(x)) for x in X]
    libsvm.write_text("".join(f"{t} {p}\n" for p, t in zip(pairs, y, strict=True)))
    for data, flags in ((unlabelled, []), (label_first, []), (label_last, ["--label-column", "-1"]), (libsvm, [])):
        out = tmp_path / f"{data.stem}.out"
        assert predict(model_path, data, out, *flags) == 0, capsys.readouterr().err
        np.testing.assert_array_equal([float(r[0]) for r in read_out(out)[1:]], expected)
    wide = write_csv(tmp_path / "w.csv", None, [[1, 2, *x] for x in X])
    assert predict(model_path, wide, tmp_path / "p.csv") == 2
    assert "7 columns and no header: 7 columns" in capsys.readouterr().err


def test_regression_output_and_text_in_a_feature(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = Model(objective="regression", feature_names=["a", "b"], edges=[[0.0], [0.0]], bins=2)
    model.trees = [Tree.single_leaf(ONE // 4, 10)]
    model_path = tmp_path / "r.json"
    model.save(model_path)
    data = write_csv(tmp_path / "r.csv", ["b", "a", "y"], [[1, 2, ""], [3, 4, "n/a"]])  # the label may be empty
    assert predict(model_path, data, tmp_path / "p.csv") == 0
    assert read_out(tmp_path / "p.csv") == [["prediction"], ["0.25"], ["0.25"]]
    bad = write_csv(tmp_path / "bad.csv", ["a", "b"], [[1, 2], ["x", 4]])
    assert predict(model_path, bad, tmp_path / "p.csv") == 2
    assert "bad.csv:3: value 'x' in column 0 ('a') is not a number" in capsys.readouterr().err


# -------------------------------------------------------------------------------------------------- the plan itself


def test_align_columns_by_name_and_position() -> None:
    plan = align_columns(["b", "a"], ["id", "a", "y", "b"], 4, id_column="id", label_column="y")
    assert (plan.features, plan.id_column, plan.label_column, plan.ignored, plan.by_name) == ((3, 1), 0, 2, (), True)
    assert align_columns(["b", "a"], ["a", "b"], 2, label_column="label").features == (1, 0)  # absent named label
    with pytest.raises(ColumnMismatch, match="'a' appears 2 times"):
        align_columns(["a"], ["a", "a"], 2)
    # no header: the model's features in order, after a label in the first column when there is one more
    assert align_columns(["p", "q"], None, 2).features == (0, 1)
    assert align_columns(["p", "q"], None, 3).features == (1, 2)
    assert align_columns(["p", "q"], None, 3, label_column=-1).features == (0, 1)
    # a model of a file without header names features by their column: the training layout is read back
    assert align_columns(["c0", "c1"], None, 3).features == (0, 1)
    plan = align_columns(["c0", "c1"], ["u", "v"], 2)
    assert plan.features == (0, 1) and not plan.by_name and "without a header" in (plan.note or "")
    plan = align_columns(["a", "a"], ["a", "b"], 2)
    assert plan.features == (0, 1) and "not unique" in (plan.note or "")
    with pytest.raises(ColumnMismatch, match="by name but the file has no header"):
        align_columns(["p"], None, 2, id_column="id")
