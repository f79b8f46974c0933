"""Bytes each party sends per tree as the training rows grow, next to the paper's formula (section 7.1.2).

python -m bench.comm --fractions 0.25,0.5,1.0 --trees 50
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from bench.datasets import load
from bench.record import Run, parameters_of
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED, endorsement_quorum
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.protocol.messages import SIGNATURE, WORD, level_traffic
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run


def paper_formula(depth: int, parties: int, nbins: int) -> float:
    """(2^(d-1) - 1) [(4M - 3) N_bin + (7/3 M - 1) L_sign] bytes per tree, with the paper's d = depth + 1 (it counts
    the leaf level), N_bin = one candidate histogram of nbins slots of (g, h, n) words, L_sign = 65."""
    n_bin = nbins * 3 * WORD
    return (2**depth - 1) * ((4 * parties - 3) * n_bin + (7 / 3 * parties - 1) * SIGNATURE)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--fractions", default="0.25,0.5,1.0")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="results file (default bench/results/comm.json, bench.record)")
    args = ap.parse_args()
    record = Run("comm", parameters_of(args), args.out)
    train, test = load(args.data, args.seed)
    params = TrainParams(trees=args.trees, depth=args.depth, bins=args.bins, voted_trees=ALL_TREES_VOTED)
    rows = []
    for frac in map(float, args.fractions.split(",")):
        keep = np.sort(np.random.default_rng(args.seed).permutation(train.n_rows)[: round(frac * train.n_rows)])
        prep = prepare(
            train.subset(keep), test, params, PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed)
        )
        report, _, trained = run(prep, "fvtree")
        assert trained is not None
        splits = sum(1 for t in trained.trees for node in t.nodes.values() if not node.is_leaf) / args.trees
        # a node is open (voted on, histograms sent) when it sits above the last level, split or not
        opened = sum(1 for t in trained.trees for i in t.nodes if i.bit_length() - 1 < args.depth) / args.trees
        per_tree = report["comm_bytes_per_party_per_tree"]
        rows.append(
            {
                "split_nodes_per_tree": splits,
                "open_nodes_per_tree": opened,
                "fraction": frac,
                "rows": len(keep),
                "bytes_per_party_per_tree": per_tree,
                "setup_bytes_per_party": report["setup_bytes_per_party"],
                "test_error": report["test_error"],
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    formula = paper_formula(args.depth, args.parties, params.nbins)
    quorum = endorsement_quorum(args.parties)
    bound = sum(level_traffic(2**lvl, 2, params.nbins, args.parties, quorum).total for lvl in range(args.depth))
    result = {
        "rows": rows,
        "paper_formula_bytes_per_tree": formula,
        "full_tree_bytes_per_party": bound,
        "depth": args.depth,
    }
    record.save(result)
    print(tables([{"parameters": record.parameters, "results": result}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of a recorded run (the bytes are deterministic: the last run says it all)."""
    result = runs[-1]["results"]
    lines = [
        "| training rows | KiB sent per party per tree (mean / max over parties) | split nodes per tree "
        "| open nodes per tree | KiB per open node | setup KiB per party (once) |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        b = r["bytes_per_party_per_tree"]
        opened = r["open_nodes_per_tree"]
        lines.append(
            f"| {r['rows']} ({100 * r['fraction']:.0f}%) | {np.mean(b) / 1024:.1f} / {max(b) / 1024:.1f} "
            f"| {r['split_nodes_per_tree']:.1f} | {opened:.1f} | {np.mean(b) / 1024 / opened:.2f} "
            f"| {np.mean(r['setup_bytes_per_party']) / 1024:.1f} |"
        )
    splits = 2 ** result["depth"] - 1
    bound, formula = result["full_tree_bytes_per_party"] / 1024, result["paper_formula_bytes_per_tree"] / 1024
    lines += [
        "",
        f"A full tree ({splits} splits), any rows: {bound:.1f} KiB sent per party per tree; the paper's formula (full "
        f"trees, sent and received): {formula:.1f} KiB per party per tree.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
