"""Independent audit of a task: replay its events and recompute everything with the Python reference.

Why: the contract is the party everybody has to trust for splits, contributions and payouts. The audit removes that
trust: anyone holding an RPC endpoint re-derives, from the public record only, every endorsement signer, every
histogram commitment, every top-2, split, leaf, Shapley value, voting contribution, per-party total and payout, with
``ledger.spec.reference`` (the specification the contract is tested against), and reports the first place where the
chain disagrees with the specification.

Two layers keep the checks testable without a chain:

* :func:`audit_events` is pure: it takes an :class:`AuditInput` (decoded events in chain order, the
  ``submitHistograms`` calls found in the transactions' calldata and, optionally, a snapshot of the contract's views)
  and returns an :class:`AuditReport`. Unit tests tamper the input and check what is caught.
* :func:`read_task` (``ledger.audit.reader``) reads that input from a node at one pinned block.

The replay's parts, each a module of ``ledger.audit``: ``task`` (the opening events), ``seed`` (the Shapley seed's
block and derivation), ``levels`` (level by level), ``votes`` (candidates), ``submissions`` and ``signatures``
(histograms, commitments, endorsements), ``rules`` (the exact histogram rules and the carry), ``resolution`` (each
node with the reference), ``rewards`` (payouts), ``storage`` (the contract's views) and ``report`` (the verdict).
"""

from __future__ import annotations

from fgbdt_chain.ledger.audit.levels import replay_levels
from fgbdt_chain.ledger.audit.reader import find_submit_calls, read_state, read_task, submit_abi
from fgbdt_chain.ledger.audit.record import (
    KIND_LEAF,
    KIND_OPEN,
    KIND_SPLIT,
    STATUS_COMPLETED,
    STATUS_TRAINING,
    AuditInput,
    ChainState,
    EventIndex,
    NodeState,
    SubmitCall,
)
from fgbdt_chain.ledger.audit.report import AuditCounts, AuditError, AuditReport, Found, Mismatch
from fgbdt_chain.ledger.audit.rewards import check_payouts, expected_payouts
from fgbdt_chain.ledger.audit.signatures import SECP256K1_HALF_N, recover_endorser
from fgbdt_chain.ledger.audit.state import Replay
from fgbdt_chain.ledger.audit.storage import check_storage
from fgbdt_chain.ledger.audit.submissions import split_level_data
from fgbdt_chain.ledger.audit.task import open_task
from fgbdt_chain.ledger.rpc.client import ChainClient

__all__ = [
    "KIND_LEAF",
    "KIND_OPEN",
    "KIND_SPLIT",
    "SECP256K1_HALF_N",
    "STATUS_COMPLETED",
    "STATUS_TRAINING",
    "AuditCounts",
    "AuditError",
    "AuditInput",
    "AuditReport",
    "ChainState",
    "Mismatch",
    "NodeState",
    "SubmitCall",
    "audit_chain",
    "audit_events",
    "expected_payouts",
    "find_submit_calls",
    "read_state",
    "read_task",
    "recover_endorser",
    "split_level_data",
    "submit_abi",
]


def audit_events(inp: AuditInput) -> AuditReport:
    """Replay a task's record and recompute it with the reference; the first mismatch, or OK with counts.

    Raises :class:`AuditError` when the task does not exist or has not started (nothing to audit)."""
    events = EventIndex(inp.events)
    replay: Replay | None = None
    try:
        replay = Replay(inp, open_task(inp, events), events)
        replay_levels(replay)
        check_payouts(replay)
        if inp.state is not None:
            check_storage(replay, inp.state)
    except Found as found:
        counts, completed = (replay.counts, replay.completed) if replay is not None else (AuditCounts(), False)
        return AuditReport(False, str(found.mismatch), counts, found.mismatch, completed)
    return AuditReport(True, None, replay.counts, None, replay.completed, replay.pending, replay.task.privacy())


def audit_chain(client: ChainClient, address: str, task_id: int, block: int | None = None) -> AuditReport:
    """Read a task from the chain and audit it (see :func:`read_task` and :func:`audit_events`)."""
    return audit_events(read_task(client, address, task_id, block))
