"""Tests of node.data: round trips on generated files, malformed input, and the benchmark files."""

from __future__ import annotations

import gzip
import os
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgbdt_chain.node.data.loaders import (
    DataFormatError,
    Dataset,
    DataWarning,
    _parse_libsvm_careful,
    _parse_libsvm_fast,
    _read_text,
    check_labels,
    load_dataset,
    load_features,
    load_train_test,
)

DATA_DIR = Path(os.environ.get("FGBDT_DATASETS", Path(__file__).resolve().parents[4] / "shared" / "datasets"))
"""The data sets directory (``FGBDT_DATASETS``, as ``bench.datasets``), which CI provides."""
needs_datasets = pytest.mark.skipif(
    not (DATA_DIR / "a9a.gz").exists(), reason=f"the data sets directory not found at {DATA_DIR} (FGBDT_DATASETS)"
)


def write(path: Path, text: str, *, gz: bool = False) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def random_matrix(rng: np.random.Generator, n: int, f: int, density: float = 0.4) -> np.ndarray:
    X = np.round(rng.normal(size=(n, f)), 6)
    X[rng.random((n, f)) > density] = 0.0
    return X


def to_libsvm(X: np.ndarray, y: np.ndarray) -> str:
    lines = []
    for row, label in zip(X, y, strict=True):
        pairs = " ".join(f"{j + 1}:{float(v)!r}" for j, v in enumerate(row) if v != 0.0)
        lines.append(f"{label:g} {pairs}".rstrip())
    return "\n".join(lines) + "\n"


def to_csv(X: np.ndarray, y: np.ndarray, sep: str = ",", header: list[str] | None = None) -> str:
    lines = [sep.join(header)] if header is not None else []
    lines += [sep.join([repr(float(label)), *(repr(float(v)) for v in row)]) for row, label in zip(X, y, strict=True)]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("name", ["train.libsvm", "a9a_like", "train.txt"])
def test_libsvm_round_trip(tmp_path: Path, gz: bool, name: str) -> None:
    rng = np.random.default_rng(1)
    X = random_matrix(rng, 40, 7)
    X[:, -1] = 1.5  # make sure the max index is seen, so the width is exact
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    path = write(tmp_path / (name + (".gz" if gz else "")), to_libsvm(X, y), gz=gz)
    ds = load_dataset(path)
    assert ds.X.dtype == np.float64 and ds.y.dtype == np.float64
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.y, (y > 0).astype(float))
    assert ds.feature_names == [f"f{j}" for j in range(1, 8)]
    assert ds.n_rows == 40 and ds.n_features == 7


def test_libsvm_detected_without_extension_and_comments(tmp_path: Path) -> None:
    text = "# a comment line\n" * 300 + "+1 1:0.5 3:2 # trailing comment\n\n-1\n-1 2:-1e-3 3:4\n"
    ds = load_dataset(write(tmp_path / "a9a", text))
    np.testing.assert_array_equal(ds.X, [[0.5, 0, 2], [0, 0, 0], [0, -1e-3, 4]])
    np.testing.assert_array_equal(ds.y, [1, 0, 0])


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("sep", [",", ";", "\t", " "])
def test_csv_round_trip_no_header(tmp_path: Path, gz: bool, sep: str) -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4))
    y = rng.normal(size=30)
    path = write(tmp_path / ("d.csv.gz" if gz else "d.csv"), to_csv(X, y, sep), gz=gz)
    ds = load_dataset(path)
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.y, y)  # 30 distinct labels: regression, kept as they are
    assert ds.feature_names == ["c1", "c2", "c3", "c4"]
    assert ds.name == "d"


def test_csv_header_detected_and_label_by_name_index_negative(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(20, 3))
    y = (rng.random(20) < 0.5).astype(float)
    text = to_csv(X, y, header=["target", "a", "b", "c"])
    path = write(tmp_path / "h.data", text)
    by_default = load_dataset(path)
    by_name = load_dataset(path, label_column="target")
    by_index = load_dataset(path, label_column=0)
    by_negative = load_dataset(path, label_column=-4)
    for ds in (by_default, by_name, by_index, by_negative):
        np.testing.assert_array_equal(ds.X, X)
        np.testing.assert_array_equal(ds.y, y)
        assert ds.feature_names == ["a", "b", "c"]
    last = load_dataset(path, label_column=-1)
    np.testing.assert_array_equal(last.y, X[:, 2])
    np.testing.assert_array_equal(last.X, np.column_stack([y, X[:, :2]]))
    assert last.feature_names == ["target", "a", "b"]


def test_csv_header_flag_forced(tmp_path: Path) -> None:
    path = write(tmp_path / "n.csv", "1,2,3\n0,4,5\n1,6,7\n")
    assert load_dataset(path).n_rows == 3
    forced = load_dataset(path, header=True)
    assert forced.n_rows == 2 and forced.feature_names == ["2", "3"]
    with pytest.raises(DataFormatError, match=r"t\.csv:1: .*header=True"):
        load_dataset(write(tmp_path / "t.csv", "y,a\n1,2\n"), header=False)


def test_csv_drop_columns_and_quotes(tmp_path: Path) -> None:
    text = '"ID","x 1","x2","label"\n1,0.5,"7",1\n2,,3,0\n3,2.5,-1,1\n'
    path = write(tmp_path / "credit.csv", text)
    ds = load_dataset(path, label_column=-1, drop_columns=["ID"])
    assert ds.feature_names == ["x 1", "x2"]
    np.testing.assert_array_equal(ds.X, [[0.5, 7], [np.nan, 3], [2.5, -1]])
    np.testing.assert_array_equal(ds.y, [1, 0, 1])
    same = load_dataset(path, label_column="label", drop_columns=[0])
    np.testing.assert_array_equal(same.X, ds.X)


@pytest.mark.parametrize("token", ["", "NA", "na", "NaN", "nan", "N/A", "n/a", "?", "null", "NULL", " NA "])
def test_csv_missing_tokens_are_nan(tmp_path: Path, token: str) -> None:
    path = write(tmp_path / "m.csv", f"1,{token},2\n0,3,{token}\n")
    ds = load_dataset(path)
    assert np.isnan(ds.X[0, 0]) and np.isnan(ds.X[1, 1])
    assert ds.X[0, 1] == 2 and ds.X[1, 0] == 3


def test_libsvm_absent_is_zero_explicit_nan_is_missing(tmp_path: Path) -> None:
    ds = load_dataset(write(tmp_path / "s.svm", "1 1:nan 3:1\n0 2:NaN\n1 2:NA 3:?\n"))
    expected = np.array([[np.nan, 0, 1], [0, np.nan, 0], [0, np.nan, np.nan]])
    np.testing.assert_array_equal(ds.X, expected)


def test_gzip_detected_by_magic_not_name(tmp_path: Path) -> None:
    text = "1 1:1\n0 2:1\n"
    disguised = write(tmp_path / "plain_name.libsvm", text, gz=True)
    not_gz = write(tmp_path / "fake.libsvm.gz", text)
    for path in (disguised, not_gz):
        np.testing.assert_array_equal(load_dataset(path).X, [[1, 0], [0, 1]])


def test_crlf_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_bytes("\ufeffy;a;b\r\n1;2,5;3\r\n0;4;5\r\n".encode())
    # ';' separates; "2,5" is a decimal comma, which we do not interpret: it must fail loudly on line 2.
    with pytest.raises(DataFormatError, match=r"w\.csv:2: value '2,5'"):
        load_dataset(path)
    path.write_bytes("\ufeffy;a;b\r\n1;2.5;3\r\n0;4;5\r\n".encode())
    ds = load_dataset(path)
    assert ds.feature_names == ["a", "b"]
    np.testing.assert_array_equal(ds.X, [[2.5, 3], [4, 5]])


# --------------------------------------------------------------------------------------------------------------------
# Labels


@pytest.mark.parametrize(
    ("labels", "expected"),
    [([-1, 1, 1], [0, 1, 1]), ([0, 1, 0], [0, 1, 0]), ([1, 2, 2], [0, 1, 1]), ([-3, -1, -3], [0, 1, 0])],
)
def test_binary_labels(tmp_path: Path, labels: list[int], expected: list[int]) -> None:
    text = "".join(f"{lab},0.5\n" for lab in labels)
    for task in ("auto", "binary"):
        ds = load_dataset(write(tmp_path / "b.csv", text), task=task)
        np.testing.assert_array_equal(ds.y, expected)


def test_task_regression_and_binary_errors(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "1,0\n2,0\n3,0\n")
    np.testing.assert_array_equal(load_dataset(path).y, [1, 2, 3])
    with pytest.raises(DataFormatError, match="3 distinct values"):
        load_dataset(path, task="binary")
    two = write(tmp_path / "two.csv", "-1,0\n1,0\n")
    np.testing.assert_array_equal(load_dataset(two, task="regression").y, [-1, 1])
    with pytest.raises(ValueError, match="task"):
        load_dataset(two, task="classification")


def test_one_class_labels_are_refused_for_a_task(tmp_path: Path) -> None:
    path = write(tmp_path / "one.csv", "".join(f"1,{v}\n" for v in range(8)))
    with pytest.raises(DataFormatError, match=r"one.csv: every label is 1: task='binary' needs both classes"):
        load_train_test(path, seed=0, task="binary")
    with pytest.raises(DataFormatError, match=r"every label is 1: binary classification needs both classes"):
        load_train_test(path, seed=0)  # "auto" must not silently train a regression on the constant
    with pytest.warns(DataWarning, match="every label is 1: the regression target is a constant"):
        train, _ = load_train_test(path, seed=0, task="regression")
    np.testing.assert_array_equal(train.y, 1.0)
    # one file alone may be a party's shard, where one class is normal under a skewed partition
    np.testing.assert_array_equal(load_dataset(path, task="binary").y, 1.0)
    with pytest.warns(DataWarning, match="task='auto' keeps it as a number"):
        load_dataset(path)
    # the split: both classes in the file, but the training rows keep only one
    two = write(tmp_path / "two.csv", "1,0\n1,1\n1,2\n0,3\n")
    order = np.random.default_rng(5).permutation(4)
    assert 3 in order[:1]  # seed 5 holds the only class-0 row out
    with pytest.raises(DataFormatError, match="training rows left after holding out 1 test rows all have label 1"):
        load_train_test(two, seed=5)


def test_labels_that_are_not_binary_are_named(tmp_path: Path) -> None:
    path = write(tmp_path / "multi.csv", "".join(f"{k % 4},{k}\n" for k in range(12)))
    with pytest.raises(
        DataFormatError, match=r"task='binary' needs two label values but found 4 distinct values: 0, 1, 2, 3 "
    ):
        load_train_test(path, seed=0, task="binary")
    test = write(tmp_path / "t.csv", "0,1\n1,2\n5,3\n")
    train = write(tmp_path / "b.csv", "0,1\n1,2\n")
    with pytest.raises(DataFormatError, match=r"t.csv: binary labels expected but found 3 values: 0, 1, 5"):
        load_train_test(train, test, seed=0)


def test_check_labels_for_arrays() -> None:
    assert check_labels([0, 1, 1]) == check_labels([-1, 1], task="binary") == "binary"
    assert check_labels([0.5, 1.5, 3.0]) == check_labels([0, 1], task="regression") == "regression"
    with pytest.raises(DataFormatError, match="party 2: every label is 0: task='binary' needs both classes"):
        check_labels(np.zeros(5), task="binary", source="party 2")
    with pytest.raises(DataFormatError, match="found 3 distinct values: 0, 1, 2"):
        check_labels([0, 1, 2], task="binary")
    with pytest.raises(DataFormatError, match="label 1 is missing"):
        check_labels([0, np.nan, 1])


# --------------------------------------------------------------------------------------------------------------------
# An unnamed leading index column (pandas' to_csv default)


def pandas_like(path: Path, index: list[int], first: str = "") -> Path:
    rows = [f"{first},y,a,b"] + [f"{i},{k % 2},{k * 0.5},{-k}" for k, i in enumerate(index)]
    return write(path, "\n".join(rows) + "\n")


@pytest.mark.parametrize(
    ("first", "index"),
    [("", list(range(6))), ("Unnamed: 0", list(range(6))), ("", [2, 3, 7, 8, 10, 15]), ("", [3, 0, 5, 1, 4, 2])],
)
def test_unnamed_index_column_is_dropped_with_a_warning(tmp_path: Path, first: str, index: list[int]) -> None:
    path = pandas_like(tmp_path / "pd.csv", index, first)
    with pytest.warns(DataWarning, match=r"pd.csv: dropped column 0 .*an unnamed row index, as pandas' to_csv"):
        ds = load_dataset(path)
    assert ds.feature_names == ["a", "b"]  # and the label is the first real column, y
    np.testing.assert_array_equal(ds.y, [k % 2 for k in range(6)])
    np.testing.assert_array_equal(ds.X[:, 0], [k * 0.5 for k in range(6)])
    with pytest.raises(DataFormatError, match="label column 0 is an unnamed row index"):
        load_dataset(path, label_column=0)


def test_unnamed_columns_never_become_a_feature_named_empty(tmp_path: Path) -> None:
    # not a row index (repeats): kept, but under its position's name
    path = write(tmp_path / "u.csv", ",y,a\n5,1,2\n5,0,3\n7,1,4\n")
    with pytest.warns(DataWarning, match=r"u.csv: 1 column\(s\) have no name in the header; named by position: c0"):
        ds = load_dataset(path, label_column="y")
    assert ds.feature_names == ["c0", "a"]
    with pytest.warns(DataWarning, match="named 'Unnamed: 0' .* does not number the rows: kept as a feature"):
        assert load_dataset(pandas_like(tmp_path / "n.csv", [4, 4, 1, 0, 2, 3], "Unnamed: 0")).n_features == 3
    # dropped by the user: nothing to say; a named column is never taken for an index
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_dataset(
            pandas_like(tmp_path / "d.csv", list(range(6))), drop_columns=[0], label_column="y"
        ).feature_names == ["a", "b"]
        assert load_dataset(pandas_like(tmp_path / "i.csv", list(range(6)), "id"), label_column="y").feature_names == [
            "id",
            "a",
            "b",
        ]


def test_test_file_columns_are_matched_by_name(tmp_path: Path) -> None:
    train = write(tmp_path / "train.csv", "y,a,b,c\n0,1,2,3\n1,4,5,6\n")
    test = write(tmp_path / "test.csv", "c,y,a,b\n30,1,10,20\n")
    _, te = load_train_test(train, test, seed=0, label_column="y")  # the label by name: it moved too
    assert te.feature_names == ["a", "b", "c"]
    np.testing.assert_array_equal(te.X, [[10, 20, 30]])
    np.testing.assert_array_equal(te.y, [1])
    other = write(tmp_path / "other.csv", "y,a,b,d\n1,10,20,30\n")
    with pytest.raises(
        DataFormatError, match=r"other.csv: its header does not match the training file's: it lacks 'c' and has 'd'"
    ):
        load_train_test(train, other, seed=0, label_column="y")


def test_load_features_reads_only_the_model_columns(tmp_path: Path) -> None:
    path = write(tmp_path / "s.csv", 'name,b,id,a\n"Smith, J",2,007,1\nLee,4,008,3\n')
    got = load_features(path, ["a", "b"], id_column="id")
    np.testing.assert_array_equal(got.X, [[1, 2], [3, 4]])
    assert (got.ids, got.id_name, got.ignored, got.by_name) == (["007", "008"], "id", ["'name'"], True)
    with pytest.raises(DataFormatError, match=r"s.csv: the file lacks 1 of the model's 3 features: 'c'"):
        load_features(path, ["a", "b", "c"])
    with pytest.raises(DataFormatError, match="ID column applies to CSV files"):
        load_features(write(tmp_path / "l.libsvm", "1 1:1\n"), ["f1"], id_column=0)
    with pytest.raises(DataFormatError, match="exceeds num_features=1"):
        load_features(write(tmp_path / "w.libsvm", "1 1:1 2:1\n"), ["f1"])


# --------------------------------------------------------------------------------------------------------------------
# Errors: each names file, line and reason


MALFORMED = [
    # (file name, content, line, reason fragment)
    ("bad.libsvm", "1 1:1\n0 x:1\n", 2, "feature index 'x' is not an integer"),
    ("bad.libsvm", "1 1:1\n0 2:1\n1 0:1\n", 3, "feature index 0 is out of range"),
    ("bad.libsvm", "1 1:1\n0 -2:1\n", 2, "feature index -2 is out of range"),
    ("bad.libsvm", "1 1:1\n1 1:1\n0 2:1 2:3\n", 3, "duplicate feature index 2"),
    ("bad.libsvm", "1 1:1 5:1 3:1\n", 1, "must increase within a line (3 after 5)"),
    ("bad.libsvm", "1 1:1\n1:1 2:1\n", 2, "missing label"),
    ("bad.libsvm", "1 1:1\nabc 2:1\n", 2, "label 'abc' is not a number"),
    ("bad.libsvm", "1 1:1\nnan 2:1\n", 2, "label is missing"),
    ("bad.libsvm", "1 1:1\n0 2:abc\n", 2, "value 'abc' of feature 2 is not a number"),
    ("bad.libsvm", "1 1:1\n0 2:\n", 2, "feature 2 has no value"),
    ("bad.libsvm", "1 1:1\n0 2\n", 2, "not of the form index:value"),
    ("bad.libsvm", "1 1:1\n0 2:1-2\n", 2, "'1-2'"),
    ("bad.libsvm", "1 1:1\n0 99999999999999999999999:1\n", 2, "feature index 99999999999999999999999 is too large"),
    ("bad.csv", "1,2,3\n0,4\n", 2, "expected 3 fields (as on line 1), found 2"),
    ("bad.csv", "1,2,3\n0,4,5,6\n", 2, "expected 3 fields"),
    ("bad.csv", "a,b,c\n1,2,3\n0,4,x\n", 3, "value 'x' in column 2 ('c') is not a number"),
    ("bad.csv", "1,2,3\n\n\n0,1_0,3\n", 4, "value '1_0'"),
    ("bad.csv", "1,2,3\nNA,4,5\n", 2, "label is missing"),
    ("bad.csv", "y,a\n1,2\n,3\n", 3, "label is missing"),
    ("bad.csv", "1 2 3\n0 4\n", 2, "expected 3 fields"),
    ("bad.tsv", "1\t2\n0\t\t3\n", 2, "expected 2 fields"),
]


@pytest.mark.parametrize(("name", "content", "line", "reason"), MALFORMED)
def test_malformed_files_name_line_and_reason(tmp_path: Path, name: str, content: str, line: int, reason: str) -> None:
    for gz in (False, True):
        path = write(tmp_path / (name + (".gz" if gz else "")), content, gz=gz)
        with pytest.raises(DataFormatError) as info:
            load_dataset(path)
        err = info.value
        assert err.line == line, str(err)
        assert reason in err.reason, str(err)
        assert str(err).startswith(f"{path.name}:{line}: ")
        assert err.path == str(path)


@pytest.mark.parametrize("content", ["", "\n\n  \n", "# only a comment\n"])
def test_empty_file(tmp_path: Path, content: str) -> None:
    for name in ("e.csv", "e.libsvm", "e"):
        with pytest.raises(DataFormatError, match=r"empty file|no data rows"):
            load_dataset(write(tmp_path / name, content))


def test_header_only_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="no data rows after the header"):
        load_dataset(write(tmp_path / "h.csv", "y,a,b\n"))
    with pytest.raises(DataFormatError, match="unknown format 'parquet'"):
        load_dataset(write(tmp_path / "x.csv", "1,2\n"), fmt="parquet")
    binary = tmp_path / "blob"
    binary.write_bytes(b"\x00\x01\x02 not text")
    with pytest.raises(DataFormatError, match="unknown format"):
        load_dataset(binary)
    corrupt = tmp_path / "c.gz"
    corrupt.write_bytes(gzip.compress(b"1 1:1\n" * 100)[:30])
    with pytest.raises(DataFormatError, match="gzip"):
        load_dataset(corrupt)
    with pytest.raises(FileNotFoundError):
        load_dataset(tmp_path / "nope.csv")


def test_column_selection_errors(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", "y,a\n1,2\n0,3\n")
    with pytest.raises(DataFormatError, match="'z' is not in the header"):
        load_dataset(path, label_column="z")
    with pytest.raises(DataFormatError, match="out of range for 2 columns"):
        load_dataset(path, label_column=2)
    with pytest.raises(DataFormatError, match="also in drop_columns"):
        load_dataset(path, drop_columns=["y"])
    with pytest.raises(DataFormatError, match="no header"):
        load_dataset(write(tmp_path / "n.csv", "1,2\n0,3\n"), label_column="y")
    with pytest.raises(DataFormatError, match="drop_columns applies to CSV"):
        load_dataset(write(tmp_path / "l.libsvm", "1 1:1\n"), drop_columns=[1])


def test_num_features(tmp_path: Path) -> None:
    path = write(tmp_path / "n.libsvm", "1 1:1 2:1\n0 3:1\n")
    assert load_dataset(path).n_features == 3
    wide = load_dataset(path, num_features=5)
    assert wide.n_features == 5 and wide.feature_names[-1] == "f5"
    np.testing.assert_array_equal(wide.X[:, 3:], 0.0)
    with pytest.raises(DataFormatError) as info:
        load_dataset(path, num_features=2)
    assert info.value.line == 2 and "feature index 3 exceeds num_features=2" in str(info.value)
    with pytest.raises(DataFormatError, match="num_features"):
        load_dataset(write(tmp_path / "c.csv", "1,2\n0,3\n"), num_features=3)


def test_error_is_value_error_and_pickles() -> None:
    err = DataFormatError("/data/a9a.t", 17, "feature index 'x' is not an integer")
    assert isinstance(err, ValueError)
    assert str(err) == "a9a.t:17: feature index 'x' is not an integer"
    again = pickle.loads(pickle.dumps(err))
    assert (again.path, again.line, again.reason, str(again)) == (err.path, err.line, err.reason, str(err))
    assert str(DataFormatError("x.csv", None, "empty file")) == "x.csv: empty file"


# --------------------------------------------------------------------------------------------------------------------
# Fast path agrees with the careful parser


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["-1", "+1", "0", "1", "2.5"]),
            st.dictionaries(
                st.integers(1, 30),
                st.one_of(
                    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
                    st.sampled_from(["nan", "1", "-0", ".5", "1e-3", "3.", "inf"]),
                ),
                max_size=8,
            ),
        ),
        min_size=1,
        max_size=15,
    )
)
def test_fast_libsvm_equals_careful(rows: list[tuple[str, dict[int, str]]]) -> None:
    lines = [" ".join([label, *(f"{k}:{v}" for k, v in sorted(feats.items()))]) for label, feats in rows]
    fast = _parse_libsvm_fast(lines)
    careful = _parse_libsvm_careful("h", lines)
    assert fast is not None
    for key in ("labels", "rows", "cols", "vals", "line_numbers"):
        np.testing.assert_array_equal(getattr(fast, key), getattr(careful, key))
    assert fast.max_index == careful.max_index


@settings(max_examples=40, deadline=None)
@given(
    cells=st.lists(
        st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=3, max_size=3),
        min_size=1,
        max_size=10,
    ),
    missing=st.booleans(),
)
def test_csv_fast_and_careful_paths_agree(
    tmp_path_factory: pytest.TempPathFactory, cells: list[list[float]], missing: bool
) -> None:
    directory = tmp_path_factory.mktemp("csv")
    body = "\n".join(",".join(repr(v) for v in row) for row in cells) + "\n"
    plain = load_dataset(write(directory / "p.csv", body), task="regression")
    # A quoted or missing field forces the careful parser; the numbers must come out identical.
    extra = ",NA" if missing else ',"0"'
    careful = load_dataset(write(directory / "q.csv", body.replace("\n", extra + "\n")), task="regression")
    np.testing.assert_array_equal(careful.X[:, :-1], plain.X)
    np.testing.assert_array_equal(careful.y, plain.y)


# --------------------------------------------------------------------------------------------------------------------
# Dataset and train/test


def test_dataset_subset_copies_and_validates() -> None:
    ds = Dataset(np.arange(12.0).reshape(4, 3), np.array([0, 1, 0, 1]), ["a", "b", "c"], "toy")
    sub = ds.subset(np.array([3, 1]))
    np.testing.assert_array_equal(sub.X, [[9, 10, 11], [3, 4, 5]])
    np.testing.assert_array_equal(sub.y, [1, 1])
    sub.X[0, 0] = -1
    assert ds.X[3, 0] == 9
    assert ds.subset(np.array([True, False, False, True])).n_rows == 2
    assert ds.subset([]).n_rows == 0
    with pytest.raises(ValueError):
        Dataset(np.zeros((3, 2)), np.zeros(2), ["a", "b"], "bad")
    with pytest.raises(ValueError):
        Dataset(np.zeros((3, 2)), np.zeros(3), ["a"], "bad")


def test_load_train_test_split(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(101, 3))
    y = (rng.random(101) < 0.3).astype(float)
    path = write(tmp_path / "s.csv", to_csv(X, y))
    train, test = load_train_test(path, seed=7)
    assert (train.n_rows, test.n_rows) == (76, 25)
    again_train, again_test = load_train_test(path, seed=7)
    np.testing.assert_array_equal(train.X, again_train.X)
    np.testing.assert_array_equal(test.X, again_test.X)
    other_train, _ = load_train_test(path, seed=8)
    assert not np.array_equal(train.X, other_train.X)
    # Disjoint and covering, in file order, with the expected permutation.
    order = np.random.default_rng(7).permutation(101)
    np.testing.assert_array_equal(test.X, X[np.sort(order[:25])])
    np.testing.assert_array_equal(train.X, X[np.sort(order[25:])])
    np.testing.assert_array_equal(train.y, y[np.sort(order[25:])])
    small_train, small_test = load_train_test(path, seed=1, test_fraction=0.1)
    assert (small_train.n_rows, small_test.n_rows) == (91, 10)


def test_load_train_test_with_test_file(tmp_path: Path) -> None:
    train_path = write(tmp_path / "tr", "-1 1:1 4:1\n+1 2:1\n")
    test_path = write(tmp_path / "te", "+1 1:1\n+1 3:2\n")  # narrower, and a single label value
    train, test = load_train_test(train_path, test_path, seed=0)
    assert train.n_features == test.n_features == 4
    assert test.feature_names == train.feature_names == ["f1", "f2", "f3", "f4"]
    np.testing.assert_array_equal(train.y, [0, 1])
    # On its own, "auto" would keep a single-valued label as is (+1); with the train decision it is class 1.
    np.testing.assert_array_equal(test.y, [1, 1])
    np.testing.assert_array_equal(test.X, [[1, 0, 0, 0], [0, 0, 2, 0]])
    with pytest.raises(DataFormatError, match="exceeds num_features=3"):
        load_train_test(train_path, test_path, seed=0, num_features=3)
    csv_test = write(tmp_path / "te.csv", "1,2\n")
    with pytest.raises(DataFormatError, match="features but the training file has"):
        load_train_test(train_path, csv_test, seed=0)


# --------------------------------------------------------------------------------------------------------------------
# The benchmark files of the data sets directory (present in CI)


@pytest.fixture(scope="module")
def a9a_pair() -> tuple[Dataset, Dataset]:
    return load_train_test(DATA_DIR / "a9a.gz", DATA_DIR / "a9a.t.gz", seed=0)


@needs_datasets
def test_benchmark_a9a(a9a_pair: tuple[Dataset, Dataset]) -> None:
    train, test = a9a_pair
    assert train.X.shape == (32_561, 123) and test.X.shape == (16_281, 123)
    assert train.name == "a9a" and test.name == "a9a.t"
    assert set(np.unique(train.y)) == {0.0, 1.0} and set(np.unique(test.y)) == {0.0, 1.0}
    assert int(train.y.sum()) == 7_841 and int(test.y.sum()) == 3_846
    assert set(np.unique(train.X)) == {0.0, 1.0}
    assert not test.X[:, 122].any(), "a9a.t never uses index 123; the column is padded with zeros"
    alone = load_dataset(DATA_DIR / "a9a.t.gz", num_features=123)
    np.testing.assert_array_equal(alone.X, test.X)
    np.testing.assert_array_equal(alone.y, test.y)


@needs_datasets
def test_benchmark_a9a_takes_the_fast_path() -> None:
    lines = _read_text(str(DATA_DIR / "a9a.t.gz")).split("\n")
    fast = _parse_libsvm_fast(lines)
    assert fast is not None
    assert fast.max_index == 122 and fast.labels.size == 16_281
    # The careful parser agrees on a slice (it is the slow reference, so not on the whole file).
    head = lines[:3000]
    fast_head, careful_head = _parse_libsvm_fast(head), _parse_libsvm_careful("a9a.t", head)
    assert fast_head is not None
    for key in ("labels", "rows", "cols", "vals", "line_numbers"):
        np.testing.assert_array_equal(getattr(fast_head, key), getattr(careful_head, key))


@needs_datasets
def test_benchmark_csv_files() -> None:
    higgs = load_dataset(DATA_DIR / "higgs_h2o_train_10k.csv.gz")
    assert higgs.X.shape == (10_000, 28)
    assert set(np.unique(higgs.y)) == {0.0, 1.0}
    assert not np.isnan(higgs.X).any()
    credit = load_dataset(DATA_DIR / "UCI_Credit_Card.csv.gz", label_column=-1, drop_columns=["ID"])
    assert credit.X.shape == (30_000, 23)
    assert "ID" not in credit.feature_names and credit.feature_names[0] == "LIMIT_BAL"
    assert "default.payment.next.month" not in credit.feature_names
    assert set(np.unique(credit.y)) == {0.0, 1.0}
    by_name = load_dataset(
        DATA_DIR / "UCI_Credit_Card.csv.gz", label_column="default.payment.next.month", drop_columns=[0]
    )
    np.testing.assert_array_equal(by_name.X, credit.X)
    susy_train, susy_test = load_train_test(
        DATA_DIR / "susy_bfp_train_10k.csv.gz", DATA_DIR / "susy_bfp_test_10k.csv.gz", seed=0
    )
    assert susy_train.X.shape == (10_000, 8) and susy_test.X.shape == (10_000, 8)
    assert set(np.unique(susy_test.y)) == {0.0, 1.0}


@needs_datasets
def test_benchmark_regression_and_split() -> None:
    abalone = load_dataset(DATA_DIR / "abalone.gz")
    assert abalone.X.shape == (4_177, 8)
    assert abalone.y.min() >= 1 and abalone.y.max() <= 29 and np.unique(abalone.y).size > 2
    train, test = load_train_test(DATA_DIR / "cpusmall.gz", seed=3)
    assert (train.n_rows, test.n_rows) == (6_144, 2_048)
    assert train.n_features == test.n_features == 12


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["1 1:1", "0 2:1", "1 0:1"], "f:3: feature index 0 is out of range"),
        (["1 1:1", "0 2:1 2:3"], "f:2: duplicate feature index 2"),
        (["1 1:1 5:1 3:1"], "f:1: feature indices must increase within a line (3 after 5)"),
        (["1 3:1 0:1", "1 2:1 1:1"], "f:1: feature index 0 is out of range"),
        (["1 2:1", "1 2:1 1:1 0:1"], "f:2: feature indices must increase within a line (1 after 2)"),
    ],
)
def test_fast_path_declines_semantic_errors(lines: list[str], expected: str) -> None:
    # The fast path hands every semantic error to the careful parser, which names the first one in file order.
    assert _parse_libsvm_fast(lines) is None
    with pytest.raises(DataFormatError) as info:
        _parse_libsvm_careful("f", lines)
    assert str(info.value).startswith(expected)
