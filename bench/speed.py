"""Train time and peak memory of FV-tree (simulate) next to LightGBM as a user runs it and on the task's bins.

Each measurement runs in its own process so that peak memory (ru_maxrss of that process) belongs to that run alone.

    python -m bench.speed --data a9a --parties 4 --theta 0.8 --trees 500 --depth 8
    python -m bench.speed --data stress --rows 1000000 --trees 20 --depth 6

The runs: ``fvtree`` (``simulate``'s training, PSDs and weights timed apart as preparation); ``lightgbm-user``,
LightGBM as a user runs it: the training rows as loaded (a dense float array), its own ``Dataset`` construction and
binning inside the clock, ``max_bin`` = the task's bins, the same depth, leaves (2^depth), lambda, learning rate and
minimum rows per leaf, the library's default threading and no ``deterministic``; ``lightgbm-bins``, the model-equal
baseline (``node.baselines.centralized``) fed the task's bin slots; ``lightgbm-N``, that one on N threads.

Threads are pinned the same way for every run: each child process gets ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``,
``OPENBLAS_NUM_THREADS`` and ``NUMBA_NUM_THREADS`` = ``--threads`` (default: every core of the process), so numba's
pool, LightGBM's OpenMP default and any BLAS see the same count; each measurement records the environment it ran
with and the load average before and after it (the machine may be shared: a loaded core slows OpenMP regions of
both sides, which wait at every barrier for the slowest thread).

Each run also records its training's CPU seconds (``time.process_time``: every thread of the process, OpenMP's
spinning included) where it can time its training alone (``fvtree`` and ``lightgbm-user``): on a machine shared
with other work a process waits for a core a large and varying part of its wall time (a9a's 100 trees took 1.1 s of
CPU and 2.6-4.6 s of wall at a load of 8 on 2 cores), so on one thread the CPU ratio says what each side computes
and the wall ratio what a user waits for.

``--repeat N`` runs the list N times, interleaved (fvtree, lightgbm-1, lightgbm-2, fvtree, ...), and reports each
run's mean and standard error and each run's ratio to LightGBM paired within a repetition: the same work took
3.7-4.0 s one day and 2.5-3.0 s another on this machine, so one pair of processes is an anecdote.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np

from bench.datasets import SYNTHETIC, load, objective
from bench.record import Run, parameters_of
from bench.stats import mean_se
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.kernels.parallel import default_threads
from fgbdt_chain.node.protocol.shapley_cost import slow_shapley_message
from fgbdt_chain.node.sim.experiment import PrepConfig, evaluate, federation, make_model, prepare, run
from fgbdt_chain.node.sim.warmup import warm_up


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
"""The variables every child process gets set to ``--threads``."""
NONDETERMINISTIC = ("lightgbm-user",)
"""Runs whose model may differ between repetitions (LightGBM without ``deterministic`` on several threads)."""


def load_data(name: str, seed: int, rows: int | None) -> tuple[Dataset, Dataset]:
    """A benchmark data set; ``rows`` sizes a synthetic one (``bench.datasets.SYNTHETIC``)."""
    if rows is None:
        return load(name, seed)
    if name not in SYNTHETIC:
        raise SystemExit(f"--rows sizes a synthetic data set ({', '.join(SYNTHETIC)}), not {name}")
    return SYNTHETIC[name][0](rows=rows, seed=seed)


def user_lightgbm(
    train: Dataset, test: Dataset, params: TrainParams, seed: int, threads: int | None = None
) -> tuple[float, float, float]:
    """(train seconds, train CPU seconds, test loss: ``loss_metric``) of LightGBM as a user runs it (module
    docstring): its Dataset and binning timed; ``threads`` sets its ``num_threads`` (None: the library's default)."""
    import lightgbm as lgb

    lp = {
        "objective": "binary" if params.objective == "binary" else "regression",
        "learning_rate": params.learning_rate,
        "num_leaves": 2**params.depth,
        "max_depth": params.depth,
        "lambda_l2": params.lam,
        "min_data_in_leaf": params.min_rows,
        "max_bin": params.bins,
        "seed": seed,
        "verbose": -1,
        **({} if threads is None else {"num_threads": threads}),
    }
    cpu, start = time.process_time(), time.perf_counter()
    data = lgb.Dataset(train.X, label=train.y, params={"max_bin": params.bins, "verbose": -1})
    booster = lgb.train(lp, data, num_boost_round=params.trees)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    pred = np.asarray(booster.predict(test.X), dtype=np.float64)
    return seconds, cpu, evaluate(params, test.y, pred)[loss_metric(params)]


def loss_metric(params: TrainParams) -> str:
    """The test loss a run reports: the error rate of a binary task, the RMSE of a regression."""
    return "test_error" if params.objective == "binary" else "test_rmse"


def _loss_of(m: dict[str, Any]) -> str:
    """A measurement's loss metric (records made before regression runs were measured name none: binary)."""
    return str(m.get("loss_metric", "test_error"))


def one(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    train, test = load_data(args.data, args.seed, args.rows)
    params = TrainParams(
        trees=args.trees,
        depth=args.depth,
        bins=args.bins,
        voted_trees=args.voted_trees,
        objective=objective(args.data),  # type: ignore[arg-type]
    )
    jit = 0.0
    if args.one == "fvtree":  # numba's pool is not started for LightGBM's runs: its threads would share the cores
        # loaded before the preparation, whose binning and PSD kernels are compiled too: loading numba is a cost
        # of the process (as importing LightGBM is), reported as ``jit_load_seconds``, not of a task's preparation
        jit = time.perf_counter()
        warm_up()
        jit = time.perf_counter() - jit
    prep_cpu = time.process_time()
    prep = prepare(train, test, params, PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed))
    if args.one == "fvtree":
        prep.weights()  # PSDs and w*, once per task: reported apart from training
    prep_cpu = time.process_time() - prep_cpu
    before = rss_mb()
    start = time.perf_counter()
    phases: dict[str, float] = {}
    phases_cpu: dict[str, float] = {}
    if args.one == "lightgbm-user":
        rows = np.sort(np.concatenate(prep.parts))  # the federation's training rows, in the file's order
        seconds, cpu, error = user_lightgbm(prep.train.subset(rows), prep.test, prep.params, args.seed)
        report: dict[str, Any] = {"train_seconds": seconds, "train_cpu_seconds": cpu, loss_metric(params): error}
    elif args.one.startswith("lightgbm"):
        suffix = args.one.split("-")[1]
        threads = args.threads if suffix == "bins" else int(suffix)
        report, _, result = run(prep, "centralized", threads=threads)
    elif args.one == "fvtree":  # ``simulate``'s training (``node.sim.trainers.federated``), its CPU time too
        fed = federation(prep, "fvtree")
        cpu, start = time.process_time(), time.perf_counter()
        trained = fed.train()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        pred = make_model(prep, trained, "fvtree").predict(prep.test.X)
        report = {"train_seconds": seconds, "train_cpu_seconds": cpu, **evaluate(prep.params, prep.test.y, pred)}
        phases, phases_cpu = trained.seconds, trained.cpu_seconds
    else:
        report, _, result = run(prep, args.one)
        phases = result.seconds if result else {}
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "run": args.one,
        "train_seconds": report["train_seconds"],
        "train_cpu_seconds": report.get("train_cpu_seconds"),
        "wall_seconds": wall,
        "prep_seconds": prep.prep_seconds,
        "prep_cpu_seconds": prep_cpu,
        "jit_load_seconds": jit,
        "loss_metric": loss_metric(params),
        loss_metric(params): report[loss_metric(params)],
        "test_auc": report.get("test_auc"),
        "rss_before_mb": before,
        "peak_rss_mb": peak,
        "phases": phases,
        "phases_cpu": phases_cpu,
        "threads": args.threads,
        "env": {name: os.environ.get(name) for name in THREAD_ENV},
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
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
    ap.add_argument("--rows", type=int, help="rows of a synthetic data set (stress, heavy, claims)")
    ap.add_argument("--threads", type=int, default=default_threads(), help="threads of every run (default: every core)")
    ap.add_argument("--runs", default="fvtree,lightgbm-user,lightgbm-bins")
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
            cmd = [sys.executable, "-m", "bench.speed", *sys.argv[1:], "--threads", str(args.threads), "--one", name]
            env = {**os.environ, **{var: str(args.threads) for var in THREAD_ENV}}
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
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
    bases = [n for n in names if n.startswith("lightgbm")]
    cpu_bases = [b for b in bases if any(f"cpu_ratio_to_{b}" in row for row in summary.values())]
    lines = [
        f"| run | train s (mean ± SE over {reps}) | "
        + "".join(f"ratio to {b} | " for b in bases)
        + ("train CPU s | " + "".join(f"CPU ratio to {b} | " for b in cpu_bases) if cpu_bases else "")
        + f"preparation s | peak RSS MiB | {_loss_of(pooled[0]).replace('_', ' ').replace('rmse', 'RMSE')} |",
        "|---|---|" + "---|" * len(bases) + ("---|" * (1 + len(cpu_bases)) if cpu_bases else "") + "---|---|---|",
    ]
    for name, row in summary.items():
        ratios = [
            f"{row[f'ratio_to_{b}'][0]:.2f}x ± {row[f'ratio_to_{b}'][1]:.2f}" if f"ratio_to_{b}" in row else "-"
            for b in bases
        ]
        if cpu_bases:
            cpu = row.get("train_cpu_seconds")
            ratios.append(f"{cpu[0]:.2f} ± {cpu[1]:.2f}" if cpu else "-")
            ratios += [
                f"{row[f'cpu_ratio_to_{b}'][0]:.2f}x ± {row[f'cpu_ratio_to_{b}'][1]:.2f}"
                if f"cpu_ratio_to_{b}" in row
                else "-"
                for b in cpu_bases
            ]
        prep = [m["prep_seconds"] for m in pooled if m["run"] == name and m["run"] == "fvtree"]
        prep_s = f"{sum(prep) / len(prep):.2f}" if prep else "-"
        prep_cpu = [m["prep_cpu_seconds"] for m in pooled if m["run"] == name == "fvtree" and "prep_cpu_seconds" in m]
        if prep_cpu and len(prep_cpu) == len(prep):
            prep_s += f" (CPU {sum(prep_cpu) / len(prep_cpu):.2f})"
        lines.append(
            f"| {name} | {row['train_seconds'][0]:.2f} ± {row['train_seconds'][1]:.2f} | "
            + "".join(f"{r} | " for r in ratios)
            + f"{prep_s} | {row['peak_rss_mb']:.0f} | {row[_loss_of(pooled[0])]:.4f} |"
        )
    threads = {m.get("threads") for m in pooled}
    loads = [m["load_average_before"][0] for m in pooled if "load_average_before" in m]
    if loads and None not in threads:  # runs before threads were pinned recorded none
        lines += [
            "",
            f"Every run on {', '.join(str(t) for t in sorted(threads, key=str))} thread(s) (OMP_NUM_THREADS, "
            f"NUMBA_NUM_THREADS, MKL_NUM_THREADS and OPENBLAS_NUM_THREADS set to it); the 1-minute load average "
            f"before a run was {min(loads):.2f} to {max(loads):.2f} (other work on the machine slows both sides).",
        ]
    last = [m for m in pooled if m["phases"]][-1:]
    for m in last:
        lines += [
            "",
            f"Where {m['run']}'s {m['train_seconds']:.2f} s go in its last repetition (PSD and weights before "
            f"training: {m['prep_seconds']:.2f} s):",
            "",
        ]
        cpu = m.get("phases_cpu") or {}  # empty for a run that did not record it
        for phase, sec in sorted(m["phases"].items(), key=lambda kv: -kv[1]):
            of_cpu = f", CPU {cpu[phase]:.2f} s" if phase in cpu else ""
            lines.append(f"- {phase}: {sec:.2f} s ({100 * sec / m['train_seconds']:.0f}%{of_cpu})")
    return "\n".join(lines)


def summarise(results: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """Per run: train seconds as (mean, standard error) over the repetitions, the ratio to each LightGBM run paired
    within a repetition (the machine's speed drifts between repetitions more than within one), the same of the CPU
    seconds where both runs measured them, the largest peak memory and the test loss (which must not vary: the
    runs are deterministic)."""
    by = {(r["run"], r["repeat"]): r for r in results}  # a repeat is any key: tables() pools runs as (run, repeat)
    repeats = sorted({r["repeat"] for r in results})
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        mine = [by[name, rep] for rep in repeats]
        metric = _loss_of(mine[0])
        errors = {r[metric] for r in mine}
        if len(errors) > 1 and name not in NONDETERMINISTIC:
            raise SystemExit(f"{name}: the {metric.replace('_', ' ')} changed between repetitions ({sorted(errors)})")
        row: dict[str, Any] = {
            "train_seconds": mean_se(r["train_seconds"] for r in mine),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in mine),
            metric: sum(r[metric] for r in mine) / len(mine),
        }
        if all(r.get("train_cpu_seconds") is not None for r in mine):
            row["train_cpu_seconds"] = mean_se(r["train_cpu_seconds"] for r in mine)
        for base in names:
            if base.startswith("lightgbm") and base != name:
                row[f"ratio_to_{base}"] = mean_se(
                    by[name, rep]["train_seconds"] / by[base, rep]["train_seconds"] for rep in repeats
                )
                if "train_cpu_seconds" in row and all(by[base, rep].get("train_cpu_seconds") for rep in repeats):
                    row[f"cpu_ratio_to_{base}"] = mean_se(
                        by[name, rep]["train_cpu_seconds"] / by[base, rep]["train_cpu_seconds"] for rep in repeats
                    )
        out[name] = row
    return out


if __name__ == "__main__":
    sys.exit(main())
