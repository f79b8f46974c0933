"""Loading of the benchmark data sets (libsvm and CSV, plain or gzip, and NumPy ``.npz``) into dense float matrices.

Every party of a federated run must read its file exactly the way the others read theirs (same feature count, same
label mapping, same treatment of missing values), otherwise the shared bin edges and the histograms would not line up.
So the rules are fixed here, in one place:

* Missing values are ``NaN`` in ``X``. In CSV an empty field or one of ``NA``, ``NaN``, ``N/A``, ``?``, ``null``
  (any case) is missing. In libsvm an absent index is a *zero* (that is what the format means), and only an explicit
  missing token such as ``3:nan`` is missing.
* libsvm indices are 1-based and feature ``j`` of the file is column ``j - 1`` of ``X``. The feature count is the
  largest index seen, or ``num_features`` when given, so that a train and a test file agree (a9a.t never uses 123).
* Labels: ``task="binary"`` maps labels to {0, 1} by ``label > 0`` (so -1/+1 and 0/1 both work); ``"regression"``
  keeps them; ``"auto"`` picks binary when there are exactly two distinct labels. A task's training labels that hold
  a single class are refused (binary and "auto"), as are more than two values when binary was asked; the error says
  what was found. ``check_labels`` applies the same rules to labels that come as arrays.
* An unnamed first CSV column of row numbers (pandas' ``to_csv`` index) is dropped with a :class:`DataWarning`, and a
  column without a name is never a feature named '' (``_parse_csv`` says why).
* Scoring: ``load_features`` reads a file for a model by the model's feature names (``node.data.columns``), so that
  columns in another order, a missing label or an extra ID column cannot shift features silently.
* NumPy ``.npz`` (``np.savez``): arrays ``X`` (rows by features, numbers, ``NaN`` missing), ``y`` (one number per
  row; not read in a file to score) and optionally ``feature_names`` (strings, one per column, stripped, which then
  match columns by name as a CSV header does; an empty one is refused, where a CSV's becomes ``c{j}``). Nothing is
  unpickled: an archive holding Python objects is refused, as is any other array, a ``.npy`` file or a gzipped
  archive. The labels follow the same rules as the text formats'. Why: the values are the exact doubles,
  and a requester handing a party its shard skips writing and parsing text (0.12 s for 10,000 rows of a9a).
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
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fgbdt_chain.node.data.columns import ColumnMismatch, align_columns, column_label

__all__ = [
    "MISSING_TOKENS",
    "DataFormatError",
    "DataWarning",
    "Dataset",
    "Features",
    "check_labels",
    "load_dataset",
    "load_features",
    "load_train_test",
]

#: Field values (compared after stripping and lower-casing) that mean "missing" and load as NaN.
MISSING_TOKENS: frozenset[str] = frozenset({"", "na", "nan", "n/a", "?", "null"})

_FORMAT_ALIASES = {
    "libsvm": "libsvm",
    "svmlight": "libsvm",
    "svm": "libsvm",
    "csv": "csv",
    "tsv": "csv",
    "npz": "npz",
}
_EXT_FORMATS = {
    ".libsvm": "libsvm",
    ".svm": "libsvm",
    ".svmlight": "libsvm",
    ".csv": "csv",
    ".tsv": "csv",
    ".npz": "npz",
}
_TASKS = ("auto", "binary", "regression")
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip archive's first entry, or an empty archive's end record
_NPZ_ARRAYS = ("X", "y", "feature_names")
# A dense float64 matrix above this many cells (1.6 GB) is certainly a mistake (wrong format or wrong file).
_MAX_CELLS = 200_000_000

# The shape of a libsvm line ("label index:value ..."), with ASCII number characters only; np.fromstring then checks
# the numbers themselves strictly. Possessive quantifiers keep the match linear (no backtracking), which makes this
# check about six times faster than a regex that spells out the number grammar.
_LIBSVM_LINE = re.compile(r"[ \t]*+[0-9A-Za-z.+-]++(?:[ \t]++[0-9]++:[0-9A-Za-z.+-]++)*+[ \t]*+")
_LIBSVM_PAIR = re.compile(r"[^\s:,;]*:[^\s:,;]*")
_INT = re.compile(r"[+-]?\d+")


class DataWarning(UserWarning):
    """Something in a data file that the loader fixed or guessed (a dropped index column, an unnamed column, a
    constant label): worth a line on stderr, not worth refusing the file. The command line prints these as one
    line each."""


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
        raise DataFormatError(path, None, "unknown format: binary content (not a libsvm or CSV text file, nor .npz)")
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
# NumPy archives


def _is_npz(path: str, fmt: str | None) -> bool:
    """Whether ``path`` is read as an ``.npz`` archive: ``fmt`` (already checked) says so, or without one its name,
    or, where the name says no format, its first bytes (a zip archive's)."""
    if fmt is not None:
        return _FORMAT_ALIASES[fmt.lower().lstrip(".")] == "npz"
    named = _format_from_name(path)
    if named is not None:
        return named == "npz"
    with open(path, "rb") as fh:
        return fh.read(4) in _ZIP_MAGICS


def _read_npz(path: str, *, labels: bool) -> tuple[np.ndarray, np.ndarray | None, list[str] | None]:
    """An ``.npz`` archive's ``X``, ``y`` (required and checked with ``labels``, else None: not read) and
    ``feature_names`` (None where absent), checked as the module docstring says. Nothing is unpickled
    (``allow_pickle=False``)."""
    with open(path, "rb") as fh:  # a missing or unreadable file is an OSError, as for the text formats
        magic = fh.read(6)
    if magic.startswith(_GZIP_MAGIC):
        raise DataFormatError(path, None, "a gzip file, not an .npz archive (np.savez_compressed compresses inside)")
    if magic == b"\x93NUMPY":
        raise DataFormatError(path, None, "a single NumPy array (.npy), not an .npz archive of the arrays X and y")
    if magic[:4] not in _ZIP_MAGICS:
        raise DataFormatError(path, None, "not an .npz (zip) archive of the arrays X and y")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise DataFormatError(path, None, f"not a readable .npz archive ({exc})") from None
    assert isinstance(loaded, np.lib.npyio.NpzFile)  # a zip archive is always loaded as one
    with loaded as archive:
        files = set(archive.files)
        missing = [a for a in (("X", "y") if labels else ("X",)) if a not in files]
        if missing:
            held = ", ".join(sorted(files)) or "no array"
            raise DataFormatError(
                path,
                None,
                f"{' and '.join(missing)} missing: an .npz data file holds the arrays X and y, and optionally "
                f"feature_names (this one holds {held})",
            )
        extra = sorted(files - set(_NPZ_ARRAYS))
        if extra:
            raise DataFormatError(
                path,
                None,
                f"unexpected arrays {', '.join(extra)}: an .npz data file holds X and y, and optionally feature_names",
            )
        try:  # a file to score: its labels are not read, as a CSV's label column is not parsed
            arrays = {name: archive[name] for name in sorted(files) if labels or name != "y"}
        except (ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            raise DataFormatError(path, None, f"an array cannot be read ({exc})") from None
    X = arrays["X"]
    if X.ndim != 2:
        raise DataFormatError(path, None, f"X must be 2-D (rows by features), got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise DataFormatError(path, None, f"X must hold numbers, got dtype {X.dtype}")
    if X.shape[0] == 0:
        raise DataFormatError(path, None, "empty file (no data rows)")
    if X.size > _MAX_CELLS:
        raise DataFormatError(path, None, f"{X.shape[0]} rows x {X.shape[1]} features is too large for a dense matrix")
    y = arrays.get("y")
    if y is not None:
        if y.ndim != 1 or y.shape[0] != X.shape[0] or y.dtype.kind not in "biuf":
            raise DataFormatError(
                path, None, f"y must hold one number per row of X ({X.shape[0]}), got {y.dtype} of shape {y.shape}"
            )
        y = y.astype(np.float64)
        missing_labels = np.flatnonzero(np.isnan(y))
        if missing_labels.size:
            raise DataFormatError(path, None, f"the label of row {int(missing_labels[0])} is missing (NaN)")
    names = arrays.get("feature_names")
    if names is not None:
        if names.ndim != 1 or names.dtype.kind != "U" or names.shape[0] != X.shape[1]:
            raise DataFormatError(
                path,
                None,
                f"feature_names must be {X.shape[1]} strings, one per column of X, got {names.dtype} of shape "
                f"{names.shape}",
            )
        stripped = [str(n).strip() for n in names.tolist()]  # as a CSV header's names are
        if not all(stripped):
            raise DataFormatError(path, None, "a feature name in feature_names is empty")
        return X.astype(np.float64), y, stripped
    return X.astype(np.float64), y, None


def _not_for_npz(path: str, **given: bool) -> None:
    """Refuses the CSV options (name: whether given) for an ``.npz`` file, whose arrays say where everything is."""
    for option, on in given.items():
        if on:
            raise DataFormatError(
                path, None, f"{option} applies to CSV files; an .npz file's arrays are named (X, y, feature_names)"
            )


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


def _csv_records(
    path: str, text: str, delimiter: str | None, ncols: int, first_line: int, skip_first: bool
) -> list[tuple[int, list[str]]]:
    """The data records as (1-based line, fields), each checked to have ``ncols`` fields; blank lines skipped."""
    records: list[tuple[int, list[str]]] = []
    if delimiter is None:
        records = [(k, ln.split()) for k, ln in enumerate(text.split("\n"), start=1)]
    else:
        reader = csv.reader(io.StringIO(text), delimiter=delimiter)
        try:
            records = [(reader.line_num, fields) for fields in reader]
        except csv.Error as exc:
            raise DataFormatError(path, reader.line_num, f"malformed CSV ({exc})") from None
    kept: list[tuple[int, list[str]]] = []
    for number, fields in records:
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if number < first_line or (skip_first and number == first_line):
            continue
        if len(fields) != ncols:
            raise DataFormatError(
                path, number, f"expected {ncols} fields (as on line {first_line}), found {len(fields)}"
            )
        kept.append((number, fields))
    return kept


def _parse_csv_careful(
    path: str,
    text: str,
    delimiter: str | None,
    ncols: int,
    first_line: int,
    skip_first: bool,
    columns: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Field-by-field CSV parsing (quotes, missing tokens) that raises at the first bad line.

    ``columns``: convert only these (in this order), so that text in columns nobody reads (an ID, a name) is no
    error; ``names`` (the header) names a bad column in the message."""
    values: list[list[float]] = []
    numbers: list[int] = []
    wanted = range(ncols) if columns is None else columns
    for number, fields in _csv_records(path, text, delimiter, ncols, first_line, skip_first):
        row: list[float] = []
        for column in wanted:
            value = fields[column]
            try:
                row.append(_to_float(value))
            except ValueError:
                where = f"column {column}" + (
                    f" ({names[column].strip()!r})" if names and names[column].strip() else ""
                )
                reason = f"value {_short(value)} in {where} is not a number"
                if number == first_line:
                    reason += " (pass header=True if the first row is a header)"
                raise DataFormatError(path, number, reason) from None
        values.append(row)
        numbers.append(number)
    matrix = np.asarray(values, dtype=np.float64).reshape(len(values), len(wanted))
    return matrix, np.asarray(numbers, dtype=np.int64)


@dataclass
class _CsvLayout:
    """Where a CSV file's data is: its delimiter, column count, header names and data lines (0-based indices)."""

    delimiter: str | None
    first: int
    ncols: int
    names: list[str] | None
    body_idx: list[int]


def _csv_layout(path: str, lines: list[str], header: bool | None) -> _CsvLayout:
    nonblank = [k for k, ln in enumerate(lines) if ln.strip()]
    if not nonblank:
        raise DataFormatError(path, None, "empty file (no data rows)")
    sample = [lines[k] for k in nonblank[:50]]
    delimiter = _sniff_delimiter(sample if len(sample) == 1 else sample[1:])
    first = nonblank[0]
    first_fields = _split_row(lines[first], delimiter)
    has_header = _is_header(first_fields) if header is None else header
    names = [f.strip() for f in first_fields] if has_header else None
    return _CsvLayout(delimiter, first, len(first_fields), names, nonblank[1:] if has_header else nonblank)


_INDEX_NAMES = frozenset({"", "unnamed: 0"})


def _is_row_index(column: np.ndarray) -> bool:
    """Integers that number rows: strictly increasing (0..n-1, 1..n, or what is left of them after rows were
    filtered out) or a permutation of 0..n-1 (a shuffled data frame)."""
    if column.size == 0 or not np.isfinite(column).all() or (column != np.round(column)).any():
        return False
    if (np.diff(column) > 0).all():
        return True
    return bool(np.array_equal(np.sort(column), np.arange(column.size)))


def _parse_csv(
    path: str,
    text: str,
    lines: list[str],
    label_column: int | str | None,
    header: bool | None,
    drop_columns: Sequence[int | str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], bool]:
    """Returns X, raw labels, the 1-based line of each row, feature names, and whether the file has a header.

    An unnamed leading index column is dropped with a :class:`DataWarning`: a first header field that is empty or
    ``Unnamed: 0`` over row numbers (:func:`_is_row_index`) is what pandas' ``to_csv`` writes by default, not a
    measurement. Dropping (rather than refusing) because the intent is certain from the file alone and every pandas
    user would otherwise have to re-save or pass ``drop_columns``; warning because it is still a decision the user
    should see. The default label column then is the next one, the file's first real column. A user who wants such a
    column as a feature names it in the header; a named column is never taken for an index. Any other column with an
    empty name is kept as ``c{j}`` (its position), also with a warning, so that no feature is ever named ''.
    """
    layout = _csv_layout(path, lines, header)
    names, ncols, has_header = layout.names, layout.ncols, layout.names is not None
    explicit_label = None if label_column is None else _resolve_column(path, label_column, names, ncols, "label column")
    dropped = {_resolve_column(path, c, names, ncols, "drop column") for c in drop_columns}
    if explicit_label is not None and explicit_label in dropped:
        raise DataFormatError(path, None, f"label column {label_column!r} is also in drop_columns")

    body = [lines[k] for k in layout.body_idx]
    matrix = _parse_csv_fast(body, layout.delimiter, ncols)
    if matrix is not None:
        line_numbers = np.asarray(layout.body_idx, dtype=np.int64) + 1
    else:
        matrix, line_numbers = _parse_csv_careful(
            path, text, layout.delimiter, ncols, layout.first + 1, has_header, names=names
        )
    if matrix.shape[0] == 0:
        raise DataFormatError(path, None, "no data rows" + (" after the header" if has_header else ""))

    base = os.path.basename(path)
    label_index = 0 if explicit_label is None else explicit_label
    if names is not None and ncols > 1 and names[0].lower() in _INDEX_NAMES and 0 not in dropped:
        if _is_row_index(matrix[:, 0]):
            if explicit_label == 0:
                raise DataFormatError(
                    path, None, f"label column {label_column!r} is an unnamed row index (integers counting the rows)"
                )
            dropped.add(0)
            label_index = 1 if explicit_label is None else explicit_label
            warnings.warn(
                DataWarning(
                    f"{base}: dropped column 0 ({names[0]!r} in the header, values {matrix[0, 0]:g}, "
                    f"{matrix[1, 0] if matrix.shape[0] > 1 else matrix[0, 0]:g}, ...): an unnamed row index, as "
                    "pandas' to_csv writes by default (name it in the header to use it as a feature)"
                ),
                stacklevel=4,
            )
        elif names[0].lower() == "unnamed: 0":
            warnings.warn(
                DataWarning(
                    f"{base}: column 0 is named 'Unnamed: 0' (a pandas index?) but does not number the rows: kept "
                    "as a feature; drop it (drop_columns, --drop-columns 0) if it is an index"
                ),
                stacklevel=4,
            )
    if label_index in dropped:
        raise DataFormatError(path, None, f"label column {label_index} is also in drop_columns")
    keep = [j for j in range(ncols) if j != label_index and j not in dropped]
    if names is None:
        feature_names = [f"c{j}" for j in keep]
    else:
        unnamed = [j for j in keep if not names[j]]
        if unnamed:
            warnings.warn(
                DataWarning(
                    f"{base}: {len(unnamed)} column(s) have no name in the header; named by position: "
                    + ", ".join(f"c{j}" for j in unnamed[:8])
                    + (", ..." if len(unnamed) > 8 else "")
                ),
                stacklevel=4,
            )
        feature_names = [names[j] or f"c{j}" for j in keep]
    return matrix[:, keep], matrix[:, label_index], line_numbers, feature_names, has_header


# --------------------------------------------------------------------------------------------------------------------
# Labels


@dataclass(frozen=True)
class _LabelRule:
    """How raw labels become targets; decided on the training file and reused verbatim for its test file."""

    binary: bool
    threshold: float = 0.0


def _shown_values(distinct: np.ndarray, limit: int = 6) -> str:
    shown = ", ".join(f"{v:g}" for v in distinct[:limit])
    return shown + (", ..." if distinct.size > limit else "")


def _decide_labels(path: str, y: np.ndarray, task: str, *, whole_task: bool = True) -> _LabelRule:
    """The label rule for ``task``, refusing labels that cannot be what was asked.

    ``whole_task``: the labels are a whole task's training data (``load_train_test``, :func:`check_labels`), where a
    single class is refused: binary classification needs both classes (a one-class fit predicts a constant and its
    AUC is undefined), and under "auto" it would otherwise become a silent regression on a constant. When False (one
    file on its own, ``load_dataset``) ``task="binary"`` accepts one class, because a party's shard under a skewed
    partition (``node.data.partition``) legitimately holds one class; "auto" then keeps the value as a number and warns.
    """
    distinct = np.unique(y)
    if distinct.size == 1:
        only = f"every label is {distinct[0]:g}"
        base = os.path.basename(path)
        if task == "regression":
            if whole_task:
                warnings.warn(DataWarning(f"{base}: {only}: the regression target is a constant"), stacklevel=3)
            return _LabelRule(binary=False)
        if not whole_task:
            if task == "auto":
                warnings.warn(
                    DataWarning(f"{base}: {only}: one value, so task='auto' keeps it as a number"), stacklevel=3
                )
            return _LabelRule(binary=task == "binary")
        if task == "binary":
            raise DataFormatError(
                path, None, f"{only}: task='binary' needs both classes (check the label column, e.g. --label-column)"
            )
        raise DataFormatError(
            path,
            None,
            f"{only}: binary classification needs both classes and a constant is no regression target (check "
            "the label column, e.g. --label-column; task='regression' fits the constant anyway)",
        )
    if task == "regression" or (task == "auto" and distinct.size != 2):
        return _LabelRule(binary=False)
    if distinct.size > 2:
        raise DataFormatError(
            path,
            None,
            f"task='binary' needs two label values but found {distinct.size} distinct values: "
            f"{_shown_values(distinct)} (check the label column, e.g. --label-column, or use task='regression')",
        )
    if distinct.size == 2 and not distinct[0] <= 0.0 < distinct[1]:
        # e.g. {1, 2}: 'label > 0' would merge the two classes, so the larger value is the positive class.
        return _LabelRule(binary=True, threshold=float(distinct[0]))
    return _LabelRule(binary=True, threshold=0.0)


def check_labels(y: np.ndarray | Sequence[float], task: str = "auto", *, source: str = "labels") -> str:
    """Validate a whole task's training labels and say what they train: "binary" or "regression".

    The loaders' rules (module docstring) for labels that did not come from a file (arrays given to the Python API,
    say), so that every entry point refuses the same things with the same words: a single class (for binary and
    "auto"), more than two values when binary was asked, NaN. ``source`` names the labels in the error. Raises
    :class:`DataFormatError` (a ``ValueError``).
    """
    if task not in _TASKS:
        raise ValueError(f"task must be one of {_TASKS}, got {task!r}")
    labels = np.asarray(y, dtype=np.float64).ravel()
    if labels.size == 0:
        raise DataFormatError(source, None, "no labels")
    if np.isnan(labels).any():
        raise DataFormatError(source, None, f"label {int(np.flatnonzero(np.isnan(labels))[0])} is missing (NaN)")
    return "binary" if _decide_labels(source, labels, task).binary else "regression"


def _apply_labels(path: str, y: np.ndarray, rule: _LabelRule) -> np.ndarray:
    if not rule.binary:
        return y.astype(np.float64, copy=True)
    distinct = np.unique(y)
    if distinct.size > 2:
        raise DataFormatError(
            path, None, f"binary labels expected but found {distinct.size} values: {_shown_values(distinct)}"
        )
    return (y > rule.threshold).astype(np.float64)


# --------------------------------------------------------------------------------------------------------------------
# Public API


@dataclass
class _Raw:
    X: np.ndarray
    y: np.ndarray
    feature_names: list[str]
    fmt: str
    has_header: bool = False


def _check_format(path: str, fmt: str | None) -> None:
    """Refuses a ``fmt`` that names no format this module reads."""
    if fmt is not None and fmt.lower().lstrip(".") not in _FORMAT_ALIASES:
        raise DataFormatError(path, None, f"unknown format {fmt!r} (expected 'libsvm', 'csv' or 'npz')")


def _file_kind(path: str, fmt: str | None, lines: list[str]) -> str:
    """'libsvm' or 'csv': ``fmt`` when given, else from the name, else from the content."""
    if fmt is not None:
        _check_format(path, fmt)
        return _FORMAT_ALIASES[fmt.lower().lstrip(".")]
    return _format_from_name(path) or _sniff_format(path, lines)


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
    _check_format(path, fmt)
    if _is_npz(path, fmt):
        _not_for_npz(
            path, label_column=label_column not in (None, 0), header=bool(header), drop_columns=bool(drop_columns)
        )
        X, y, names = _read_npz(path, labels=True)
        assert y is not None
        if num_features is not None and X.shape[1] != num_features:
            raise DataFormatError(path, None, f"{X.shape[1]} features but num_features={num_features}")
        positional = [f"c{j}" for j in range(X.shape[1])]
        return _Raw(X=X, y=y, feature_names=names or positional, fmt="npz", has_header=names is not None)
    text = _read_text(path)
    lines = text.split("\n")
    kind = _file_kind(path, fmt, lines)
    has_header = False

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
        X, y, line_numbers, names, has_header = _parse_csv(path, text, lines, label_column, header, drop_columns)
        missing = np.flatnonzero(np.isnan(y))
        if missing.size:
            raise DataFormatError(path, int(line_numbers[missing[0]]), "label is missing")
        if num_features is not None and X.shape[1] != num_features:
            raise DataFormatError(path, None, f"{X.shape[1]} features but num_features={num_features}")
    return _Raw(X=X, y=y, feature_names=names, fmt=kind, has_header=has_header)


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
    """Load a libsvm or CSV file (plain or gzip), or an ``.npz`` archive, into a :class:`Dataset`.

    ``fmt`` is "libsvm", "csv" or "npz"; by default it comes from the extension (``.csv``, ``.tsv``, ``.libsvm``,
    ``.svm``, ``.npz``, ignoring ``.gz``) or else from the content. CSV only: ``header`` (None = detect: a first
    row without any number), ``label_column`` (index, negative counts from the end, or header name; default the
    first column) and ``drop_columns`` (indices or names of the full row, e.g. an ID column). ``num_features`` fixes
    the libsvm width (an index above it is an error) and must equal the CSV or ``.npz`` feature count. Labels follow
    ``task`` (module docstring); binary labels become 0.0 / 1.0.

    Feature names: the CSV header, else ``c{j}`` with ``j`` the file's 0-based column; libsvm ``f{j}`` with ``j`` the
    file's 1-based index; ``.npz`` its ``feature_names``, else ``c{j}`` with ``j`` the column of ``X``.
    """
    if task not in _TASKS:
        raise ValueError(f"task must be one of {_TASKS}, got {task!r}")
    raw = _load_raw(
        path, fmt=fmt, label_column=label_column, header=header, num_features=num_features, drop_columns=drop_columns
    )
    path_s = os.fspath(path)
    rule = _decide_labels(path_s, raw.y, task, whole_task=False)
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
        test = _align_test(test_s, test, train)
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
    if rule.binary and np.unique(full.y[train_idx]).size < 2:
        raise DataFormatError(
            train_s,
            None,
            f"the {train_idx.size} training rows left after holding out {n_test} test rows all have label "
            f"{int(full.y[train_idx][0]) if train_idx.size else '-'}: too few rows of one class for a random split "
            "(give a --test file or more rows)",
        )
    return full.subset(train_idx), full.subset(test_idx)


def _align_test(test_path: str, test: _Raw, train: _Raw) -> _Raw:
    """The test file's columns in the training file's order, when both have a header (matched by name).

    Positional matching would silently score the wrong columns of a test file whose columns come in another order.
    A test file that lacks a training feature, or has features the training file has not, is refused."""
    if not (train.has_header and test.has_header) or test.feature_names == train.feature_names:
        return test
    if len(set(train.feature_names)) != len(train.feature_names):
        return test  # names cannot identify columns; position it is, as for files without header
    missing = [n for n in train.feature_names if n not in test.feature_names]
    extra = [n for n in test.feature_names if n not in train.feature_names]
    if missing or extra:
        parts = [f"lacks {', '.join(map(repr, missing[:8]))}" if missing else ""]
        parts.append(f"has {', '.join(map(repr, extra[:8]))} that the training file has not" if extra else "")
        raise DataFormatError(
            test_path,
            None,
            "its header does not match the training file's: it "
            + " and ".join(p for p in parts if p)
            + " (drop extra columns with drop_columns / --drop-columns)",
        )
    order = [test.feature_names.index(n) for n in train.feature_names]
    return _Raw(test.X[:, order], test.y, list(train.feature_names), test.fmt, test.has_header)


# --------------------------------------------------------------------------------------------------------------------
# Scoring


@dataclass
class Features:
    """A data file's rows as a model's feature matrix, for scoring (:func:`load_features`)."""

    X: np.ndarray
    """(rows, model features), in the model's feature order."""
    ids: list[str] | None
    """The ID column's fields, verbatim (stripped), when an ID column was asked for."""
    id_name: str | None
    """The ID column's header name (``id`` for a file without header)."""
    ignored: list[str]
    """The file's columns used for nothing, as a user reads them (quoted names, or positions)."""
    by_name: bool
    """Whether the columns were matched by header name (else by position)."""
    note: str | None = None
    """Why a file with a header was matched by position, when it was."""


def load_features(
    path: str | os.PathLike[str],
    feature_names: Sequence[str],
    *,
    id_column: int | str | None = None,
    label_column: int | str | None = None,
    fmt: str | None = None,
    header: bool | None = None,
) -> Features:
    """Read a file to score with a model whose features are ``feature_names`` (``Model.feature_names``).

    CSV with a header: columns are matched by name in any order; the label and an ID column may be present or
    not, other columns are ignored (listed in :attr:`Features.ignored`), a missing feature is an error naming it.
    CSV without a header and libsvm: by position, checked against the feature count (``node.data.columns``). An ``.npz``
    archive: by its ``feature_names`` as by a header, else by position; ``y`` may be absent. Only the
    model's columns are parsed as numbers, so the label may be missing or text, and an ID column (``id_column``: a
    header name or 0-based index, CSV only) is copied as text. Raises :class:`DataFormatError` (file, reason).
    """
    path = os.fspath(path)
    names = [str(n) for n in feature_names]
    _check_format(path, fmt)
    if _is_npz(path, fmt):
        _not_for_npz(
            path, id_column=id_column is not None, label_column=label_column not in (None, 0), header=bool(header)
        )
        X, _, file_names = _read_npz(path, labels=False)
        try:
            plan = align_columns(names, file_names, X.shape[1])
        except ColumnMismatch as exc:
            raise DataFormatError(path, None, str(exc)) from None
        return Features(
            X=X[:, list(plan.features)],
            ids=None,
            id_name=None,
            ignored=[column_label(j, file_names) for j in plan.ignored],
            by_name=plan.by_name,
            note=plan.note,
        )
    text = _read_text(path)
    lines = text.split("\n")
    kind = _file_kind(path, fmt, lines)
    if kind == "libsvm":
        if id_column is not None:
            raise DataFormatError(path, None, "an ID column applies to CSV files; libsvm rows have none")
        if label_column not in (None, 0):
            raise DataFormatError(path, None, "label_column applies to CSV files; a libsvm label is the first token")
        sparse = _parse_libsvm(path, lines)
        if sparse.labels.size == 0:
            raise DataFormatError(path, None, "empty file (no data rows)")
        X, _ = _densify(path, sparse, len(names))
        return Features(X=X, ids=None, id_name=None, ignored=[], by_name=False)

    layout = _csv_layout(path, lines, header)
    try:
        plan = align_columns(names, layout.names, layout.ncols, id_column=id_column, label_column=label_column)
    except ColumnMismatch as exc:
        raise DataFormatError(path, None, str(exc)) from None
    has_header = layout.names is not None
    ids: list[str] | None = None
    matrix = None
    if plan.id_column is None:
        body = [lines[k] for k in layout.body_idx]
        full = _parse_csv_fast(body, layout.delimiter, layout.ncols)
        matrix = None if full is None else full[:, list(plan.features)]
    if matrix is None:
        first_line = layout.first + 1
        if plan.id_column is not None:
            records = _csv_records(path, text, layout.delimiter, layout.ncols, first_line, has_header)
            ids = [fields[plan.id_column].strip() for _, fields in records]
        matrix, _ = _parse_csv_careful(
            path, text, layout.delimiter, layout.ncols, first_line, has_header, plan.features, layout.names
        )
    if matrix.shape[0] == 0:
        raise DataFormatError(path, None, "no data rows" + (" after the header" if has_header else ""))
    id_name = None
    if plan.id_column is not None:
        id_name = (layout.names[plan.id_column] if layout.names else "") or "id"
    return Features(
        X=matrix,
        ids=ids,
        id_name=id_name,
        ignored=[column_label(j, layout.names) for j in plan.ignored],
        by_name=plan.by_name,
        note=plan.note,
    )
