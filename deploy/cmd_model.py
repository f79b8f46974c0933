"""``fgbdt export`` and ``fgbdt predict``: use a trained model outside the federation.

A model file (``fgbdt-model/1`` JSON) is what a task hands to its requester. These two commands cover the common
uses without writing Python: converting it to LightGBM's text format (so existing serving stacks load it unchanged)
and scoring a data file. Every failure caused by the inputs becomes a :class:`deploy.cli.UserError`, so the user
sees one line naming the file and the problem instead of a traceback.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import numpy as np

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.node.model import Model, ModelFormatError

EXPORT_FORMATS = ("lightgbm",)


def register(subparsers: Any) -> None:
    """Add the ``export`` and ``predict`` commands to the ``fgbdt`` parser."""
    exp = subparsers.add_parser(
        "export",
        help="convert a trained model to another format (LightGBM text model)",
        description="Convert an fgbdt model (JSON) to another format; LightGBM's text model predicts identically.",
    )
    exp.add_argument("--model", required=True, help="trained model file (fgbdt-model/1 JSON)")
    # not argparse choices: an unknown format is a UserError with the list of known ones, like every other input error
    exp.add_argument("--format", default="lightgbm", help=f"output format: {', '.join(EXPORT_FORMATS)}")
    exp.add_argument("--out", required=True, help="file to write")
    exp.set_defaults(func=run_export)

    pred = subparsers.add_parser(
        "predict",
        help="score a data file with a trained model",
        description="Write one prediction per input row, in input order, to a CSV with header 'prediction': the "
        "probability of class 1 for binary models, the predicted value for regression models.",
    )
    pred.add_argument("--model", required=True, help="trained model file (fgbdt-model/1 JSON)")
    pred.add_argument("--data", required=True, help="data file (any format node.data can load)")
    pred.add_argument("--out", required=True, help="CSV file to write")
    pred.add_argument(
        "--label-column",
        default=None,
        help="CSV label column: header name or index (negative counts from the end; default: first column)",
    )
    pred.set_defaults(func=run_predict)


def load_model_or_fail(path: str) -> Model:
    """Load a model, turning unreadable or invalid files into a one-line user error."""
    try:
        return Model.load(path)
    except FileNotFoundError as exc:
        raise UserError(f"model file not found: {path}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read model file {path}: {exc}") from exc
    except ModelFormatError as exc:
        raise UserError(f"invalid model file: {exc}") from exc


def run_export(args: argparse.Namespace) -> int:
    """Write the model in the requested format."""
    fmt = str(args.format).lower()
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"unknown export format {args.format!r}; known formats: {', '.join(EXPORT_FORMATS)}")
    model = load_model_or_fail(args.model)
    try:
        model.to_lightgbm(args.out)
    except OSError as exc:
        raise UserError(f"cannot write {args.out}: {exc}") from exc
    print(f"wrote LightGBM model ({len(model.trees)} trees) to {args.out}")
    return 0


def run_predict(args: argparse.Namespace) -> int:
    """Score every row of the data file and write the predictions in input order."""
    model = load_model_or_fail(args.model)
    try:
        from fgbdt_chain.node.data import load_dataset
    except ImportError as exc:
        raise UserError(f"data loading is unavailable (node.data): {exc}") from exc
    label_column: int | str | None = args.label_column
    if isinstance(label_column, str) and re.fullmatch(r"[+-]?\d+", label_column.strip()):
        label_column = int(label_column)  # "0" / "-1" on the command line mean column indices, not header names
    try:
        ds = load_dataset(args.data, fmt=None, label_column=label_column, task="auto", num_features=model.num_features)
    except FileNotFoundError as exc:
        raise UserError(f"data file not found: {args.data}") from exc
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load data file {args.data}: {exc}") from exc
    X = ds.X.toarray() if hasattr(ds.X, "toarray") else ds.X  # tolerate a sparse matrix from a loader
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != model.num_features:
        got = X.shape[1] if X.ndim == 2 else f"shape {X.shape}"
        raise UserError(f"data file {args.data} has {got} features, the model expects {model.num_features}")
    values = model.predict_proba(X) if model.objective == "binary" else model.predict_raw(X)
    try:
        write_predictions(args.out, values)
    except OSError as exc:
        raise UserError(f"cannot write {args.out}: {exc}") from exc
    print(f"wrote {len(values)} predictions to {args.out}")
    return 0


def write_predictions(path: str, values: np.ndarray) -> None:
    """CSV with a ``prediction`` header; repr keeps every double exact, so results compare bit for bit."""
    lines = ["prediction", *(repr(float(v)) for v in values)]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
