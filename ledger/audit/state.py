"""The replay's state: what the record has established so far, which the next step's checks read.

Why one object: the contract's rules chain the steps (who took part in the previous step may vote, a party's side
sums at the previous level's splits bound its next histograms, its root's credit scales its whole tree), and the
storage the replay predicts is compared with the contract's views at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fgbdt_chain.ledger.audit.record import AuditInput, EventIndex, NodeState, checksum
from fgbdt_chain.ledger.audit.report import AuditCounts, fail
from fgbdt_chain.ledger.audit.rules import CarryCheck
from fgbdt_chain.ledger.audit.task import Task
from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.histogram_rules import Sides


@dataclass
class Replay:
    """The record being replayed, the task, and what the replay has established."""

    inp: AuditInput
    task: Task
    events: EventIndex
    counts: AuditCounts = field(default_factory=AuditCounts)
    pending: str | None = None
    """Where training stands when it has not completed."""
    completed: bool = False
    nodes: dict[tuple[int, int], NodeState] = field(default_factory=dict)
    """The storage of every node (``getNode``) as the replay says it must be."""
    totals: dict[str, int] = field(default_factory=dict)
    """Each party's contribution total."""
    active: set[str] | None = None
    """Who took part in the previous step (None before the first histograms closed)."""
    last_closed: tuple[int, int] | None = None
    """Where the last ``HistogramsClosed`` replayed is (block, log index): a root's ballot sent ahead is taken only if
    sent after the close of the tree before's last level, while that level resolved."""
    sides: dict[str, dict[int, Sides]] = field(default_factory=dict)
    """Each party's side sums at the previous level's splits."""
    credits: dict[str, ref.Credit] = field(default_factory=dict)
    """Each party's credit for the current tree (attested at its root)."""
    contract: str = field(init=False)
    carry: CarryCheck = field(init=False)

    def __post_init__(self) -> None:
        self.contract = checksum(self.inp.contract)
        self.carry = CarryCheck(self.task, self.nodes)

    def taking_part(self) -> list[str]:
        """The parties that took part in the previous step, in party order (all of them before the first)."""
        parties = self.task.parties
        return parties if self.active is None else [p for p in parties if p in self.active]

    def approved_voter(self, ev: Event, where: dict[str, Any]) -> str:
        """A ballot's sender, who must be an approved party."""
        party = checksum(ev.args["party"])
        if party not in self.task.party_set:
            fail("voter is an approved party", "approved party", party, **{**where, "party": party})
        return party
