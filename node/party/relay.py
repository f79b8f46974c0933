"""A level's submissions and ballots, relayed: each party signs its call as an ERC-2771 request, one party sends
them all at once.

Why: every party submits its histograms at every level, and, while the level resolves, votes on the next one
(``node.party.votes_ahead``). Sent as its own transaction, each was a block of its own on a chain that mines a block
per transaction, and a transaction for every party to sign, send and wait for: eight of the nine transactions of a
level with four parties, on a run bound by CPU. Relayed, a party signs an EIP-712 ``ForwardRequest`` for
its ``submitHistograms`` or ``submitVotes`` and hands it over its open WebSocket to the level's relayer, the party
that sends the level's first resolution; the relayer sends every party's in one ``executeBatch`` of the trusted
forwarder (OpenZeppelin's ``ERC2771Forwarder``; more than one where they would pass a transaction's size or a block's
gas), then its resolution. The contract reads each party as the sender (``_msgSender``), so nothing on chain changes:
the same events, the same checks, the same ballots taken when the level opens, the same audit.

What a relayer cannot do: change a call (the party signed its calldata), or send one twice (the forwarder's nonce).
What it can: withhold one, or send it late. A ballot not taken when the level opens is cast in the level's round,
as when a party's own transaction came too late (``LevelWork.vote``); a submission not on chain a while after it
was handed over is sent as the party's own transaction (``relay_patience``). A request carries a deadline, so
a withheld one cannot land long after the party moved on, and one that lands late fails alone (the step moved on,
or the party's own transaction came first).
"""

from __future__ import annotations

import itertools
import math
import statistics
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import keccak

from fgbdt_chain.ledger.rpc.abi_codec import checksummed
from fgbdt_chain.ledger.rpc.client import ChainClient, TxResult
from fgbdt_chain.ledger.spec.tx_size import BLOCK_GAS_LIMIT
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import (
    Forwarder,
    ForwardRequest,
    pack_batches,
    recover_signer,
    sign_request,
    vote_request_gas,
)
from fgbdt_chain.node.party.endorse_client import EndorseClient, VerifierUnreachable

RELAY_STREAM_PATH = "/v1/relay/stream"
"""The relayer's WebSocket route (``node.party.endorse_server``), beside the endorsement stream."""

RELAY_TTL_SECONDS = 3
"""How long a relayed request stays valid on a chain that mines a block per transaction (a devnet): its deadline,
which the forwarder compares with the timestamp of the block that takes it, set from the party's clock (a network's
nodes keep time within a second or two). A relayer sends within milliseconds on a devnet; the deadline bounds how
long a withheld request could still land, so a party that gives up on its relayer (``relay_patience``, longer than
this) sends its own transaction when its request can no longer land, and a relayer cannot hold a ballot until the
step's deadline closes it without the submissions it assumed. On a chain that mines on a clock the time to live
grows with the interval (``relay_ttl``)."""
BLOCKS_TO_LAND = 2
"""Block intervals a relayed batch may take to land after it was sent: the next block, or the one after where the
batch reached the node while the next was being built. At a block every 5 s a request living 3 s was expired by the
time any block could take it (measured by ``bench.block_interval``: every party then sent its own transaction)."""
PATIENCE_MARGIN_SECONDS = 1.5
"""How long past a request's time to live a party waits for it before sending its own: a deadline is whole seconds
(rounded down), and a second more for the block that took it to be seen."""
CLOCK_SLACK_SECONDS = 5
"""How far ahead of the relayer's clock a request's deadline may be: a party whose clock runs ahead (within this)
is taken, one that asks to be kept longer than the time to live (``relay_ttl``) allows is not."""


def relay_ttl(block_seconds: float) -> int:
    """Seconds a relayed request lives on a chain that mines a block every ``block_seconds`` (0: a block per
    transaction): the devnet's ``RELAY_TTL_SECONDS`` plus ``BLOCKS_TO_LAND`` intervals, rounded up."""
    if not (math.isfinite(block_seconds) and block_seconds >= 0):
        raise ValueError(f"a block interval is a non-negative number of seconds, got {block_seconds!r}")
    return RELAY_TTL_SECONDS + math.ceil(BLOCKS_TO_LAND * block_seconds)


def relay_patience(ttl: float) -> float:
    """How long a party waits for the histograms it handed over to land before it submits them itself: past the
    request's deadline, so that the relayer can no longer land them too."""
    return ttl + PATIENCE_MARGIN_SECONDS


INTERVAL_SAMPLE_BLOCKS = 8
"""Latest blocks whose timestamps give the chain's block interval (``measured_block_seconds``)."""


def measured_block_seconds(client: ChainClient, blocks: int = INTERVAL_SAMPLE_BLOCKS) -> float:
    """The chain's block interval as its latest blocks' timestamps show it: the median gap between consecutive
    blocks, so that a pause of a devnet that mines on demand (nobody transacted) or one slow block does not count;
    0.0 on a chain with fewer than two blocks."""
    latest = client.block_number
    first = max(0, latest - blocks)
    if latest - first < 1:
        return 0.0
    stamps = [int(client.w3.eth.get_block(n)["timestamp"]) for n in range(first, latest + 1)]
    return float(statistics.median(b - a for a, b in itertools.pairwise(stamps)))


SELECTORS: dict[str, bytes] = {
    "votes": keccak(text="submitVotes(uint256,uint256,uint256,int256[])")[:4],
    "histograms": keccak(text="submitHistograms(uint256,uint256,uint256,int256[],(bytes,uint256,uint256,uint256)[])")[
        :4
    ],
}
"""The calls a relayer takes, by kind: a level's submissions, and the ballots sent ahead while it resolves."""
MAX_GAS: dict[str, int] = {"votes": vote_request_gas(256), "histograms": BLOCK_GAS_LIMIT // 2}
"""The most gas a relayed request of each kind may ask for: a ballot of the widest level (256 votes at depth 8), and
half a block for a level's submission (``histogram_request_gas`` of the widest one a transaction carries is under a
third). A relayer pays for what the calls use, and a request that asked for more would only make it pay for junk."""


def _names_its_level(relayed: RelayedRequest, task_id: int) -> bool:
    """Whether the call's first words are this task and the request's level: a submission names (tree, level)
    itself; a ballot, the next level of the tree or the next tree's root, while (tree, level) resolves."""
    data = relayed.request.data
    if len(data) < 4 + 3 * 32:
        return False
    task, tree, level = (int.from_bytes(data[4 + 32 * i : 36 + 32 * i], "big") for i in range(3))
    if task != task_id:
        return False
    if relayed.kind == "histograms":
        return (tree, level) == (relayed.tree, relayed.level)
    return (tree, level) in ((relayed.tree, relayed.level + 1), (relayed.tree + 1, 0))


def relayer_index(level: int, parties: int) -> int:
    """The index of the party that relays a level's submissions and ballots: the one that resolves its first nodes
    (``Resolver.resolve`` gives run ``i`` of the open nodes to party ``(i + level) mod M``), so the ballots land
    before the resolution that opens the next level, in its nonce order."""
    return level % parties


@dataclass(frozen=True)
class RelayedRequest:
    """One party's signed request of ``kind`` (``SELECTORS``), handed to the relayer of (``tree``, ``level``): its
    histograms of that level, or its ballot sent ahead while that level resolves (for the next one, or the next
    tree's root)."""

    kind: str
    """``votes`` or ``histograms`` (``SELECTORS``), or ``resolution`` for the relayer's own, never handed over."""
    tree: int
    level: int
    request: ForwardRequest
    signature: bytes
    assumed: int = -1
    """For a ballot: the parties whose histograms it was computed from (bit ``p`` for party ``p``), which the level
    must accept for it to be sent; -1 for none (histograms)."""

    def message(self, task_id: int) -> dict[str, Any]:
        """The JSON message the WebSocket carries."""
        r = self.request
        return {
            "kind": self.kind,
            "task": task_id,
            "tree": self.tree,
            "level": self.level,
            "from": r.sender,
            "to": r.to,
            "gas": r.gas,
            "nonce": r.nonce,
            "deadline": r.deadline,
            "data": "0x" + r.data.hex(),
            "signature": "0x" + self.signature.hex(),
            "assumed": self.assumed,
        }

    @classmethod
    def parse(cls, body: Any) -> tuple[int, RelayedRequest]:
        """(task id, request) of a message; ``ValueError`` saying what is wrong with a malformed one."""
        if not isinstance(body, dict):
            raise ValueError("a relayed request is a JSON object")
        fields = {"kind", "task", "tree", "level", "from", "to", "gas", "nonce", "deadline", "data", "signature"}
        missing = fields - set(body)
        if missing:
            raise ValueError(f"missing fields: {', '.join(sorted(missing))}")
        if body["kind"] not in SELECTORS:
            raise ValueError(f"kind must be one of {', '.join(sorted(SELECTORS))}, got {body['kind']!r}")
        ints = {}
        for k in ("task", "tree", "level", "gas", "nonce", "deadline"):
            v = body[k]
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{k} must be a non-negative integer, got {v!r}")
            ints[k] = v
        assumed = body.get("assumed", -1)
        if not isinstance(assumed, int) or isinstance(assumed, bool) or assumed < -1:
            raise ValueError(f"assumed must be a party mask or -1, got {assumed!r}")
        try:
            data = bytes.fromhex(str(body["data"]).removeprefix("0x"))
            signature = bytes.fromhex(str(body["signature"]).removeprefix("0x"))
            sender, to = checksummed(str(body["from"])), checksummed(str(body["to"]))
        except ValueError as exc:
            raise ValueError(f"malformed hex field: {exc}") from exc
        if len(signature) != 65:
            raise ValueError(f"a signature is 65 bytes, not {len(signature)}")
        req = ForwardRequest(sender, to, 0, ints["gas"], ints["nonce"], ints["deadline"], data)
        return ints["task"], cls(str(body["kind"]), ints["tree"], ints["level"], req, signature, assumed)


class RelayInbox:
    """The requests handed to this party to relay, by kind and level; thread-safe (the endorsement server's thread
    offers, the main loop takes).

    A request is checked before it is held, since the batch pays for every request in it: from a party of the task,
    to the task's contract, the call its kind names, signed by its sender for this chain's forwarder, not expired,
    and for a level not relayed yet. Whether the call is valid is the contract's to say: a request whose call
    reverts fails alone in the batch."""

    def __init__(
        self,
        task_id: int,
        task_address: str,
        parties: Collection[str],
        chain_id: int,
        forwarder: str,
        ttl: float = RELAY_TTL_SECONDS,
    ) -> None:
        self.task_id = task_id
        self.ttl = ttl
        """The longest a request may ask to live (``relay_ttl`` of the chain's block interval)."""
        self.task_address = checksummed(task_address)
        self.parties = {checksummed(p) for p in parties}
        self.chain_id, self.forwarder = chain_id, forwarder
        self._held: dict[tuple[str, int, int], dict[str, RelayedRequest]] = {}
        self._closed: set[tuple[str, int, int]] = set()
        self._floor: tuple[int, int] | None = None
        """The last (tree, level) taken: requests for levels before it are late, and for trees past the next one after
        it or after ``_tree`` (the newer), early (held by no one; refused so that a party cannot fill this one's
        memory)."""
        self._tree = -1
        """The newest tree this party's node saw the task at (``note_tree``). A relayer takes only its own levels
        (``relayer_index``), so a tree that ended before them left ``_floor`` a tree behind: the next tree's requests
        were refused as early, and every other party sent its own (at 25 levels of the paper's 500 trees of depth 8)."""
        self._changed = threading.Condition()

    def offer(self, body: Any, now: float | None = None) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) for a relayed request: 202 held, 422 malformed, 403 not acceptable, 409 too late."""
        try:
            task_id, relayed = RelayedRequest.parse(body)
        except ValueError as exc:
            return 422, {"detail": str(exc)}
        req = relayed.request
        if task_id != self.task_id:
            return 403, {"detail": f"this party relays task {self.task_id}, not {task_id}"}
        if req.sender not in self.parties:
            return 403, {"detail": f"{req.sender} is not a party of task {self.task_id}"}
        if req.to != self.task_address or req.data[:4] != SELECTORS[relayed.kind]:
            return 403, {"detail": f"not a {relayed.kind} call to the task's contract"}
        clock = time.time() if now is None else now
        if req.deadline < clock:
            return 403, {"detail": f"the request expired at {req.deadline}"}
        if req.deadline > clock + self.ttl + CLOCK_SLACK_SECONDS:
            return 403, {"detail": f"a deadline {req.deadline - clock:.0f} s away: at most {self.ttl:g} s"}
        if req.gas > MAX_GAS[relayed.kind]:
            return 403, {"detail": f"{req.gas} gas asked for {relayed.kind}: at most {MAX_GAS[relayed.kind]}"}
        if not _names_its_level(relayed, self.task_id):
            return 403, {"detail": f"the call is not for tree {relayed.tree} level {relayed.level} of this task"}
        try:
            signer = recover_signer(req, relayed.signature, self.chain_id, self.forwarder)
        except Exception as exc:  # eth-keys raises its own BadSignature for a malformed signature's values
            return 403, {"detail": f"bad signature: {exc}"}
        if signer != req.sender:
            return 403, {"detail": f"signed by {signer}, not by {req.sender}"}
        key = (relayed.kind, relayed.tree, relayed.level)
        with self._changed:
            if key in self._closed or (self._floor is not None and key[1:] < self._floor):
                return 409, {"detail": f"tree {key[1]} level {key[2]}: its {key[0]} were relayed already"}
            newest = max(self._tree, -1 if self._floor is None else self._floor[0])
            if newest >= 0 and relayed.tree > newest + 1:
                return 409, {"detail": f"tree {relayed.tree} is not next: this party is at tree {newest}"}
            self._held.setdefault(key, {})[req.sender] = relayed
            self._changed.notify_all()
        return 202, {"held": True}

    def hold(self, relayed: RelayedRequest) -> bool:
        """Hold this party's own request for its own relay (signed by this process: not checked again); False once
        the level's requests of its kind were relayed."""
        key = (relayed.kind, relayed.tree, relayed.level)
        with self._changed:
            if key in self._closed:
                return False
            self._held.setdefault(key, {})[relayed.request.sender] = relayed
            self._changed.notify_all()
        return True

    def holds(self, kind: str, tree: int, level: int, party: str) -> bool:
        """Whether ``party``'s request of ``kind`` for (``tree``, ``level``) is held."""
        with self._changed:
            return checksummed(party) in self._held.get((kind, tree, level), {})

    def note_tree(self, tree: int) -> None:
        """The task is at ``tree`` (as this party's node read it): requests for the tree after it are not early."""
        with self._changed:
            self._tree = max(self._tree, tree)

    def take(self, kind: str, tree: int, level: int, expected: Iterable[str], timeout: float) -> list[RelayedRequest]:
        """The level's requests of ``kind`` once every ``expected`` party's is in, or ``timeout`` seconds passed, in
        party address order; the level's ``kind`` is then closed to later offers (they are told so, and send their own
        transaction)."""
        key = (kind, tree, level)
        with self._changed:
            self._wait(key, expected, timeout)
            self._closed.add(key)
            self._floor = max(self._floor or key[1:], key[1:])
            held = self._held.pop(key, {})
            # the levels before this one will not be relayed any more
            self._held = {k: v for k, v in self._held.items() if k[1:] >= key[1:] and k != key}
            self._closed = {k for k in self._closed if k[1] >= tree - 1}
        return [held[p] for p in sorted(held)]

    def wait(self, kind: str, tree: int, level: int, expected: Iterable[str], timeout: float) -> list[RelayedRequest]:
        """As :meth:`take`, without taking them: the level's ``kind`` stays open to offers."""
        key = (kind, tree, level)
        with self._changed:
            self._wait(key, expected, timeout)
            held = dict(self._held.get(key, {}))
        return [held[p] for p in sorted(held)]

    def _wait(self, key: tuple[str, int, int], expected: Iterable[str], timeout: float) -> None:
        want = {checksummed(p) for p in expected}
        end = time.monotonic() + timeout
        while not want <= set(self._held.get(key, {})):
            left = end - time.monotonic()
            if left <= 0:
                return
            self._changed.wait(left)


class RelayChannel:
    """One party's side of the relay: it signs its calls as forwarder requests and hands them to each level's
    relayer, and, as a level's relayer, holds the others' (``inbox``) and sends them in batches.

    The forwarder's nonces are sequential per signer, and a request is valid only with the next one: the channel
    counts them on from the forwarder's ``nonces`` while its requests are taken, and reads it again after one that
    may not have landed (``forget_nonce``: refused, unreachable, or found missing on chain), since a relayer may hold
    it or not."""

    def __init__(
        self,
        task: TaskContract,
        task_id: int,
        account: LocalAccount,
        parties: list[str],
        endpoints: dict[str, str],
        asker: EndorseClient,
        ttl: int = RELAY_TTL_SECONDS,
    ) -> None:
        self.task, self.task_id, self.account = task, task_id, account
        self.ttl = ttl
        """How long this party's requests live (``relay_ttl``), and the longest it holds the others' to."""
        self.parties, self.endpoints, self.asker = parties, endpoints, asker
        self.index = parties.index(account.address)
        self.forwarder = Forwarder.of(task)
        self.inbox = RelayInbox(task_id, task.address, parties, task.client.chain_id, self.forwarder.address, ttl)
        self.nonce: int | None = None

    def relayer(self, level: int) -> int:
        """The index of the party that relays ``level``'s requests (``relayer_index``)."""
        return relayer_index(level, len(self.parties))

    def forget_nonce(self) -> None:
        """Read the next nonce from the forwarder before the next request."""
        self.nonce = None

    def request(
        self, kind: str, tree: int, level: int, function: str, args: tuple[Any, ...], gas: int, assumed: int = -1
    ) -> RelayedRequest:
        """This party's signed request calling ``function(*args)`` on the task's contract, granting ``gas``."""
        data = bytes.fromhex(self.task.client.encode_call(self.task.contract, function, args).removeprefix("0x"))
        if self.nonce is None:
            self.nonce = self.forwarder.nonce(self.account.address)
        deadline = int(time.time()) + self.ttl
        req = ForwardRequest(self.account.address, self.task.address, 0, gas, self.nonce, deadline, data)
        signature = sign_request(bytes(self.account.key), req, self.task.client.chain_id, self.forwarder.address)
        return RelayedRequest(kind, tree, level, req, signature, assumed)

    def keep_own(self) -> None:
        """Count on the nonce of a request this party signed to send itself, as the level's relayer."""
        assert self.nonce is not None
        self.nonce += 1

    def hand_over(self, relayed: RelayedRequest) -> str | None:
        """Hand ``relayed`` to its level's relayer (this party's own inbox if it relays the level); None once taken,
        else why not (the caller sends its own transaction instead)."""
        relayer = self.relayer(relayed.level)
        if relayer == self.index:
            status, answer = (202, {}) if self.inbox.hold(relayed) else (409, {"detail": "relayed already"})
        else:
            try:
                to = self.parties[relayer]
                status, answer = self.asker.ask(
                    self.endpoints[to], relayed.message(self.task_id), RELAY_STREAM_PATH, to
                )
            except VerifierUnreachable as exc:
                status, answer = 0, {"detail": f"unreachable ({exc})"}
        if status != 202:
            self.forget_nonce()
            return f"party {relayer}: {answer.get('detail', answer)}"
        assert self.nonce is not None
        self.nonce += 1
        return None

    def send(
        self,
        kind: str,
        tree: int,
        level: int,
        expected: Collection[str],
        timeout: float,
        keep: Callable[[RelayedRequest], bool] = lambda r: True,
    ) -> tuple[int, list[TxResult], list[str]]:
        """As the relayer of (``tree``, ``level``): the requests of ``kind`` handed over, once ``expected`` parties'
        are in or ``timeout`` passed, those ``keep`` keeps sent in as few batches as fit (``pack_batches``), in
        order. Returns how many were sent, the batches' results and why any batch failed (its requests' parties send
        their own)."""
        held = [r for r in self.inbox.take(kind, tree, level, expected, timeout) if keep(r)]
        return len(held), *self.send_requests(held)

    def send_requests(self, requests: list[RelayedRequest]) -> tuple[list[TxResult], list[str]]:
        """``requests`` in as few batches as fit (``pack_batches``), in order: the batches' results and why any
        failed (its requests' parties send their own)."""
        results: list[TxResult] = []
        failures: list[str] = []
        for batch in pack_batches([(r.request, r.signature) for r in requests]):
            try:
                results.append(self.forwarder.execute_batch(self.account, batch))
            except Exception as exc:  # a revert, a request the encoder refuses: its parties send their own
                failures.append(f"{len(batch)} requests: {type(exc).__name__}: {exc}")
        return results, failures
