"""LightGBM baselines: on exactly the federation's bins, ``centralized`` (all rows) and ``standalone`` (one party);
on the raw values with LightGBM's own binning, ``lightgbm`` (all rows, the user's training choices matched); and
``lightgbm-defaults``, LightGBM exactly as a user would run it without the federation's parameters.

**Same bins.** LightGBM is fed the bin slots (0 = missing, 1..bins) as numeric features instead of the raw
values. Each distinct slot value becomes its own LightGBM bin, so its splits partition rows exactly as the
federation's do, and the missing slot 0 sorts first and therefore always goes left, as in FV-tree. Parameters are
matched: level-wise depth as ``max_depth`` with ``num_leaves = 2^depth``, the same lambda, learning rate and minimum
rows per leaf, and no boost-from-average (the federation starts from a raw score of 0). These isolate what
federating costs.

**Own bins** (:func:`train_own_bins`). The same split and rows, but LightGBM bins the raw values itself (up to 255
bins per feature from its sample of rows, missing values learned per split), so the difference to ``centralized``
is what the task's private, coarser bins cost. Matched, because they are the user's training choices: the number of
trees, the learning rate, the depth (``max_depth`` with ``num_leaves = 2^depth``, so trees can be as large as the
federation's), L2 lambda and the minimum rows per leaf; and the seed and threads of the run. Everything else is
LightGBM's default: ``max_bin`` 255, ``min_data_in_bin`` 3, ``bin_construct_sample_cnt`` 200,000,
``boost_from_average`` true, ``min_sum_hessian_in_leaf`` 1e-3, the exact hessian (also for ``--hessian count``).

**Its defaults** (:func:`train_defaults`). Nothing matched but the objective, the seed and the threads: 100 trees
of 31 leaves without a depth limit, learning rate 0.1, lambda 0. Why a third: the matched model shows what the
bins cost, but a user who skips the federation would not pick 500 trees of depth 8; where the task's parameters
overfit, only this row shows it.
"""

from __future__ import annotations

from typing import Any

import lightgbm as lgb
import numpy as np

from fgbdt_chain.ledger.spec.train_params import TrainParams


def _matched(params: TrainParams, threads: int, seed: int) -> dict[str, Any]:
    """The training choices every LightGBM baseline takes from the federation's parameters."""
    return {
        "objective": "binary" if params.objective == "binary" else "regression",
        "learning_rate": params.learning_rate,
        "num_leaves": 2**params.depth,
        "max_depth": params.depth,
        "lambda_l2": params.lam,
        "min_data_in_leaf": params.min_rows,
        "num_threads": threads,
        "seed": seed,
        "deterministic": True,
        "verbose": -1,
    }


def lightgbm_params(params: TrainParams, *, threads: int = 1, seed: int = 0) -> dict[str, Any]:
    """LightGBM parameters equivalent to the federation's: its bins as given and no starting average."""
    return {
        **_matched(params, threads, seed),
        "min_sum_hessian_in_leaf": 0.0,
        "max_bin": params.nbins + 1,
        "min_data_in_bin": 1,
        "boost_from_average": False,
    }


def _count_objective(preds: np.ndarray, data: lgb.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Logistic gradient with the hessian replaced by 1 (``hessian=count``, the paper's formulas)."""
    y = data.get_label()
    p = 1.0 / (1.0 + np.exp(-preds))
    return p - y, np.ones_like(p)


def train_lightgbm(
    slots: np.ndarray, y: np.ndarray, params: TrainParams, *, threads: int = 1, seed: int = 0
) -> lgb.Booster:
    """A LightGBM booster on bin slots with the federation's parameters."""
    lp = lightgbm_params(params, threads=threads, seed=seed)
    if params.hessian == "count":
        if params.objective != "binary":
            lp["objective"] = "regression"
        else:
            lp["objective"] = _count_objective
    dataset_params = {"max_bin": lp["max_bin"], "min_data_in_bin": 1, "verbose": -1}
    data = lgb.Dataset(slots.astype(np.float64), label=y, params=dataset_params)
    return lgb.train(lp, data, num_boost_round=params.trees)


def predict_lightgbm(booster: lgb.Booster, slots: np.ndarray, params: TrainParams) -> np.ndarray:
    """Probabilities (binary) or values (regression) for bin slots."""
    raw = np.asarray(booster.predict(slots.astype(np.float64), raw_score=True), dtype=np.float64)
    if params.objective == "binary":
        return 1.0 / (1.0 + np.exp(-raw))
    return raw


def own_bins_params(params: TrainParams, *, threads: int = 1, seed: int = 0) -> dict[str, Any]:
    """LightGBM's defaults with the user's training choices matched (see the module docstring for which)."""
    return _matched(params, threads, seed)


def train_own_bins(
    X: np.ndarray, y: np.ndarray, params: TrainParams, *, threads: int = 1, seed: int = 0
) -> lgb.Booster:
    """A LightGBM booster on the raw values (NaN as missing) that bins them itself."""
    return raw_booster(X, y, own_bins_params(params, threads=threads, seed=seed), params.trees)


def defaults_params(params: TrainParams, *, threads: int = 1, seed: int = 0) -> dict[str, Any]:
    """LightGBM's own defaults, but for the objective, the seed and the threads of the run."""
    objective = "binary" if params.objective == "binary" else "regression"
    return {"objective": objective, "num_threads": threads, "seed": seed, "deterministic": True, "verbose": -1}


def train_defaults(
    X: np.ndarray, y: np.ndarray, params: TrainParams, *, threads: int = 1, seed: int = 0
) -> lgb.Booster:
    """A LightGBM booster on the raw values with its own defaults (100 boosting rounds, ``lgb.train``'s own)."""
    return raw_booster(X, y, defaults_params(params, threads=threads, seed=seed), None)


def raw_booster(X: np.ndarray, y: np.ndarray, lp: dict[str, Any], rounds: int | None) -> lgb.Booster:
    """LightGBM on the raw values (NaN as missing), binning them itself, with ``lp``; ``rounds`` None: its own."""
    data = lgb.Dataset(np.asarray(X, dtype=np.float64), label=y, params={"verbose": -1})
    return lgb.train(lp, data) if rounds is None else lgb.train(lp, data, num_boost_round=rounds)


RAW_BASELINES = {"lightgbm": own_bins_params, "lightgbm-defaults": defaults_params}
"""The baselines on the raw values, by name: their parameters (``lightgbm`` trains the task's trees, the other
its own rounds)."""
