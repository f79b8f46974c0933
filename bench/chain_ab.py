"""``bench.chain`` for this checkout and an earlier commit, alternating, with the mean and standard error of each.

One run on chain is an anecdote: the machine's speed drifts by 10-20% within an hour here (``simulate`` took 0.83 to
1.15 s for the same work in one session), so a change is measured against the code before it in the same session,
the two runs interleaved. The earlier commit is checked out beside this one (``bench.worktree``); each run is
``python -m bench.chain`` in its own process, in the tree it measures.

    python -m bench.chain_ab --base HEAD~1 --runs 3 -- --trees 50 --depth 6

Each run's own result is kept in the summary (``bench/results/chain_ab.json``, ``bench.record``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.record import Run, latest_results
from bench.stats import mean_se
from bench.worktree import ROOT, checkout, short_commit


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the earlier commit (anything git rev-parse takes)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each side, alternating")
    ap.add_argument("--out", help="results file (default bench/results/chain_ab.json, bench.record)")
    ap.add_argument("chain_args", nargs=argparse.REMAINDER, help="after --: bench.chain's arguments")
    args = ap.parse_args()
    chain_args = [a for a in args.chain_args if a != "--"]
    if any(a == "--out" or a.startswith("--out=") for a in chain_args):
        ap.error("--out is this script's: each run's own file is written beside the summary")
    base = short_commit(args.base)
    head = short_commit("HEAD")
    record = Run("chain_ab", {"base": base, "runs": args.runs, "chain_args": chain_args}, args.out)
    with checkout(base) as tree, tempfile.TemporaryDirectory(prefix="fgbdt-chain-ab-") as tmp:
        runs: dict[str, list[dict[str, Any]]] = {"head": [], "base": []}
        head_args, base_args = _side_args(chain_args, tree)
        for i in range(1, args.runs + 1):
            for side, where in (("base", tree), ("head", ROOT)):
                result = Path(tmp) / f"{side}-{i}.json"
                side_args = head_args if side == "head" else base_args
                cmd = [sys.executable, "-m", "bench.chain", *side_args, "--out", str(result)]
                subprocess.run(cmd, cwd=where, check=True, stdout=subprocess.DEVNULL)
                done = latest_results(result)  # an earlier commit's bench.chain may write one run, unrepeated
                runs[side] += done.get("repetitions", [done])
                r = runs[side][-1]
                wall, ratio = _with_load(r)
                print(
                    f"{side} run {i}: {r['chain_wall_seconds']:.2f} s, {r['ratio']:.2f}x; with the parties' loading "
                    f"{wall:.2f} s, {ratio:.2f}x",
                    flush=True,
                )
    summary: dict[str, Any] = {
        "head_commit": head,
        "base_commit": base,
        **{side: _summary(rs) for side, rs in runs.items()},
        "runs": runs,
    }
    record.save(summary)
    print(tables([{"parameters": record.parameters, "results": summary}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """The last recorded comparison, a line per side."""
    summary = runs[-1]["results"]
    lines = []
    for side in ("head", "base"):
        s = summary[side]
        lines.append(
            f"- {side} ({summary[f'{side}_commit']}): ratio {s['ratio_mean']:.2f}x ± {s['ratio_se']:.2f}, wall "
            f"{s['wall_mean']:.2f} ± {s['wall_se']:.2f} s; with the parties' loading {s['ratio_with_load_mean']:.2f}x "
            f"± {s['ratio_with_load_se']:.2f}, {s['wall_with_load_mean']:.2f} ± {s['wall_with_load_se']:.2f} s; "
            f"identical models {s['identical']}/{s['runs']} (mean ± standard error over the runs)"
        )
    return "\n".join(lines)


def _with_load(r: dict[str, Any]) -> tuple[float, float]:
    """A run's wall time and ratio with the parties' loading counted: a cold run (``--cold``, and every bench from
    before ``party_load_seconds``) started its clock before the loading, so its own figures count it already."""
    if r.get("load_on_clock", True):
        return r["chain_wall_seconds"], r["ratio"]
    return r["chain_wall_seconds"] + r["party_load_seconds"], r["ratio_with_load"]


def _side_args(chain_args: list[str], tree: Path) -> tuple[list[str], list[str]]:
    """bench.chain's arguments for the head and the base. A base whose bench predates ``--cold`` always ran cold:
    it is not given the option, and the head runs cold too, so that the two are timed alike."""
    if "--cold" in (tree / "bench" / "chain.py").read_text():
        return chain_args, chain_args
    base = [a for a in chain_args if a != "--cold"]
    return [*base, "--cold"], base


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ratio, ratio_se = mean_se(r["ratio"] for r in runs)
    wall, wall_se = mean_se(r["chain_wall_seconds"] for r in runs)
    loaded = [_with_load(r) for r in runs]
    wall_load, wall_load_se = mean_se(w for w, _ in loaded)
    ratio_load, ratio_load_se = mean_se(x for _, x in loaded)
    return {
        "runs": len(runs),
        "ratio_mean": ratio,
        "ratio_se": ratio_se,
        "wall_mean": wall,
        "wall_se": wall_se,
        "ratios": [r["ratio"] for r in runs],
        "walls": [r["chain_wall_seconds"] for r in runs],
        "wall_with_load_mean": wall_load,
        "wall_with_load_se": wall_load_se,
        "ratio_with_load_mean": ratio_load,
        "ratio_with_load_se": ratio_load_se,
        "identical": sum(bool(r["models_identical"]) for r in runs),
        "cpu_seconds": [r["cpu_seconds"] for r in runs],
    }


if __name__ == "__main__":
    sys.exit(main())
