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
import statistics
import sys
from typing import Any

from bench.datasets import load
from bench.record import Run, parameters_of
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.task_params import DEFAULT_VOTED_TREES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run

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
    ap.add_argument("--out", help="results file (default bench/results/voted_trees.json, bench.record)")
    args = ap.parse_args()
    record = Run("voted_trees", parameters_of(args), args.out)
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
            record.save({"rows": rows}, complete=False)  # a stopped run keeps what it measured
    record.save({"rows": rows})
    print(tables([{"parameters": record.parameters, "results": {"rows": rows}}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """The last recorded run: a line per data set and task length, every variant's mean ± SE over the seeds."""
    p = runs[-1]["parameters"]
    lines = [
        f"M = {p['parties']}, theta {p['theta']}; test error, AUC for credit; mean ± SE.",
        "",
        "| data | trees, depth | " + " | ".join(label for label, *_ in VARIANTS) + " |",
        "|" + "---|" * (2 + len(VARIANTS)),
    ]
    for r in runs[-1]["results"]["rows"]:
        cells = " | ".join(f"{c['mean']:.4f} ± {c['se']:.4f}" for c in r["results"].values())
        lines.append(f"| {r['dataset']} | {r['trees']}, {r['depth']} | {cells} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
