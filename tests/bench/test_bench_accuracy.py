"""The accuracy benchmark's summary over seeds: means, the paired difference's standard error and the bar counts."""

from __future__ import annotations

import math
from typing import Any

import pytest

from bench.accuracy import markdown, summarize


def row(seed: int, central: float, fv: float, standalone: list[float], theta: float = 0.5) -> dict[str, Any]:
    return {
        "dataset": "toy",
        "parties": 2,
        "theta": theta,
        "seed": seed,
        "centralized": central,
        "fvtree": fv,
        "pvtree": fv + 0.01,
        "allfeatures": central + 0.002,
        "standalone": standalone,
    }


def test_summary_means_paired_difference_and_counts() -> None:
    rows = [
        row(0, 0.30, 0.31, [0.32, 0.40]),  # +1.0 pt: misses the 0.5 pt bar, below both parties
        row(1, 0.30, 0.29, [0.28, 0.35]),  # -1.0 pt: meets the bar, a party beats it
        row(2, 0.31, 0.313, [0.33, 0.33]),  # +0.3 pt: meets the bar, below both parties
        row(0, 0.20, 0.20, [0.25, 0.25], theta=0.8),
    ]
    first, second = summarize(rows)
    assert (first["dataset"], first["parties"], first["theta"], first["seeds"]) == ("toy", 2, 0.5, [0, 1, 2])
    assert first["centralized"] == pytest.approx((0.30 + 0.30 + 0.31) / 3)
    assert first["fvtree"] == pytest.approx((0.31 + 0.29 + 0.313) / 3)
    assert first["pvtree"] == pytest.approx(first["fvtree"] + 0.01)
    assert first["allfeatures"] == pytest.approx(first["centralized"] + 0.002)
    assert first["standalone_best"] == pytest.approx((0.32 + 0.28 + 0.33) / 3)
    assert first["standalone_worst"] == pytest.approx((0.40 + 0.35 + 0.33) / 3)
    # Differences 0.01, -0.01, 0.003: mean 0.001, sample variance (0.009² + 0.011² + 0.002²) / 2 = 1.03e-4.
    assert first["diff"] == pytest.approx(0.001)
    assert first["diff_se"] == pytest.approx(math.sqrt(1.03e-4 / 3))
    assert (first["within"], first["below_standalone"]) == (2, 2)
    assert second["seeds"] == [0]
    assert second["diff"] == 0.0
    assert second["diff_se"] is None
    assert (second["within"], second["below_standalone"]) == (1, 1)


def test_exactly_half_a_point_meets_the_bar() -> None:
    # 0.3172 - 0.3122 is 0.005 in decimal but a hair above it in binary floating point.
    (s,) = summarize([row(0, 0.3122, 0.3172, [0.4, 0.4])])
    assert s["within"] == 1


def test_markdown_has_summary_only_with_several_seeds() -> None:
    one = markdown([row(0, 0.30, 0.31, [0.32, 0.40])])
    assert one.count("| toy | 2 | 0.5 |") == 1
    assert "Per seed" not in one
    several = markdown([row(0, 0.30, 0.31, [0.32, 0.40]), row(1, 0.30, 0.29, [0.28, 0.35])])
    assert "| +0.00 ± 1.00 pt | 1/2 | 1/2 |" in several
    assert "Per seed" in several
    assert "| toy | 2 | 0.5 | 1 | 0.3000 | 0.2900 |" in several
