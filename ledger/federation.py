"""Drive one tree level of a task through the contract: votes, top-2, endorsed histograms, resolution.

Why: the party nodes, the tests and the gas bench all run the same step sequence; keeping it in one place means the
order of calls (and which parties are skipped after a deadline) is defined once. The histogram source is a callback,
so a real party plugs in its data and a test plugs in random histograms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from eth_account.signers.local import LocalAccount

from ledger.client import Event, TxResult
from ledger.contracts import Phase, TaskContract
from ledger.reference import NodeHistograms

HistogramSource = Callable[[str, int, tuple[int, int]], NodeHistograms]
"""(party address, node id, candidate features) -> the party's histograms of that node."""


@dataclass
class LevelOutcome:
    """What happened at one level."""

    tree: int
    level: int
    open_nodes: list[int]
    candidates: dict[int, tuple[int, int]]
    voters: list[str]
    submitters: list[str]
    hists: dict[str, list[NodeHistograms]]
    votes: dict[str, list[int]]
    txs: list[TxResult] = field(default_factory=list)
    resolutions: dict[int, TxResult] = field(default_factory=dict)
    """The transaction that resolved each node (one may resolve several)."""

    def node_event(self, node: int, name: str) -> Event:
        """The event ``name`` of ``node``'s resolution."""
        for ev in self.resolutions[node].events_named(name):
            if int(ev.args["node"]) == node:
                return ev
        raise KeyError(f"{name} of node {node}")


def quorum(parties: int, num: int = 2, den: int = 3) -> int:
    """Endorsements a histogram transaction needs: ceil(num (M - 1) / den)."""
    return math.ceil(num * (parties - 1) / den)


def run_level(
    task: TaskContract,
    task_id: int,
    parties: Sequence[LocalAccount],
    votes: Mapping[str, Sequence[int]],
    source: HistogramSource,
    resolver: LocalAccount,
    silent_votes: Collection[str] = (),
    silent_hists: Collection[str] = (),
    resolve_batch: int = 1,
) -> LevelOutcome:
    """Run the current level. ``parties`` are the approved parties in party order; ``silent_*`` ones do not send
    that step, so the driver mines past the deadline before closing it. ``resolve_batch`` > 1 resolves that many
    nodes per ``resolveNodes`` transaction instead of one ``resolveNode`` each; 0 leaves the level unresolved (for
    tests of the resolution itself)."""
    st = task.state(task_id)
    tree, level, open_nodes = st.tree, st.level, st.open_nodes()
    cfg = task.config(task_id)
    out = LevelOutcome(tree, level, open_nodes, {}, [], [], {}, {})
    for p in parties:
        if p.address in silent_votes:
            continue
        out.txs.append(task.submit_votes(p, task_id, tree, level, votes[p.address]))
        out.voters.append(p.address)
        out.votes[p.address] = list(votes[p.address])
    if len(out.voters) < len(parties):
        _mine_past(task, task_id)
    closed = task.close_voting(resolver, task_id)
    out.txs.append(closed)
    for ev in closed.events_named("CandidatesFixed"):
        out.candidates[int(ev.args["node"])] = (int(ev.args["first"]), int(ev.args["second"]))
    need = quorum(len(parties), cfg.quorum_num, cfg.quorum_den)
    for p in parties:
        if p.address not in out.voters or p.address in silent_hists:
            continue
        hists = [source(p.address, node, out.candidates[node]) for node in open_nodes]
        endorsers = [q for q in parties if q.address != p.address][:need]
        sigs = [task.endorse(q, task_id, tree, level, p.address, hists) for q in endorsers]
        out.txs.append(task.submit_histograms(p, task_id, tree, level, hists, sigs))
        out.submitters.append(p.address)
        out.hists[p.address] = hists
    if task.state(task_id).phase == Phase.HISTOGRAMS:
        if len(out.submitters) < len(out.voters):
            _mine_past(task, task_id)
        out.txs.append(task.close_histograms(resolver, task_id))
    level_hists = [out.hists[a] for a in out.submitters]
    for i in range(0, len(open_nodes) if resolve_batch else 0, max(1, resolve_batch)):
        batch = open_nodes[i : i + resolve_batch]
        if resolve_batch == 1:
            res = task.resolve_node(resolver, task_id, batch[0], open_nodes, level_hists)
        else:
            res = task.resolve_nodes(resolver, task_id, batch, open_nodes, level_hists)
        out.resolutions.update(dict.fromkeys(batch, res))
        out.txs.append(res)
    return out


def _mine_past(task: TaskContract, task_id: int) -> None:
    deadline = task.state(task_id).step_deadline
    current = task.client.block_number
    if current <= deadline:
        task.client.mine(deadline - current + 1)
