"""How the honest endorsement statistics move as a task grows past the 50 trees of ``bench.endorse`` (issue 10).

Every verifier's root measurement of every honest party, tree by tree, with the test kept from refusing (a false-
refusal rate of 1e-15, so that the statistics of a full task are seen): the fitted scale of the gradient and hessian
claims on the verifier's estimate (``a / b`` of ``node.verify.Quantity``: 1 when the estimate is right on average),
the stretch and flip statistics, and the largest over the limit at the task's default rate. Mean per block of 25
trees, over the parties and verifiers.

    python -m bench.endorse_drift
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.datasets import load
from fgbdt_chain.ledger.task_params import DEFAULT_REFUSAL_RATE
from fgbdt_chain.node.experiment import PrepConfig, federation, prepare
from fgbdt_chain.node.fvtree import LevelView, TrainParams
from fgbdt_chain.node.verify import limit

CONFIGS = (("higgs", 2, 0.8, 150), ("higgs", 2, 0.5, 150), ("susy", 2, 0.8, 300), ("a9a", 2, 0.8, 200))
BLOCK = 25


def drift(name: str, parties: int, theta: float, trees: int, seed: int = 0) -> list[dict[str, Any]]:
    """Per block of trees: the honest statistics' means and the largest stretch or flip over the default limit."""
    train, test = load(name, seed)
    prep = prepare(
        train, test, TrainParams(trees=trees), PrepConfig(parties=parties, theta=theta, seed=seed, refusal_rate=1e-15)
    )
    rows: dict[int, list[tuple[float, ...]]] = {}

    def observe(view: LevelView) -> None:
        if view.level != 0 or not view.measurements:
            return
        for measured in view.measurements:
            for mm in (measured or {}).values():
                rows.setdefault(view.tree // BLOCK, []).append(
                    (mm.g.a / mm.g.b, mm.h.a / mm.h.b, mm.g.z_stretch, mm.g.z_flip, mm.h.z_stretch)
                )

    federation(prep, "fvtree", observer=observe).train()
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
            }
        )
    return out


def main() -> int:
    results = {f"{n} M={m} theta={t}": drift(n, m, t, trees) for n, m, t, trees in CONFIGS}
    out = Path("bench/results/endorse_drift.json")
    out.write_text(json.dumps({"command": "python -m bench.endorse_drift", "results": results}, indent=1))
    lines = ["Command: `python -m bench.endorse_drift` (seed 0, 500-tree defaults cut at the tree counts shown)", ""]
    for key, blocks in results.items():
        lines += [
            f"**{key}**",
            "",
            "| trees | scale g | scale h | z stretch g | z flip g | z stretch h | worst / limit |",
        ]
        lines.append("|---|---|---|---|---|---|---|")
        for b in blocks:
            lines.append(
                f"| {b['trees']} | {b['scale_g']:.3f} | {b['scale_h']:.3f} | {b['z_g']:.2f} | {b['z_flip']:.2f} "
                f"| {b['z_h']:.2f} | {b['worst_over_limit']:.2f} |"
            )
        lines.append("")
    out.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines), file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
