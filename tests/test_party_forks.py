"""Party processes forked from the loaded server: each runs the real ``fgbdt`` command in its own process, with its
own log, and is handled as ``subprocess.Popen`` is (exit codes, timeouts, signals)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account

from fgbdt_chain import __version__
from fgbdt_chain.deploy.deployment import write_key
from fgbdt_chain.deploy.party_forks import PartyForks, PartyForksError, fork_available, start_party

pytestmark = pytest.mark.skipif(not fork_available(), reason="os.fork is POSIX only; start_party then spawns")


@pytest.fixture
def forks(tmp_path: Path) -> Iterator[PartyForks]:
    server = PartyForks(tmp_path / "fork-server.log")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def silent_chain() -> Iterator[str]:
    """A port that accepts connections and never answers: a node pointed at it waits for its first chain read."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def _node_args(tmp_path: Path, rpc: str) -> list[str]:
    key = tmp_path / "party.key"
    write_key(key, Account.create())
    data = tmp_path / "rows.csv"
    data.write_text("label,x\n" + "".join(f"{i % 2},{i}\n" for i in range(20)))
    contract = "0x" + "11" * 20
    return ["node", "--task", "1", "--key", str(key), "--data", str(data), "--rpc", rpc, "--contract", contract]


def test_forked_commands_write_their_own_logs_and_exit_codes(forks: PartyForks, tmp_path: Path) -> None:
    ok = forks.start(["--version"], tmp_path / "a.log")
    bad = forks.start(["node", "--task", "1"], tmp_path / "b.log")  # required options missing: argparse, exit 2
    assert ok.pid != bad.pid and os.getpid() not in (ok.pid, bad.pid)
    assert ok.wait(timeout=60) == 0 and ok.poll() == 0 and ok.returncode == 0
    assert bad.wait(timeout=60) == 2
    assert (tmp_path / "a.log").read_text().strip() == f"fgbdt {__version__}"
    assert "the following arguments are required" in (tmp_path / "b.log").read_text()


def test_a_running_party_times_out_and_stops_on_a_signal(forks: PartyForks, tmp_path: Path, silent_chain: str) -> None:
    waiting = forks.start(_node_args(tmp_path, silent_chain), tmp_path / "node.log")
    with pytest.raises(subprocess.TimeoutExpired):
        waiting.wait(timeout=0.5)
    assert waiting.poll() is None
    waiting.terminate()
    assert waiting.wait(timeout=30) == -signal.SIGTERM
    killed = forks.start(_node_args(tmp_path, silent_chain), tmp_path / "node2.log")
    killed.kill()
    assert killed.wait(timeout=30) == -signal.SIGKILL
    killed.terminate()  # signalling an ended party does nothing (its pid may be another process's by now)


def test_a_closed_server_refuses_to_fork_and_says_why(tmp_path: Path) -> None:
    server = PartyForks(tmp_path / "fork-server.log")
    server.close()
    assert server.process.returncode == 0
    with pytest.raises(PartyForksError, match="fork server exited"):
        server.start(["--version"], tmp_path / "late.log")


def test_without_a_server_a_party_is_a_fresh_interpreter(tmp_path: Path) -> None:
    proc = start_party(None, ["--version"], tmp_path / "plain.log")
    assert isinstance(proc, subprocess.Popen)
    assert proc.wait(timeout=120) == 0
    assert (tmp_path / "plain.log").read_text().strip() == f"fgbdt {__version__}"
