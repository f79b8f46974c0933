"""Accuracy of the candidate switch: votes for the first trees, drawn candidates afterwards.

Votes learn fast but drift the endorsement statistics as voted trees accumulate (``bench.endorse_drift``); drawn
candidates keep the statistics at their premise but learn slower. This measures the test error of FV-tree voting on
every tree (the paper), on the first ``DEFAULT_VOTED_TREES`` trees only (the default) or 25, on none (``drawn``), and
LightGBM with its own defaults on the same rows and cores, at the task lengths users run: ``fgbdt train``'s default
(20 trees of depth 5), 50 of depth 6 and the paper's 500 of depth 8; M = 4, theta 0.8, mean and SE over seeds.

    python -m bench.voted_trees --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.datasets import load
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.task_params import DEFAULT_VOTED_TREES
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run
from fgbdt_chain.node.sim.fvtree import TrainParams

SETTINGS = ((20, 5), (50, 6), (500, 8))
VARIANTS = (
    ("votes on every tree (the paper)", "fvtree", ALL_TREES_VOTED),
    (f"votes for {DEFAULT_VOTED_TREES} trees, then drawn (default)", "fvtree", DEFAULT_VOTED_TREES),
    ("votes for 25 trees, then drawn", "fvtree", 25),
    ("drawn on every tree", "drawn", 0),
    ("LightGBM, own defaults", "lightgbm", ALL_TREES_VOTED),
)


def measure(name: str, trees: int, depth: int, seed: int, parties: int, theta: float) -> dict[str, float]:
    """Test error (AUC for credit, whose classes are imbalanced) of every variant on one partition."""
    train, test = load(name, seed)
    config = PrepConfig(parties=parties, theta=theta, seed=seed)
    base = prepare(train, test, TrainParams(trees=trees, depth=depth), config)
    out: dict[str, float] = {}
    for label, algo, voted in VARIANTS:  # the same partition, bins and PSDs; only the switch differs
        prep = dataclasses.replace(base, params=dataclasses.replace(base.params, voted_trees=voted))
        report, _, _ = run(prep, algo)
        out[label] = report["test_auc"] if name == "credit" else report["test_error"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="a9a,higgs,susy,credit")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--out", default="bench/results/voted_trees.json")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rows: list[dict[str, Any]] = []
    for name in args.datasets.split(","):
        for trees, depth in SETTINGS:
            runs = [measure(name, trees, depth, s, args.parties, args.theta) for s in seeds]
            cells = {}
            for label, *_ in VARIANTS:
                values = [r[label] for r in runs]
                se = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
                cells[label] = {"mean": statistics.mean(values), "se": se, "values": values}
            rows.append({"dataset": name, "trees": trees, "depth": depth, "results": cells})
            print(name, trees, depth, {k: round(v["mean"], 4) for k, v in cells.items()}, flush=True)
    command = "python -m bench.voted_trees " + " ".join(sys.argv[1:])
    out = Path(args.out)
    out.write_text(json.dumps({"command": command, "settings": vars(args), "rows": rows}, indent=1))
    head = "| data | trees, depth | " + " | ".join(label for label, *_ in VARIANTS) + " |"
    what = f"M = {args.parties}, theta {args.theta}; test error, AUC for credit; mean ± SE"
    lines = [f"Command: `{command}` ({what})", ""]
    lines += [head, "|" + "---|" * (2 + len(VARIANTS))]
    for r in rows:
        cells = " | ".join(f"{c['mean']:.4f} ± {c['se']:.4f}" for c in r["results"].values())
        lines.append(f"| {r['dataset']} | {r['trees']}, {r['depth']} | {cells} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
