"""Training on chain (anvil, separate party processes) next to ``simulate`` on the same settings.

Starts its own anvil, deploys, and runs one task; reports wall time, transactions, gas and bytes on chain
(calldata), the ratio to the simulator's training time on the same partition, bins, seed and parameters, whether the
two models are identical, and where each party's time went.

    python -m bench.chain --data a9a --parties 4 --theta 0.8 --trees 50 --depth 6
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from eth_account import Account

from bench.datasets import load
from deploy.requester import ChainSetup, run_task
from ledger.anvil import start_anvil
from ledger.client import ChainClient
from ledger.contracts import TaskContract
from node.experiment import PrepConfig, prepare, run
from node.fvtree import TrainParams
from node.histogram import warm_up
from node.model import Model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tick", type=float, default=0.25)
    ap.add_argument("--out", default="bench/results/chain.json")
    args = ap.parse_args()
    train, test = load(args.data, args.seed)
    params = TrainParams(trees=args.trees, depth=args.depth, bins=args.bins)
    prep = prepare(train, test, params, PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed))
    warm_up()
    sim_report, sim_model, _ = run(prep, "fvtree")
    assert sim_model is not None
    anvil = start_anvil()
    workdir = Path(tempfile.mkdtemp(prefix="fgbdt-bench-chain-"))
    try:
        client = ChainClient.connect(anvil.url)
        contract = TaskContract.deploy(client, client.new_account(10**22)).address
        requester = Account.create()
        client.fund(requester.address, 10**21)
        setup = ChainSetup(
            rpc=anvil.url,
            contract=contract,
            requester=requester,
            workdir=workdir,
            tick_seconds=args.tick,
            timeout_seconds=24 * 3600,
        )
        start = time.perf_counter()
        report = run_task(prep, setup)
        wall = time.perf_counter() - start
        calldata = 0
        for b in range(1, client.block_number + 1):
            for tx in client.w3.eth.get_block(b, full_transactions=True)["transactions"]:
                calldata += len(tx["input"])  # type: ignore[call-overload]
    finally:
        anvil.stop()
    same = Model.from_json_dict(report["model"]).trees == sim_model.trees
    splits = [_time_split(p) for p in sorted(workdir.glob("party-*.log"))]
    result = {
        "command": "python -m bench.chain " + " ".join(sys.argv[1:]),
        "settings": vars(args),
        "chain_wall_seconds": wall,
        "simulate_train_seconds": sim_report["train_seconds"],
        "simulate_prep_seconds": sim_report["prep_seconds"],
        "ratio": wall / (sim_report["train_seconds"] + sim_report["prep_seconds"]),
        "tx_count": report["tx_count"],
        "gas_used": report["gas_used"],
        "calldata_bytes": calldata,
        "test_error_chain": report["test_error"],
        "test_error_simulate": sim_report["test_error"],
        "models_identical": same,
        "party_time_split": splits,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print("| setting | chain wall s | simulate s | ratio | txs | gas | calldata MB | test error | identical |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.data} M={args.parties} theta={args.theta}, {args.trees} trees depth {args.depth} "
        f"| {wall:.0f} | {sim_report['train_seconds'] + sim_report['prep_seconds']:.1f} | {result['ratio']:.0f}x "
        f"| {report['tx_count']} | {report['gas_used'] / 1e9:.2f}G | {calldata / 1e6:.1f} "
        f"| {report['test_error']:.4f} | {same} |"
    )
    for i, split in enumerate(splits):
        print(f"- party {i}: {split}")
    return 0


def _time_split(log: Path) -> str:
    found = re.findall(r"time split: (.*)", log.read_text())
    return found[-1] if found else "(no time split logged)"


if __name__ == "__main__":
    sys.exit(main())
