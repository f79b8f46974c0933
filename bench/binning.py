"""What the private bin edges cost: FV-tree on the mass-following DP edges, on exact quantiles and on the
equal-width sketch, next to LightGBM binning the raw values itself.

Every row of a (data set, seed) pair shares the partition (M parties, skew theta), the train/test split and the
seed; only the edges differ. LightGBM (``node.baselines.centralized.train_own_bins``: its defaults, with the trees,
learning
rate, depth, lambda and minimum rows per leaf matched) trains on all training rows with ``--threads`` threads (1 by
default, as the simulator). Edge quality per feature is the largest share of the feature's present training rows
that falls in one bin; exact quantiles put 1/bins there for a continuous feature. Sketch bytes are what each party
publishes for binning in its join payload.

    python -m bench.binning --datasets a9a,higgs,susy,credit,stress,heavy --seeds 0,1,2,3,4 --jobs 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from bench.datasets import load
from bench.record import Run, parameters_of
from bench.stats import mean_se
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.model.trees import bin_matrix
from fgbdt_chain.node.privacy.binning import exact_edges
from fgbdt_chain.node.sim.experiment import PrepConfig, evaluate, prepare, run

METHODS = ("dp", "exact", "dp-equal-width")
"""The FV-tree rows: the default private edges, the pooled quantiles they are measured against, the old sketch."""
LABELS = {"dp": "DP (mass)", "exact": "exact quantiles", "dp-equal-width": "DP equal-width (old)"}


def max_bin_shares(X: np.ndarray, edges: list[np.ndarray]) -> list[float | None]:
    """Per feature, the largest share of its present rows in one bin (None for a feature without values)."""
    slots = bin_matrix(X, edges)
    out: list[float | None] = []
    for f in range(X.shape[1]):
        present = slots[:, f][slots[:, f] > 0]
        out.append(float(np.bincount(present).max() / present.size) if present.size else None)
    return out


def one_task(task: tuple[str, int, TrainParams, int, float, float, int]) -> dict[str, Any]:
    """Every method on one data set and seed."""
    name, seed, params, parties, theta, epsilon, threads = task
    start = time.perf_counter()
    train, test = load(name, seed)
    row: dict[str, Any] = {
        "dataset": name,
        "seed": seed,
        "rows": train.n_rows,
        "features": train.n_features,
        "feature_names": list(train.feature_names),
    }
    row["exact_share"] = max_bin_shares(train.X, exact_edges(train.X, params.bins))
    for method in METHODS:
        config = PrepConfig(parties=parties, theta=theta, seed=seed, binning=method, binning_epsilon=epsilon)
        prep = prepare(train, test, params, config)
        report, _, _ = run(prep, "fvtree")
        row[method] = {
            "test_auc": report["test_auc"],
            "test_error": report["test_error"],
            "share": max_bin_shares(train.X, prep.edges),
            "edges": [len(e) for e in prep.edges],
            "sketch_bytes": prep.sketch_bytes,
        }
    lgb_start = time.perf_counter()
    booster = baselines.train_own_bins(train.X, train.y, params, threads=threads, seed=seed)
    row["lightgbm"] = {
        **evaluate(params, test.y, np.asarray(booster.predict(test.X), dtype=np.float64)),
        "train_seconds": time.perf_counter() - lgb_start,
    }
    row["seconds"] = time.perf_counter() - start
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="a9a,higgs,susy,credit,stress,heavy")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--binning-epsilon", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1, help="LightGBM threads")
    ap.add_argument("--jobs", type=int, default=1, help="(data set, seed) pairs run in parallel processes")
    ap.add_argument("--out", help="results file (default bench/results/binning.json, bench.record)")
    args = ap.parse_args()
    record = Run("binning", parameters_of(args), args.out)
    params = TrainParams(
        trees=args.trees, depth=args.depth, bins=args.bins, learning_rate=0.1, lam=0.1, voted_trees=ALL_TREES_VOTED
    )
    tasks = [
        (name, seed, params, args.parties, args.theta, args.binning_epsilon, args.threads)
        for name in args.datasets.split(",")
        for seed in map(int, args.seeds.split(","))
    ]
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(one_task, tasks):
            rows.append(row)
            progress = {k: row[k] for k in ("dataset", "seed", "seconds")} | {m: row[m]["test_auc"] for m in METHODS}
            print(json.dumps(progress), file=sys.stderr, flush=True)
            record.save({"rows": rows}, complete=False)  # a stopped run keeps what it measured
    record.save({"rows": rows})
    print(markdown(rows))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of recorded runs of one setting: their rows together (each a data set and seed)."""
    return markdown([row for run in runs for row in run["results"]["rows"]])


def fmt(values: list[float], digits: int = 4) -> str:
    mean, se = mean_se(values)
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def groups(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["dataset"], []).append(row)
    return out


def accuracy_table(rows: list[dict[str, Any]], metric: str) -> str:
    """Per data set: mean ± SE over seeds of every method, and the paired differences that matter."""
    head = " | ".join(LABELS[m] for m in METHODS)
    lines = [
        f"| data | seeds | {head} | LightGBM (own bins) | DP - exact (paired) | DP - LightGBM (paired) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, group in groups(rows).items():
        cells = [fmt([r[m][metric] for r in group]) for m in METHODS]
        lgb = fmt([r["lightgbm"][metric] for r in group])
        d_exact = fmt([r["dp"][metric] - r["exact"][metric] for r in group])
        d_lgb = fmt([r["dp"][metric] - r["lightgbm"][metric] for r in group])
        lines.append(f"| {name} | {len(group)} | {' | '.join(cells)} | {lgb} | {d_exact} | {d_lgb} |")
    return "\n".join(lines)


def quality_table(rows: list[dict[str, Any]]) -> str:
    """Per data set: the largest share of rows in one bin, averaged over features and seeds, its worst feature, and
    the sketch each party publishes."""
    lines = [
        "| data | features | max bin share, mean over features: exact / DP (mass) / DP equal-width "
        "| worst feature, DP - exact (mean over seeds) | sketch bytes per party: DP (mass) / equal-width |",
        "|---|---|---|---|---|",
    ]
    for name, group in groups(rows).items():
        feats = [f for f, s in enumerate(group[0]["exact_share"]) if s is not None]
        mean = {m: statistics.fmean(r[m]["share"][f] for r in group for f in feats) for m in METHODS}
        exact = statistics.fmean(r["exact_share"][f] for r in group for f in feats)
        excess = {f: statistics.fmean(r["dp"]["share"][f] - r["exact_share"][f] for r in group) for f in feats}
        worst = max(excess, key=lambda f: excess[f])
        sketch = {m: statistics.fmean(b for r in group for b in r[m]["sketch_bytes"]) for m in ("dp", "dp-equal-width")}
        lines.append(
            f"| {name} | {len(feats)} | {exact:.3f} / {mean['dp']:.3f} / {mean['dp-equal-width']:.3f} "
            f"| {group[0]['feature_names'][worst]}: {excess[worst]:+.3f} "
            f"| {sketch['dp']:,.0f} / {sketch['dp-equal-width']:,.0f} |"
        )
    return "\n".join(lines)


def feature_table(rows: list[dict[str, Any]], name: str) -> str:
    """One data set's features: the largest share of rows in one bin per method, means over seeds."""
    group = groups(rows)[name]
    lines = ["| feature | exact | DP (mass) | DP equal-width (old) | DP edges |", "|---|---|---|---|---|"]
    for f, feature in enumerate(group[0]["feature_names"]):
        if group[0]["exact_share"][f] is None:
            continue
        exact = statistics.fmean(r["exact_share"][f] for r in group)
        dp = statistics.fmean(r["dp"]["share"][f] for r in group)
        old = statistics.fmean(r["dp-equal-width"]["share"][f] for r in group)
        edges = statistics.fmean(r["dp"]["edges"][f] for r in group)
        lines.append(f"| {feature} | {exact:.3f} | {dp:.3f} | {old:.3f} | {edges:.1f} |")
    return "\n".join(lines)


def markdown(rows: list[dict[str, Any]]) -> str:
    parts = [
        "Test AUC (mean ± SE over seeds; differences paired per seed):",
        "",
        accuracy_table(rows, "test_auc"),
        "",
        "Test error:",
        "",
        accuracy_table(rows, "test_error"),
        "",
        "Edge quality (largest share of a feature's present training rows in one bin; exact quantiles give 1/bins "
        "for a continuous feature, more where one value holds more rows):",
        "",
        quality_table(rows),
    ]
    for name in ("heavy", "stress"):
        if name in groups(rows):
            parts += ["", f"Per feature, {name} (means over seeds):", "", feature_table(rows, name)]
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
