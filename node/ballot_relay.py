"""Votes sent ahead, relayed: each party signs its ballot as an ERC-2771 request, one party sends them all at once.

Why: while a level resolves, every party taking part votes on the next level (``PartyNode._vote_ahead``). Sent as
its own transaction, each ballot was a block of its own on a chain that mines a block per transaction, and a
transaction for every party to sign, send and wait for: four of the nine transactions of a level with four parties,
on a run bound by CPU (issue 13). Relayed, a party signs an EIP-712 ``ForwardRequest`` for its ``submitVotes`` and
hands it over its open WebSocket to the level's relayer, the party that sends the level's first resolution; the
relayer sends every ballot in one ``executeBatch`` of the trusted forwarder (OpenZeppelin's ``ERC2771Forwarder``),
then its resolution. The contract reads each party as the sender (``_msgSender``), so nothing on chain changes: the
same events, the same ballots taken when the level opens, the same audit.

What a relayer cannot do: change a ballot (the party signed its calldata), or send one twice (the forwarder's nonce).
What it can: withhold a ballot, or send it late, where the party's own transaction could race the resolution too.
Either way the ballot is not taken when the level opens, and the party votes in the level's round as it does when
its own transaction comes too late (``PartyNode._vote``); a request carries a deadline, so a withheld one cannot
land once the party has moved on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from eth_utils import keccak, to_checksum_address

from fgbdt_chain.ledger.forwarder import ForwardRequest, recover_signer

BALLOT_STREAM_PATH = "/v1/ballots/stream"
"""The relayer's WebSocket route (``node.endorse_server``), beside the endorsement stream."""

BALLOT_TTL_SECONDS = 60
"""How long a relayed ballot stays valid (its request's deadline, in chain seconds): a level resolves in well under a
second on a devnet and within a few blocks on a network, so a request is either relayed within its level or never;
the deadline bounds how long a withheld one could still land."""

SUBMIT_VOTES_SELECTOR: bytes = keccak(text="submitVotes(uint256,uint256,uint256,int256[])")[:4]


def relayer_index(level: int, parties: int) -> int:
    """The index of the party that relays a level's ballots: the one that resolves the level's first nodes
    (``PartyNode._resolve`` gives run ``i`` of the open nodes to party ``(i + level) mod M``), so the ballots land
    before the resolution that opens the next level, in its nonce order."""
    return level % parties


@dataclass(frozen=True)
class RelayedBallot:
    """One party's signed ``submitVotes`` request, handed to the relayer of (``tree``, ``level``), the level that
    resolves (the ballot is for the next one, or the next tree's root)."""

    tree: int
    level: int
    request: ForwardRequest
    signature: bytes

    def message(self, task_id: int) -> dict[str, Any]:
        """The JSON message the WebSocket carries."""
        r = self.request
        return {
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
        }

    @classmethod
    def parse(cls, body: Any) -> tuple[int, RelayedBallot]:
        """(task id, ballot) of a message; ``ValueError`` saying what is wrong with a malformed one."""
        if not isinstance(body, dict):
            raise ValueError("a ballot message is a JSON object")
        missing = {"task", "tree", "level", "from", "to", "gas", "nonce", "deadline", "data", "signature"} - set(body)
        if missing:
            raise ValueError(f"missing fields: {', '.join(sorted(missing))}")
        ints = {}
        for k in ("task", "tree", "level", "gas", "nonce", "deadline"):
            v = body[k]
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{k} must be a non-negative integer, got {v!r}")
            ints[k] = v
        try:
            data = bytes.fromhex(str(body["data"]).removeprefix("0x"))
            signature = bytes.fromhex(str(body["signature"]).removeprefix("0x"))
            sender, to = to_checksum_address(str(body["from"])), to_checksum_address(str(body["to"]))
        except ValueError as exc:
            raise ValueError(f"malformed hex field: {exc}") from exc
        if len(signature) != 65:
            raise ValueError(f"a signature is 65 bytes, not {len(signature)}")
        req = ForwardRequest(sender, to, 0, ints["gas"], ints["nonce"], ints["deadline"], data)
        return ints["task"], cls(ints["tree"], ints["level"], req, signature)


class BallotInbox:
    """The ballots handed to this party to relay, by the level that resolves; thread-safe (the endorsement server's
    thread offers, the main loop takes).

    A ballot is checked before it is held, since the batch pays for every request in it: from a party of the task,
    to the task's contract, a ``submitVotes`` call, signed by its sender for this chain's forwarder, not expired, and
    for a level not relayed yet. Whether its votes are valid is the contract's to say: a request whose call reverts
    fails alone in the batch."""

    def __init__(
        self, task_id: int, task_address: str, parties: Collection[str], chain_id: int, forwarder: str
    ) -> None:
        self.task_id = task_id
        self.task_address = to_checksum_address(task_address)
        self.parties = {to_checksum_address(p) for p in parties}
        self.chain_id, self.forwarder = chain_id, forwarder
        self._held: dict[tuple[int, int], dict[str, RelayedBallot]] = {}
        self._closed: set[tuple[int, int]] = set()
        self._changed = threading.Condition()

    def offer(self, body: Any, now: float | None = None) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) for a ballot message: 202 held, 422 malformed, 403 not acceptable, 409 too late."""
        try:
            task_id, ballot = RelayedBallot.parse(body)
        except ValueError as exc:
            return 422, {"detail": str(exc)}
        req = ballot.request
        if task_id != self.task_id:
            return 403, {"detail": f"this party relays task {self.task_id}, not {task_id}"}
        if req.sender not in self.parties:
            return 403, {"detail": f"{req.sender} is not a party of task {self.task_id}"}
        if req.to != self.task_address or req.data[:4] != SUBMIT_VOTES_SELECTOR:
            return 403, {"detail": "only submitVotes calls to the task's contract are relayed"}
        if req.deadline < (time.time() if now is None else now):
            return 403, {"detail": f"the request expired at {req.deadline}"}
        try:
            signer = recover_signer(req, ballot.signature, self.chain_id, self.forwarder)
        except ValueError as exc:
            return 403, {"detail": f"bad signature: {exc}"}
        if signer != req.sender:
            return 403, {"detail": f"signed by {signer}, not by {req.sender}"}
        key = (ballot.tree, ballot.level)
        with self._changed:
            if key in self._closed:
                return 409, {"detail": f"tree {key[0]} level {key[1]}: the ballots were relayed already"}
            self._held.setdefault(key, {})[req.sender] = ballot
            self._changed.notify_all()
        return 202, {"held": True}

    def hold(self, ballot: RelayedBallot) -> bool:
        """Hold this party's own ballot for its own relay (signed by this process: not checked again); False once the
        level was relayed."""
        key = (ballot.tree, ballot.level)
        with self._changed:
            if key in self._closed:
                return False
            self._held.setdefault(key, {})[ballot.request.sender] = ballot
            self._changed.notify_all()
        return True

    def holds(self, tree: int, level: int, party: str) -> bool:
        """Whether ``party``'s ballot for (``tree``, ``level``) is held."""
        with self._changed:
            return to_checksum_address(party) in self._held.get((tree, level), {})

    def take(self, tree: int, level: int, expected: Iterable[str], timeout: float) -> list[RelayedBallot]:
        """The level's ballots once every ``expected`` party's is in, or ``timeout`` seconds passed; the level is then
        closed to later offers (they are told so, and send their own transaction)."""
        key = (tree, level)
        want = {to_checksum_address(p) for p in expected}
        end = time.monotonic() + timeout
        with self._changed:
            while not want <= set(self._held.get(key, {})):
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            self._closed.add(key)
            held = self._held.pop(key, {})
            # the levels before this one will not be relayed any more
            self._held = {k: v for k, v in self._held.items() if k > key}
            self._closed = {k for k in self._closed if k[0] >= tree - 1}
        return [held[p] for p in sorted(held)]
