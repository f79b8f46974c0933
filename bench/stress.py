"""Synthetic stress data: the kinds of columns real parties hold and the shared data sets lack.

Why: every figure must also hold on data nobody tuned for. The columns here are the ones that broke things before
(heavy tails that put every row in one equal-width bucket, outliers, integer counts, mostly-constant flags, missing
values), with a label that depends on several of them, so that the trees have something to find in each.

Columns: 0 a wide smooth signal (the feature a feature skew follows: it has the most distinct values), 1 log-normal
heavy tail (sigma 2), 2 Pareto tail with outliers, 3 Poisson counts, 4 a flag that is 0 in 85% of rows, 5 a
constant-heavy amount (0 in 70%, exponential otherwise), 6 a Gaussian with 20% missing values, 7 uniform noise, 8
a few categories (integers 0..4), 9 a second signal correlated with column 0.
"""

from __future__ import annotations

import numpy as np

from fgbdt_chain.node.data import Dataset

FEATURES = (
    "signal",
    "lognormal",
    "pareto",
    "counts",
    "flag",
    "amount",
    "gaussian_missing",
    "noise",
    "category",
    "signal2",
)


def stress_data(rows: int = 20_000, seed: int = 0) -> tuple[Dataset, Dataset]:
    """(train, test) of ``rows`` rows split 75/25, binary labels from a logistic model of several columns."""
    rng = np.random.default_rng([seed, 0x57E55])
    x0 = rng.normal(size=rows) * 3.0
    lognormal = np.exp(rng.normal(size=rows) * 2.0)
    pareto = (rng.pareto(1.5, size=rows) + 1.0) * np.where(rng.random(rows) < 0.01, 1e4, 1.0)
    counts = rng.poisson(3.0, size=rows).astype(float)
    flag = (rng.random(rows) < 0.15).astype(float)
    amount = np.where(rng.random(rows) < 0.7, 0.0, rng.exponential(500.0, size=rows))
    gaussian = rng.normal(size=rows)
    noise = rng.random(rows)
    category = rng.integers(0, 5, size=rows).astype(float)
    x9 = 0.6 * x0 / 3.0 + 0.8 * rng.normal(size=rows)
    logit = (
        0.5 * x0
        + 0.6 * np.log(lognormal)
        - 0.8 * np.log(pareto)
        + 0.3 * (counts - 3.0)
        + 1.2 * flag
        + 0.4 * np.log1p(amount) / 3.0
        + 0.7 * gaussian
        + 0.5 * (category == 2)
        - 0.6 * x9
        - 0.4
    )
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))).astype(float)
    gaussian[rng.random(rows) < 0.2] = np.nan
    X = np.column_stack([x0, lognormal, pareto, counts, flag, amount, gaussian, noise, category, x9])
    cut = rows * 3 // 4
    names = list(FEATURES)
    return (
        Dataset(X[:cut], y[:cut], names, f"stress-{seed}"),
        Dataset(X[cut:], y[cut:], names, f"stress-{seed}-test"),
    )
