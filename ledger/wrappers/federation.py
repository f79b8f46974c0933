"""Drive one tree level of a task through the contract: votes, top-2, endorsed histograms, resolution.

Why: the party nodes, the tests and the gas bench all run the same step sequence; keeping it in one place means the
order of calls (and which parties are skipped after a deadline) is defined once. The histogram source is a callback,
so a real party plugs in its data and a test or benchmark plugs in :class:`RowSource`, synthetic rows summed into
histograms that keep the contract's exact rules.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from eth_account.signers.local import LocalAccount

from fgbdt_chain.ledger.rpc.client import Event, TxResult
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.reference import NEUTRAL, Credit, NodeHistograms
from fgbdt_chain.ledger.spec.reference import endorsement_quorum as quorum
from fgbdt_chain.ledger.wrappers.contracts import Phase, TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder, vote_request_gas

HistogramSource = Callable[[str, int, tuple[int, int]], NodeHistograms]
"""(party address, node id, candidate features) -> the party's histograms of that node."""
CreditSource = Callable[[str, str], Credit]
"""(endorser address, party address) -> the credit the endorser attests for the party's level."""


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
    credit: CreditSource | None = None,
    endorsers: Sequence[LocalAccount] | None = None,
    taken: Mapping[str, Sequence[int]] | None = None,
    ahead: Mapping[str, Sequence[int]] | None = None,
    ahead_root: Mapping[str, Sequence[int]] | None = None,
    relay: bool = False,
) -> LevelOutcome:
    """Run the current level. ``parties`` are the parties taking part, in party order; ``silent_*`` ones do not send
    that step, so the driver mines past the deadline before closing it (a party silent once takes no further part).
    ``resolve_batch`` > 1 resolves that many nodes per ``resolveNodes`` transaction instead of one ``resolveNode``
    each; 0 leaves the level unresolved (for tests of the resolution itself). ``credit`` says what each endorser
    attests (neutral by default); the first ``quorum`` other approved parties among ``endorsers`` (default:
    ``parties``) endorse. ``taken``: the ballots the level took when it opened from votes sent ahead
    (``reference.ahead_ballot``), whose parties do not vote again; ``ahead``: votes to send ahead for the next level
    (two per open node), once the histograms closed and before the resolution; ``ahead_root``: likewise, the next
    tree's root (one vote each), taken if the level ends the tree. ``relay``: the votes sent ahead go as the
    parties' signed requests in one ``executeBatch`` of the trusted forwarder, sent by ``resolver`` (as the party
    nodes relay them: ``node.party.relay``)."""
    st = task.state(task_id)
    tree, level, open_nodes = st.tree, st.level, st.open_nodes()
    cfg = task.config(task_id)
    out = LevelOutcome(tree, level, open_nodes, {}, [], [], {}, {})
    if ref.draws(tree, cfg.voted_trees):  # no vote round: the level opened with its candidates fixed
        # every party taking part is counted as the voter of an empty ballot, which is what the reference sees
        out.voters = [p.address for p in parties]
        out.votes = {p.address: [ref.ABSTAIN] * len(open_nodes) for p in parties}
        for nd in open_nodes:
            rec = task.node(task_id, tree, nd)
            out.candidates[nd] = (rec.cand0, rec.cand1)
    else:
        taken = taken or {}
        for p in parties:
            if p.address in taken:
                out.voters.append(p.address)
                out.votes[p.address] = list(taken[p.address])
                continue
            if p.address in silent_votes:
                continue
            out.txs.append(task.submit_votes(p, task_id, tree, level, votes[p.address]))
            out.voters.append(p.address)
            out.votes[p.address] = list(votes[p.address])
        if task.state(task_id).phase == Phase.VOTING:  # not closed by a last vote: some party was silent
            _mine_past(task, task_id)
            out.txs.append(task.close_step(resolver, task_id))
        fixed = out.txs[-1].events_named("CandidatesFixed") if out.txs else []
        for ev in fixed:
            out.candidates[int(ev.args["node"])] = (int(ev.args["first"]), int(ev.args["second"]))
        if not fixed:  # every ballot came ahead: the transaction that opened the level fixed them
            for nd in open_nodes:
                rec = task.node(task_id, tree, nd)
                out.candidates[nd] = (rec.cand0, rec.cand1)
    approved = task.parties(task_id)
    need = quorum(len(approved), cfg.quorum_num, cfg.quorum_den)
    accounts: dict[str, LocalAccount] = {str(p.address): p for p in (endorsers or parties)}
    for p in parties:
        if p.address not in out.voters or p.address in silent_hists:
            continue
        hists = [source(p.address, node, out.candidates[node]) for node in open_nodes]
        endorsers = [accounts[a] for a in approved if a != p.address and a in accounts][:need]
        endorsements = [
            task.endorse(q, task_id, tree, level, p.address, hists, credit(q.address, p.address) if credit else NEUTRAL)
            for q in endorsers
        ]
        sent = task.submit_histograms(p, task_id, tree, level, hists, endorsements)
        out.txs.extend([*sent.parts, sent])
        out.submitters.append(p.address)
        out.hists[p.address] = hists
    if task.state(task_id).phase == Phase.HISTOGRAMS:  # not closed by a last submission: some voter was silent
        _mine_past(task, task_id)
        out.txs.append(task.close_step(resolver, task_id))
    level_hists = [out.hists[a] for a in out.submitters]
    sent_ahead: list[tuple[LocalAccount, int, int, list[int]]] = []
    for p in parties:
        if ahead is not None and p.address in ahead:
            sent_ahead.append((p, tree, level + 1, list(ahead[p.address])))
        if ahead_root is not None and p.address in ahead_root:
            sent_ahead.append((p, tree + 1, 0, list(ahead_root[p.address])))
    if relay and sent_ahead:
        out.txs.append(relay_votes(task, task_id, resolver, sent_ahead))
    else:
        for p, t, lv, ballot in sent_ahead:
            out.txs.append(task.submit_votes(p, task_id, t, lv, ballot))
    for i in range(0, len(open_nodes) if resolve_batch else 0, max(1, resolve_batch)):
        batch = open_nodes[i : i + resolve_batch]
        if resolve_batch == 1:
            res = task.resolve_node(resolver, task_id, batch[0], open_nodes, level_hists)
        else:
            res = task.resolve_nodes(resolver, task_id, batch, open_nodes, level_hists)
        out.resolutions.update(dict.fromkeys(batch, res))
        out.txs.append(res)
    return out


def relay_votes(
    task: TaskContract, task_id: int, relayer: LocalAccount, ballots: Sequence[tuple[LocalAccount, int, int, list[int]]]
) -> TxResult:
    """Each (party, tree, level, votes) as the party's signed ``submitVotes`` request, all relayed by ``relayer`` in
    one ``executeBatch`` of the forwarder ``task`` trusts."""
    fwd = Forwarder.of(task)
    signed = []
    for p, t, lv, votes in ballots:
        data = bytes.fromhex(task.client.encode_call(task.contract, "submitVotes", (task_id, t, lv, votes))[2:])
        req = fwd.build(p.address, task.address, data, gas=vote_request_gas(len(votes)))
        signed.append((req, fwd.sign(p, req)))
    return fwd.execute_batch(relayer, signed)


def _mine_past(task: TaskContract, task_id: int) -> None:
    deadline = task.state(task_id).step_deadline
    current = task.client.block_number
    if current <= deadline:
        task.client.mine(deadline - current + 1)


class RowSource:
    """Every party's synthetic rows (bin slots and labels), summed into the histograms a party would send.

    Why rows rather than random histograms: the contract refuses histograms that break an exact rule (equal
    candidate totals, children's totals equal to the parent's side sums, the logistic bounds, the first tree's
    score-0 identities), and only sums of real rows, routed along the splits the chain made, keep them all. Every
    row's score starts at 0 and moves by the leaf values the chain set (its ``LeafSet`` events), so that each root is
    what the party's previous tree allows (``ledger.spec.tree_carry``, the verifiers' carry rule).
    """

    def __init__(
        self,
        rng: random.Random,
        parties: Sequence[str],
        rows: int,
        features: int,
        nbins: int,
        objective: ref.ObjectiveName = "binary",
    ) -> None:
        gen = np.random.default_rng(rng.randrange(1 << 30))
        self.gen = gen
        self.nbins = nbins
        self.objective = objective
        """The loss the rows' gradients are of: binary logistic (0/1 labels) or squared error (labels in [0, 1])."""
        self.slots = {a: gen.integers(0, nbins, (rows, features)) for a in parties}
        # labels that follow the first two features, so that splits have gains to find
        latent = {a: (s[:, 0] + s[:, 1] + gen.normal(0, nbins / 3, rows)) for a, s in self.slots.items()}
        if objective == "binary":
            self.y = {a: (v > nbins).astype(np.float64) for a, v in latent.items()}
        else:  # within [0, 1]: the task's label range, its label scale 1
            self.y = {a: np.clip(v / (4 * nbins), 0.0, 1.0) for a, v in latent.items()}
        self.tree = -1
        self.score = {a: np.zeros(s.shape[0]) for a, s in self.slots.items()}
        self.leaves: dict[int, int] = {}
        self.node: dict[str, np.ndarray] = {}
        self.g: dict[str, list[int]] = {}
        self.h: dict[str, list[int]] = {}

    def start_tree(self, tree: int) -> None:
        """Every row at the root, with the tree's (g, h) quantised once per row."""
        self.tree = tree
        for a, y in self.y.items():
            if a in self.node:  # the finished tree's leaf values, each row by the leaf it reached
                self.score[a] = self.score[a] + np.array([self.leaves.get(int(nd), 0) for nd in self.node[a]]) / ref.ONE
            if self.objective == "binary":
                p: np.ndarray = 1.0 / (1.0 + np.exp(-self.score[a]))
                self.g[a] = [ref.to_fixed(float(v)) for v in p - y]
                self.h[a] = [ref.to_fixed(float(v)) for v in p * (1 - p)]
            else:
                self.g[a] = [ref.to_fixed(float(v)) for v in self.score[a] - y]
                self.h[a] = [ref.ONE] * y.shape[0]
            self.node[a] = np.ones(y.shape[0], dtype=np.int64)
        self.leaves = {}

    def __call__(self, party: str, node: int, features: tuple[int, int]) -> NodeHistograms:
        nb = self.nbins
        g = [[0] * nb for _ in range(2)]
        h = [[0] * nb for _ in range(2)]
        n = [[0] * nb for _ in range(2)]
        for i in np.flatnonzero(self.node[party] == node).tolist():
            for k, f in enumerate(features):
                b = int(self.slots[party][i, f])
                g[k][b] += self.g[party][i]
                h[k][b] += self.h[party][i]
                n[k][b] += 1
        return NodeHistograms(features, tuple(map(tuple, g)), tuple(map(tuple, h)), tuple(map(tuple, n)))

    def follow(self, out: LevelOutcome) -> None:
        """Route the rows along the splits the chain made at ``out``'s level (its ``NodeSplit`` events)."""
        for res in {id(r): r for r in out.resolutions.values()}.values():
            for ev in res.events_named("NodeSplit"):
                self.split(int(ev.args["node"]), int(ev.args["feature"]), int(ev.args["threshold"]))
            for ev in res.events_named("LeafSet"):
                self.set_leaf(int(ev.args["node"]), int(ev.args["value"]))

    def set_leaf(self, node: int, value: int) -> None:
        """Record a leaf value of the current tree: its rows' scores move by it when the next tree starts."""
        self.leaves[node] = value

    def split(self, node: int, feature: int, threshold: int) -> None:
        """Route the rows of ``node`` to its children (slots up to the threshold go left)."""
        for a, ids in self.node.items():
            at = ids == node
            ids[at] = 2 * node + (self.slots[a][at, feature] > threshold)
