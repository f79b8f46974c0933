"""The train report's chain counters (``ledger.rpc.usage``) on both chains: they agree with the receipts the client
saw."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from web3.types import RPCEndpoint

from fgbdt_chain.ledger.devnet.anvil import start_anvil
from fgbdt_chain.ledger.devnet.embedded_rpc import start_embedded_chain
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.usage import ChainUsage
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract

pytestmark = pytest.mark.chain


def test_usage_counts_what_the_receipts_say(chain: ChainClient) -> None:
    task = TaskContract.deploy(chain, chain.new_account(10**21))
    requester = chain.new_account(10**21)
    usage = ChainUsage(chain.block_number)
    sent = len(chain.gas_log)
    for i in range(3):
        task.create_task(requester, TaskConfig(), [0] * (1 + 40 * i), [ONE] * (1 + 40 * i), reward=1)
        usage.scan(chain, chain.block_number)  # incremental, as the requester's follow loop calls it
    records = chain.gas_log[sent:]
    report = usage.report(chain)
    assert report["tx_count"] == len(records) == 3 and report["blocks"] == 3
    assert report["gas_used"] == sum(r.gas_used for r in records)
    assert report["max_tx_gas"] == max(r.gas_used for r in records)
    assert report["calldata_bytes"] == sum(r.calldata_bytes for r in records)
    usage.scan(chain, chain.block_number)  # nothing new: nothing counted twice
    assert usage.report(chain) == report
    largest = report["max_tx_bytes"]
    if largest is not None:  # anvil serves raw transactions; the embedded chain does not
        assert max(r.calldata_bytes for r in records) < largest < max(r.calldata_bytes for r in records) + 200
        assert report["fits_geth_pool"] is True
    assert report["fits_30m_block"] is True


def test_the_largest_transaction_is_found_among_equal_calldata(anvil_client: ChainClient) -> None:
    """Two transactions with the same calldata, the second several bytes longer signed (a gas limit and a value that
    encode longer): ``max_tx_bytes`` is the longer one's, where taking the first with the most calldata was short.
    The value's eight bytes keep the second the longer whatever the signatures: a gas limit alone is one byte longer,
    and a random signature's r or s loses a leading zero byte one time in 256 (CI met that once)."""
    client = anvil_client
    sender = client.new_account(10**21)
    usage = ChainUsage(client.block_number)
    sizes = []
    nonce = client.w3.eth.get_transaction_count(sender.address)
    for i, (gas, value) in enumerate(((30_000, 0), (16_000_000, 10**18))):
        tx = {"to": sender.address, "value": value, "data": b"\x01" * 100, "gas": gas, "chainId": client.chain_id}
        tx |= {"gasPrice": 2 * client.w3.eth.gas_price, "nonce": nonce + i}
        signed = sender.sign_transaction(tx)
        sizes.append(len(signed.raw_transaction))
        client.w3.eth.wait_for_transaction_receipt(client.w3.eth.send_raw_transaction(signed.raw_transaction))
    usage.scan(client, client.block_number)
    assert sizes[0] < sizes[1] and usage.max_calldata_bytes == 100
    assert usage.report(client)["max_tx_bytes"] == sizes[1]


def test_a_block_of_several_transactions_is_counted_from_its_receipts() -> None:
    """Under interval mining (a permissioned network's blocks) several transactions share a block: each is counted,
    the block once, and the largest gas is one transaction's, not the block's."""
    node = start_anvil(block_time=2)
    try:
        client = ChainClient.connect(node.url)
        w3 = client.w3
        sender = w3.eth.accounts[0]
        usage = ChainUsage(w3.eth.block_number)
        start = w3.eth.block_number
        while w3.eth.block_number == start:  # right after a block: the next is a whole interval away
            time.sleep(0.05)
        payloads = [b"", b"\x01" * 40, b"\x00\x02" * 300]
        hashes = [w3.eth.send_transaction({"from": sender, "to": sender, "data": p}) for p in payloads]
        receipts = [w3.eth.wait_for_transaction_receipt(h, timeout=30) for h in hashes]
        assert len({r["blockNumber"] for r in receipts}) == 1
        usage.scan(client, w3.eth.block_number)
        report = usage.report(client)
        assert report["tx_count"] == 3 and report["blocks"] == 1
        assert report["gas_used"] == sum(r["gasUsed"] for r in receipts)
        assert report["max_tx_gas"] == max(r["gasUsed"] for r in receipts) < report["gas_used"]
        assert report["calldata_bytes"] == sum(len(p) for p in payloads) and usage.max_calldata_bytes == 600
    finally:
        node.stop()


def test_usage_over_the_embedded_chains_http_server() -> None:
    """The embedded chain served over HTTP (``fgbdt demo`` without anvil) answers blocks in eth-tester's own field
    names: the raw JSON path reads them as the web3 path does."""
    node = start_embedded_chain()
    try:
        client = ChainClient.connect(node.url)
        w3 = client.w3
        sender = w3.eth.accounts[0]
        usage = ChainUsage(w3.eth.block_number)
        receipt = w3.eth.wait_for_transaction_receipt(
            w3.eth.send_transaction({"from": sender, "to": sender, "data": b"\x01" * 40})
        )
        usage.scan(client, w3.eth.block_number)
        report = usage.report(client)
        assert report["tx_count"] == 1 and report["calldata_bytes"] == 40
        assert report["gas_used"] == report["max_tx_gas"] == receipt["gasUsed"]
    finally:
        node.stop()


def test_a_transaction_sent_ahead_shares_the_block_and_goes_first() -> None:
    """``transact_ahead`` on a node that mines at intervals: the sender's next transaction goes in the same block,
    after it (nonce order), and its tip puts it before another sender's transaction sent earlier at the base price;
    the result is the mined transaction's. A node that mines a block per transaction gets it sent as ``transact``."""
    node = start_anvil()
    try:
        # deployed and funded a block per transaction, then mining every 2 s (the deployment is a dozen transactions)
        setup = ChainClient.connect(node.url)
        deployed = TaskContract.deploy(setup, setup.new_account(10**22))
        first, other = setup.new_account(10**21), setup.new_account(10**21)
        assert setup.w3.provider.make_request(RPCEndpoint("evm_setIntervalMining"), [2]).get("error") is None
        client = ChainClient.connect(node.url)
        assert not client.automines()
        task = TaskContract.at(client, deployed.address)
        args = (TaskConfig().as_tuple(), [0], [10**18], b"\x00" * 32)
        start = client.block_number
        while client.block_number == start:  # right after a block: the next is a whole interval away
            time.sleep(0.05)
        with ThreadPoolExecutor(max_workers=1) as pool:
            earlier = pool.submit(client.transact, task.contract, "createTask", *args, sender=other)
            time.sleep(0.2)  # in the pool before the transactions sent ahead
            ahead = client.transact_ahead(task.contract, "createTask", *args, sender=first)
            after = client.transact(task.contract, "createTask", *args, sender=first)
            sent, theirs = ahead(), earlier.result(timeout=30)
        assert sent.block_number == after.block_number == theirs.block_number
        index = {
            r.tx_hash: int(client.w3.eth.get_transaction_receipt(r.tx_hash)["transactionIndex"])
            for r in (sent, after, theirs)
        }
        assert index[sent.tx_hash] < index[after.tx_hash] and index[sent.tx_hash] < index[theirs.tx_hash]
        assert sent.events_named("TaskCreated")
    finally:
        node.stop()


def test_a_transaction_sent_ahead_on_an_automining_node_is_mined_at_once(anvil_client: ChainClient) -> None:
    client = anvil_client
    assert client.automines()
    task = TaskContract.deploy(client, client.new_account(10**22))
    sender = client.new_account(10**21)
    before = client.block_number
    result = client.transact_ahead(
        task.contract, "createTask", TaskConfig().as_tuple(), [0], [10**18], b"\x00" * 32, sender=sender
    )
    assert client.block_number == before + 1  # mined before the call returned
    assert result().events_named("TaskCreated")
