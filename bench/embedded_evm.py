"""The EVM behind the embedded chain: py-evm (through eth-tester, what it runs) against revm (PyPI ``pyrevm``), on
the project's own transactions.

    python -m bench.embedded_evm                 # a9a, 4 parties, 2 trees of depth 5 (the demo's levels)

Without npm a pip install has only the embedded chain, on which the demo's task took about 18 minutes where anvil
takes 30 s. This measures what an in-process revm would give. The task runs on anvil, and every block of it is read
back (each transaction's fields, its block, its status, gas and created address); then

* revm through ``pyrevm`` executes the same transactions in block order, from the same funded senders, each as a
  call or a creation at its block's number and time: execution only, with no node around it, and each must succeed
  or fail as on anvil, with anvil's contract addresses (and, reported, anvil's gas);
* the same task runs on the embedded chain (py-evm behind its JSON-RPC server, ``start_embedded_chain``), whose
  process's CPU seconds are what it spent serving the task: execution, blocks, receipts and reads.

Not a replay on py-evm: a relayed batch carries a deadline in unix seconds signed a few seconds before it was sent
(the forwarder's), which a later replay fails. Needs ``pip install pyrevm`` (not a dependency of the package).
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from eth_account import Account

from bench.datasets import load, objective
from bench.record import Run, parameters_of
from fgbdt_chain.deploy.requester import ChainSetup, run_task
from fgbdt_chain.ledger.devnet.anvil import DEFAULT_CHAIN_ID, start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--trees", type=int, default=2)
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="results file (default bench/results/embedded_evm.json, bench.record)")
    args = ap.parse_args()
    record = Run("embedded_evm", parameters_of(args), args.out)
    train, test = load(args.data, args.seed)
    params = TrainParams(
        trees=args.trees,
        depth=args.depth,
        bins=args.bins,
        objective=objective(args.data),  # type: ignore[arg-type]
    )
    prep = prepare(train, test, params, PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed))
    blocks, anvil_seconds = record_task(prep)
    txs = [tx for block in blocks for tx in block["txs"]]
    revm_seconds, gas_agrees = replay_revm(blocks)
    pyevm = run_pyevm(prep)
    results = {
        "blocks": len(blocks),
        "transactions": len(txs),
        "gas_used": sum(tx["gas_used"] for tx in txs),
        "calldata_bytes": sum(len(tx["input"]) for tx in txs),
        "anvil_task_seconds": anvil_seconds,
        "pyevm_task_seconds": pyevm["seconds"],
        "pyevm_chain_cpu_seconds": pyevm["chain_cpu_seconds"],
        "pyevm_transactions": pyevm["tx_count"],
        "pyevm_gas_used": pyevm["gas_used"],
        "revm_seconds": revm_seconds,
        # per gas: on the slow chain the parties' relayed requests expire and they send more, smaller transactions
        "speedup": (pyevm["chain_cpu_seconds"] / pyevm["gas_used"]) / (revm_seconds / sum(t["gas_used"] for t in txs)),
        "revm_gas_agrees": gas_agrees,
    }
    record.save(results)
    print(tables([{"parameters": record.parameters, "results": results}]))
    return 0


def record_task(prep: Any) -> tuple[list[dict[str, Any]], float]:
    """Run the task on a fresh anvil; every block's number, time, base fee and transactions (signed bytes, sender,
    fields, status, gas used, created address), and the task's wall time."""
    anvil = start_anvil()
    try:
        client = ChainClient.connect(anvil.url)
        contract = TaskContract.deploy(client, client.new_account(10**22)).address
        requester = Account.create()
        client.fund(requester.address, 10**21)
        setup = ChainSetup(rpc=anvil.url, contract=contract, requester=requester, workdir=Path(tempfile.mkdtemp()))
        started = time.perf_counter()
        run_task(prep, setup)
        seconds = time.perf_counter() - started
        blocks = []
        for number in range(1, client.block_number + 1):
            block = client.w3.eth.get_block(number, full_transactions=True)
            txs = []
            transactions: list[Any] = list(block["transactions"])  # full transactions, as asked
            for tx in transactions:
                raw = client.raw_result("eth_getRawTransactionByHash", ["0x" + bytes(tx["hash"]).hex()])
                receipt = client.w3.eth.get_transaction_receipt(tx["hash"])
                txs.append(
                    {
                        "raw": bytes.fromhex(str(raw).removeprefix("0x")),
                        "from": tx["from"],
                        "to": tx.get("to"),
                        "input": bytes(tx["input"]),
                        "value": int(tx["value"]),
                        "gas": int(tx["gas"]),
                        "status": int(receipt["status"]),
                        "gas_used": int(receipt["gasUsed"]),
                        "created": receipt.get("contractAddress"),
                    }
                )
            blocks.append(
                {
                    "number": number,
                    "timestamp": int(block["timestamp"]),
                    "base_fee": int(block.get("baseFeePerGas") or 0),
                    "txs": txs,
                }
            )
        return blocks, seconds
    finally:
        anvil.stop()


def _senders(blocks: list[dict[str, Any]]) -> set[str]:
    return {str(tx["from"]) for block in blocks for tx in block["txs"]}


def run_pyevm(prep: Any) -> dict[str, Any]:
    """The same task on the embedded chain (py-evm behind its JSON-RPC server, in a process of its own): its wall
    time, and the CPU seconds the chain's process spent serving it (execution, blocks, receipts, reads)."""
    from fgbdt_chain.ledger.devnet.embedded_rpc import start_embedded_chain

    chain = start_embedded_chain(process=True)
    try:
        client = ChainClient.connect(chain.url)
        contract = TaskContract.deploy(client, client.new_account(10**22)).address
        requester = Account.create()
        client.fund(requester.address, 10**21)
        setup = ChainSetup(rpc=chain.url, contract=contract, requester=requester, workdir=Path(tempfile.mkdtemp()))
        assert chain.process is not None
        before = _process_cpu(chain.process.pid)
        started = time.perf_counter()
        report = run_task(prep, setup)
        wall = time.perf_counter() - started
        cpu = _process_cpu(chain.process.pid) - before
    finally:
        chain.stop()
    return {"seconds": wall, "chain_cpu_seconds": cpu, "tx_count": report["tx_count"], "gas_used": report["gas_used"]}


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a running process has used, from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def replay_revm(blocks: list[dict[str, Any]], chain_id: int = DEFAULT_CHAIN_ID) -> tuple[float, bool]:
    """Seconds revm takes to execute the transactions of ``blocks``, and whether every one used anvil's gas."""
    from pyrevm import EVM, BlockEnv, CfgEnv, Env

    # the chain id the transactions were signed for, which the forwarder's EIP-712 domain reads (CHAINID)
    evm = EVM(env=Env(cfg=CfgEnv(chain_id=chain_id)), spec_id="CANCUN")
    for sender in _senders(blocks):
        evm.set_balance(str(sender), 10**27)
    agrees = True
    started = time.perf_counter()
    for block in blocks:
        evm.set_block_env(BlockEnv(number=block["number"], timestamp=block["timestamp"], gas_limit=10**9))
        for tx in block["txs"]:
            if tx["to"] is None:
                address = evm.deploy(str(tx["from"]), tx["input"], tx["value"], tx["gas"])
                if address.lower() != str(tx["created"]).lower():
                    raise AssertionError(f"revm: block {block['number']}: created {address}, anvil {tx['created']}")
                ok, used = True, int(evm.result.gas_used)
            else:
                try:  # pyrevm raises on a revert, whose gas it names in the message
                    evm.message_call(str(tx["from"]), str(tx["to"]), tx["input"], tx["value"], tx["gas"])
                    ok, used = True, int(evm.result.gas_used)
                except RuntimeError as exc:
                    found = re.search(r"gas_used: (\d+)", str(exc))
                    ok, used = False, int(found.group(1)) if found else -1
            if int(ok) != tx["status"]:
                raise AssertionError(f"revm: block {block['number']}: success differs from anvil's")
            agrees &= used == tx["gas_used"]
    return time.perf_counter() - started, agrees


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown: the task, and each EVM's seconds for its transactions."""
    lines = [
        "| setting | txs | gas | calldata MB | anvil task s | embedded task s (txs) | py-evm chain CPU s "
        "| revm execution s | per gas, revm faster | revm gas as anvil |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        p, r = run["parameters"], run["results"]
        name = f"{p['data']} M={p['parties']}, {p['trees']} trees depth {p['depth']}, {p['bins']} bins"
        lines.append(
            f"| {name} | {r['transactions']} | {r['gas_used'] / 1e6:.0f}M | {r['calldata_bytes'] / 1e6:.2f} "
            f"| {r['anvil_task_seconds']:.1f} | {r['pyevm_task_seconds']:.1f} ({r['pyevm_transactions']}) "
            f"| {r['pyevm_chain_cpu_seconds']:.1f} "
            f"| {r['revm_seconds']:.2f} | {r['speedup']:.0f}x | {r['revm_gas_agrees']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
