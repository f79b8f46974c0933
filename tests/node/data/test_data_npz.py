"""NumPy ``.npz`` data files (``node.data.loaders``): the same data set as its CSV, by name or by content, and every
malformed
archive refused with its reason (nothing unpickled)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from fgbdt_chain.deploy.requester import write_shard
from fgbdt_chain.node.data.loaders import DataFormatError, Dataset, load_dataset, load_features, load_train_test


def _rows(seed: int = 0, n: int = 40) -> Dataset:
    """Awkward values: missing cells, exact doubles no short decimal prints, negative zero, integers, a huge one."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * np.array([1.0, 1e-300, 3.0, 1e300])
    X[:, 2] = np.round(X[:, 2])
    X[rng.random(size=X.shape) < 0.15] = np.nan
    X[0, 0] = -0.0
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return Dataset(X, y, ["age", "dose", "visits", "income"], "clinic")


def _same(a: Dataset, b: Dataset) -> None:
    assert a.X.shape == b.X.shape and a.feature_names == b.feature_names
    assert np.array_equal(a.X.view(np.uint64), b.X.view(np.uint64))  # bit for bit: NaN and -0.0 included
    assert np.array_equal(a.y, b.y)


def test_an_npz_loads_as_its_csv_does(tmp_path: Path) -> None:
    """Bit for bit, labels mapped by the same rules: a party handed its shard as an archive trains on what it would
    have read from the CSV."""
    rows = _rows()
    write_shard(tmp_path / "shard.csv", rows)
    write_shard(tmp_path / "shard.npz", rows)  # as the requester hands a party its rows
    for task in ("binary", "auto"):
        from_csv = load_dataset(tmp_path / "shard.csv", task=task)
        from_npz = load_dataset(tmp_path / "shard.npz", task=task)
        _same(from_npz, from_csv)
        assert set(from_npz.y.tolist()) == {0.0, 1.0} and from_npz.name == "shard"
    regression = load_dataset(tmp_path / "shard.npz", task="regression")
    assert set(regression.y.tolist()) == {-1.0, 1.0}


def test_an_npz_is_known_by_its_bytes_or_by_fmt(tmp_path: Path) -> None:
    rows = _rows(1)
    np.savez(tmp_path / "rows.npz", X=rows.X, y=rows.y)
    (tmp_path / "rows.npz").rename(tmp_path / "rows.dat")  # a name that says nothing
    sniffed = load_dataset(tmp_path / "rows.dat", task="binary")
    assert sniffed.feature_names == ["c0", "c1", "c2", "c3"]  # no names in the archive: positional
    assert np.array_equal(sniffed.X.view(np.uint64), rows.X.view(np.uint64))
    told = load_dataset(tmp_path / "rows.dat", fmt="npz", task="binary")
    assert np.array_equal(told.y, sniffed.y)
    with pytest.raises(DataFormatError, match="binary content"):
        load_dataset(tmp_path / "rows.dat", fmt="csv")


def test_feature_names_are_stripped_as_a_csv_header_is(tmp_path: Path) -> None:
    path = tmp_path / "padded.npz"
    np.savez(path, X=np.zeros((2, 2)), y=np.array([0.0, 1.0]), feature_names=np.array([" age", "dose "]))
    assert load_dataset(path).feature_names == ["age", "dose"]


def test_a_test_csv_is_matched_to_the_npz_training_columns_by_name(tmp_path: Path) -> None:
    rows = _rows(2)
    np.savez(tmp_path / "train.npz", X=rows.X, y=rows.y, feature_names=np.array(rows.feature_names))
    order = [3, 1, 0, 2]
    shuffled = Dataset(rows.X[:, order], rows.y, [rows.feature_names[j] for j in order])
    write_shard(tmp_path / "test.csv", shuffled)
    train, test = load_train_test(tmp_path / "train.npz", tmp_path / "test.csv", seed=0, task="binary")
    assert test.feature_names == train.feature_names
    assert np.array_equal(test.X.view(np.uint64), train.X.view(np.uint64))


def test_a_file_to_score_is_read_by_name_or_by_position_without_labels(tmp_path: Path) -> None:
    rows = _rows(3)
    named = tmp_path / "named.npz"
    np.savez(named, X=rows.X[:, ::-1], feature_names=np.array(rows.feature_names[::-1]))  # no y: fine to score
    got = load_features(named, rows.feature_names)
    assert got.by_name and got.ignored == []
    assert np.array_equal(got.X.view(np.uint64), rows.X.view(np.uint64))
    plain = tmp_path / "plain.npz"
    np.savez(plain, X=rows.X, y=np.array(["?"] * rows.n_rows))  # labels unknown: not read for scoring
    positional = load_features(plain, ["c0", "c1", "c2", "c3"])
    assert not positional.by_name and np.array_equal(positional.X.view(np.uint64), rows.X.view(np.uint64))
    with pytest.raises(DataFormatError, match="'smoker'"):
        load_features(named, [*rows.feature_names, "smoker"])
    with pytest.raises(DataFormatError, match="id_column applies to CSV files"):
        load_features(named, rows.feature_names, id_column="id")


@pytest.mark.parametrize(
    ("arrays", "reason"),
    [
        ({"X": np.zeros((3, 2))}, "y missing"),
        ({"y": np.zeros(3)}, "X missing"),
        ({"X": np.zeros((3, 2)), "y": np.zeros(3), "weights": np.ones(3)}, "unexpected arrays weights"),
        ({"X": np.zeros(3), "y": np.zeros(3)}, "X must be 2-D"),
        ({"X": np.zeros((0, 2)), "y": np.zeros(0)}, "no data rows"),
        ({"X": np.array([["a", "b"]]), "y": np.zeros(1)}, "X must hold numbers"),
        ({"X": np.zeros((3, 2)), "y": np.zeros(4)}, "one number per row of X \\(3\\)"),
        ({"X": np.zeros((3, 2)), "y": np.zeros((3, 1))}, "one number per row"),
        ({"X": np.zeros((3, 2)), "y": np.array([0.0, np.nan, 1.0])}, "label of row 1 is missing"),
        ({"X": np.zeros((3, 2)), "y": np.zeros(3), "feature_names": np.array(["a"])}, "must be 2 strings"),
        ({"X": np.zeros((3, 2)), "y": np.zeros(3), "feature_names": np.array([1, 2])}, "must be 2 strings"),
        ({"X": np.zeros((3, 2)), "y": np.zeros(3), "feature_names": np.array(["a", " "])}, "name .* is empty"),
    ],
)
def test_a_malformed_archive_is_refused_with_its_reason(tmp_path: Path, arrays: dict, reason: str) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(DataFormatError, match=reason) as caught:
        load_dataset(path, task="regression")
    assert "bad.npz" in str(caught.value)


def test_nothing_is_unpickled_and_what_is_no_archive_is_named(tmp_path: Path) -> None:
    pickled = tmp_path / "objects.npz"
    np.savez(pickled, X=np.array([[1, "a"]], dtype=object), y=np.zeros(1))
    with pytest.raises(DataFormatError, match=r"cannot be read .*allow_pickle"):
        load_dataset(pickled)
    single = tmp_path / "single.npy"
    np.save(single, np.zeros((3, 2)))
    with pytest.raises(DataFormatError, match="single NumPy array"):
        load_dataset(single, fmt="npz")
    broken = tmp_path / "broken.npz"
    np.savez(broken, X=np.zeros((50, 4)), y=np.zeros(50))
    broken.write_bytes(broken.read_bytes()[:200])  # cut off
    with pytest.raises(DataFormatError, match=r"broken\.npz"):
        load_dataset(broken)
    with pytest.raises(FileNotFoundError):
        load_dataset(tmp_path / "absent.npz")
    packed = tmp_path / "packed.npz"
    np.savez_compressed(packed, X=np.arange(4000.0).reshape(1000, 4), y=np.zeros(1000))
    raw = bytearray(packed.read_bytes())
    raw[len(raw) // 3 : len(raw) // 3 + 64] = bytes(64)  # inside the compressed X
    packed.write_bytes(bytes(raw))
    with pytest.raises(DataFormatError, match=r"packed\.npz"):
        load_dataset(packed)
    zipped = tmp_path / "rows.npz.gz"
    zipped.write_bytes(gzip.compress((tmp_path / "single.npy").read_bytes()))
    with pytest.raises(DataFormatError, match=r"a gzip file, not an \.npz archive"):
        load_dataset(zipped)
    text = tmp_path / "text.npz"
    text.write_text("label,a\n1,2\n")
    with pytest.raises(DataFormatError, match=r"not an \.npz \(zip\) archive"):
        load_dataset(text)


def test_the_csv_options_and_a_wrong_width_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "rows.npz"
    np.savez(path, X=np.zeros((3, 2)), y=np.array([0.0, 1.0, 1.0]))
    for option, value in (("label_column", "y"), ("header", True), ("drop_columns", ["id"])):
        with pytest.raises(DataFormatError, match=f"{option} applies to CSV files"):
            load_dataset(path, **{option: value})  # type: ignore[arg-type]
    with pytest.raises(DataFormatError, match="2 features but num_features=3"):
        load_dataset(path, num_features=3)
    with pytest.raises(DataFormatError, match="expected 'libsvm', 'csv' or 'npz'"):
        load_dataset(path, fmt="parquet")
