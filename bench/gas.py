"""Gas of FGBDT-Chain on anvil: per level and per tree, and the largest federation exact Shapley fits in a block.

Run:  python -m bench.gas            (starts its own anvil from node_modules; ~1-2 min on 2 cores)
      python -m bench.gas --parties 2,4 --depth 4 --bins 16 --rpc http://127.0.0.1:8545

For each M, one tree of the given depth is trained on synthetic rows (``ledger.wrappers.federation.RowSource``:
histograms that
keep the contract's exact rules), enough of them that nearly every node splits (the widest level of depth 8 has up to
128 open nodes), and the gas of every transaction is summed per step. Then ``resolveNode`` of one node
and ``splitShapley`` alone are measured for growing M, to find the largest M whose exact Shapley computation for a node
of the widest level fits a 30M-gas block (nodes are resolved one per transaction, so that is the binding limit).
Above ``EXACT_MAX_PARTIES`` the contract's ``resolveNode`` estimates the values instead
(``ledger.spec.shapley_estimate``), so its gas there is the estimate's; the sweep stops at the first M whose exact
``splitShapley`` alone exceeds a block.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from typing import Any

from eth_account.signers.local import LocalAccount

from bench.record import Run, parameters_of
from fgbdt_chain.ledger.devnet.anvil import start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.edges import encode_edges
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.spec.shapley_estimate import EXACT_MAX_PARTIES
from fgbdt_chain.ledger.wrappers.contracts import MathContract, Status, TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.federation import LevelOutcome, RowSource, run_level

BLOCK_GAS: int = 30_000_000
WIDEST_PROOF: int = 7  # Merkle proof length for 128 open nodes


ROWS_PER_PARTY = 3000
"""Enough rows that a depth-8 tree's widest level still has a couple of dozen rows per party and node."""


def open_task(
    client: ChainClient, task: TaskContract, cfg: TaskConfig, m: int
) -> tuple[int, list[LocalAccount], LocalAccount, LocalAccount]:
    requester = client.new_account(10**21)
    parties = [client.new_account(10**21) for _ in range(m)]
    resolver = client.new_account(10**22)
    tid, _ = task.create_task(requester, cfg, [0] * 8, [ONE] * 8, reward=10**18)
    for p in parties:
        task.join(p, tid, b"psd", "http://x")
        task.approve(requester, tid, p.address)
    # edges whose features use every bin: the task's histograms are bins + 1 slots wide, as the rows here are
    task.start(requester, tid, encode_edges([[(i + 1) / cfg.bins for i in range(cfg.bins - 1)]] * 8))
    return tid, parties, requester, resolver


def level_gas(out: LevelOutcome) -> dict[str, int]:
    sums: dict[str, int] = defaultdict(int)
    maxes: dict[str, int] = defaultdict(int)
    for tx in out.txs:
        sums[tx.function] += tx.gas_used
        maxes[tx.function] = max(maxes[tx.function], tx.gas_used)
    return {
        "nodes": len(out.open_nodes),
        # the last vote and the last submission close their steps (top-2 fixed, resolution opened) in the same
        # transaction: their gas includes the closing
        "votes": sums["submitVotes"],
        "hists": sums["submitHistograms"],
        "hist_max": maxes["submitHistograms"],
        "resolve": sums["resolveNode"],
        "resolve_max": maxes["resolveNode"],
        "total": sum(sums.values()),
    }


def train_tree(client: ChainClient, task: TaskContract, m: int, depth: int, bins: int, seed: int) -> list[dict]:
    cfg = TaskConfig(
        trees=1, depth=depth, bins=bins, min_parties=m, max_parties=m, min_rows=1, step_blocks=1000, lam=ONE
    )
    tid, parties, _, resolver = open_task(client, task, cfg, m)
    rng = random.Random(seed)
    source = RowSource(rng, [p.address for p in parties], ROWS_PER_PARTY, 8, bins + 1)
    source.start_tree(0)
    rows = []
    while task.state(tid).status == Status.TRAINING:
        nodes = task.state(tid).open_nodes()
        votes: dict[str, list[int]] = {p.address: [rng.randint(0, 7) for _ in nodes] for p in parties}
        out = run_level(task, tid, parties, votes, source, resolver)
        source.follow(out)
        rows.append(level_gas(out))
    return rows


def node_resolve_gas(client: ChainClient, task: TaskContract, m: int, bins: int) -> int:
    """Gas of resolveNode for the root of a depth-1 task with M parties (proof length 0)."""
    rows = train_tree(client, task, m, 1, bins, seed=m)
    return rows[0]["resolve_max"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parties", default="2,4,8,10")
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--max-m", type=int, default=16)
    ap.add_argument("--rpc", default=None, help="use this node instead of starting anvil")
    ap.add_argument("--out", help="results file (default bench/results/gas.json, bench.record)")
    args = ap.parse_args()
    record = Run("gas", parameters_of(args, drop=("rpc",)), args.out)
    node = None if args.rpc else start_anvil()
    try:
        client = ChainClient.connect(args.rpc or node.url)  # type: ignore[union-attr]
        owner = client.new_account(10**22)
        task = TaskContract.deploy(client, owner)
        math = MathContract.deploy(client, owner)
        levels = {}
        for m in [int(x) for x in args.parties.split(",")]:
            levels[str(m)] = train_tree(client, task, m, args.depth, args.bins, seed=m)
            print(f"M={m}: {sum(r['total'] for r in levels[str(m)]):,} gas per tree", file=sys.stderr, flush=True)
        shapley = []
        for m in range(2, args.max_m + 1):
            rng = random.Random(m)
            sides = [[rng.randint(-5 * ONE, 5 * ONE) for _ in range(m)] for _ in range(4)]
            sides[1] = [abs(x) for x in sides[1]]
            sides[3] = [abs(x) for x in sides[3]]
            data = math.contract.functions.splitShapley(*sides, ONE)._encode_transaction_data()
            shap = int(client.w3.eth.estimate_gas({"to": math.contract.address, "data": data}))
            res = node_resolve_gas(client, task, m, args.bins)
            # the widest level's nodes carry a 7-hash proof per party: 7 keccaks + 224 calldata bytes each
            res_widest = res + m * WIDEST_PROOF * (224 // WIDEST_PROOF * 16 + 36 + 6)
            exact = m <= EXACT_MAX_PARTIES
            shapley.append({"parties": m, "split_shapley": shap, "resolve_widest": res_widest, "exact": exact})
            print(f"M={m}: splitShapley {shap:,}, resolveNode {res_widest:,}", file=sys.stderr, flush=True)
            if shap > BLOCK_GAS:
                break  # exact cost grows as M * 2^M: no larger M's exact values fit either
    finally:
        if node is not None:
            node.stop()
    fits = [row["parties"] for row in shapley if row["exact"] and row["resolve_widest"] <= BLOCK_GAS]
    results = {
        "rows_per_party": ROWS_PER_PARTY,
        "block_gas": BLOCK_GAS,
        "levels": levels,
        "per_tree": {m: sum(r["total"] for r in rows) for m, rows in levels.items()},
        "shapley": shapley,
        "largest_parties_in_a_block": max(fits, default=0),
    }
    record.save(results)
    print(tables([{"parameters": record.parameters, "results": results}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of a recorded run (gas is deterministic: the last run says it all)."""
    p, r = runs[-1]["parameters"], runs[-1]["results"]
    lines = [
        f"Gas per tree (depth {p['depth']}, {p['bins']} bins, {r['rows_per_party']} rows per party; one block holds "
        f"{r['block_gas'] / 1e6:.0f}M gas):",
        "",
        "| M | gas per tree | blocks of 30M | largest level's gas |",
        "|---|---|---|---|",
    ]
    for m, total in r["per_tree"].items():
        widest = max(level["total"] for level in r["levels"][m])
        lines.append(f"| {m} | {total:,} | {total / r['block_gas']:.1f} | {widest:,} |")
    m, rows = next(iter(r["levels"].items()))
    lines += [
        "",
        f"Per level at M = {m} (votes and histograms include the closing of their steps):",
        "",
        "| level | open nodes | votes | histograms | largest histogram tx | resolve | largest resolve tx | total |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {lvl} | {x['nodes']} | {x['votes']:,} | {x['hists']:,} | {x['hist_max']:,} | {x['resolve']:,} "
            f"| {x['resolve_max']:,} | {x['total']:,} |"
            for lvl, x in enumerate(rows)
        ),
        "",
        "Exact Shapley: `splitShapley` alone (eth_estimateGas of the pure call) and one `resolveNode` of the widest "
        f"level (7-hash proofs), whose values are exact up to {EXACT_MAX_PARTIES} parties and estimated above:",
        "",
        "| M | splitShapley | resolveNode | values in resolveNode | exact fits a 30M block |",
        "|---|---|---|---|---|",
        *(
            f"| {x['parties']} | {x['split_shapley']:,} | {x['resolve_widest']:,} "
            f"| {'exact' if x['exact'] else 'estimated'} "
            f"| {'yes' if x['exact'] and x['resolve_widest'] <= r['block_gas'] else 'no'} |"
            for x in r["shapley"]
        ),
        "",
        f"Largest M whose exact Shapley resolution of one widest-level node fits a 30M block: "
        f"**{r['largest_parties_in_a_block']}**.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
