"""Why leaving paid: honest parties' split Shapley values per tree, and how often a party's tree total is negative.

Equation 7's utility is not monotone in the coalition: under label skew one party's residuals at a node run
against another's, so adding it lowers the coalition's gain and its Shapley value for the split is negative. When
that goes on tree after tree, a party whose total is positive gains by leaving, and the cheapest way to leave was to
get its histograms refused (``bench.endorse``: every attack on credit at tree 50 raised the attacker's share by 5-8
points at M = 2 until rewards were paid on completion, ``ledger.spec.reference.payouts``). This measures it with
everyone
honest: per party, the mean contribution per tree in the voted trees and in the drawn trees of the default
(``votedTrees`` 50), the share of trees whose contribution is negative, and the share the party would have had by
leaving after the voted trees (the old payout, with its total stopped at tree 50 and the others' totals as trained
with it, an approximation) next to its share at the end.

    python -m bench.negative_shapley --datasets credit,a9a,higgs,susy --parties 2,4 --seeds 0,1,2
"""

from __future__ import annotations

import sys
from typing import Any

from bench import honest_sweep
from bench.stats import mean_se
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.task_params import DEFAULT_VOTED_TREES
from fgbdt_chain.node.sim.experiment import federation


def measure(name: str, parties: int, theta: float, seed: int, trees: int, depth: int) -> dict[str, Any]:
    """One honest federation's per-tree contributions, split at the default's last voted tree."""
    result = federation(honest_sweep.prepared(name, parties, theta, seed, trees, depth), "fvtree").train()
    switch = min(DEFAULT_VOTED_TREES, trees)
    per_tree = [[ref.from_fixed(t[i]) for t in result.per_tree_total] for i in range(parties)]
    at_switch = [sum(result.per_tree_total[t][i] for t in range(switch)) for i in range(parties)]
    shares = result.shares()
    out = []
    for i in range(parties):
        voted, drawn = per_tree[i][:switch], per_tree[i][switch:]
        out.append(
            {
                "party": i,
                "mean_per_tree_voted": sum(voted) / len(voted),
                "mean_per_tree_drawn": sum(drawn) / len(drawn) if drawn else None,
                "negative_trees_drawn": sum(x < 0 for x in drawn) / len(drawn) if drawn else None,
                "share_at_end": shares[i],
                "share_leaving_after_voted_trees": _leaving_share(result.total, at_switch[i], i),
            }
        )
    return {"dataset": name, "parties": parties, "theta": theta, "seed": seed, "per_party": out}


def _leaving_share(totals: list[int], frozen: int, party: int) -> float:
    """The old payout's share of ``party`` had its total stopped at ``frozen``, the others' totals as trained with it
    (an approximation: without it the model, and so their totals, would differ): ``reference.reward_shares`` with
    everyone paid, as before paying on completion."""
    stopped = [frozen if j == party else t for j, t in enumerate(totals)]
    return ref.reward_shares(stopped, [True] * len(totals))[party]


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of recorded sweeps of one setting: their grid points together."""
    return markdown([point for run in runs for point in run["results"]["runs"]])


def markdown(runs: list[dict[str, Any]]) -> str:
    lines = [
        "Per party (mean ± SE over seeds): contribution per tree in the voted and in the drawn trees, the share of "
        "drawn trees whose contribution is negative, its share of the reward at the end, and the share it would have "
        "had under the old payout by leaving after the voted trees (the others' totals as trained with it).",
        "",
        "| data | M | theta | party | per tree, voted | per tree, drawn | drawn trees < 0 | share at the end | "
        "share leaving after tree 50 (old payout) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["dataset"], r["parties"], r["theta"]) for r in runs})
    for d, m, theta in keys:
        group = [r for r in runs if (r["dataset"], r["parties"], r["theta"]) == (d, m, theta)]
        for i in range(m):
            rows = [r["per_party"][i] for r in group]

            def cell(key: str, fmt: str, scale: float = 1.0, rows: list[dict[str, Any]] = rows) -> str:
                vals = [x[key] * scale for x in rows if x[key] is not None]
                if not vals:
                    return "-"
                mean, se = mean_se(vals)
                return f"{mean:{fmt}} ± {se:{fmt}}"

            lines.append(
                f"| {d} | {m} | {theta} | {i} | {cell('mean_per_tree_voted', ',.0f')} | "
                f"{cell('mean_per_tree_drawn', ',.0f')} | {cell('negative_trees_drawn', '.0f', 100)}% | "
                f"{cell('share_at_end', '.1f', 100)} | {cell('share_leaving_after_voted_trees', '.1f', 100)} |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = honest_sweep.parser(__doc__, "negative_shapley")
    args = ap.parse_args()
    if args.trees <= DEFAULT_VOTED_TREES:
        ap.error(f"--trees must exceed the {DEFAULT_VOTED_TREES} voted trees, so that some trees draw")
    return honest_sweep.run("negative_shapley", args, measure, markdown)


if __name__ == "__main__":
    sys.exit(main())
