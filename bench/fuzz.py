"""The contract checks at bench size: forge's guard fuzz tests, invariant campaigns and differential tests
(``tests/foundry/``, ``docs/contract-checks.md``) with at least 10,000 runs per property, recorded with provenance.

    python -m bench.fuzz [--runs 10000] [--invariant-runs 100] [--depth 100] [--cases 10000] [--seed 1]

``make test`` runs the same tests at CI size (256 fuzz runs, 32 sequences of 80 calls, 300 differential cases); this
runs them long enough that a property's rare paths are reached: 10,000 fuzz runs per guard test, 10,000 cases per
differential property, and invariant campaigns of ``invariant-runs`` sequences of ``depth`` calls (10,000 calls per
invariant, each followed by every invariant's check). What the random play did (tasks opened, completed, nodes
resolved, guards tried) is summed over the sequences from the handler's summary lines. Exits 1 if any test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.record import Run, parameters_of

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT / "build" / "foundry" / "invariant-summary.txt"
GAS_LIMIT = 2**50
"""Gas per test: far above the 1.3e10 that the largest differential test (`test_top2`, 10,000 cases) was measured to
use, so the limit never decides a bench-size run."""
MEMORY_LIMIT = 2**32
"""EVM memory per test in bytes (forge's default is 128 MiB)."""


def forge() -> str:
    """The native forge binary of the project's npm copy (``@foundry-rs/forge-<platform>``), else forge from PATH: npm's
    ``node_modules/.bin/forge`` wrapper exits 0 whatever forge returns."""
    native = sorted((ROOT / "node_modules" / "@foundry-rs").glob("forge-*/bin/forge"))
    found = str(native[0]) if native else shutil.which("forge")
    if found is None:
        raise SystemExit("forge not found: run `npm ci` (package.json pins @foundry-rs/forge)")
    return found


def run_forge(args: argparse.Namespace) -> tuple[dict[str, Any], float]:
    """``forge test --json`` at the requested sizes; its report and the wall time."""
    env = {
        **os.environ,
        "FOUNDRY_FUZZ_RUNS": str(args.runs),
        "FOUNDRY_FUZZ_SEED": hex(args.seed),
        "FOUNDRY_INVARIANT_RUNS": str(args.invariant_runs),
        "FOUNDRY_INVARIANT_DEPTH": str(args.depth),
        # a differential test decodes all of a property's cases from one ffi answer: 10,000 cases take some 1e10 gas
        # and more EVM memory than forge's defaults (2^30 gas, 128 MiB) allow, which would end the test as out of gas
        "FOUNDRY_GAS_LIMIT": str(GAS_LIMIT),
        "FOUNDRY_MEMORY_LIMIT": str(MEMORY_LIMIT),
        "FGBDT_DIFF_CASES": str(args.cases),
        "FGBDT_DIFF_SEED": str(args.seed),
        "FGBDT_PYTHON": sys.executable,
        "FGBDT_INVARIANT_SUMMARY": str(SUMMARY),
    }
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    SUMMARY.unlink(missing_ok=True)
    start = time.perf_counter()
    done = subprocess.run([forge(), "test", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    try:
        report = json.loads(done.stdout[done.stdout.index("{") :])
    except ValueError:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit("forge test gave no JSON report") from None
    return report, seconds


def tests_of(report: dict[str, Any], cases: int) -> list[dict[str, Any]]:
    """One row per test: its suite, name, kind, how many runs (calls and sequences for an invariant), outcome."""
    rows = []
    for suite, result in sorted(report.items()):
        for name, test in sorted(result["test_results"].items()):
            kind, data = next(iter(test["kind"].items()))
            row = {"suite": suite.split(":")[-1], "test": name.split("(")[0], "kind": kind, "status": test["status"]}
            if kind == "Fuzz":
                row["runs"] = data["runs"]
            elif kind == "Invariant":
                row.update(runs=data["runs"], calls=data["calls"], reverts=data["reverts"])
            else:
                row["runs"] = cases  # a differential test: one run of the contract per case
            if test["status"] != "Success":
                row["reason"] = test.get("reason")
                row["counterexample"] = test.get("counterexample")
            rows.append(row)
    return rows


def activity() -> dict[str, int]:
    """The invariant handler's summary lines (one per sequence), summed."""
    total: Counter[str] = Counter()
    if SUMMARY.exists():
        for line in SUMMARY.read_text().splitlines():
            for item in line.split():
                kind, _, count = item.partition("=")
                total[kind] += int(count)
    return dict(total)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000, help="fuzz runs per guard test")
    ap.add_argument("--invariant-runs", type=int, default=100, help="sequences per invariant campaign")
    ap.add_argument("--depth", type=int, default=100, help="calls per sequence")
    ap.add_argument("--cases", type=int, default=10_000, help="differential cases per property")
    ap.add_argument("--seed", type=int, default=1, help="fuzz seed and differential cases' seed")
    ap.add_argument("--out", help="results file (default bench/results/fuzz.json)")
    args = ap.parse_args(argv)
    run = Run("fuzz", parameters_of(args), out=args.out, argv=argv)
    report, seconds = run_forge(args)
    tests = tests_of(report, args.cases)
    failed = [t for t in tests if t["status"] != "Success"]
    path = run.save({"seconds": round(seconds, 1), "tests": tests, "activity": activity(), "failed": len(failed)})
    for t in tests:
        size = f"{t['calls']} calls in {t['runs']} sequences" if t["kind"] == "Invariant" else f"{t['runs']} runs"
        print(f"{t['status']:8} {t['suite']:18} {t['test']:45} {size}")
    print(f"{len(tests) - len(failed)} of {len(tests)} passed in {seconds:.0f} s; recorded in {path}")
    return 1 if failed else 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of the latest run: every test with its size, and what the invariant campaigns played."""
    result = runs[-1]["results"]
    lines = ["| suite | test | kind | size | outcome |", "|---|---|---|---|---|"]
    for t in result["tests"]:
        kind = {"Fuzz": "fuzz", "Invariant": "invariant", "Unit": "differential"}.get(t["kind"], t["kind"])
        size = (
            f"{t['calls']:,} calls ({t['runs']} sequences)"
            if t["kind"] == "Invariant"
            else f"{t['runs']:,} {'cases' if t['kind'] == 'Unit' else 'runs'}"
        )
        lines.append(f"| {t['suite']} | `{t['test']}` | {kind} | {size} | {t['status'].lower()} |")
    played = result.get("activity") or {}
    if played:
        lines += [
            "",
            "The invariant campaigns' random play, summed over their sequences: "
            + ", ".join(f"{kind} {count:,}" for kind, count in played.items())
            + ".",
        ]
    passed = len(result["tests"]) - result["failed"]
    lines += ["", f"{passed} of {len(result['tests'])} passed in {result['seconds']} s."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
