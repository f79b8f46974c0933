"""Party processes forked from the loaded server: each runs the real ``fgbdt`` command in its own process, with its
own log, and is handled as ``subprocess.Popen`` is (exit codes, timeouts, signals)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account

from fgbdt_chain import __version__
from fgbdt_chain.deploy.cli import main as cli_main
from fgbdt_chain.deploy.deployment import write_key
from fgbdt_chain.deploy.party_forks import PartyForks, PartyForksError, fork_available, start_party

forking = pytest.mark.skipif(not fork_available(), reason="parties are forked on Linux only")


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
    return [
        "node",
        "--task",
        "1",
        "--key",
        str(key),
        "--data",
        str(data),
        "--rpc",
        rpc,
        "--contract",
        contract,
        "--plain-http",
    ]


@forking
def test_forked_commands_write_their_own_logs_and_exit_codes(forks: PartyForks, tmp_path: Path) -> None:
    ok = forks.start(["--version"], tmp_path / "a.log")
    bad = forks.start(["node", "--task", "1"], tmp_path / "b.log")  # required options missing: argparse, exit 2
    assert ok.pid != bad.pid and os.getpid() not in (ok.pid, bad.pid)
    assert ok.wait(timeout=60) == 0 and ok.poll() == 0 and ok.returncode == 0
    assert bad.wait(timeout=60) == 2
    assert (tmp_path / "a.log").read_text().strip() == f"fgbdt {__version__}"
    assert "the following arguments are required" in (tmp_path / "b.log").read_text()


@forking
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


def _fds(pid: int) -> dict[int, str]:
    """A process's open descriptors and their targets. One the process closes between the listing and the
    ``readlink`` is left out: the child closes the server's descriptors while the test reads (a review measured a
    ``FileNotFoundError`` in 8 of 1,300 forks)."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
    return out


@forking
def test_a_party_reads_nothing_and_keeps_none_of_the_servers_descriptors(
    forks: PartyForks, tmp_path: Path, silent_chain: str
) -> None:
    party = forks.start(_node_args(tmp_path, silent_chain), tmp_path / "node.log")
    try:
        deadline = time.monotonic() + 30
        while True:  # the fork is reported at once; the child sets its descriptors a moment later
            fds = _fds(party.pid)
            settled = fds.get(2) == str(tmp_path / "node.log") and not any("pipe:" in t for t in fds.values())
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert fds[0] == os.devnull and fds[1] == fds[2] == str(tmp_path / "node.log")
        assert not any("pipe:" in target for target in fds.values())  # the server's request and answer pipes
    finally:
        party.kill()
        party.wait(timeout=30)


@forking
def test_ctrl_c_reaches_the_parties_not_the_server(forks: PartyForks, tmp_path: Path, silent_chain: str) -> None:
    party = forks.start(_node_args(tmp_path, silent_chain), tmp_path / "node.log")
    os.kill(forks.process.pid, signal.SIGINT)  # what the terminal sends the whole process group
    party.send_signal(signal.SIGINT)
    assert party.wait(timeout=30) == 130  # the CLI's "interrupted"
    assert forks.process.poll() is None  # the server saw the party end and still forks
    assert forks.start(["--version"], tmp_path / "after.log").wait(timeout=60) == 0


@forking
def test_a_fork_given_up_on_is_killed_and_the_next_gets_its_own_child(
    forks: PartyForks, tmp_path: Path, silent_chain: str
) -> None:
    with pytest.raises(PartyForksError, match="did not fork within"):
        forks.start(_node_args(tmp_path, silent_chain), tmp_path / "late.log", timeout=0.0)
    mine = forks.start(["--version"], tmp_path / "mine.log")
    assert mine.wait(timeout=60) == 0
    assert (tmp_path / "mine.log").read_text().strip() == f"fgbdt {__version__}"
    forks.close()  # waits for every child: the abandoned one was killed, so the server ends by itself
    assert forks.process.returncode == 0


@forking
def test_a_party_that_outlives_the_server_has_no_made_up_exit_code(
    forks: PartyForks, tmp_path: Path, silent_chain: str
) -> None:
    party = forks.start(_node_args(tmp_path, silent_chain), tmp_path / "node.log")
    forks.process.kill()
    forks.process.wait()
    assert party.poll() is None  # still running, now a child of init
    os.kill(party.pid, signal.SIGKILL)
    with pytest.raises(PartyForksError, match="exit code is unknown"):
        party.wait(timeout=30)
    party.terminate()  # nothing to stop: no error either


@forking
def test_a_closed_server_refuses_to_fork_and_says_why(tmp_path: Path) -> None:
    server = PartyForks(tmp_path / "fork-server.log")
    server.close()  # never asked to fork (a caller that failed first): stopped, not left to finish its loading
    assert server.process.returncode == -signal.SIGKILL
    server.close()  # a second close has nothing left to do
    with pytest.raises(PartyForksError, match="fork server exited"):
        server.start(["--version"], tmp_path / "late.log")
    with pytest.raises(PartyForksError, match="fork server exited"):
        server.wait_loaded()


@forking
def test_the_server_says_when_it_has_loaded_a_node(forks: PartyForks, tmp_path: Path) -> None:
    seconds = forks.wait_loaded()
    assert forks.loaded_at is not None and seconds == forks.loaded_at - forks.started_at > 0
    assert forks.wait_loaded(timeout=0.0) == seconds  # once loaded, at once
    assert forks.start(["--version"], tmp_path / "v.log").wait(timeout=60) == 0
    forks.close()
    assert forks.process.returncode == 0  # asked to fork: closed gracefully, its children waited for


@forking
def test_waiting_for_a_load_that_does_not_come_fails_with_the_reason(tmp_path: Path) -> None:
    server = PartyForks(tmp_path / "fork-server.log")
    try:
        with pytest.raises(PartyForksError, match="did not load a node within 0 s"):
            server.wait_loaded(timeout=0.0)  # the interpreter has not even started
    finally:
        server.close()


def test_without_a_server_a_party_is_a_fresh_interpreter(tmp_path: Path) -> None:
    proc = start_party(None, ["--version"], tmp_path / "plain.log")
    assert isinstance(proc, subprocess.Popen)
    assert proc.wait(timeout=120) == 0
    assert (tmp_path / "plain.log").read_text().strip() == f"fgbdt {__version__}"


def _own_fork_servers() -> list[int]:
    """This process's children running the fork server (from /proc: the children a leak would leave running)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # not a process, or one that ended meanwhile
        if f"\nPPid:\t{os.getpid()}\n" in status and b"fgbdt_chain.deploy.party_forks" in cmdline:
            found.append(int(entry.name))
    return found


@forking
def test_train_starts_the_fork_server_first_and_stops_it_when_it_fails_before_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fgbdt train`` has the parties' host load while it reads the data and reaches the chain; a command that
    fails there (nothing answers at the address) leaves no server behind."""
    data = tmp_path / "rows.csv"
    data.write_text("label,x\n" + "".join(f"{i % 2},{i}\n" for i in range(60)))
    work = tmp_path / "work"
    chain = ["--rpc", "http://127.0.0.1:9", "--contract", "0x" + "00" * 20]
    assert cli_main(["train", "--data", str(data), "--parties", "2", "--quiet", "--workdir", str(work), *chain]) == 2
    assert "does not answer" in capsys.readouterr().err
    assert (work / "fork-server.log").exists()  # it was started, before the chain was tried
    assert _own_fork_servers() == []


@forking
def test_a_train_that_fails_before_any_party_ran_leaves_no_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fgbdt_chain.deploy import cmd_train

    made = tmp_path / "made"
    monkeypatch.setattr(cmd_train.tempfile, "mkdtemp", lambda prefix="": str(made))
    data = tmp_path / "rows.csv"
    data.write_text("label,x\n" + "".join(f"{i % 2},{i}\n" for i in range(60)))
    chain = ["--rpc", "http://127.0.0.1:9", "--contract", "0x" + "00" * 20]
    assert cli_main(["train", "--data", str(data), "--parties", "2", "--quiet", *chain]) == 2
    assert "does not answer" in capsys.readouterr().err
    assert not made.exists() and _own_fork_servers() == []
