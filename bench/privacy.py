"""What differential privacy costs: the paper's Figure 9 and a privacy-accuracy curve.

Every party spends one budget ``(epsilon, delta = 1e-5)`` on everything it releases (``node.privacy.accountant``: bin
sketch,
PSD, votes, histograms; composed by dp-accounting's RDP accountant over the whole task). Each run is a (data set,
epsilon, seed) triple; within a seed the partition, split and data are shared by every epsilon, and only the noise
(drawn from the seed) differs.

* **figure9** follows the paper's section 6.2.4: M = 4, theta 0.8, depth 3; a9a 40 trees (the paper's two
  ensembles of 20: here one budget over all 40 trees, every tree on every row, which is stricter than ensembles on
  disjoint rows), HIGGS and SUSY 50 trees; epsilon in {0.5, 1, 2, 4, 8, inf}; 10 seeds, test error min/mean/max.
  The paper drops the PSD to keep the budget strict; here the PSD is inside the budget (its share of epsilon). As
  the paper, the non-private references use default settings: LightGBM with its own binning at the paper's
  settings (500 trees of depth 8, ``ledger.spec.parameters.PAPER_TREES``,
  ``node.baselines.centralized.train_own_bins``) on all rows, and the parties alone (standalone, same parameters, on
  their own rows).
* **curve**: AUC against epsilon on the UCI credit card data and on the heavy-tailed synthetic credit set
  (``bench.stress.heavy_data``), M = 4, theta 0.8, 50 trees of depth 3, 10 seeds, LightGBM (own bins, same trees and
  depth, no privacy) beside it; with the default 16 bins and with 4: the noise per bin does not depend on the bins,
  so fewer, fuller bins carry more signal per unit of noise.
* **figure9-randomsplit** and **curve-randomsplit**: the same runs with ``--algo randomsplit``
  (``node.sim.random_split``: split features and thresholds drawn from a public seed, each party's leaf sums released
  once per tree), the design that releases T times instead of T x d. Under privacy each tree splits on one feature
  (``--tree-features auto``); the ``-all`` parts run the same with trees over all features, paired by seed.
  ``curve-randomsplit-depth4-local`` runs with each party's noise carrying its guarantee alone (no secure sum of
  the leaf releases: ``--dp-colluders 3``).
* **everywhere**: the private default (``simulate --epsilon E``: random splits, 200 trees) at epsilon 1, 4 and
  inf on every data set here, real and synthetic, next to LightGBM with its defaults; ``-all`` with trees over all
  features, ``-skew`` with the parties of a label group apart in one feature as well (feature skew 0.5).
* **small-epsilons**: the same private default at epsilon 1, 0.5, 0.25 and 0.1 on every data set here, the two
  regression sets (abalone, cpusmall; test RMSE) included. A regression task under a budget needs its label range
  declared by the requester (:data:`LABEL_RANGES`, each the label's documented domain, never read from the rows): it
  bounds the squared error's gradients (``node.privacy.accountant.loss_bounds``).

    python -m bench.privacy --part figure9 --seeds 0-9 --jobs 2
    python -m bench.privacy --part curve --seeds 0-9 --jobs 2
    python -m bench.privacy --paired NEW.json OLD.json   # what a change gained, per epsilon, paired by seed
    python -m bench.privacy --part figure9-randomsplit --seeds 0-9 --jobs 1   # the same with random-split trees
    python -m bench.privacy --part curve-randomsplit --seeds 0-9 --jobs 1
    python -m bench.privacy --part curve-randomsplit-depth4 --seeds 0-9 --jobs 1   # 200 trees of depth 4
    python -m bench.privacy --part curve-randomsplit-depth4-all --seeds 0-9 --jobs 1   # all features per tree
    python -m bench.privacy --part curve-randomsplit-depth4-local --seeds 0-9 --jobs 1   # each party's noise alone
    python -m bench.privacy --part everywhere --seeds 0-9 --jobs 2   # the private default on every data set
    python -m bench.privacy --part everywhere-all --seeds 0-9 --jobs 2   # ... with trees over all features
    python -m bench.privacy --part small-epsilons --seeds 0-4 --jobs 1   # epsilon 1 down to 0.1
    python -m bench.privacy --part everywhere-skew --seeds 0-9 --jobs 2   # ... with feature skew 0.5

Results go to ``bench/results/privacy.json`` (``bench.record``), one run per part; ``python -m bench.report`` draws
the plots (PNG, in ``docs/img/benchmarks/``, with the ``plots`` extra: matplotlib) and the tables on the benchmarks
page.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench.datasets import load
from bench.datasets import objective as dataset_objective
from bench.plots import pyplot, save_figure
from bench.record import Run, parameters_of, read
from bench.stats import mean_se, seeds_of
from fgbdt_chain.ledger.spec.modes import ObjectiveName
from fgbdt_chain.ledger.spec.parameters import PAPER_DEPTH, PAPER_TREES
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.sim.experiment import PrepConfig, evaluate, prepare, run, standalone_errors

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0, math.inf)
PARTS: dict[str, dict[str, Any]] = {
    "figure9": {
        "datasets": {"a9a": 40, "higgs": 50, "susy": 50},
        "epsilons": EPSILONS,
        "metric": "test_error",
        "bins": (16,),
    },
    "curve": {
        "datasets": {"credit": 50, "heavy": 50},
        "epsilons": (0.25, *EPSILONS[:-1], 16.0, math.inf),
        "metric": "test_auc",
        "bins": (16, 4),
    },
    # the same two figures with random-split trees that release only their leaves (node.random_split)
    "figure9-randomsplit": {
        "datasets": {"a9a": 40, "higgs": 50, "susy": 50},
        "epsilons": EPSILONS,
        "metric": "test_error",
        "bins": (16,),
        "algo": "randomsplit",
    },
    "curve-randomsplit": {
        "datasets": {"credit": 50, "heavy": 50},
        "epsilons": (0.25, *EPSILONS[:-1], 16.0, math.inf),
        "metric": "test_auc",
        "bins": (16,),
        "algo": "randomsplit",
    },
    # Maddock et al.'s depth 4, with more trees: without noise these reach LightGBM's AUC on credit
    "curve-randomsplit-depth4": {
        "datasets": {"credit": 200, "heavy": 200},
        "epsilons": (0.25, *EPSILONS[:-1], 16.0, math.inf),
        "metric": "test_auc",
        "bins": (16,),
        "algo": "randomsplit",
        "depth": 4,
    },
}
# the random-split parts again with trees over all features at every epsilon (the default takes one feature per tree
# under privacy): what the one-feature trees change, paired by seed
for _name in ("figure9-randomsplit", "curve-randomsplit-depth4"):
    PARTS[f"{_name}-all"] = {**PARTS[_name], "tree_features": "all"}
# and with every party's noise carrying its guarantee alone (colluders = M - 1): what the secure sum of the leaf
# releases gains, paired by seed
PARTS["curve-randomsplit-depth4-local"] = {**PARTS["curve-randomsplit-depth4"], "colluders": 3}
# the private default (simulate --epsilon E: random splits, 200 trees, one feature each when there are turns for all)
# on every data set here, with LightGBM beside it; again with trees over all features, and with the parties of a
# label group apart in one feature (node.partition.feature_skewed), not only in their labels
PARTS["everywhere"] = {
    "datasets": {name: 200 for name in ("a9a", "higgs", "susy", "credit", "stress", "heavy")},
    "epsilons": (1.0, 4.0, math.inf),
    "metric": "test_auc",
    "bins": (16,),
    "algo": "randomsplit",
    "depth": 4,
}
PARTS["everywhere-all"] = {**PARTS["everywhere"], "tree_features": "all"}
# the private default at the small budgets: epsilon 1, 0.5, 0.25 and 0.1 on every data set here, the regression sets
# with their declared label ranges (LABEL_RANGES), with LightGBM without privacy beside it
PARTS["small-epsilons"] = {
    **PARTS["everywhere"],
    "datasets": {**PARTS["everywhere"]["datasets"], "abalone": 200, "cpusmall": 200},
    "epsilons": (1.0, 0.5, 0.25, 0.1, math.inf),
}
PARTS["everywhere-skew"] = {**PARTS["everywhere"], "feature_skew": 0.5}
ALGO_LABELS = {"fvtree": "FV-tree", "randomsplit": "random splits, private leaves"}
LABEL_RANGES: dict[str, tuple[float, float]] = {"abalone": (1.0, 29.0), "cpusmall": (0.0, 100.0)}
"""The requester's declared label range of each regression set, from the label's documentation, as a requester
knows it before any party joins: abalone's label is the number of rings, whose range the UCI data description
gives as 1 to 29; cpusmall's is the percentage of time the CPUs run in user mode (the Delve ``comp-activ`` data's
``usr``), 0 to 100 by definition."""


def metric_of(part: str, name: str) -> str:
    """The metric a data set is reported in: the part's for binary sets, test RMSE for regression sets."""
    return "test_rmse" if dataset_objective(name) == "regression" else str(PARTS[part]["metric"])


PARTIES, THETA, DEPTH = 4, 0.8, 3


def one_task(task: tuple[str, str, int, int, int]) -> dict[str, Any]:
    """Every epsilon of one data set, bin count and seed, and the non-private references on the same split."""
    part, name, trees, bins, seed = task
    start = time.perf_counter()
    train, test = load(name, seed)
    objective: ObjectiveName = "regression" if dataset_objective(name) == "regression" else "binary"
    params = TrainParams(
        trees=trees,
        depth=PARTS[part].get("depth", DEPTH),
        bins=bins,
        voted_trees=ALL_TREES_VOTED,
        objective=objective,
    )
    row: dict[str, Any] = {"dataset": name, "seed": seed, "trees": trees, "bins": bins, "runs": {}}
    for eps in PARTS[part]["epsilons"]:
        config = PrepConfig(
            parties=PARTIES,
            theta=THETA,
            seed=seed,
            epsilon=eps,
            tree_features=PARTS[part].get("tree_features", "auto"),
            colluders=PARTS[part].get("colluders"),
            feature_skew=PARTS[part].get("feature_skew", 0.0),
            dp_noise="seeded",  # an experiment: runs pair by seed across epsilons and code versions
            label_range=LABEL_RANGES.get(name) if objective == "regression" else None,
        )
        prep = prepare(train, test, params, config)
        report, _, _ = run(prep, PARTS[part].get("algo", "fvtree"))
        metrics: dict[str, float] = {k: report[k] for k in ("test_error", "test_auc", "test_rmse") if k in report}
        row["runs"][repr(eps)] = {
            **metrics,
            "accounted_epsilon": report["privacy"]["accounted_epsilon"],
            "lambda": report["params"]["lam"],
            "tree_features": report["params"].get("tree_features"),
            "colluders": report["privacy"].get("colluders"),
            "all_others_epsilon": report["privacy"].get("all_others_epsilon"),
        }
    paper = TrainParams(trees=PAPER_TREES, depth=PAPER_DEPTH, voted_trees=ALL_TREES_VOTED, objective=objective)
    ref_params = paper if part.startswith("figure9") else params
    booster = baselines.train_own_bins(train.X, train.y, ref_params, threads=1, seed=seed)
    row["lightgbm"] = evaluate(ref_params, test.y, np.asarray(booster.predict(test.X), dtype=np.float64))
    own = baselines.RAW_BASELINES["lightgbm-defaults"](params, threads=1, seed=seed)
    own_booster = baselines.raw_booster(train.X, train.y, own, None)
    row["lightgbm_defaults"] = evaluate(params, test.y, np.asarray(own_booster.predict(test.X), dtype=np.float64))
    if part.startswith("figure9"):
        prep = prepare(train, test, ref_params, PrepConfig(parties=PARTIES, theta=THETA, seed=seed))
        alone = standalone_errors(prep)
        half = (PARTIES + 1) // 2  # node.partition: group A (mostly class 0) is the first half of the parties
        row["standalone_a"] = float(np.mean([s["test_error"] for s in alone[:half]]))
        row["standalone_b"] = float(np.mean([s["test_error"] for s in alone[half:]]))
    row["seconds"] = time.perf_counter() - start
    return row


def label(eps: str) -> str:
    return "inf" if eps == "inf" else f"{float(eps):g}"


def table(part: str, rows: list[dict[str, Any]]) -> str:
    eps_keys = [repr(e) for e in PARTS[part]["epsilons"]]
    out: list[str] = []
    for name, bins in ((n, b) for n in PARTS[part]["datasets"] for b in PARTS[part]["bins"]):
        group = [r for r in rows if r["dataset"] == name and r.get("bins", 16) == bins]
        if not group:
            continue
        metric = metric_of(part, name)
        algo = ALGO_LABELS[PARTS[part].get("algo", "fvtree")]
        shape = f"{algo}, {group[0]['trees']} trees of depth {PARTS[part].get('depth', DEPTH)}, {bins} bins"
        if name in LABEL_RANGES and metric == "test_rmse":
            lo, hi = LABEL_RANGES[name]
            shape += f", label range declared [{lo:g}, {hi:g}]"
        out.append(f"{chr(10) if out else ''}**{name}** ({shape}, {len(group)} seeds; {metric})\n")
        out.append(
            "| epsilon | min | mean ± SE | max | accounted epsilon (max) | lambda | features per tree "
            "| colluders held | epsilon if all others pool (max) |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|")
        for e in eps_keys:
            v = [r["runs"][e][metric] for r in group]
            mean, se = mean_se(v)
            acc = max(r["runs"][e]["accounted_epsilon"] for r in group)
            lam = group[0]["runs"][e]["lambda"]
            features = group[0]["runs"][e].get("tree_features") or "-"
            colluders = group[0]["runs"][e].get("colluders")
            alone = [r["runs"][e].get("all_others_epsilon") for r in group]
            private = e != "inf" and colluders is not None
            held = f"{colluders} of {PARTIES - 1}" if private else "-"
            worst = f"{max(a for a in alone if a is not None):.3g}" if private and None not in alone else "-"
            out.append(
                f"| {label(e)} | {min(v):.4f} | {mean:.4f} ± {se:.4f} | {max(v):.4f} | {acc:g} | {lam:.3g} "
                f"| {features} | {held} | {worst} |"
            )
        mean, se = mean_se([r["lightgbm"][metric] for r in group])
        out.append(f"| LightGBM, own bins, same trees and depth, no privacy | | {mean:.4f} ± {se:.4f} | | | | | | |")
        if all("lightgbm_defaults" in r for r in group):
            mean, se = mean_se([r["lightgbm_defaults"][metric] for r in group])
            out.append(f"| LightGBM with its defaults, no privacy | | {mean:.4f} ± {se:.4f} | | | | | | |")
        if part.startswith("figure9"):
            for side in ("a", "b"):
                mean, se = mean_se([r[f"standalone_{side}"] for r in group])
                out.append(f"| standalone {side.upper()}, no privacy | | {mean:.4f} ± {se:.4f} | | | | | | |")
    return "\n".join(out)


def plot(part: str, rows: list[dict[str, Any]], path: Path) -> None:
    """The figure: the metric against epsilon (inf drawn at the right end), min-max band, mean line, references."""
    plt = pyplot()
    names = [n for n in PARTS[part]["datasets"] if any(r["dataset"] == n for r in rows)]
    all_bins = PARTS[part]["bins"]
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), squeeze=False)
    finite = sorted(e for e in PARTS[part]["epsilons"] if math.isfinite(e))
    x_inf = max(finite) * 2
    for ax, name in zip(axes[0], names, strict=True):
        metric = metric_of(part, name)
        group = [r for r in rows if r["dataset"] == name]
        epsilons = sorted(PARTS[part]["epsilons"])  # a part may list them in any order; lines run left to right
        xs = [e if math.isfinite(e) else x_inf for e in epsilons]
        for bins in all_bins:
            same = [r for r in group if r.get("bins", 16) == bins]
            if not same:
                continue
            vals = [[r["runs"][repr(e)][metric] for r in same] for e in epsilons]
            algo = ALGO_LABELS[PARTS[part].get("algo", "fvtree")]
            tag = f"{algo}, {bins} bins" if len(all_bins) > 1 else algo
            ax.fill_between(xs, [min(v) for v in vals], [max(v) for v in vals], alpha=0.2, label=f"{tag} min-max")
            ax.plot(xs, [float(np.mean(v)) for v in vals], "o-", label=f"{tag} mean")
        ax.axhline(
            float(np.mean([r["lightgbm"][metric] for r in group if r.get("bins", 16) == all_bins[0]])),
            color="k",
            ls="--",
            label="LightGBM",
        )
        if part.startswith("figure9"):
            for side, style in (("a", ":"), ("b", "-.")):
                level = float(np.mean([r[f"standalone_{side}"] for r in group]))
                ax.axhline(level, color="gray", ls=style, label=f"standalone {side.upper()}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [f"{e:g}" for e in finite] + ["inf"])
        ax.set_xlabel("epsilon per party")
        ax.set_ylabel(metric.replace("_", " "))
        seeds = len({r["seed"] for r in group})
        ax.set_title(
            f"{name} ({group[0]['trees']} trees, depth {PARTS[part].get('depth', DEPTH)}, {seeds} seeds)", fontsize=9
        )
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of recorded runs of one part: their rows together (each a data set, bin count and seed)."""
    return table(runs[0]["parameters"]["part"], [row for run in runs for row in run["results"]["rows"]])


def paired(new: Path, old: Path) -> str:
    """Differences ``new - old`` per data set and epsilon, paired by seed (same partition, split and data), from
    the newest runs of two results files (``--out`` of two runs of one part): what one design change gained."""
    docs = {"new": read(new)["runs"][-1], "old": read(old)["runs"][-1]}
    rows = {k: {(r["dataset"], r["seed"]): r for r in doc["results"]["rows"]} for k, doc in docs.items()}
    part = docs["new"]["parameters"]["part"]
    out = [f"`{new}` - `{old}` (paired by seed)", "", "| data | metric | epsilon | new | old | new - old | seeds |"]
    out.append("|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(d for d, _ in rows["new"]):
        metric = metric_of(part, name)
        keys = sorted(k for k in rows["new"] if k[0] == name and k in rows["old"])
        if not keys:
            continue
        for e in rows["new"][keys[0]]["runs"]:
            if e not in rows["old"][keys[0]]["runs"]:
                continue
            a = [rows["new"][k]["runs"][e][metric] for k in keys]
            b = [rows["old"][k]["runs"][e][metric] for k in keys]
            (ma, sa), (mb, sb), (md, sd) = mean_se(a), mean_se(b), mean_se([x - y for x, y in zip(a, b, strict=True)])
            cells = f"{ma:.4f} ± {sa:.4f} | {mb:.4f} ± {sb:.4f} | {md:+.4f} ± {sd:.4f}"
            out.append(f"| {name} | {metric} | {label(e)} | {cells} | {len(keys)} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=sorted(PARTS), required="--paired" not in sys.argv)
    ap.add_argument("--seeds", default="0-9", help="e.g. 0-9 or 0,1,2")
    ap.add_argument("--datasets", help="a subset of the part's data sets, comma separated")
    ap.add_argument("--jobs", type=int, default=1, help="(data set, seed) pairs run in parallel processes")
    ap.add_argument("--out", help="results file (default bench/results/privacy.json, bench.record)")
    ap.add_argument("--paired", nargs=2, metavar=("NEW", "OLD"), help="only print NEW - OLD paired by seed (JSONs)")
    args = ap.parse_args()
    if args.paired:
        print(paired(Path(args.paired[0]), Path(args.paired[1])))
        return 0
    record = Run("privacy", parameters_of(args, drop=("paired",)), args.out)
    chosen = PARTS[args.part]["datasets"]
    names = args.datasets.split(",") if args.datasets else list(chosen)
    unknown = [n for n in names if n not in chosen]
    if unknown:
        ap.error(f"{args.part} has no data set {', '.join(unknown)}; choose from {', '.join(chosen)}")
    tasks = [
        (args.part, n, chosen[n], b, s) for n in names for b in PARTS[args.part]["bins"] for s in seeds_of(args.seeds)
    ]
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(one_task, tasks):
            rows.append(row)
            metric = metric_of(args.part, row["dataset"])
            brief = {e: round(v[metric], 4) for e, v in row["runs"].items()}
            print(json.dumps({"dataset": row["dataset"], "seed": row["seed"], metric: brief}), file=sys.stderr)
            record.save({"rows": rows}, complete=False)  # a stopped run keeps what it measured
    record.save({"rows": rows})
    print(table(args.part, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
