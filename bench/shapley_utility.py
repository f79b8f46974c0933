"""Equation 7's utility against the split's improvement over its parent, on the same honest training runs.

Equation 7 scores a coalition by ``G_L^2/(H_L + lambda) + G_R^2/(H_R + lambda)`` of its summed sums at the chosen
split, which includes the coalition's own parent term ``G^2/(H + lambda)``: under label skew one party's residuals at
a node cancel another's, so equation 7 charges a party for that cancellation whatever its rows say about the split,
and the majority-class parties' split Shapley values come out negative in every drawn tree on credit and a9a
(``bench.negative_shapley``). The improvement, ``G_L^2/(H_L + lambda) + G_R^2/(H_R + lambda) - G^2/(H + lambda)``,
is LightGBM's split gain: zero for a coalition whose rows the split does not separate, whatever its residuals'
sign. This recomputes every split's Shapley values under both utilities from the parties' histograms as sent (floats,
credits and voting contributions left out) and reports per party its share of the positive totals under each and
the share of split nodes where its value is negative: a measurement for choosing the utility, not the protocol's
contributions (those are the contract's, ``ledger.spec.reference``).

    python -m bench.shapley_utility --datasets credit,a9a,higgs,susy --parties 2,4 --seeds 0,1,2
"""

from __future__ import annotations

import sys
from itertools import combinations
from math import factorial
from typing import Any

import numpy as np

from bench import honest_sweep
from bench.stats import mean_se
from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.sim.experiment import federation
from fgbdt_chain.node.sim.fvtree import LevelView

UTILITIES = ("equation 7", "improvement")


def shapley(sides: np.ndarray, lam: float, parent: bool) -> np.ndarray:
    """Exact Shapley values of the parties whose (gL, hL, gR, hR) are the rows of ``sides``."""
    m = sides.shape[0]

    def utility(members: tuple[int, ...]) -> float:
        if not members:
            return 0.0
        gl, hl, gr, hr = sides[list(members)].sum(axis=0)
        u = gl * gl / (hl + lam) + gr * gr / (hr + lam)
        return u - (gl + gr) ** 2 / (hl + hr + lam) if parent else u

    return _shapley_of({c: utility(c) for k in range(m + 1) for c in combinations(range(m), k)}, m)


def model_shapley(prep: Any, seed: int) -> np.ndarray:
    """The parties' Shapley values of model quality, the reference a split utility should follow: a coalition is
    worth the test log-loss that LightGBM trained on its pooled rows (the federation's bins and parameters) saves
    against predicting 0.5, the score every federation starts from."""
    slots, ys = prep.party_slots(), prep.party_y()
    m = len(slots)
    y = prep.test.y

    def utility(members: tuple[int, ...]) -> float:
        if not members:
            return 0.0
        x = np.concatenate([slots[i] for i in members])
        booster = baselines.train_lightgbm(x, np.concatenate([ys[i] for i in members]), prep.params, seed=seed)
        p = np.clip(baselines.predict_lightgbm(booster, prep.test_slots, prep.params), 1e-12, 1 - 1e-12)
        return float(np.log(2.0) + np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))

    return _shapley_of({c: utility(c) for k in range(m + 1) for c in combinations(range(m), k)}, m)


def _shapley_of(values: dict[tuple[int, ...], float], m: int) -> np.ndarray:
    """Exact Shapley values from every coalition's value (coalitions as sorted tuples of party indices)."""
    phi = np.zeros(m)
    for p in range(m):
        for c, u in values.items():
            if p not in c:
                phi[p] += factorial(len(c)) * factorial(m - len(c) - 1) * (values[tuple(sorted((*c, p)))] - u)
    return phi / factorial(m)


def measure(name: str, parties: int, theta: float, seed: int, trees: int, depth: int) -> dict[str, Any]:
    prep = honest_sweep.prepared(name, parties, theta, seed, trees, depth)
    params = prep.params
    views: dict[tuple[int, int], LevelView] = {}

    def keep(view: LevelView) -> None:
        views[(view.tree, view.level)] = view

    fed = federation(prep, "fvtree", keep_levels=True, observer=keep)
    result = fed.train()
    lam = params.lam
    totals = {u: np.zeros(parties) for u in UTILITIES}
    negative = {u: np.zeros(parties) for u in UTILITIES}
    splits = 0
    for rec in result.levels:
        view = views[(rec.tree, rec.level)]
        for j, res in enumerate(rec.results):
            if res.split is None:
                continue
            r, cut = res.split.rank, res.split.threshold + 1
            sides = np.array(
                [
                    [
                        view.claims[i].g[j, r, :cut].sum(),
                        view.claims[i].h[j, r, :cut].sum(),
                        view.claims[i].g[j, r, cut:].sum(),
                        view.claims[i].h[j, r, cut:].sum(),
                    ]
                    for i in range(parties)
                ]
            )
            splits += 1
            for u in UTILITIES:
                phi = shapley(sides, lam, parent=u == "improvement")
                totals[u] += phi
                negative[u] += phi < 0
    out = {"dataset": name, "parties": parties, "theta": theta, "seed": seed, "splits": splits, "per_party": []}
    quality = np.maximum(model_shapley(prep, seed), 0)
    for i in range(parties):
        row: dict[str, Any] = {"party": i, "share model quality": float(quality[i] / quality.sum())}
        for u in UTILITIES:
            pos = np.maximum(totals[u], 0)
            row[f"share {u}"] = float(pos[i] / pos.sum()) if pos.sum() > 0 else 0.0
            row[f"negative nodes {u}"] = float(negative[u][i] / max(splits, 1))
        out["per_party"].append(row)
    out["rows_per_party"] = [len(p) for p in prep.parts]
    return out


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of recorded sweeps of one setting: their grid points together."""
    return markdown([point for run in runs for point in run["results"]["runs"]])


def markdown(runs: list[dict[str, Any]]) -> str:
    lines = [
        "Per party (mean ± SE over seeds): its rows; its share of the model-quality Shapley values (LightGBM on each "
        "coalition's pooled rows, test log-loss saved against 0.5: the reference); its share of the positive split "
        "Shapley totals and the share of split nodes where its value is negative, under equation 7 and under the "
        "improvement over the parent.",
        "",
        "| data | M | theta | party | rows | share, model quality | share, eq. 7 | share, improvement | "
        "nodes < 0, eq. 7 | nodes < 0, improvement |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = ("share model quality", *(f"share {u}" for u in UTILITIES), *(f"negative nodes {u}" for u in UTILITIES))
    for d, m, theta in sorted({(r["dataset"], r["parties"], r["theta"]) for r in runs}):
        group = [r for r in runs if (r["dataset"], r["parties"], r["theta"]) == (d, m, theta)]
        for i in range(m):
            cells = []
            for key in keys:
                mean, se = mean_se(100 * r["per_party"][i][key] for r in group)
                cells.append(f"{mean:.1f} ± {se:.1f}")
            rows = mean_se(r["rows_per_party"][i] for r in group)[0]
            lines.append(f"| {d} | {m} | {theta} | {i} | {rows:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = honest_sweep.parser(__doc__, "shapley_utility")
    args = ap.parse_args()
    return honest_sweep.run("shapley_utility", args, measure, markdown)


if __name__ == "__main__":
    sys.exit(main())
