"""The manipulation benchmark: the honest ladder's rows, a small grid end to end, and its tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.manipulation import LADDER, across_runs, clone_floor, ladder_kept, ladder_rows, main, tables


def test_ladder_rows_change_what_each_rung_names() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] > 0).astype(np.float64)
    half, _ = ladder_rows("half", X, y, np.random.default_rng(1))
    quarter, _ = ladder_rows("quarter", X, y, np.random.default_rng(1))
    assert (len(half), len(quarter)) == (200, 100)
    _, flipped = ladder_rows("flip30", X, y, np.random.default_rng(1))
    assert int(np.sum(flipped != y)) == 120
    shuffled, same = ladder_rows("shuffled", X, y, np.random.default_rng(1))
    np.testing.assert_array_equal(same, y)
    np.testing.assert_array_equal(np.sort(shuffled, axis=0), np.sort(X, axis=0))  # each column's values kept
    assert abs(np.corrcoef(shuffled[:, 0], y)[0, 1]) < 0.2 < np.corrcoef(X[:, 0], y)[0, 1]  # the signal gone
    reg = 3.0 * X[:, 0]
    _, noisy = ladder_rows("flip50", X, reg, np.random.default_rng(1))
    assert np.isin(noisy, reg).all() and 150 <= int(np.sum(noisy != reg)) <= 200  # other rows' labels


def test_a_small_grid_records_every_manipulation_and_rung(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    argv = ["--datasets", "abalone", "--rows", "800", "--trees", "2", "--depth", "2", "--seeds", "0", "--factors", "2"]
    assert main([*argv, "--splits", "2", "--out", str(out)]) == 0
    [run] = json.loads(out.read_text())["runs"]
    assert run["complete"] and run["parameters"]["rows"] == 800
    points = run["results"]["points"]
    kinds = [(p["kind"], p.get("factor"), p.get("rung")) for p in points]
    assert kinds == [
        ("duplicate", 2, None),
        ("jitter", 2, None),
        ("fitted", 2, None),
        ("split", 2, None),
        ("clone", 2, None),
        ("fresh-clone", 2, None),
        *(("ladder", None, r) for r in LADDER),
    ]
    for p in points[:6]:
        assert p["points"] == 100 * (p["share"] - p["honest_share"])
        assert 0 < p["share"] < 1
    assert points[6]["share"] == points[0]["honest_share"]  # the full rung is the honest run
    text = tables([run])
    assert "| split s=2 |" in text and "| clone s=2 |" in text and "| shuffled |" in text
    assert "floor for `clone`" in text and "s = 2: +15.00" in text  # M = 4: 2/5 - 1/4
    assert set(run["results"]["ladder_kept"]) == {"rows", "labels", "uninformative"}


def test_kinds_choose_the_manipulations_played(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    argv = ["--datasets", "abalone", "--rows", "600", "--trees", "1", "--depth", "2", "--seeds", "0"]
    assert main([*argv, "--kinds", "clone", "--splits", "3", "--out", str(out)]) == 0
    [run] = json.loads(out.read_text())["runs"]
    played = {(p["kind"], p["factor"]) for p in run["results"]["points"] if p["kind"] != "ladder"}
    assert played == {("clone", 3)}
    with pytest.raises(SystemExit):
        main([*argv, "--kinds", "clone,copies", "--out", str(out)])


def test_clone_floor_is_what_equal_parties_earn_together() -> None:
    assert clone_floor(4, 1) == 0.0
    assert clone_floor(2, 2) == pytest.approx(100 * (2 / 3 - 1 / 2))
    assert clone_floor(8, 5) == pytest.approx(100 * (5 / 12 - 1 / 8))


def test_ladder_order_is_read_from_the_mean_shares() -> None:
    shares = dict(zip(LADDER, [0.3, 0.2, 0.1, 0.25, 0.15, 0.05, 0.01], strict=True))
    points = [{"kind": "ladder", "rung": r, "share": s} for r, s in shares.items()]
    assert ladder_kept(points) == {"rows": True, "labels": True, "uninformative": True}
    points[-1]["share"] = 0.2
    assert ladder_kept(points)["uninformative"] is False


def test_across_runs_compares_each_measure_worst_cell_with_the_default_on_the_same_cells() -> None:
    def run(measure: str, gains: dict[tuple[str, int, str], list[float]], noisy: int | None = None) -> dict:
        points = [
            {"kind": k, "factor": f, "dataset": d, "parties": 4, "theta": 0.5, "seed": seed, "points": g}
            for (k, f, d), values in gains.items()
            for seed, g in enumerate(values)
        ]
        points.append({"kind": "ladder", "rung": "full", "dataset": "a", "seed": 0, "share": 0.3})
        return {
            "parameters": {"contribution": measure, "rows": 600, "noisy_party": noisy},
            "results": {"points": points},
        }

    runs = [
        run("shapley", {("duplicate", 2, "a"): [4.0, 6.0], ("split", 2, "a"): [1.0, 3.0], ("clone", 2, "b"): [9.0]}),
        run("scaled", {("duplicate", 2, "a"): [-1.0, 1.0], ("split", 2, "b"): [7.0, 9.0]}),
        run("scaled", {("duplicate", 2, "a"): [50.0, 50.0]}, noisy=3),  # beside a coin-flip party: left out
    ]
    text = across_runs(runs)
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| s")}
    assert "+5.00 (duplicate 2, a, M = 4, theta 0.5)" in rows["| shapley"]
    assert "| - |" in rows["| shapley"]  # one seed of clone is an anecdote, not a cell
    assert "+8.00 (split 2, b" in rows["| scaled"]
    # on the one cell both ran, scaled's worst is 0 and shapley's 5
    assert rows["| scaled"].endswith(
        "| +0.00 (duplicate 2, a, M = 4, theta 0.5) | +5.00 (duplicate 2, a, M = 4, theta 0.5) |"
    )
    assert across_runs(runs[:1]) == ""  # one measure: nothing to compare
