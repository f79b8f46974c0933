"""Where ``simulate``'s floor is: its compiled kernels' time against everything else, on one thread, next to
LightGBM as a user runs it (``bench.speed.user_lightgbm``) on the same rows and thread.

The train time on one thread is the kernels' time plus the Python that drives them. The kernels are what numba's
dispatchers run (their own time under cProfile, which does not slow compiled code down); the rest is the per-level
Python (the contract side's records, the verifiers' decisions, the hand-overs). On ``threads`` cores the kernels
can at best divide by that many, the Python cannot, so ``kernels / threads + rest`` is what the design allows and
``kernels / threads`` what a fully compiled level would. Every time is CPU time (``time.process_time``, also
cProfile's clock here): on a machine shared with other work the wall time of one thread is its CPU time plus the
time it waits for a core, which varies from run to run more than the code's cost. Each kernel is the work one
obligation of the protocol sets (the parties' votes on all features, the exact candidate sums, the partitions,
the verifiers' statistics, the contract's resolution and split Shapley), so its time against LightGBM's whole
training says what that obligation costs.

    python -m bench.simulate_floor   # bench/results/simulate_floor.json (bench.record)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from typing import Any

import numpy as np
from numba.core.registry import CPUDispatcher

from bench.datasets import load
from bench.datasets import objective as dataset_objective
from bench.record import Run, parameters_of
from bench.speed import user_lightgbm
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.kernels import (
    histogram,
    logistic_rows,
    party_kernels,
    resolve_kernel,
    shapley_kernel,
    vote_histograms,
)
from fgbdt_chain.node.model import objective
from fgbdt_chain.node.protocol import resolve, verify
from fgbdt_chain.node.sim import fvtree
from fgbdt_chain.node.sim.experiment import PrepConfig, federation, prepare
from fgbdt_chain.node.sim.warmup import warm_up


def _kernels() -> set[tuple[str, int, str]]:
    """cProfile's keys (file, first line, name) of every numba kernel the simulator calls."""
    out = set()
    kernels = (histogram, party_kernels, logistic_rows, vote_histograms, resolve_kernel, shapley_kernel)
    for module in (*kernels, verify, resolve, objective, fvtree):
        for obj in vars(module).values():
            if isinstance(obj, CPUDispatcher):
                code = obj.py_func.__code__
                out.add((code.co_filename, code.co_firstlineno, code.co_name))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="results file (default bench/results/simulate_floor.json, bench.record)")
    args = ap.parse_args()
    record = Run("simulate_floor", parameters_of(args), args.out)
    train, test = load(args.data, args.seed)
    params = TrainParams(
        trees=args.trees,
        depth=args.depth,
        bins=16,
        voted_trees=ALL_TREES_VOTED,
        objective=dataset_objective(args.data),  # type: ignore[arg-type]
    )
    prep = prepare(train, test, params, PrepConfig(parties=args.parties, theta=0.8, seed=args.seed))
    prep.weights()
    warm_up()
    start = time.process_time()
    federation(prep, "fvtree", threads=1).train()
    one_thread = time.process_time() - start
    rows = np.sort(np.concatenate(prep.parts))  # the federation's training rows, as bench.speed gives LightGBM
    _, lightgbm, _ = user_lightgbm(prep.train.subset(rows), prep.test, prep.params, args.seed, threads=1)
    profile = cProfile.Profile(time.process_time)
    fed = federation(prep, "fvtree", threads=1)
    profile.enable()
    fed.train()
    profile.disable()
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    kernels = _kernels()
    own = {key[2]: value[2] for key, value in stats.items() if key in kernels and value[2] > 0}
    total = sum(own.values())
    report = {
        "one_thread_seconds": one_thread,
        "kernel_seconds": total,
        "rest_seconds": one_thread - total,
        "kernels": dict(sorted(own.items(), key=lambda kv: -kv[1])),
        "lightgbm_user_seconds": lightgbm,
        "clock": "cpu",
    }
    record.save(report)
    print(tables([{"parameters": record.parameters, "results": report}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """The last recorded run: the one-thread train time, its kernels' share, and each kernel's own time."""
    r = runs[-1]["results"]
    lgb = r.get("lightgbm_user_seconds")
    clock = "CPU " if r.get("clock") == "cpu" else ""
    lines = [
        f"One thread {r['one_thread_seconds']:.2f} {clock}s: kernels {r['kernel_seconds']:.2f} s, the rest "
        f"{r['rest_seconds']:.2f} s."
        + (
            f" LightGBM as a user runs it on the same rows and thread: {lgb:.2f} s "
            f"({r['one_thread_seconds'] / lgb:.2f}x; the kernels alone {r['kernel_seconds'] / lgb:.2f}x)."
            if lgb
            else ""
        ),
        "",
        "| kernel | own seconds |" + (" of LightGBM's time |" if lgb else ""),
        "|---|---|" + ("---|" if lgb else ""),
        *(
            f"| {name} | {seconds:.3f} |" + (f" {seconds / lgb:.2f}x |" if lgb else "")
            for name, seconds in r["kernels"].items()
        ),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
