"""An HTTP JSON-RPC node backed by the in-process py-evm chain (eth-tester): the anvil stand-in without Node.js.

Why: party nodes and the requester are separate OS processes that reach the chain over JSON-RPC, and an
eth-tester chain lives inside one process, so on machines without anvil the demo needs it behind a URL. This module
serves one :class:`eth_tester.EthereumTester` (PyEVM backend, the ledger's block gas limit, chain id 31337 like
anvil, ten funded dev accounts) over HTTP with the methods the project uses, in the shapes anvil answers:

* ``eth_*`` requests go through web3's own eth-tester endpoint table and its request/result formatters (the code
  behind ``EthereumTesterProvider``), so behaviour matches web3's in-process eth-tester provider; results are
  re-encoded as JSON-RPC quantities and hex data;
* reverts of ``eth_call`` / ``eth_estimateGas`` are answered like anvil: error code 3, ``"data": "0x<revert bytes>"``
  (eth-tester only keeps a string rendering, so the call is re-executed to recover the exact bytes), which is what
  :func:`ledger.rpc.errors.revert_data_of` decodes into the custom error's name;
* block tags in ``eth_getLogs`` mean what they mean on anvil (eth-tester treats ``earliest`` as "pending");
* dev methods: ``anvil_mine`` / ``hardhat_mine`` / ``evm_mine``, ``anvil_setBalance`` / ``setStorageAt`` /
  ``setCode`` / ``setNonce`` (each seals one block), ``evm_snapshot`` / ``evm_revert``;
* batch requests (a JSON list), which ``ChainClient.call_many`` sends.

One lock serialises every request: py-evm is not thread-safe, and a node executes one transaction at a time anyway.

Run it in a thread of the calling process (``start_embedded_chain()``) or as its own process
(``start_embedded_chain(process=True)``, i.e. ``python -m ledger.embedded_rpc --port P``), which keeps the EVM's CPU
work off the caller's GIL.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_utils import to_checksum_address

from fgbdt_chain.ledger.devnet.anvil import DEFAULT_CHAIN_ID, free_port, stop_process, wait_until_ready
from fgbdt_chain.ledger.rpc.client import DEFAULT_GAS_LIMIT
from fgbdt_chain.ledger.rpc.errors import ERROR_SELECTOR
from fgbdt_chain.ledger.toolchain import paths

CLIENT_VERSION: str = "fgbdt-embedded-rpc/0.1 (eth-tester py-evm)"
"""``web3_clientVersion``: says which node this is when a party logs its chain."""

DEV_ACCOUNTS: int = 10
"""Funded, unlocked dev accounts (1,000,000 ether each), as many as anvil's default."""

_NAMED_BLOCKS = frozenset({"latest", "earliest", "pending", "safe", "finalized"})


class RpcError(Exception):
    """A JSON-RPC error answer: ``code``, ``message`` and optional ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def payload(self) -> dict[str, Any]:
        """The ``error`` member of the response."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


def _to_json(value: Any) -> Any:
    """Encode an eth-tester result as JSON-RPC does: integers as hex quantities, bytes as hex data.

    Why: web3's HTTP result formatters (and any non-Python client) expect the wire format, not eth-tester's ints;
    bools are ints in Python, so they are tested first.
    """
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return hex(value)
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    return str(value)


def _quantity(value: Any) -> int:
    """A JSON-RPC quantity (hex string or int) as int."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value, 16) if value.startswith(("0x", "0X")) else int(value)
    raise RpcError(-32602, f"invalid quantity: {value!r}")


class EmbeddedRPC:
    """One eth-tester chain and the JSON-RPC dispatch over it (transport-free, so it is testable without HTTP)."""

    def __init__(self, gas_limit: int = DEFAULT_GAS_LIMIT, chain_id: int = DEFAULT_CHAIN_ID) -> None:
        from eth_tester import EthereumTester, PyEVMBackend
        from web3 import EthereumTesterProvider

        params = PyEVMBackend.generate_genesis_params(overrides={"gas_limit": gas_limit})
        state = PyEVMBackend.generate_genesis_state(num_accounts=DEV_ACCOUNTS)
        backend = _indexed_backend_class()(genesis_parameters=params, genesis_state=state)
        # eth-tester hard-codes its chain id on the chain class; py-evm reads ``self.chain_id`` whenever it builds a
        # VM (CHAINID opcode, EIP-155), so an instance attribute makes the chain anvil's 31337 consistently.
        backend.chain.chain_id = chain_id
        backend.chain.gas_estimator = _measured_gas_estimate  # py-evm's hook; see the function for why
        self.chain_id = chain_id
        self.tester = EthereumTester(backend)
        self.provider = EthereumTesterProvider(self.tester)
        self.lock = threading.Lock()
        self._logs: list[dict[str, Any]] = []
        """Every log of the chain indexed so far, in chain order (eth-tester's shape)."""
        self._unindexed: list[Any] = []
        """Hashes of transactions sent through this node whose logs are not in ``_logs`` yet."""
        self.requests = 0
        """JSON-RPC requests answered (a batch counts each member)."""
        self.http_posts = 0
        """HTTP requests received (a batch counts once): shows that batching reaches the node as one request."""
        self._custom: dict[str, Callable[[list[Any]], Any]] = {
            "eth_chainId": lambda _p: self.chain_id,
            "net_version": lambda _p: str(self.chain_id),
            "net_listening": lambda _p: True,
            "web3_clientVersion": lambda _p: CLIENT_VERSION,
            "eth_call": self._eth_call,
            "eth_estimateGas": self._eth_estimate_gas,
            "eth_getLogs": self._eth_get_logs,
            "eth_sendRawTransaction": self._eth_send_raw_transaction,
            "anvil_mine": self._mine_n,
            "hardhat_mine": self._mine_n,
            "evm_mine": self._evm_mine,
            "anvil_setBalance": lambda p: self._set_state(p, "balance"),
            "anvil_setStorageAt": lambda p: self._set_state(p, "storage"),
            "anvil_setCode": lambda p: self._set_state(p, "code"),
            "anvil_setNonce": lambda p: self._set_state(p, "nonce"),
            "anvil_nodeInfo": lambda _p: {"chainId": self.chain_id, "client": CLIENT_VERSION},
        }

    # ------------------------------------------------------------------ dispatch

    def handle(self, payload: Any) -> Any:
        """The response to one request object, or the list of responses to a batch (in request order)."""
        if isinstance(payload, list):
            if not payload:
                return _error_response(None, RpcError(-32600, "empty batch"))
            return [self.handle_one(item) for item in payload]
        return self.handle_one(payload)

    def handle_one(self, request: Any) -> dict[str, Any]:
        """Answer one request object; never raises (every failure becomes a JSON-RPC error)."""
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            return _error_response(None, RpcError(-32600, "invalid request"))
        rid = request.get("id")
        params = request.get("params") or []
        if not isinstance(params, list):
            return _error_response(rid, RpcError(-32602, "params must be an array"))
        try:
            with self.lock:
                self.requests += 1
                result = self.dispatch(request["method"], params)
        except RpcError as exc:
            return _error_response(rid, exc)
        except Exception as exc:  # every other failure is the node refusing the request, as anvil's -32000
            return _error_response(rid, RpcError(-32000, f"{type(exc).__name__}: {exc}"))
        return {"jsonrpc": "2.0", "id": rid, "result": _to_json(result)}

    def dispatch(self, method: str, params: list[Any]) -> Any:
        """Run one method (the caller holds the lock); results may still hold ints and bytes."""
        custom = self._custom.get(method)
        result = custom(params) if custom is not None else self._via_tester_endpoints(method, params)
        if method in ("eth_sendRawTransaction", "eth_sendTransaction"):
            self._unindexed.append(result)
        elif method == "evm_revert":
            self._reindex_all()
        return result

    def _via_tester_endpoints(self, method: str, params: list[Any]) -> Any:
        """Run ``method`` exactly as ``EthereumTesterProvider`` plus its formatting middleware would."""
        from web3.providers.eth_tester.middleware import request_formatters, result_formatters

        namespace, _, endpoint = method.partition("_")
        endpoints = self.provider.api_endpoints or {}
        delegator = endpoints.get(namespace, {}).get(endpoint)
        if delegator is None:
            raise RpcError(-32601, f"method not found: {method}")
        fmt_in = request_formatters.get(method)  # type: ignore[call-overload]
        if fmt_in is not None:
            params = list(fmt_in(params))
        try:
            result = delegator(self.tester, params)
        except NotImplementedError as exc:
            raise RpcError(-32601, f"method not supported by the embedded chain: {method}") from exc
        fmt_out = (result_formatters or {}).get(method)  # type: ignore[call-overload]
        return fmt_out(result) if fmt_out is not None else result

    # ------------------------------------------------------------------ eth_ methods with anvil-shaped answers

    def _tx_and_block(self, params: list[Any]) -> tuple[dict[str, Any], Any]:
        """The call object in eth-tester's shape and its block identifier (``pending`` read as ``latest``)."""
        from web3.providers.eth_tester.middleware import transaction_request_transformer

        if not params or not isinstance(params[0], dict):
            raise RpcError(-32602, "expected a transaction object")
        tx = dict(params[0])
        if "input" in tx:  # newer clients send ``input``; eth-tester only knows ``data``
            tx.setdefault("data", tx["input"])
            del tx["input"]
        tx.pop("type", None)
        tx = {k: v for k, v in tx.items() if v is not None}
        tx = dict(transaction_request_transformer(tx))
        if "from" not in tx:
            tx["from"] = self.tester.get_accounts()[0]
        block: Any = params[1] if len(params) > 1 else "latest"
        if isinstance(block, dict):  # EIP-1898 block object
            block = block.get("blockNumber", "latest")
        if block in ("pending", "safe", "finalized", None):
            block = "latest"
        elif isinstance(block, str) and block not in _NAMED_BLOCKS:
            block = _quantity(block)
        return tx, block

    def _eth_call(self, params: list[Any]) -> Any:
        from eth.exceptions import Revert
        from eth_tester.exceptions import ValidationError

        tx, block = self._tx_and_block(params)
        try:
            computation = self._call_computation(tx, block)
        except ValidationError as exc:
            raise RpcError(-32602, f"invalid transaction: {exc}") from exc
        if computation.is_error:
            error = computation.error
            if isinstance(error, Revert):
                data = error.args[0] if error.args and isinstance(error.args[0], bytes) else b""
                raise RpcError(3, _revert_message(data), "0x" + data.hex())
            raise RpcError(-32000, f"EvmError: {type(error).__name__}")
        return "0x" + bytes(computation.output).hex()

    def _eth_estimate_gas(self, params: list[Any]) -> Any:
        tx, block = self._tx_and_block(params)
        try:
            return self.tester.estimate_gas(tx, block)
        except Exception as exc:
            raise self._execution_error(exc, tx, block) from exc

    def _execution_error(self, exc: Exception, tx: dict[str, Any], block: Any) -> Exception:
        """anvil's answer to a failed call: code 3 + revert bytes for a revert, -32000 for other EVM failures.

        The exact revert bytes are recovered by re-executing the call and reading the computation: eth-tester's
        exception only holds ``str()`` of them, already decoded (and so lost) for ``Error(string)``."""
        from eth.exceptions import Revert
        from eth_tester.exceptions import TransactionFailed, ValidationError

        if isinstance(exc, ValidationError):
            return RpcError(-32602, f"invalid transaction: {exc}")
        if not isinstance(exc, TransactionFailed) and type(exc).__name__ not in ("ContractPanicError",):
            return exc
        try:
            error = self._rerun(tx, block)
        except Exception:
            error = None
        if isinstance(error, Revert):
            data = error.args[0] if error.args and isinstance(error.args[0], bytes) else b""
            return RpcError(3, _revert_message(data), "0x" + data.hex())
        if error is not None:
            return RpcError(-32000, f"EvmError: {type(error).__name__}")
        data_fallback = _literal_bytes(str(exc.args[0]) if exc.args else "")
        if data_fallback is not None:
            return RpcError(3, "execution reverted", "0x" + data_fallback.hex())
        if exc.args and isinstance(exc.args[0], str):  # a decoded ``Error(string)`` reason
            reason = exc.args[0]
            return RpcError(
                3, f"execution reverted: {reason}", "0x" + (ERROR_SELECTOR + abi_encode(["string"], [reason])).hex()
            )
        return RpcError(-32000, f"execution failed: {exc}")

    def _rerun(self, tx: dict[str, Any], block: Any) -> BaseException | None:
        """Execute ``tx`` as a call on ``block``'s state and return the EVM error (None when it succeeds)."""
        computation = self._call_computation(tx, block)
        return computation.error if computation.is_error else None

    def _call_computation(self, tx: dict[str, Any], block: Any) -> Any:
        """Execute ``tx`` as a call on ``block``'s state (reverted afterwards) and return py-evm's computation.

        Why not eth-tester's ``call``: it charges the call's gas at the block's base fee, so a sender without ether
        cannot call (the API simulates every relayed request as an ``eth_call`` from the forwarder, which holds
        none). anvil, like geth, runs a call without a (non-zero) gas price at price zero and ignores the base fee;
        so does this, and a call that names a price is run as given."""
        from eth.vm.spoof import SpoofTransaction
        from eth_tester.backends.pyevm.main import _get_block_by_number

        tester = self.tester
        backend: Any = tester.backend
        raw_tx = dict(tester.normalizer.normalize_inbound_transaction({k: v for k, v in tx.items() if k != "chain_id"}))
        raw_block = tester.normalizer.normalize_inbound_block_number(block)
        if "gas" not in raw_tx:
            raw_tx["gas"] = backend._max_available_gas()
        priced = any(raw_tx.get(k) for k in ("gas_price", "max_fee_per_gas", "max_priority_fee_per_gas"))
        unsigned = backend._get_normalized_and_unsigned_evm_transaction(raw_tx, raw_block)
        header = _get_block_by_number(backend.chain, raw_block).header
        overrides: dict[str, Any] = {"from_": raw_tx["from"]}
        if not priced:
            overrides.update(gas_price=0, max_fee_per_gas=0, max_priority_fee_per_gas=0)
            if getattr(header, "base_fee_per_gas", None) is not None:
                header = header.copy(base_fee_per_gas=0)
        state = backend.chain.get_vm(at_header=header).state
        snapshot = state.snapshot()
        try:
            return state.apply_transaction(SpoofTransaction(unsigned, **overrides))
        finally:
            state.revert(snapshot)

    def _eth_send_raw_transaction(self, params: list[Any]) -> Any:
        if not params or not isinstance(params[0], str):
            raise RpcError(-32602, "expected the raw transaction as hex")
        from eth_tester.exceptions import ValidationError

        try:
            return self.tester.send_raw_transaction(params[0])
        except ValidationError as exc:  # bad nonce, insufficient funds...: what anvil answers with -32003/-32000
            raise RpcError(-32000, str(exc)) from exc

    def _block_number_of(self, tag: Any, default: str) -> int:
        """A block tag or quantity as a mined block number, with anvil's meaning of the tags."""
        if tag is None:
            tag = default
        if tag == "earliest":
            return 0
        if tag in ("latest", "pending", "safe", "finalized"):
            return self._head()
        return _quantity(tag)

    def _eth_get_logs(self, params: list[Any]) -> Any:
        """``eth_getLogs`` from the node's own log index, filtered like anvil (address list, topic OR-lists).

        Why not eth-tester's ``get_logs``: it reads every block of the range and every receipt anew, seconds per
        query once a task has mined its deadline blocks, and followers poll logs constantly."""
        from web3.providers.eth_tester.middleware import log_result_remapper

        flt = dict(params[0]) if params and isinstance(params[0], dict) else {}
        head = self._head()
        if flt.get("blockHash"):
            block = self.tester.get_block_by_hash(flt["blockHash"])
            from_block = to_block = int(block["number"])
        else:
            from_block = self._block_number_of(flt.get("fromBlock"), "latest")
            to_block = min(self._block_number_of(flt.get("toBlock"), "latest"), head)
        address = flt.get("address")
        addresses = None
        if address is not None:
            addresses = {str(a).lower() for a in (address if isinstance(address, list) else [address])}
        topics = [_topic_set(t) for t in (flt.get("topics") or [])]
        self._index_logs()
        out = []
        for log in self._logs:
            block_number = int(log["block_number"])
            if block_number < from_block:
                continue
            if block_number > to_block:
                break
            if addresses is not None and str(log["address"]).lower() not in addresses:
                continue
            log_topics = [str(t).lower() for t in log["topics"]]
            if len(log_topics) < len(topics):
                continue
            if all(want is None or got in want for want, got in zip(topics, log_topics, strict=False)):
                out.append({**log_result_remapper(log), "removed": False})
        return out

    def _head(self) -> int:
        return int(self.tester.get_block_by_number("latest")["number"])

    def _index_logs(self) -> None:
        """Move the logs of transactions sent since the last query into the index (automine: all are mined)."""
        pending, self._unindexed = self._unindexed, []
        for tx_hash in pending:
            receipt = self.tester.get_transaction_receipt(tx_hash)
            self._logs.extend(receipt["logs"])
        self._logs.sort(key=lambda log: (int(log["block_number"]), int(log["log_index"])))

    def _reindex_all(self) -> None:
        """Rebuild the log index from the chain (after ``evm_revert`` dropped blocks)."""
        self._logs, self._unindexed = [], []
        for number in range(self._head() + 1):
            self._unindexed.extend(self.tester.get_block_by_number(number)["transactions"])

    # ------------------------------------------------------------------ dev methods

    def _mine_n(self, params: list[Any]) -> Any:
        """``anvil_mine(blocks, interval)``: mine ``blocks`` empty blocks (default 1)."""
        blocks = _quantity(params[0]) if params and params[0] is not None else 1
        if blocks < 1:
            raise RpcError(-32602, "blocks must be positive")
        self.tester.mine_blocks(blocks)
        return None

    def _evm_mine(self, params: list[Any]) -> Any:
        """``evm_mine``: one block (a timestamp argument is ignored: eth-tester's clock is its own)."""
        self.tester.mine_blocks(1)
        return "0x0"

    def _set_state(self, params: list[Any], what: str) -> Any:
        """``anvil_setBalance`` / ``setStorageAt`` / ``setCode`` / ``setNonce``: write the account state directly.

        eth-tester has no state-override API, so the change is written into py-evm's pending state and sealed with
        one (otherwise empty) block: unlike anvil, where the change is instant, the block number advances by one."""
        from eth_utils import to_canonical_address

        need = 3 if what == "storage" else 2
        if len(params) < need:
            raise RpcError(-32602, f"expected {need} parameters")
        address = to_canonical_address(to_checksum_address(params[0]))
        chain: Any = self.tester.backend.chain
        state = chain.get_vm().state
        if what == "balance":
            state.set_balance(address, _quantity(params[1]))
        elif what == "nonce":
            state.set_nonce(address, _quantity(params[1]))
        elif what == "code":
            state.set_code(address, bytes.fromhex(str(params[1]).removeprefix("0x")))
        else:
            state.set_storage(address, _quantity(params[1]), int(str(params[2]), 16))
        state.persist()
        chain.header = chain.header.copy(state_root=state.state_root)
        self.tester.mine_blocks(1)
        return True if what == "storage" else None


GAS_ESTIMATE_MARGIN: int = 32
"""The measured estimate adds 1/32 of the gas used (nested calls keep back 1/64 per level) plus a flat 10,000."""


def _measured_gas_estimate(state: Any, transaction: Any) -> int:
    """Gas estimate from one run with the block's gas, checked by a second run at the estimate.

    Why: py-evm's default estimator binary-searches from the 1e9 block gas limit down to a 21,000 tolerance, about
    18 executions per estimate (~100 ms for a ``createTask``, every transaction estimates first). Gas used before
    refunds plus a margin for the 63/64 call rule is never below what the transaction needs, and the check run
    proves it; when the check fails (exotic gas-dependent code) the default search decides. Like anvil's, the
    answer is an upper bound the transaction is sure to succeed with, not the exact minimum.
    """
    from eth.estimators.gas import binary_gas_search_intrinsic_tolerance
    from eth.vm.spoof import SpoofTransaction

    def run(gas: int) -> Any:
        snapshot = state.snapshot()
        try:
            return state.apply_transaction(SpoofTransaction(transaction, gas=gas, gas_price=0))
        finally:
            state.revert(snapshot)

    limit = int(state.gas_limit)
    full = run(limit)
    if full.is_error:
        raise full.error
    used = limit - int(full.get_gas_remaining())
    candidate = min(limit, used + used // GAS_ESTIMATE_MARGIN + 10_000)
    if candidate == limit or not run(candidate).is_error:
        return candidate
    return int(binary_gas_search_intrinsic_tolerance(state, transaction))


@functools.cache
def _indexed_backend_class() -> type[Any]:
    """eth-tester's PyEVM backend with transaction lookups through py-evm's hash index.

    Why: eth-tester finds a transaction by scanning every block back from the head (~0.4 ms per block), and every
    sent transaction is looked up (``eth_getTransactionReceipt``); once a task has mined its 1000-block deadlines
    each receipt would cost ~0.5 s. py-evm already indexes canonical transactions by hash; only the pending block
    still needs a scan. A subclass (not a patch of eth-tester) so other in-process chains are left untouched."""
    from eth.exceptions import TransactionNotFound as EVMTransactionNotFound
    from eth_tester.backends.pyevm import main as pyevm_main
    from eth_tester.backends.pyevm.main import PyEVMBackend
    from eth_tester.backends.pyevm.serializers import serialize_transaction, serialize_transaction_receipt

    class IndexedPyEVMBackend(PyEVMBackend):
        def _locate(self, transaction_hash: bytes) -> tuple[Any, Any, int]:
            chain = self.chain
            try:
                number, index = chain.chaindb.get_transaction_index(transaction_hash)
            except EVMTransactionNotFound:  # pending block, or unknown (eth-tester raises its own error)
                return pyevm_main._get_transaction_by_hash(chain, transaction_hash)
            block = chain.get_canonical_block_by_number(number)
            return block, block.transactions[index], index

        def get_transaction_by_hash(self, transaction_hash: bytes) -> Any:
            block, transaction, index = self._locate(transaction_hash)
            is_pending = block.number == self.chain.get_block().number
            return serialize_transaction(block, transaction, index, is_pending)

        def get_transaction_receipt(self, transaction_hash: bytes) -> Any:
            block, transaction, index = self._locate(transaction_hash)
            is_pending = block.number == self.chain.get_block().number
            receipts = block.get_receipts(self.chain.chaindb)
            return serialize_transaction_receipt(block, receipts, transaction, index, is_pending, self.chain.get_vm())

    return IndexedPyEVMBackend


def _topic_set(want: Any) -> set[str] | None:
    """One position of a topic filter: None (or an empty list) matches anything, a list is an OR of its topics."""
    if want is None:
        return None
    if isinstance(want, list):
        return {str(t).lower() for t in want} if want else None
    return {str(want).lower()}


def _revert_message(data: bytes) -> str:
    """anvil's message: ``execution reverted`` plus the reason of an ``Error(string)``."""
    if data[:4] == ERROR_SELECTOR:
        try:
            return f"execution reverted: {abi_decode(['string'], data[4:])[0]}"
        except Exception:
            pass
    return "execution reverted"


def _literal_bytes(text: str) -> bytes | None:
    """``b'...'`` (eth-tester's rendering of revert bytes) back to bytes."""
    text = text.removeprefix("execution reverted: ")
    if not text.startswith(("b'", 'b"')):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, bytes) else None


def _error_response(rid: Any, err: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": err.payload()}


# ---------------------------------------------------------------------- HTTP transport


class _Handler(BaseHTTPRequestHandler):
    """POST / with a JSON-RPC body. HTTP/1.1 keep-alive: web3's requests session reuses its connection."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes: Nagle + delayed ACK cost ~40 ms each
    rpc: EmbeddedRPC  # set on the subclass made per server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.rpc.http_posts += 1
        try:
            payload = json.loads(body)
        except ValueError:
            answer: Any = _error_response(None, RpcError(-32700, "parse error"))
        else:
            answer = self.rpc.handle(payload)
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        """A liveness probe for humans and load balancers."""
        data = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet, like ``anvil --quiet``."""


class RPCServer(ThreadingHTTPServer):
    """A threading HTTP server that also drops its keep-alive connections when closed.

    Why: ``shutdown()`` only stops accepting; each kept-alive connection has its own thread that would go on
    answering from the stopped chain, so a stopped node would look alive to the parties already connected."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        self.closing = False

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            if self.closing:
                self.shutdown_request(request)
                return
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        """Stop listening and cut every open connection (their clients see the node go away, as with anvil)."""
        super().server_close()
        with self.connections_lock:
            self.closing = True
            open_now = list(self.connections)
        for conn in open_now:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


def make_server(rpc: EmbeddedRPC, port: int, host: str = "127.0.0.1") -> RPCServer:
    """An HTTP server answering JSON-RPC for ``rpc`` (not yet serving)."""
    handler = type("EmbeddedRPCHandler", (_Handler,), {"rpc": rpc})
    return RPCServer((host, port), handler)


@dataclass
class EmbeddedChain:
    """A running embedded chain: in a thread of this process, or (``process``) a child process. Mirrors
    :class:`ledger.devnet.anvil.Anvil` (``url``, ``port``, ``stop()``)."""

    port: int
    process: subprocess.Popen[bytes] | None = None
    server: RPCServer | None = None
    rpc: EmbeddedRPC | None = None
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The HTTP JSON-RPC URL."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 20.0) -> None:
        """Shut the server down (thread) or SIGTERM the process (then SIGKILL if it hangs). Idempotent."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            if self.thread is not None:
                self.thread.join(timeout)
            self.server = None
        if self.process is not None:
            stop_process(self.process, timeout)


def missing_requirement() -> str | None:
    """Why the embedded chain cannot run here (what to install), or None when it can."""
    import importlib.util

    for module in ("eth_tester", "eth"):
        if importlib.util.find_spec(module) is None:
            return (
                f"the embedded chain needs {module!r} (eth-tester with py-evm): "
                "pip install 'fgbdt-chain[chain]', or install anvil (FGBDT_ANVIL, node_modules or PATH)"
            )
    return None


def start_embedded_chain(
    port: int | None = None,
    *,
    process: bool = False,
    log: Path | None = None,
    detach: bool = False,
    gas_limit: int = DEFAULT_GAS_LIMIT,
    startup_timeout: float = 60.0,
) -> EmbeddedChain:
    """Start the embedded chain's JSON-RPC server and return once it answers.

    ``process=False`` serves from a daemon thread of this process (dies with it); ``process=True`` runs
    ``python -m ledger.embedded_rpc`` as a child (``detach`` puts it in its own session so it outlives the caller,
    as ``start_anvil`` does), which keeps py-evm's CPU work off the caller's interpreter.
    """
    port = port or free_port()
    if not process:
        rpc = EmbeddedRPC(gas_limit=gas_limit)
        server = make_server(rpc, port)
        thread = threading.Thread(target=server.serve_forever, name=f"embedded-rpc-{port}", daemon=True)
        thread.start()
        return EmbeddedChain(port=port, server=server, rpc=rpc, thread=thread)
    cmd = [
        sys.executable,
        "-m",
        "fgbdt_chain.ledger.devnet.embedded_rpc",
        "--port",
        str(port),
        "--gas-limit",
        str(gas_limit),
    ]
    if log is None:  # kept, so that a failed start can say why
        log = paths.cache_dir() / "logs" / f"embedded-chain-{port}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.unlink(missing_ok=True)
    out = open(log, "ab")  # noqa: SIM115 - handed to the child process
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=detach)
    chain = EmbeddedChain(port=port, process=proc)
    wait_until_ready(proc, chain.url, "embedded chain", startup_timeout, log)
    return chain


def main(argv: list[str] | None = None) -> int:
    """``python -m ledger.embedded_rpc --port P``: serve until SIGTERM / Ctrl-C."""
    parser = argparse.ArgumentParser(description="JSON-RPC node over an in-process py-evm chain (anvil stand-in)")
    parser.add_argument("--port", type=int, default=8545)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--gas-limit", type=int, default=DEFAULT_GAS_LIMIT)
    args = parser.parse_args(argv)
    rpc = EmbeddedRPC(gas_limit=args.gas_limit)
    server = make_server(rpc, args.port, args.host)

    def _terminate(_signum: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _terminate)
    print(f"embedded chain (chain id {rpc.chain_id}) on http://{args.host}:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
