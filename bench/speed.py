"""Train time and peak memory of FV-tree (simulate) next to centralized LightGBM on the same rows and bins.

Each measurement runs in its own process so that peak memory (ru_maxrss) belongs to that run alone.

    python -m bench.speed --data a9a --parties 4 --theta 0.8 --trees 500 --depth 8

``--repeat N`` runs the list N times, interleaved (fvtree, lightgbm-1, lightgbm-2, fvtree, ...), and reports each
run's mean and standard error and each run's ratio to LightGBM paired within a repetition: the same work took
3.7-4.0 s one day and 2.5-3.0 s another on this machine, so one pair of processes is an anecdote.
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
from bench.record import Run, parameters_of
from bench.stats import mean_se
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.protocol.shapley_cost import slow_shapley_message
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run
from fgbdt_chain.node.sim.warmup import warm_up


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
    ap.add_argument("--repeat", type=int, default=1, help="times to run the list, interleaved (default 1)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--out", help="results file (default bench/results/speed.json, bench.record)")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return 0
    # --repeat only says how many times: runs of one setting on one code pool their repetitions (bench.record)
    run_record = Run("speed", parameters_of(args, drop=("one", "repeat")), args.out)
    slow = slow_shapley_message(args.parties, args.trees, args.depth)
    if slow and any(not r.startswith("lightgbm") for r in args.runs.split(",")):
        # what ``simulate`` and ``train`` say before such a run (16 parties at 200 trees of depth 6 ran for over
        # 17 minutes here without a word)
        print(f"warning: {slow}", file=sys.stderr, flush=True)
    if args.repeat < 1:
        raise SystemExit(f"--repeat must be at least 1, got {args.repeat}")
    names = args.runs.split(",")
    results = []
    for rep in range(args.repeat):
        for name in names:
            cmd = [sys.executable, "-m", "bench.speed", *sys.argv[1:], "--one", name]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results.append({**json.loads(out.strip().splitlines()[-1]), "repeat": rep})
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    run_record.save({"measurements": results, "summary": summarise(results, names)})
    print(tables([{"parameters": run_record.parameters, "results": {"measurements": results}}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of recorded runs of one setting: every repetition of every run pooled (each run's repetitions are
    paired within the run), then where the FV-tree's time goes in its last repetition."""
    pooled = [{**m, "repeat": (i, m["repeat"])} for i, run in enumerate(runs) for m in run["results"]["measurements"]]
    names = list(dict.fromkeys(m["run"] for m in pooled))
    summary = summarise(pooled, names)
    reps = len({m["repeat"] for m in pooled})
    lines = [
        f"| run | train s (mean ± SE over {reps}) | ratio to LightGBM, 1 thread | to LightGBM, 2 threads "
        "| peak RSS MiB | test error |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in summary.items():
        ratios = [
            f"{row[key][0]:.2f}x ± {row[key][1]:.2f}" if key in row else "-"
            for key in ("ratio_to_lightgbm-1", "ratio_to_lightgbm-2")
        ]
        lines.append(
            f"| {name} | {row['train_seconds'][0]:.2f} ± {row['train_seconds'][1]:.2f} | {ratios[0]} | {ratios[1]} "
            f"| {row['peak_rss_mb']:.0f} | {row['test_error']:.4f} |"
        )
    last = [m for m in pooled if m["phases"]][-1:]
    for m in last:
        lines += [
            "",
            f"Where {m['run']}'s {m['train_seconds']:.2f} s go in its last repetition (PSD and weights before "
            f"training: {m['prep_seconds']:.2f} s):",
            "",
        ]
        for phase, sec in sorted(m["phases"].items(), key=lambda kv: -kv[1]):
            lines.append(f"- {phase}: {sec:.2f} s ({100 * sec / m['train_seconds']:.0f}%)")
    return "\n".join(lines)


def summarise(results: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """Per run: train seconds as (mean, standard error) over the repetitions, the ratio to each LightGBM run paired
    within a repetition (the machine's speed drifts between repetitions more than within one), the largest peak
    memory and the test error (which must not vary: the runs are deterministic)."""
    by = {(r["run"], r["repeat"]): r for r in results}  # a repeat is any key: tables() pools runs as (run, repeat)
    repeats = sorted({r["repeat"] for r in results})
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        mine = [by[name, rep] for rep in repeats]
        errors = {r["test_error"] for r in mine}
        if len(errors) > 1:
            raise SystemExit(f"{name}: the test error changed between repetitions ({sorted(errors)})")
        row: dict[str, Any] = {
            "train_seconds": mean_se(r["train_seconds"] for r in mine),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in mine),
            "test_error": mine[0]["test_error"],
        }
        for base in ("lightgbm-1", "lightgbm-2"):
            if base in names and base != name:
                row[f"ratio_to_{base}"] = mean_se(
                    by[name, rep]["train_seconds"] / by[base, rep]["train_seconds"] for rep in repeats
                )
        out[name] = row
    return out


if __name__ == "__main__":
    sys.exit(main())
