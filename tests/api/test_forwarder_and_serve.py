"""The ERC-2771 path of the contract (``ledger.wrappers.forwarder``), ``fund``, and ``fgbdt serve`` as a real
process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from api_helpers import CREATE, Signer
from eth_account.signers.local import LocalAccount

from fgbdt_chain.deploy.cli import UserError, build_parser
from fgbdt_chain.deploy.cmd_serve import settings_from_args
from fgbdt_chain.deploy.deployment import read_key
from fgbdt_chain.ledger.devnet.anvil import Anvil, free_port
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.wrappers.contracts import Status, TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder, calldata, create_task_args

pytestmark = pytest.mark.chain


def test_relayed_calls_act_for_the_signer(chain: ChainClient, task: TaskContract, forwarder: Forwarder) -> None:
    relayer, alice, bob = chain.new_account(10**20), chain.new_account(0), chain.new_account(0)
    res = forwarder.relay_call(relayer, alice, task, "createTask", *create_task_args(TaskConfig(), [0], [10**18]))
    tid = int(res.event("TaskCreated").args["taskId"])
    assert task.state(tid).requester == alice.address
    forwarder.relay_call(relayer, bob, task, "join", tid, b"psd", "http://bob")
    assert res.event("ExecutedForwardRequest").args["signer"] == alice.address
    # bob is not the requester: the forwarder loses the reason, the simulation names it
    req = forwarder.build(bob.address, task.address, calldata(task, "approve", tid, bob.address))
    with pytest.raises(ContractRevert) as err:
        forwarder.simulate(req)
    assert err.value.name == "NotRequester"
    with pytest.raises(ContractRevert) as err:
        forwarder.execute(relayer, req, forwarder.sign(bob, req))
    assert err.value.name == "FailedCall"
    forwarder.relay_call(relayer, alice, task, "approve", tid, bob.address)
    assert task.parties(tid) == [bob.address]
    # a signature replayed after use, or by another relayer: the nonce moved on
    req = forwarder.build(alice.address, task.address, calldata(task, "cancel", tid))
    sig = forwarder.sign(alice, req)
    forwarder.execute(relayer, req, sig)
    with pytest.raises(ContractRevert) as err:
        forwarder.execute(relayer, req, sig)
    assert err.value.name == "ERC2771ForwarderInvalidSigner"


def test_untrusted_forwarder_and_expired_request(chain: ChainClient, task: TaskContract) -> None:
    relayer, alice = chain.new_account(10**20), chain.new_account(0)
    rogue = Forwarder.deploy(chain, relayer)
    data = calldata(task, "createTask", *create_task_args(TaskConfig(), [0], [10**18]))
    req = rogue.build(alice.address, task.address, data)
    with pytest.raises(ContractRevert) as err:
        rogue.execute(relayer, req, rogue.sign(alice, req))
    assert err.value.name == "ERC2771UntrustfulTarget"
    fw = Forwarder.of(task)
    old = fw.build(alice.address, task.address, data, deadline=1000)
    assert not fw.verify(old, fw.sign(alice, old))
    with pytest.raises(ContractRevert) as err:
        fw.execute(relayer, old, fw.sign(alice, old))
    assert err.value.name == "ERC2771ForwarderExpiredRequest"


def test_fund(chain: ChainClient, task: TaskContract) -> None:
    requester, donor = chain.new_account(10**20), chain.new_account(10**20)
    tid, _ = task.create_task(requester, TaskConfig(), [0], [10**18], reward=5)
    res = task.fund(donor, tid, 10)
    assert res.event("TaskFunded").args["funder"] == donor.address and res.event("TaskFunded").args["reward"] == 15
    assert task.state(tid).reward == 15
    with pytest.raises(ContractRevert) as err:
        task.fund(donor, tid + 1000, 1)
    assert err.value.name == "UnknownTask"
    task.cancel(requester, tid)
    assert task.owed(tid, requester.address) == 15
    with pytest.raises(ContractRevert) as err:
        task.fund(donor, tid, 1)
    assert err.value.name == "WrongStatus"
    assert task.state(tid).status == Status.CANCELLED


def test_serve_settings_errors(tmp_path: Path, task: TaskContract) -> None:
    parser = build_parser()
    dep = tmp_path / "deployment.json"
    key = tmp_path / "key"
    key.write_text("0x" + "11" * 32 + "\n")
    assert bytes(read_key(key).key) == bytes.fromhex("11" * 32)
    args = parser.parse_args(["serve", "--deployment", str(dep), "--relayer-key", str(key)])
    with pytest.raises(UserError, match="deployment file not found"):
        settings_from_args(args)
    dep.write_text("{}")
    with pytest.raises(UserError, match="no 'contracts' map"):
        settings_from_args(args)
    dep.write_text(json.dumps({"contracts": {"FGBDTForwarder": task.address}}))
    with pytest.raises(UserError, match="no FGBDTChain"):
        settings_from_args(args)
    dep.write_text(json.dumps({"contracts": {"FGBDTChain": task.address}}))
    with pytest.raises(UserError, match="no RPC URL"):
        settings_from_args(args)
    key.write_text("not a key")
    args = parser.parse_args(["serve", "--rpc", "http://x", "--deployment", str(dep), "--relayer-key", str(key)])
    with pytest.raises(UserError, match="32-byte hex"):
        settings_from_args(args)


def test_fgbdt_serve_process(
    tmp_path: Path, anvil_node: Anvil, task: TaskContract, forwarder: Forwarder, relayer: LocalAccount, signer: Signer
) -> None:
    dep = tmp_path / "deployment.json"
    dep.write_text(json.dumps({"rpc_url": anvil_node.url, "contracts": {"FGBDTChain": task.address}}))
    key = tmp_path / "relayer.key"
    key.write_text("0x" + bytes(relayer.key).hex())
    port = free_port()
    cmd = [sys.executable, "-m", "fgbdt_chain.deploy.cli", "serve", "--deployment", str(dep), "--relayer-key", str(key)]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), "--log-level", "warning"],
        cwd=tmp_path,  # the installed package, from any directory
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"{url}/v1/health", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, "fgbdt serve did not come up"
                time.sleep(0.2)
        assert health.status_code == 200 and health.json()["forwarder"] == forwarder.address
        acct = task.client.new_account(0)
        created = httpx.post(f"{url}/v1/tasks", json=signer.create_body(acct, CREATE), timeout=30)
        assert created.status_code == 201, created.text
        assert task.state(created.json()["task_id"]).requester == acct.address
    finally:
        proc.terminate()
        proc.wait(timeout=20)
