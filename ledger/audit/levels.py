"""The replay of the task's levels, tree by tree, in the order the contract ran them: each level's start, its
candidates (``ledger.audit.votes``), every histogram submission (``ledger.audit.submissions``, checked against the
rules of ``ledger.audit.rules``), the close, and each node's resolution (``ledger.audit.resolution``).

Why in order: each step's rules read what the steps before established (continuity, side sums, credits, the carry),
and a level that is still running ends the replay with where training stands.
"""

from __future__ import annotations

from typing import Any

from fgbdt_chain.ledger.audit.record import KIND_OPEN, NodeState, changed, checksum
from fgbdt_chain.ledger.audit.report import by_deadline, fail, one
from fgbdt_chain.ledger.audit.resolution import resolve
from fgbdt_chain.ledger.audit.rules import check_rules
from fgbdt_chain.ledger.audit.state import Replay
from fgbdt_chain.ledger.audit.submissions import committed_words, submission
from fgbdt_chain.ledger.audit.votes import Round, ahead_not_taken, drawn_round, vote_round
from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec import reference as ref


def replay_levels(rp: Replay) -> None:
    """Every level that started, in order; sets ``rp.completed`` after the last tree's last level, or ``rp.pending``
    to where training stands. An event outside the replayed levels is a mismatch."""
    starts = rp.events.named("LevelStarted")
    tree, level, open_nodes = 0, 0, [1]
    previous: list[int] = []  # the open nodes of the level before in the same tree (none at a root)
    inherited: dict[tuple[int, int], ref.Totals] = {}
    i = 0
    while True:
        where = {"tree": tree, "level": level}
        if i >= len(starts):
            rp.pending = f"tree {tree}, level {level} not started"
            if rp.events.named("TaskCompleted"):
                fail("LevelStarted before TaskCompleted", f"level {level} of tree {tree}", "none", **where)
            break
        st = starts[i]
        i += 1
        got = (int(st.args["tree"]), int(st.args["level"]), int(st.args["openMask"]))
        base = 1 << level
        mask = sum(1 << (nd - base) for nd in open_nodes)
        if got != (tree, level, mask):
            fail("LevelStarted (tree, level, openMask)", (tree, level, mask), got, **where)
        if level == 0:
            rp.counts.trees += 1
        for nd in open_nodes:
            rp.nodes.setdefault((tree, nd), NodeState(tree=tree))
            rp.nodes[(tree, nd)] = changed(rp.nodes[(tree, nd)], kind=KIND_OPEN)
        nxt = replay_level(rp, tree, level, open_nodes, previous, st, inherited)
        if not nxt:  # no next level of the tree (yet, or ever): what was sent ahead for it is held unused
            ahead_not_taken(rp, tree, level + 1, open_nodes)
        if nxt is None:  # the level is still running: nothing after it may exist but ballots sent ahead
            ahead_not_taken(rp, tree + 1, 0, [])
            if i < len(starts):
                fail("a complete level before the next LevelStarted", "resolved level", "incomplete", **where)
            break
        rp.counts.levels += 1
        if nxt:
            level, previous, open_nodes = level + 1, open_nodes, nxt
        elif tree + 1 < rp.task.trees:
            tree, level, previous, open_nodes = tree + 1, 0, [], [1]
        else:
            if i < len(starts):
                fail("no level after the last tree", "TaskCompleted", "LevelStarted", tree=tree + 1)
            rp.completed = True
            break
    leftovers = rp.events.untaken()
    if leftovers:
        t, x, name = leftovers[0]
        fail(f"{name} event outside the replayed levels", "none", f"tree {t}, level/node {x}")


def replay_level(
    rp: Replay,
    tree: int,
    level: int,
    open_nodes: list[int],
    previous: list[int],
    started: Event,
    inherited: dict[tuple[int, int], ref.Totals],
) -> list[int] | None:
    """Check one level (``previous``: the open nodes of the level before in its tree); the next level's open nodes,
    or None while the level is still in progress."""
    task, events = rp.task, rp.events
    where: dict[str, Any] = {"tree": tree, "level": level}
    progress = f"tree {tree}, level {level}"
    step = task.cfg["stepBlocks"]
    if int(started.args["deadline"]) != started.block_number + step:
        want = started.block_number + step
        fail("first step's deadline (block + stepBlocks)", want, started.args["deadline"], **where)
    found: Round | None
    if ref.draws(tree, task.cfg.get("votedTrees", ref.ALL_TREES_VOTED)):
        found = drawn_round(rp, tree, level, open_nodes, started, where)
    else:
        found = vote_round(rp, tree, level, open_nodes, previous, started, where, progress)
    if found is None:
        return None
    votes, cands, deadline = found
    # histograms and endorsements
    hists: dict[str, list[ref.NodeHistograms]] = {}
    committed: dict[str, list[Event]] = {}
    for ev in events.take_level(tree, level, "HistogramsCommitted"):
        committed.setdefault(checksum(ev.args["party"]), []).append(ev)
    for ev in events.take_level(tree, level, "HistogramsSubmitted"):
        party = checksum(ev.args["party"])
        w = {**where, "party": party}
        if party not in votes:
            fail("histogram sender voted at this level", "a voter", party, **w)
        if party in hists:
            fail("one histogram submission per party", 1, 2, **w)
        by_deadline("histograms", ev.block_number, deadline, w)
        prefix = committed_words(rp, committed.get(party, []), ev, deadline, w)
        hists[party] = submission(rp, ev, prefix, tree, level, open_nodes, cands, party)
        check_rules(task, hists[party], tree, level, open_nodes, party, rp.sides.get(party, {}))
        if level == 0:
            rp.carry.check(hists[party][0], tree, party)
        rp.carry.record(tree, party, open_nodes, hists[party])
        rp.counts.histograms += 1
    declined: set[str] = set()
    for ev in events.take_level(tree, level, "HistogramsDeclined"):
        party = checksum(ev.args["party"])
        w = {**where, "party": party}
        if party not in votes or party in hists or party in declined:
            fail("a voter declines once, instead of submitting", "a voter without histograms", party, **w)
        by_deadline("decline", ev.block_number, deadline, w)
        declined.add(party)
    hclosed = one("HistogramsClosed", events.take_level(tree, level, "HistogramsClosed"), **where)
    if hclosed is None:
        rp.pending = f"{progress}, histograms open"
        return None
    rp.last_closed = (hclosed.block_number, hclosed.log_index)
    if int(hclosed.args["submitters"]) != len(hists):
        fail("HistogramsClosed submitters", len(hists), int(hclosed.args["submitters"]), **where)
    mask = sum(1 << i for i, p in enumerate(task.parties) if p in hists)
    if int(hclosed.args["submitterMask"]) != mask:
        fail("HistogramsClosed submitter mask", bin(mask), bin(int(hclosed.args["submitterMask"])), **where)
    if len(hists) + len(declined) < len(votes) and hclosed.block_number <= deadline:
        fail(
            "histograms closed after their deadline or with every voter submitted or declined",
            "later block",
            hclosed.block_number,
            **where,
        )
    # resolution
    accepted = [p for p in task.parties if p in hists]
    rp.active = set(accepted)
    rp.sides = {p: {} for p in accepted}
    last = level == task.depth - 1
    nxt: list[int] = []
    unresolved: list[int] = []
    for j, nd in enumerate(open_nodes):
        # anyone resolves, in any order: an unresolved node does not stop the checks of its resolved siblings
        split = resolve(rp, tree, level, nd, j, accepted, hists, votes, inherited, last)
        if split is None:
            unresolved.append(nd)
        elif split and not last:
            nxt.extend((2 * nd, 2 * nd + 1))
    if unresolved:
        rp.pending = f"{progress}, nodes {unresolved} unresolved"
        return None
    return nxt
