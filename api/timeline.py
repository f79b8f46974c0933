"""A task's training as it happened, level by level, from the contract's events: the dashboard's timeline.

Why a window of trees: a task of 500 trees of depth 6 has 3,500 levels and its histogram events are megabytes, so
the timeline is read for a few trees at a time, the block range of those trees only (their first ``LevelStarted``
to the next tree's), and the histogram events by their fixed words (``ChainClient.log_heads``: party, endorsements)
without decoding the histograms themselves. Who was refused and why is read by ``api.refusals``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fgbdt_chain.api import dashboard_models as m
from fgbdt_chain.api.models import from_fixed
from fgbdt_chain.api.refusals import contract_refusals, refusal, silent, verifier_refusal
from fgbdt_chain.ledger.rpc.client import Event, LogHead
from fgbdt_chain.ledger.spec.reference import draws
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract, level_nodes
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder

SMALL_EVENTS = ("LevelStarted", "VotesSubmitted", "VotingClosed", "HistogramsDeclined", "HistogramsClosed")
NODE_EVENTS = ("NodeSplit", "LeafSet", "CandidatesFixed")
HISTOGRAM_EVENTS = ("HistogramsSubmitted", "HistogramsCommitted")
ENDORSEMENTS_WORD = 3
"""``HistogramsSubmitted``'s data words: tree, level, root, endorsements, credit[3], then the histograms."""


@dataclass
class _Level:
    """One level while its events are gathered."""

    tree: int
    level: int
    started: int
    deadline: int
    open_nodes: list[int]
    voters: list[str] = field(default_factory=list)
    voting_closed: int | None = None
    submissions: list[m.Submission] = field(default_factory=list)
    declined: list[str] = field(default_factory=list)
    closed: int | None = None
    submitters: list[str] | None = None
    nodes: list[m.NodeOutcome] = field(default_factory=list)
    last_block: int = 0
    refusals: list[m.Refusal] = field(default_factory=list)


def _key(args: dict[str, Any]) -> tuple[int, int]:
    return int(args["tree"]), int(args["level"])


def timeline(
    task: TaskContract, task_id: int, from_tree: int, trees: int, forwarder: Forwarder | None = None
) -> m.Timeline:
    """Trees ``from_tree .. from_tree + trees - 1`` of ``task_id``, one entry per level that started; refusals
    relayed through ``forwarder`` are read there too."""
    cfg = task.config(task_id)
    client = task.client
    parties = task.parties(task_id)
    to_tree = min(from_tree + trees, cfg.trees)
    every = client.logs(task.contract, ["LevelStarted"], task_id)
    starts = [e for e in every if from_tree <= int(e.args["tree"])]
    window = [e for e in starts if int(e.args["tree"]) < to_tree]
    levels: dict[tuple[int, int], _Level] = {}
    if window:
        first = window[0].block_number
        after = next((e.block_number for e in starts if int(e.args["tree"]) >= to_tree), None)
        last: int | str = after if after is not None else "latest"
        small = client.logs(task.contract, [*SMALL_EVENTS, *NODE_EVENTS], task_id, first, last)
        heads = client.log_heads(task.contract, list(HISTOGRAM_EVENTS), task_id, ENDORSEMENTS_WORD + 1, first, last)
        for ev in small:
            if ev.name == "LevelStarted" and from_tree <= int(ev.args["tree"]) < to_tree:
                tree, level = _key(ev.args)
                levels[(tree, level)] = _Level(
                    tree,
                    level,
                    ev.block_number,
                    int(ev.args["deadline"]),
                    level_nodes(level, int(ev.args["openMask"])),
                    last_block=ev.block_number,
                )
        _gather(levels, small, heads, parties)
        before = every[: every.index(window[0])]
        taking_part = _taking_part_before(task, task_id, parties, before, first)
        _refusals(task, forwarder, task_id, cfg, parties, sorted(levels.values(), key=_order), taking_part)
    return m.Timeline(
        task_id=task_id,
        trees=cfg.trees,
        depth=cfg.depth,
        from_tree=from_tree,
        to_tree=to_tree,
        parties=parties,
        levels=[_entry(lv) for lv in sorted(levels.values(), key=_order)],
    )


def _order(lv: _Level) -> tuple[int, int]:
    return lv.tree, lv.level


def _taking_part_before(
    task: TaskContract, task_id: int, parties: list[str], before: list[Event], first: int
) -> set[str]:
    """The parties still taking part when the window's first level starts: every party at the task's first level,
    else the submitters of the level before it (read from its blocks only)."""
    if not before:
        return set(parties)
    closed = task.client.logs(task.contract, ["HistogramsClosed"], task_id, before[-1].block_number, first)
    if not closed:
        return set(parties)
    mask = int(closed[-1].args["submitterMask"])
    return {p for i, p in enumerate(parties) if (mask >> i) & 1}


def _refusals(
    task: TaskContract,
    forwarder: Forwarder | None,
    task_id: int,
    cfg: TaskConfig,
    parties: list[str],
    levels: list[_Level],
    taking_part: set[str],
) -> None:
    """Each level's refused parties with their reasons (``api.refusals``): those that declined, and once a step
    closed, those taking part that sent nothing in it (a voted level's votes, then its voters' histograms)."""
    for lv in levels:
        voted = not draws(lv.tree, cfg.voted_trees)
        gone: dict[str, tuple[str, str]] = {p: ("declined", "") for p in lv.declined}
        if voted and lv.voting_closed is not None:
            for p in sorted(taking_part - set(lv.voters), key=parties.index):
                gone.setdefault(p, ("silent", silent("votes", lv.voting_closed)))
        sent = {s.party for s in lv.submissions} | set(lv.declined)
        if lv.closed is not None:
            expected = set(lv.voters) if voted else taking_part
            for p in sorted(expected - sent, key=parties.index):
                gone.setdefault(p, ("silent", silent("histograms", lv.closed)))
        if gone:
            end = lv.closed if lv.closed is not None else lv.last_block
            found = contract_refusals(task, forwarder, task_id, (lv.tree, lv.level), gone, lv.started, end)
            for p, (kind, why) in gone.items():
                if p in found:
                    lv.refusals.append(refusal(p, kind, found[p][0], "contract", found[p][1]))
                elif kind == "declined":
                    reason = verifier_refusal(len(parties), cfg.quorum_num, cfg.quorum_den)
                    lv.refusals.append(refusal(p, kind, reason, "verifiers"))
                else:
                    lv.refusals.append(refusal(p, kind, why, None))
        if lv.submitters is not None:
            taking_part = set(lv.submitters)


def _gather(
    levels: dict[tuple[int, int], _Level], small: list[Event], heads: list[LogHead], parties: list[str]
) -> None:
    """Each event into its level (node events into the level of their node's depth)."""
    for ev in small:
        a = ev.args
        if ev.name in NODE_EVENTS:
            node = int(a["node"])
            lv = levels.get((int(a["tree"]), node.bit_length() - 1))
            if lv is None and ev.name == "LeafSet":  # a leaf at the depth limit is set as its parent's level resolves
                lv = levels.get((int(a["tree"]), node.bit_length() - 2))
            if lv is None:
                continue
            lv.last_block = max(lv.last_block, ev.block_number)
            if ev.name == "NodeSplit":
                lv.nodes.append(
                    m.NodeOutcome(
                        node=node,
                        kind="split",
                        feature=int(a["feature"]),
                        threshold=int(a["threshold"]),
                        gain=from_fixed(int(a["gain"])),
                    )
                )
            elif ev.name == "LeafSet":
                lv.nodes.append(m.NodeOutcome(node=node, kind="leaf", value=from_fixed(int(a["value"]))))
            else:
                lv.nodes.append(
                    m.NodeOutcome(node=node, kind="candidates", candidates=[int(a["first"]), int(a["second"])])
                )
            continue
        if ev.name == "LevelStarted":
            continue
        lv = levels.get(_key(a))
        if lv is None:
            continue
        lv.last_block = max(lv.last_block, ev.block_number)
        if ev.name == "VotesSubmitted":
            lv.voters.append(str(a["party"]))
        elif ev.name == "VotingClosed":
            lv.voting_closed = ev.block_number
        elif ev.name == "HistogramsDeclined":
            lv.declined.append(str(a["party"]))
        elif ev.name == "HistogramsClosed":
            lv.closed = ev.block_number
            mask = int(a["submitterMask"])
            lv.submitters = [p for i, p in enumerate(parties) if (mask >> i) & 1]
    for h in heads:
        tree, level = (int.from_bytes(w, "big") for w in h.words[:2])
        lv = levels.get((tree, level))
        if lv is None:
            continue
        party = "0x" + h.topics[2][-20:].hex()
        party = next((p for p in parties if p.lower() == party), party)
        lv.last_block = max(lv.last_block, h.block_number)
        if h.name == "HistogramsSubmitted":
            endorsements = int.from_bytes(h.words[ENDORSEMENTS_WORD], "big")
            lv.submissions.append(m.Submission(party=party, block=h.block_number, endorsements=endorsements))
        elif not any(s.party == party for s in lv.submissions):  # a wide level's first parts, before its last
            lv.submissions.append(m.Submission(party=party, block=h.block_number, endorsements=None))


def _entry(lv: _Level) -> m.TimelineLevel:
    return m.TimelineLevel(
        tree=lv.tree,
        level=lv.level,
        started_block=lv.started,
        deadline=lv.deadline,
        open_nodes=lv.open_nodes,
        voters=lv.voters,
        voting_closed_block=lv.voting_closed,
        submissions=lv.submissions,
        declined=lv.refusals,
        closed_block=lv.closed,
        submitters=lv.submitters,
        nodes=sorted(lv.nodes, key=lambda n: (n.node, n.kind)),
        blocks=lv.last_block - lv.started + 1,
    )
