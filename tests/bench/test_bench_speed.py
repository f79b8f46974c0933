"""The speed benchmark's summary over repetitions: means, standard errors and ratios paired within a repetition."""

from __future__ import annotations

import math
from typing import Any

import pytest

from bench.speed import summarise


def run(name: str, rep: int, seconds: float, error: float = 0.15) -> dict[str, Any]:
    return {"run": name, "repeat": rep, "train_seconds": seconds, "peak_rss_mb": 400.0 + rep, "test_error": error}


def test_ratios_pair_each_repetition() -> None:
    # the machine is twice as fast in the second repetition: paired ratios stay 3x, unpaired means would not tell
    results = [run("fvtree", 0, 6.0), run("lightgbm-2", 0, 2.0), run("fvtree", 1, 3.0), run("lightgbm-2", 1, 1.0)]
    out = summarise(results, ["fvtree", "lightgbm-2"])
    assert out["fvtree"]["ratio_to_lightgbm-2"] == (3.0, 0.0)
    assert out["fvtree"]["train_seconds"] == pytest.approx((4.5, 1.5))
    assert out["fvtree"]["peak_rss_mb"] == 401.0
    assert "ratio_to_lightgbm-1" not in out["fvtree"]  # not among the runs
    assert "ratio_to_lightgbm-2" not in out["lightgbm-2"]  # not against itself


def test_standard_error_of_the_ratios() -> None:
    results = [
        *(run("fvtree", rep, s) for rep, s in enumerate([2.0, 3.0, 4.0])),
        *(run("lightgbm-1", rep, 1.0) for rep in range(3)),
    ]
    mean, se = summarise(results, ["fvtree", "lightgbm-1"])["fvtree"]["ratio_to_lightgbm-1"]
    assert mean == pytest.approx(3.0)
    assert se == pytest.approx(1.0 / math.sqrt(3))


def test_a_changed_model_is_an_error() -> None:
    results = [run("fvtree", 0, 3.0, 0.15), run("fvtree", 1, 3.0, 0.16)]
    with pytest.raises(SystemExit, match="test error changed"):
        summarise(results, ["fvtree"])


def test_ratios_to_every_lightgbm_run_and_its_unpinned_model_may_vary() -> None:
    # LightGBM as a user runs it (no ``deterministic``) may change its model between repetitions; the others may not
    results = [
        run("fvtree", 0, 4.0),
        run("lightgbm-user", 0, 1.0, 0.151),
        run("lightgbm-bins", 0, 2.0),
        run("fvtree", 1, 4.0),
        run("lightgbm-user", 1, 1.0, 0.152),
        run("lightgbm-bins", 1, 2.0),
    ]
    out = summarise(results, ["fvtree", "lightgbm-user", "lightgbm-bins"])
    assert out["fvtree"]["ratio_to_lightgbm-user"] == (4.0, 0.0)
    assert out["fvtree"]["ratio_to_lightgbm-bins"] == (2.0, 0.0)
    assert out["lightgbm-user"]["test_error"] == pytest.approx(0.1515)
    assert "ratio_to_lightgbm-user" not in out["lightgbm-user"]


def test_cpu_ratios_only_against_runs_that_measured_their_cpu() -> None:
    # the machine's load changes the wall time between repetitions, the CPU time much less; a run that cannot time
    # its training alone (lightgbm-bins) records none and gets no CPU ratio
    results = [
        {**run("fvtree", 0, 8.0), "train_cpu_seconds": 4.0},
        {**run("lightgbm-user", 0, 2.0), "train_cpu_seconds": 1.0},
        {**run("lightgbm-bins", 0, 4.0), "train_cpu_seconds": None},
        {**run("fvtree", 1, 20.0), "train_cpu_seconds": 5.0},
        {**run("lightgbm-user", 1, 10.0), "train_cpu_seconds": 1.0},
        {**run("lightgbm-bins", 1, 4.0), "train_cpu_seconds": None},
    ]
    out = summarise(results, ["fvtree", "lightgbm-user", "lightgbm-bins"])
    assert out["fvtree"]["train_cpu_seconds"] == pytest.approx((4.5, 0.5))
    assert out["fvtree"]["cpu_ratio_to_lightgbm-user"] == pytest.approx((4.5, 0.5))
    assert out["fvtree"]["ratio_to_lightgbm-user"] == pytest.approx((3.0, 1.0))
    assert "cpu_ratio_to_lightgbm-bins" not in out["fvtree"]
    assert "train_cpu_seconds" not in out["lightgbm-bins"]


def test_a_regression_run_is_summarised_by_its_rmse() -> None:
    # a regression data set (``--data claims``) has no error rate: its runs record the RMSE and name it
    def regression(name: str, rep: int, rmse: float) -> dict[str, Any]:
        return {
            "run": name,
            "repeat": rep,
            "train_seconds": 1.0,
            "peak_rss_mb": 400.0,
            "loss_metric": "test_rmse",
            "test_rmse": rmse,
        }

    out = summarise([regression("fvtree", 0, 2.5), regression("fvtree", 1, 2.5)], ["fvtree"])
    assert out["fvtree"]["test_rmse"] == 2.5
    assert "test_error" not in out["fvtree"]
    with pytest.raises(SystemExit, match="test rmse changed"):
        summarise([regression("fvtree", 0, 2.5), regression("fvtree", 1, 2.6)], ["fvtree"])
