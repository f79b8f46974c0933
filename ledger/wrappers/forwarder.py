"""ERC-2771 meta-transactions: build, sign, verify and relay ``ForwardRequest``s for ``FGBDTChain``.

Why: the REST API must not hold users' keys, yet every state change must be attributable to the caller's Ethereum
key and checked against that key's on-chain role. So the caller signs an EIP-712 ``ForwardRequest`` (OpenZeppelin's
``ERC2771Forwarder``, deployed as ``FGBDTForwarder``), and the API relays it from its own key; the contract reads the
signer with ``_msgSender()``. One module builds the calldata, the typed data and the signature for the API, its tests
and the party nodes, so that all of them agree byte for byte with the forwarder's checks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address
from web3.contract import Contract

from fgbdt_chain.ledger.rpc.client import ChainClient, TxResult
from fgbdt_chain.ledger.spec.encoding import address_word, recover_hash_signer, sign_hash
from fgbdt_chain.ledger.spec.hashing import keccak256
from fgbdt_chain.ledger.spec.tx_size import BLOCK_GAS_LIMIT, CALLDATA_LIMIT
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract

DOMAIN_NAME: str = "FGBDTForwarder"
DOMAIN_VERSION: str = "1"
DEFAULT_GAS: int = 5_000_000
"""Gas a request grants the inner call by default: ample for the lifecycle calls (a large ``start`` included)."""
DEFAULT_TTL: int = 600
"""Seconds a signed request stays valid by default."""
MAX_DEADLINE: int = (1 << 48) - 1

FORWARD_REQUEST_TYPES: dict[str, list[dict[str, str]]] = {
    "EIP712Domain": [
        {"name": "name", "type": "string"},
        {"name": "version", "type": "string"},
        {"name": "chainId", "type": "uint256"},
        {"name": "verifyingContract", "type": "address"},
    ],
    "ForwardRequest": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "gas", "type": "uint256"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint48"},
        {"name": "data", "type": "bytes"},
    ],
}
"""The EIP-712 types of OpenZeppelin's ``ERC2771Forwarder`` (v5), ``EIP712Domain`` included."""


@dataclass(frozen=True)
class ForwardRequest:
    """One request as the signer signs it (``ForwardRequest`` of the forwarder, nonce included)."""

    sender: str
    to: str
    value: int
    gas: int
    nonce: int
    deadline: int
    data: bytes

    def message(self) -> dict[str, Any]:
        """The EIP-712 message fields."""
        return {
            "from": to_checksum_address(self.sender),
            "to": to_checksum_address(self.to),
            "value": self.value,
            "gas": self.gas,
            "nonce": self.nonce,
            "deadline": self.deadline,
            "data": self.data,
        }


def domain(chain_id: int, forwarder: str) -> dict[str, Any]:
    """The forwarder's EIP-712 domain."""
    return {
        "name": DOMAIN_NAME,
        "version": DOMAIN_VERSION,
        "chainId": chain_id,
        "verifyingContract": to_checksum_address(forwarder),
    }


def typed_data(req: ForwardRequest, chain_id: int, forwarder: str) -> dict[str, Any]:
    """The full EIP-712 payload (``eth_signTypedData_v4``) of ``req``."""
    return {
        "types": FORWARD_REQUEST_TYPES,
        "primaryType": "ForwardRequest",
        "domain": domain(chain_id, forwarder),
        "message": req.message(),
    }


def _type_hash(types: list[dict[str, str]], name: str) -> bytes:
    fields = ",".join(f"{f['type']} {f['name']}" for f in types)
    return keccak(text=f"{name}({fields})")


REQUEST_TYPEHASH: bytes = _type_hash(FORWARD_REQUEST_TYPES["ForwardRequest"], "ForwardRequest")
DOMAIN_TYPEHASH: bytes = _type_hash(FORWARD_REQUEST_TYPES["EIP712Domain"], "EIP712Domain")


@lru_cache(maxsize=16)
def domain_separator(chain_id: int, forwarder: str) -> bytes:
    """The forwarder's EIP-712 domain separator (``_domainSeparatorV4``)."""
    return keccak(
        DOMAIN_TYPEHASH
        + keccak(text=DOMAIN_NAME)
        + keccak(text=DOMAIN_VERSION)
        + chain_id.to_bytes(32, "big")
        + address_word(forwarder)
    )


def request_digest(req: ForwardRequest, chain_id: int, forwarder: str) -> bytes:
    """The EIP-712 digest of ``req`` that the forwarder recovers the signer from, packed as its static words.

    Why not eth-account's ``encode_typed_data``: a party signs a relayed ballot at every level, and the generic
    encoder parses the type strings and checks every field each time (about 1 ms, against tens of microseconds for
    the seven words here; checked against it over random requests in ``tests/ledger/wrappers/test_forwarder.py``)."""
    struct = keccak256(
        REQUEST_TYPEHASH
        + address_word(req.sender)
        + address_word(req.to)
        + b"".join(v.to_bytes(32, "big") for v in (req.value, req.gas, req.nonce, req.deadline))
        + keccak256(req.data)
    )
    return keccak256(b"\x19\x01" + domain_separator(chain_id, forwarder.lower()) + struct)


def sign_request(private_key: bytes | str, req: ForwardRequest, chain_id: int, forwarder: str) -> bytes:
    """A 65-byte EIP-712 signature of ``req`` (what ``ERC2771Forwarder.execute`` verifies)."""
    if not 0 <= req.deadline <= MAX_DEADLINE:
        raise ValueError(f"deadline {req.deadline} is not a uint48")
    return sign_hash(private_key, request_digest(req, chain_id, forwarder))


def recover_signer(req: ForwardRequest, signature: bytes, chain_id: int, forwarder: str) -> str:
    """The address that signed ``req``; raises ``ValueError`` on a malformed signature."""
    if len(signature) != 65:
        raise ValueError(f"a signature is 65 bytes, not {len(signature)}")
    return recover_hash_signer(request_digest(req, chain_id, forwarder), signature)


def calldata(task: TaskContract, function: str, *args: Any) -> bytes:
    """ABI-encoded call of ``FGBDTChain.function(args)``: what a ``ForwardRequest`` for it carries as ``data``."""
    fn = getattr(task.contract.functions, function)(*args)
    return bytes.fromhex(fn._encode_transaction_data().removeprefix("0x"))


def create_task_args(
    cfg: TaskConfig, feature_min: Sequence[int], feature_max: Sequence[int], bin_edges_hash: bytes = b"\x00" * 32
) -> tuple[Any, ...]:
    """``createTask`` arguments in ABI order, shared by the API (which rebuilds the calldata) and its clients."""
    return (cfg.as_tuple(), list(feature_min), list(feature_max), bin_edges_hash)


class Forwarder:
    """``FGBDTForwarder``: nonces, verification and relaying of signed requests."""

    def __init__(self, client: ChainClient, contract: Contract) -> None:
        self.client = client
        self.contract = contract

    @classmethod
    def deploy(cls, client: ChainClient, sender: LocalAccount) -> Forwarder:
        """Deploy a new forwarder (no constructor arguments)."""
        return cls(client, client.deploy("FGBDTForwarder", sender))

    @classmethod
    def at(cls, client: ChainClient, address: str) -> Forwarder:
        """Bind to a deployed forwarder."""
        return cls(client, client.register("FGBDTForwarder", address))

    @classmethod
    def of(cls, task: TaskContract) -> Forwarder:
        """The forwarder ``task`` trusts."""
        return cls.at(task.client, task.trusted_forwarder())

    @property
    def address(self) -> str:
        """The forwarder's address (checksummed)."""
        return str(self.contract.address)

    def nonce(self, account: str) -> int:
        """The next nonce ``account`` must sign (``nonces``)."""
        return int(self.client.call(self.contract, "nonces", to_checksum_address(account)))

    def build(
        self,
        sender: str,
        to: str,
        data: bytes,
        *,
        gas: int = DEFAULT_GAS,
        ttl: int = DEFAULT_TTL,
        nonce: int | None = None,
        deadline: int | None = None,
    ) -> ForwardRequest:
        """A request from ``sender`` with its current nonce and a deadline ``ttl`` seconds from now."""
        return ForwardRequest(
            sender=to_checksum_address(sender),
            to=to_checksum_address(to),
            value=0,
            gas=gas,
            nonce=self.nonce(sender) if nonce is None else nonce,
            deadline=int(time.time()) + ttl if deadline is None else deadline,
            data=data,
        )

    def sign(self, account: LocalAccount, req: ForwardRequest) -> bytes:
        """``account``'s signature of ``req`` for this forwarder on this chain."""
        return sign_request(account.key, req, self.client.chain_id, self.address)

    def recover(self, req: ForwardRequest, signature: bytes) -> str:
        """The signer of ``req``."""
        return recover_signer(req, signature, self.client.chain_id, self.address)

    @staticmethod
    def request_tuple(req: ForwardRequest, signature: bytes) -> tuple[Any, ...]:
        """``ForwardRequestData`` as an ABI tuple."""
        return (req.sender, req.to, req.value, req.gas, req.deadline, req.data, signature)

    def verify(self, req: ForwardRequest, signature: bytes) -> bool:
        """The forwarder's own ``verify``: trusted target, not expired, signer and nonce match."""
        return bool(self.client.call(self.contract, "verify", self.request_tuple(req, signature)))

    def execute_batch(
        self, relayer: LocalAccount, signed: Sequence[tuple[ForwardRequest, bytes]], gas: int | None = None
    ) -> TxResult:
        """Relay several parties' requests in one transaction (``executeBatch``), in order, paid by ``relayer``.

        Not atomic (the relayer is the refund receiver): a request that is invalid by the time it lands (its nonce
        used, its deadline passed, a bad signature) is skipped and one whose call reverts fails alone, so no party's
        request can sink the others'. ``gas`` is the transaction's limit (:func:`batch_gas` of the requests: the
        forwarder reverts the whole batch if a call could not get the gas its request grants)."""
        requests = [self.request_tuple(req, sig) for req, sig in signed]
        return self.client.transact(
            self.contract,
            "executeBatch",
            requests,
            relayer.address,
            sender=relayer,
            value=sum(req.value for req, _ in signed),
            gas=batch_gas([req for req, _ in signed]) if gas is None else gas,
        )

    def execute(self, relayer: LocalAccount, req: ForwardRequest, signature: bytes) -> TxResult:
        """Relay ``req`` from ``relayer`` (who pays the gas). The inner call's revert reason is lost by the
        forwarder (``FailedCall``), so callers that need it simulate first with :meth:`simulate`."""
        return self.client.transact(
            self.contract, "execute", self.request_tuple(req, signature), sender=relayer, value=req.value
        )

    def simulate(self, req: ForwardRequest) -> bytes:
        """Run the inner call as the forwarder would (``eth_call`` from the forwarder, signer appended to the
        calldata) and return its output; a revert raises :class:`~ledger.errors.ContractRevert` naming the error."""
        call: Any = {
            "from": self.address,
            "to": req.to,
            "data": "0x" + (req.data + bytes.fromhex(req.sender.removeprefix("0x"))).hex(),
            "value": req.value,
            "gas": req.gas,
        }
        try:
            return bytes(self.client.w3.eth.call(call))
        except Exception as exc:
            raise self.client._revert(exc, "simulate") from exc

    def relay_call(
        self,
        relayer: LocalAccount,
        signer: LocalAccount,
        task: TaskContract,
        function: str,
        *args: Any,
        gas: int = DEFAULT_GAS,
        ttl: int = DEFAULT_TTL,
    ) -> TxResult:
        """Build, sign (as ``signer``) and relay (from ``relayer``) one call of ``task``: the client side of the API
        in one step, for tests and scripts that hold both keys."""
        req = self.build(signer.address, task.address, calldata(task, function, *args), gas=gas, ttl=ttl)
        return self.execute(relayer, req, self.sign(signer, req))


REQUEST_OVERHEAD_GAS: int = 60_000
"""Gas the forwarder spends on one request around its call, beside its data: ``ecrecover`` (3,000), the nonce's write
(up to 22,100), the hashing of the request's fields, the call (2,600 cold) and the event, with room to spare."""
TX_BASE_GAS: int = 21_000
"""What every transaction pays before its calldata and execution."""
REQUEST_WORD_GAS: int = 20
"""Gas the forwarder spends per 32-byte word of a request's data: hashed for its EIP-712 digest (6), copied into
memory with the signer appended (3 to copy, 3 or more to expand memory) and passed to the call (3 more to copy)."""


def batch_gas(requests: Sequence[ForwardRequest]) -> int:
    """A gas limit under which ``executeBatch`` can grant every request its gas: the forwarder checks after each call
    that it kept at least 1/63 of the request's gas (EIP-150 passes on at most 63/64 of what is left), and reverts the
    whole batch otherwise, so a limit fitted to the gas a batch used would sink it (``ChainClient._priced`` fits one
    to earlier receipts). 21,000 for the transaction and 16 per calldata byte on top."""
    return TX_BASE_GAS + sum(request_cost(req) for req in requests)


def _data_words(req: ForwardRequest) -> int:
    return -(-len(req.data) // 32)


def request_bytes(req: ForwardRequest) -> int:
    """Calldata bytes one request takes in ``executeBatch``: its offset, seven head words, its data and its
    signature, each padded to words with a length word."""
    return 32 + 7 * 32 + 32 + _data_words(req) * 32 + 32 + 96


def request_gas_beside(req: ForwardRequest) -> int:
    """The gas a batch must hold for one request: what it grants (and 1/63 more, ``batch_gas``) and the
    forwarder's own work on it."""
    return req.gas * 64 // 63 + REQUEST_OVERHEAD_GAS + REQUEST_WORD_GAS * _data_words(req)


def request_cost(req: ForwardRequest) -> int:
    """One request's share of a batch's limit: the gas it must hold and 16 a byte of its calldata."""
    return request_gas_beside(req) + 16 * request_bytes(req)


def pack_batches(
    signed: Sequence[tuple[ForwardRequest, bytes]],
    calldata_limit: int = CALLDATA_LIMIT,
    gas_limit: int = BLOCK_GAS_LIMIT,
) -> list[list[tuple[ForwardRequest, bytes]]]:
    """The requests, in order, in as few ``executeBatch`` transactions as a network takes: each at most
    ``calldata_limit`` bytes of calldata and ``gas_limit`` of gas (``batch_gas``). A request that does not fit a
    batch on its own goes alone (the network refuses it, as it would the party's own transaction)."""
    batches: list[list[tuple[ForwardRequest, bytes]]] = []
    size = gas = 0
    head = 4 + 2 * 32 + 32  # selector, the array's offset and the refund receiver, the array's length
    for req, sig in signed:
        more_size, more_gas = request_bytes(req), request_cost(req)
        if batches and head + size + more_size <= calldata_limit and TX_BASE_GAS + gas + more_gas <= gas_limit:
            batches[-1].append((req, sig))
            size, gas = size + more_size, gas + more_gas
        else:
            batches.append([(req, sig)])
            size, gas = more_size, more_gas
    return batches


VOTE_GAS_BASE: int = 100_000
VOTE_GAS_PER_VOTE: int = 3_000


def vote_request_gas(votes: int) -> int:
    """The gas a relayed ``submitVotes`` of ``votes`` votes is granted: a bound from the EVM's costs, not a fit. A
    ballot is stored packed, two bytes a vote, so each 16 votes write a fresh slot (22,100 gas: about 1,400 a vote),
    and each vote is checked, packed and logged as a 32-byte word (about 600 more); the rest (the task and member
    reads, the library call, the event) is under 100,000 whatever the size. A request short of gas fails alone and
    its party votes when the level opens, so the bound errs high: it only sizes the batch's limit, unused gas is not
    paid. ``tests/contracts/test_ahead_votes.py`` checks every ballot sent ahead there against it."""
    return VOTE_GAS_BASE + VOTE_GAS_PER_VOTE * votes


HISTOGRAM_GAS_BASE: int = 300_000
HISTOGRAM_GAS_PER_SLOT: int = 12_000
HISTOGRAM_GAS_PER_ENDORSEMENT: int = 15_000


def histogram_request_gas(nodes: int, nbins: int, endorsements: int) -> int:
    """The gas a relayed ``submitHistograms`` of ``nodes`` node blocks of ``nbins`` slots per candidate is granted.
    Measured on anvil (``tests/contracts/test_ahead_votes.py`` checks every submission there against it): about 150,000
    for the task's reads, the root's Merkle tree and the first tree's identities, then about 9,300 per slot of
    every node (six words a slot: 3,000 of calldata, which the batch pays, and the exact rules checked per slot),
    about 10,000 per endorsement (``ecrecover`` and its checks). The bound adds a third or more to each, so a
    submission whose rules take the longest paths still fits, while four parties' widest levels stay within a
    block's gas."""
    return HISTOGRAM_GAS_BASE + HISTOGRAM_GAS_PER_SLOT * nodes * nbins + HISTOGRAM_GAS_PER_ENDORSEMENT * endorsements
