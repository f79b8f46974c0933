"""A reward deposit signed where the key is: the ``fund(taskId)`` transaction a client signs itself, and its
broadcast once it is checked.

Why a transaction of its own and not a relayed request: the deposit is the signer's ether, which a relayer cannot
send on its behalf (a ``ForwardRequest``'s value is paid by whoever relays it). A browser wallet sends such a
transaction itself; a key held in a web page has no node to send it to, so the API says what to sign (nonce, gas
and fees as the chain asks now) and broadcasts the signed bytes, which carry no key and can only do what they say.
Before broadcasting, the bytes are checked to be a ``fund`` of this task on this chain with some value, so that the
endpoint cannot be used to relay any other transaction.
"""

from __future__ import annotations

from typing import Any, Literal

import rlp
from eth_account import Account
from eth_account.typed_transactions import TypedTransaction
from eth_utils import to_checksum_address
from fastapi.exceptions import RequestValidationError
from hexbytes import HexBytes
from web3.exceptions import ContractLogicError, TimeExhausted, Web3RPCError

from fgbdt_chain.api import dashboard_models as dm
from fgbdt_chain.api.errors import ApiError
from fgbdt_chain.api.service import Backend
from fgbdt_chain.ledger.rpc.errors import ContractRevert, reason_of, revert_data_of
from fgbdt_chain.ledger.wrappers.contracts import Status

FUND = "fund"
GAS_MARGIN = 1.25
"""The gas limit over the estimate: a deposit's cost does not depend on the state, so a quarter covers any drift."""
RECEIPT_TIMEOUT = 120.0
EIP1559: Literal[2] = 2
REFUSALS = (Web3RPCError, ContractLogicError)
"""What web3 raises for a node's refusal (a revert at the estimate or call, a transaction the pool refuses)."""


def _fund_data(backend: Backend, task_id: int) -> str:
    task = backend.task()
    return task.client.encode_call(task.contract, FUND, [task_id])


def _open(backend: Backend, task_id: int) -> None:
    st = backend.state(task_id)
    if st.status != Status.OPEN:
        name = Status(st.status).name.lower()
        raise ApiError(409, f"task {task_id} is {name}: a reward is deposited while the task is open", "WrongStatus")


def deposit_transaction(backend: Backend, task_id: int, sender: str, amount_wei: int) -> dm.DepositTransaction:
    """The unsigned ``fund(task_id)`` transaction of ``amount_wei`` from ``sender``: its next nonce, a gas limit
    from the estimate and the fees the chain asks (EIP-1559 where blocks have a base fee, else a gas price)."""
    _open(backend, task_id)
    client = backend.client()
    w3 = client.w3
    sender = to_checksum_address(sender)
    to = backend.task().address
    data = _fund_data(backend, task_id)
    balance = client.balance(sender)
    if balance < amount_wei:  # said before estimating, whose refusal would name gas first
        raise ApiError(409, f"{sender} holds {balance} wei, short of the {amount_wei} wei deposit", "InsufficientFunds")
    call: Any = {"from": sender, "to": to, "value": amount_wei, "data": data}
    try:
        gas = int(int(w3.eth.estimate_gas(call)) * GAS_MARGIN)
    except REFUSALS as exc:
        raise _refused(client, exc, f"a deposit of {amount_wei} wei from {sender}") from exc
    latest = w3.eth.get_block("latest")
    base = latest.get("baseFeePerGas")
    tx = dm.DepositTransaction(
        task_id=task_id,
        chain_id=client.chain_id,
        sender=sender,
        nonce=int(w3.eth.get_transaction_count(sender, "pending")),
        to=to,
        value=amount_wei,
        data=data,
        gas=gas,
        tx_type=0,
    )
    if base is None:
        tx.gas_price = int(w3.eth.gas_price)
        cost = gas * tx.gas_price
    else:
        tip = int(w3.eth.max_priority_fee)
        cap = 2 * int(base) + tip  # clears the next blocks (the base fee grows by at most 1/8 a block)
        tx.tx_type, tx.max_fee_per_gas, tx.max_priority_fee_per_gas = EIP1559, cap, tip
        cost = gas * cap
    if balance < amount_wei + cost:
        raise ApiError(
            409,
            f"{sender} holds {balance} wei, short of the {amount_wei} wei deposit and up to {cost} wei of gas",
            "InsufficientFunds",
        )
    return tx


def _invalid(msg: str) -> RequestValidationError:
    """A 422 located at the body's ``raw_transaction``, shaped as the schema's own (``api.error_handlers``)."""
    return RequestValidationError([{"loc": ["body", "raw_transaction"], "msg": msg, "type": "value_error"}])


def _address(value: bytes | str) -> str:
    """A transaction's ``to`` as hex ("" for a contract creation)."""
    raw = bytes.fromhex(value.removeprefix("0x")) if isinstance(value, str) else bytes(value)
    return "0x" + raw.hex() if raw else ""


def _fields(raw: bytes) -> tuple[int | None, str, int, str]:
    """(chain id, to, value, data) of a signed transaction: EIP-1559 or legacy (EIP-155: its chain id in ``v``)."""
    try:
        if raw[:1] == bytes([EIP1559]):
            tx = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
            return int(tx["chainId"]), _address(tx["to"]), int(tx["value"]), "0x" + bytes(tx["data"]).hex()
        if raw[:1] and raw[0] >= 0xC0:
            fields = rlp.decode(raw)
            if len(fields) != 9:
                raise ValueError(f"a legacy transaction has 9 fields, this has {len(fields)}")
            value, v = int.from_bytes(fields[4], "big"), int.from_bytes(fields[6], "big")
            return (v - 35) // 2 if v >= 35 else None, _address(fields[3]), value, "0x" + bytes(fields[5]).hex()
    except (ValueError, TypeError, KeyError, rlp.exceptions.RLPException) as exc:
        raise _invalid(f"not a signed transaction: {exc}") from exc
    raise _invalid("neither an EIP-1559 (type 2) nor a legacy transaction")


def broadcast_deposit(backend: Backend, task_id: int, raw_hex: str) -> dm.DepositResult:
    """Send a signed ``fund(task_id)`` transaction once it is shown to be one (this chain, the contract, this task,
    a value) and answer with its receipt; the chain's refusals (nonce, balance, fees) and the contract's revert are
    reported with their reason."""
    raw = bytes.fromhex(raw_hex[2:])
    chain_id, to, value, data = _fields(raw)
    client = backend.client()
    what = f"the transaction is not a deposit to task {task_id}"
    if chain_id is not None and chain_id != client.chain_id:
        raise _invalid(f"{what}: it is signed for chain {chain_id}, this is chain {client.chain_id}")
    if chain_id is None:
        raise _invalid(f"{what}: it names no chain (EIP-155), so it could be replayed elsewhere")
    if to.lower() != backend.task().address.lower():
        raise _invalid(f"{what}: it is sent to {to}, not the task contract {backend.task().address}")
    if data.lower() != _fund_data(backend, task_id).lower():
        raise _invalid(f"{what}: its data is not fund({task_id})")
    if value <= 0:
        raise _invalid(f"{what}: it sends no ether")
    try:
        sender = to_checksum_address(Account.recover_transaction(raw))
    except Exception as exc:  # eth-account raises several kinds for a bad signature
        raise _invalid(f"its signature does not recover a sender: {exc}") from exc
    _open(backend, task_id)
    w3 = client.w3
    try:
        tx_hash = w3.eth.send_raw_transaction(raw)
        receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=RECEIPT_TIMEOUT, poll_latency=0.05)
    except REFUSALS as exc:
        raise _refused(client, exc, f"the deposit from {sender}") from exc
    except TimeExhausted as exc:
        raise ApiError(504, f"the deposit {tx_hash.hex()} was not mined within {RECEIPT_TIMEOUT:.0f} s") from exc
    finally:
        backend.finished.drop(task_id)
    if int(receipt["status"]) != 1:
        call: Any = {"from": sender, "to": to, "value": value, "data": data}
        try:
            w3.eth.call(call, int(receipt["blockNumber"]) - 1)
        except REFUSALS as exc:
            raise _refused(client, exc, f"the deposit from {sender}") from exc
        raise ApiError(409, f"the deposit from {sender} failed in block {receipt['blockNumber']}", "Reverted")
    funded = [e for e in client.decode_events(receipt["logs"], ("TaskFunded",))]
    reward = int(funded[0].args["reward"]) if funded else backend.task().state(task_id).reward
    return dm.DepositResult(
        tx_hash="0x" + bytes(receipt["transactionHash"]).hex().removeprefix("0x"),
        block=int(receipt["blockNumber"]),
        gas_used=int(receipt["gasUsed"]),
        task_id=task_id,
        sender=sender,
        amount_wei=value,
        reward_wei=reward,
    )


def _refused(client: Any, exc: Exception, what: str) -> Exception:
    """The contract's revert (decoded: mapped as every revert is) or the chain's refusal with its reason (409)."""
    data = revert_data_of(exc)
    if data is not None:
        decoded: ContractRevert = client.decoder.decode(data, FUND)
        return decoded
    return ApiError(409, f"the chain refuses {what}: {reason_of(exc)}", "ChainRefused")
