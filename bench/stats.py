"""The summary statistics every benchmark reports: mean and standard error over seeds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable


def mean_se(values: Iterable[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample standard deviation / sqrt n; 0 for one value), NaN-free input."""
    v = list(values)
    mean = statistics.fmean(v)
    return mean, (statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else 0.0)


def seeds_of(text: str) -> list[int]:
    """The seeds a benchmark's ``--seeds`` names: ``first-last`` (inclusive) or a comma-separated list."""
    if "-" in text:
        lo, hi = map(int, text.split("-"))
        return list(range(lo, hi + 1))
    return [int(s) for s in text.split(",")]
