"""One small task on anvil mining at fixed block intervals (``--block-time`` 1, 2 and 5 s, as a permissioned network
mines), to learn how many blocks a level takes and so what a task costs on a network of a given block time.

    python -m bench.block_interval                       # a9a, 4 parties, 2 trees of depth 4, 1, 2 and 5 s
    python -m bench.block_interval --block-times 2 --trees 3

On an automining devnet a level takes as long as its transactions and the parties' work; on a network it takes a
whole number of blocks, each round of dependent transactions (votes, then histograms relayed as one, then the
endorsements and the resolution) waiting for the next block. The figure that carries over to any network is blocks
per level: the time per level is that times the block interval, and a task's is that times its levels. Measured from
the chain's own record: the blocks and block timestamps between the first and the last ``LevelStarted`` event.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from eth_account import Account

from bench.datasets import load, objective
from bench.record import Run, parameters_of
from fgbdt_chain.deploy.requester import ChainSetup, run_task
from fgbdt_chain.ledger.devnet.anvil import start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare

PAPER_TREES, PAPER_DEPTH = 500, 8
"""The paper's setting (Gao et al. 2022), for the extrapolation."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--trees", type=int, default=2)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--block-times", default="1,2,5", help="comma-separated block intervals in seconds")
    ap.add_argument("--out", help="results file (default bench/results/block_interval.json, bench.record)")
    args = ap.parse_args()
    intervals = [float(v) for v in args.block_times.split(",")]
    record = Run("block_interval", parameters_of(args), args.out)
    train, test = load(args.data, args.seed)
    params = TrainParams(
        trees=args.trees,
        depth=args.depth,
        bins=args.bins,
        objective=objective(args.data),  # type: ignore[arg-type]
    )
    prep = prepare(train, test, params, PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed))
    rows: list[dict[str, Any]] = []
    for interval in intervals:
        rows.append(measure(prep, interval))
        record.save({"intervals": rows}, complete=False)
        print(row_text(rows[-1]), flush=True)
    record.save({"intervals": rows})
    print(tables([{"parameters": record.parameters, "results": {"intervals": rows}}]))
    return 0


def measure(prep: Any, interval: float) -> dict[str, Any]:
    """The task on a fresh anvil mining every ``interval`` seconds: wall time, and blocks and seconds per level
    between its first and last level."""
    anvil = start_anvil(block_time=interval)
    workdir = Path(tempfile.mkdtemp(prefix="fgbdt-bench-interval-"))
    try:
        client = ChainClient.connect(anvil.url)
        contract = TaskContract.deploy(client, client.new_account(10**22)).address
        requester = Account.create()
        client.fund(requester.address, 10**21)
        setup = ChainSetup(rpc=anvil.url, contract=contract, requester=requester, workdir=workdir, block_time=interval)
        started = time.perf_counter()
        report = run_task(prep, setup)
        wall = time.perf_counter() - started
        task = TaskContract.at(client, contract)
        levels = client.logs(task.contract, ["LevelStarted"], report["task"])
        first, last = levels[0].block_number, levels[-1].block_number
        seconds = int(client.w3.eth.get_block(last)["timestamp"]) - int(client.w3.eth.get_block(first)["timestamp"])
    finally:
        anvil.stop()
    spans = max(len(levels) - 1, 1)
    blocks_per_level = (last - first) / spans
    return {
        "block_time": interval,
        "wall_seconds": wall,
        "levels": len(levels),
        "blocks_per_level": blocks_per_level,
        "seconds_per_level": seconds / spans,
        "tx_count": report["tx_count"],
        "blocks": report["blocks"],
        "models_levels": prep.params.trees * prep.params.depth,
        "paper_hours": PAPER_TREES * PAPER_DEPTH * blocks_per_level * interval / 3600,
    }


def row_text(row: dict[str, Any]) -> str:
    return (
        f"block time {row['block_time']:g} s: {row['wall_seconds']:.0f} s wall, {row['blocks_per_level']:.2f} blocks "
        f"and {row['seconds_per_level']:.1f} s per level; {PAPER_TREES} trees of depth {PAPER_DEPTH} "
        f"~ {row['paper_hours']:.1f} h"
    )


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of the recorded runs: per block interval, the task's wall time, blocks and seconds per level, and
    what the paper's shape would take at that rate."""
    lines = [
        "| setting | block time s | wall s | levels | blocks per level | s per level | txs | "
        f"{PAPER_TREES} trees x depth {PAPER_DEPTH} h |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        p = run["parameters"]
        name = f"{p['data']} M={p['parties']}, {p['trees']} trees depth {p['depth']}, {p['bins']} bins"
        for row in run["results"]["intervals"]:
            lines.append(
                f"| {name} | {row['block_time']:g} | {row['wall_seconds']:.0f} | {row['levels']} "
                f"| {row['blocks_per_level']:.2f} | {row['seconds_per_level']:.1f} | {row['tx_count']} "
                f"| {row['paper_hours']:.1f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
