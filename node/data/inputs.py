"""Feature matrices and labels as Python callers hand them over (numpy, scipy sparse, pandas), made dense float64.

The engine, the PSDs and binning all work on dense float64 rows with NaN for a missing value (``node.data.loaders``'s
rules). Callers of the Python API bring other shapes: a scipy sparse matrix (libsvm's shape, where an absent entry is a
*zero*, not a missing value), a pandas frame (whose nullable columns use ``pd.NA``), lists, integer or boolean
arrays. This module is the one place that turns them into the engine's form, so that ``train``, ``Model.predict`` and
the scikit-learn estimators read the same input the same way. Neither scipy nor pandas is imported here: an object is
recognised by what it offers, so ``import fgbdt_chain`` stays light.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["column_names", "dense_features", "is_sparse", "labels", "names_for"]


def is_sparse(X: object) -> bool:
    """A scipy sparse matrix or array (``scipy.sparse.issparse``), recognised without importing scipy."""
    return type(X).__module__.startswith("scipy.sparse") and hasattr(X, "toarray")


def _is_frame(X: object) -> bool:
    return hasattr(X, "columns") and hasattr(X, "to_numpy") and hasattr(X, "dtypes")


def column_names(X: object) -> list[str] | None:
    """A pandas frame's column names as strings (None for any other input, which has none)."""
    if not _is_frame(X):
        return None
    return [str(c) for c in X.columns]  # type: ignore[attr-defined]


def dense_features(X: Any, *, finite: bool = False, what: str = "X") -> np.ndarray:
    """``X`` as a dense (rows, features) float64 array: NaN is a missing value, as everywhere in the project.

    Sparse input: absent entries are 0.0 and explicitly stored NaN stay missing (the libsvm convention of
    ``node.data.loaders``). A pandas frame: its ``NA``/``None`` cells become NaN; a column that is not numeric is an
    error naming it. ``finite``: refuse +-inf, which training cannot place on the fixed-point schema range (prediction
    takes them: they fall into the outermost bins). ``what`` names the input in errors.
    """
    if is_sparse(X):
        dense = np.asarray(X.toarray(), dtype=np.float64)
    elif _is_frame(X):
        bad = [str(c) for c, t in zip(X.columns, X.dtypes, strict=True) if not _numeric_dtype(t)]
        if bad:
            raise ValueError(f"{what}: columns {bad} are not numeric; encode them as numbers first")
        dense = X.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        array = np.asarray(X)
        if array.dtype.kind == "c":
            raise ValueError(f"{what}: complex values are not features")
        try:
            dense = array.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}: values must be numbers (NaN or None for missing): {exc}") from exc
    if dense.ndim != 2:
        raise ValueError(f"{what} must be a 2-D array (rows, features), got shape {dense.shape}")
    if finite and np.isinf(dense).any():
        row, col = (int(v[0]) for v in np.nonzero(np.isinf(dense)))
        raise ValueError(f"{what} contains inf (first at row {row}, feature {col}); use NaN for a missing value")
    return dense


def _numeric_dtype(dtype: Any) -> bool:
    kind = getattr(dtype, "kind", None)
    if not isinstance(kind, str):  # pandas extension dtypes without a numpy kind
        kind = str(getattr(getattr(dtype, "numpy_dtype", None), "kind", "O"))
    return kind in ("b", "i", "u", "f")


def labels(y: Any, n_rows: int | None = None, *, what: str = "y") -> np.ndarray:
    """``y`` as a 1-D float64 array of finite values (a column vector is flattened); NaN and inf are refused,
    since a row without a label cannot contribute a gradient."""
    if is_sparse(y):
        y = y.toarray()
    array = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    if array.ndim == 2 and 1 in array.shape:
        array = array.ravel()
    if array.ndim != 1:
        raise ValueError(f"{what} must be 1-D (one label per row), got shape {array.shape}")
    try:
        out = array.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: labels must be numbers: {exc}") from exc
    if n_rows is not None and out.size != n_rows:
        raise ValueError(f"{what} has {out.size} labels for {n_rows} rows")
    if not np.isfinite(out).all():
        first = int(np.flatnonzero(~np.isfinite(out))[0])
        raise ValueError(f"{what} has a missing or infinite label (first at row {first}: {out[first]})")
    return out


def names_for(n_features: int, names: Sequence[str] | None, *, what: str = "feature_names") -> list[str]:
    """Feature names for ``n_features`` columns: the given ones (as strings, checked for count and uniqueness) or
    ``f0 .. f{n-1}``, the names ``node.data.loaders.Dataset`` gives unnamed columns."""
    if names is None:
        return [f"f{j}" for j in range(n_features)]
    out = [str(s) for s in names]
    if len(out) != n_features:
        raise ValueError(f"{what}: {len(out)} names for {n_features} features")
    dup = sorted({s for s in out if out.count(s) > 1})
    if dup:
        raise ValueError(f"{what}: duplicate names {dup}")
    return out
