"""Does an estimate from rows the model is not trained on remove the endorsement drift?

``bench.endorse_drift`` shows honest gradient claims moving away from the verifier's estimate as a task grows. One
reading: the verifier's rows are training rows of the model whose gradients it evaluates. This diagnostic holds out
a share of every party's rows from training (the verification hold-out), trains FV-tree on the rest (nobody refused:
false-refusal rate 1e-15), and at every tree's root measures each honest party twice: against the protocol's
estimate from the verifier's training rows (in-sample) and against the same estimate from the verifier's held-out
rows, weighted by the same PSDs (``node.privacy.weights.distribution_weights`` rescales to the rows given). Mean per
block of
25 trees over parties and verifiers; beside it the block's largest statistic the test refuses on (a stretch of g
or h, a negative flip projection) over the limit.

    python -m bench.endorse_holdout
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from bench.datasets import load
from bench.record import Run, parameters_of
from fgbdt_chain.ledger.spec.parameters import PAPER_DEPTH
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED
from fgbdt_chain.ledger.spec.task_params import DEFAULT_REFUSAL_RATE
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.kernels.histogram import BinnedRows
from fgbdt_chain.node.model.trees import tree_values
from fgbdt_chain.node.privacy.psd import build_psd, psd_budget, psd_rng
from fgbdt_chain.node.privacy.weights import distribution_weights
from fgbdt_chain.node.protocol.endorsement import estimators_for
from fgbdt_chain.node.protocol.verify import VerifierLevel, limit, measure
from fgbdt_chain.node.sim.experiment import PrepConfig, federation, partition, prepare
from fgbdt_chain.node.sim.fvtree import LevelView

CONFIGS = (("higgs", 0.8, 150), ("higgs", 0.5, 150), ("a9a", 0.8, 200))
PARTIES, HOLDOUT, BLOCK = 2, 0.2, 25
COLUMNS = ("scale g", "z g", "z flip", "z h")


def split(parts: list[np.ndarray], seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each party's rows cut at random into training rows and a held-out share ``HOLDOUT``."""
    rng = np.random.default_rng([seed, 77])
    train, held = [], []
    for idx in parts:
        perm = rng.permutation(idx)
        k = round(HOLDOUT * idx.size)
        held.append(np.sort(perm[:k]))
        train.append(np.sort(perm[k:]))
    return train, held


def holdout(name: str, theta: float, trees: int, seed: int = 0) -> dict[str, Any]:
    data, test = load(name, seed)
    train_parts, held = split(partition(data, PrepConfig(parties=PARTIES, theta=theta, seed=seed)), seed)
    # the votes' drift is what it measures, at the paper's depth, as its figures ran
    params = TrainParams(trees=trees, depth=PAPER_DEPTH, voted_trees=ALL_TREES_VOTED)
    config = PrepConfig(parties=PARTIES, theta=theta, seed=seed, refusal_rate=1e-15)
    prep = prepare(data, test, params, config, parts=train_parts)
    # the PSDs exactly as Prepared.weights builds them (same rows, ranges and seeds), to weight the held-out rows
    low, high = prep.ranges
    lows, highs = np.append(low, prep.label_range[0]), np.append(high, prep.label_range[1])
    eps = config.psd_budget_epsilon(params)
    psds = [
        build_psd(
            data.X[idx],
            data.y[idx],
            lows,
            highs,
            depth=config.psd_depth,
            max_rows=config.psd_max_rows,
            epsilon=eps,
            rng=psd_rng(config.seed, p),
            label_levels=prep.label_levels,
        )
        for p, idx in enumerate(prep.parts)
    ]
    scale = psd_budget(eps, config.psd_depth, data.n_features + 1, label_levels=prep.label_levels).leaf_scale

    def views(rows: list[np.ndarray]) -> list[list[Any]]:
        return [
            estimators_for(
                data.X[idx],
                data.y[idx],
                distribution_weights(data.X[idx], data.y[idx], psds, params.delta)[0],
                psds,
                [scale] * PARTIES,
            )
            for idx in rows
        ]

    if not np.allclose(views(prep.parts)[0][1].weight, prep.estimators()[0][1].weight):
        raise RuntimeError("the rebuilt PSDs do not reproduce the run's own weights")
    held_est = views(held)
    fed = federation(prep, "fvtree")
    nbins = fed.parties[0].rows.nbins
    held_slots = [prep.train_slots[idx] for idx in held]
    held_rows = [BinnedRows(s, nbins) for s in held_slots]
    held_raw = [np.zeros(idx.size) for idx in held]
    held_y = [data.y[idx] for idx in held]
    added = [0]
    stats: list[tuple[float, ...]] = []

    def observe(view: LevelView) -> None:
        if view.level != 0 or not view.measurements:
            return
        grown = fed.record.trees
        for tree in grown[added[0] :]:  # bring the held-out rows' scores up to the trees grown so far
            for j in range(PARTIES):
                held_raw[j] += tree_values(tree, held_slots[j])
        added[0] = len(grown)
        cand = np.asarray(view.candidates, dtype=np.int64).reshape(1, 2)
        for m in range(PARTIES):
            for j, ins in (view.measurements[m] or {}).items():
                p = 1.0 / (1.0 + np.exp(-held_raw[j]))
                g, h = p - held_y[j], p * (1 - p)
                level = VerifierLevel.of(held_rows[j], np.zeros(held[j].size, np.int64), cand, g, h)
                out = measure(level, held_est[j][m], view.claims[m], root=True)
                pair = (ins, out)
                stats.append(
                    (
                        view.tree,
                        *(q.g.a / q.g.b for q in pair),
                        *(q.g.z_stretch for q in pair),
                        *(q.g.z_flip for q in pair),
                        *(q.h.z_stretch for q in pair),
                    )
                )

    fed.level_observer = observe
    result = fed.train()
    a = np.array(stats)
    z = limit(DEFAULT_REFUSAL_RATE)
    blocks = []
    for start in range(0, trees, BLOCK):
        s = a[(a[:, 0] >= start) & (a[:, 0] < start + BLOCK)]
        blocks.append(
            {
                "trees": f"{start}-{min(start + BLOCK, trees) - 1}",
                "in_sample": [float(s[:, c].mean()) for c in (1, 3, 5, 7)],
                "held_out": [float(s[:, c].mean()) for c in (2, 4, 6, 8)],
                "worst_in": float(max(s[:, 3].max(), -s[:, 5].min(), s[:, 7].max()) / z),
                "worst_held": float(max(s[:, 4].max(), -s[:, 6].min(), s[:, 8].max()) / z),
            }
        )
    return {"blocks": blocks, "refused": [(r.party, r.tree) for r in result.refusals]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="results file (default bench/results/endorse_holdout.json, bench.record)")
    args = ap.parse_args()
    record = Run("endorse_holdout", parameters_of(args), args.out)
    results = {f"{n} M={PARTIES} theta={t}": holdout(n, t, trees) for n, t, trees in CONFIGS}
    record.save({"configs": results})
    print(tables([{"parameters": record.parameters, "results": {"configs": results}}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """The last recorded run: a table per federation, a line per block of trees, in-sample beside held out."""
    z = limit(DEFAULT_REFUSAL_RATE)
    lines = [
        "Seed 0; 20% of each party's rows held out of training; the limit at the default false-refusal rate is "
        f"{z:.2f}.",
        "",
    ]
    head = " | ".join(f"{c} in" for c in COLUMNS) + " | " + " | ".join(f"{c} held" for c in COLUMNS)
    for key, res in runs[-1]["results"]["configs"].items():
        lines += [f"**{key}**", "", f"| trees | {head} | worst / limit in | worst / limit held |", "|---" * 11 + "|"]
        for b in res["blocks"]:
            cells = [f"{v:.2f}" for v in b["in_sample"] + b["held_out"]]
            lines.append(f"| {b['trees']} | " + " | ".join(cells) + f" | {b['worst_in']:.2f} | {b['worst_held']:.2f} |")
        lines.append("")
    return "\n".join(lines).rstrip()


if __name__ == "__main__":
    raise SystemExit(main())
