"""``fgbdt deploy``: deploy the contracts to any Ethereum JSON-RPC chain with a funded key, and write the
deployment file that ``train``, ``node``, ``serve`` and ``audit`` read.

Why a command of its own: ``fgbdt devnet up`` deploys to the anvil it starts, funding its deployer from anvil's
unlocked accounts. A chain someone else runs (a consortium's QBFT network, a hosted testnet, a public L2) has no
unlocked account and no dev methods; there the deployer is a key its owner funded, every transaction is signed here
and priced from the chain (``ledger.rpc.client``), and the bytecode must be what the chain's EVM runs: the chain is
probed (``ledger.rpc.evm_probe``) and the newest shipped build it runs is deployed, or the command refuses, naming
the opcode the chain lacks. The libraries ``FGBDTChain`` links are deployed first, then the ERC-2771 forwarder, then
``FGBDTChain`` trusting it; each address is checked to hold code before the file is written.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from eth_utils import to_checksum_address

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.deploy.deployment import ETHER, FORWARDER_CONTRACT, TASK_CONTRACT, read_key
from fgbdt_chain.ledger.rpc import evm_probe
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ChainRefused
from fgbdt_chain.ledger.toolchain.compile import EVM_VERSIONS, CompileError, load_artifacts
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder

WIDEST_LEVEL_GAS: int = 10_759_038
"""The largest transaction of the paper's shape (500 trees of depth 8, four parties): a relayed level, as
``bench.chain`` measured it (``max_tx_gas``). A chain whose blocks hold less cannot train that shape."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "deploy",
        help="deploy the contracts to any Ethereum JSON-RPC chain with a funded key",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rpc", required=True, help="JSON-RPC URL of the chain (http or https)")
    p.add_argument("--key", required=True, help="file holding the deployer's private key (hex); it pays the gas")
    p.add_argument("--out", required=True, help="deployment file to write (read by train, node, serve and audit)")
    p.add_argument(
        "--evm-version",
        choices=("auto", *EVM_VERSIONS),
        default="auto",
        help="which build of the contracts to deploy (default: the newest the chain runs, probed)",
    )
    p.add_argument(
        "--confirmations",
        type=int,
        default=1,
        help="blocks that must hold each deployment transaction (1: its own; more where blocks can be reorganised)",
    )
    p.add_argument(
        "--block-time",
        type=float,
        default=None,
        metavar="SECONDS",
        help="the chain's block interval, recorded for the requester's pace (default: not recorded)",
    )
    p.add_argument("--relayer-key", default=None, help="a relayer key file to record for `fgbdt serve` (not funded)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one JSON-RPC answer")
    p.set_defaults(func=run_deploy)


def choose_evm_version(client: ChainClient, asked: str) -> str:
    """The build to deploy: ``asked``, checked against what the chain runs, or the newest shipped one it runs."""
    try:
        ran = evm_probe.supported_versions(client.w3.provider)
    except ChainRefused as exc:
        raise UserError(f"cannot tell which EVM the chain runs: {exc}") from exc
    if asked != "auto":
        if asked in {p.evm_version for p in evm_probe.PROBES} and asked not in ran:
            raise UserError(
                f"the chain does not run {evm_probe.requirement(asked)}: the {asked} build cannot run there"
                + (f"; it runs the {ran[0]} build" if ran else "")
            )
        return asked
    version = evm_probe.newest(ran, EVM_VERSIONS)
    if version is not None:
        return version
    oldest = EVM_VERSIONS[-1]
    raise UserError(
        f"the chain's EVM is older than every build of the contracts: it does not run {evm_probe.requirement(oldest)}"
        f" (builds: {', '.join(EVM_VERSIONS)}). Enable that fork in the network's genesis (Besu: shanghaiTime; geth "
        "and GoQuorum: shanghaiTime in the chain config) or deploy to a chain that has it"
    )


def run_deploy(args: argparse.Namespace) -> int:
    """Probe, deploy, check and write the deployment file; print what was deployed and what to run next."""
    if args.confirmations < 1:
        raise UserError("--confirmations must be at least 1")
    deployer = read_key(args.key, "deployer key")
    try:
        client = ChainClient.connect(args.rpc, timeout=args.timeout)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    except OSError as exc:
        raise UserError(f"the chain at {args.rpc} does not answer: {exc}") from exc
    client.confirmations = args.confirmations
    balance = client.balance(deployer.address)
    if balance == 0:
        raise UserError(
            f"the deployer {deployer.address} holds no ether on chain {client.chain_id} at {args.rpc}: fund it first"
        )
    evm_version = choose_evm_version(client, args.evm_version)
    try:
        client.artifacts = load_artifacts(evm_version)
    except CompileError as exc:
        raise UserError(f"no {evm_version} build of the contracts: {exc}") from exc
    latest = client.w3.eth.get_block("latest")
    gas_limit = int(latest["gasLimit"])
    start_block = int(latest["number"])
    fees = "EIP-1559 fees" if latest.get("baseFeePerGas") is not None else "a legacy gas price"
    print(
        f"chain {client.chain_id} at {args.rpc}: {_client_version(client)}, block {start_block}, "
        f"{gas_limit / 1e6:.1f}M gas per block, {fees}"
    )
    print(f"deploying the {evm_version} build from {deployer.address} (balance {balance / ETHER:.4f} ETH)")
    started = time.monotonic()
    try:
        forwarder = Forwarder.deploy(client, deployer)
        task = TaskContract.deploy(client, deployer, forwarder.address)
    except ChainRefused as exc:
        raise UserError(str(exc)) from exc
    except (OSError, TimeoutError) as exc:
        raise UserError(f"the chain at {args.rpc} stopped answering during the deployment: {exc}") from exc
    contracts = {FORWARDER_CONTRACT: forwarder.address, TASK_CONTRACT: task.address}
    for name, address in {**client.libraries, **contracts}.items():
        if len(client.w3.eth.get_code(to_checksum_address(address))) == 0:
            raise UserError(f"{name} at {address} holds no code after its deployment")
    if task.trusted_forwarder().lower() != forwarder.address.lower():
        raise UserError(f"{TASK_CONTRACT} at {task.address} does not trust the forwarder deployed")
    gas = sum(r.gas_used for r in client.gas_log)
    info: dict[str, Any] = {
        "rpc_url": args.rpc,
        "chain_id": client.chain_id,
        "deployer": deployer.address,
        "block": start_block,
        "evm_version": evm_version,
        "contracts": contracts,
        "libraries": dict(client.libraries),
        "block_gas_limit": gas_limit,
        "confirmations": args.confirmations,
        "deployment_gas": gas,
        "client_version": _client_version(client),
    }
    if args.block_time is not None:
        info["block_time"] = args.block_time
    if args.relayer_key:
        info["relayer_key"] = str(Path(args.relayer_key).resolve())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(info, indent=2) + "\n")
    for record in client.gas_log:
        print(f"  {record.function}: {record.gas_used:,} gas")
    print(f"{TASK_CONTRACT} {task.address}, {FORWARDER_CONTRACT} {forwarder.address}")
    elapsed = time.monotonic() - started
    print(f"{len(client.gas_log)} transactions, {gas:,} gas, {elapsed:.1f} s; deployment file: {out}")
    if gas_limit < WIDEST_LEVEL_GAS:
        print(
            f"note: blocks of {gas_limit:,} gas cannot hold the widest level of the paper's shape "
            f"({WIDEST_LEVEL_GAS:,} gas for 500 trees of depth 8): train shallower trees or fewer bins, or raise the "
            "network's block gas limit"
        )
    print("next:")
    print(f"  fgbdt train --deployment {out} --funder-key KEYFILE --data TRAIN --test TEST --parties 4")
    print(f"  fgbdt audit --deployment {out} --task 1")
    return 0


def _client_version(client: ChainClient) -> str:
    try:
        return str(client.w3.client_version)
    except Exception:  # a node that does not say
        return "unknown node"
