"""A level's candidates: the vote round and its top-2, or the candidates drawn from the public seed, and the ballots
sent ahead with the level before's resolution.

Why the ballots sent ahead need their own rules: a party may send the next level's ballot while the level before
resolves (``submitVotes`` ahead), before it knows which nodes open, so the ballot holds two votes per node of the
level before and the contract takes those of the nodes that opened (``reference.ahead_ballot``); a ballot for a
level that never opens is held unused, and must still be one the contract takes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from fgbdt_chain.ledger.audit.record import changed
from fgbdt_chain.ledger.audit.report import by_deadline, fail, one
from fgbdt_chain.ledger.audit.state import Replay
from fgbdt_chain.ledger.audit.task import Task
from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec import reference as ref


class Round(NamedTuple):
    """What a level's candidate round fixed: each voter's ballot (one vote per open node), each open node's two
    candidate features, and the deadline of the histogram step."""

    votes: dict[str, list[int]]
    candidates: dict[int, tuple[int, int]]
    deadline: int


def vote_round(
    rp: Replay,
    tree: int,
    level: int,
    open_nodes: list[int],
    previous: list[int],
    started: Event,
    where: dict[str, Any],
    progress: str,
) -> Round | None:
    """The vote round of a level with voted candidates: every ballot, the close, the top-2; None while voting is
    open. A ballot sent ahead (before the level started, while the level before resolved) holds two votes per node
    of ``previous`` and counts as the votes of the nodes that opened, as the contract takes it. At a root
    (``previous`` empty) it is the root's one vote, counted if it was sent while the tree before resolved its last
    level (after ``last_closed``); one sent at an earlier level of that tree is held unused."""
    task = rp.task
    k = len(open_nodes)
    step = task.cfg["stepBlocks"]
    first_deadline = int(started.args["deadline"])
    votes: dict[str, list[int]] = {}
    for ev in rp.events.take_level(tree, level, "VotesSubmitted"):
        party = rp.approved_voter(ev, where)
        w = {**where, "party": party}
        at = (ev.block_number, ev.log_index)
        early = at < (started.block_number, started.log_index)
        if early and not previous and (rp.last_closed is None or at < rp.last_closed):
            # a root's ballot sent ahead while an earlier level of the tree before resolved (the tree went on):
            # held unused, and the party votes in the round
            ahead_ballot(task, ev, previous, w)
            continue
        if party in votes:
            fail("one vote set per party", 1, 2, **w)
        if rp.active is not None and party not in rp.active:
            fail("voter took part in the previous step (continuity)", "a party taking part", party, **w)
        vs = [int(v) for v in ev.args["votes"]]
        if early:
            vs = ref.ahead_ballot(ahead_ballot(task, ev, previous, w), previous, open_nodes)
            rp.counts.ahead_sets += 1
        if len(vs) != k:
            fail("number of votes", k, len(vs), **w)
        for j, v in enumerate(vs):
            if not task.is_vote(v):
                fail("vote is a feature or -1", task.vote_range, v, node=open_nodes[j], **w)
        by_deadline("vote", ev.block_number, first_deadline, w)
        votes[party] = vs
        rp.counts.vote_sets += 1
    closed = one("VotingClosed", rp.events.take_level(tree, level, "VotingClosed"), **where)
    if closed is None:
        rp.pending = f"{progress}, voting open"
        return None
    if int(closed.args["voters"]) != len(votes):
        fail("VotingClosed voters", len(votes), int(closed.args["voters"]), **where)
    if len(votes) < len(rp.taking_part()) and closed.block_number <= first_deadline:
        fail("voting closed after its deadline or with every vote", "later block", closed.block_number, **where)
    if int(closed.args["deadline"]) != closed.block_number + step:
        fail("histogram deadline (block + stepBlocks)", closed.block_number + step, closed.args["deadline"], **where)
    voters = [p for p in task.parties if p in votes]
    cands = {
        nd: fix_candidates(
            rp,
            tree,
            nd,
            ref.top2([votes[p][j] for p in voters], task.num_features, task.tie_break, tree, nd),
            "candidates (top-2 of the votes)",
            where,
        )
        for j, nd in enumerate(open_nodes)
    }
    return Round(votes, cands, int(closed.args["deadline"]))


def drawn_round(
    rp: Replay, tree: int, level: int, open_nodes: list[int], started: Event, where: dict[str, Any]
) -> Round:
    """A level with drawn candidates: no vote round (a vote or a close is a mismatch), each node's candidates fixed
    as the level opened to ``reference.drawn_candidates``. The parties taking part count as voters of empty ballots
    (no voting contribution), and the level's first deadline is its histogram deadline."""
    for name in ("VotesSubmitted", "VotingClosed"):
        if rp.events.take_level(tree, level, name):
            fail("no vote round with drawn candidates", "none", name, **where)
    votes = {p: [ref.ABSTAIN] * len(open_nodes) for p in rp.taking_part()}
    cands = {
        nd: fix_candidates(
            rp,
            tree,
            nd,
            ref.drawn_candidates(rp.task.num_features, tree, nd),
            "candidates (drawn from the public seed)",
            where,
            opened=started.block_number,
        )
        for nd in open_nodes
    }
    return Round(votes, cands, int(started.args["deadline"]))


def ahead_not_taken(rp: Replay, tree: int, level: int, previous: list[int]) -> None:
    """Ballots sent ahead for a level that never opened (the level before made no split) or has not opened yet (the
    level before is resolving; ``previous`` empty: the next tree's root): the contract holds them unused; each must
    be a ballot the contract takes ahead (:func:`ahead_ballot`) from an approved party."""
    for ev in rp.events.take_level(tree, level, "VotesSubmitted"):
        where = {"tree": tree, "level": level}
        party = rp.approved_voter(ev, where)
        ahead_ballot(rp.task, ev, previous, {**where, "party": party})


def ahead_ballot(task: Task, ev: Event, previous: list[int], where: dict[str, Any]) -> list[int]:
    """A ballot sent ahead as the contract takes it: two votes per node of ``previous``, or one for a root
    (``previous`` empty), each a feature or -1 (it refuses the whole ballot otherwise). Its votes. (Who sent it is
    checked by the caller, as for any ballot.)"""
    vs = [int(v) for v in ev.args["votes"]]
    want = 2 * len(previous) if previous else 1
    if len(vs) != want:
        fail("number of votes sent ahead (two per node of the level before, one at a root)", want, len(vs), **where)
    bad = [v for v in vs if not task.is_vote(v)]
    if bad:
        fail("vote sent ahead is a feature or -1", task.vote_range, bad[0], **where)
    return vs


def fix_candidates(
    rp: Replay,
    tree: int,
    nd: int,
    want: tuple[int, int],
    what: str,
    where: dict[str, Any],
    opened: int | None = None,
) -> tuple[int, int]:
    """The node's one ``CandidatesFixed`` against the candidates it must fix (``what`` names the rule); with
    ``opened``, also fixed in the block that opened the level (drawn candidates). Records them on the node."""
    w = {**where, "node": nd}
    fixed = one("CandidatesFixed", rp.events.take_node(tree, nd, "CandidatesFixed"), **w)
    if fixed is None:
        fail("CandidatesFixed", want, "none", **w)
    if opened is not None and fixed.block_number != opened:
        fail("drawn candidates fixed as the level opens", opened, fixed.block_number, **w)
    got = (int(fixed.args["first"]), int(fixed.args["second"]))
    if got != want:
        fail(what, want, got, **w)
    rp.nodes[(tree, nd)] = changed(rp.nodes[(tree, nd)], cand0=want[0], cand1=want[1])
    return want
