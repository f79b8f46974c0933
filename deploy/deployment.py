"""Which chain and contract a command talks to: flags, a deployment file, or the devnet that is running.

Why one module: ``train``, ``node``, ``audit`` and ``serve`` all need an RPC URL and the contract addresses, read the
same way whether they come from flags or from a file that records them. Here a
command's ``--rpc``, ``--contract`` and ``--deployment`` are resolved once: explicit flags win, then the deployment
file, then the devnet registry (``fgbdt devnet up`` records every devnet it starts under the state directory, so
with exactly one running nothing needs to be typed).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.ledger.devnet.anvil import rpc_ready
from fgbdt_chain.ledger.toolchain import paths

ETHER = 10**18
"""Wei in one ether, the unit rewards and funds are given in (not the protocol's fixed point,
``ledger.spec.fixed_point``)."""

TASK_CONTRACT = "FGBDTChain"
FORWARDER_CONTRACT = "FGBDTForwarder"


def devnet_dir(explicit: str | None = None) -> Path:
    """Where devnets keep state, logs, pids, deployment files and keys: ``--dir``, ``$FGBDT_DEVNET_DIR``, else the
    user's state directory (``ledger.toolchain.paths.state_dir() / "devnet"``), never the package."""
    path = Path(explicit or os.environ.get("FGBDT_DEVNET_DIR") or paths.state_dir() / "devnet")
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class DevnetFiles:
    """One devnet's files, by port."""

    base: Path
    port: int

    def _file(self, stem: str, suffix: str) -> Path:
        return self.base / f"{stem}-{self.port}{suffix}"

    @property
    def state(self) -> Path:
        return self._file("state", ".json")

    @property
    def log(self) -> Path:
        return self._file("anvil", ".log")

    @property
    def pid(self) -> Path:
        return self._file("anvil", ".pid")

    @property
    def deployment(self) -> Path:
        return self._file("deployment", ".json")

    @property
    def relayer_key(self) -> Path:
        return self._file("relayer", ".key")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def read_pid(self) -> int | None:
        try:
            return int(self.pid.read_text().strip())
        except (OSError, ValueError):
            return None

    def running(self) -> bool:
        """Whether the recorded process lives and its RPC answers."""
        pid = self.read_pid()
        return pid is not None and pid_alive(pid) and rpc_ready(self.url)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def registered(base: Path) -> list[DevnetFiles]:
    """Every devnet ``up`` recorded under ``base`` (running or not: its deployment file stays), by port."""
    ports = []
    for p in base.glob("deployment-*.json"):
        try:
            ports.append(int(p.stem.removeprefix("deployment-")))
        except ValueError:
            continue
    return [DevnetFiles(base, port) for port in sorted(ports)]


def running_devnets(base: Path) -> list[DevnetFiles]:
    return [d for d in registered(base) if d.running()]


@dataclass(frozen=True)
class Deployment:
    """A deployment file's content (``fgbdt devnet up`` writes it; ``--deployment`` names one)."""

    path: Path
    contracts: dict[str, str]
    rpc_url: str | None = None
    chain_id: int | None = None
    relayer_key: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def task_contract(self) -> str:
        return self.contracts[TASK_CONTRACT]

    @classmethod
    def read(cls, path: str | Path) -> Deployment:
        """Parse and check a deployment file; a :class:`UserError` says what is wrong with it."""
        p = Path(path)
        try:
            info = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise UserError(f"deployment file not found: {p}") from exc
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"cannot read deployment file {p}: {exc}") from exc
        if not isinstance(info, dict) or not isinstance(info.get("contracts"), dict):
            raise UserError(f"deployment file {p} has no 'contracts' map")
        contracts = {str(k): str(v) for k, v in info["contracts"].items()}
        if TASK_CONTRACT not in contracts:
            raise UserError(f"deployment file {p} has no {TASK_CONTRACT} address")
        key = info.get("relayer_key")
        return cls(
            path=p,
            contracts=contracts,
            rpc_url=info.get("rpc_url"),
            chain_id=int(info["chain_id"]) if "chain_id" in info else None,
            relayer_key=Path(key) if key else None,
            extra=info,
        )


@dataclass(frozen=True)
class ChainTarget:
    """Where a command sends its calls."""

    rpc_url: str
    contract: str
    deployment: Deployment | None


def add_chain_arguments(parser: argparse.ArgumentParser) -> None:
    """``--rpc``, ``--contract`` | ``--deployment`` and ``--devnet-dir``, the same for every chain command."""
    parser.add_argument("--rpc", default=None, help="JSON-RPC URL of the chain (default: the deployment file's)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--contract", help=f"address of the {TASK_CONTRACT} contract (with --rpc)")
    where.add_argument(
        "--deployment", help="deployment file written by `fgbdt devnet up` (default: the one devnet running)"
    )
    parser.add_argument("--devnet-dir", default=None, help="devnet registry (default: $FGBDT_DEVNET_DIR or state dir)")


def chain_target(args: argparse.Namespace) -> ChainTarget:
    """Resolve ``add_chain_arguments``' flags (module docstring for the order)."""
    deployment = None
    if args.deployment:
        deployment = Deployment.read(args.deployment)
    elif not args.contract:
        base = devnet_dir(getattr(args, "devnet_dir", None))
        running = [d for d in running_devnets(base) if args.rpc in (None, d.url)]
        if not running:
            if args.rpc:
                raise UserError("no contract: pass --contract ADDRESS or --deployment FILE")
            raise UserError(
                "no chain given and no devnet running: start one with `fgbdt devnet up`, "
                "or pass --deployment FILE (or --rpc URL --contract ADDRESS)"
            )
        if len(running) > 1:
            files = ", ".join(str(d.deployment) for d in running)
            raise UserError(f"{len(running)} devnets are running; choose one with --deployment ({files})")
        deployment = Deployment.read(running[0].deployment)
    rpc = args.rpc or (deployment.rpc_url if deployment else None)
    if not rpc:
        raise UserError("no RPC URL: pass --rpc URL (or a deployment file that records rpc_url)")
    contract = args.contract or (deployment.task_contract if deployment else None)
    assert contract is not None  # --contract, or a deployment that was checked to name one
    return ChainTarget(rpc, contract, deployment)


def read_key(path: str | Path, what: str = "key") -> LocalAccount:
    """A private key file: 64 hex digits, optionally 0x-prefixed, surrounding whitespace ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UserError(f"cannot read the {what} file {path}: {exc.strerror}") from exc
    digits = text.removeprefix("0x")
    if len(digits) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise UserError(f"{path} does not hold a 32-byte hex private key")
    account: LocalAccount = Account.from_key("0x" + digits)
    return account


def write_key(path: Path, account: LocalAccount) -> None:
    """Write a key file readable by its owner only (created so, never world-readable in between)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("0x" + bytes(account.key).hex() + "\n")
