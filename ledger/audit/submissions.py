"""A party's histogram submission: the parts committed before it, the Merkle commitment of the level's data, the
``submitHistograms`` call that carried it and that call's endorsements and credit.

Why the call is searched for: the signatures and the attested credits are only in the transaction's input, which may
be a direct call or a relayed one, so the submission is matched by task, tree, level and data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eth_utils import keccak

from fgbdt_chain.ledger.audit.record import SubmitCall, tx_key
from fgbdt_chain.ledger.audit.report import Found, Mismatch, by_deadline, fail
from fgbdt_chain.ledger.audit.signatures import check_endorsements, least_credit
from fgbdt_chain.ledger.audit.state import Replay
from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.encoding import block_histograms, endorsement_digest, merkle_root, words


def node_words(nbins: int) -> int:
    """Words of one node's block in a level's data: g, h and n of two candidates, ``nbins`` bins each."""
    return 6 * nbins


def split_level_data(data: Sequence[int], open_nodes: int, nbins: int) -> list[list[int]] | None:
    """A level's ``submitHistograms`` data cut into per-node blocks of ``6 * nbins`` words (None: wrong length)."""
    width = node_words(nbins)
    if len(data) != open_nodes * width:
        return None
    return [list(data[i * width : (i + 1) * width]) for i in range(open_nodes)]


def committed_words(
    rp: Replay, parts: list[Event], submitted: Event, deadline: int, where: dict[str, Any]
) -> list[int]:
    """The words a party committed in ``commitHistograms`` parts before its submission, checked as the contract
    takes them: in order, each from the node after the last, before the submission and the deadline."""
    width = node_words(rp.task.nbins)
    words_: list[int] = []
    for ev in parts:
        if int(ev.args["first"]) != len(words_) // width:
            fail("committed part's first node", len(words_) // width, ev.args["first"], **where)
        if (ev.block_number, ev.log_index) > (submitted.block_number, submitted.log_index):
            fail("histogram parts before the submission", submitted.block_number, ev.block_number, **where)
        by_deadline("histogram parts", ev.block_number, deadline, where)
        words_.extend(int(x) for x in ev.args["data"])
    return words_


def submission(
    rp: Replay,
    ev: Event,
    prefix: list[int],
    tree: int,
    level: int,
    open_nodes: list[int],
    cands: dict[int, tuple[int, int]],
    party: str,
) -> list[ref.NodeHistograms]:
    """Commitment (data vs root) and endorsements (signatures from the transaction input) of one submission, whose
    level starts with the ``prefix`` words committed in parts; its histograms, one per open node."""
    where: dict[str, Any] = {"tree": tree, "level": level, "party": party}
    nbins = rp.task.nbins
    final = [int(x) for x in ev.args["data"]]
    data = prefix + final
    blocks = split_level_data(data, len(open_nodes), nbins)
    if blocks is None:
        fail("histogram data length", len(open_nodes) * node_words(nbins), len(data), **where)
    root = merkle_root([keccak(words(b)) for b in blocks])
    if bytes(ev.args["root"]) != root:
        fail("histogram commitment (Merkle root of the data)", root, bytes(ev.args["root"]), **where)
    candidates = _calls(rp, ev, tree, level, final)
    if not candidates:
        fail("submitHistograms call in the transaction input", f"tx {ev.tx_hash} carrying this data", "none", **where)

    def digest(credit: ref.Credit) -> bytes:
        return endorsement_digest(rp.inp.chain_id, rp.contract, rp.inp.task_id, tree, level, party, root, credit)

    # Several calls with this data in one transaction (a batch, or decoy bytes in a wrapper's input) cannot be told
    # apart without a trace: the submission is accepted when any of them carries a valid endorsement set.
    first: Mismatch | None = None
    recorded = int(ev.args["endorsements"])
    for call in candidates:
        found = check_endorsements(call, digest, party, rp.task.party_set, rp.task.quorum, recorded, where)
        if found is None:
            rp.counts.signatures += len(call.signatures)
            credit = least_credit(call.credits)
            credited = tuple(int(x) for x in ev.args["credit"])
            if credited != (credit.g, credit.h, credit.n):
                fail("credit (least of the endorsements')", (credit.g, credit.h, credit.n), credited, **where)
            if level == 0:
                rp.credits[party] = credit
            break
        first = first or found
    else:
        assert first is not None
        raise Found(first)
    return [block_histograms(b, cands[nd], nbins) for b, nd in zip(blocks, open_nodes, strict=True)]


def _calls(rp: Replay, ev: Event, tree: int, level: int, data: list[int]) -> list[SubmitCall]:
    """The decoded calls of the event's transaction that carry this task's level and this data."""
    return [
        call
        for call in rp.inp.calls.get(tx_key(ev.tx_hash), [])
        if (call.task_id, call.tree, call.level) == (rp.inp.task_id, tree, level) and list(call.data) == data
    ]
