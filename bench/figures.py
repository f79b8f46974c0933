"""The FGBDT-Chain paper's experimental figures as plots, in the same harness as every other figure.

* **figure6**, convergence (section 6.2.1): test error against the number of trees, M = 4, theta 0.8, the paper's
  settings (500 trees of depth 8, 16 bins, learning rate 0.1, lambda 0.1), on a9a, HIGGS and SUSY: FV-tree, PV-tree
  (votes on raw gradients), the parties alone (standalone A: the mean over the first half of the parties, mostly
  class 0; B: the rest, ``node.data.partition``) and centralized LightGBM on the federation's bins; one model per
  algorithm and seed, read at every checkpoint with ``num_iteration`` (LightGBM's argument, ``Model.predict``
  takes the same), so every point of a curve is the same model cut short, as the paper's curves are.

* **figure7**, label skew (section 6.2.2): test error against theta at M = 2 (FV-tree, SimFL, the parties alone,
  centralized on the federation's bins).
* **figure8**, the number of parties (section 6.2.3): test error against M at theta 0.8 (the same curves; the
  parties alone as their mean, and the best of them).

Each (data set, seed) shares one partition, bins and test set across the algorithms; 3 seeds, mean ± SE per
point in the tables, mean with a min-max band in the plots.

    python -m bench.figures --seeds 0-2                 # all three figures, about 80 minutes on 2 cores
    python -m bench.figures --part figure6 --seeds 0-2 --jobs 1
    python -m bench.figures --part figure7 --seeds 0-2 --jobs 2
    python -m bench.figures --part figure8 --seeds 0-2 --jobs 2

Results go to ``bench/results/figures.json`` (``bench.record``), one run per figure; ``python -m bench.report`` draws
the plots (PNG, in ``docs/img/benchmarks/``, with the ``plots`` extra: matplotlib) and the tables on the benchmarks
page.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench.datasets import load
from bench.plots import pyplot, save_figure
from bench.record import Run, parameters_of
from bench.stats import mean_se, seeds_of
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.model.metrics import error_rate
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, prepare, run

DATASETS = ("a9a", "higgs", "susy")
PARTIES, THETA = 4, 0.8
CHECKPOINTS = (1, 2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 250, 300, 350, 400, 450, 500)
CURVES = ("fvtree", "pvtree", "standalone_a", "standalone_b", "centralized")
LABELS = {
    "fvtree": "FV-tree",
    "pvtree": "PV-tree",
    "standalone_a": "standalone A",
    "standalone_b": "standalone B",
    "centralized": "centralized (LightGBM, same bins)",
}


def _sigmoid(raw: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-raw))


def _lightgbm_curve(prep: Prepared, slots: np.ndarray, y: np.ndarray, checkpoints: Sequence[int]) -> list[float]:
    """Test error of one LightGBM model on the federation's bins, cut at every checkpoint."""
    booster = baselines.train_lightgbm(slots, y, prep.params, threads=1, seed=prep.config.seed)
    test = prep.test_slots.astype(np.float64)
    return [
        error_rate(prep.test.y, _sigmoid(np.asarray(booster.predict(test, raw_score=True, num_iteration=k))))
        for k in checkpoints
    ]


def convergence(task: tuple[str, int, int, int]) -> dict[str, Any]:
    """Every curve of figure 6 for one data set and seed."""
    name, seed, trees, depth = task
    start = time.perf_counter()
    train, test = load(name, seed)
    params = TrainParams(trees=trees, depth=depth, voted_trees=ALL_TREES_VOTED)  # the paper's FV-tree
    prep = prepare(train, test, params, PrepConfig(parties=PARTIES, theta=THETA, seed=seed))
    checkpoints = [k for k in CHECKPOINTS if k <= trees]
    curves: dict[str, list[float]] = {}
    for algo in ("fvtree", "pvtree"):
        _, model, _ = run(prep, algo)
        assert model is not None
        curves[algo] = [error_rate(test.y, model.predict(test.X, num_iteration=k)) for k in checkpoints]
    alone = [_lightgbm_curve(prep, s, y, checkpoints) for s, y in zip(prep.party_slots(), prep.party_y(), strict=True)]
    half = (PARTIES + 1) // 2  # node.partition: group A (mostly class 0) is the first half of the parties
    curves["standalone_a"] = np.mean(alone[:half], axis=0).tolist()
    curves["standalone_b"] = np.mean(alone[half:], axis=0).tolist()
    curves["centralized"] = _lightgbm_curve(prep, prep.train_slots, train.y, checkpoints)
    return {
        "dataset": name,
        "seed": seed,
        "trees": trees,
        "depth": depth,
        "checkpoints": checkpoints,
        "curves": curves,
        "seconds": time.perf_counter() - start,
    }


SWEEPS: dict[str, tuple[str, tuple[float, ...]]] = {
    "figure7": ("theta", (0.5, 0.6, 0.7, 0.8, 0.9)),
    "figure8": ("parties", (2, 4, 6, 8, 10)),
}
"""What each sweep figure varies, and over which values; the other knob stays at the paper's (M = 2, theta 0.8)."""
SWEEP_CURVES = ("fvtree", "simfl", "standalone_mean", "standalone_best", "centralized")
SWEEP_LABELS = {
    "fvtree": "FV-tree",
    "simfl": "SimFL",
    "standalone_mean": "parties alone (mean)",
    "standalone_best": "best party alone",
    "centralized": "centralized (LightGBM, same bins)",
}


def sweep_point(task: tuple[str, str, int, float, int, int]) -> dict[str, Any]:
    """Every curve of figure 7 or 8 at one value of its knob, for one data set and seed."""
    part, name, seed, value, trees, depth = task
    start = time.perf_counter()
    train, test = load(name, seed)
    knob = SWEEPS[part][0]
    parties, theta = (2, float(value)) if knob == "theta" else (int(value), THETA)
    prep = prepare(
        train,
        test,
        TrainParams(trees=trees, depth=depth, voted_trees=ALL_TREES_VOTED),
        PrepConfig(parties=parties, theta=theta, seed=seed),
    )
    errors: dict[str, float] = {}
    refused = 0
    for algo in ("fvtree", "simfl", "centralized"):
        report, _, _ = run(prep, algo)
        errors[algo] = report["test_error"]
        if algo == "fvtree":  # honest parties the endorsement refused: they leave the federation
            refused = len(report["endorsement"]["refusals"])
    alone = [
        error_rate(
            test.y,
            baselines.predict_lightgbm(
                baselines.train_lightgbm(s, y, prep.params, seed=seed), prep.test_slots, prep.params
            ),
        )
        for s, y in zip(prep.party_slots(), prep.party_y(), strict=True)
    ]
    errors["standalone_mean"] = float(np.mean(alone))
    errors["standalone_best"] = float(np.min(alone))
    return {
        "dataset": name,
        "seed": seed,
        knob: value,
        "trees": trees,
        "depth": depth,
        "errors": errors,
        "fvtree_refused_parties": refused,
        "seconds": time.perf_counter() - start,
    }


def render_sweep(part: str, rows: list[dict[str, Any]]) -> str:
    """Markdown tables of figure 7 or 8: mean ± SE over seeds at each value of the knob."""
    knob, _ = SWEEPS[part]
    fixed = "M = 2" if knob == "theta" else f"theta {THETA}"
    lines = []
    names = [n for n in DATASETS if any(r["dataset"] == n for r in rows)]
    for name in names:
        same = [r for r in rows if r["dataset"] == name]
        values = sorted({r[knob] for r in same})
        seeds = len({r["seed"] for r in same})
        lines.append(
            f"**{name}** ({fixed}, {same[0]['trees']} trees of depth {same[0]['depth']}, {seeds} seeds; "
            "test error, mean ± SE)"
        )
        lines.append("")
        lines.append(
            f"| {knob} | "
            + " | ".join(SWEEP_LABELS[c] for c in SWEEP_CURVES)
            + " | FV-tree runs with a party refused |"
        )
        lines.append("|---|" + "---|" * (len(SWEEP_CURVES) + 1))
        for v in values:
            cells = []
            for c in SWEEP_CURVES:
                mean, se = mean_se([r["errors"][c] for r in same if r[knob] == v])
                cells.append(f"{mean:.4f} ± {se:.4f}")
            at = [r for r in same if r[knob] == v]
            refused = [r["fvtree_refused_parties"] > 0 for r in at if "fvtree_refused_parties" in r]
            cells.append(f"{sum(refused)} of {len(refused)}" if refused else "not recorded")
            lines.append(f"| {v:g} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines).rstrip()


def _plot_sweep(part: str, rows: list[dict[str, Any]], names: list[str], path: Path) -> None:
    plt = pyplot()
    knob, _ = SWEEPS[part]
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        same = [r for r in rows if r["dataset"] == name]
        xs = sorted({r[knob] for r in same})
        for c in SWEEP_CURVES:
            vals = [[r["errors"][c] for r in same if r[knob] == v] for v in xs]
            (line,) = ax.plot(xs, [np.mean(v) for v in vals], marker="o", ms=3, label=SWEEP_LABELS[c])
            ax.fill_between(xs, [min(v) for v in vals], [max(v) for v in vals], color=line.get_color(), alpha=0.15)
        ax.set_xlabel("theta (label skew)" if knob == "theta" else "parties M")
        ax.set_ylabel("test error")
        fixed = "M = 2" if knob == "theta" else f"theta {THETA}"
        ax.set_title(f"{name} ({fixed}, {len({r['seed'] for r in same})} seeds)", fontsize=10)
    axes[0][-1].legend(fontsize=8)
    save_figure(fig, path)


def render(rows: list[dict[str, Any]]) -> str:
    """Markdown tables of figure 6: mean ± SE over seeds at selected checkpoints."""
    lines = []
    names = [n for n in DATASETS if any(r["dataset"] == n for r in rows)]
    for name in names:
        same = [r for r in rows if r["dataset"] == name]
        checkpoints = same[0]["checkpoints"]
        shown = [i for i, k in enumerate(checkpoints) if k in (1, 10, 50, 100, 200, 300, 500) or k == checkpoints[-1]]
        shown = sorted(set(shown))
        lines.append(
            f"**{name}** (M = {PARTIES}, theta {THETA}, {same[0]['trees']} trees of depth {same[0]['depth']}, "
            f"{len(same)} seeds; test error, mean ± SE)"
        )
        lines.append("")
        lines.append("| trees | " + " | ".join(LABELS[c] for c in CURVES) + " |")
        lines.append("|---|" + "---|" * len(CURVES))
        for i in shown:
            cells = []
            for c in CURVES:
                mean, se = mean_se([r["curves"][c][i] for r in same])
                cells.append(f"{mean:.4f} ± {se:.4f}")
            lines.append(f"| {checkpoints[i]} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines).rstrip()


def _plot(rows: list[dict[str, Any]], names: list[str], path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        same = [r for r in rows if r["dataset"] == name]
        xs = same[0]["checkpoints"]
        for c in CURVES:
            vals = np.array([r["curves"][c] for r in same])
            (line,) = ax.plot(xs, vals.mean(axis=0), label=LABELS[c])
            ax.fill_between(xs, vals.min(axis=0), vals.max(axis=0), color=line.get_color(), alpha=0.15)
        ax.set_xscale("log")
        ax.set_xlabel("trees")
        ax.set_ylabel("test error")
        ax.set_title(f"{name} (M = {PARTIES}, theta {THETA}, {len(same)} seeds)", fontsize=10)
    axes[0][-1].legend(fontsize=8, loc="center right")  # the gap between the federation and the parties alone
    fig.tight_layout()
    save_figure(fig, path)


PARTS = ("figure6", *SWEEPS)


def plot(part: str, rows: list[dict[str, Any]], path: Path) -> None:
    """One figure's PNG from its rows."""
    names = [n for n in DATASETS if any(r["dataset"] == n for r in rows)]
    if part in SWEEPS:
        _plot_sweep(part, rows, names, path)
    else:
        _plot(rows, names, path)


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of recorded runs of one figure: their rows together (each a data set, seed and point)."""
    part = runs[0]["parameters"]["part"]
    rows = [row for run in runs for row in run["results"]["rows"]]
    return render_sweep(part, rows) if part in SWEEPS else render(rows)


def make(part: str, args: argparse.Namespace, argv: Sequence[str]) -> str:
    """One figure: run its points and record them; returns its tables. ``argv``: the command's arguments."""
    parameters = {"part": part, **parameters_of(args, drop=("part",))}
    record = Run("figures", parameters, argv=list(argv))
    names, seeds = args.datasets.split(","), seeds_of(args.seeds)
    if part in SWEEPS:
        values = SWEEPS[part][1]
        tasks: list[Any] = [(part, n, s, v, args.trees, args.depth) for n in names for s in seeds for v in values]
        job: Any = sweep_point
    else:
        tasks, job = [(n, s, args.trees, args.depth) for n in names for s in seeds], convergence
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(job, tasks))
    else:
        rows = [job(t) for t in tasks]
    record.save({"rows": rows})
    return tables([{"parameters": record.parameters, "results": {"rows": rows}}])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=(*PARTS, "all"), default="all", help="one figure, or all three in turn")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    given = list(sys.argv[1:] if argv is None else argv)
    others = [a for i, a in enumerate(given) if a != "--part" and (i == 0 or given[i - 1] != "--part")]
    for part in PARTS if args.part == "all" else (args.part,):
        print(make(part, args, ["--part", part, *others]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
