"""The default shape of a task (``ledger.spec.parameters.DEFAULT_TREES`` x ``DEFAULT_DEPTH``) against the paper's
500 x 8, next to LightGBM exactly as a user would run it (``lightgbm-defaults``: 100 rounds of 31 leaves, nothing
matched).

Every row of a data set and seed shares the partition (M = 4, theta 0.8), the private bins and the test set; only
the trees and depth differ. The question it answers: which shape a user gets without flags, measured on every data
set here rather than chosen on one.

    python -m bench.default_shape --seeds 0,1,2 --jobs 1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from bench.datasets import load
from bench.datasets import objective as dataset_objective
from bench.record import Run, parameters_of
from bench.stats import mean_se
from fgbdt_chain.ledger.spec.parameters import DEFAULT_DEPTH, DEFAULT_TREES, PAPER_DEPTH, PAPER_TREES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run

DATASETS = ("a9a", "higgs", "susy", "credit", "stress", "heavy", "abalone", "cpusmall", "claims")
"""Every data set here, each trained with its own loss (``bench.datasets.objective``)."""
SHAPES = {"paper": (PAPER_TREES, PAPER_DEPTH), "default": (DEFAULT_TREES, DEFAULT_DEPTH)}


def metric_of(objective: str) -> str:
    return "test_auc" if objective == "binary" else "test_rmse"


def one_task(task: tuple[str, int]) -> dict[str, Any]:
    name, seed = task
    start = time.perf_counter()
    objective = dataset_objective(name)
    metric = metric_of(objective)
    train, test = load(name, seed)
    row: dict[str, Any] = {"dataset": name, "seed": seed, "metric": metric}
    for shape, (trees, depth) in SHAPES.items():
        params = TrainParams(trees=trees, depth=depth, objective=objective)  # type: ignore[arg-type]
        prep = prepare(train, test, params, PrepConfig(parties=4, theta=0.8, seed=seed))
        report, _, _ = run(prep, "fvtree")
        row[shape] = report[metric]
        row[f"{shape}_train_seconds"] = report["train_seconds"]
        if shape == "default":
            lgb, _, _ = run(prep, "lightgbm-defaults")
            row["lightgbm_defaults"] = lgb[metric]
    row["seconds"] = time.perf_counter() - start
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    out = [
        f"| data (metric) | FV-tree {PAPER_TREES} x {PAPER_DEPTH} (paper) | FV-tree {DEFAULT_TREES} x {DEFAULT_DEPTH} "
        "(default) | LightGBM, its defaults | paper - LightGBM | default - LightGBM | train time, paper / default "
        "| seeds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in DATASETS:
        group = [r for r in rows if r["dataset"] == name]
        if not group:
            continue

        def fmt(values: list[float]) -> str:
            mean, se = mean_se(values)
            return f"{mean:.4f} ± {se:.4f}"

        lgb = [r["lightgbm_defaults"] for r in group]
        cells = [fmt([r["paper"] for r in group]), fmt([r["default"] for r in group]), fmt(lgb)]
        cells += [fmt([r[s] - r["lightgbm_defaults"] for r in group]) for s in ("paper", "default")]
        metric = group[0]["metric"].replace("test_", "")
        speedup = sum(r["paper_train_seconds"] for r in group) / sum(r["default_train_seconds"] for r in group)
        out.append(f"| {name} ({metric}) | " + " | ".join(cells) + f" | {speedup:.1f}x | {len(group)} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", help="results file (default bench/results/default_shape.json, bench.record)")
    args = ap.parse_args()
    names = args.datasets.split(",")
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        ap.error(f"unknown data set(s) {', '.join(unknown)}; choose from {', '.join(DATASETS)}")
    tasks = [(n, int(s)) for n in names for s in args.seeds.split(",")]
    record = Run("default_shape", parameters_of(args), args.out)
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(one_task, tasks):
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            record.save({"rows": rows}, complete=False)  # a stopped run keeps what it measured
    record.save({"rows": rows})
    print(markdown(rows))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of recorded runs of one setting: their rows together (each a data set and seed)."""
    return markdown([row for run in runs for row in run["results"]["rows"]])


if __name__ == "__main__":
    raise SystemExit(main())
