"""Train time and peak memory of FV-tree (simulate) next to centralized LightGBM on the same rows and bins.

Each measurement runs in its own process so that peak memory (ru_maxrss) belongs to that run alone.

    python -m bench.speed --data a9a --parties 4 --theta 0.8 --trees 500 --depth 8
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

from bench.datasets import load
from fgbdt_chain.ledger.reference import ALL_TREES_VOTED
from fgbdt_chain.node.experiment import PrepConfig, prepare, run
from fgbdt_chain.node.fvtree import TrainParams
from fgbdt_chain.node.histogram import warm_up
from fgbdt_chain.node.shapley_cost import slow_shapley_message


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def one(args: argparse.Namespace) -> dict[str, Any]:
    train, test = load(args.data, args.seed)
    params = TrainParams(trees=args.trees, depth=args.depth, bins=args.bins, voted_trees=args.voted_trees)
    prep = prepare(train, test, params, PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed))
    if args.one == "fvtree":
        prep.weights()  # PSDs and w*, once per task: reported apart from training
    jit = time.perf_counter()
    warm_up()
    jit = time.perf_counter() - jit
    before = rss_mb()
    start = time.perf_counter()
    if args.one.startswith("lightgbm"):
        threads = int(args.one.split("-")[1])
        report, _, result = run(prep, "centralized", threads=threads)
        phases: dict[str, float] = {}
    else:
        report, _, result = run(prep, args.one)
        phases = result.seconds if result else {}
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "run": args.one,
        "train_seconds": report["train_seconds"],
        "wall_seconds": wall,
        "prep_seconds": prep.prep_seconds,
        "jit_load_seconds": jit,
        "test_error": report["test_error"],
        "test_auc": report.get("test_auc"),
        "rss_before_mb": before,
        "peak_rss_mb": peak,
        "phases": phases,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--voted-trees",
        type=int,
        default=ALL_TREES_VOTED,
        help="trees that vote before the candidates are drawn (default: all, the paper's FV-tree; tasks: 25)",
    )
    ap.add_argument("--runs", default="fvtree,lightgbm-1,lightgbm-2")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="bench/results/speed.json")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return 0
    slow = slow_shapley_message(args.parties, args.trees, args.depth)
    if slow and any(not r.startswith("lightgbm") for r in args.runs.split(",")):
        # what ``simulate`` and ``train`` say before such a run (16 parties at 200 trees of depth 6 ran for over
        # 17 minutes here without a word)
        print(f"warning: {slow}", file=sys.stderr, flush=True)
    results = []
    for name in args.runs.split(","):
        cmd = [sys.executable, "-m", "bench.speed", *sys.argv[1:], "--one", name]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        json.dump({"command": "python -m bench.speed " + " ".join(sys.argv[1:]), "results": results}, f, indent=1)
    base = {r["run"]: r for r in results}
    print("| run | train s | ratio to LightGBM (1 thread) | peak RSS MiB | test error |")
    print("|---|---|---|---|---|")
    ref = base.get("lightgbm-1", results[-1])["train_seconds"]
    for r in results:
        print(
            f"| {r['run']} | {r['train_seconds']:.2f} | {r['train_seconds'] / ref:.1f}x | {r['peak_rss_mb']:.0f} "
            f"| {r['test_error']:.4f} |"
        )
    for r in results:
        if r["phases"]:
            print(
                f"\nwhere {r['run']}'s {r['train_seconds']:.2f} s go (PSD and weights before training: "
                f"{r['prep_seconds']:.2f} s):"
            )
            for phase, sec in sorted(r["phases"].items(), key=lambda kv: -kv[1]):
                print(f"- {phase}: {sec:.2f} s ({100 * sec / r['train_seconds']:.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
