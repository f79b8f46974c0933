"""The manipulation benchmark: the honest ladder's rows, a small grid end to end, and its tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.manipulation import LADDER, ladder_kept, ladder_rows, main, tables


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
        *(("ladder", None, r) for r in LADDER),
    ]
    for p in points[:4]:
        assert p["points"] == 100 * (p["share"] - p["honest_share"])
        assert 0 < p["share"] < 1
    assert points[4]["share"] == points[0]["honest_share"]  # the full rung is the honest run
    text = tables([run])
    assert "| split s=2 |" in text and "| shuffled |" in text
    assert set(run["results"]["ladder_kept"]) == {"rows", "labels", "uninformative"}


def test_ladder_order_is_read_from_the_mean_shares() -> None:
    shares = dict(zip(LADDER, [0.3, 0.2, 0.1, 0.25, 0.15, 0.05, 0.01], strict=True))
    points = [{"kind": "ladder", "rung": r, "share": s} for r, s in shares.items()]
    assert ladder_kept(points) == {"rows": True, "labels": True, "uninformative": True}
    points[-1]["share"] = 0.2
    assert ladder_kept(points)["uninformative"] is False
