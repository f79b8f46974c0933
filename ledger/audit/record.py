"""What the audit reads: a task's decoded events, its ``submitHistograms`` calls and, optionally, the contract's views.

Why a plain record: the replay (``ledger.audit.levels`` and the checks it calls) is pure, so tests tamper a copy of
the record and check what is caught; ``ledger.audit.reader`` fills it from a node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eth_utils import to_checksum_address

from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec import reference as ref

STATUS_TRAINING: int = 2
STATUS_COMPLETED: int = 3
KIND_OPEN, KIND_SPLIT, KIND_LEAF = 1, 2, 3

LEVEL_EVENTS = (
    "VotesSubmitted",
    "VotingClosed",
    "HistogramsCommitted",
    "HistogramsSubmitted",
    "HistogramsDeclined",
    "HistogramsClosed",
)
"""The events of one step of a level, keyed by (tree, level)."""
NODE_EVENTS = ("CandidatesFixed", "NodeSplit", "LeafSet", "ContributionsAdded")
"""The events of one node, keyed by (tree, node)."""


@dataclass(frozen=True)
class SubmitCall:
    """One ``submitHistograms`` call decoded from a transaction's input: the only place the signatures live, with
    the credit each endorsement attests."""

    task_id: int
    tree: int
    level: int
    data: tuple[int, ...]
    signatures: tuple[bytes, ...]
    credits: tuple[ref.Credit, ...] = ()


@dataclass(frozen=True)
class NodeState:
    """``getNode`` as a plain tuple-like record (kind 0 unknown, 1 open, 2 split, 3 leaf)."""

    kind: int = 0
    cand0: int = 0
    cand1: int = 0
    feature: int = 0
    threshold: int = 0
    tree: int = 0
    g: int = 0
    h: int = 0
    n: int = 0
    value: int = 0


@dataclass
class ChainState:
    """The contract's views of the task at the audited block; compared with what the replay says they must be.

    Events are what the contract *said*; storage is what it *keeps* and pays from. Checking both catches a record
    whose events are right but whose storage is not (a buggy upgrade, a tampered node).
    """

    status: int
    reward: int
    config: dict[str, int]
    contributions: dict[str, int]
    owed: dict[str, int]
    nodes: dict[tuple[int, int], NodeState]
    seed_block_hash: bytes | None = None
    """The hash of the task's seed block (``ShapleySeedFixed.seedBlock``: the block of ``start``, unknown to whoever
    sent it), which the Shapley seed must be derived from (None where the reader could not fetch it)."""


@dataclass
class AuditInput:
    """Everything the pure audit needs. ``calls`` maps a transaction hash (hex, no 0x, lower case) to the
    ``submitHistograms`` calls found in its input."""

    chain_id: int
    contract: str
    task_id: int
    events: list[Event]
    calls: dict[str, list[SubmitCall]] = field(default_factory=dict)
    state: ChainState | None = None


def checksum(a: Any) -> str:
    """An address as every comparison of the audit takes it (EIP-55)."""
    return to_checksum_address(str(a))


def tx_key(tx_hash: str) -> str:
    """A transaction hash as :attr:`AuditInput.calls` keys it."""
    return tx_hash.lower().removeprefix("0x")


def changed(node: NodeState, **changes: int) -> NodeState:
    """``node`` with some fields replaced."""
    return NodeState(**{**node.__dict__, **changes})


class EventIndex:
    """The task's events by name, and a level's and a node's by (tree, level or node, name). The replay *takes* each
    group it checks, so that an event it never reached (outside the replayed levels) is found at the end."""

    def __init__(self, events: list[Event]) -> None:
        self.by_name: dict[str, list[Event]] = {}
        for ev in events:
            self.by_name.setdefault(ev.name, []).append(ev)
        self.level_ev: dict[tuple[int, int, str], list[Event]] = {}
        for name in LEVEL_EVENTS:
            for ev in self.by_name.get(name, []):
                self.level_ev.setdefault((int(ev.args["tree"]), int(ev.args["level"]), name), []).append(ev)
        self.node_ev: dict[tuple[int, int, str], list[Event]] = {}
        for name in NODE_EVENTS:
            for ev in self.by_name.get(name, []):
                self.node_ev.setdefault((int(ev.args["tree"]), int(ev.args["node"]), name), []).append(ev)
        self.used: set[tuple[int, int, str]] = set()

    def named(self, name: str) -> list[Event]:
        """Every event of a kind, in chain order."""
        return self.by_name.get(name, [])

    def take_level(self, tree: int, level: int, name: str) -> list[Event]:
        self.used.add((tree, level, name))
        return self.level_ev.get((tree, level, name), [])

    def take_node(self, tree: int, node: int, name: str) -> list[Event]:
        self.used.add((tree, node, name))
        return self.node_ev.get((tree, node, name), [])

    def untaken(self) -> list[tuple[int, int, str]]:
        """The (tree, level or node, name) groups no step of the replay took, in order."""
        return sorted(k for k in [*self.level_ev, *self.node_ev] if k not in self.used)
