"""Test error of FV-tree, PV-tree and all-features next to centralized and standalone LightGBM.

Every algorithm of a row runs on the same partition, bins, test set and seed, in the same process.

    python -m bench.accuracy --datasets a9a,higgs,susy --parties 2,4,8 --thetas 0.5,0.8
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.datasets import load
from node.experiment import PrepConfig, prepare, run, standalone_errors
from node.fvtree import TrainParams

FEDERATED = ("fvtree", "pvtree", "allfeatures")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="a9a,higgs,susy")
    ap.add_argument("--parties", default="2,4,8")
    ap.add_argument("--thetas", default="0.5,0.8")
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--binning", default="dp")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/results/accuracy.json")
    args = ap.parse_args()
    params = TrainParams(trees=args.trees, depth=args.depth, bins=args.bins, learning_rate=0.1, lam=0.1)
    rows: list[dict[str, Any]] = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.datasets.split(","):
        train, test = load(name, args.seed)
        for m in map(int, args.parties.split(",")):
            for theta in map(float, args.thetas.split(",")):
                start = time.perf_counter()
                prep = prepare(
                    train, test, params, PrepConfig(parties=m, theta=theta, seed=args.seed, binning=args.binning)
                )
                row: dict[str, Any] = {"dataset": name, "parties": m, "theta": theta}
                central, _, _ = run(prep, "centralized")
                row["centralized"] = central["test_error"]
                row["standalone"] = [s["test_error"] for s in standalone_errors(prep)]
                for algo in FEDERATED:
                    report, _, _ = run(prep, algo)
                    row[algo] = report["test_error"]
                    row[f"{algo}_seconds"] = report["train_seconds"]
                row["seconds"] = time.perf_counter() - start
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                out.write_text(
                    json.dumps({"command": " ".join(sys.argv), "params": vars(args), "rows": rows}, indent=1)
                )
    print(markdown(rows))
    return 0


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| data | M | theta | centralized | FV-tree | PV-tree | all features | standalone (best / worst) "
        "| FV-tree - centralized |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['parties']} | {r['theta']} | {r['centralized']:.4f} | {r['fvtree']:.4f} "
            f"| {r['pvtree']:.4f} | {r['allfeatures']:.4f} | {min(r['standalone']):.4f} / {max(r['standalone']):.4f} "
            f"| {100 * (r['fvtree'] - r['centralized']):+.2f} pt |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
