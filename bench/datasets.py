"""Where the benchmark data sets are and how each is loaded (train file, test file, loader options)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from bench.stress import claims_data, heavy_data, stress_data
from fgbdt_chain.node.data.loaders import Dataset, load_train_test

DATA_DIR = Path(os.environ.get("FGBDT_DATASETS", Path(__file__).resolve().parents[2] / "shared" / "datasets"))
"""The data sets directory: ``FGBDT_DATASETS``, by default the one beside the checkout (where CI puts it)."""

DATASETS: dict[str, tuple[str, str | None, dict[str, object]]] = {
    "a9a": ("a9a.gz", "a9a.t.gz", {}),
    "higgs": ("higgs_h2o_train_10k.csv.gz", "higgs_h2o_test_5k.csv.gz", {}),
    "susy": ("susy_bfp_train_10k.csv.gz", "susy_bfp_test_10k.csv.gz", {}),
    "credit": ("UCI_Credit_Card.csv.gz", None, {"label_column": -1, "drop_columns": [0]}),
    "abalone": ("abalone.gz", None, {"task": "regression"}),
    "cpusmall": ("cpusmall.gz", None, {"task": "regression"}),
}
SYNTHETIC: dict[str, tuple[Callable[..., tuple[Dataset, Dataset]], str]] = {
    "stress": (stress_data, "binary"),
    "heavy": (heavy_data, "binary"),
    "claims": (claims_data, "regression"),
}
"""Data sets made here rather than read (``bench.stress``), seeded by the run's seed: each one's maker and loss."""


def objective(name: str) -> str:
    """The loss a named data set is trained with: squared error for the regression sets, else binary logistic."""
    if name in SYNTHETIC:
        return SYNTHETIC[name][1]
    return "regression" if DATASETS[name][2].get("task") == "regression" else "binary"


def load(name: str, seed: int = 0) -> tuple[Dataset, Dataset]:
    """Train and test sets of a named benchmark data set (from the data sets directory; a9a falls back to the
    demo's copy)."""
    if name in SYNTHETIC:
        return SYNTHETIC[name][0](seed=seed)
    train, test, opts = DATASETS[name]
    base = DATA_DIR
    if name == "a9a" and not (base / train).exists():
        base = Path(__file__).resolve().parents[1] / "deploy" / "data"
    return load_train_test(base / train, base / test if test else None, seed=seed, **opts)  # type: ignore[arg-type]
