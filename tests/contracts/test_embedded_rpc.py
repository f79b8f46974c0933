"""The embedded chain behind HTTP JSON-RPC: the project's client must work against it exactly as against anvil.

Why: on machines without Node.js the demo's party processes reach the py-evm chain through this server, so the
whole ``ChainClient`` surface (funding, deployment, custom-error reverts, logs, mining, batched calls, concurrent
senders) is exercised over the wire here, plus the raw JSON-RPC shapes other clients rely on.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.ledger.devnet.anvil import DEFAULT_CHAIN_ID, Anvil
from fgbdt_chain.ledger.devnet.embedded_rpc import EmbeddedChain, start_embedded_chain
from fgbdt_chain.ledger.rpc.client import DEFAULT_GAS_LIMIT, ChainClient
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec.encoding import endorsement_digest
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.toolchain.compile import Artifact
from fgbdt_chain.ledger.wrappers.contracts import MathContract, TaskConfig, TaskContract

pytestmark = pytest.mark.chain

REVERT_DEADBEEF = "0x63deadbeef60e01b60005260046000fd"
"""Init code that reverts with the 4 bytes ``deadbeef`` (PUSH4, SHL 224, MSTORE, REVERT 0..4)."""

CHAINID_CODE = "0x4660005260206000f3"
"""Init code returning ``block.chainid`` as one word (CHAINID, MSTORE, RETURN)."""


@pytest.fixture(scope="module")
def node() -> Iterator[EmbeddedChain]:
    chain = start_embedded_chain()
    try:
        yield chain
    finally:
        chain.stop()


@pytest.fixture(scope="module")
def client(node: EmbeddedChain, artifacts: dict[str, Artifact]) -> ChainClient:
    from web3 import Web3

    return ChainClient(Web3(Web3.HTTPProvider(node.url, request_kwargs={"timeout": 60})), artifacts)


@pytest.fixture(scope="module")
def task(client: ChainClient) -> TaskContract:
    return TaskContract.deploy(client, client.new_account(10**22))


def rpc(url: str, method: str, params: list[Any] | None = None) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or []}
    out: dict[str, Any] = httpx.post(url, json=body, timeout=30).json()
    return out


def test_client_flow_over_http(client: ChainClient, task: TaskContract) -> None:
    assert client.chain_id == DEFAULT_CHAIN_ID
    assert int(client.w3.eth.get_block("latest")["gasLimit"]) == DEFAULT_GAS_LIMIT
    assert len(client.w3.eth.get_code(to_checksum_address(task.trusted_forwarder()))) > 0
    requester = client.new_account(10**21)
    assert client.balance(requester.address) == 10**21

    tid, res = task.create_task(requester, TaskConfig(), [0, 1], [ONE, 2 * ONE], reward=10**18)
    assert res.event("TaskCreated").args["requester"] == requester.address
    assert task.state(tid).reward == 10**18 and task.config(tid) == TaskConfig()

    with pytest.raises(ContractRevert) as info:
        task.create_task(requester, TaskConfig(depth=0), [0], [ONE])
    assert info.value.name == "InvalidConfig" and info.value.function == "createTask"

    tid2, _ = task.create_task(requester, TaskConfig(trees=2), [0], [ONE])
    created = task.client.logs(task.contract, ["TaskCreated"])
    assert [e.args["taskId"] for e in created][-2:] == [tid, tid2]
    only = task.client.logs(task.contract, ["TaskCreated"], task_id=tid2)
    assert [e.args["taskId"] for e in only] == [tid2] and only[0].block_number == client.block_number
    assert client.logs(task.contract, ["TaskCreated"], from_block=client.block_number + 1) == []

    before = client.block_number
    client.mine(25)
    assert client.block_number == before + 25

    # block.chainid inside the EVM is the advertised chain id: signatures and digests agree off and on chain
    party = to_checksum_address("0x" + "ab" * 20)
    root = keccak(b"root")
    harness = client.deploy("EndorseDigestHarness", client.new_account(10**21))
    want = endorsement_digest(client.chain_id, harness.address, 3, 1, 2, party, root)
    assert bytes(client.call(harness, "digest", 3, 1, 2, party, root, [ONE, ONE, ONE])) == want


def test_call_many_is_one_batch(client: ChainClient, node: EmbeddedChain) -> None:
    math = MathContract.deploy(client, client.new_account(10**21))
    cases = [([4, 1, 3, 3, 2], 5, 1, 0, 1), ([0, 0, 3, 1], 4, 1, 2, 5), ([1, 1], 2, 0, 0, 0)]
    assert node.rpc is not None
    served, posts = node.rpc.requests, node.rpc.http_posts
    batched = math.top2_many(cases)
    assert (node.rpc.requests - served, node.rpc.http_posts - posts) == (len(cases), 1)
    assert batched == [math.top2(*case) for case in cases]
    with pytest.raises(ContractRevert) as info:  # a revert inside the batch still decodes by name
        math.top2_many([*cases, ([0, 5], 5, 1, 0, 0)])
    assert info.value.name == "InvalidVote"


def test_concurrent_senders(client: ChainClient, task: TaskContract) -> None:
    requesters = [client.new_account(10**20) for _ in range(3)]
    count = task.task_count()

    def create(i: int) -> int:
        tid, _ = task.create_task(requesters[i % 3], TaskConfig(), [0], [ONE], reward=i)
        return tid

    # the measured gas estimate is an upper bound close to what the transaction then uses
    call = task.contract.functions.createTask(TaskConfig().as_tuple(), [0], [ONE], b"\x00" * 32)
    estimate = call.estimate_gas({"from": requesters[0].address})
    _, res = task.create_task(requesters[0], TaskConfig(), [0], [ONE])
    assert res.gas_used <= estimate <= res.gas_used * 1.1 + 20_000
    count += 1

    with ThreadPoolExecutor(max_workers=6) as pool:
        ids = list(pool.map(create, range(9)))
    assert sorted(ids) == list(range(count + 1, count + 10))


def test_json_rpc_shapes(node: EmbeddedChain, client: ChainClient, task: TaskContract) -> None:
    # logs of its own to read below, whichever of this module's tests ran before it on this worker (xdist spreads
    # them: alone on a fresh chain it found none, once, in a full run)
    task.create_task(client.new_account(10**21), TaskConfig(), [0], [ONE])
    url = node.url
    dev = rpc(url, "eth_accounts")["result"][0]
    assert rpc(url, "eth_chainId")["result"] == hex(DEFAULT_CHAIN_ID)
    assert rpc(url, "net_version")["result"] == str(DEFAULT_CHAIN_ID)
    chainid = rpc(url, "eth_call", [{"from": dev, "data": CHAINID_CODE}, "latest"])["result"]
    assert int(chainid, 16) == DEFAULT_CHAIN_ID

    # reverts: anvil's shape, which ledger.errors.revert_data_of reads
    for method in ("eth_call", "eth_estimateGas"):
        err = rpc(url, method, [{"from": dev, "data": REVERT_DEADBEEF}, "latest"])["error"]
        assert err == {"code": 3, "message": "execution reverted", "data": "0xdeadbeef"}
    assert rpc(url, "eth_call", [{"from": dev, "data": "0xfe"}])["error"]["code"] == -32000

    head = int(rpc(url, "eth_blockNumber")["result"], 16)
    assert rpc(url, "anvil_mine", ["0x3"])["result"] is None
    assert rpc(url, "evm_mine")["result"] == "0x0"
    assert int(rpc(url, "eth_blockNumber")["result"], 16) == head + 4
    block = rpc(url, "eth_getBlockByNumber", ["latest", True])["result"]
    assert int(block["number"], 16) == head + 4 and block["transactions"] == []

    logs = rpc(url, "eth_getLogs", [{"fromBlock": "earliest", "toBlock": "latest"}])["result"]
    assert logs and {"address", "topics", "data", "blockNumber", "logIndex", "transactionHash"} <= set(logs[0])
    first_topic = logs[0]["topics"][0]
    either = rpc(url, "eth_getLogs", [{"fromBlock": "0x0", "topics": [["0x" + "00" * 32, first_topic]]}])["result"]
    assert either and all(log["topics"][0] == first_topic for log in either)

    dead = "0x000000000000000000000000000000000000dEaD"
    assert rpc(url, "anvil_setBalance", [dead, hex(10**20)])["result"] is None
    assert rpc(url, "eth_getBalance", [dead, "latest"])["result"] == hex(10**20)
    assert rpc(url, "anvil_setBalance", [dead, "0x5"])["result"] is None  # lowering works too
    assert rpc(url, "eth_getBalance", [dead, "latest"])["result"] == "0x5"
    assert rpc(url, "anvil_setStorageAt", [dead, "0x7", "0x" + "00" * 31 + "2a"])["result"] is True
    assert int(rpc(url, "eth_getStorageAt", [dead, "0x7", "latest"])["result"], 16) == 42

    batch = [{"jsonrpc": "2.0", "id": i, "method": m, "params": []} for i, m in enumerate(["eth_chainId", "nope_x"])]
    answers = httpx.post(url, json=batch, timeout=30).json()
    assert answers[0] == {"jsonrpc": "2.0", "id": 0, "result": hex(DEFAULT_CHAIN_ID)}
    assert answers[1]["error"]["code"] == -32601
    assert httpx.post(url, content=b"{not json", timeout=30).json()["error"]["code"] == -32700


def test_separate_process() -> None:
    node = start_embedded_chain(process=True)
    try:
        assert node.process is not None
        client = ChainClient.connect(node.url)
        assert client.chain_id == DEFAULT_CHAIN_ID
        acct = client.new_account(10**18)
        assert client.balance(acct.address) == 10**18
    finally:
        node.stop()
    assert node.process.poll() is not None


def test_stop_cuts_kept_alive_connections() -> None:
    """A stopped node must look down to clients already connected (followers detect outages that way)."""
    node = start_embedded_chain()
    body = {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}
    with httpx.Client(timeout=5) as session:
        assert session.post(node.url, json=body).json()["result"] == "0x0"
        node.stop()
        with pytest.raises(httpx.TransportError):
            session.post(node.url, json=body)


@pytest.mark.parametrize("price", [None, "0x0"])
def test_a_call_from_an_account_without_ether_runs_as_on_anvil(
    node: EmbeddedChain, anvil_node: Anvil, task: TaskContract, price: str | None
) -> None:
    """anvil runs ``eth_call`` without a gas price at price zero, so a sender holding nothing (the forwarder, when
    the API simulates a relayed request) can call; the embedded chain must answer the same."""
    call: dict[str, Any] = {"from": "0x" + "11" * 20, "to": task.address, "gas": hex(5_000_000)}
    call["data"] = "0x" + keccak(text="taskCount()")[:4].hex()
    if price is not None:
        call["gasPrice"] = price
    embedded = rpc(node.url, "eth_call", [call, "latest"])
    assert "result" in embedded, embedded
    assert int(embedded["result"], 16) >= 0
    empty = rpc(anvil_node.url, "eth_call", [{**call, "to": "0x" + "22" * 20, "data": "0x"}, "latest"])
    assert rpc(node.url, "eth_call", [{**call, "to": "0x" + "22" * 20, "data": "0x"}, "latest"]) == empty
