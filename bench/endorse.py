"""Calibrate the endorsement threshold (NOTES 8): overlap of honest and inflated histograms as verifiers see them.

Trains FV-tree in simulation and, at every level, lets every party check every other party's candidate histograms
the way its endorsement server does (``node.verify``). Reports, per threshold, the share of single checks that
would be signed and the share of histogram submissions that would reach the quorum of ceil(2(M-1)/3) signatures,
for honest histograms and for gradients x1.5, x2, gradients and counts x2, and a sign flip.

    python -m bench.endorse --data a9a --parties 4 --theta 0.8 --trees 50 --depth 8
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Any

import numpy as np

from bench.datasets import load
from node.experiment import PrepConfig, prepare
from node.fvtree import Federation, LevelView, TrainParams
from node.messages import endorsement_quorum
from node.verify import estimate_histograms, level_overlap

ATTACKS: dict[str, tuple[float, float]] = {  # (gradient factor, count factor)
    "honest": (1.0, 1.0),
    "g x1.5": (1.5, 1.0),
    "g x2": (2.0, 1.0),
    "g,n x2": (2.0, 2.0),
    "sign flip": (-1.0, 1.0),
}
THRESHOLDS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/results/endorse.json")
    ap.add_argument("--no-label-first", action="store_true", help="PSDs split a random dimension at the root")
    args = ap.parse_args()
    train, test = load(args.data, args.seed)
    params = TrainParams(trees=args.trees, depth=args.depth)
    prep = prepare(
        train,
        test,
        params,
        PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed, psd_label_first=not args.no_label_first),
    )
    weights, matrices = prep.weights(), prep.matrices()
    m = args.parties
    # overlaps[attack][(tree, level, party)] = list over verifiers
    overlaps: dict[str, dict[tuple[int, int, int], list[float]]] = defaultdict(lambda: defaultdict(list))

    def observe(view: LevelView) -> None:
        cands = np.asarray(view.candidates, dtype=np.int64)
        k = cands.shape[0]
        for j in range(m):
            for p in range(m):
                if p == j:
                    continue
                claimed_g, _, claimed_n = view.sums[p]
                est_g, est_n = estimate_histograms(
                    fed.parties[j].rows, view.k_of_row[j], k, cands, view.g[j], matrices[j][:, p]
                )
                for name, (fg, fn) in ATTACKS.items():
                    value = level_overlap(claimed_g * fg, claimed_n * fn, est_g, est_n)
                    overlaps[name][(view.tree, view.level, p)].append(value)

    fed = Federation(prep.party_slots(), prep.party_y(), params, algo="fvtree", party_weights=weights)
    fed.level_observer = observe
    fed.train()
    quorum = endorsement_quorum(m)
    table: dict[str, Any] = {}
    for name, per_submission in overlaps.items():
        checks = np.array([v for vs in per_submission.values() for v in vs])
        table[name] = {
            "checks": int(checks.size),
            "overlap_quantiles": {q: float(np.quantile(checks, q)) for q in (0.01, 0.5, 0.99, 0.999)},
            "signed": {t: float(np.mean(checks < t)) for t in THRESHOLDS},
            "quorum": {
                t: float(np.mean([sum(v < t for v in vs) >= quorum for vs in per_submission.values()]))
                for t in THRESHOLDS
            },
        }
    with open(args.out, "w") as f:
        json.dump({"command": "python -m bench.endorse " + " ".join(sys.argv[1:]), "table": table}, f, indent=1)
    print(
        f"share of level submissions reaching the quorum ({quorum} of {m - 1} verifiers), by threshold "
        f"({args.data}, M={m}, theta={args.theta}, {args.trees} trees, depth {args.depth})\n"
    )
    print("| histograms | median overlap | " + " | ".join(f"t={t}" for t in THRESHOLDS) + " |")
    print("|---|---|" + "---|" * len(THRESHOLDS))
    for name, row in table.items():
        cells = " | ".join(f"{100 * row['quorum'][t]:.1f}%" for t in THRESHOLDS)
        print(f"| {name} | {row['overlap_quantiles'][0.5]:.3f} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
