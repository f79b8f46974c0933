"""Find, start and stop anvil.

Why here and not in the devnet command: the chain tests, the devnet and the demo need the same thing, and all must
find the binary the same way: ``FGBDT_ANVIL``, then a ``node_modules`` folder (``ledger.toolchain.paths``: the clone's,
the
working directory's; the platform package ``@foundry-rs/anvil`` installs, which works offline), then ``anvil`` on PATH.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fgbdt_chain.ledger.rpc.client import DEFAULT_GAS_LIMIT
from fgbdt_chain.ledger.toolchain import paths
from fgbdt_chain.ledger.toolchain.compile import EVM_VERSION

DEFAULT_CHAIN_ID: int = 31337


class AnvilNotFound(RuntimeError):
    """No anvil binary (the message says how to get one)."""


def anvil_binary() -> Path:
    """Path of the anvil executable (module docstring for the search order)."""
    explicit = os.environ.get("FGBDT_ANVIL")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise AnvilNotFound(f"FGBDT_ANVIL={explicit} is not an executable file")
        return Path(explicit)
    for modules in paths.node_modules_dirs():
        for candidate in sorted((modules / "@foundry-rs").glob("anvil-*/bin/anvil")):
            if os.access(candidate, os.X_OK):
                return candidate
        shim = modules / ".bin" / "anvil"
        if shim.exists():
            return shim
    found = shutil.which("anvil")
    if found:
        return Path(found)
    raise AnvilNotFound(f"anvil not found (FGBDT_ANVIL, node_modules, PATH): {paths.npm_hint()}")


def free_port() -> int:
    """A TCP port free at the time of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str, method: str, params: Sequence[object], timeout: float) -> bool:
    """Whether the JSON-RPC node at ``url`` answers ``method`` with HTTP 200 (urllib: no client to build, and no
    answer to read, for the few requests made around a node's start and stop)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def rpc_ready(url: str) -> bool:
    """True when a JSON-RPC node answers ``eth_chainId`` at ``url``."""
    return _answers(url, "eth_chainId", [], 1.0)


def stop_mining(url: str) -> None:
    """Stop the node at ``url`` mining (no block per transaction, none at intervals) before it writes its state file.

    Why: a block mined while anvil writes its state on shutdown can leave the file with that block's state but not
    its logs, an event lost after the restart (seen here as a party waiting for a ``HistogramsSubmitted`` that never
    came; https://github.com/foundry-rs/foundry/issues/11367 reports incomplete state files on shutdown too).
    Transactions sent meanwhile stay in the pool, which is not kept: their senders see the outage and send again. A
    node that does not answer is left to the signal."""
    for method, params in (("evm_setAutomine", [False]), ("evm_setIntervalMining", [0])):
        if not _answers(url, method, params, 2.0):
            return
    time.sleep(0.05)  # a block being mined when the calls came ends


@dataclass
class Anvil:
    """A running anvil process; ``state`` is the file it loads on start and writes on shutdown, if any."""

    process: subprocess.Popen[bytes]
    port: int
    state: Path | None = None

    @property
    def url(self) -> str:
        """The HTTP JSON-RPC URL."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (anvil writes its state file on a clean shutdown), then SIGKILL if it hangs; with a state file,
        mining stops first (``stop_mining``)."""
        if self.state is not None and self.process.poll() is None:
            stop_mining(self.url)
        stop_process(self.process, timeout)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """SIGTERM, then SIGKILL when the process has not exited within ``timeout`` seconds."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


HARDFORK = EVM_VERSION
"""The devnet's hardfork: the contracts' EVM version (``ledger.toolchain.compile``), and not anvil 1.7.1's default
Prague, under which every block grows the EIP-2935 block-hash history and blocks slow down as the chain grows (measured
by ``bench/anvil_blocks.py``; fixed upstream after 1.7.1, foundry pull request 15715)."""
KEEP_STATES = 64
"""Historical states anvil keeps (``--prune-history``): anvil otherwise writes every block's state to disk (under
~/.foundry/anvil/tmp), gigabytes within a long task, which filled this machine's disk during a paper-settings run.
Pruned, only the last ``KEEP_STATES`` blocks can be queried at a past state (enough to replay a failed transaction)."""


def anvil_command(
    port: int,
    state: Path | None = None,
    chain_id: int = DEFAULT_CHAIN_ID,
    gas_limit: int = DEFAULT_GAS_LIMIT,
    accounts: int = 10,
    keep_states: int = KEEP_STATES,
    block_time: float | None = None,
) -> list[str]:
    """The command line: fixed chain id, funded dev accounts, a block gas limit that fits the widest level, no
    contract size limit surprises, and ``--state`` (load on start if present, dump on exit) when persisting.
    ``block_time`` (seconds) mines a block at that interval, as a permissioned network would, instead of one block
    per transaction the moment it arrives."""
    cmd = [
        str(anvil_binary()),
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--chain-id",
        str(chain_id),
        "--gas-limit",
        str(gas_limit),
        "--accounts",
        str(accounts),
        "--balance",
        "1000000",
        "--quiet",
    ]
    if state is not None:
        cmd += ["--state", str(state)]
    cmd += ["--hardfork", HARDFORK, "--prune-history", str(keep_states)]
    if block_time is not None:
        if not 0 < block_time < math.inf:
            raise ValueError(f"a block time must be a positive number of seconds, got {block_time}")
        cmd += ["--block-time", repr(float(block_time))]
    return cmd


def start_anvil(
    port: int | None = None,
    state: Path | None = None,
    log: Path | None = None,
    detach: bool = False,
    startup_timeout: float = 30.0,
    keep_states: int = KEEP_STATES,
    block_time: float | None = None,
) -> Anvil:
    """Start anvil and wait until it answers. ``detach`` starts it in its own session (outlives the caller);
    ``keep_states`` prunes historical states older than that many blocks (``KEEP_STATES``); ``block_time``
    (seconds) mines at that interval (``anvil_command``)."""
    port = port or free_port()
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child process
    cmd = anvil_command(port, state, keep_states=keep_states, block_time=block_time)
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=detach)
    anvil = Anvil(proc, port, state)
    wait_until_ready(proc, anvil.url, "anvil", startup_timeout, log)
    return anvil


def _tail(log: Path | None, lines: int = 15) -> str:
    """The end of a process's log for an error message: the real cause is usually its last line."""
    if log is None:
        return ""
    try:
        text = log.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return f" (its log {log} could not be read)"
    return f"; the end of its log ({log}):\n" + "\n".join(text) if text else f" (its log {log} is empty)"


def wait_until_ready(
    process: subprocess.Popen[bytes], url: str, what: str, timeout: float, log: Path | None = None
) -> None:
    """Wait until the JSON-RPC node at ``url`` answers; stop it and raise if it exits or the timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode}{_tail(log)}")
        if rpc_ready(url):
            return
        time.sleep(0.1)
    stop_process(process)
    raise RuntimeError(f"{what} did not answer within the startup timeout")
