"""A party's rows as a Parquet dataset, read a chunk at a time: for a party whose rows do not fit in one process.

Layout: one directory (or one file) of Parquet files, read in file-name order, each holding the feature columns (any
numeric type, null or NaN for missing) and the label column. The rows' order is the files' order and, within a
file, its own; a chunk is one record batch of at most ``chunk_rows`` rows, so a reader holds one chunk's columns at
a time whatever the dataset's size. A party's bin slots, once binned with the task's edges, are written the same
way (one ``uint8`` column per feature, :func:`write_slots`), so that the histograms of every level read one byte per
feature and row, chunk by chunk (``node.protocol.chunked_party``).

pyarrow is an optional dependency (the ``scale`` extra); it is imported when a Parquet dataset is used, and its
absence is an error that says how to install it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

LABEL = "y"
"""The label column's default name."""
SLOT_PREFIX = "s"
"""The bin-slot columns of a slots dataset: ``s0``, ``s1``, ... (one per feature)."""
DEFAULT_CHUNK_ROWS = 262_144
"""Rows per chunk when none is given: 2 MiB of slots for 8 features, 16 MiB of float64 for 8 features."""


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
        raise ImportError("Parquet parties need pyarrow: pip install 'fgbdt-chain[scale]'") from exc
    return pa, pq


def files_of(path: str | os.PathLike[str]) -> list[Path]:
    """The Parquet files of a dataset: ``path`` itself, or the ``*.parquet`` files under it in name order."""
    p = Path(path)
    if p.is_dir():
        found = sorted(q for q in p.rglob("*.parquet") if q.is_file())
        if not found:
            raise FileNotFoundError(f"{p}: no .parquet files")
        return found
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such Parquet file or directory")
    return [p]


@dataclass(frozen=True)
class ParquetRows:
    """A Parquet dataset of rows (module docstring), read ``chunk_rows`` rows at a time."""

    path: Path
    chunk_rows: int = DEFAULT_CHUNK_ROWS

    def __post_init__(self) -> None:
        if self.chunk_rows < 1:
            raise ValueError(f"chunk_rows must be at least 1, got {self.chunk_rows}")

    @property
    def files(self) -> list[Path]:
        return files_of(self.path)

    @property
    def columns(self) -> list[str]:
        _, pq = _pyarrow()
        return list(pq.ParquetFile(self.files[0]).schema_arrow.names)

    @property
    def n_rows(self) -> int:
        _, pq = _pyarrow()
        return sum(pq.ParquetFile(f).metadata.num_rows for f in self.files)

    def chunks(self, columns: Sequence[str], dtype: type = np.float64) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, rows x columns array of ``dtype``) per chunk, in the dataset's row order; nulls as NaN for a
        float dtype (an integer dtype refuses them)."""
        _, pq = _pyarrow()
        start = 0
        for f in self.files:
            reader = pq.ParquetFile(f)
            for batch in reader.iter_batches(batch_size=self.chunk_rows, columns=list(columns)):
                out = np.empty((batch.num_rows, len(columns)), dtype=dtype)
                for j in range(len(columns)):
                    col = batch.column(j)
                    if np.issubdtype(dtype, np.floating):
                        out[:, j] = col.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
                    else:
                        if col.null_count:
                            raise ValueError(f"{f}: column {columns[j]!r} has missing values")
                        out[:, j] = col.to_numpy(zero_copy_only=False)
                yield start, out
                start += batch.num_rows

    def features(self, label: str = LABEL) -> list[str]:
        """The feature columns: every column but the label, in the file's order."""
        cols = self.columns
        if label not in cols:
            raise ValueError(f"{self.path}: no label column {label!r} (columns: {', '.join(cols)})")
        return [c for c in cols if c != label]

    def labels(self, label: str = LABEL) -> np.ndarray:
        """The label column, whole (one float64 per row: what a party keeps in memory with its scores)."""
        parts = [chunk[:, 0] for _, chunk in self.chunks([label])]
        return np.concatenate(parts) if parts else np.zeros(0)


def write_rows(
    path: str | os.PathLike[str],
    X: np.ndarray,
    y: np.ndarray | None,
    *,
    feature_names: Sequence[str] | None = None,
    rows_per_file: int | None = None,
    row_group_rows: int = DEFAULT_CHUNK_ROWS,
    label: str = LABEL,
) -> Path:
    """Write rows (and labels, unless None) as a Parquet dataset at ``path`` (a directory of ``part-NNNNN.parquet``
    files of at most ``rows_per_file`` rows each, or one file when None). Returns the path."""
    names = [f"f{j}" for j in range(X.shape[1])] if feature_names is None else list(feature_names)
    if len(names) != X.shape[1]:
        raise ValueError(f"{len(names)} feature names for {X.shape[1]} columns")

    def columns(lo: int, hi: int) -> dict[str, np.ndarray]:
        cols = {name: np.ascontiguousarray(X[lo:hi, j]) for j, name in enumerate(names)}
        if y is not None:
            cols[label] = np.asarray(y[lo:hi], dtype=np.float64)
        return cols

    return _write(Path(path), X.shape[0], columns, rows_per_file, row_group_rows)


def _write(
    path: Path,
    n_rows: int,
    columns: Callable[[int, int], dict[str, np.ndarray]],
    rows_per_file: int | None,
    row_group_rows: int,
) -> Path:
    pa, pq = _pyarrow()
    if rows_per_file is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns(0, n_rows)), path, row_group_size=row_group_rows)
        return path
    path.mkdir(parents=True, exist_ok=True)
    for k, lo in enumerate(range(0, max(n_rows, 1), rows_per_file)):
        hi = min(lo + rows_per_file, n_rows)
        pq.write_table(pa.table(columns(lo, hi)), path / f"part-{k:05d}.parquet", row_group_size=row_group_rows)
    return path


def slot_columns(n_features: int) -> list[str]:
    return [f"{SLOT_PREFIX}{j}" for j in range(n_features)]


def write_slots(
    path: str | os.PathLike[str],
    chunks: Iterator[np.ndarray],
    n_features: int,
    *,
    row_group_rows: int = DEFAULT_CHUNK_ROWS,
) -> Path:
    """Bin slots given chunk by chunk (each rows x ``n_features`` of ``uint8``) as a slots dataset at ``path``: one
    file per chunk, so that writing holds one chunk at a time."""
    pa, pq = _pyarrow()
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    names = slot_columns(n_features)
    for k, chunk in enumerate(chunks):
        if chunk.ndim != 2 or chunk.shape[1] != n_features:
            raise ValueError(f"slot chunk of shape {chunk.shape}, expected (rows, {n_features})")
        table = pa.table({name: np.ascontiguousarray(chunk[:, j], dtype=np.uint8) for j, name in enumerate(names)})
        pq.write_table(table, out / f"part-{k:05d}.parquet", row_group_size=row_group_rows)
    return out


def read_party(
    path: str | os.PathLike[str], label: str = LABEL, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A party's (X, y, feature names) from its Parquet dataset, read chunk by chunk into one array: every column
    but ``label`` a feature, in the file's order (what a process that holds the party's rows in memory trains on)."""
    rows = ParquetRows(Path(path), chunk_rows)
    features = rows.features(label)
    parts = [x for _, x in rows.chunks(features)]
    X = np.vstack(parts) if parts else np.zeros((0, len(features)))
    return X, rows.labels(label), features
