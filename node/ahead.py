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
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from eth_abi import decode

from fgbdt_chain.ledger import reference as ref
from fgbdt_chain.node.resolve import top2_level

AHEAD_STREAM_PATH = "/v1/ahead/stream"
"""The WebSocket route (``node.endorse_server``) for what goes ahead: the relayer's ballots and the endorsement
requests of a level not open yet."""

VOTE_ARGS = ("uint256", "uint256", "uint256", "int256[]")
"""``submitVotes(taskId, tree, level, votes)``: what a relayed ballot's calldata holds after its selector."""


def may_endorse_ahead(level: int, rule: int, private: bool) -> bool:
    """Whether a level's histograms may be endorsed before it opens: below a tree's root, under the statistical
    rule, without privacy noise (a private party's noise is drawn for the level as it opens on chain)."""
    return level >= 1 and rule == ref.ENDORSE_STATISTICAL and not private


def ballot_votes(calldata: bytes) -> tuple[int, int, list[int]]:
    """(tree, level, votes) of a relayed ``submitVotes`` call."""
    _, tree, level, votes = decode(VOTE_ARGS, calldata[4:])
    return int(tree), int(level), [int(v) for v in votes]


def ballots_message(task_id: int, tree: int, level: int, ballots: Mapping[str, Sequence[int]]) -> dict[str, Any]:
    """What the relayer sends every other party: the ballots sent ahead of (``tree``, ``level``), by party."""
    return {"kind": "ballots", "task": task_id, "tree": tree, "level": level, "ballots": dict(ballots)}


def parse_ballots(body: Any, parties: Sequence[str]) -> tuple[int, int, int, dict[str, list[int]]]:
    """(task, tree, level, ballots) of a ballots message; ``ValueError`` saying what is wrong with a malformed one."""
    if not isinstance(body, dict):
        raise ValueError("a ballots message is a JSON object")
    ints = []
    for k in ("task", "tree", "level"):
        v = body.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{k} must be a non-negative integer, got {v!r}")
        ints.append(v)
    ballots = body.get("ballots")
    if not isinstance(ballots, dict) or not ballots:
        raise ValueError("ballots must be a non-empty object of party address to votes")
    out: dict[str, list[int]] = {}
    for party, votes in ballots.items():
        if party not in parties:
            raise ValueError(f"{party} is not a party of the task")
        if not isinstance(votes, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in votes):
            raise ValueError(f"the ballot of {party} must be a list of integers")
        out[party] = votes
    return ints[0], ints[1], ints[2], out


@dataclass(frozen=True)
class AheadLevel:
    """A level as a party computed it would open: its nodes, their candidates and where this party's rows are."""

    tree: int
    level: int
    open_nodes: tuple[int, ...]
    candidates: tuple[tuple[int, int], ...]
    k_of_row: np.ndarray = field(compare=False)

    def opened_as(self, open_nodes: Sequence[int], candidates: Sequence[tuple[int, int]]) -> bool:
        """Whether the chain opened the level with these nodes and candidates."""
        return self.open_nodes == tuple(open_nodes) and self.candidates == tuple(map(tuple, candidates))

    def same(self, open_nodes: Sequence[int], candidates: Sequence[tuple[int, int]], k_of_row: np.ndarray) -> bool:
        """``opened_as``, with this party's rows where the chain's splits put them: the histograms built ahead are
        then the ones it would build now."""
        return self.opened_as(open_nodes, candidates) and np.array_equal(self.k_of_row, k_of_row)


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

    def put_ballots(self, tree: int, level: int, ballots: dict[str, list[int]]) -> bool:
        """Keep the ballots of (tree, level); False if some were kept already (a message sent twice)."""
        with self.changed:
            self._prune(tree)
            if (tree, level) in self.ballots:
                return False
            self.ballots[(tree, level)] = ballots
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

    def start(self, tree: int, level: int) -> bool:
        """Claim this party's own exchange ahead of (tree, level); False if it ran or runs already."""
        with self.changed:
            if (tree, level) in self.results or (tree, level) in self.running:
                return False
            self.running.add((tree, level))
            return True

    def finish(self, tree: int, level: int, result: AheadResult | None) -> None:
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
