"""Revert decoding: turn a contract revert into a Python exception that names the custom error.

Why: web3 raises ``ContractCustomError`` carrying only the raw revert bytes; tests and operators need to know *which*
guard fired (``NotApproved``, ``InsufficientEndorsements``, ...) and with which arguments, so the ledger maps the
4-byte selector back through every compiled ABI.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from eth_abi import decode as abi_decode
from eth_utils import keccak, to_checksum_address
from web3.exceptions import Web3RPCError

from fgbdt_chain.ledger.rpc.abi_codec import canonical_type

PANIC_SELECTOR = keccak(text="Panic(uint256)")[:4]
ERROR_SELECTOR = keccak(text="Error(string)")[:4]


class ContractRevert(Exception):
    """A call or transaction reverted. ``name`` is the custom error (or ``Panic``/``Error``/``Unknown``)."""

    def __init__(self, name: str, args: tuple[Any, ...] = (), data: bytes = b"", function: str = "") -> None:
        self.name = name
        self.args_ = args
        self.data = data
        self.function = function
        where = f" in {function}" if function else ""
        super().__init__(f"{name}{args!r}{where}")


class ChainRefused(Web3RPCError):
    """The node refused a request, with its own reason (insufficient funds, a fee too low, a transaction too large,
    an unknown method...), named together with what was asked and of which chain: a ``Web3RPCError`` like the
    errors it stands for, so that callers that catch those still do."""

    def __init__(self, what: str, reason: str, chain: str = "", rpc_response: Any = None) -> None:
        self.what = what
        self.reason = reason
        self.chain = chain
        on = f" on {chain}" if chain else ""
        super().__init__(f"{what}{on}: the chain refused it: {reason}", rpc_response=rpc_response)


MISSING_METHOD_CODES = frozenset({-32601, -32004})
"""JSON-RPC error codes of a method a node does not serve: the standard "method not found", and the "method not
supported" Hardhat answers."""
MISSING_METHOD_PHRASES = (
    "not found",
    "does not exist",
    "not available",
    "not supported",
    "unsupported",
    "unknown method",
)
"""How nodes say so in the message where the code says something else (ganache 7 answers -32700, a parse error,
with "The method ... does not exist/is not available")."""


def method_missing(error: Any) -> bool:
    """Whether a JSON-RPC ``error`` member says that the node does not serve the method asked."""
    if not isinstance(error, dict):
        return False
    try:
        code = int(error.get("code", 0))
    except (TypeError, ValueError):
        code = 0
    message = str(error.get("message", "")).lower()
    return code in MISSING_METHOD_CODES or ("method" in message and any(p in message for p in MISSING_METHOD_PHRASES))


def reason_of(error: Any) -> str:
    """The node's reason in a JSON-RPC ``error`` member (or an exception): its message, and its data where that
    says more (Besu and Hardhat nest the cause there); never the stack trace ganache attaches."""
    if isinstance(error, BaseException):
        data = getattr(error, "rpc_response", None)
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            return reason_of(data["error"])
        return str(error) or type(error).__name__
    if not isinstance(error, dict):
        return str(error)
    message = str(error.get("message", "")).strip() or "no reason given"
    data = error.get("data")
    if isinstance(data, dict):
        data = data.get("message") or data.get("reason")
    if isinstance(data, str) and data and not data.startswith("0x") and data not in message:
        message = f"{message} ({data})"
    return message


class ErrorDecoder:
    """Maps revert data to error names and decoded arguments, for the errors of the given ABIs."""

    def __init__(self, abis: Iterable[list[dict[str, Any]]]) -> None:
        self._by_selector: dict[bytes, tuple[str, list[str]]] = {}
        for abi in abis:
            for item in abi:
                if item.get("type") != "error":
                    continue
                types = [canonical_type(i) for i in item.get("inputs", [])]
                sig = f"{item['name']}({','.join(types)})"
                self._by_selector[keccak(text=sig)[:4]] = (item["name"], types)

    def decode(self, data: bytes | str | None, function: str = "") -> ContractRevert:
        """The exception for revert ``data`` (hex string or bytes)."""
        if isinstance(data, str):
            data = bytes.fromhex(data.removeprefix("0x"))
        data = data or b""
        sel, body = data[:4], data[4:]
        if sel == PANIC_SELECTOR:
            return ContractRevert("Panic", tuple(abi_decode(["uint256"], body)), data, function)
        if sel == ERROR_SELECTOR:
            return ContractRevert("Error", tuple(abi_decode(["string"], body)), data, function)
        if sel in self._by_selector:
            name, types = self._by_selector[sel]
            values = abi_decode(types, body)
            args = tuple(to_checksum_address(v) if t == "address" else v for t, v in zip(types, values, strict=True))
            return ContractRevert(name, args, data, function)
        return ContractRevert("Unknown", (), data, function)


def revert_data_of(exc: BaseException) -> bytes | None:
    """Revert bytes carried by a web3 / eth-tester exception, or None when it carries none.

    web3 puts the hex data in ``exc.data``; eth-tester's ``TransactionFailed`` only carries ``str(Revert(b"..."))``,
    i.e. ``"execution reverted: b'...'"``, whose bytes literal is parsed back safely with ``ast.literal_eval``.
    """
    if type(exc).__name__ == "TransactionFailed" and exc.args and isinstance(exc.args[0], str):
        msg = exc.args[0]
        literal = msg.split("execution reverted: ", 1)[-1]
        if literal.startswith(("b'", 'b"')):
            try:
                value = ast.literal_eval(literal)
            except (ValueError, SyntaxError):
                value = None
            if isinstance(value, bytes):
                return value
        if msg.startswith("execution reverted"):
            return b""
    data: Any = getattr(exc, "data", None)
    if isinstance(data, dict):
        # anvil, Hardhat and geth put the bytes under "data"; ganache 7 under "result" (beside "programCounter")
        data = data.get("data", data.get("result"))
    if data is None and exc.args:
        for a in exc.args:
            if isinstance(a, bytes):
                data = a
                break
            if isinstance(a, str) and a.startswith("0x"):
                data = a
                break
    if isinstance(data, str):
        try:
            return bytes.fromhex(data.removeprefix("0x"))
        except ValueError:
            return None
    return data if isinstance(data, bytes) else None
