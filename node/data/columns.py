"""Which column of a data file holds which feature of a model: by header name, else by position.

A model keeps the names of the features it was trained on (``Model.feature_names``: the training file's header, or
the loader's positional names ``c{j}`` / ``f{j}`` for files without one). Scoring a file by position silently feeds
the wrong column to every split as soon as the file's columns come in another order or it has (or lacks) a label or
an ID column where the training file had none: the predictions look plausible and are wrong (measured: test error
0.590 instead of 0.235 for a file whose label was the last column). So:

* A file with a header is matched by name, in any order. The label and an ID column may be there or not; any other
  column the model does not use is ignored (and reported). A file that lacks one of the model's features is refused,
  naming the missing ones.
* A file without a header is matched by position, checked against the model's feature count. Its columns are the
  model's features in order, after taking out an explicit ID or label column; with exactly one column more, that
  column is the label in the first place (the loaders' default). A model trained on a file without a header has
  features named ``c{j}``, ``j`` being the training file's column, and a file laid out like the training file (same
  column count) is read at those same positions, wherever its label was.
* Where names cannot work, position is the fallback, said in :attr:`ColumnPlan.note`: the model's feature names are
  not unique, or they are the loader's positional names and none of them is in the header.

This module only decides; ``node.data.loaders.load_features`` reads the file with the plan.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ColumnMismatch", "ColumnPlan", "align_columns", "column_label", "positional_names"]

_POSITIONAL = re.compile(r"[cf]\d+")
_HEADERLESS_CSV = re.compile(r"c(\d+)")


class ColumnMismatch(ValueError):
    """The file's columns cannot give the model's features; the message says what is missing and what to do."""


@dataclass(frozen=True)
class ColumnPlan:
    """Where each of the model's features is in the file, and what else the file holds."""

    features: tuple[int, ...]
    """0-based file column of each model feature, in the model's feature order."""
    id_column: int | None
    label_column: int | None
    """The label's column when the file has one (it is never read for scoring)."""
    ignored: tuple[int, ...]
    """File columns used for nothing (not a feature, the ID or the label)."""
    by_name: bool
    note: str | None = None
    """Why a file with a header was matched by position, when it was."""


def positional_names(feature_names: Sequence[str]) -> bool:
    """Whether the names are the loaders' positional ones (``c{j}`` CSV without header, ``f{j}`` libsvm)."""
    return bool(feature_names) and all(_POSITIONAL.fullmatch(n) for n in feature_names)


def column_label(j: int, header: Sequence[str] | None) -> str:
    """A column as a user reads it in messages: its quoted name, or its 0-based position when it has none."""
    if header is not None and header[j].strip():
        return repr(header[j].strip())
    return f"column {j}" + (" (unnamed)" if header is not None else "")


def _resolve(spec: int | str, header: Sequence[str] | None, ncols: int, what: str) -> int:
    """A column given by 0-based index (negative from the end) or header name."""
    if isinstance(spec, bool) or not isinstance(spec, int | str):
        raise TypeError(f"{what} must be a column index or a header name, got {spec!r}")
    if isinstance(spec, str):
        if header is None:
            raise ColumnMismatch(f"{what} {spec!r} is given by name but the file has no header (give its index)")
        matches = [j for j, name in enumerate(header) if name.strip() == spec.strip()]
        if not matches:
            raise ColumnMismatch(f"{what} {spec!r} is not in the header ({_listing(header)})")
        if len(matches) > 1:
            raise ColumnMismatch(f"{what} {spec!r} appears {len(matches)} times in the header")
        return matches[0]
    if not -ncols <= spec < ncols:
        raise ColumnMismatch(f"{what} {spec} is out of range for {ncols} columns")
    return spec % ncols


def _listing(names: Sequence[str], limit: int = 8) -> str:
    shown = [repr(n.strip()) for n in names[:limit]]
    return ", ".join(shown) + (f", ... ({len(names)} columns)" if len(names) > limit else "")


def align_columns(
    feature_names: Sequence[str],
    header: Sequence[str] | None,
    ncols: int,
    *,
    id_column: int | str | None = None,
    label_column: int | str | None = None,
) -> ColumnPlan:
    """Plan reading a file with ``ncols`` columns (``header``: its names, None without a header row) for a model.

    ``id_column`` must exist when given. ``label_column`` is optional even when given by name: a file to score may
    well have no label, and a named label that is absent is simply not there. Raises :class:`ColumnMismatch`.
    """
    names = [str(n) for n in feature_names]
    if header is not None and len(header) != ncols:
        raise ValueError(f"header has {len(header)} names for {ncols} columns")
    id_index = None if id_column is None else _resolve(id_column, header, ncols, "ID column")
    label_index: int | None = None
    if label_column is not None:
        named_absent = isinstance(label_column, str) and header is not None and label_column.strip() not in header
        if not named_absent:
            label_index = _resolve(label_column, header, ncols, "label column")
    if header is not None:
        note = _why_not_by_name(names, header)
        if note is None:
            return _by_name(names, header, id_index, label_index)
        plan = _by_position(names, ncols, id_index, label_index)
        return ColumnPlan(plan.features, plan.id_column, plan.label_column, plan.ignored, False, note)
    return _by_position(names, ncols, id_index, label_index)


def _why_not_by_name(names: list[str], header: Sequence[str]) -> str | None:
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        return f"matched by position: the model's feature names are not unique ({_listing(twice)})"
    stripped = {h.strip() for h in header}
    if positional_names(names) and not stripped & set(names):
        return (
            "matched by position: the model was trained on a file without a header (its features are named by "
            "position), so the names in this file's header cannot be matched"
        )
    return None


def _by_name(names: list[str], header: Sequence[str], id_index: int | None, label_index: int | None) -> ColumnPlan:
    where: dict[str, list[int]] = {}
    for j, h in enumerate(header):
        where.setdefault(h.strip(), []).append(j)
    missing = [n for n in names if n not in where]
    if missing:
        folded = {h.strip().casefold(): h.strip() for h in header}
        shown = [
            repr(n) + (f" (the file has {folded[n.casefold()]!r})" if n.casefold() in folded else "") for n in missing
        ]
        hint = ""
        if positional_names(names):
            hint = (
                "; the model was trained on a file without a header (features named by position): score a file "
                "without a header row"
            )
        raise ColumnMismatch(
            f"the file lacks {len(missing)} of the model's {len(names)} features: {', '.join(shown[:10])}"
            + (", ..." if len(shown) > 10 else "")
            + hint
        )
    twice = [n for n in names if len(where[n]) > 1]
    if twice:
        raise ColumnMismatch(
            f"feature {twice[0]!r} appears {len(where[twice[0]])} times in the header: which one is meant is ambiguous"
        )
    features = tuple(where[n][0] for n in names)
    used = {*features, id_index, label_index}
    ignored = tuple(j for j in range(len(header)) if j not in used)
    return ColumnPlan(features, id_index, label_index, ignored, by_name=True)


def _by_position(names: list[str], ncols: int, id_index: int | None, label_index: int | None) -> ColumnPlan:
    n = len(names)
    rest = [j for j in range(ncols) if j not in (id_index, label_index)]
    if len(rest) == n:
        return ColumnPlan(tuple(rest), id_index, label_index, (), by_name=False)
    trained_at = [int(m.group(1)) for m in map(_HEADERLESS_CSV.fullmatch, names) if m]
    if len(trained_at) == n and ncols > max(trained_at, default=-1) and not {id_index, label_index} & set(trained_at):
        # the training file's own layout (a model of a file without header names its features by their column)
        features = tuple(trained_at)
        if label_index is None and ncols == n + 1 + (id_index is not None):
            label_index = next(j for j in rest if j not in features)
        ignored = tuple(j for j in range(ncols) if j not in {*features, id_index, label_index})
        return ColumnPlan(features, id_index, label_index, ignored, by_name=False)
    if label_index is None and len(rest) == n + 1:
        return ColumnPlan(tuple(rest[1:]), id_index, rest[0], (), by_name=False)
    taken = " after the ID and label columns" if id_index is not None or label_index is not None else ""
    raise ColumnMismatch(
        f"the file has {ncols} columns and no header: {len(rest)} columns{taken} for the model's {n} features "
        "(by position a file holds the features in training order, optionally after the label in the first column; "
        "give the file a header row to match by name)"
    )
