"""The ledger client: concurrent senders get distinct nonces, gas is accounted per call, reverts and events decode;
fees, funding, confirmations and refusals as any chain has them."""

from __future__ import annotations

import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from chain_helpers import is_embedded
from eth_account import Account
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.deploy.cli import UserError, build_parser
from fgbdt_chain.deploy.cmd_deploy import run_deploy
from fgbdt_chain.ledger.devnet.anvil import Anvil, start_anvil
from fgbdt_chain.ledger.devnet.nodes import GANACHE_KEY, start_ganache
from fgbdt_chain.ledger.rpc import evm_probe
from fgbdt_chain.ledger.rpc.client import ChainClient, _lean_receipt
from fgbdt_chain.ledger.rpc.errors import ChainRefused, ContractRevert, ErrorDecoder
from fgbdt_chain.ledger.rpc.tx_signing import sign_transaction
from fgbdt_chain.ledger.spec.encoding import endorsement_digest
from fgbdt_chain.ledger.spec.parameters import MAX_DEPTH
from fgbdt_chain.ledger.spec.reference import MAX_PARTIES, ONE
from fgbdt_chain.ledger.spec.signing_keys import signing_key
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract

pytestmark = pytest.mark.chain


def test_concurrent_senders_share_nonces_safely(anvil_client: ChainClient) -> None:
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    requester = anvil_client.new_account(10**21)
    before = len([r for r in anvil_client.gas_log if r.function == "createTask"])

    def create(i: int) -> int:
        tid, _ = task.create_task(requester, TaskConfig(), [0, i], [ONE, ONE + i], reward=i)
        return tid

    with ThreadPoolExecutor(max_workers=4) as pool:
        ids = list(pool.map(create, range(12)))
    assert sorted(ids) == list(range(1, 13))
    assert task.task_count() == 12
    assert sorted(task.state(t).reward for t in ids) == list(range(12))
    records = [r for r in anvil_client.gas_log if r.function == "createTask"][before:]
    assert len(records) == 12 and all(r.gas_used > 21_000 and r.calldata_bytes > 4 for r in records)


def test_events_and_gas_of_a_transaction(chain: ChainClient, task_contract: TaskContract) -> None:
    requester = chain.new_account(10**20)
    tid, res = task_contract.create_task(requester, TaskConfig(), [1, 2], [3, 4], b"\x22" * 32, reward=5)
    ev = res.event("TaskCreated").args
    assert ev["requester"] == requester.address and ev["reward"] == 5
    assert list(ev["featureMin"]) == [1, 2] and ev["binEdgesHash"] == b"\x22" * 32
    assert ev["cfg"]["depth"] == TaskConfig().depth
    assert res.gas_used == chain.gas_log[-1].gas_used
    assert task_contract.config(tid) == TaskConfig()
    funded = task_contract.fund(requester, tid, 7)
    assert funded._events is None and funded.logs  # its events are decoded when first read
    assert funded.events == chain.decode_events(funded.logs) and funded._events is not None
    assert task_contract.state(tid).reward == 12


def test_transactions_wait_in_one_round_trip_where_the_node_offers_it(chain: ChainClient) -> None:
    """anvil answers ``eth_sendRawTransactionSync`` with the receipt (one round trip); the embedded chain does not
    offer it and the client falls back to sending and polling. Either way the receipt and events are the same."""
    task = TaskContract.deploy(chain, chain.new_account(10**21))
    tid, res = task.create_task(chain.new_account(10**20), TaskConfig(), [0], [ONE], reward=3)
    assert res.event("TaskCreated").args["reward"] == 3 and res.block_number == chain.block_number
    assert chain._sync_send is not is_embedded(chain)
    with pytest.raises(ContractRevert, match="UnknownTask"):  # reverts still come back by name
        task.fund(chain.new_account(10**20), tid + 1, 1)


def test_lean_receipts_read_as_web3_formats_them(anvil_client: ChainClient) -> None:
    """``_lean_receipt`` keeps the fields the client reads from a node's receipt, each as web3's formatter gives it: a
    transaction that deploys a contract and one that calls it and logs an event."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    deploy_block = anvil_client.w3.eth.get_block(anvil_client.block_number)
    _, created = task.create_task(anvil_client.new_account(10**20), TaskConfig(), [0], [ONE], reward=3)
    hashes = ["0x" + bytes(deploy_block["transactions"][-1]).hex(), "0x" + created.tx_hash.removeprefix("0x")]
    for tx_hash in hashes:
        formatted = anvil_client.w3.eth.get_transaction_receipt(tx_hash)  # type: ignore[arg-type]
        lean = _lean_receipt(anvil_client.raw_result("eth_getTransactionReceipt", [tx_hash]))
        for key in ("status", "gasUsed", "blockNumber", "transactionHash", "contractAddress"):
            assert lean[key] == formatted[key] and type(lean[key]) is type(formatted[key]), key
        assert anvil_client.decode_events(lean["logs"]) == anvil_client.decode_events(formatted["logs"])
    assert _lean_receipt(anvil_client.raw_result("eth_getTransactionReceipt", [hashes[0]]))["contractAddress"] == (
        task.contract.address
    )
    assert lean["contractAddress"] is None and len(lean["logs"]) == len(created.events) > 0


def test_a_synchronous_send_that_outlasts_the_timeout_waits_for_its_receipt(artifacts: dict) -> None:
    """On a node whose blocks come slower than the client's timeout, ``eth_sendRawTransactionSync`` times out with
    the transaction in the pool; the client then polls for its receipt instead of counting it lost.

    Blocks every 3 s: libcurl calls the transport's silence watch about once a second while nothing moves, so a
    0.2 s timeout fires within about a second, and a 1 s block could answer first."""
    node = start_anvil(block_time=3.0)
    try:
        chain = ChainClient.connect(node.url, timeout=0.2)
        chain.artifacts = artifacts
        timeouts: list[str] = []
        sync_send = chain._send_sync

        def counted(raw: bytes) -> Any:
            try:
                return sync_send(raw)
            except TimeoutError as exc:
                timeouts.append(str(exc))
                raise

        chain._send_sync = counted  # type: ignore[method-assign]
        sender = chain.new_account(10**21)
        harness = chain.deploy("FGBDTMath", sender)  # its library, then itself: two transactions
        assert chain.w3.eth.get_code(harness.address) and chain.gas_log[-1].function == "deploy FGBDTMath"
        sent = len(chain.gas_log)
        assert sent == 2 and len(timeouts) == sent and all("no answer for 0.2 s" in t for t in timeouts)
        # each sent once, and the client's next nonce is the node's: none counted lost, none sent again
        assert chain.w3.eth.get_transaction_count(sender.address) == chain._nonces[sender.address] == sent
    finally:
        node.stop()


def test_a_send_that_timed_out_before_the_node_took_it_fails_and_frees_its_nonce(
    anvil_client: ChainClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timeout where the node does not have the transaction (it never got there) is a failed send: it raises, and
    the next transaction takes the nonce from the node, not one past a transaction that does not exist."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    requester = anvil_client.new_account(10**20)

    def lost(raw: bytes) -> Any:
        raise TimeoutError("no answer (test)")

    with monkeypatch.context() as patch:
        patch.setattr(anvil_client, "_send_sync", lost)
        with pytest.raises(TimeoutError, match="createTask from the node, which does not have it"):
            task.create_task(requester, TaskConfig(), [0], [ONE], reward=1)
    tid, _ = task.create_task(requester, TaskConfig(), [0], [ONE], reward=2)
    assert task.state(tid).reward == 2 and anvil_client.w3.eth.get_transaction_count(requester.address) == 1


def test_endorsement_digest_matches_off_chain_encoding(chain: ChainClient, task_contract: TaskContract) -> None:
    party = to_checksum_address("0x" + "ab" * 20)
    root = keccak(b"root")
    harness = chain.deploy("EndorseDigestHarness", chain.new_account(10**21))  # the library, as FGBDTChain calls it
    want = endorsement_digest(chain.chain_id, harness.address, 3, 1, 2, party, root)
    assert bytes(chain.call(harness, "digest", 3, 1, 2, party, root, [ONE, ONE, ONE])) == want
    assert bytes(chain.call(harness, "digest", 3, 1, 3, party, root, [ONE, ONE, ONE])) != want
    assert bytes(chain.call(harness, "digest", 3, 1, 2, party, root, [ONE, ONE, ONE - 1])) != want
    assert task_contract.limits() == (MAX_PARTIES, MAX_DEPTH) == (64, 8)
    # the parameter table's limits, which the command line, the APIs and the simulator refuse with
    assert task_contract.limits() == (MAX_PARTIES, MAX_DEPTH)


def test_error_decoder_handles_panic_error_and_unknown(artifacts: dict) -> None:
    dec = ErrorDecoder(a.abi for a in artifacts.values())
    panic = keccak(text="Panic(uint256)")[:4] + (0x11).to_bytes(32, "big")
    assert (dec.decode(panic).name, dec.decode(panic).args_) == ("Panic", (0x11,))
    assert dec.decode("0xdeadbeef").name == "Unknown"
    e = dec.decode(keccak(text="UnknownTask(uint256)")[:4] + (7).to_bytes(32, "big"))
    assert isinstance(e, ContractRevert) and (e.name, e.args_) == ("UnknownTask", (7,))


def test_failed_transaction_names_the_error_of_a_race_within_its_block(anvil_client: ChainClient) -> None:
    """Two parties close the same step past its deadline (one party stayed silent); both estimates pass, both land
    in one block, the second fails: its error is recovered from the state after the block (its parent state would
    let it pass)."""
    from chain_helpers import open_task

    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    fed = open_task(anvil_client, task, TaskConfig(trees=1, depth=1, bins=3, min_parties=3, max_parties=3), 3)
    for p in fed.parties[:2]:
        task.submit_votes(p, fed.task_id, 0, 0, [0])
    anvil_client.mine(task.state(fed.task_id).step_deadline - anvil_client.block_number + 1)
    closers = [fed.resolver, fed.requester]
    provider: Any = anvil_client.w3.provider
    provider.make_request("evm_setAutomine", [False])
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(task.close_step, c, fed.task_id) for c in closers]
            deadline = time.monotonic() + 10
            while anvil_client.w3.eth.get_block("pending")["transactions"].__len__() < 2:
                assert time.monotonic() < deadline, "both closing transactions should be pending"
                time.sleep(0.05)
            anvil_client.mine(1)
            outcomes = []
            for f in futures:
                try:
                    outcomes.append(f.result(timeout=30).function)
                except ContractRevert as exc:
                    outcomes.append(exc.name)
    finally:
        provider.make_request("evm_setAutomine", [True])
    # the first closes voting; the second finds the histogram step open
    assert sorted(outcomes) == ["StepStillOpen", "closeStep"]


def test_known_functions_are_sent_without_a_second_execution(anvil_client: ChainClient) -> None:
    """Once a function's gas is known, its transactions go out with a limit guessed from its receipts (no
    ``eth_estimateGas``); a failed one is named by the node's estimate (a short guess can fail with gas to spare, out of
    gas inside a library call), which makes the function dry-run again, and a guess that falls short is sent again
    once with the node's estimate."""
    client = ChainClient.connect(anvil_client.w3.provider.endpoint_uri)  # type: ignore[attr-defined]
    methods: list[str] = []
    provider: Any = client.w3.provider
    make_request = provider.make_request

    def recording(method: str, params: Any) -> Any:
        methods.append(str(method))
        return make_request(method, params)

    provider.make_request = recording
    estimate_gas = client.w3.eth.estimate_gas

    def estimating(tx: Any, *args: Any) -> Any:
        methods.append("eth_estimateGas")
        return estimate_gas(tx, *args)

    client.w3.eth.estimate_gas = estimating  # type: ignore[method-assign]
    task = TaskContract.deploy(client, client.new_account(10**21))
    requester = client.new_account(10**21)
    tid, _ = task.create_task(requester, TaskConfig(), [0], [ONE], reward=1)
    assert "eth_estimateGas" in methods  # the first createTask: nothing known yet
    methods.clear()
    tid2, res = task.create_task(requester, TaskConfig(), [0, 1], [ONE, ONE], reward=1)
    assert tid2 == tid + 1 and res.event("TaskCreated").args["taskId"] == tid2
    assert "eth_estimateGas" not in methods and methods.count("eth_sendRawTransactionSync") == 1
    task.fund(requester, tid, 5)
    before = client.block_number
    methods.clear()
    with pytest.raises(ContractRevert, match="UnknownTask"):
        task.fund(requester, tid2 + 10, 5)
    # mined once and failed, then named by the estimate, not sent again
    assert methods.count("eth_sendRawTransactionSync") == 1 and methods.count("eth_estimateGas") == 1
    assert client.block_number == before + 1
    methods.clear()
    task.fund(requester, tid, 5)  # a function that reverts often is dry-run first again
    assert "eth_estimateGas" in methods
    client._gas_seen["createTask"] = (30_000, 0.0)  # far too little for createTask
    methods.clear()
    tid3, _ = task.create_task(requester, TaskConfig(), [0], [ONE], reward=1)
    assert tid3 == tid2 + 1 and methods.count("eth_estimateGas") == 1
    assert methods.count("eth_sendRawTransactionSync") == 2  # the short guess, then the estimate
    # a limit that ran out is not a revert: the function keeps its guesses (no dry run next time), now from the
    # retry's receipt, and the shortfall is counted apart
    assert client.outcomes()["createTask"] == (3, 0, 1)
    methods.clear()
    tid4, _ = task.create_task(requester, TaskConfig(), [0], [ONE], reward=1)
    assert tid4 == tid3 + 1 and "eth_estimateGas" not in methods and methods.count("eth_sendRawTransactionSync") == 1
    assert client.outcomes()["fund"][1:] == (2, 0)  # the revert above: mined failed, then its naming estimate


def test_fresh_logs_decode_each_log_once_however_often_its_block_is_read(
    anvil_client: ChainClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An incremental reader reads its last blocks again (a node may announce a block before it serves its logs):
    ``fresh_logs`` gives each log once, the same event ``logs`` decodes, keyed by block hash and log index; a log
    whose decoding failed is not counted as seen."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**22))
    requester = anvil_client.new_account(10**21)
    start = anvil_client.block_number
    seen: dict[tuple[bytes, int], int] = {}
    assert task.client.fresh_logs(task.contract, ["TaskCreated"], None, start, "latest", seen) == []
    first, _ = task.create_task(requester, TaskConfig(), [0], [ONE], reward=1)
    with monkeypatch.context() as patch:

        def broken(logs: Any) -> list:
            raise ValueError("undecodable (test)")

        patch.setattr(task.client, "decode_events", broken)
        with pytest.raises(ValueError, match="undecodable"):
            task.client.fresh_logs(task.contract, ["TaskCreated"], first, start, "latest", seen)
    assert seen == {}
    got = task.client.fresh_logs(task.contract, ["TaskCreated"], first, start, "latest", seen)
    assert [e.args["taskId"] for e in got] == [first] and list(seen.values()) == [got[0].block_number]
    assert got == task.client.logs(task.contract, ["TaskCreated"], first, start)
    assert task.client.fresh_logs(task.contract, ["TaskCreated"], first, start, "latest", seen) == []  # read again
    second, _ = task.create_task(requester, TaskConfig(), [0], [ONE], reward=1)
    again = task.client.fresh_logs(task.contract, [], None, start, "latest", seen)
    assert [(e.name, e.args["taskId"]) for e in again] == [("TaskCreated", second)]


@pytest.mark.parametrize("to", ["0x" + "ab" * 20, None], ids=["call", "create"])
@pytest.mark.parametrize(
    "fees",
    [{"maxFeePerGas": 3 * 10**9 + 7, "maxPriorityFeePerGas": 10**9}, {"gasPrice": 2 * 10**9 + 1}],
    ids=["eip1559", "legacy"],
)
def test_transactions_are_signed_as_eth_account_signs_them(to: str | None, fees: dict[str, int]) -> None:
    """The client's own encoder (``ledger.rpc.tx_signing``) gives eth-account's bytes and hash, both kinds of
    transaction, calls and contract creations."""
    account = Account.from_key(keccak(b"signer"))
    tx: dict[str, Any] = {"chainId": 31337, "nonce": 7, "gas": 1_234_567, "value": 5, "data": bytes(range(256)) * 9}
    tx |= fees | ({"to": to_checksum_address(to)} if to else {})
    raw, tx_hash = sign_transaction(tx, signing_key(bytes(account.key)))
    expected = Account.sign_transaction(tx, account.key)
    assert raw == bytes(expected.raw_transaction) and tx_hash == bytes(expected.hash)


def test_fees_come_from_the_chain_as_eip1559_fields(anvil_client: ChainClient) -> None:
    """On a chain with a base fee: a type-2 transaction whose cap is twice the base fee plus the tip the node
    suggests, which is what it pays above the base fee."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    requester = anvil_client.new_account(10**20)
    tid, _ = task.create_task(requester, TaskConfig(), [0], [ONE], reward=1)
    sent = task.fund(requester, tid, 1)
    tx = anvil_client.w3.eth.get_transaction(sent.tx_hash)
    paid = int(anvil_client.w3.eth.get_transaction_receipt(sent.tx_hash)["effectiveGasPrice"])
    base = int(anvil_client.w3.eth.get_block(sent.block_number)["baseFeePerGas"])
    tip = int(anvil_client.w3.provider.make_request("eth_maxPriorityFeePerGas", [])["result"], 16)  # type: ignore[arg-type]
    assert tx["type"] == 2 and tx["maxPriorityFeePerGas"] == tip and paid == base + tip
    # the cap: twice a base fee read within the last second (the base fee only falls on an idle devnet)
    assert (tx["maxFeePerGas"] - tip) % 2 == 0 and (tx["maxFeePerGas"] - tip) // 2 >= base


def test_refusals_name_the_chains_reason(anvil_client: ChainClient) -> None:
    """A transaction the node refuses raises ChainRefused with the node's own words and the chain it came from."""
    penniless = Account.create()
    with pytest.raises(ChainRefused, match=r"(?i)fund from 0x.*chain 31337 at http.*insufficient funds"):
        anvil_client.fund(Account.create().address, 10**18, funder=penniless)


def test_a_transaction_waits_for_its_confirmations(anvil_node: Anvil) -> None:
    """With ``confirmations`` N a transaction returns once N blocks hold it (its own and N - 1 after it)."""
    client = ChainClient.connect(anvil_node.url)
    sender = client.new_account(10**20)
    client.confirmations = 3
    other = ChainClient.connect(anvil_node.url)

    def mine_later() -> None:
        time.sleep(0.5)
        other.mine(2)

    started = time.monotonic()
    threading.Thread(target=mine_later, daemon=True).start()
    before = client.block_number
    client.fund(Account.create().address, 1, funder=sender)
    assert time.monotonic() - started >= 0.5 and client.block_number >= before + 3


def test_a_chain_without_base_fee_sync_send_or_push0() -> None:
    """ganache at Berlin, as an older consortium network: legacy transactions at the node's gas price, the missing
    ``eth_sendRawTransactionSync`` found out once (ganache answers it with a parse-error code), blocks mined on
    request with ``evm_mine``, and an EVM that runs neither probe: ``fgbdt deploy`` refuses, naming PUSH0."""
    node = start_ganache(hardfork="berlin")
    try:
        client = ChainClient.connect(node.url)
        client.funder = Account.from_key(GANACHE_KEY)
        to = Account.create().address
        client.fund(to, 10**18)
        client.fund(to, 10**18)
        assert client.balance(to) == 2 * 10**18 and client._sync_send is False
        tx = client.w3.eth.get_transaction(client.w3.eth.get_block("latest")["transactions"][0])
        assert tx["type"] == 0 and tx["gasPrice"] == client.w3.eth.gas_price
        before = client.block_number
        client.mine(2)
        assert client.block_number == before + 2 and client._mine_method == "evm_mine" and client.can_mine()
        assert evm_probe.supported_versions(client.w3.provider) == []
        key = Path(tempfile.mkdtemp()) / "key"
        key.write_text(GANACHE_KEY)
        with pytest.raises(UserError, match=r"does not run PUSH0 \(EIP-3855\), from Shanghai on"):
            run_deploy(
                build_parser("deploy").parse_args(["deploy", "--rpc", node.url, "--key", str(key), "--out", "x"])
            )
    finally:
        node.stop()
