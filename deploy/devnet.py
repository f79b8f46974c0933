"""``fgbdt devnet up|status|down``: a local anvil chain with the FGBDT-Chain contracts deployed.

Why a managed devnet: party nodes, the API and demos need a chain that survives between sessions and whose contract
addresses are known without copy-pasting. ``up`` starts anvil (from the project's npm dependencies) in the background
with a fixed chain id, funded dev accounts and a block gas limit that fits the widest tree level, deploys the
contracts (``FGBDTMath``, the ERC-2771 ``FGBDTForwarder`` and ``FGBDTChain`` trusting it) unless the reloaded
state already holds them, and writes ``deployment-<port>.json`` (the file ``fgbdt serve --deployment`` reads);
``down`` stops anvil with SIGTERM so it dumps its state (``--state``), which the next ``up`` on the same port reloads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.ledger.anvil import AnvilNotFound, rpc_ready, start_anvil
from fgbdt_chain.ledger.client import ChainClient
from fgbdt_chain.ledger.compile import REPO_ROOT, CompileError
from fgbdt_chain.ledger.contracts import MathContract, TaskContract
from fgbdt_chain.ledger.forwarder import Forwarder

DEFAULT_PORT: int = 8545
DEPLOYER_SEED: bytes = b"fgbdt-devnet-deployer"


def devnet_dir(args: argparse.Namespace) -> Path:
    """Where state, logs, pid and deployment files live (ignored by git)."""
    path = Path(args.dir or os.environ.get("FGBDT_DEVNET_DIR") or REPO_ROOT / ".cache" / "devnet")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _paths(base: Path, port: int) -> dict[str, Path]:
    return {
        "state": base / f"state-{port}.json",
        "log": base / f"anvil-{port}.log",
        "pid": base / f"anvil-{port}.pid",
        "deployment": base / f"deployment-{port}.json",
    }


def register(subparsers: Any) -> None:
    """Add the ``devnet`` command (``up``, ``status``, ``down``) to the ``fgbdt`` parser."""
    parser = subparsers.add_parser(
        "devnet",
        help="run a local anvil chain with the FGBDT-Chain contracts deployed",
        description="Start, inspect or stop a background anvil devnet; its state persists across restarts.",
    )
    sub = parser.add_subparsers(dest="devnet_command", required=True, metavar="ACTION")
    for name, helptext, func in (
        ("up", "start anvil in the background and deploy the contracts", run_up),
        ("status", "show the devnet's RPC URL, process and contract addresses", run_status),
        ("down", "stop anvil (its state is saved for the next `up`)", run_down),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext)
        p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"RPC port (default {DEFAULT_PORT})")
        p.add_argument("--dir", default=None, help="state directory (default: $FGBDT_DEVNET_DIR or .cache/devnet)")
        p.set_defaults(func=func)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _deploy(url: str, deployment: Path) -> dict[str, Any]:
    """Deploy the contracts, or reuse the recorded ones when the (reloaded) chain still holds their code."""
    client = ChainClient.connect(url)
    if deployment.exists():
        info: dict[str, Any] = json.loads(deployment.read_text())
        addresses = info.get("contracts", {})
        # a deployment from before the forwarder existed is redeployed: its FGBDTChain cannot take relayed requests
        complete = {"FGBDTMath", "FGBDTForwarder", "FGBDTChain"} <= set(addresses)
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
    }


def run_up(args: argparse.Namespace) -> int:
    """Start anvil (unless already up on the port), deploy, write the deployment file, print the RPC URL."""
    paths = _paths(devnet_dir(args), args.port)
    url = f"http://127.0.0.1:{args.port}"
    pid = _read_pid(paths["pid"])
    if pid is not None and _pid_alive(pid) and rpc_ready(url):
        print(url)
        return 0
    if rpc_ready(url):
        raise UserError(f"port {args.port} is already served by another node; pick another with --port")
    try:
        node = start_anvil(args.port, state=paths["state"], log=paths["log"], detach=True)
    except AnvilNotFound as exc:
        raise UserError(str(exc)) from exc
    except RuntimeError as exc:
        raise UserError(f"{exc}") from exc
    paths["pid"].write_text(str(node.process.pid))
    try:
        info = _deploy(url, paths["deployment"])
    except CompileError as exc:
        node.stop()
        raise UserError(f"contracts do not compile: {exc}") from exc
    info.update({"pid": node.process.pid, "state_file": str(paths["state"])})
    paths["deployment"].write_text(json.dumps(info, indent=2) + "\n")
    print(url)
    return 0


def run_status(args: argparse.Namespace) -> int:
    """Print whether the devnet runs, its URL, chain id, block and contracts; exit 1 when it is down."""
    paths = _paths(devnet_dir(args), args.port)
    url = f"http://127.0.0.1:{args.port}"
    pid = _read_pid(paths["pid"])
    running = pid is not None and _pid_alive(pid) and rpc_ready(url)
    info = json.loads(paths["deployment"].read_text()) if paths["deployment"].exists() else {}
    print(f"devnet {'up' if running else 'down'} on port {args.port}")
    if not running:
        return 1
    client = ChainClient.connect(url)
    print(f"rpc_url: {url}")
    print(f"pid: {pid}")
    print(f"chain_id: {client.chain_id}")
    print(f"block: {client.block_number}")
    for name, addr in info.get("contracts", {}).items():
        deployed = len(client.w3.eth.get_code(addr)) > 0
        print(f"{name}: {addr}{'' if deployed else ' (no code!)'}")
    print(f"deployment: {paths['deployment']}")
    return 0


def run_down(args: argparse.Namespace) -> int:
    """Stop the devnet with SIGTERM (anvil dumps its state), waiting until the process is gone."""
    paths = _paths(devnet_dir(args), args.port)
    pid = _read_pid(paths["pid"])
    if pid is None or not _pid_alive(pid):
        paths["pid"].unlink(missing_ok=True)
        print(f"devnet on port {args.port} is not running")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while _pid_alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):  # reap it when it is our child, otherwise just poll
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    if _pid_alive(pid):
        raise UserError(f"anvil (pid {pid}) did not stop within 30 s")
    paths["pid"].unlink(missing_ok=True)
    print(f"devnet on port {args.port} stopped; state saved to {paths['state']}")
    return 0
