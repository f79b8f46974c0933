"""What candidates chosen by no party would cost in accuracy: LightGBM on the federation's bins with a public random
subset of k features per node (``feature_fraction_bynode = k / d``), against all features.

FV-tree's votes make the model fit each party's own rows better than others' rows of the same label, which breaks
the endorsement test's premise in long tasks (``bench.endorse_drift``). Candidates drawn from a public seed, with the
split chosen on the pooled histograms of those k features, would make the model blind to the parties. Pooled over
the parties, that model is exactly centralized boosting with per-node feature sampling, which this measures on the
partition's bins (M = 4, theta 0.8, the paper's settings; 3 seeds).

    python -m bench.feature_subset
"""

from __future__ import annotations

import argparse
from typing import Any

import lightgbm as lgb
import numpy as np

from bench.datasets import load
from bench.record import Run, parameters_of
from bench.stats import mean_se
from fgbdt_chain.ledger.spec.parameters import PAPER_DEPTH, PAPER_TREES
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare

DATASETS = ("a9a", "higgs", "susy", "credit")
SUBSETS = (8, 4, 2)
SEEDS = (0, 1, 2)


def errors(name: str, seed: int, params: TrainParams) -> dict[str, float]:
    """Test error with all features and with each subset size, on one seed's partition bins."""
    train, test = load(name, seed)
    prep = prepare(train, test, params, PrepConfig(parties=4, theta=0.8, seed=seed))
    d = prep.train_slots.shape[1]
    out = {}
    for k in (d, *SUBSETS):
        if k > d:
            continue
        lp = baselines.lightgbm_params(params, threads=1, seed=seed)
        lp["feature_fraction_bynode"] = k / d
        data = lgb.Dataset(
            prep.train_slots.astype(np.float64),
            label=train.y,
            params={"max_bin": lp["max_bin"], "min_data_in_bin": 1, "verbose": -1},
        )
        booster = lgb.train(lp, data, num_boost_round=params.trees)
        p = baselines.predict_lightgbm(booster, prep.test_slots, params)
        out["all" if k == d else str(k)] = float(np.mean((p > 0.5) != (test.y > 0.5)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="results file (default bench/results/feature_subset.json, bench.record)")
    args = ap.parse_args()
    record = Run("feature_subset", parameters_of(args), args.out)
    params = TrainParams(trees=PAPER_TREES, depth=PAPER_DEPTH, voted_trees=ALL_TREES_VOTED)
    results = {name: [errors(name, s, params) for s in SEEDS] for name in DATASETS}
    record.save({"errors": results})
    print(tables([{"parameters": record.parameters, "results": {"errors": results}}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """The last recorded run: test error per data set and features per node, mean ± SE over the seeds."""
    lines = [
        "LightGBM on the federation's bins, M = 4, theta 0.8, 500 trees of depth 8, 3 seeds; test error, mean ± SE.",
        "",
        "| data | all features | " + " | ".join(f"{k} random features per node" for k in SUBSETS) + " |",
        "|---|---|" + "---|" * len(SUBSETS),
    ]
    for name, seeds in runs[-1]["results"]["errors"].items():
        cells = []
        for key in ("all", *map(str, SUBSETS)):
            values = [r[key] for r in seeds if key in r]
            cells.append("{:.4f} ± {:.4f}".format(*mean_se(values)) if values else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
