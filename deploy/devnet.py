"""``fgbdt devnet up|status|down``: a local anvil chain with the FGBDT-Chain contracts deployed.

Why a managed devnet: party nodes, the API and demos need a chain that survives between sessions and whose contract
addresses are known without copy-pasting. ``up`` starts anvil in the background with a fixed chain id, funded dev
accounts and a block gas limit that fits the widest tree level, deploys the contracts (``FGBDTMath``, the ERC-2771
``FGBDTForwarder`` and ``FGBDTChain`` trusting it) unless the reloaded state already holds them, writes
``deployment-<port>.json`` and a funded relayer key for ``fgbdt serve``, and says what to run next. Everything lives
in the devnet registry (``deploy.deployment.devnet_dir``: the user's state directory), which is how ``status``,
``down`` and the chain commands find the devnet without flags. ``down`` stops anvil with SIGTERM so it dumps its state
(``--state``), which the next ``up`` on the same port reloads.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.deploy.deployment import (
    DevnetFiles,
    devnet_dir,
    pid_alive,
    read_key,
    registered,
    running_devnets,
    write_key,
)
from fgbdt_chain.ledger.devnet.anvil import AnvilNotFound, rpc_ready, start_anvil, stop_mining
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.toolchain.compile import CompileError
from fgbdt_chain.ledger.wrappers.contracts import MathContract, TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder

DEFAULT_PORT: int = 8545
DEPLOYER_SEED: bytes = b"fgbdt-devnet-deployer"
RELAYER_FUND_WEI: int = 10**22
"""What the relayer key ``up`` writes holds: the API's relayer pays every relayed transaction's gas."""


def register(subparsers: Any) -> None:
    """Add the ``devnet`` command (``up``, ``status``, ``down``) to the ``fgbdt`` parser."""
    parser = subparsers.add_parser(
        "devnet",
        help="run a local anvil chain with the FGBDT-Chain contracts deployed",
        description="Start, inspect or stop a background anvil devnet; its state persists across restarts.",
    )
    sub = parser.add_subparsers(dest="devnet_command", required=True, metavar="ACTION")
    for name, helptext, func, port_help in (
        ("up", "start anvil in the background and deploy the contracts", run_up, f"RPC port (default {DEFAULT_PORT})"),
        ("status", "show the devnets' RPC URLs, processes and contracts", run_status, "only this port"),
        ("down", "stop anvil (its state is saved for the next `up`)", run_down, "port (default: the one running)"),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext)
        p.add_argument("--port", type=int, default=DEFAULT_PORT if name == "up" else None, help=port_help)
        p.add_argument("--dir", default=None, help="registry (default: $FGBDT_DEVNET_DIR or the user state dir)")
        if name == "up":
            p.add_argument(
                "--block-time",
                type=float,
                default=None,
                metavar="SECONDS",
                help="mine a block every this many seconds, as a permissioned network would (default: a block per "
                "transaction); a task's requester then waits for blocks at twice that pace",
            )
        p.set_defaults(func=func)


CONTRACTS: tuple[str, ...] = ("FGBDTMath", "FGBDTForwarder", "FGBDTChain")
"""What a devnet deploys (``FGBDTChain`` links its libraries when deployed)."""


def contracts_fingerprint(client: ChainClient) -> str:
    """A hash of the shipped creation code of every contract the devnet deploys, libraries included.

    Why: a devnet's state outlives an upgrade of the package. Contracts deployed by another release may take other
    calldata (the histogram width, say), and a party of this release would see its transactions revert; so a
    reloaded chain's contracts are reused only when this fingerprint is the one recorded when they were deployed."""
    names = set(CONTRACTS)
    for name in CONTRACTS:
        names |= set(client.artifacts[name].libraries)
    digest = hashlib.sha256()
    for name in sorted(names):
        digest.update(name.encode() + b"\0" + client.artifacts[name].bytecode.encode() + b"\0")
    return digest.hexdigest()


def _deploy(url: str, deployment: Path) -> dict[str, Any]:
    """Deploy the contracts, or reuse the recorded ones when the (reloaded) chain still holds their code."""
    client = ChainClient.connect(url)
    fingerprint = contracts_fingerprint(client)
    if deployment.exists():
        info: dict[str, Any] = json.loads(deployment.read_text())
        addresses = info.get("contracts", {})
        # contracts of another release (or from before the forwarder existed) are deployed again
        complete = set(CONTRACTS) <= set(addresses) and info.get("fingerprint") == fingerprint
        if complete and all(len(client.w3.eth.get_code(a)) > 0 for a in addresses.values()):
            info["rpc_url"] = url
            info["reused"] = True
            return info
    deployer = client.new_account(10**22, seed=DEPLOYER_SEED)
    math = MathContract.deploy(client, deployer)
    forwarder = Forwarder.deploy(client, deployer)
    task = TaskContract.deploy(client, deployer, forwarder.address)
    return {
        "rpc_url": url,
        "chain_id": client.chain_id,
        "deployer": deployer.address,
        "block": client.block_number,
        "contracts": {
            "FGBDTMath": math.contract.address,
            "FGBDTForwarder": forwarder.address,
            "FGBDTChain": task.address,
        },
        "reused": False,
        "fingerprint": fingerprint,
    }


def _relayer(client: ChainClient, files: DevnetFiles) -> Path:
    """The devnet's relayer key file, written (and funded) once; topped up when a reloaded chain runs low."""
    if files.relayer_key.exists():
        account = read_key(files.relayer_key, "relayer key")
        if client.w3.eth.get_balance(account.address) < RELAYER_FUND_WEI // 10:
            client.fund(account.address, RELAYER_FUND_WEI)
        return files.relayer_key
    account = client.new_account(RELAYER_FUND_WEI, seed=os.urandom(32))
    write_key(files.relayer_key, account)
    return files.relayer_key


def run_up(args: argparse.Namespace) -> int:
    """Start anvil (unless already up on the port), deploy, write the deployment file and the relayer key, and print
    them with the commands that use them."""
    files = DevnetFiles(devnet_dir(args.dir), args.port)
    if files.running():
        _print_up(files, json.loads(files.deployment.read_text()), already=True)
        return 0
    if rpc_ready(files.url):
        raise UserError(f"port {args.port} is already served by another node; pick another with --port")
    try:
        node = start_anvil(args.port, state=files.state, log=files.log, detach=True, block_time=args.block_time)
    except AnvilNotFound as exc:
        raise UserError(str(exc)) from exc
    except (RuntimeError, ValueError) as exc:
        raise UserError(f"{exc}") from exc
    files.pid.write_text(str(node.process.pid))
    try:
        info = _deploy(files.url, files.deployment)
        client = ChainClient.connect(files.url)
        info["relayer_key"] = str(_relayer(client, files))
    except CompileError as exc:
        node.stop()
        raise UserError(f"contracts do not compile: {exc}") from exc
    info.update({"pid": node.process.pid, "state_file": str(files.state), "block_time": args.block_time})
    files.deployment.write_text(json.dumps(info, indent=2) + "\n")
    _print_up(files, info, already=False)
    return 0


def _print_up(files: DevnetFiles, info: dict[str, Any], already: bool) -> None:
    state = "already running" if already else ("reloaded" if info.get("reused") else "started, contracts deployed")
    dep = files.deployment
    print(f"devnet {state}: {files.url} (chain id {info.get('chain_id')})")
    print(f"deployment file: {dep}")
    print(f"relayer key (funded, for `fgbdt serve`): {info.get('relayer_key')}")
    print("next:")
    print("  fgbdt train --data TRAIN --test TEST --parties 4   # finds this devnet; or add --deployment " + str(dep))
    print(f"  fgbdt serve --deployment {dep} --relayer-key {info.get('relayer_key')}")
    print(f"  fgbdt devnet status; fgbdt devnet down --port {files.port}")


def _selected(args: argparse.Namespace, *, running_only: bool) -> list[DevnetFiles]:
    base = devnet_dir(args.dir)
    if args.port is not None:
        return [DevnetFiles(base, args.port)]
    return running_devnets(base) if running_only else registered(base)


def run_status(args: argparse.Namespace) -> int:
    """Print every registered devnet (or the one on ``--port``): up or down, URL, chain id, block, contracts; exit 1
    when none is up."""
    selected = _selected(args, running_only=False)
    if not selected:
        print(f"no devnet recorded in {devnet_dir(args.dir)}: start one with `fgbdt devnet up`")
        return 1
    any_up = False
    for files in selected:
        running = files.running()
        any_up |= running
        print(f"devnet {'up' if running else 'down'} on port {files.port}")
        if not running:
            continue
        info = json.loads(files.deployment.read_text()) if files.deployment.exists() else {}
        client = ChainClient.connect(files.url)
        print(f"  rpc_url: {files.url}")
        print(f"  pid: {files.read_pid()}")
        print(f"  chain_id: {client.chain_id}")
        print(f"  block: {client.block_number}")
        for name, addr in info.get("contracts", {}).items():
            deployed = len(client.w3.eth.get_code(addr)) > 0
            print(f"  {name}: {addr}{'' if deployed else ' (no code!)'}")
        print(f"  deployment: {files.deployment}")
        print(f"  relayer key: {info.get('relayer_key')}")
    return 0 if any_up else 1


def run_down(args: argparse.Namespace) -> int:
    """Stop the devnet (the one on ``--port``, else the only one running) with SIGTERM (anvil dumps its state),
    waiting until the process is gone."""
    selected = _selected(args, running_only=True)
    if not selected:
        print("no devnet is running")
        return 0
    if len(selected) > 1:
        ports = ", ".join(str(f.port) for f in selected)
        raise UserError(f"{len(selected)} devnets are running (ports {ports}): choose one with --port")
    files = selected[0]
    pid = files.read_pid()
    if pid is None or not pid_alive(pid):
        files.pid.unlink(missing_ok=True)
        print(f"devnet on port {files.port} is not running")
        return 0
    stop_mining(files.url)  # a block mined while anvil writes its state could lose its logs
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while pid_alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):  # reap it when it is our child, otherwise just poll
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    if pid_alive(pid):
        raise UserError(f"anvil (pid {pid}) did not stop within 30 s")
    files.pid.unlink(missing_ok=True)
    print(f"devnet on port {files.port} stopped; state saved to {files.state}")
    return 0
