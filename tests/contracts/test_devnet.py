"""``fgbdt devnet up|status|down`` on a free port: deploys, persists its state across a restart, stops cleanly."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import pytest

from fgbdt_chain.deploy.cli import UserError, main
from fgbdt_chain.deploy.cmd_train import _block_time
from fgbdt_chain.deploy.deployment import ChainTarget, Deployment, chain_target, read_key
from fgbdt_chain.deploy.devnet import contracts_fingerprint
from fgbdt_chain.deploy.requester import ChainSetup
from fgbdt_chain.ledger.devnet.anvil import HARDFORK, free_port, rpc_ready, start_anvil, stop_mining
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.toolchain.compile import EVM_VERSION
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract

pytestmark = pytest.mark.chain


class Devnet:
    """Runs ``fgbdt devnet ACTION --port P --dir D`` through the real command-line entry point."""

    def __init__(self, port: int, directory: Path) -> None:
        self.port = port
        self.dir = str(directory)

    def __call__(self, action: str, *, port: bool = True) -> int:
        return main(["devnet", action, *(["--port", str(self.port)] if port else []), "--dir", self.dir])


def test_devnet_up_status_down_persists_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = Devnet(free_port(), tmp_path)
    url = f"http://127.0.0.1:{args.port}"
    deployment = tmp_path / f"deployment-{args.port}.json"
    try:
        assert args("up") == 0
        out = capsys.readouterr().out
        assert url in out.splitlines()[0]
        assert str(deployment) in out and "fgbdt train" in out and "fgbdt serve" in out  # what to run next
        info = json.loads(deployment.read_text())
        assert info["chain_id"] == 31337 and info["reused"] is False
        client = ChainClient.connect(url)
        task = TaskContract.at(client, info["contracts"]["FGBDTChain"])
        assert task.trusted_forwarder() == info["contracts"]["FGBDTForwarder"]
        tid, _ = task.create_task(client.new_account(10**20), TaskConfig(), [0], [10**18], reward=12345)
        # the relayer key `serve` needs: the owner's only, funded
        key = Path(info["relayer_key"])
        assert key.stat().st_mode & 0o777 == 0o600
        assert client.w3.eth.get_balance(read_key(key).address) >= 10**21
        # the registry: status, the chain commands and down find this devnet without --port
        assert args("status", port=False) == 0
        assert info["contracts"]["FGBDTChain"] in capsys.readouterr().out
        target = chain_target(argparse.Namespace(rpc=None, contract=None, deployment=None, devnet_dir=args.dir))
        assert (target.rpc_url, target.contract) == (url, info["contracts"]["FGBDTChain"])
    finally:
        assert args("down", port=False) == 0
    with pytest.raises(UserError, match="no devnet running"):
        chain_target(argparse.Namespace(rpc=None, contract=None, deployment=None, devnet_dir=args.dir))
    assert not rpc_ready(url)
    assert args("status") == 1
    assert (tmp_path / f"state-{args.port}.json").stat().st_size > 0
    try:
        assert args("up") == 0
        info = json.loads((tmp_path / f"deployment-{args.port}.json").read_text())
        assert info["reused"] is True
        client = ChainClient.connect(url)
        task = TaskContract.at(client, info["contracts"]["FGBDTChain"])
        assert task.task_count() == tid
        assert task.state(tid).reward == 12345
    finally:
        args("down")
    # contracts deployed by another release (another fingerprint of the shipped code) are deployed again
    stale = json.loads(deployment.read_text())
    stale["fingerprint"] = "another release"
    deployment.write_text(json.dumps(stale))
    try:
        assert args("up") == 0
        info = json.loads(deployment.read_text())
        assert info["reused"] is False and info["contracts"]["FGBDTChain"] != stale["contracts"]["FGBDTChain"]
        assert info["fingerprint"] == contracts_fingerprint(ChainClient.connect(url)) and info["block_time"] is None
    finally:
        args("down")


def test_devnet_block_time_is_checked_recorded_and_paces_the_requesters_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``devnet up --block-time``: refused unless a positive number of seconds (before anything starts); recorded in
    the deployment file, where ``fgbdt train`` reads it so that its block clock waits two block intervals."""
    port = free_port()
    for bad in ("0", "-1", "nan"):
        assert main(["devnet", "up", "--port", str(port), "--dir", str(tmp_path), "--block-time", bad]) != 0
        assert "block time must be a positive number" in capsys.readouterr().err
    assert not rpc_ready(f"http://127.0.0.1:{port}")
    dep = Deployment(tmp_path / "d.json", {"FGBDTChain": "0x" + "11" * 20}, extra={"block_time": 1.5})
    assert _block_time(ChainTarget("http://x", "0x" + "11" * 20, dep)) == 1.5
    assert _block_time(ChainTarget("http://x", "0x" + "11" * 20, None)) is None
    setup = ChainSetup(rpc="http://x", contract="0x", requester=None, workdir=tmp_path, tick_seconds=0.25)  # type: ignore[arg-type]
    assert setup.clock_tick == 0.25
    assert dataclasses.replace(setup, block_time=1.5).clock_tick == 3.0


def test_anvil_runs_the_contracts_hardfork() -> None:
    """The devnet's anvil runs the EVM version the contracts are compiled for (``HARDFORK``), not anvil 1.7.1's
    default Prague, whose blocks slow down as the chain grows (``bench/anvil_blocks.py``)."""
    node = start_anvil()
    try:
        info = ChainClient.connect(node.url).w3.provider.make_request("anvil_nodeInfo", [])  # type: ignore[arg-type]
        assert str(info["result"]["hardFork"]).lower() == HARDFORK == EVM_VERSION
    finally:
        node.stop()


def test_anvil_with_pruned_history_keeps_only_recent_states() -> None:
    """``keep_states`` (anvil --prune-history): recent past states answer (a failed transaction's replay needs its
    parent state), old ones are gone instead of piling up on disk during a long task."""
    node = start_anvil(keep_states=4)
    try:
        client = ChainClient.connect(node.url)
        who = client.w3.eth.accounts[0]
        client.mine(20)
        latest = client.block_number
        assert client.w3.eth.get_balance(who, latest - 1) > 0
        with pytest.raises(Exception, match=r"(?i)state|block|prun|history"):
            client.w3.eth.get_balance(who, 1)
    finally:
        node.stop()


def test_interval_mining_puts_a_rounds_transactions_in_one_block() -> None:
    """``block_time`` (anvil --block-time, as a permissioned network mines): transactions sent within one interval
    land in the same block instead of one block each; a block time that is not positive is refused."""
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="block time must be a positive number"):
            start_anvil(block_time=bad)
    node = start_anvil(block_time=2)
    try:
        w3 = ChainClient.connect(node.url).w3
        sender, *others = w3.eth.accounts[:4]
        start = w3.eth.block_number
        while w3.eth.block_number == start:  # right after a block: the next is a whole interval away
            time.sleep(0.05)
        hashes = [w3.eth.send_transaction({"from": sender, "to": to, "value": 1}) for to in others]
        blocks = {w3.eth.wait_for_transaction_receipt(h, timeout=30)["blockNumber"] for h in hashes}
        assert len(blocks) == 1
    finally:
        node.stop()


def test_a_node_with_a_state_file_stops_mining_before_it_writes_it(tmp_path: Path) -> None:
    """``stop_mining`` (run by ``Anvil.stop`` and ``fgbdt devnet down`` before the signal that makes anvil write its
    state): afterwards a transaction stays in the pool, no block is mined that the state file could catch half
    written, and a restart from the file starts at the same block, mining again."""
    state = tmp_path / "state.json"
    node = start_anvil(state=state)
    try:
        client = ChainClient.connect(node.url)
        client.mine(3)
        before = client.block_number
        stop_mining(node.url)
        assert client.w3.provider.make_request("anvil_getAutomine", [])["result"] is False  # type: ignore[arg-type]
        funder = client.w3.eth.accounts[0]
        client.w3.eth.send_transaction({"from": funder, "to": funder, "value": 1})
        time.sleep(0.3)
        assert client.block_number == before
    finally:
        node.stop()
    node = start_anvil(state=state)
    try:
        client = ChainClient.connect(node.url)
        assert client.block_number == before
        client.fund(client.new_account(0).address, 1)  # mined at once: automine is anvil's default again
        assert client.block_number == before + 1
    finally:
        node.stop()
