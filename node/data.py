"""Loading of the benchmark data sets (libsvm and CSV, plain or gzip) into dense float matrices.

Every party of a federated run must read its file exactly the way the others read theirs (same feature count, same
label mapping, same treatment of missing values), otherwise the shared bin edges and the histograms would not line up.
So the rules are fixed here, in one place:

* Missing values are ``NaN`` in ``X``. In CSV an empty field or one of ``NA``, ``NaN``, ``N/A``, ``?``, ``null``
  (any case) is missing. In libsvm an absent index is a *zero* (that is what the format means), and only an explicit
  missing token such as ``3:nan`` is missing.
* libsvm indices are 1-based and feature ``j`` of the file is column ``j - 1`` of ``X``. The feature count is the
  largest index seen, or ``num_features`` when given, so that a train and a test file agree (a9a.t never uses 123).
* Labels: ``task="binary"`` maps labels to {0, 1} by ``label > 0`` (so -1/+1 and 0/1 both work); ``"regression"``
  keeps them; ``"auto"`` picks binary when there are exactly two distinct labels.
* Nothing is half-loaded: any problem raises :class:`DataFormatError` naming the file, the line and the reason.

Parsing uses a vectorised fast path (validate the text, then let ``np.fromstring`` convert it in C) and falls back to
a careful per-field parser when the fast path cannot prove the text well formed. The careful parser is the
reference: it accepts the missing-value tokens and pinpoints the first bad line. Both give identical arrays on any
file the fast path accepts, which the tests check.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import math
import os
import re
import warnings
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "MISSING_TOKENS",
    "DataFormatError",
    "Dataset",
    "load_dataset",
    "load_train_test",
]

#: Field values (compared after stripping and lower-casing) that mean "missing" and load as NaN.
MISSING_TOKENS: frozenset[str] = frozenset({"", "na", "nan", "n/a", "?", "null"})

_FORMAT_ALIASES = {"libsvm": "libsvm", "svmlight": "libsvm", "svm": "libsvm", "csv": "csv", "tsv": "csv"}
_EXT_FORMATS = {".libsvm": "libsvm", ".svm": "libsvm", ".svmlight": "libsvm", ".csv": "csv", ".tsv": "csv"}
_TASKS = ("auto", "binary", "regression")
_GZIP_MAGIC = b"\x1f\x8b"
# A dense float64 matrix above this many cells (1.6 GB) is certainly a mistake (wrong format or wrong file).
_MAX_CELLS = 200_000_000

# The shape of a libsvm line ("label index:value ..."), with ASCII number characters only; np.fromstring then checks
# the numbers themselves strictly. Possessive quantifiers keep the match linear (no backtracking), which makes this
# check about six times faster than a regex that spells out the number grammar.
_LIBSVM_LINE = re.compile(r"[ \t]*+[0-9A-Za-z.+-]++(?:[ \t]++[0-9]++:[0-9A-Za-z.+-]++)*+[ \t]*+")
_LIBSVM_PAIR = re.compile(r"[^\s:,;]*:[^\s:,;]*")
_INT = re.compile(r"[+-]?\d+")


class DataFormatError(ValueError):
    """A data file that cannot be loaded, with the place to look at.

    It subclasses ``ValueError`` so that callers that only care about "bad input" need not know this type.
    """

    def __init__(self, path: str | os.PathLike[str], line: int | None, reason: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.reason = reason
        where = os.path.basename(self.path) or self.path
        super().__init__(f"{where}:{line}: {reason}" if line is not None else f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[DataFormatError], tuple[str, int | None, str]]:
        # Exceptions pickle their args by default, which would lose the structured fields (needed across processes).
        return (DataFormatError, (self.path, self.line, self.reason))


@dataclass
class Dataset:
    """A labelled data set held densely, because histogram building scans whole feature columns anyway."""

    X: np.ndarray
    y: np.ndarray
    feature_names: list[str] = field(default_factory=list)
    name: str = ""

    def __post_init__(self) -> None:
        # Normalise early: every consumer (binning, gradients, PSD) assumes float64 and would otherwise upcast silently.
        self.X = np.asarray(self.X, dtype=np.float64)
        self.y = np.asarray(self.y, dtype=np.float64)
        if self.X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {self.X.shape}")
        if self.y.shape != (self.X.shape[0],):
            raise ValueError(f"y must have shape ({self.X.shape[0]},), got {self.y.shape}")
        if not self.feature_names:
            self.feature_names = [f"f{j}" for j in range(self.X.shape[1])]
        elif len(self.feature_names) != self.X.shape[1]:
            raise ValueError(f"{len(self.feature_names)} feature names for {self.X.shape[1]} features")

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def subset(self, idx: np.ndarray | Sequence[int]) -> Dataset:
        """Rows ``idx`` (integer indices or a boolean mask) as a new data set with copied arrays.

        Copies, so that a party's shard cannot alias (and accidentally modify) another party's rows.
        """
        index = np.asarray(idx)
        if index.dtype != bool and index.size and not np.issubdtype(index.dtype, np.integer):
            raise TypeError(f"subset index must be integers or a boolean mask, got dtype {index.dtype}")
        if index.size == 0:
            index = index.astype(np.intp)
        return Dataset(
            X=self.X[index].copy(), y=self.y[index].copy(), feature_names=list(self.feature_names), name=self.name
        )


# --------------------------------------------------------------------------------------------------------------------
# Reading the raw text


def _read_text(path: str) -> str:
    """File contents as text with '\\n' line ends; gzip is recognised by its magic bytes, whatever the file name."""
    # A missing or unreadable file is an OSError (FileNotFoundError, ...) as usual, not a format problem.
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataFormatError(path, None, f"corrupt gzip data ({exc})") from None
    if b"\x00" in raw:
        raise DataFormatError(path, None, "unknown format: binary content (not a libsvm or CSV text file)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Only header names can be non-ASCII in a numeric file; latin-1 never fails and keeps the numbers intact.
        text = raw.decode("latin-1")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _dataset_name(path: str) -> str:
    base = os.path.basename(path)
    if base.lower().endswith(".gz"):
        base = base[:-3]
    stem, ext = os.path.splitext(base)
    return stem if ext.lower() in _EXT_FORMATS or ext.lower() in (".txt", ".data", ".dat") else base


def _format_from_name(path: str) -> str | None:
    base = os.path.basename(path).lower()
    if base.endswith(".gz"):
        base = base[:-3]
    return _EXT_FORMATS.get(os.path.splitext(base)[1])


def _sniff_format(path: str, lines: list[str]) -> str:
    """libsvm or CSV from the content, for files like LIBSVM's ``a9a`` whose name says nothing.

    A line with several whitespace-separated tokens, the later ones mostly ``index:value``, is libsvm; anything else
    that has data is treated as CSV (delimited, or whitespace separated numbers).
    """
    sample = list(itertools.islice((ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), 50))
    if not sample:
        raise DataFormatError(path, None, "empty file (no data rows)")
    for ln in sample:
        tokens = ln.split("#", 1)[0].split()
        if len(tokens) > 1:
            pairs = sum(1 for t in tokens[1:] if _LIBSVM_PAIR.fullmatch(t))
            return "libsvm" if 2 * pairs > len(tokens) - 1 else "csv"
    # Only single-token lines: libsvm rows with no non-zero feature, or a one/multi column delimited file.
    return "csv"


# --------------------------------------------------------------------------------------------------------------------
# Numbers


def _to_float(text: str) -> float:
    """One field as a float, missing tokens as NaN; raises ValueError for anything else.

    Underscores ("1_000") are refused although Python accepts them, to agree with the vectorised path.
    """
    try:
        if "_" in text:
            raise ValueError(text)
        return float(text)
    except ValueError:
        if text.strip().lower() in MISSING_TOKENS:
            return math.nan
        raise


def _fromstring(text: str, sep: str, expected: int) -> np.ndarray | None:
    """``np.fromstring`` that returns None unless it parsed the whole text into exactly ``expected`` numbers.

    numpy 2 raises on trailing garbage and numpy 1.x only warns; both mean "use the careful parser".
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            values = np.fromstring(text, dtype=np.float64, sep=sep)
        except (ValueError, DeprecationWarning):
            return None
    return values if values.size == expected else None


def _short(token: str, limit: int = 40) -> str:
    return repr(token if len(token) <= limit else token[:limit] + "...")


# --------------------------------------------------------------------------------------------------------------------
# libsvm


@dataclass
class _Sparse:
    """Parsed libsvm content before densification: coordinates use 1-based feature indices, as in the file."""

    labels: np.ndarray  # (n,) float64
    rows: np.ndarray  # (nnz,) intp
    cols: np.ndarray  # (nnz,) int64, 1-based
    vals: np.ndarray  # (nnz,) float64
    line_numbers: np.ndarray  # (n,) int64, 1-based line of each row
    max_index: int


def _strip_comment(line: str) -> str:
    return line.split("#", 1)[0] if "#" in line else line


def _parse_libsvm_fast(lines: list[str]) -> _Sparse | None:
    """Vectorised libsvm parsing; None when anything is off (the careful parser then finds and names the problem)."""
    kept: list[str] = []
    line_numbers: list[int] = []
    pair_counts: list[int] = []
    fullmatch = _LIBSVM_LINE.fullmatch
    for number, line in enumerate(lines, start=1):
        line = _strip_comment(line)
        if not line or line.isspace():
            continue
        if fullmatch(line) is None:
            return None
        kept.append(line)
        line_numbers.append(number)
        pair_counts.append(line.count(":"))
    counts = np.asarray(pair_counts, dtype=np.intp)
    lengths = 1 + 2 * counts
    # Each token of a matched line is free of whitespace, so it yields one number or a parse error: the size check
    # then proves that every token was converted on its own (no "1-2" read as two numbers).
    flat = _fromstring(" ".join(kept).replace(":", " "), " ", int(lengths.sum()))
    if flat is None:
        return None
    starts = np.zeros(len(kept), dtype=np.intp)
    if len(kept) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    if np.isnan(flat[starts]).any():
        return None  # a "nan" label: the careful parser reports it with its line
    is_feature = np.ones(flat.size, dtype=bool)
    is_feature[starts] = False
    pairs = flat[is_feature].reshape(-1, 2)
    index_f = pairs[:, 0]
    if index_f.size and index_f.max() > _MAX_CELLS:
        return None  # absurd index; let the careful parser name it
    cols = index_f.astype(np.int64)
    rows = np.repeat(np.arange(len(kept), dtype=np.intp), counts)
    lines_arr = np.asarray(line_numbers, dtype=np.int64)

    # Semantic checks, vectorised. Any violation goes to the careful parser, which names the first one in file order
    # exactly as it would have anyway (errors are rare, so their speed does not matter).
    if (cols == 0).any():
        return None
    if cols.size > 1 and ((rows[1:] == rows[:-1]) & (cols[1:] <= cols[:-1])).any():
        return None
    return _Sparse(
        labels=flat[starts],
        rows=rows,
        cols=cols,
        vals=pairs[:, 1].copy(),
        line_numbers=lines_arr,
        max_index=int(cols.max()) if cols.size else 0,
    )


def _parse_libsvm_careful(path: str, lines: list[str]) -> _Sparse:
    """Token-by-token libsvm parsing that raises at the first bad line; the reference for the fast path."""
    labels: list[float] = []
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    line_numbers: list[int] = []
    for number, raw_line in enumerate(lines, start=1):
        tokens = _strip_comment(raw_line).split()
        if not tokens:
            continue
        head = tokens[0]
        if ":" in head:
            raise DataFormatError(path, number, f"missing label (line starts with feature {_short(head)})")
        try:
            label = _to_float(head)
        except ValueError:
            raise DataFormatError(path, number, f"label {_short(head)} is not a number") from None
        if math.isnan(label):
            raise DataFormatError(path, number, f"label is missing ({_short(head)})")
        row = len(labels)
        previous = 0
        for token in tokens[1:]:
            key, sep, value = token.partition(":")
            if not sep:
                raise DataFormatError(path, number, f"feature {_short(token)} is not of the form index:value")
            if not _INT.fullmatch(key):
                raise DataFormatError(path, number, f"feature index {_short(key)} is not an integer")
            index = int(key)
            if index < 1:
                raise DataFormatError(
                    path, number, f"feature index {index} is out of range (libsvm indices start at 1)"
                )
            if index > _MAX_CELLS:
                raise DataFormatError(path, number, f"feature index {index} is too large for a dense matrix")
            if index == previous:
                raise DataFormatError(path, number, f"duplicate feature index {index}")
            if index < previous:
                raise DataFormatError(
                    path, number, f"feature indices must increase within a line ({index} after {previous})"
                )
            if not value.strip():
                raise DataFormatError(path, number, f"feature {index} has no value")
            try:
                number_value = _to_float(value)
            except ValueError:
                raise DataFormatError(
                    path, number, f"value {_short(value)} of feature {index} is not a number"
                ) from None
            previous = index
            rows.append(row)
            cols.append(index)
            vals.append(number_value)
        labels.append(label)
        line_numbers.append(number)
    return _Sparse(
        labels=np.asarray(labels, dtype=np.float64),
        rows=np.asarray(rows, dtype=np.intp),
        cols=np.asarray(cols, dtype=np.int64),
        vals=np.asarray(vals, dtype=np.float64),
        line_numbers=np.asarray(line_numbers, dtype=np.int64),
        max_index=max(cols) if cols else 0,
    )


def _parse_libsvm(path: str, lines: list[str]) -> _Sparse:
    parsed = _parse_libsvm_fast(lines)
    return parsed if parsed is not None else _parse_libsvm_careful(path, lines)


def _densify(path: str, sparse: _Sparse, num_features: int | None) -> tuple[np.ndarray, list[str]]:
    """Dense X from libsvm coordinates, enforcing ``num_features`` so that train and test have the same columns."""
    if num_features is None:
        width = sparse.max_index
    else:
        width = num_features
        over = np.flatnonzero(sparse.cols > num_features)
        if over.size:
            k = int(over[0])  # coordinates are in file order, so this is the first offending line
            raise DataFormatError(
                path,
                int(sparse.line_numbers[sparse.rows[k]]),
                f"feature index {int(sparse.cols[k])} exceeds num_features={num_features}",
            )
    n = sparse.labels.size
    if n * width > _MAX_CELLS:
        raise DataFormatError(path, None, f"{n} rows x {width} features is too large for a dense matrix")
    X = np.zeros((n, width), dtype=np.float64)
    X[sparse.rows, sparse.cols - 1] = sparse.vals
    return X, [f"f{j}" for j in range(1, width + 1)]


# --------------------------------------------------------------------------------------------------------------------
# CSV


def _sniff_delimiter(sample: list[str]) -> str | None:
    """',', ';' or tab when every sampled line has the same non-zero count of it; None means whitespace separated.

    A fixed preference order rather than csv.Sniffer, which guesses wrongly on purely numeric data (it happily picks
    '.' or a digit as delimiter).
    """
    for delimiter in (",", "\t", ";"):
        counts = {ln.count(delimiter) for ln in sample}
        if len(counts) == 1 and counts != {0}:
            return delimiter
    for delimiter in (",", "\t", ";"):
        # Not consistent (ragged file, quoted fields): still the delimiter if it is on every line.
        if all(delimiter in ln for ln in sample):
            return delimiter
    return None


def _split_row(line: str, delimiter: str | None) -> list[str]:
    if delimiter is None:
        return line.split()
    return next(csv.reader([line], delimiter=delimiter))


def _is_header(fields: list[str]) -> bool:
    """A first row is a header when none of its fields is a number, so a typo in data row 1 is reported, not eaten."""
    informative = False
    for value in fields:
        try:
            number = _to_float(value)
        except ValueError:
            informative = True
            continue
        if not math.isnan(number):
            return False
    return informative


def _resolve_column(path: str, spec: int | str, names: list[str] | None, ncols: int, what: str) -> int:
    if isinstance(spec, bool) or not isinstance(spec, int | str):
        raise TypeError(f"{what} must be a column index or a header name, got {spec!r}")
    if isinstance(spec, str):
        if names is None:
            raise DataFormatError(path, None, f"{what} {spec!r} given by name but the file has no header")
        matches = [j for j, name in enumerate(names) if name.strip() == spec.strip()]
        if not matches:
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise DataFormatError(path, None, f"{what} {spec!r} is not in the header ({shown})")
        if len(matches) > 1:
            raise DataFormatError(path, None, f"{what} {spec!r} appears {len(matches)} times in the header")
        return matches[0]
    if not -ncols <= spec < ncols:
        raise DataFormatError(path, None, f"{what} {spec} is out of range for {ncols} columns")
    return spec % ncols


def _parse_csv_fast(body: list[str], delimiter: str | None, ncols: int) -> np.ndarray | None:
    """Vectorised conversion of plainly numeric rows; None when anything needs the careful parser."""
    if not body:
        return np.zeros((0, ncols))
    if delimiter is None:
        if any(len(ln.split()) != ncols for ln in body):
            return None
        flat = _fromstring(" ".join(body), " ", len(body) * ncols)
    else:
        if any(ln.count(delimiter) != ncols - 1 for ln in body):
            return None
        text = delimiter.join(body)
        if '"' in text:
            return None
        if delimiter == "\t":
            # numpy treats a whitespace separator as "any run of whitespace", which would merge empty fields.
            if "," in text:
                return None
            text, delimiter = text.replace("\t", ","), ","
        flat = _fromstring(text, delimiter, len(body) * ncols)
    return None if flat is None else flat.reshape(len(body), ncols)


def _parse_csv_careful(
    path: str, text: str, delimiter: str | None, ncols: int, first_line: int, skip_first: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Field-by-field CSV parsing (quotes, missing tokens) that raises at the first bad line."""
    values: list[list[float]] = []
    numbers: list[int] = []
    records: list[tuple[int, list[str]]] = []
    if delimiter is None:
        records = [(k, ln.split()) for k, ln in enumerate(text.split("\n"), start=1)]
    else:
        reader = csv.reader(io.StringIO(text), delimiter=delimiter)
        try:
            records = [(reader.line_num, fields) for fields in reader]
        except csv.Error as exc:
            raise DataFormatError(path, reader.line_num, f"malformed CSV ({exc})") from None
    for number, fields in records:
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if number < first_line or (skip_first and number == first_line):
            continue
        if len(fields) != ncols:
            raise DataFormatError(
                path, number, f"expected {ncols} fields (as on line {first_line}), found {len(fields)}"
            )
        row: list[float] = []
        for column, value in enumerate(fields):
            try:
                row.append(_to_float(value))
            except ValueError:
                reason = f"value {_short(value)} in column {column} is not a number"
                if number == first_line:
                    reason += " (pass header=True if the first row is a header)"
                raise DataFormatError(path, number, reason) from None
        values.append(row)
        numbers.append(number)
    matrix = np.asarray(values, dtype=np.float64).reshape(len(values), ncols)
    return matrix, np.asarray(numbers, dtype=np.int64)


def _parse_csv(
    path: str,
    text: str,
    lines: list[str],
    label_column: int | str | None,
    header: bool | None,
    drop_columns: Sequence[int | str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Returns X, raw labels, the 1-based line of each row, and feature names."""
    nonblank = [k for k, ln in enumerate(lines) if ln.strip()]
    if not nonblank:
        raise DataFormatError(path, None, "empty file (no data rows)")
    sample = [lines[k] for k in nonblank[:50]]
    delimiter = _sniff_delimiter(sample if len(sample) == 1 else sample[1:])
    first = nonblank[0]
    first_fields = _split_row(lines[first], delimiter)
    has_header = _is_header(first_fields) if header is None else header
    ncols = len(first_fields)
    names = [f.strip() for f in first_fields] if has_header else None

    label_index = _resolve_column(path, 0 if label_column is None else label_column, names, ncols, "label column")
    dropped = {_resolve_column(path, c, names, ncols, "drop column") for c in drop_columns}
    if label_index in dropped:
        raise DataFormatError(path, None, f"label column {label_column!r} is also in drop_columns")

    body_idx = nonblank[1:] if has_header else nonblank
    body = [lines[k] for k in body_idx]
    matrix = _parse_csv_fast(body, delimiter, ncols)
    if matrix is not None:
        line_numbers = np.asarray(body_idx, dtype=np.int64) + 1
    else:
        matrix, line_numbers = _parse_csv_careful(path, text, delimiter, ncols, first + 1, has_header)
    if matrix.shape[0] == 0:
        raise DataFormatError(path, None, "no data rows" + (" after the header" if has_header else ""))
    keep = [j for j in range(ncols) if j != label_index and j not in dropped]
    feature_names = [names[j] for j in keep] if names is not None else [f"c{j}" for j in keep]
    return matrix[:, keep], matrix[:, label_index], line_numbers, feature_names


# --------------------------------------------------------------------------------------------------------------------
# Labels


@dataclass(frozen=True)
class _LabelRule:
    """How raw labels become targets; decided on the training file and reused verbatim for its test file."""

    binary: bool
    threshold: float = 0.0


def _decide_labels(path: str, y: np.ndarray, task: str) -> _LabelRule:
    distinct = np.unique(y)
    if task == "regression" or (task == "auto" and distinct.size != 2):
        return _LabelRule(binary=False)
    if distinct.size > 2:
        shown = ", ".join(f"{v:g}" for v in distinct[:5])
        raise DataFormatError(
            path, None, f"task='binary' but the labels take {distinct.size} distinct values ({shown}, ...)"
        )
    if distinct.size == 2 and not distinct[0] <= 0.0 < distinct[1]:
        # e.g. {1, 2}: 'label > 0' would merge the two classes, so the larger value is the positive class.
        return _LabelRule(binary=True, threshold=float(distinct[0]))
    return _LabelRule(binary=True, threshold=0.0)


def _apply_labels(path: str, y: np.ndarray, rule: _LabelRule) -> np.ndarray:
    if not rule.binary:
        return y.astype(np.float64, copy=True)
    distinct = np.unique(y)
    if distinct.size > 2:
        shown = ", ".join(f"{v:g}" for v in distinct[:5])
        raise DataFormatError(path, None, f"binary labels expected but found {distinct.size} distinct values ({shown})")
    return (y > rule.threshold).astype(np.float64)


# --------------------------------------------------------------------------------------------------------------------
# Public API


@dataclass
class _Raw:
    X: np.ndarray
    y: np.ndarray
    feature_names: list[str]
    fmt: str


def _load_raw(
    path: str | os.PathLike[str],
    *,
    fmt: str | None,
    label_column: int | str | None,
    header: bool | None,
    num_features: int | None,
    drop_columns: Sequence[int | str],
) -> _Raw:
    path = os.fspath(path)
    if num_features is not None and (isinstance(num_features, bool) or num_features < 0):
        raise ValueError(f"num_features must be a non-negative integer, got {num_features!r}")
    if isinstance(drop_columns, str | int):
        drop_columns = (drop_columns,)
    if fmt is not None:
        key = fmt.lower().lstrip(".")
        if key not in _FORMAT_ALIASES:
            raise DataFormatError(path, None, f"unknown format {fmt!r} (expected 'libsvm' or 'csv')")
        fmt = _FORMAT_ALIASES[key]
    text = _read_text(path)
    lines = text.split("\n")
    kind = fmt or _format_from_name(path) or _sniff_format(path, lines)

    if kind == "libsvm":
        if label_column not in (None, 0):
            raise DataFormatError(path, None, "label_column applies to CSV files; a libsvm label is the first token")
        if header:
            raise DataFormatError(path, None, "header=True applies to CSV files; libsvm files have no header")
        if drop_columns:
            raise DataFormatError(path, None, "drop_columns applies to CSV files, this one is libsvm")
        sparse = _parse_libsvm(path, lines)
        if sparse.labels.size == 0:
            raise DataFormatError(path, None, "empty file (no data rows)")
        X, names = _densify(path, sparse, num_features)
        y = sparse.labels
    else:
        X, y, line_numbers, names = _parse_csv(path, text, lines, label_column, header, drop_columns)
        missing = np.flatnonzero(np.isnan(y))
        if missing.size:
            raise DataFormatError(path, int(line_numbers[missing[0]]), "label is missing")
        if num_features is not None and X.shape[1] != num_features:
            raise DataFormatError(path, None, f"{X.shape[1]} features but num_features={num_features}")
    return _Raw(X=X, y=y, feature_names=names, fmt=kind)


def load_dataset(
    path: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    label_column: int | str | None = None,
    header: bool | None = None,
    task: str = "auto",
    num_features: int | None = None,
    drop_columns: Sequence[int | str] = (),
) -> Dataset:
    """Load a libsvm or CSV file (plain or gzip) into a :class:`Dataset`.

    ``fmt`` is "libsvm" or "csv"; by default it comes from the extension (``.csv``, ``.tsv``, ``.libsvm``, ``.svm``,
    ignoring ``.gz``) or else from the content. CSV only: ``header`` (None = detect: a first row without any number),
    ``label_column`` (index, negative counts from the end, or header name; default the first column) and
    ``drop_columns`` (indices or names of the full row, e.g. an ID column). ``num_features`` fixes the libsvm width
    (an index above it is an error) and must equal the CSV feature count. Labels follow ``task`` (module docstring);
    binary labels become 0.0 / 1.0.

    Feature names: the CSV header, else ``c{j}`` with ``j`` the file's 0-based column; libsvm ``f{j}`` with ``j`` the
    file's 1-based index.
    """
    if task not in _TASKS:
        raise ValueError(f"task must be one of {_TASKS}, got {task!r}")
    raw = _load_raw(
        path, fmt=fmt, label_column=label_column, header=header, num_features=num_features, drop_columns=drop_columns
    )
    path_s = os.fspath(path)
    rule = _decide_labels(path_s, raw.y, task)
    y = _apply_labels(path_s, raw.y, rule)
    return Dataset(X=raw.X, y=y, feature_names=raw.feature_names, name=_dataset_name(path_s))


def _widen(raw: _Raw, width: int) -> _Raw:
    """Pad a libsvm matrix with zero columns: an index the file never uses is, by the format, zero on every row."""
    extra = width - raw.X.shape[1]
    if extra <= 0:
        return raw
    X = np.hstack([raw.X, np.zeros((raw.X.shape[0], extra))])
    names = raw.feature_names + [f"f{j}" for j in range(raw.X.shape[1] + 1, width + 1)]
    return _Raw(X=X, y=raw.y, feature_names=names, fmt=raw.fmt)


def load_train_test(
    train_path: str | os.PathLike[str],
    test_path: str | os.PathLike[str] | None = None,
    *,
    seed: int,
    test_fraction: float = 0.25,
    task: str = "auto",
    **load_kwargs: object,
) -> tuple[Dataset, Dataset]:
    """Train and test sets the way the paper's protocol takes them.

    With ``test_path`` both files are loaded with the same width (libsvm: the larger max index, or ``num_features``)
    and the test labels are mapped by the rule decided on the training labels, so "auto" cannot pick binary for one
    file and regression for the other. Without it, a seeded random ``test_fraction`` of the rows (rounded, and at
    least one row of each side when there are two rows or more) is the test set; rows keep file order on both sides.
    """
    if task not in _TASKS:
        raise ValueError(f"task must be one of {_TASKS}, got {task!r}")
    kwargs: dict = dict(load_kwargs)
    allowed = {"fmt", "label_column", "header", "num_features", "drop_columns"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise TypeError(f"unexpected keyword arguments: {sorted(unknown)}")
    kwargs.setdefault("fmt", None)
    kwargs.setdefault("label_column", None)
    kwargs.setdefault("header", None)
    kwargs.setdefault("num_features", None)
    kwargs.setdefault("drop_columns", ())
    train_s = os.fspath(train_path)
    train = _load_raw(train_s, **kwargs)
    rule = _decide_labels(train_s, train.y, task)
    name = _dataset_name(train_s)

    if test_path is not None:
        test_s = os.fspath(test_path)
        test = _load_raw(test_s, **kwargs)
        if train.fmt == "libsvm" and test.fmt == "libsvm":
            width = max(train.X.shape[1], test.X.shape[1])
            train, test = _widen(train, width), _widen(test, width)
        if train.X.shape[1] != test.X.shape[1]:
            raise DataFormatError(
                test_s, None, f"{test.X.shape[1]} features but the training file has {train.X.shape[1]}"
            )
        y_train = _apply_labels(train_s, train.y, rule)
        y_test = _apply_labels(test_s, test.y, rule)
        return (
            Dataset(train.X, y_train, train.feature_names, name),
            Dataset(test.X, y_test, test.feature_names, _dataset_name(test_s)),
        )

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    full = Dataset(train.X, _apply_labels(train_s, train.y, rule), train.feature_names, name)
    n = full.n_rows
    n_test = math.floor(n * test_fraction + 0.5)
    if n >= 2:
        n_test = min(max(n_test, 1), n - 1)
    order = np.random.default_rng(seed).permutation(n)
    test_idx = np.sort(order[:n_test])
    train_idx = np.sort(order[n_test:])
    return full.subset(train_idx), full.subset(test_idx)
