"""bench.curves: the fitted exponent is the power law's, and the tables and plot follow the recorded points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import curves


def _points(exponent: float, lgb_exponent: float) -> list[dict[str, Any]]:
    out = []
    for rep in range(2):
        for value in (1_000, 10_000, 100_000):
            for run, e in (("fvtree", exponent), ("lightgbm-user", lgb_exponent)):
                wobble = 1.0 + 0.01 * rep
                out.append(
                    {
                        "run": run,
                        "value": value,
                        "repeat": rep,
                        "train_seconds": 2e-3 * value**e * wobble,
                        "train_cpu_seconds": 1e-3 * value**e * wobble,
                        "prep_seconds": 0.1,
                        "peak_rss_mb": 300.0 + 0.0 * value,
                    }
                )
    return out


def test_the_slope_of_a_power_law_is_its_exponent() -> None:
    xs = [10.0, 100.0, 1000.0, 10_000.0]
    assert curves.slope(xs, [3.0 * x**1.3 for x in xs]) == pytest.approx(1.3)
    assert curves.slope(xs, [5.0 for _ in xs]) == pytest.approx(0.0, abs=1e-12)
    assert curves.slope([10.0], [1.0]) is None


def test_the_summary_fits_each_run_and_the_table_shows_the_ratio(tmp_path: Path) -> None:
    points = _points(1.0, 0.8)
    s = curves.summary(points)
    assert s["fvtree"]["cpu_exponent"] == pytest.approx(1.0, abs=1e-9)
    assert s["lightgbm-user"]["cpu_exponent"] == pytest.approx(0.8, abs=1e-9)
    assert s["fvtree"]["memory_exponent"] == pytest.approx(0.0, abs=1e-9)
    first = s["fvtree"]["points"][0]
    assert first["n"] == 2 and first["train_cpu_seconds"][1] > 0  # two repetitions, their spread
    run = {"parameters": {"axis": "rows"}, "results": {"summary": s}}
    text = curves.tables([run])
    ratio = 1e-3 * 100_000**1.0 / (1e-3 * 100_000**0.8)
    assert "| 100,000 |" in text and f"{ratio:.2f}x" in text
    assert "CPU seconds simulate 1.00 (1.00), LightGBM 0.80 (0.80)" in text
    curves.plot([run], tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000
