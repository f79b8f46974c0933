"""Synthetic stress data: the kinds of columns real parties hold and the shared data sets lack.

Why: every figure must also hold on data nobody tuned for. The columns here are the ones that broke things before
(heavy tails that put every row in one equal-width bucket, outliers, integer counts, mostly-constant flags, missing
values), with a label that depends on several of them, so that the trees have something to find in each.

``stress_data`` (20,000 rows; the endorsement benchmark's set, unchanged so its figures stay comparable) columns: 0
a wide smooth signal (the feature a feature skew follows: it has the most distinct values), 1 log-normal
heavy tail (sigma 2), 2 Pareto tail with outliers, 3 Poisson counts, 4 a flag that is 0 in 85% of rows, 5 a
constant-heavy amount (0 in 70%, exponential otherwise), 6 a Gaussian with 20% missing values, 7 uniform noise, 8
a few categories (integers 0..4), 9 a second signal correlated with column 0.

``heavy_data`` (150,000 rows by default) has the shapes of a credit-scoring table, where equal-width buckets over
[min, max] leave one useful bin: a utilisation ratio with 0 for 7% of rows, a bulk in [0, 1.1] and 0.3% of rows up
to about 50,000; integer ages with a few impossible values; delinquency counts that are 0 for 85-95% of rows with
a sentinel 98; a debt ratio that is a ratio for most rows and a dollar amount where the income is missing; a
log-normal income with 20% missing and a few millions; negative-binomial and Poisson counts; dependents with
missing values; an amount that is exactly 1 for 90% of rows; a signed balance with heavy tails on both sides; and a
measurement inside a tiny range [1000, 1000.001]. The label (about 8% positive) depends on most columns through
their bulk, so a model needs bins inside [0, 1.1] of the ratio, not across [0, 50,000].
"""

from __future__ import annotations

import numpy as np

from fgbdt_chain.node.data.loaders import Dataset

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


HEAVY_FEATURES = (
    "utilization",
    "age",
    "late_30_59",
    "debt_ratio",
    "income",
    "open_lines",
    "late_90",
    "real_estate",
    "late_60_89",
    "dependents",
    "mostly_one",
    "balance",
    "tiny_range",
)


def heavy_data(rows: int = 150_000, seed: int = 0) -> tuple[Dataset, Dataset]:
    """(train, test) of ``rows`` rows split 75/25: the heavy-tailed credit-like columns of the module docstring."""
    rng = np.random.default_rng([seed, 0x4EA57])
    u = rng.random(rows)
    utilization = np.where(u < 0.07, 0.0, rng.beta(0.6, 1.2, size=rows) * 1.1)
    outlier = rng.random(rows) < 0.003
    utilization[outlier] = np.exp(rng.uniform(1.0, 10.8, size=int(outlier.sum())))
    age = np.clip(np.rint(rng.normal(52.0, 14.5, size=rows)), 21, 103)
    age[rng.random(rows) < 1e-4] = 0.0
    risk = rng.gamma(0.5, 1.0, size=rows)  # a latent propensity to be late, shared by the delinquency counts
    late_30 = rng.poisson(0.25 * risk).astype(float)
    late_60 = rng.poisson(0.06 * risk).astype(float)
    late_90 = rng.poisson(0.08 * risk).astype(float)
    sentinel = rng.random(rows) < 0.002
    late_30[sentinel], late_60[sentinel], late_90[sentinel] = 98.0, 98.0, 98.0
    income = np.round(np.exp(rng.normal(8.6, 0.7, size=rows)))
    income[rng.random(rows) < 0.01] = 0.0
    rich = rng.random(rows) < 0.001
    income[rich] = np.round(np.exp(rng.uniform(12.0, 15.0, size=int(rich.sum()))))
    no_income = rng.random(rows) < 0.2
    debt_ratio = np.exp(rng.normal(-1.0, 0.7, size=rows))
    debt_ratio[no_income] = np.round(np.exp(rng.normal(7.3, 1.3, size=int(no_income.sum()))))
    income[no_income] = np.nan
    open_lines = rng.negative_binomial(4, 4 / (4 + 8.5), size=rows).astype(float)
    real_estate = rng.poisson(1.0, size=rows).astype(float)
    real_estate[rng.random(rows) < 5e-4] = 54.0
    dependents = np.where(rng.random(rows) < 0.58, 0.0, rng.poisson(1.6, size=rows) + 1.0)
    mostly_one = np.where(rng.random(rows) < 0.9, 1.0, rng.exponential(3.0, size=rows))
    balance = rng.standard_t(1.5, size=rows) * 800.0
    tiny_range = 1000.0 + rng.random(rows) * 1e-3
    ratio = np.minimum(utilization, 1.5)
    logit = (
        -4.4
        + 2.8 * ratio
        - 1.2 * (utilization == 0.0)
        + 0.9 * (utilization > 1.0)
        - 0.035 * (age - 52.0)
        + 0.9 * np.minimum(late_30, 4.0)
        + 1.3 * np.minimum(late_60, 3.0)
        + 1.6 * np.minimum(late_90, 3.0)
        + 0.6 * np.minimum(debt_ratio, 2.0) * ~no_income
        - 0.35 * np.nan_to_num(np.log1p(income) - 8.6) * ~no_income
        + 0.25 * no_income
        + 0.04 * np.abs(open_lines - 8.0)
        + 0.1 * np.minimum(dependents, 4.0)
        - 0.15 * np.minimum(real_estate, 3.0)
        + 0.3 * (mostly_one > 3.0)
        + 0.25 * np.tanh(balance / 800.0)
        + 0.4 * np.sin((tiny_range - 1000.0) * 6e3)
    )
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))).astype(float)
    dependents[rng.random(rows) < 0.025] = np.nan
    X = np.column_stack(
        [
            utilization,
            age,
            late_30,
            debt_ratio,
            income,
            open_lines,
            late_90,
            real_estate,
            late_60,
            dependents,
            mostly_one,
            balance,
            tiny_range,
        ]
    )
    cut = rows * 3 // 4
    names = list(HEAVY_FEATURES)
    return (
        Dataset(X[:cut], y[:cut], names, f"heavy-{seed}"),
        Dataset(X[cut:], y[cut:], names, f"heavy-{seed}-test"),
    )


def claims_data(rows: int = 20_000, seed: int = 0) -> tuple[Dataset, Dataset]:
    """(train, test) of ``rows`` rows split 75/25 with a heavy-tailed real label, like an insurer's claim amounts:
    0 for about 60% of rows, log-normal (sigma 1.2) otherwise, and 0.2% of rows 50 to 500 times larger. The columns
    are ``stress_data``'s.

    Why: the shared regression sets (abalone, cpusmall) have bounded, bulky labels; a party's PSD splits the label
    over the task's whole range, so a label whose range is set by a few outliers is the case nothing else tests."""
    train, test = stress_data(rows, seed)
    rng = np.random.default_rng([seed, 0xC1A1])
    X = np.vstack([train.X, test.X])
    signal = np.nan_to_num(X[:, 0] / 3.0 + 0.5 * np.log(X[:, 1]) + 0.8 * X[:, 4] + 0.3 * (X[:, 3] - 3.0))
    claim = rng.random(rows) < 1.0 / (1.0 + np.exp(-(signal - 0.4)))
    amount = np.exp(6.0 + 0.5 * signal + 1.2 * rng.normal(size=rows))
    huge = rng.random(rows) < 0.002
    amount[huge] *= np.exp(rng.uniform(np.log(50.0), np.log(500.0), size=int(huge.sum())))
    y = np.round(np.where(claim, amount, 0.0), 2)
    cut = rows * 3 // 4
    names = list(FEATURES)
    return (
        Dataset(X[:cut], y[:cut], names, f"claims-{seed}"),
        Dataset(X[cut:], y[cut:], names, f"claims-{seed}-test"),
    )
