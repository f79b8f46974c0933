"""The train report's chain counters (``ledger.usage``) on both chains: they agree with the receipts the client saw."""

from __future__ import annotations

import pytest

from fgbdt_chain.ledger.client import ChainClient
from fgbdt_chain.ledger.contracts import TaskConfig, TaskContract
from fgbdt_chain.ledger.reference import ONE
from fgbdt_chain.ledger.usage import ChainUsage

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
