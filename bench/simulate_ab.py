"""``simulate``'s train time and test metrics for this checkout and an earlier commit, paired by data set and seed.

A change to the training code is measured against the code before it in the same session (``bench.worktree``): for
every data set and seed, ``python -m bench.speed --runs fvtree`` runs in the earlier commit's tree and then in this
one, so each pair shares the machine's state of the moment. Reported: the train time of each side with its mean and
standard error over the pairs, the paired time ratio, and per data set the paired differences of test error and AUC
(this checkout minus the earlier one), mean and standard error over the seeds. A change meant to leave the model as
it was shows differences of exactly 0.

    python -m bench.simulate_ab --base HEAD~1 --datasets a9a,credit --seeds 0-4   # bench/results/simulate_ab.json
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.record import Run, latest_results
from bench.stats import mean_se, seeds_of
from bench.worktree import ROOT, checkout, short_commit


def _one(where: Path, data: str, seed: int, speed_args: list[str], tmp: Path) -> dict[str, Any]:
    out = tmp / f"{where.name}_{data}_{seed}.json"
    cmd = [sys.executable, "-m", "bench.speed", "--data", data, "--seed", str(seed), "--runs", "fvtree"]
    subprocess.run([*cmd, *speed_args, "--out", str(out)], cwd=where, check=True, capture_output=True)
    doc = latest_results(out)  # the earlier commit's bench.speed may predate bench.record's format
    result: dict[str, Any] = (doc.get("measurements") or doc["results"])[0]
    if result.get("test_auc") is None:
        raise SystemExit(f"{where}: bench.speed reports no test AUC (a binary task, from a commit that reports it)")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the earlier commit (anything git rev-parse takes)")
    ap.add_argument("--datasets", default="a9a,credit,higgs,susy,stress,heavy")
    ap.add_argument("--seeds", default="0-2", help="first-last or a comma-separated list")
    ap.add_argument("--out", help="results file (default bench/results/simulate_ab.json, bench.record)")
    ap.add_argument("speed_args", nargs=argparse.REMAINDER, help="after --: more of bench.speed's arguments")
    args = ap.parse_args()
    speed_args = [a for a in args.speed_args if a != "--"]
    base, head = short_commit(args.base), short_commit("HEAD")
    record = Run(
        "simulate_ab",
        {"base": base, "datasets": args.datasets, "seeds": args.seeds, "speed_args": speed_args},
        args.out,
    )
    pairs: list[dict[str, Any]] = []
    with checkout(base) as tree, tempfile.TemporaryDirectory(prefix="fgbdt-simab-") as tmp:
        for data in args.datasets.split(","):
            for seed in seeds_of(args.seeds):
                before = _one(tree, data, seed, speed_args, Path(tmp))
                after = _one(ROOT, data, seed, speed_args, Path(tmp))
                pairs.append({"data": data, "seed": seed, "base": before, "head": after})
                print(
                    f"{data} seed {seed}: {before['train_seconds']:.2f} -> {after['train_seconds']:.2f} s, "
                    f"error {before['test_error']:.4f} -> {after['test_error']:.4f}",
                    flush=True,
                )
    results = {"head_commit": head, "base_commit": base, "summary": _summary(pairs), "pairs": pairs}
    record.save(results)
    print(tables([{"parameters": record.parameters, "results": results}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """The last recorded comparison: train time of each side and, per data set, the paired metric differences."""
    r = runs[-1]["results"]
    summary = r["summary"]
    lines = [
        f"This checkout ({r['head_commit']}) against {r['base_commit']}, {len(r['pairs'])} pairs: train s, base "
        f"{summary['base_seconds'][0]:.2f} ± {summary['base_seconds'][1]:.2f}, head "
        f"{summary['head_seconds'][0]:.2f} ± {summary['head_seconds'][1]:.2f}; paired ratio head/base "
        f"{summary['ratio'][0]:.3f} ± {summary['ratio'][1]:.3f}",
        "",
        "| data | seeds | test error, head - base | AUC, head - base | identical metrics |",
        "|---|---|---|---|---|",
    ]
    for data, d in summary["per_data"].items():
        lines.append(
            f"| {data} | {d['seeds']} | {d['error_diff'][0]:+.4f} ± {d['error_diff'][1]:.4f} | "
            f"{d['auc_diff'][0]:+.4f} ± {d['auc_diff'][1]:.4f} | {d['identical']}/{d['seeds']} |"
        )
    return "\n".join(lines)


def _summary(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    per_data: dict[str, Any] = {}
    for data in dict.fromkeys(p["data"] for p in pairs):
        mine = [p for p in pairs if p["data"] == data]
        per_data[data] = {
            "seeds": len(mine),
            "error_diff": mean_se(p["head"]["test_error"] - p["base"]["test_error"] for p in mine),
            "auc_diff": mean_se(p["head"]["test_auc"] - p["base"]["test_auc"] for p in mine),
            "identical": sum(
                (p["head"]["test_error"], p["head"]["test_auc"]) == (p["base"]["test_error"], p["base"]["test_auc"])
                for p in mine
            ),
        }
    return {
        "base_seconds": mean_se(p["base"]["train_seconds"] for p in pairs),
        "head_seconds": mean_se(p["head"]["train_seconds"] for p in pairs),
        "ratio": mean_se(p["head"]["train_seconds"] / p["base"]["train_seconds"] for p in pairs),
        "per_data": per_data,
    }


if __name__ == "__main__":
    sys.exit(main())
