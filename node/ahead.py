"""The next level's endorsements exchanged while the chain mines this one ("ahead").

Why (issue 13): after a level's block, every party built its next histograms and asked three verifiers to sign them,
about 4.5 ms of a 17-33 ms level on two cores shared by four parties, while in the 6-13 ms the chain took to mine the
level before, one core idled. Every party can know the next level before the chain opens it. It resolves the level
itself from the submissions it endorsed (``PartyNode._level_ahead``, for its ballot). The next level's candidates are
the top-2 of the parties' ballots, which the level's relayer holds before it sends them. So the relayer passes the
ballots on to the others as it sends its batch (``ballots_message``). Each party then builds its next histograms and
has them endorsed while the batch is mined. When the level opens on chain as it computed, the party hands its
histograms to the next relayer at once.

What a verifier signs ahead, and why that is safe. Only below a tree's root, under the statistical rule, in a task
without privacy noise (``may_endorse_ahead``). There a verifier's signature attests the exact rules alone, at neutral
credit (``node.endorsement.decide``), and the contract checks those rules again at the submission. The signature binds
the histograms' commitment root, and a party submits them only when the chain opened the level with the nodes,
candidates and rows it computed (``AheadLevel.same``). So they are the histograms it would have built after the block,
and the same signatures the verifiers would have given then. What a verifier endorsed ahead, histograms it will vote
and resolve from, is kept apart (``AheadBook.hold``) until its own look at the chain confirms the level
(``AheadBook.confirm``). A level that opened otherwise drops it, and the exchange runs after the block, as before.
A verifier signs ahead only histograms built for the level it computed itself (``AheadLevel.agrees``), and takes
ballots only from the level's relayer (signed, ``ballots_message``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from eth_abi import decode

from fgbdt_chain.ledger import reference as ref
from fgbdt_chain.ledger.encoding import recover_hash_signer, sign_hash
from fgbdt_chain.ledger.hashing import keccak256
from fgbdt_chain.node.resolve import top2_level

AHEAD_STREAM_PATH = "/v1/ahead/stream"
"""The WebSocket route (``node.endorse_server``) for what goes ahead: the relayer's ballots and the endorsement
requests of a level not open yet."""

VOTE_ARGS = ("uint256", "uint256", "uint256", "int256[]")
"""``submitVotes(taskId, tree, level, votes)``: what a relayed ballot's calldata holds after its selector."""

MAX_VOTE = 1 << 16
"""Votes are feature indices below this (the contract's tie keys hold 16 bits of a feature), or ``ABSTAIN``."""
MAX_BALLOT = 2 * 128
"""The most votes a ballot ahead holds: two per node of a level of depth 8's widest, 128 nodes."""


def may_endorse_ahead(level: int, rule: int, private: bool) -> bool:
    """Whether a level's histograms may be endorsed before it opens: below a tree's root, under the statistical
    rule, without privacy noise (a private party's noise is drawn for the level as it opens on chain)."""
    return level >= 1 and rule == ref.ENDORSE_STATISTICAL and not private


def ballot_votes(calldata: bytes) -> tuple[int, int, list[int]]:
    """(tree, level, votes) of a relayed ``submitVotes`` call."""
    _, tree, level, votes = decode(VOTE_ARGS, calldata[4:])
    return int(tree), int(level), [int(v) for v in votes]


def ballots_digest(task_id: int, tree: int, level: int, ballots: Mapping[str, Sequence[int]]) -> bytes:
    """What the relayer signs for the ballots it passes on: keccak256 of their canonical JSON."""
    canonical = json.dumps([task_id, tree, level, sorted((p, list(v)) for p, v in ballots.items())])
    return keccak256(canonical.replace(" ", "").encode())


def ballots_message(
    task_id: int, tree: int, level: int, ballots: Mapping[str, Sequence[int]], key: bytes
) -> dict[str, Any]:
    """What the relayer sends every other party: the ballots sent ahead of (``tree``, ``level``), by party, signed
    with the relayer's ``key``, so that nobody else's count."""
    signature = sign_hash(key, ballots_digest(task_id, tree, level, ballots))
    return {
        "kind": "ballots",
        "task": task_id,
        "tree": tree,
        "level": level,
        "ballots": {p: list(v) for p, v in ballots.items()},
        "signature": "0x" + signature.hex(),
    }


def parse_ballots(body: Any, parties: Sequence[str]) -> tuple[int, int, int, dict[str, list[int]], str]:
    """(task, tree, level, ballots, signer) of a ballots message, one ballot of every party; ``ValueError`` saying
    what is wrong with a malformed one (votes out of range, a ballot too long, a party missing, a bad signature)."""
    if not isinstance(body, dict):
        raise ValueError("a ballots message is a JSON object")
    ints = []
    for k in ("task", "tree", "level"):
        v = body.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{k} must be a non-negative integer, got {v!r}")
        ints.append(v)
    ballots = body.get("ballots")
    if not isinstance(ballots, dict) or set(ballots) != set(parties):
        raise ValueError("ballots must hold one ballot of every party of the task, by address")
    out: dict[str, list[int]] = {}
    for party, votes in ballots.items():
        if (
            not isinstance(votes, list)
            or not 0 < len(votes) <= MAX_BALLOT
            or not all(isinstance(v, int) and not isinstance(v, bool) and ref.ABSTAIN <= v < MAX_VOTE for v in votes)
        ):
            raise ValueError(
                f"the ballot of {party} must be 1 to {MAX_BALLOT} votes, each -1 or a feature below {MAX_VOTE}"
            )
        out[party] = votes
    try:
        signature = bytes.fromhex(str(body.get("signature", "")).removeprefix("0x"))
        signer = recover_hash_signer(ballots_digest(ints[0], ints[1], ints[2], out), signature)
    except Exception as exc:  # malformed hex, a signature of the wrong length or off the curve
        raise ValueError(f"the ballots' signature is not valid: {exc}") from exc
    return ints[0], ints[1], ints[2], out, signer


@dataclass(frozen=True)
class AheadLevel:
    """A level as a party computed it would open: its nodes, their candidates, the splits of the level before that
    open them (node, feature, threshold) and where this party's rows are."""

    tree: int
    level: int
    open_nodes: tuple[int, ...]
    candidates: tuple[tuple[int, int], ...]
    splits: tuple[tuple[int, int, int], ...]
    k_of_row: np.ndarray = field(compare=False)

    def assumed(self) -> dict[str, Any]:
        """What an endorsement request ahead says it was built for: a verifier signs only what it computed alike."""
        return {"open": list(self.open_nodes), "candidates": self.candidates, "splits": self.splits}

    def agrees(self, assumed: Any) -> bool:
        """Whether an asker's ``assumed`` is this level (JSON lists, as it arrives)."""
        return isinstance(assumed, dict) and json.loads(json.dumps(self.assumed())) == assumed

    def opened_as(
        self,
        open_nodes: Sequence[int],
        candidates: Sequence[tuple[int, int]],
        chain_splits: Mapping[int, tuple[int, int]],
    ) -> bool:
        """Whether the chain opened the level with these nodes and candidates, from these splits (the tree's, by
        node: every split of the level before must be the chain's, so that every party's rows went where computed)."""
        return (
            self.open_nodes == tuple(open_nodes)
            and self.candidates == tuple((int(a), int(b)) for a, b in candidates)
            and all(chain_splits.get(n) == (f, t) for n, f, t in self.splits)
        )

    def same(
        self,
        open_nodes: Sequence[int],
        candidates: Sequence[tuple[int, int]],
        chain_splits: Mapping[int, tuple[int, int]],
        k_of_row: np.ndarray,
    ) -> bool:
        """``opened_as``, with this party's rows where it routed them: the histograms built ahead are then the ones
        it would build now."""
        return self.opened_as(open_nodes, candidates, chain_splits) and np.array_equal(self.k_of_row, k_of_row)


def ahead_candidates(
    ballots: Sequence[Sequence[int]],
    previous_open: Sequence[int],
    open_nodes: Sequence[int],
    num_features: int,
    tie_rule: int,
    tree: int,
) -> tuple[tuple[int, int], ...]:
    """The candidates the chain fixes when a level opens with every party's ballot sent ahead: each cut to the
    children that opened (``reference.ahead_ballot``), then the top-2 of each node's votes (``top2_level``, as the
    contract's ``levelTop2``)."""
    cut = np.array([ref.ahead_ballot(b, previous_open, open_nodes) for b in ballots], dtype=np.int64)
    top = top2_level(cut, num_features, tie_rule, tree, open_nodes)
    return tuple((int(a), int(b)) for a, b in top)


@dataclass
class AheadResult:
    """A party's own histograms of a level built ahead, and the signatures its verifiers gave them."""

    level: AheadLevel
    histograms: list[ref.NodeHistograms]
    answers: dict[str, tuple[bytes, ref.Credit]]


class AheadBook:
    """What one party knows ahead, by (tree, level), shared between its main loop, its endpoint and the worker that
    builds and sends its histograms ahead; levels of trees before the last two are dropped as new ones come."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.ballots: dict[tuple[int, int], dict[str, list[int]]] = {}
        self.levels: dict[tuple[int, int], AheadLevel] = {}
        self.held: dict[tuple[int, int], dict[str, tuple[list[ref.NodeHistograms], bytes]]] = {}
        """Other parties' histograms this party endorsed ahead, with their roots, until the level is confirmed."""
        self.verdicts: dict[tuple[int, int], bool] = {}
        """True: the level opened as computed (``confirm``); False: otherwise, nothing held of it counts."""
        self.results: dict[tuple[int, int], AheadResult | None] = {}
        """This party's own exchange ahead, once done: None where it gave up."""
        self.running: set[tuple[int, int]] = set()

    def _prune(self, tree: int) -> None:
        for book in (self.ballots, self.levels, self.held, self.verdicts, self.results):
            for key in [k for k in book if k[0] < tree - 1]:
                del book[key]
        self.running = {k for k in self.running if k[0] >= tree - 1}

    def put_ballots(self, tree: int, level: int, ballots: dict[str, list[int]]) -> bool:
        """Keep the ballots of (tree, level) and claim this party's exchange ahead of it; False if some were kept
        already (a message sent twice) or the level opened already. The caller bounds ``tree`` (levels of trees
        before ``tree - 1`` are forgotten)."""
        with self.changed:
            self._prune(tree)
            if (tree, level) in self.ballots or (tree, level) in self.verdicts:
                return False
            self.ballots[(tree, level)] = ballots
            self.running.add((tree, level))
            self.changed.notify_all()
            return True

    def hold(self, tree: int, level: int, party: str, hists: list[ref.NodeHistograms], root: bytes) -> bool | None:
        """Keep a party's histograms endorsed ahead; the level's verdict if it came first (True: the caller keeps
        them as endorsed at the level, False: they do not count), else None."""
        with self.changed:
            verdict = self.verdicts.get((tree, level))
            if verdict is None:
                self.held.setdefault((tree, level), {})[party] = (hists, root)
            return verdict

    def confirm(self, tree: int, level: int, opened_as: bool) -> dict[str, tuple[list[ref.NodeHistograms], bytes]]:
        """The chain opened (tree, level): as computed or not. Returns what was held of it if it counts, and from now
        on ``hold`` says so at once."""
        with self.changed:
            if (tree, level) in self.verdicts:
                return {}
            self.verdicts[(tree, level)] = opened_as
            held = self.held.pop((tree, level), {})
            return held if opened_as else {}

    def finish(self, tree: int, level: int, result: AheadResult | None) -> None:
        """This party's exchange ahead of (tree, level) is over: its ``result``, None where it gave up."""
        with self.changed:
            self.running.discard((tree, level))
            self.results[(tree, level)] = result
            self.changed.notify_all()

    def result(self, tree: int, level: int, timeout: float) -> AheadResult | None:
        """This party's exchange ahead of (tree, level), waiting up to ``timeout`` for one that runs; None where none
        ran, it gave up, or it is still running then."""
        with self.changed:
            self.changed.wait_for(lambda: (tree, level) not in self.running, timeout=timeout)
            return self.results.get((tree, level))
