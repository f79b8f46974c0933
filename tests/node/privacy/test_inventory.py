"""What a party releases in a private task is what node.privacy.inventory lists, and moves by its sensitivity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fgbdt_chain
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.privacy import inventory
from fgbdt_chain.node.privacy.binning import bucket_counts, cell_bounds
from fgbdt_chain.node.privacy.schema import Declared, clip_rows
from fgbdt_chain.node.sim.experiment import PrepConfig, federation, prepare
from fgbdt_chain.node.sim.fvtree import LevelView

DOCS = Path(__file__).resolve().parents[3] / "docs" / "privacy.md"


def _parties(seed: int = 1) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[float, float]]]:
    rng = np.random.default_rng(seed)
    parties = []
    for _ in range(3):
        X = np.column_stack([rng.normal(0, 1, 400), rng.integers(0, 5, 400).astype(np.float64)])
        y = (X[:, 0] + 0.3 * X[:, 1] + rng.normal(0, 1, 400) > 0.6).astype(np.float64)
        parties.append((X, y))
    return parties, [(-4.0, 4.0), (0.0, 4.0)]


def _check_report(report: dict[str, Any]) -> None:
    for key in report:
        assert key in inventory.REPORT_KEYS, f"the report releases {key!r}, which the inventory does not list"
        inventory.release(inventory.REPORT_KEYS[key])
    for pp in report["per_party"]:
        for key, value in pp.items():
            assert key in inventory.PER_PARTY_KEYS, f"per_party releases {key!r}, not in the inventory"
            if inventory.PER_PARTY_KEYS[key] == "counts":
                assert value is None, f"an exact count {key}={value} in a private report"
    assert report["train_rows"] is None


@pytest.mark.parametrize("algo", ["randomsplit", "fvtree"])
def test_a_private_reports_keys_are_all_in_the_inventory(algo: str) -> None:
    parties, ranges = _parties()
    params = {"epsilon": 1.0, "algo": algo, "feature_ranges": ranges, "num_iterations": 2, "max_depth": 2}
    model = fgbdt_chain.train(params, parties)
    _check_report(model.report)


def test_fvtree_under_a_budget_computes_no_verifier_statistic_nor_credit() -> None:
    """Endorsement keeps the exact rules only: no verdict, no measurement, every credit neutral, rows weigh delta."""
    parties, ranges = _parties()
    X = np.vstack([p[0] for p in parties])
    y = np.concatenate([p[1] for p in parties])
    parts = [np.arange(400 * i, 400 * (i + 1)) for i in range(3)]
    train = Dataset(X, y, ["a", "b"])
    test = Dataset(X[:50], y[:50], ["a", "b"])
    config = PrepConfig(parties=3, epsilon=1.0, schema=Declared.of(ranges))
    prep = prepare(train, test, TrainParams(trees=2, depth=2), config, parts=parts)
    views: list[LevelView] = []
    fed = federation(prep, "fvtree", observer=views.append)
    result = fed.train()
    assert views and all(not v for view in views for v in view.verdicts)
    assert all(not m for view in views for m in view.measurements)
    assert all(c.g == c.h == c.n for tc in result.credits for c in tc)  # neutral: every quantity at one
    assert all(np.all(p.w == min(prep.params.delta, 1.0)) for p in fed.parties if getattr(p, "w", None) is not None)


def test_the_privacy_page_carries_the_inventory() -> None:
    assert inventory.markdown_table() in DOCS.read_text(), "docs/privacy.md must carry inventory.markdown_table()"
    names = [r.name for r in inventory.RELEASES]
    assert len(names) == len(set(names))
    assert set(inventory.REPORT_KEYS.values()) | set(inventory.PER_PARTY_KEYS.values()) <= set(names)


# ------------------------------------------------------------------------------------ adversarial neighbours


EXTREMES = (-1e300, -4.0, -1e-300, 0.0, 1e-300, 4.0, 1e300, np.nan)


def test_sketch_counts_move_by_at_most_their_sensitivity_for_any_added_or_removed_row() -> None:
    """Stage 1 of the sketch on clipped rows: one row at any extreme (or missing) changes the counts of all
    features together by at most F' in L1, added or removed."""
    parties, ranges = _parties()
    X = parties[0][0]
    low = np.array([r[0] for r in ranges])
    high = np.array([r[1] for r in ranges])

    def counts(rows: np.ndarray) -> np.ndarray:
        clipped = clip_rows(rows, low, high)
        return np.concatenate([bucket_counts(clipped[:, f], cell_bounds(low[f], high[f])) for f in range(2)])

    base = counts(X)
    worst = 0
    for a in EXTREMES:
        for b in EXTREMES:
            row = np.array([[a, b]])
            worst = max(worst, int(np.abs(counts(np.vstack([X, row])) - base).sum()))
    for i in range(0, X.shape[0], 37):
        worst = max(worst, int(np.abs(counts(np.delete(X, i, axis=0)) - base).sum()))
    assert worst == 2  # F' = 2 features with room for a cut


def test_leaf_sums_move_by_at_most_the_gradient_bounds_for_any_added_row() -> None:
    """A random-split tree's leaf sums before noise: a row added with any label and any score moves the gradient
    sums by at most 1 and the hessian sums by at most 1/4 (the logistic loss's bounds the leaf plan rests on)."""
    rng = np.random.default_rng(5)
    leaves = 4
    leaf = rng.integers(0, leaves, 200)
    scores = rng.normal(0, 3, 200)
    y = rng.integers(0, 2, 200).astype(np.float64)

    def sums(leaf: np.ndarray, scores: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = 1 / (1 + np.exp(-scores))
        return np.bincount(leaf, p - y, minlength=leaves), np.bincount(leaf, p * (1 - p), minlength=leaves)

    g0, h0 = sums(leaf, scores, y)
    for score in (-700.0, -30.0, 0.0, 30.0, 700.0):
        for label in (0.0, 1.0):
            for at in range(leaves):
                g1, h1 = sums(np.append(leaf, at), np.append(scores, score), np.append(y, label))
                assert np.abs(g1 - g0).sum() <= 1.0 + 1e-12 and np.abs(h1 - h0).sum() <= 0.25 + 1e-12


def test_simulates_private_report_keys_are_all_in_the_inventory(tmp_path: Path) -> None:
    """``fgbdt simulate --epsilon``, its LightGBM baselines included: every key listed, no exact count."""
    import json

    from fgbdt_chain.deploy.cli import main

    rng = np.random.default_rng(2)
    X = rng.normal(size=(900, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=900) > 0).astype(int)
    data = tmp_path / "toy.csv"
    rows = [f"{t},{a:.4f},{b:.4f},{c:.4f}" for t, (a, b, c) in zip(y, X, strict=True)]
    data.write_text("label,a,b,c\n" + "\n".join(rows))
    out = tmp_path / "r.json"
    args = ["simulate", "--data", str(data), "--parties", "3", "--trees", "3", "--depth", "2", "--bins", "8"]
    assert main([*args, "--epsilon", "1", "--quiet", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    _check_report(report)
    assert report["privacy"]["noise"] == "entropy" and report["privacy"]["schema"] == "requester's rows"
