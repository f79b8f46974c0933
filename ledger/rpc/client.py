"""A thin, typed client over web3 for the FGBDT-Chain contracts, the same for anvil and the embedded chain.

Why not plain web3 calls everywhere: every transaction needs the same four things done right, and they are easy to
get wrong ad hoc: (1) reverts must surface as :class:`~ledger.errors.ContractRevert` naming the custom error, so the
gas estimate (which executes the call) is made first and its revert data decoded, or, once a function's gas is
known, a failed transaction is replayed as a call for it; (2) concurrent senders (party threads) must not race on
nonces, so nonces are allocated locally under a per-account lock; (3) every transaction's gas is recorded per
function for the gas report; (4) events are decoded from receipts against every known ABI.

The same client serves any Ethereum JSON-RPC chain, not only the devnets the project starts: fees come from the chain
(EIP-1559 where the latest block has a base fee, a legacy gas price otherwise), accounts are funded from a key
(``funder``) where the node has no unlocked account, a receipt is polled for where the node lacks
``eth_sendRawTransactionSync`` (found out once per client), a transaction can wait for ``confirmations`` blocks, and a
refusal names the chain's own reason (:class:`~ledger.rpc.errors.ChainRefused`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from eth_abi.exceptions import EncodingError
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address
from hexbytes import HexBytes
from web3 import HTTPProvider, Web3
from web3.contract import Contract
from web3.exceptions import ContractLogicError, TransactionIndexingInProgress, TransactionNotFound, Web3RPCError
from web3.types import RPCEndpoint

from fgbdt_chain.ledger.rpc.abi_codec import EventCoder, FunctionCoder, event_coders, function_coders
from fgbdt_chain.ledger.rpc.errors import (
    ChainRefused,
    ContractRevert,
    ErrorDecoder,
    method_missing,
    reason_of,
    revert_data_of,
)
from fgbdt_chain.ledger.rpc.http_transport import KeepAliveHTTPProvider
from fgbdt_chain.ledger.rpc.tx_signing import sign_transaction
from fgbdt_chain.ledger.spec.signing_keys import signing_key
from fgbdt_chain.ledger.toolchain.compile import Artifact, load_artifacts

DEFAULT_GAS_LIMIT: int = 1_000_000_000
"""Block gas limit of the chains the ledger starts: large enough for the widest level's histogram transaction."""
REVERTS_BEFORE_ESTIMATING = 4
"""A function goes out on a guessed gas limit only while its reverts number at most a quarter of its successes."""
MINE_METHODS: tuple[str, ...] = ("anvil_mine", "hardhat_mine", "evm_mine")
"""How a devnet is asked for blocks (anvil; Hardhat; ganache and the others), tried in this order once per client. A
network that mines on its own clock serves none of them."""
ALREADY_KNOWN = ("already known", "known transaction", "already imported", "already in pool", "alreadyknown")
"""How nodes say that they hold a transaction sent again (after a lost answer): it is in their pool, not refused."""
GANACHE_ESTIMATE_PATIENCE: float = 30.0
"""Seconds of silence after which an estimate on ganache is asked again: a whole task of a few trees on ganache,
every estimate in it, takes 20 to 40 s on a loaded two-core machine, and an estimate it has dropped never answers."""
GANACHE_ESTIMATE_ATTEMPTS: int = 3
"""Estimates sent at most on ganache for one transaction; the last waits the transport's full timeout."""

T = TypeVar("T")


@dataclass(frozen=True)
class GasRecord:
    """Gas used by one mined transaction."""

    function: str
    gas_used: int
    calldata_bytes: int


@dataclass(frozen=True)
class Event:
    """A decoded log: event name, arguments, emitting contract."""

    name: str
    args: dict[str, Any]
    address: str
    block_number: int = 0
    log_index: int = 0
    tx_hash: str = ""


@dataclass(frozen=True)
class LogHead:
    """A log's topics and the first words of its data, undecoded: what a reader needs of an event whose dynamic
    arguments (a level's histograms) it does not want to decode."""

    name: str
    topics: list[bytes]
    words: list[bytes]
    block_number: int = 0
    log_index: int = 0


@dataclass
class TxResult:
    """A mined, successful transaction."""

    function: str
    tx_hash: str
    block_number: int
    gas_used: int
    logs: list[Any] = field(default_factory=list, repr=False)
    """The receipt's logs, as the node or web3 gave them; ``events`` decodes them."""
    parts: list[TxResult] = field(default_factory=list)
    """Transactions sent before this one as parts of the same call (``commitHistograms`` before a wide level's
    ``submitHistograms``)."""
    decoder: Callable[..., list[Event]] | None = field(default=None, repr=False, compare=False)
    """``ChainClient.decode_events``: the logs, and the names of the events wanted (None: all)."""
    _events: list[Event] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def events(self) -> list[Event]:
        """The decoded events, decoded when first read: a histogram submission's receipt carries every word it
        submitted, and its sender seldom reads them (decoding every receipt was 3% of a party's CPU)."""
        if self._events is None:
            self._events = self.decoder(self.logs) if self.decoder is not None else []
        return self._events

    def event(self, name: str) -> Event:
        """The first event called ``name`` (raises KeyError when absent)."""
        for e in self.events:
            if e.name == name:
                return e
        raise KeyError(name)

    def events_named(self, name: str) -> list[Event]:
        """All events called ``name``, in log order; only those are decoded, unless all were already (a relayed
        batch's receipt carries every party's submitted words, which reading its close would otherwise decode)."""
        if self._events is None and self.decoder is not None:
            return list(self.decoder(self.logs, (name,)))
        return [e for e in self.events if e.name == name]


class ChainClient:
    """Sends signed transactions from local keys, decodes reverts and events, and accounts gas."""

    def __init__(self, w3: Web3, artifacts: dict[str, Artifact] | None = None) -> None:
        self.w3 = w3
        self.artifacts = artifacts if artifacts is not None else load_artifacts()
        self.decoder = ErrorDecoder(a.abi for a in self.artifacts.values())
        self.gas_log: list[GasRecord] = []
        self._nonce_locks: dict[str, threading.Lock] = {}
        self._nonces: dict[str, int] = {}
        self._global = threading.Lock()
        self._contracts: dict[str, Contract] = {}
        self.libraries: dict[str, str] = {}
        """Addresses of the libraries this client deployed, by name (linked into later deployments)."""
        self._topics: dict[bytes, tuple[str, str]] = {}
        self._event_coders: dict[bytes, EventCoder] = {}
        self._function_coders: dict[str, dict[str, FunctionCoder]] = {}
        self._key_counter = 0
        self._fees: tuple[float, int, int | None, int] | None = None
        """(when read, block gas limit, base fee or None on a chain without EIP-1559, legacy gas price)."""
        self._priority_fee: int | None = None
        """The tip per gas the node suggests (``eth_maxPriorityFeePerGas``), asked once."""
        self._client_version: str | None = None
        """The node's ``web3_clientVersion``, asked once (None: not asked yet)."""
        self._mine_method: str | None = None
        """Which of ``MINE_METHODS`` the node serves ("" when none; None: not tried yet)."""
        self.confirmations: int = 1
        """Blocks that must hold a transaction (its own included) before it counts as done: 1, its receipt, on a
        devnet or a network with final blocks (QBFT); more where blocks may be reorganised away."""
        self.funder: LocalAccount | None = None
        """The key that :meth:`fund` pays from; None: the node's first unlocked account (a devnet's)."""
        self._sync_send: bool | None = None
        """Whether the node offers ``eth_sendRawTransactionSync`` (None: not tried yet)."""
        self._automines: bool | None = None
        """Whether the node mines a block per transaction (None: not asked yet; ``automines``)."""
        self._gas_seen: dict[str, tuple[int, float]] = {}
        """Per function: the most gas a successful transaction used, and the most per calldata byte."""
        self._outcomes: dict[str, tuple[int, int]] = {}
        """Per function: transactions that succeeded, and those that reverted (at the estimate or in a block)."""
        self._short: dict[str, int] = {}
        """Per function, transactions mined out of gas (and sent again)."""
        self.chain_id: int = int(w3.eth.chain_id)

    # -------------------------------------------------------------- construction

    @classmethod
    def connect(cls, url: str, timeout: float = 120.0) -> ChainClient:
        """Client of a JSON-RPC node (anvil)."""
        # web3 validates every call and estimate against eth_chainId, an extra round trip each unless cached; the
        # chain id of a node cannot change, so that one request is cached (nothing else is).
        provider = KeepAliveHTTPProvider(
            url,
            timeout=timeout,
            cache_allowed_requests=True,
            cacheable_requests={RPCEndpoint("eth_chainId")},
        )
        return cls(Web3(provider))

    # -------------------------------------------------------------- accounts

    def new_account(self, fund_wei: int = 10**21, seed: bytes | None = None) -> LocalAccount:
        """A fresh local key, funded as :meth:`fund` funds."""
        with self._global:
            self._key_counter += 1
            counter = self._key_counter
        material = seed if seed is not None else keccak(text=f"fgbdt-ledger-{id(self)}-{counter}")
        acct: LocalAccount = Account.from_key(keccak(material))
        if fund_wei:
            self.fund(acct.address, fund_wei)
        return acct

    def fund(self, address: str, wei: int, funder: LocalAccount | None = None) -> None:
        """Send ``wei`` to ``address`` from ``funder`` (else :attr:`funder`), a signed transfer that any chain takes;
        without a key, from the node's first unlocked account (anvil, Hardhat, ganache and the embedded chain have
        funded ones; a network has none, and the error says which key to give)."""
        key = funder or self.funder
        if key is not None:
            self._send(key, {"to": to_checksum_address(address), "value": wei, "data": "0x"}, "fund", None)
            return
        try:
            accounts = self.w3.eth.accounts
        except Exception as exc:
            raise ChainRefused("funding from an unlocked account", reason_of(exc), self._chain_name()) from exc
        if not accounts:
            raise ChainRefused(
                f"funding {address}",
                "the node has no unlocked account to pay from: give a funded key (fgbdt train --funder-key FILE)",
                self._chain_name(),
            )
        params: Any = {"from": accounts[0], "to": to_checksum_address(address), "value": wei}
        try:
            tx_hash = self.w3.eth.send_transaction(params)
        except Web3RPCError as exc:
            raise ChainRefused(f"funding {address} from {accounts[0]}", reason_of(exc), self._chain_name()) from exc
        self._wait_receipt(tx_hash, timeout=600.0)

    def _chain_name(self) -> str:
        """The chain as error messages name it: its id and, for an HTTP node, its URL."""
        uri = getattr(self.w3.provider, "endpoint_uri", None)
        return f"chain {self.chain_id}" + (f" at {uri}" if uri else "")

    def balance(self, address: str) -> int:
        """Balance in wei."""
        return int(self.w3.eth.get_balance(to_checksum_address(address)))

    # -------------------------------------------------------------- chain control

    @property
    def block_number(self) -> int:
        """The latest block number."""
        return int(self.w3.eth.block_number)

    def mine(self, blocks: int = 1) -> None:
        """Mine ``blocks`` empty blocks (to pass deadlines) with the first of ``MINE_METHODS`` the node serves;
        :class:`ChainRefused` on a chain that serves none (a network mines on its own clock: :meth:`can_mine`)."""
        provider: Any = self.w3.provider
        methods = MINE_METHODS if self._mine_method is None else (self._mine_method,) if self._mine_method else ()
        for method in methods:
            if method == "evm_mine":  # one block per request
                answers = [provider.make_request(RPCEndpoint(method), []) for _ in range(blocks)]
                answer = next((a for a in answers if a.get("error") is not None), answers[0] if answers else {})
            else:
                answer = provider.make_request(RPCEndpoint(method), [hex(blocks)])
            error = answer.get("error")
            if error is None:
                self._mine_method = method
                return
            if not method_missing(error) or self._mine_method:
                raise ChainRefused(f"{method} ({blocks} blocks)", reason_of(error), self._chain_name(), answer)
        self._mine_method = ""
        raise ChainRefused("mining a block", "the node serves no method to mine one on request", self._chain_name())

    def can_mine(self) -> bool:
        """Whether the node mines a block when asked (a devnet; found out once, by mining one)."""
        if self._mine_method is None:
            try:
                self.mine(1)
            except ChainRefused:
                self._mine_method = self._mine_method or ""
        return bool(self._mine_method)

    # -------------------------------------------------------------- contracts

    def register(self, name: str, address: str) -> Contract:
        """Bind the compiled ABI of ``name`` to a deployed address (and learn its events)."""
        art = self.artifacts[name]
        contract = self.w3.eth.contract(address=to_checksum_address(address), abi=art.abi)
        self._contracts[contract.address.lower()] = contract
        self._function_coders[contract.address.lower()] = function_coders(art.abi)
        for topic, coder in event_coders(art.abi).items():
            self._topics[topic] = (name, coder.name)
            self._event_coders[topic] = coder
        return contract

    def deploy(self, name: str, sender: LocalAccount, *args: Any, value: int = 0) -> Contract:
        """Deploy contract ``name`` from ``sender``, first deploying the libraries it links (once per client);
        returns the bound contract."""
        art = self.artifacts[name]
        for lib in art.libraries:
            if lib not in self.libraries:
                self.libraries[lib] = self.deploy(lib, sender).address
        factory = self.w3.eth.contract(abi=art.abi, bytecode=art.linked(self.libraries))
        params: Any = {"from": sender.address, "nonce": 0, "gas": 0, "gasPrice": 0, "chainId": self.chain_id}
        tx = factory.constructor(*args).build_transaction(params)
        receipt = self._send(sender, {"data": tx["data"], "value": value}, f"deploy {name}", None)
        address = receipt["contractAddress"]
        return self.register(name, address)

    def call(self, contract: Contract, function: str, *args: Any, sender: str | None = None) -> Any:
        """A read-only call; reverts raise :class:`ContractRevert`. Coded by :mod:`ledger.rpc.abi_codec` where it can
        (the node polls task state many times a second), else by web3's contract function."""
        direct = self._direct(contract, function, args)
        try:
            if direct is None:
                return getattr(contract.functions, function)(*args).call({"from": sender} if sender else {})
            coder, data = direct
            params: dict[str, Any] = {"to": contract.address, "data": data}
            if sender:
                params["from"] = sender
            result = self._eth_call(params)
        except Exception as exc:
            raise self._revert(exc, function) from exc
        return coder.decode_result(self.w3.codec, result)

    def _eth_call(self, params: dict[str, Any]) -> bytes:
        """``eth_call`` at the latest block, straight to an HTTP JSON-RPC node: web3's request formatters and
        middleware were half of a state read (2.0 ms against 1.15 ms on an idle anvil, 8.9 ms per read with four
        parties on two cores), and a party reads the task state at every block. Other providers go through web3."""
        if not isinstance(self.w3.provider, HTTPProvider):
            return bytes(self.w3.eth.call(params))  # type: ignore[arg-type]
        answer = self.w3.provider.make_request(RPCEndpoint("eth_call"), [params, "latest"])
        error = answer.get("error")
        if error is not None:
            message = str(error.get("message", error))
            if error.get("code") == 3 or error.get("data") is not None or "revert" in message.lower():
                raise ContractLogicError(message, data=error.get("data"))  # its data, for the error decoder
            raise Web3RPCError(message, rpc_response=answer)  # not a revert: rate limits, unknown blocks, ...
        return bytes.fromhex(str(answer["result"]).removeprefix("0x"))

    def call_many(self, contract: Contract, function: str, arg_lists: Sequence[Sequence[Any]]) -> list[Any]:
        """Many read-only calls of one function, batched into one JSON-RPC request when the provider allows it."""
        if not arg_lists:
            return []
        try:
            with self.w3.batch_requests() as batch:
                for args in arg_lists:
                    batch.add(getattr(contract.functions, function)(*args))
                return list(batch.execute())
        except ContractRevert:
            raise
        except Exception as exc:  # a node without batches answers one call at a time
            data = revert_data_of(exc)
            if data:
                raise self.decoder.decode(data, function) from exc
        return [self.call(contract, function, *args) for args in arg_lists]

    def transact(
        self,
        contract: Contract,
        function: str,
        *args: Any,
        sender: LocalAccount,
        value: int = 0,
        gas: int | None = None,
    ) -> TxResult:
        """Send a transaction and wait for it. Reverts raise :class:`ContractRevert` with the error's name. ``gas``
        sets the limit where one fitted to earlier receipts would not do (``ledger.wrappers.forwarder.batch_gas``)."""
        data = self.encode_call(contract, function, args)
        tx = {"to": contract.address, "data": data, "value": value}
        receipt = self._send(sender, tx, function, contract, gas=gas)
        return self._result(function, receipt)

    def _result(self, function: str, receipt: Any) -> TxResult:
        """A mined transaction's result, its logs decoded."""
        return TxResult(
            function=function,
            tx_hash=receipt["transactionHash"].hex(),
            block_number=int(receipt["blockNumber"]),
            gas_used=int(receipt["gasUsed"]),
            logs=list(receipt["logs"]),
            decoder=self.decode_events,
        )

    def transact_ahead(
        self, contract: Contract, function: str, *args: Any, sender: LocalAccount, tip: int = 1
    ) -> Callable[[], TxResult]:
        """Send a transaction without waiting for its block; the returned function waits and gives its result (a
        revert raises :class:`ContractRevert`, with no retry: a later transaction of the sender may already be in;
        ``TimeoutError`` when no block took it, e.g. a node restarted from an older state).

        Why: a party's transactions of one round that do not depend on each other (its votes sent ahead, then its
        resolution) go in the same block, in nonce order, where waiting for each cost a block apiece on a network
        that mines at intervals. ``tip`` wei more per gas than :meth:`transact` pays puts it before other senders'
        transactions of the block (nodes order a block by fee), such as the resolution that opens the level.

        A node that mines a block per transaction (:meth:`automines`) gains nothing from it and would pay a receipt
        poll: there the transaction is sent as :meth:`transact` sends it, and the function returns its result."""
        if self.automines():
            done = self.transact(contract, function, *args, sender=sender)

            def mined(timeout: float = 0.0) -> TxResult:
                return done

            return mined
        data = self.encode_call(contract, function, args)
        tx = self._priced(sender, {"to": contract.address, "data": data, "value": 0}, function, tip=tip)
        tx_hash = self._send_in_order(sender, tx, function, lambda raw: self._send_raw(raw, function))

        def result(timeout: float = 120.0) -> TxResult:
            receipt = self._wait_receipt(tx_hash, timeout=timeout)
            if int(receipt["status"]) != 1:
                self._count(function, reverted=True)
                raise self._replay_failure(tx, receipt, function)
            self._count(function, reverted=False)
            return self._result(function, receipt)

        return result

    def automines(self) -> bool:
        """Whether the node mines a block per transaction (anvil's ``anvil_getAutomine``; asked once). A node without
        the method (geth, Besu, the embedded chain) counts as mining at intervals, as a network does."""
        if self._automines is None:
            try:
                answer = self.w3.provider.make_request(RPCEndpoint("anvil_getAutomine"), [])
                self._automines = answer.get("result") is True
            except Exception:  # the transport refused: the same answer as a node without the method
                self._automines = False
        return self._automines

    def encode_call(self, contract: Contract, function: str, args: Sequence[Any]) -> str:
        """Calldata of ``function(*args)``: straight through the ABI codec (see :mod:`ledger.rpc.abi_codec`), or web3's
        contract function where the codec does not take the arguments as given (e.g. hex strings for bytes)."""
        direct = self._direct(contract, function, args)
        if direct is not None:
            return direct[1]
        return str(getattr(contract.functions, function)(*args)._encode_transaction_data())

    def _direct(self, contract: Contract, function: str, args: Sequence[Any]) -> tuple[FunctionCoder, str] | None:
        """(coder, calldata) when the ABI codec takes ``function(*args)`` as given; None sends it to web3."""
        coder = self._function_coders.get(contract.address.lower(), {}).get(function)
        if coder is None:
            return None
        try:
            return coder, "0x" + coder.encode(self.w3.codec, args).hex()
        except (EncodingError, TypeError, ValueError):
            return None

    def decode_events(self, logs: Iterable[Any], names: Collection[str] | None = None) -> list[Event]:
        """Decode every log emitted by a registered contract (others are skipped), or only the events called one of
        ``names``."""
        out = []
        for log in logs:
            topics = log["topics"]
            if not topics:
                continue
            key = _bytes(topics[0])
            contract = self._contracts.get(str(log["address"]).lower())
            if key not in self._topics or contract is None:
                continue
            if names is not None and self._topics[key][1] not in names:
                continue
            coder = self._event_coders[key]
            args = coder.decode(self.w3.codec, [_bytes(t) for t in topics], _bytes(log["data"]))
            tx_hash = log.get("transactionHash")
            out.append(
                Event(
                    coder.name,
                    args,
                    contract.address,
                    _int(log.get("blockNumber") or 0),
                    _int(log.get("logIndex") or 0),
                    _bytes(tx_hash).hex() if tx_hash is not None else "",
                )
            )
        return out

    def logs(
        self,
        contract: Contract,
        names: Sequence[str] = (),
        task_id: int | None = None,
        from_block: int = 0,
        to_block: int | str = "latest",
    ) -> list[Event]:
        """Decoded past events of ``contract`` in chain order, optionally only ``names`` and one task (the first
        indexed argument of every task event), read with ``eth_getLogs``: what followers and the audit replay."""
        events = self.decode_events(self._get_logs(self._log_filter(contract, names, task_id, from_block, to_block)))
        return sorted(events, key=lambda e: (e.block_number, e.log_index))

    def fresh_logs(
        self,
        contract: Contract,
        names: Sequence[str],
        task_id: int | None,
        from_block: int,
        to_block: int | str,
        seen: dict[tuple[bytes, int], int],
    ) -> list[Event]:
        """As :meth:`logs`, but decoding only the logs not in ``seen`` (keyed by block hash and log index, valued by
        block number), to which it adds them. Why: an incremental reader reads its last few blocks again, since a
        node may announce a block before it serves the block's logs; decoding each log once, not at every re-read,
        was most of a party's cost of reading a level's small events (about 56 us a log)."""
        flt = self._log_filter(contract, names, task_id, from_block, to_block)
        new: dict[tuple[bytes, int], Any] = {}
        for log in self._get_logs(flt):
            key = (_bytes(log.get("blockHash") or b""), _int(log.get("logIndex") or 0))
            if key not in seen:
                new[key] = log
        events = self.decode_events(new.values())  # marked seen only once decoded: a failed decode is read again
        seen.update((key, _int(log.get("blockNumber") or 0)) for key, log in new.items())
        return sorted(events, key=lambda e: (e.block_number, e.log_index))

    def _log_filter(
        self, contract: Contract, names: Sequence[str], task_id: int | None, from_block: int, to_block: int | str
    ) -> dict[str, Any]:
        """The ``eth_getLogs`` filter of ``contract``'s events called ``names`` (all where empty), of one task."""
        wanted = {k for k, (_, n) in self._topics.items() if not names or n in names}
        flt: dict[str, Any] = {"address": contract.address, "fromBlock": from_block, "toBlock": to_block}
        topics: list[Any] = [["0x" + k.hex() for k in sorted(wanted)]]
        if task_id is not None:
            topics.append("0x" + task_id.to_bytes(32, "big").hex())
        flt["topics"] = topics
        return flt

    def log_heads(
        self,
        contract: Contract,
        names: Sequence[str],
        task_id: int,
        words: int,
        from_block: int = 0,
        to_block: int | str = "latest",
    ) -> list[LogHead]:
        """As :meth:`logs`, but each log's topics and the first ``words`` 32-byte words of its data only, in chain
        order: a histogram event's fixed arguments without decoding its megabytes of histogram words."""
        wanted = {k: n for k, (_, n) in self._topics.items() if n in names}
        out = []
        for log in self._get_logs(self._log_filter(contract, names, task_id, from_block, to_block)):
            topics = [_bytes(t) for t in log["topics"]]
            if not topics or topics[0] not in wanted:
                continue
            data = log["data"]
            head = _bytes(data[: 2 + 64 * words] if isinstance(data, str) else bytes(data)[: 32 * words])
            cut = [head[32 * i : 32 * (i + 1)] for i in range(len(head) // 32)]
            number, index = _int(log["blockNumber"]), _int(log["logIndex"])
            out.append(LogHead(wanted[topics[0]], topics, cut, number, index))
        return sorted(out, key=lambda h: (h.block_number, h.log_index))

    def _get_logs(self, flt: dict[str, Any]) -> list[Any]:
        """``eth_getLogs``, straight to an HTTP JSON-RPC node as :meth:`_eth_call` (web3's log formatters build an
        attribute dict and bytes objects per field of every log, and a level's histogram events are megabytes);
        :meth:`decode_events` takes the node's hex fields as they come. Other providers go through web3."""
        if not isinstance(self.w3.provider, HTTPProvider):
            return list(self.w3.eth.get_logs(flt))  # type: ignore[arg-type]
        wire = {k: hex(v) if isinstance(v, int) else v for k, v in flt.items()}
        answer = self.w3.provider.make_request(RPCEndpoint("eth_getLogs"), [wire])
        error = answer.get("error")
        if error is not None:
            raise Web3RPCError(str(error.get("message", error)), rpc_response=answer)
        return list(answer["result"])

    def raw_result(self, method: str, params: list[Any]) -> Any | None:
        """A request's result as the node sends it (hex strings, no web3 formatting), straight to an HTTP JSON-RPC
        node as :meth:`_eth_call`; None from other providers and where the node answers with an error, so that the
        caller takes web3's way instead."""
        if not isinstance(self.w3.provider, HTTPProvider):
            return None
        answer = self.w3.provider.make_request(RPCEndpoint(method), params)
        return None if answer.get("error") is not None else answer.get("result")

    def event_topics(self, names: Sequence[str]) -> list[bytes]:
        """The topic (signature hash) of each registered event called one of ``names``."""
        return [topic for topic, (_, name) in self._topics.items() if name in names]

    def gas_by_function(self) -> dict[str, list[int]]:
        """Gas of every recorded transaction, grouped by function name."""
        out: dict[str, list[int]] = {}
        for rec in self.gas_log:
            out.setdefault(rec.function, []).append(rec.gas_used)
        return out

    # -------------------------------------------------------------- internals

    def _revert(self, exc: BaseException, function: str) -> BaseException:
        data = revert_data_of(exc)
        if data is None:
            return exc
        return self.decoder.decode(data, function)

    def forget_nonces(self) -> None:
        """Re-read every sender's nonce from the chain next time: after an outage a sent transaction may be lost (and
        the node may be another, mining otherwise)."""
        with self._global:
            self._nonces.clear()
            self._automines = None

    def _lock_for(self, address: str) -> threading.Lock:
        with self._global:
            return self._nonce_locks.setdefault(address, threading.Lock())

    def _send(
        self,
        sender: LocalAccount,
        tx: dict[str, Any],
        function: str,
        contract: Contract | None,
        estimate: bool = False,
        gas: int | None = None,
    ) -> Any:
        size = len(_hex(tx.get("data", ""))) // 2
        tx = self._priced(sender, tx, function, estimate=estimate, gas=gas)

        def send(raw: bytes) -> tuple[Any, Any]:
            """(receipt, None) where the node answers with the receipt, else (None, the hash) once in its pool.

            A synchronous send that outlasts the transport's timeout (a block slower than it) leaves the transaction
            in the node's pool, where it is mined later: its receipt is then polled for by its hash, where giving
            up would count a transaction that lands as lost (and its nonce as free). Only if the node has it: a
            timeout before the node took it (connecting) is a failed send."""
            try:
                answer = self._send_sync(raw)
            except TimeoutError:
                tx_hash = HexBytes(keccak(raw))
                try:
                    self.w3.eth.get_transaction(tx_hash)
                except TransactionNotFound:
                    raise TimeoutError(f"no answer to {function} from the node, which does not have it") from None
                return None, tx_hash
            return (answer, None) if answer is not None else (None, self._send_raw(raw, function))

        receipt, tx_hash = self._send_in_order(sender, tx, function, send)
        if receipt is None:
            receipt = self._wait_receipt(tx_hash, timeout=600.0)
        if self.confirmations > 1:
            receipt = self._confirmed(receipt, timeout=600.0)
        if int(receipt["status"]) != 1:
            if not estimate:
                # Once more with a fresh estimate, which names a real revert. The limit may have been short: a
                # guess, or an estimate made before another transaction changed what this one does (the vote that
                # now completes the step also closes it). Out of gas does not always use all the gas: inside a
                # library call (DELEGATECALL gets 63/64 of what is left) it reverts the outer frame with gas to
                # spare, and a replay as a call, with ample gas, then passes. A limit that ran out (63/64 of it used
                # or more) is not the function's fault: it does not send the function to dry runs, whose estimates
                # race the same way (measured: a party that closed most vote steps failed 54 of 120 votes, each a
                # block more, once its short guesses had made it estimate); the retry's receipt raises the guess.
                ran_out = 64 * int(receipt["gasUsed"]) >= 63 * int(tx["gas"])
                self._count(function, reverted=not ran_out, short=ran_out)
                plain = {k: v for k, v in tx.items() if k in ("to", "data", "value")}
                return self._send(sender, plain, function, contract, estimate=True)
            if int(receipt["gasUsed"]) >= int(tx["gas"]):
                # the state changed between the estimate and the block (e.g. this call now also closes a level)
                raise ContractRevert("OutOfGas", (int(tx["gas"]),), b"", function)
            self._count(function, reverted=True)
            raise self._replay_failure(tx, receipt, function)
        used = int(receipt["gasUsed"])
        self.gas_log.append(GasRecord(function, used, size))
        with self._global:
            top, rate = self._gas_seen.get(function, (0, 0.0))
            self._gas_seen[function] = (max(top, used), max(rate, used / max(size, 1)))
        self._count(function, reverted=False)
        return receipt

    def _priced(
        self,
        sender: LocalAccount,
        tx: dict[str, Any],
        function: str,
        estimate: bool = False,
        tip: int = 0,
        gas: int | None = None,
    ) -> dict[str, Any]:
        """``tx`` from ``sender`` with its gas limit (``gas`` if given, else ``_gas_guess`` from earlier receipts, else
        an estimate, whose revert raises the function's error) and its gas price, ``tip`` wei above the usual."""
        tx = {**tx, "from": sender.address, "chainId": self.chain_id}
        gas_limit, base_fee, gas_price = self._fee_basis()
        if estimate:
            guess = None
        elif gas is not None:
            guess = gas
        else:
            guess = self._gas_guess(function, len(_hex(tx.get("data", ""))) // 2)
        if guess is None:
            try:
                estimated = self._estimate(tx)
            except Exception as exc:
                self._count(function, reverted=True)
                raise self._refusal(exc, function, sender.address) from exc
            guess = estimated + estimated // 4 + 50_000
        tx["gas"] = min(gas_limit, guess)
        if base_fee is None:  # no EIP-1559 on this chain: the price it asks (a QBFT network's may be 0)
            tx["gasPrice"] = gas_price + tip
        else:
            # Twice the base fee always clears the next block (it grows by at most 1/8 a block) and is paid only as
            # far as the base fee is; the tip is the node's suggestion (eth_maxPriorityFeePerGas), asked once.
            # ``tip`` wei more orders the transaction before others of its block (``transact_ahead``).
            priority = self._tip() + tip
            tx["maxPriorityFeePerGas"] = priority
            tx["maxFeePerGas"] = 2 * base_fee + priority
        return tx

    def _estimate(self, tx: dict[str, Any]) -> int:
        """``eth_estimateGas`` of ``tx``. ganache 7.9 leaves an estimate that arrives while it mines a queue of
        transactions unanswered for good, while it answers every later request (seen about once in twenty tasks
        of three parties joining at once): on ganache an estimate unanswered for ``GANACHE_ESTIMATE_PATIENCE`` seconds
        is asked again, up to ``GANACHE_ESTIMATE_ATTEMPTS`` times; other nodes get the transport's timeout."""
        patience = getattr(self.w3.provider, "patience", None)
        if patience is not None and self._software().startswith("Ganache/"):
            for _ in range(GANACHE_ESTIMATE_ATTEMPTS - 1):
                try:
                    with patience(GANACHE_ESTIMATE_PATIENCE):
                        return int(self.w3.eth.estimate_gas(tx))  # type: ignore[arg-type]
                except TimeoutError:
                    continue
        return int(self.w3.eth.estimate_gas(tx))  # type: ignore[arg-type]

    def _software(self) -> str:
        """The node's ``web3_clientVersion`` ("anvil/v1.7.1", "Ganache/v7.9.2/..."), asked once; "" from a node
        without the method."""
        if self._client_version is None:
            try:
                self._client_version = str(self.w3.client_version)
            except Exception:
                self._client_version = ""
        return self._client_version

    def _tip(self) -> int:
        """The tip per gas the node suggests (its ``eth_maxPriorityFeePerGas``), asked once; 0 from a node that
        does not suggest one (its transactions then pay the base fee only)."""
        if self._priority_fee is None:
            try:
                answer = self.w3.provider.make_request(RPCEndpoint("eth_maxPriorityFeePerGas"), [])
                result = answer.get("result")
                self._priority_fee = _int(result) if result is not None else 0
            except Exception:  # an in-process provider without the method: no tip
                self._priority_fee = 0
        return self._priority_fee

    def _refusal(self, exc: BaseException, function: str, sender: str) -> BaseException:
        """The exception for a failed estimate or send: the revert naming its custom error where the node returned
        revert data, else :class:`ChainRefused` with the node's reason (insufficient funds, a fee too low...);
        transport failures as they are (callers treat an ``OSError`` as the chain being down)."""
        decoded = self._revert(exc, function)
        if decoded is not exc or isinstance(exc, OSError | ContractRevert):
            return decoded
        if isinstance(exc, Web3RPCError | ValueError):
            return ChainRefused(f"{function} from {sender}", reason_of(exc), self._chain_name())
        return exc

    def _send_in_order(self, sender: LocalAccount, tx: dict[str, Any], function: str, send: Callable[[bytes], T]) -> T:
        """Sign ``tx`` with the sender's next nonce and ``send`` it, under the sender's lock so that its
        transactions reach the node in nonce order; a failed send has the nonce read from the node next time.
        Returns what ``send`` returned."""
        with self._lock_for(sender.address):
            if sender.address not in self._nonces:
                self._nonces[sender.address] = int(self.w3.eth.get_transaction_count(sender.address, "pending"))
            tx["nonce"] = self._nonces[sender.address]
            # the key object made once (``signing_keys``): ``LocalAccount.sign_transaction`` passes the raw key,
            # from which eth-account derives the public key again for every transaction; the transaction encoded
            # by ``tx_signing``, a third of eth-account's time
            raw, _ = sign_transaction(tx, signing_key(bytes(sender.key)))
            try:
                out = send(raw)
            except Exception as exc:
                self._nonces.pop(sender.address, None)  # resynchronise from the node next time
                raise self._refusal(exc, function, sender.address) from exc
            self._nonces[sender.address] += 1
        return out

    def outcomes(self) -> dict[str, tuple[int, int, int]]:
        """Per contract function, (mined and successful, failed, out of gas): a failure is a reverted estimate or a
        transaction mined reverted; out of gas, a transaction whose limit ran out before its retry."""
        with self._global:
            return {f: (*self._outcomes.get(f, (0, 0)), self._short.get(f, 0)) for f in {*self._outcomes, *self._short}}

    def _count(self, function: str, reverted: bool, short: bool = False) -> None:
        with self._global:
            if short:
                self._short[function] = self._short.get(function, 0) + 1
                return
            ok, failed = self._outcomes.get(function, (0, 0))
            self._outcomes[function] = (ok, failed + 1) if reverted else (ok + 1, failed)

    def _gas_guess(self, function: str, size: int) -> int | None:
        """A gas limit from this function's earlier receipts, so that a transaction is not executed twice (estimate,
        then block): twice the most it used, or twice its most gas per calldata byte times this calldata, whichever
        is larger (its cost grows with the open nodes, and so does its calldata). None, so estimate, for a function
        not sent yet, and where the node lacks ``eth_sendRawTransactionSync``: there the estimate's round trip is
        the lesser cost. A revert then costs a mined, failed transaction, replayed as a call to name its error; a
        short guess is retried once with the estimate. A function that often reverts (a party's speculative
        ``closeStep``, say) keeps the estimate as its dry run, since a failed transaction costs a block.
        Measured: estimates were 27% of a party's main thread on anvil, the sends themselves 8% (``bench.chain``)."""
        if self._sync_send is not True:
            return None
        with self._global:
            seen = self._gas_seen.get(function)
            ok, failed = self._outcomes.get(function, (0, 0))
        if seen is None or REVERTS_BEFORE_ESTIMATING * failed > ok:
            return None
        top, rate = seen
        return 2 * max(top, int(rate * size)) + 100_000

    def _send_sync(self, raw: bytes) -> Any:
        """Send with ``eth_sendRawTransactionSync`` (EIP-7966), which answers with the receipt once the transaction
        is in a block: one round trip where sending and polling for the receipt took two or more. None when the node
        does not offer it (remembered: the embedded chain, older nodes) or gave up waiting for the block (the
        transaction is in its pool; the receipt is then polled for as usual)."""
        if self._sync_send is False:
            return None
        answer = self.w3.provider.make_request(RPCEndpoint("eth_sendRawTransactionSync"), ["0x" + bytes(raw).hex()])
        error = answer.get("error")
        if error is None:
            self._sync_send = True
            return _lean_receipt(answer["result"])
        message = str(error.get("message", "")).lower()
        if self._sync_send is None and method_missing(error):
            self._sync_send = False
            return None
        if "timeout" in message or "timed out" in message:
            return None
        if any(phrase in message for phrase in ALREADY_KNOWN):
            return None  # sent again after a lost answer: polled for by its hash (``_send_raw`` answers it)
        raise ChainRefused("the transaction", reason_of(error), self._chain_name(), answer)

    def _send_raw(self, raw: bytes, function: str) -> HexBytes:
        """``eth_sendRawTransaction``: the transaction's hash once the node holds it, also where it held it already
        (an earlier send whose answer was lost) or answers with an error although it mined it (the Hardhat network
        reports a transaction that failed in its block so, unless configured otherwise: the receipt then tells);
        a refusal raises :class:`ChainRefused` with the node's reason."""
        tx_hash = HexBytes(keccak(raw))
        answer = self.w3.provider.make_request(RPCEndpoint("eth_sendRawTransaction"), ["0x" + bytes(raw).hex()])
        error = answer.get("error")
        if error is None:
            return tx_hash
        if any(phrase in str(error.get("message", "")).lower() for phrase in ALREADY_KNOWN):
            return tx_hash
        held = self.w3.provider.make_request(RPCEndpoint("eth_getTransactionByHash"), ["0x" + bytes(tx_hash).hex()])
        if held.get("result"):
            return tx_hash
        raise ChainRefused(f"sending {function}", reason_of(error), self._chain_name(), answer)

    def _fee_basis(self) -> tuple[int, int | None, int]:
        """(block gas limit, base fee, legacy gas price) of the latest block, re-read at most once a second: the base
        fee moves by at most 1/8 per block, far inside the 2x margin of the fee cap, and one read per transaction
        was a fifth of a transaction's round trips. The base fee is None on a chain without EIP-1559, whose gas
        price the node is asked for (``eth_gasPrice``) instead; on one with it the legacy price is not read."""
        now = time.monotonic()
        with self._global:
            cached = self._fees
        if cached is not None and now - cached[0] < 1.0:
            return cached[1], cached[2], cached[3]
        latest = self.w3.eth.get_block("latest")
        base = latest.get("baseFeePerGas")
        fee = None if base is None else int(base)
        price = int(self.w3.eth.gas_price) if fee is None else 0
        limit = int(latest["gasLimit"])
        with self._global:
            self._fees = (now, limit, fee, price)
        return limit, fee, price

    def _wait_receipt(self, tx_hash: Any, timeout: float) -> Any:
        """The receipt, polled from a few milliseconds up to web3's 0.1 s: an automining devnet has it within ~3 ms
        of the send, and web3's fixed 0.1 s first sleep was a third of every transaction's time there; a chain with
        12 s blocks still sees at most ten polls a second."""
        deadline = time.monotonic() + timeout
        pause = 0.002
        while True:
            try:
                return self.w3.eth.get_transaction_receipt(tx_hash)
            except (TransactionNotFound, TransactionIndexingInProgress):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"transaction {bytes(tx_hash).hex()} not mined within {timeout:.0f} s") from None
            time.sleep(pause)
            pause = min(0.1, pause * 2)

    def _confirmed(self, receipt: Any, timeout: float) -> Any:
        """``receipt`` once ``confirmations`` blocks hold it (its own and those after it), read again then: a block
        reorganised away in between takes the transaction back to the pool, and the receipt polled for again is the
        one of the block that holds it now."""
        deadline = time.monotonic() + timeout
        tx_hash = receipt["transactionHash"]
        while True:
            target = int(receipt["blockNumber"]) + self.confirmations - 1
            while self.block_number < target:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"transaction {bytes(tx_hash).hex()} not confirmed within {timeout:.0f} s")
                time.sleep(0.25)
            again = self._wait_receipt(tx_hash, timeout=max(1.0, deadline - time.monotonic()))
            if int(again["blockNumber"]) == int(receipt["blockNumber"]):
                return again
            receipt = again

    def _replay_failure(self, tx: dict[str, Any], receipt: Any, function: str) -> BaseException:
        """Re-run a mined, failed transaction as a call to recover the revert reason: on its parent state, and if
        it passes there, on the state after its block (a transaction mined before it in the same block changed
        what it saw: two parties closing the same step, say)."""
        call = {k: tx[k] for k in ("from", "to", "data", "value") if k in tx}
        number = int(receipt["blockNumber"])
        for block in (number - 1, number):
            try:
                self.w3.eth.call(call, block)  # type: ignore[arg-type]
            except Exception as exc:
                return self._revert(exc, function)
        return ContractRevert("Unknown", (), b"", function)


def _lean_receipt(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of a node's receipt that ``_send`` and its callers read, as web3 formats them (``status``,
    ``gasUsed`` and ``blockNumber`` as integers, the hash as ``HexBytes``, the contract address checksummed), and
    its logs as the node sent them (``decode_events`` reads either). Formatting every log's topics and data into bytes
    was 5.6% of a party's CPU; web3's formatter of the rest, every field checked and converted, another 3%."""
    address = raw.get("contractAddress")
    return {
        "status": _int(raw["status"]),
        "gasUsed": _int(raw["gasUsed"]),
        "blockNumber": _int(raw["blockNumber"]),
        "transactionHash": HexBytes(raw["transactionHash"]),
        "contractAddress": to_checksum_address(address) if address else None,
        "logs": raw.get("logs", []),
    }


def _bytes(value: Any) -> bytes:
    """A log field as bytes, from web3's formatted logs (bytes) or a node's raw JSON (0x-prefixed hex)."""
    return bytes.fromhex(value[2:]) if isinstance(value, str) else bytes(value)


def _int(value: Any) -> int:
    """A number field of a log or receipt, from web3's formatting (int) or a node's raw JSON (hex quantity)."""
    return int(value, 16) if isinstance(value, str) else int(value)


def _hex(data: Any) -> str:
    if isinstance(data, bytes | bytearray):
        return bytes(data).hex()
    return str(data).removeprefix("0x")
