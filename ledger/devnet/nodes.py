"""Start other Ethereum nodes from npm than anvil: ganache and the Hardhat network.

Why: the contracts and the client must run on any Ethereum JSON-RPC chain, not only on the anvil devnet the project
starts itself; these two differ from anvil where a consortium network does (no ``eth_sendRawTransactionSync``, no
``anvil_*`` methods, ganache's EVM stops at Shanghai, their own error shapes and fee suggestions). The chain tests
(``tests/e2e/test_chains.py``) and the benchmarks run a task through ``fgbdt deploy``, ``train`` and ``audit`` on
each. Both come pinned from the project's ``package.json`` (``npm ci``), found the way anvil is
(``ledger.toolchain.paths``).

Both keep their default dev accounts: ganache started ``deterministic`` has account 0's key ``GANACHE_KEY``; the
Hardhat network's account 0 is anvil's (``DEV_KEY``).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fgbdt_chain.ledger.devnet.anvil import free_port, stop_process, wait_until_ready
from fgbdt_chain.ledger.rpc.client import DEFAULT_GAS_LIMIT
from fgbdt_chain.ledger.toolchain import paths

GANACHE_KEY = "0x4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d"
"""Account 0 of ``ganache --wallet.deterministic`` (funded with ganache's default 1,000 ether)."""
DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
"""Account 0 of anvil and of the Hardhat network (the "test test ... junk" mnemonic; 10,000 ether on each)."""
HARDHAT_CONFIG: Path = Path(__file__).resolve().parent / "hardhat.config.cjs"
GANACHE_HARDFORK = "shanghai"
"""The newest fork ganache 7.9 runs."""


class NodeNotFound(RuntimeError):
    """The node's npm package is not installed (the message says how to get it)."""


@dataclass
class NodeProcess:
    """A running node started here."""

    name: str
    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 20.0) -> None:
        stop_process(self.process, timeout)


def npm_binary(name: str) -> Path:
    """``node_modules/.bin/<name>`` of the first ``node_modules`` folder that has it."""
    for modules in paths.node_modules_dirs():
        candidate = modules / ".bin" / name
        if candidate.exists():
            return candidate
    raise NodeNotFound(f"{name} not found in node_modules: {paths.npm_hint()}")


def _start(name: str, cmd: list[str], port: int, log: Path | None, timeout: float, cwd: Path | None) -> NodeProcess:
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child process
    env = {**os.environ, "HARDHAT_DISABLE_TELEMETRY_PROMPT": "true"}
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    node = NodeProcess(name, proc, port)
    wait_until_ready(proc, node.url, name, timeout, log)
    return node


def start_ganache(
    port: int | None = None,
    gas_limit: int = DEFAULT_GAS_LIMIT,
    log: Path | None = None,
    startup_timeout: float = 60.0,
    hardfork: str = GANACHE_HARDFORK,
) -> NodeProcess:
    """ganache with its deterministic accounts, at ``hardfork`` (its newest by default; "berlin" has no EIP-1559
    base fee and no PUSH0), a block per transaction; ``gas_limit`` per block (the widest level's transaction;
    ganache's default is 30M)."""
    port = port or free_port()
    cmd = [
        str(npm_binary("ganache")),
        "--wallet.deterministic",
        "--server.host",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--chain.hardfork",
        hardfork,
        "--miner.blockGasLimit",
        str(gas_limit),
        "--logging.quiet",
    ]
    return _start("ganache", cmd, port, log, startup_timeout, None)


def start_hardhat(port: int | None = None, log: Path | None = None, startup_timeout: float = 60.0) -> NodeProcess:
    """The Hardhat network (``hardhat node``) as ``HARDHAT_CONFIG`` sets it up: anvil's chain id and block gas
    limit, Cancun, a block per transaction."""
    port = port or free_port()
    binary = npm_binary("hardhat")
    cmd = [str(binary), "--config", str(HARDHAT_CONFIG), "node", "--hostname", "127.0.0.1", "--port", str(port)]
    # run from the clone (or the folder whose node_modules holds hardhat): Hardhat refuses a non-local installation
    return _start("hardhat", cmd, port, log, startup_timeout, binary.parent.parent.parent)
