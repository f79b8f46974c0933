"""``fgbdt export`` and ``fgbdt predict``: use a trained model outside the federation.

A model file (``fgbdt-model/1`` JSON, ``/2`` for a regression model whose labels were scaled) is what a task hands
to its requester. These two commands cover the common uses without writing Python: converting it to LightGBM's text
format (so existing serving stacks load it unchanged) and scoring a data file. Every failure caused by the inputs
becomes a :class:`deploy.cli.UserError`, so the user sees one line naming the file and the problem instead of a
traceback.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.node.data.loaders import load_features
from fgbdt_chain.node.model.trees import Model, ModelFormatError

EXPORT_FORMATS = ("lightgbm",)


def register(subparsers: Any) -> None:
    """Add the ``export`` and ``predict`` commands to the ``fgbdt`` parser."""
    exp = subparsers.add_parser(
        "export",
        help="convert a trained model to another format (LightGBM text model)",
        description="Convert an fgbdt model (JSON) to another format; LightGBM's text model predicts identically.",
    )
    exp.add_argument("--model", required=True, help="trained model file (fgbdt-model JSON)")
    # not argparse choices: an unknown format is a UserError with the list of known ones, like every other input error
    exp.add_argument("--format", default="lightgbm", help=f"output format: {', '.join(EXPORT_FORMATS)}")
    exp.add_argument("--out", required=True, help="file to write")
    exp.set_defaults(func=run_export)

    pred = subparsers.add_parser(
        "predict",
        help="score a data file with a trained model",
        description="Write one prediction per input row, in input order, to a CSV with the header 'prediction' "
        "(after the --id-column, when given): the probability of class 1 for binary models, the predicted value for "
        "regression models. A file with a header is matched to the model's features by column name, in any order; "
        "the label and other columns may be there or not (unused columns are listed on stderr) and a missing feature "
        "is an error. Files without a header, and libsvm files, are read by position.",
    )
    pred.add_argument("--model", required=True, help="trained model file (fgbdt-model JSON)")
    pred.add_argument(
        "--data",
        required=True,
        help="data file (libsvm or CSV, plain or .gz, or .npz; a CSV needs no label, an .npz no y)",
    )
    pred.add_argument("--out", required=True, help="CSV file to write")
    pred.add_argument(
        "--id-column",
        default=None,
        help="CSV column copied to the output next to each prediction: header name or index",
    )
    pred.add_argument(
        "--label-column",
        default=None,
        help="CSV label column, not needed with a header (unused columns are ignored): header name or index "
        "(negative counts from the end); without a header, the label's position if it is not the first column",
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


def _column(spec: str | None) -> int | str | None:
    """A column option: "0" / "-1" on the command line are indices, anything else a header name."""
    if isinstance(spec, str) and re.fullmatch(r"[+-]?\d+", spec.strip()):
        return int(spec)
    return spec


def run_predict(args: argparse.Namespace) -> int:
    """Score every row of the data file and write the predictions in input order."""
    model = load_model_or_fail(args.model)
    try:
        features = load_features(
            args.data,
            model.feature_names,
            id_column=_column(args.id_column),
            label_column=_column(args.label_column),
        )
    except FileNotFoundError as exc:
        raise UserError(f"data file not found: {args.data}") from exc
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot score {args.data} with {args.model}: {exc}") from exc
    if features.note:
        print(f"fgbdt predict: {features.note}", file=sys.stderr)
    if features.ignored:
        shown = ", ".join(features.ignored[:12]) + (
            f", ... ({len(features.ignored)})" if len(features.ignored) > 12 else ""
        )
        print(f"fgbdt predict: ignoring columns the model does not use: {shown}", file=sys.stderr)
    # explicit, whatever Model.predict returns: probabilities of class 1 for binary models, raw scores otherwise
    values = model.predict_proba(features.X) if model.objective == "binary" else model.predict_raw(features.X)
    try:
        write_predictions(args.out, values, ids=features.ids, id_name=features.id_name)
    except OSError as exc:
        raise UserError(f"cannot write {args.out}: {exc}") from exc
    print(f"wrote {len(values)} predictions to {args.out}")
    return 0


def write_predictions(
    path: str, values: np.ndarray, *, ids: Sequence[str] | None = None, id_name: str | None = None
) -> None:
    """CSV with a ``prediction`` column, after the ID column when given; repr keeps every double exact, so results
    compare bit for bit. The header stays ``prediction`` for binary models too (the probability of class 1, as
    ``lightgbm.Booster.predict`` returns), so files and scripts written for earlier versions keep working."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        if ids is None:
            writer.writerow(["prediction"])
            writer.writerows([repr(float(v))] for v in values)
        else:
            if len(ids) != len(values):
                raise ValueError(f"{len(ids)} ids for {len(values)} predictions")
            writer.writerow([id_name or "id", "prediction"])
            writer.writerows([i, repr(float(v))] for i, v in zip(ids, values, strict=True))
