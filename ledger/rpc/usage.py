"""What a task cost the chain, counted block by block: transactions, the blocks that carried them, gas, calldata, and
the largest single transaction in bytes and in gas.

Why the largest ones: a permissioned multi-node network refuses what a local devnet takes (geth's transaction pool
drops a transaction over 128 KB; a block holds 30M gas), so the train report says how close the protocol comes to
those limits, not only its totals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hexbytes import HexBytes
from web3.exceptions import MethodUnavailable, TransactionNotFound, Web3RPCError

from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.tx_size import BLOCK_GAS_LIMIT, POOL_TX_LIMIT

FIXED_FIELDS_SLACK = 64
"""Bytes by which a signed transaction's fields other than calldata can differ in encoded length (EIP-1559 or
legacy: nonce, gas, fees, value, signature, and the list headers): well above the largest difference."""


@dataclass
class ChainUsage:
    """Counters over the blocks after ``start_block``; :meth:`scan` reads each block once, so a follower can call it
    at every poll and the report at the end."""

    start_block: int
    scanned: int = 0
    txs: int = 0
    blocks: int = 0
    gas: int = 0
    calldata_bytes: int = 0
    max_calldata_bytes: int = 0
    max_tx_gas: int = 0
    _near_largest: dict[HexBytes, int] = field(default_factory=dict, repr=False)
    """Transactions whose calldata is within ``FIXED_FIELDS_SLACK`` bytes of the most: one of them is the largest."""
    _largest_size: int | None = field(default=None, repr=False)

    def scan(self, client: ChainClient, latest: int) -> None:
        """Count the blocks up to ``latest`` not counted yet."""
        for b in range(max(self.scanned, self.start_block) + 1, latest + 1):
            gas_used, txs = _block(client, b)
            if not txs:
                continue
            self.blocks += 1
            self.txs += len(txs)
            self.gas += gas_used
            for tx_hash, size in txs:
                self.calldata_bytes += size
                if size >= self.max_calldata_bytes - FIXED_FIELDS_SLACK:
                    self.max_calldata_bytes = max(self.max_calldata_bytes, size)
                    self._near_largest[tx_hash] = size
                    floor = self.max_calldata_bytes - FIXED_FIELDS_SLACK
                    self._near_largest = {h: n for h, n in self._near_largest.items() if n >= floor}
                    self._largest_size = None
            if len(txs) == 1:
                self.max_tx_gas = max(self.max_tx_gas, gas_used)
            else:
                self.max_tx_gas = max(self.max_tx_gas, *_receipts_gas(client, b, [h for h, _ in txs]))
        self.scanned = max(self.scanned, latest)

    def max_tx_bytes(self, client: ChainClient) -> int | None:
        """The signed size of the largest transaction, or None where the node does not serve raw transactions. Only
        those with about the most calldata are read: the rest of a signed transaction is a few dozen bytes of fields
        whose encoded length varies (nonce, gas, signature), so the one with the most calldata may be a byte or two
        short of the largest (measured: 11,274 against 11,275)."""
        if not self._near_largest:
            return 0
        if self._largest_size is None:
            try:
                self._largest_size = max(len(client.w3.eth.get_raw_transaction(h)) for h in self._near_largest)
            except (MethodUnavailable, TransactionNotFound, Web3RPCError, NotImplementedError, ValueError):
                # a node without eth_getRawTransactionByHash (the embedded chain): the size stays unknown
                return None
        return self._largest_size

    def report(self, client: ChainClient) -> dict[str, Any]:
        """The counters as the train report's fields."""
        largest = self.max_tx_bytes(client)
        return {
            "tx_count": self.txs,
            "blocks": self.blocks,
            "gas_used": self.gas,
            "calldata_bytes": self.calldata_bytes,
            "max_tx_bytes": largest,
            "max_tx_gas": self.max_tx_gas,
            "fits_geth_pool": None if largest is None else largest <= POOL_TX_LIMIT,
            "fits_30m_block": self.max_tx_gas <= BLOCK_GAS_LIMIT,
        }


def _block(client: ChainClient, number: int) -> tuple[int, list[tuple[HexBytes, int]]]:
    """A block's gas used and its transactions' (hash, calldata bytes). Over HTTP the sizes are read off the hex
    strings as the node sends them: web3's formatters turned every transaction's calldata into bytes, megabytes per
    level, which was most of the requester's CPU during a task (6.4 s of a 57 s run)."""
    block = client.raw_result("eth_getBlockByNumber", [hex(number), True])
    if block is not None:  # calldata as a hex string: two characters a byte after "0x"
        return int(block["gasUsed"], 16), [
            (HexBytes(tx["hash"]), (len(_calldata(tx)) - 2) // 2) for tx in block["transactions"]
        ]
    got = client.w3.eth.get_block(number, full_transactions=True)
    full: list[Any] = list(got["transactions"])
    return int(got["gasUsed"]), [(HexBytes(tx["hash"]), len(_calldata(tx))) for tx in full]


def _calldata(tx: Any) -> Any:
    """A transaction's calldata field, hex or bytes: eth-tester (the embedded chain, in process or served over
    HTTP) names it "data" where nodes say "input"."""
    return tx["input"] if "input" in tx else tx["data"]


def _receipts_gas(client: ChainClient, number: int, hashes: list[HexBytes]) -> list[int]:
    """Each transaction's gas in a block of several: one ``eth_getBlockReceipts`` where the node has it."""
    receipts = client.raw_result("eth_getBlockReceipts", [hex(number)])
    if receipts is not None and len(receipts) == len(hashes):
        return [int(r["gasUsed"], 16) for r in receipts]
    return [int(client.w3.eth.get_transaction_receipt(h)["gasUsed"]) for h in hashes]
