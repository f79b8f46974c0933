"""The audit's verdict: the first mismatch between the record and the recomputation, or OK with what was checked.

Why one exception (:class:`Found`) carries the mismatch out of the replay: the checks follow the order in which the
contract produced the records, so the first one that fails is the first disagreement in time, and nothing after it
needs to be replayed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn

from fgbdt_chain.ledger.rpc.client import Event


class AuditError(Exception):
    """The audit cannot run (unknown task, task not started, unreachable chain): a usage error, not a mismatch."""


@dataclass(frozen=True)
class Mismatch:
    """The first disagreement between the record and the recomputation, located as precisely as possible."""

    field: str
    expected: Any
    recorded: Any
    tree: int | None = None
    level: int | None = None
    node: int | None = None
    party: str | None = None

    def __str__(self) -> str:
        where = [
            f"{name} {value}"
            for name, value in (("tree", self.tree), ("level", self.level), ("node", self.node), ("party", self.party))
            if value is not None
        ]
        loc = f" at {', '.join(where)}" if where else ""
        return f"MISMATCH{loc}: {self.field}: expected {show(self.expected)}, recorded {show(self.recorded)}"


@dataclass
class AuditCounts:
    """How much was checked (printed with OK so a reader can tell an empty audit from a full one)."""

    trees: int = 0
    levels: int = 0
    nodes: int = 0
    vote_sets: int = 0
    ahead_sets: int = 0
    """Of those, the ones sent ahead with the level before's resolution (``submitVotes`` ahead)."""
    histograms: int = 0
    signatures: int = 0
    payouts: int = 0
    state_checked: bool = False


@dataclass
class AuditReport:
    """Result of an audit: ``ok`` and the first mismatch (None when ok)."""

    ok: bool
    first_mismatch: str | None
    counts: AuditCounts
    mismatch: Mismatch | None = None
    completed: bool = False
    pending: str | None = None
    privacy: dict[str, Any] | None = None
    """The task's differential privacy as the accountant computes it from the recorded config
    (``node.privacy.accountant``: epsilon, delta and every mechanism's share); None for a task without privacy noise."""

    def summary(self) -> str:
        """One line: ``OK`` and what was checked, or the first mismatch."""
        if not self.ok:
            return str(self.first_mismatch)
        c = self.counts
        stage = "training completed" if self.completed else f"training in progress ({self.pending})"
        guarantee = ""
        if self.privacy is not None:
            guarantee = f"; ({self.privacy['epsilon']:g}, {self.privacy['delta']:g})-DP per party"
        return (
            f"OK: {c.trees} trees, {c.levels} levels, {c.nodes} nodes, {c.vote_sets} vote sets "
            f"({c.ahead_sets} sent ahead), "
            f"{c.histograms} histogram submissions, {c.signatures} signatures, {c.payouts} payouts checked; {stage}"
            + ("" if c.state_checked else "; contract storage not checked")
            + guarantee
        )


def show(x: Any) -> str:
    """A recorded or expected value as a mismatch prints it: bytes in hex, sequences element by element."""
    if isinstance(x, bytes | bytearray):
        return "0x" + bytes(x).hex()
    if isinstance(x, tuple | list):
        return "[" + ", ".join(show(v) for v in x) + "]"
    return str(x)


class Found(Exception):
    """Carries the first mismatch out of the replay (raised by :func:`fail`, caught by the entry point)."""

    def __init__(self, mismatch: Mismatch) -> None:
        super().__init__(str(mismatch))
        self.mismatch = mismatch


def fail(fld: str, expected: Any, recorded: Any, **where: Any) -> NoReturn:
    """Stop the replay at a mismatch of ``fld``, located by ``where`` (tree, level, node, party)."""
    raise Found(Mismatch(fld, expected, recorded, **where))


def one(name: str, events: list[Event], **where: Any) -> Event | None:
    """The single event of a kind for one step, None when absent; two is a mismatch (the contract emits one)."""
    if len(events) > 1:
        fail(f"number of {name} events", 1, len(events), **where)
    return events[0] if events else None


def by_deadline(what: str, block: int, deadline: int, where: dict[str, Any]) -> None:
    """A step's transaction mined by the step's deadline (the contract refuses it after): ``what`` names it."""
    if block > deadline:
        fail(f"{what} before the step deadline", f"block <= {deadline}", block, **where)
