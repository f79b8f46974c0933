"""Signed raw transactions, EIP-1559 (type 2) and legacy (EIP-155), encoded straight from their fields.

Why not ``eth_account.Account.sign_transaction``: it checks and converts every field of a transaction dictionary
and serialises through typed-transaction classes, 0.72 ms for a legacy transaction of 20 KB of calldata and 1.08 ms
for a type-2 one (measured here), against 0.24 ms for the same bytes encoded here with ``rlp`` and signed with the
kept key object (``ledger.spec.signing_keys``). A party signs thousands of such transactions per task on two cores it
shares with the node. ``tests/contracts/test_client.py`` checks that both kinds are byte for byte eth-account's.
"""

from __future__ import annotations

from typing import Any

import rlp
from eth_keys.datatypes import PrivateKey
from eth_utils import keccak

TYPE_1559 = b"\x02"


def _address(value: Any) -> bytes:
    """A ``to`` field as 20 bytes, or empty for a contract creation."""
    if not value:
        return b""
    return bytes.fromhex(value.removeprefix("0x")) if isinstance(value, str) else bytes(value)


def _data(value: Any) -> bytes:
    if not value:
        return b""
    return bytes.fromhex(value.removeprefix("0x")) if isinstance(value, str) else bytes(value)


def sign_transaction(tx: dict[str, Any], key: PrivateKey) -> tuple[bytes, bytes]:
    """(raw transaction, its hash) of ``tx`` signed by ``key``: type 2 when ``tx`` has ``maxFeePerGas``, else legacy
    with EIP-155 replay protection. ``tx`` holds ``chainId``, ``nonce``, ``gas``, ``to`` (absent or empty to create a
    contract), ``value``, ``data`` and the fee fields; no access list."""
    to, data = _address(tx.get("to")), _data(tx.get("data"))
    chain_id, nonce, gas, value = int(tx["chainId"]), int(tx["nonce"]), int(tx["gas"]), int(tx.get("value", 0))
    if "maxFeePerGas" in tx:
        fields: list[Any] = [
            chain_id,
            nonce,
            int(tx["maxPriorityFeePerGas"]),
            int(tx["maxFeePerGas"]),
            gas,
            to,
            value,
            data,
            [],
        ]
        signature = key.sign_msg_hash(keccak(TYPE_1559 + rlp.encode(fields)))
        raw = TYPE_1559 + rlp.encode([*fields, signature.v, signature.r, signature.s])
    else:
        fields = [nonce, int(tx["gasPrice"]), gas, to, value, data]
        signature = key.sign_msg_hash(keccak(rlp.encode([*fields, chain_id, 0, 0])))
        raw = rlp.encode([*fields, signature.v + 35 + 2 * chain_id, signature.r, signature.s])
    return raw, keccak(raw)
