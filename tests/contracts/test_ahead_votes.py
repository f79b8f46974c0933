"""Votes sent ahead: while a level resolves, a party whose histograms it accepted votes on the
next level of the tree, two votes per open node (one per child); when that level opens, the votes of its nodes are
the party's ballot, and when every party taking part sent one, the transaction that opens the level closes its
voting too. Every level is compared with the reference, and the audit replays the task."""

from __future__ import annotations

import random
from typing import Any

import pytest
from chain_helpers import (
    Replay,
    RowSource,
    assert_level_matches,
    edges_for,
    open_task,
    params_of,
    random_votes,
    reverts,
)

from fgbdt_chain.ledger.audit.replay import audit_events, read_task
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.wrappers.contracts import Phase, Status, TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.federation import run_level
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder, ForwardRequest, histogram_request_gas, vote_request_gas

pytestmark = pytest.mark.chain

CFG = TaskConfig(trees=3, depth=3, bins=4, voted_trees=2, min_parties=3, max_parties=3, lam=ONE, min_rows=2, alpha=ONE)


def _votes_ahead(rng: random.Random, senders: list, nodes: int, features: int) -> dict[str, list[int]]:
    return {p.address: [rng.randint(-1, features - 1) for _ in range(2 * nodes)] for p in senders}


@pytest.mark.parametrize("relay", [False, True], ids=["own", "relayed"])
def test_training_with_votes_sent_ahead_matches_the_reference(anvil_client: ChainClient, relay: bool) -> None:
    """Every party sends ahead at one level, one party of three at the next, in turn: a level whose every ballot
    came ahead opens in its histogram step (one transaction opens it and closes its voting); a level with some
    opens in its vote step and the others vote as before. At a tree's last level the next tree's root goes ahead
    the same way. A drawn tree takes none. Relayed, the votes sent ahead are the parties' signed requests in one
    ``executeBatch`` of the forwarder (``node.party.relay``), each within the gas it grants. Candidates, splits,
    contributions and payouts equal the reference's, and the audit finds the chain consistent."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**23))
    fed = open_task(anvil_client, task, CFG, 3, num_features=5, reward=3 * 10**18, edges=edges_for(CFG.bins))
    tid, nf = fed.task_id, fed.num_features
    rng = random.Random(7)
    replay = Replay(params_of(CFG), CFG.depth)
    rows = RowSource(rng, [p.address for p in fed.parties], 60, nf, CFG.bins + 1)
    taken: dict[str, list[int]] = {}
    opened = {"closed": 0, "voting": 0, "ballots": 0, "roots": 0}
    turn = 0
    while (st := task.state(tid)).status == Status.TRAINING:
        if st.level == 0:
            rows.start_tree(st.tree)
        nodes = st.open_nodes()
        votes = random_votes(rng, fed.parties, len(nodes), nf)
        inner = st.level + 1 < CFG.depth and not ref.draws(st.tree, CFG.voted_trees)
        senders = fed.parties if turn % 2 == 0 else fed.parties[1:2]
        ahead = _votes_ahead(rng, senders, len(nodes), nf) if inner else None
        # at a tree's last level, the next tree's root (if it votes)
        root_next = not inner and st.tree + 1 < CFG.trees and not ref.draws(st.tree + 1, CFG.voted_trees)
        ahead_root = {p.address: [rng.randint(-1, nf - 1)] for p in senders} if root_next else None
        out = run_level(
            task,
            tid,
            fed.parties,
            votes,
            rows,
            fed.resolver,
            taken=taken,
            ahead=ahead,
            ahead_root=ahead_root,
            relay=relay,
        )
        if relay and (ahead or ahead_root):
            batches = [tx for tx in out.txs if tx.function == "executeBatch"]
            assert len(batches) == 1
            at = out.txs.index(batches[0])  # the level's own votes come before it, none after
            assert not [tx for tx in out.txs[at:] if tx.function == "submitVotes"]
            executed = batches[0].events_named("ExecutedForwardRequest")
            assert [bool(ev.args["success"]) for ev in executed] == [True] * len(senders)
            sent = batches[0].events_named("VotesSubmitted")
            assert [str(ev.args["party"]) for ev in sent] == [p.address for p in senders]
        elif ahead or ahead_root:
            # each ballot sent ahead cost less than a relayed request grants it (the transaction's 21,000 apart)
            sent_ahead = [tx for tx in out.txs if tx.function == "submitVotes"][-len(senders) :]
            size = 2 * len(nodes) if ahead else 1
            assert all(tx.gas_used - 21_000 <= vote_request_gas(size) for tx in sent_ahead)
        # each submission cost less than a relayed request grants it (node.relay)
        for tx in out.txs:
            if tx.function == "submitHistograms":
                assert tx.gas_used - 21_000 <= histogram_request_gas(len(nodes), CFG.bins + 1, 2)
        turn += 1
        replay.level(out, rows)
        assert_level_matches(fed, replay, out)
        after = task.state(tid)
        taken = {}
        if ahead_root and after.status == Status.TRAINING and (after.tree, after.level) == (st.tree + 1, 0):
            taken = {a: ref.ahead_ballot(v, [], [1]) for a, v in ahead_root.items()}
            opened["roots"] += len(taken)
        if ahead and after.status == Status.TRAINING and (after.tree, after.level) == (st.tree, st.level + 1):
            taken = {a: ref.ahead_ballot(v, nodes, after.open_nodes()) for a, v in ahead.items()}
        if taken:
            opened["ballots"] += len(taken)
            opening = out.txs[-1]  # the last resolution
            assert opening.events_named("LevelStarted")
            if len(taken) == len(fed.parties):
                assert after.phase == Phase.HISTOGRAMS and opening.events_named("VotingClosed")
                opened["closed"] += 1
            else:
                assert after.phase == Phase.VOTING and not opening.events_named("VotingClosed")
                opened["voting"] += 1
    assert opened["closed"] >= 1 and opened["voting"] >= 1 and opened["roots"] >= 1, opened
    for p in fed.parties:
        assert task.contribution(tid, p.address) == replay.contributions.get(p.address, 0)
    due = ref.payouts([replay.contributions.get(p.address, 0) for p in fed.parties], [True] * 3, 3 * 10**18)
    assert [task.owed(tid, p.address) for p in fed.parties] == list(due.paid)
    audit = audit_events(read_task(anvil_client, task.address, tid))
    assert audit.ok and audit.completed, audit.first_mismatch
    assert audit.counts.ahead_sets == opened["ballots"]  # the audit counts the ballots the levels took ahead


def _two_level_task(client: ChainClient) -> tuple[TaskContract, Any, random.Random, RowSource]:
    """A started task of three parties, two trees of depth 2, and its rows at the first tree."""
    task = TaskContract.deploy(client, client.new_account(10**23))
    cfg = TaskConfig(trees=2, depth=2, bins=4, min_parties=3, max_parties=3, lam=ONE, min_rows=2, step_blocks=8)
    fed = open_task(client, task, cfg, 3, num_features=5, edges=edges_for(cfg.bins))
    rng = random.Random(3)
    rows = RowSource(rng, [p.address for p in fed.parties], 60, fed.num_features, cfg.bins + 1)
    rows.start_tree(0)
    return task, fed, rng, rows


def test_votes_sent_ahead_are_checked(anvil_client: ChainClient) -> None:
    """Ahead only while the level before resolves, for the next level of the same tree within the depth, two votes
    per open node, once, by a party whose histograms the level accepted; the ballot taken, the party cannot vote on
    the level again. Votes sent ahead of a level that never opens (no split) are not counted at the next root."""
    task, fed, rng, rows = _two_level_task(anvil_client)
    tid, (p0, p1, p2) = fed.task_id, fed.parties
    reverts("WrongStep", task.submit_votes, p0, tid, 0, 1, [0, 0])  # voting on the root: not ahead yet
    # p2 stays silent with its histograms: the root resolves without it
    out = run_level(
        task,
        tid,
        fed.parties,
        random_votes(rng, fed.parties, 1, 5),
        rows,
        fed.resolver,
        silent_hists={p2.address},
        resolve_batch=0,
    )
    assert task.state(tid).phase == Phase.RESOLVING
    reverts("Excluded", task.submit_votes, p2, tid, 0, 1, [0, 0])
    reverts("LengthMismatch", task.submit_votes, p0, tid, 0, 1, [0])
    reverts("InvalidVote", task.submit_votes, p0, tid, 0, 1, [0, 5])
    reverts("WrongStep", task.submit_votes, p0, tid, 0, 2, [0, 0])
    reverts("WrongStep", task.submit_votes, p0, tid, 2, 0, [0])  # a root ahead is the next tree's only
    reverts("LengthMismatch", task.submit_votes, p1, tid, 1, 0, [0, 0])  # a root ahead holds one vote
    task.submit_votes(p0, tid, 0, 1, [3, 4])
    reverts("AlreadyVoted", task.submit_votes, p0, tid, 0, 1, [1, 1])
    reverts("AlreadyVoted", task.submit_votes, p0, tid, 1, 0, [1])  # one ballot ahead per step, of either form
    # p1 guesses that the root ends the tree: its root ballot for tree 1 is held, and not taken when level 1 opens
    task.submit_votes(p1, tid, 1, 0, [0])
    # the audit of the task in progress holds the ballot sent ahead of a level not open yet (a review found it
    # reported a mismatch there)
    audit = audit_events(read_task(anvil_client, task.address, tid))
    assert audit.ok and not audit.completed, audit.first_mismatch
    opening = task.resolve_node(fed.resolver, tid, 1, [1], [out.hists[a] for a in out.submitters])
    out.resolutions[1] = opening
    rows.follow(out)
    st = task.state(tid)
    assert (st.tree, st.level, st.phase) == (0, 1, Phase.VOTING), "p1 sent nothing ahead: voting stays open"
    split = opening.events_named("NodeSplit")
    assert split, "the root split (the rows are chosen to split it)"
    reverts("AlreadyVoted", task.submit_votes, p0, tid, 0, 1, [2, 2])  # its ballot was taken when the level opened
    reverts("Excluded", task.submit_votes, p2, tid, 0, 1, [2, 2])
    closed = task.submit_votes(p1, tid, 0, 1, [1, 1])
    assert int(closed.event("VotingClosed").args["voters"]) == 2
    # p0's ballot is [3, 4] for nodes 2 and 3, p1's [1, 1]: one vote each, features 1 before 3 and 4 by count tie
    for node, mine in zip((2, 3), (3, 4), strict=True):
        rec = task.node(tid, 0, node)
        assert (rec.cand0, rec.cand1) == ref.top2([mine, 1], 5, fed.cfg.tie_break, 0, node)
    # the last level of the tree: nothing may be sent ahead past the depth
    hists = run_level(
        task,
        tid,
        [p0, p1],
        {},
        rows,
        fed.resolver,
        taken={p0.address: [3, 4], p1.address: [1, 1]},
        resolve_batch=0,
        endorsers=fed.parties,
    )
    assert task.state(tid).phase == Phase.RESOLVING
    reverts("WrongPhase", task.submit_votes, p0, tid, 0, 2, [0, 0, 0, 0])
    assert hists.submitters == [p0.address, p1.address]
    reverts("LengthMismatch", task.submit_votes, p1, tid, 1, 0, [0, 0])
    reverts("Excluded", task.submit_votes, p2, tid, 1, 0, [0])
    # p0 sends the next tree's root ahead; p1 does not, and its root ballot of the step before is not counted
    task.submit_votes(p0, tid, 1, 0, [2])
    level_hists = [hists.hists[a] for a in hists.submitters]
    for node in hists.open_nodes:
        opening = task.resolve_node(fed.resolver, tid, node, hists.open_nodes, level_hists)
        hists.resolutions[node] = opening
    rows.follow(hists)
    st = task.state(tid)
    assert (st.tree, st.level, st.phase) == (1, 0, Phase.VOTING), "p1 voted on the root only ahead of level 1"
    assert opening.events_named("LevelStarted") and not opening.events_named("VotingClosed")
    reverts("AlreadyVoted", task.submit_votes, p0, tid, 1, 0, [4])  # its root ballot was taken when the tree opened
    closed = task.submit_votes(p1, tid, 1, 0, [1])
    assert int(closed.event("VotingClosed").args["voters"]) == 2
    rec = task.node(tid, 1, 1)
    assert (rec.cand0, rec.cand1) == ref.top2([2, 1], 5, fed.cfg.tie_break, 1, 1)
    # the last tree: no root ahead past it
    rows.start_tree(1)
    run_level(
        task,
        tid,
        [p0, p1],
        {},
        rows,
        fed.resolver,
        taken={p0.address: [2], p1.address: [1]},
        resolve_batch=0,
        endorsers=fed.parties,
    )
    assert task.state(tid).phase == Phase.RESOLVING
    reverts("WrongPhase", task.submit_votes, p0, tid, 2, 0, [0])
    audit = audit_events(read_task(anvil_client, task.address, tid))
    assert audit.ok and not audit.completed, audit.first_mismatch
    assert audit.counts.ahead_sets == 2  # p0's ballots of level 1 and of tree 1's root; not p1's root of level 1


def test_a_relayed_batch_skips_a_bad_request_and_takes_the_others(anvil_client: ChainClient) -> None:
    """One ``executeBatch`` with a forged request (signed by another party), one whose call reverts (a ballot of the
    wrong length) and a good one: the forged one is skipped (no nonce used, no event), the reverting one fails
    alone, the good one is taken. The level then opens in its vote round, where the party relayed is counted as
    voted and the others vote as before."""
    task, fed, rng, rows = _two_level_task(anvil_client)
    tid, (p0, p1, p2) = fed.task_id, fed.parties
    out = run_level(task, tid, fed.parties, random_votes(rng, fed.parties, 1, 5), rows, fed.resolver, resolve_batch=0)
    fwd = Forwarder.of(task)

    def request(p: Any, votes: list[int], signer: Any = None) -> tuple[ForwardRequest, bytes]:
        data = bytes.fromhex(anvil_client.encode_call(task.contract, "submitVotes", (tid, 0, 1, votes))[2:])
        req = fwd.build(p.address, task.address, data, gas=vote_request_gas(len(votes)))
        return req, fwd.sign(signer or p, req)

    nonces = [fwd.nonce(p.address) for p in fed.parties]
    batch = fwd.execute_batch(fed.resolver, [request(p0, [3, 4]), request(p1, [1, 1], signer=p2), request(p2, [0])])
    executed = {str(ev.args["signer"]): bool(ev.args["success"]) for ev in batch.events_named("ExecutedForwardRequest")}
    assert executed == {p0.address: True, p2.address: False}
    assert [fwd.nonce(p.address) for p in fed.parties] == [nonces[0] + 1, nonces[1], nonces[2] + 1]
    assert [str(ev.args["party"]) for ev in batch.events_named("VotesSubmitted")] == [p0.address]
    opening = task.resolve_node(fed.resolver, tid, 1, [1], [out.hists[a] for a in out.submitters])
    assert opening.events_named("NodeSplit"), "the root split (the rows are chosen to split it)"
    assert task.state(tid).phase == Phase.VOTING
    reverts("AlreadyVoted", task.submit_votes, p0, tid, 0, 1, [2, 2])  # its relayed ballot was taken
    task.submit_votes(p1, tid, 0, 1, [1, 1])
    closed = task.submit_votes(p2, tid, 0, 1, [1, 1])
    assert int(closed.event("VotingClosed").args["voters"]) == 3
