"""How the honest endorsement statistics move as a task grows past the 50 trees of ``bench.endorse``.

Every verifier's root measurement of every honest party, tree by tree, with the test kept from refusing (a false-
refusal rate of 1e-15, so that the statistics of a full task are seen): the fitted scale of the gradient and hessian
claims on the verifier's estimate (``a / b`` of ``node.protocol.verify.Quantity``: 1 when the estimate is right on
average),
the stretch and flip statistics, and the largest over the limit at the task's default rate. Mean per block of 25
trees, over the parties and verifiers.

The cause, measured here too: the parties' votes. FV-tree's candidates are the features each party's own rows prefer,
so the model fits a party's rows better than another party's rows of the same label (the residual ratio column; the
partition draws a label's rows at random, so a party-blind learner fits them alike), while the verifier's estimate
assumes they are alike. ``allfeatures`` (the same federation with the candidates taken from the pooled histograms
of every feature, no votes) keeps the statistics at their premise.

    python -m bench.endorse_drift                 # every tree votes (the paper), allfeatures and drawn
    python -m bench.endorse_drift --part switch   # votes for the first 50 trees (the default) or 25, then drawn
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from bench.datasets import load
from bench.record import Run, parameters_of
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.parameters import PAPER_DEPTH
from fgbdt_chain.ledger.spec.task_params import DEFAULT_REFUSAL_RATE, DEFAULT_VOTED_TREES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.protocol.verify import limit
from fgbdt_chain.node.sim.experiment import PrepConfig, federation, prepare
from fgbdt_chain.node.sim.fvtree import LevelView

ALL = ref.ALL_TREES_VOTED
PARTS = {
    "votes": (
        ("higgs", 2, 0.8, 150, "fvtree", ALL),
        ("higgs", 2, 0.8, 150, "allfeatures", ALL),
        ("higgs", 2, 0.8, 150, "drawn", ALL),
        ("higgs", 2, 0.5, 150, "fvtree", ALL),
        ("susy", 2, 0.8, 300, "fvtree", ALL),
        ("a9a", 2, 0.8, 200, "fvtree", ALL),
    ),
    "switch": tuple(
        (name, 2, theta, trees, "fvtree", voted)
        for voted in (DEFAULT_VOTED_TREES, 25)
        for name, theta, trees in (("higgs", 0.8, 150), ("higgs", 0.5, 150), ("susy", 0.8, 300), ("a9a", 0.8, 200))
    ),
}
"""Per part: (data, M, theta, trees, algorithm, voted trees); ``votes`` lets every tree vote, the paper's FV-tree."""
BLOCK = 25


def drift(
    name: str, parties: int, theta: float, trees: int, algo: str, voted_trees: int = ALL, seed: int = 0
) -> list[dict[str, Any]]:
    """Per block of trees: the honest statistics' means, the largest stretch or flip over the default limit, and how
    much better the model fits a label's rows in the party where that label is rarest than where it is commonest
    (the mean residual |g| of the label's rows, rarest over commonest; 1 when the fit does not depend on the party:
    rows of one label are exchangeable between the parties, the partition draws them at random)."""
    train, test = load(name, seed)
    prep = prepare(
        train,
        test,
        TrainParams(trees=trees, depth=PAPER_DEPTH, voted_trees=voted_trees),
        PrepConfig(parties=parties, theta=theta, seed=seed, refusal_rate=1e-15),
    )
    rows: dict[int, list[tuple[float, ...]]] = {}
    ys = prep.party_y()
    share = np.array([[np.mean(y == c) for c in (0, 1)] for y in ys])
    rare, common = share.argmin(axis=0), share.argmax(axis=0)
    fit: dict[int, list[float]] = {}

    def observe(view: LevelView) -> None:
        if view.level != 0 or not view.measurements:
            return
        residual = [[float(np.abs(g[y == c]).mean()) for c in (0, 1)] for g, y in zip(view.g, ys, strict=True)]
        fit.setdefault(view.tree // BLOCK, []).append(
            float(np.mean([residual[rare[c]][c] / residual[common[c]][c] for c in (0, 1)]))
        )
        for measured in view.measurements:
            for mm in (measured or {}).values():
                rows.setdefault(view.tree // BLOCK, []).append(
                    (mm.g.a / mm.g.b, mm.h.a / mm.h.b, mm.g.z_stretch, mm.g.z_flip, mm.h.z_stretch)
                )

    federation(prep, algo, observer=observe).train()
    z = limit(DEFAULT_REFUSAL_RATE)
    out = []
    for block, values in sorted(rows.items()):
        a = np.array(values)
        out.append(
            {
                "trees": f"{block * BLOCK}-{min((block + 1) * BLOCK, trees) - 1}",
                "scale_g": float(a[:, 0].mean()),
                "scale_h": float(a[:, 1].mean()),
                "z_g": float(a[:, 2].mean()),
                "z_flip": float(a[:, 3].mean()),
                "z_h": float(a[:, 4].mean()),
                "worst_over_limit": float(max(a[:, 2].max(), -a[:, 3].min(), a[:, 4].max()) / z),
                "fit_rare_over_common": float(np.mean(fit[block])),
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=tuple(PARTS), default="votes")
    ap.add_argument("--out", help="results file (default bench/results/endorse_drift.json, bench.record)")
    args = ap.parse_args()
    record = Run("endorse_drift", parameters_of(args), args.out)
    results = {
        f"{n} M={m} theta={t} {algo}" + (f", votes for {v} trees" if v < ALL and algo == "fvtree" else ""): drift(
            n, m, t, trees, algo, v
        )
        for n, m, t, trees, algo, v in PARTS[args.part]
    }
    record.save({"blocks": results})
    print(tables([{"parameters": record.parameters, "results": {"blocks": results}}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """The last recorded run of a part: a table per federation, a line per block of trees."""
    lines = ["Seed 0, 500-tree defaults cut at the tree counts shown.", ""]
    for key, blocks in runs[-1]["results"]["blocks"].items():
        lines += [
            f"**{key}**",
            "",
            "| trees | scale g | scale h | z stretch g | z flip g | z stretch h | worst / limit "
            "| residual rare / common |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for b in blocks:
            lines.append(
                f"| {b['trees']} | {b['scale_g']:.3f} | {b['scale_h']:.3f} | {b['z_g']:.2f} | {b['z_flip']:.2f} "
                f"| {b['z_h']:.2f} | {b['worst_over_limit']:.2f} | {b['fit_rare_over_common']:.3f} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip()


if __name__ == "__main__":
    raise SystemExit(main())
