"""Whole tasks through the contract, compared with ``ledger.spec.reference`` node by node and party by party."""

from __future__ import annotations

import dataclasses
import random

import pytest
from chain_helpers import (
    Federation,
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
from fgbdt_chain.ledger.spec.edges import decode_edges
from fgbdt_chain.ledger.spec.reference import ONE, NodeHistograms
from fgbdt_chain.ledger.wrappers.chain_model import model_from_chain
from fgbdt_chain.ledger.wrappers.contracts import Phase, Status, TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.federation import run_level
from fgbdt_chain.node.party.following import candidates_block

pytestmark = pytest.mark.chain


def test_table3_through_the_contract(chain: ChainClient, task_contract: TaskContract) -> None:
    """Table 3 (the paper's worked example) end to end: two parties, one split level, lambda 0, hessian = count,
    abstaining votes (so the candidates are features 0 and 1 in that order by the lower-index tie rule). Squared
    error, so that each bin's hessian is its count (the exact rules); both candidates hold the same bins, and rank 0
    wins the tie."""
    cfg = TaskConfig(
        trees=1,
        depth=1,
        bins=2,
        hessian_mode=1,
        tie_break=0,
        objective=1,
        lam=0,
        min_rows=1,
        min_parties=2,
        max_parties=2,
    )
    fed = open_task(chain, task_contract, cfg, 2, num_features=2)
    counts = (0, 10, 10)
    h = (0, 10 * ONE, 10 * ONE)

    def table3(scale: int) -> dict[str, NodeHistograms]:
        g1, g2 = (0, 1 * ONE, 2 * ONE), (0, -scale * ONE, scale * ONE)
        h1 = NodeHistograms((0, 1), (g1, g1), (h, h), (counts, counts))
        h2 = NodeHistograms((0, 1), (g2, g2), (h, h), (counts, counts))
        return {fed.parties[0].address: h1, fed.parties[1].address: h2}

    hists = table3(1)
    out = run_level(
        fed.task,
        fed.task_id,
        fed.parties,
        {p.address: [-1] for p in fed.parties},
        lambda a, node, feats: hists[a],
        fed.resolver,
    )
    ev = out.resolutions[1].event("ContributionsAdded").args
    assert tuple(ev["phi"]) == (375 * ONE // 1000, 75 * ONE // 1000)
    rec = fed.task.node(fed.task_id, 0, 1)
    assert (rec.kind, rec.feature, rec.threshold, rec.value) == (2, 0, 1, 450 * ONE // 1000)
    assert fed.task.contribution(fed.task_id, fed.parties[0].address) == 375 * ONE // 1000
    assert fed.task.contribution(fed.task_id, fed.parties[1].address) == 75 * ONE // 1000
    assert fed.task.state(fed.task_id).status == Status.COMPLETED
    # the 1 ETH reward splits 0.375 : 0.075, i.e. 5/6 and 1/6, truncated to the wei; the remainder to the requester
    owed = [fed.task.owed(fed.task_id, p.address) for p in fed.parties]
    assert owed == [833_333_333_333_333_333, 166_666_666_666_666_666]
    assert fed.task.owed(fed.task_id, fed.requester.address) == 1
    assert sum(owed) + fed.task.owed(fed.task_id, fed.requester.address) == 10**18

    # the doubled variant, as a second task on the same deployment
    fed2 = open_task(chain, task_contract, cfg, 2, num_features=2)
    doubled = table3(2)
    hists = {q.address: doubled[p.address] for p, q in zip(fed.parties, fed2.parties, strict=True)}
    out = run_level(
        fed2.task,
        fed2.task_id,
        fed2.parties,
        {p.address: [-1] for p in fed2.parties},
        lambda a, node, feats: hists[a],
        fed2.resolver,
    )
    assert tuple(out.resolutions[1].event("ContributionsAdded").args["phi"]) == (275 * ONE // 1000, 575 * ONE // 1000)
    assert fed2.task.node(fed2.task_id, 0, 1).value == 850 * ONE // 1000


def _check_chain_model(task: TaskContract, task_id: int, cfg: TaskConfig, edge_bins: int) -> None:
    """The model rebuilt from the task's events is the one in the contract's node records, which the chain keeps for
    the last two trees: an earlier tree's record reads as unknown once the tree two after it reopened its slot (the
    root always), so the state does not grow with the model."""
    model = model_from_chain(task, task_id)
    assert len(model.trees) == cfg.trees and model.edges == decode_edges(edges_for(edge_bins))
    for t, tree in enumerate(model.trees):
        for nid, node in tree.nodes.items():
            rec = task.node(task_id, t, nid)
            if t + 2 < cfg.trees and (nid == 1 or rec.kind == 0):
                assert rec == type(rec)(*[0] * 10)  # not kept: no stale field of another tree shows
                continue
            assert rec.tree == t
            if node.is_leaf:
                assert (rec.kind, rec.value) == (3, node.value_fixed)
            else:
                expected = (2, node.feature, node.threshold, node.gain_fixed)
                assert (rec.kind, rec.feature, rec.threshold, rec.value) == expected


def _train(
    chain: ChainClient,
    task: TaskContract,
    cfg: TaskConfig,
    m: int,
    seed: int,
    silent: dict,
    resolve_batch: int = 1,
    rows_per_party: int = 60,
    edge_bins: int | None = None,
) -> tuple[list[int], Federation]:
    """Train a whole task with random votes and the histograms of random rows, checking every level, the payouts
    and the audit's replay against the reference; returns the number of open nodes of each level, and the task. A
    party silent once takes no further part (continuity), but still endorses the others."""
    eb = cfg.bins if edge_bins is None else edge_bins  # the value bins the edges use: histograms are eb + 1 wide
    fed = open_task(chain, task, cfg, m, num_features=5, reward=3 * 10**18, edges=edges_for(eb))
    rng = random.Random(seed)
    replay = Replay(params_of(cfg), cfg.depth)
    rows = RowSource(rng, [p.address for p in fed.parties], rows_per_party, fed.num_features, eb + 1)
    taking_part = list(fed.parties)
    step = 0
    widths: list[int] = []
    while fed.task.state(fed.task_id).status == Status.TRAINING:
        st = fed.task.state(fed.task_id)
        if st.level == 0:
            rows.start_tree(st.tree)
        nodes = st.open_nodes()
        votes = random_votes(rng, taking_part, len(nodes), fed.num_features)
        sv, sh = silent.get(step, ((), ()))
        out = run_level(
            fed.task,
            fed.task_id,
            taking_part,
            votes,
            rows,
            fed.resolver,
            silent_votes={fed.parties[i].address for i in sv},
            silent_hists={fed.parties[i].address for i in sh},
            resolve_batch=resolve_batch,
            endorsers=fed.parties,
        )
        replay.level(out, rows)
        taking_part = [p for p in fed.parties if p.address in out.submitters]
        widths.append(len(out.open_nodes))
        assert_level_matches(fed, replay, out)
        step += 1
    assert step >= 2
    _check_chain_model(fed.task, fed.task_id, cfg, eb)
    # the submissions' roots read from the events' heads alone are the decoded events' roots
    submitted = fed.task.client.logs(fed.task.contract, ["HistogramsSubmitted"], fed.task_id)
    decoded = {(str(e.args["party"]), int(e.args["tree"]), int(e.args["level"])): e.args["root"] for e in submitted}
    decoded = {k: bytes(v) for k, v in decoded.items()}
    assert fed.task.submitted_roots(fed.task_id, 0) == decoded and len(decoded) >= step
    # who sent which level's votes and histograms, read from the heads alone, is what the decoded events say
    names = ["VotesSubmitted", "HistogramsSubmitted", "HistogramsDeclined"]
    full = fed.task.client.logs(fed.task.contract, names, fed.task_id)
    heads = fed.task.sent(fed.task_id, names, 0)
    assert [(s.name, s.party, s.tree, s.level, s.block_number, s.log_index) for s in heads] == [
        (e.name, str(e.args["party"]), int(e.args["tree"]), int(e.args["level"]), e.block_number, e.log_index)
        for e in full
    ]
    assert {s.name for s in heads} >= {"HistogramsSubmitted"}
    with pytest.raises(ValueError, match="LevelStarted"):
        fed.task.sent(fed.task_id, ["LevelStarted"], 0)
    for p in fed.parties:
        assert fed.task.contribution(fed.task_id, p.address) == replay.contributions.get(p.address, 0)
    # paid on completion: the parties of the last step are paid, a party silent once forfeits to the requester
    finished = [p.address in out.submitters for p in fed.parties]
    due = ref.payouts([replay.contributions.get(p.address, 0) for p in fed.parties], finished, 3 * 10**18)
    assert [fed.task.owed(fed.task_id, p.address) for p in fed.parties] == list(due.paid)
    assert fed.task.owed(fed.task_id, fed.requester.address) == due.requester
    audit = audit_events(read_task(chain, task.address, fed.task_id))
    assert audit.ok and audit.completed, audit.first_mismatch
    return widths, fed


def test_training_matches_reference(chain: ChainClient, task_contract: TaskContract) -> None:
    """Four parties, second-order hessians, a silent voter and a silent sender on the way; two trees of depth 3."""
    cfg = TaskConfig(trees=2, depth=3, bins=4, min_parties=4, max_parties=4, lam=ONE, min_rows=3, step_blocks=5)
    _train(chain, task_contract, cfg, 4, seed=7, silent={0: ((), (0,)), 1: ((2,), ())})


def test_training_count_mode_many_parties(anvil_client: ChainClient) -> None:
    """Seven parties, hessian = count, lambda 0, the lower-index tie rule (anvil only: more transactions)."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    cfg = TaskConfig(
        trees=1,
        depth=3,
        bins=6,
        hessian_mode=1,
        tie_break=0,
        lam=0,
        min_parties=7,
        max_parties=7,
        min_rows=2,
        alpha=ONE,
    )
    _train(anvil_client, task, cfg, 7, seed=11, silent={0: ((), (6,))}, resolve_batch=4)


def test_deep_tree_wide_levels(anvil_client: ChainClient) -> None:
    """Depth 5: wide levels, Merkle proofs of 4 hashes, padded when a level's width is not a power of two; nodes
    resolved three per ``resolveNodes`` (a level's last batch is shorter)."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    cfg = TaskConfig(trees=1, depth=5, bins=5, min_parties=3, max_parties=3, min_rows=4, lam=ONE // 2)
    widths, _ = _train(anvil_client, task, cfg, 3, seed=23, silent={}, resolve_batch=3, rows_per_party=200)
    assert len(widths) == 5 and max(widths) > 8
    assert any(w & (w - 1) for w in widths), widths  # some level needs zero-leaf padding


def test_histograms_are_as_wide_as_the_edges_need(anvil_client: ChainClient) -> None:
    """A task of 8 bins whose edges use 3 value bins: ``start`` takes 4 slots from the encoding's header, every
    submission and resolution carries 4-slot histograms, and the levels, payouts, model and audit still equal the
    reference's; histograms of the configured 9 slots are refused by their length."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    cfg = TaskConfig(trees=1, depth=3, bins=8, min_parties=3, max_parties=3, lam=ONE, min_rows=3, step_blocks=5)
    _train(anvil_client, task, cfg, 3, seed=13, silent={}, edge_bins=3)
    fed = open_task(anvil_client, task, cfg, 3, num_features=5, edges=edges_for(3))
    for p in fed.parties:
        fed.task.submit_votes(p, fed.task_id, 0, 0, [0])
    wide = RowSource(random.Random(1), [p.address for p in fed.parties], 20, 5, cfg.bins + 1)
    wide.start_tree(0)
    rec = fed.task.node(fed.task_id, 0, 1)
    hist = wide(fed.parties[0].address, 1, (rec.cand0, rec.cand1))
    assert len(hist.g[0]) == 9
    reverts("LengthMismatch", fed.task.submit_histograms, fed.parties[0], fed.task_id, 0, 0, [hist], [])


def test_drawn_candidates_match_reference(chain: ChainClient, task_contract: TaskContract) -> None:
    """``votedTrees`` 1: the first tree votes, the second draws, with no vote round (its levels open in their
    histogram step, candidates fixed to the reference's ``drawn_candidates``) and no voting contribution even at alpha
    1; a silent sender is out for good; every level, contribution and payout equals the reference's."""
    cfg = TaskConfig(
        trees=2,
        depth=3,
        bins=4,
        voted_trees=1,
        min_parties=3,
        max_parties=3,
        lam=ONE,
        min_rows=3,
        alpha=ONE,
        step_blocks=5,
    )
    _, fed = _train(chain, task_contract, cfg, 3, seed=5, silent={1: ((), (2,))})
    record = read_task(chain, task_contract.address, fed.task_id)
    votes = [e for e in record.events if e.name in ("VotesSubmitted", "VotingClosed")]
    assert votes and {int(e.args["tree"]) for e in votes} == {0}
    kappa = [int(x) for e in record.events if e.name == "ContributionsAdded" for x in e.args["kappa"]]
    assert any(kappa) and all(
        int(x) == 0
        for e in record.events
        if e.name == "ContributionsAdded" and int(e.args["tree"]) == 1
        for x in e.args["kappa"]
    )
    # a candidate other than the draw is a mismatch the audit names
    events = list(record.events)
    i = next(i for i, e in enumerate(events) if e.name == "CandidatesFixed" and int(e.args["tree"]) == 1)
    ev = events[i]
    events[i] = dataclasses.replace(ev, args={**ev.args, "second": (int(ev.args["second"]) + 1) % fed.num_features})
    m = audit_events(dataclasses.replace(record, events=events)).mismatch
    assert m is not None and m.field == "candidates (drawn from the public seed)", m


def test_node_records_are_kept_for_the_last_two_trees(anvil_client: ChainClient) -> None:
    """Four trees: the contract's node records of trees 0 and 1 give way to trees 2 and 3 (the state does not grow
    with the model), while the model, contributions, payouts and the audit still hold (``_train`` checks them)."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    cfg = TaskConfig(trees=4, depth=2, bins=4, min_parties=3, max_parties=3, lam=ONE, min_rows=3, step_blocks=5)
    _, fed = _train(anvil_client, task, cfg, 3, seed=11, silent={})
    assert fed.task.node(fed.task_id, 0, 1).kind == 0 and fed.task.node(fed.task_id, 1, 1).kind == 0
    assert (fed.task.node(fed.task_id, 2, 1).tree, fed.task.node(fed.task_id, 3, 1).tree) == (2, 3)


@pytest.mark.parametrize("edge_bins", [4, 2])
def test_a_root_leaf_counts_its_rows_after_its_record_is_gone(anvil_client: ChainClient, edge_bins: int) -> None:
    """No root can split (min_rows above every party's rows together): each tree is one leaf, whose row count the
    model takes from the contract's root record while it is kept, and from the accepted level-0 histograms after,
    read at the task's histogram width (4 bins' edges: 5 slots; 2 bins' edges in a task of 4 bins: 3)."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    cfg = TaskConfig(trees=3, depth=1, bins=4, min_parties=3, max_parties=3, lam=ONE, min_rows=10**6, step_blocks=5)
    _, fed = _train(anvil_client, task, cfg, 3, seed=12, silent={}, rows_per_party=40, edge_bins=edge_bins)
    assert fed.task.node(fed.task_id, 0, 1).kind == 0  # tree 0's root slot was reopened by tree 2
    model = model_from_chain(task, fed.task_id)
    assert [sorted(t.nodes) for t in model.trees] == [[1], [1], [1]]
    assert [t.nodes[1].count for t in model.trees] == [3 * 40] * 3


def test_the_audit_of_a_task_in_training_reads_the_current_trees_records(anvil_client: ChainClient) -> None:
    """Mid-task, in the vote of tree 2's root: no event names tree 2's nodes yet, but its root already took tree 0's
    slot. The audit compares the records of the trees the chain keeps (the current one by ``getState``, and the one
    before), so it passes; reading which trees are kept from the events would have compared tree 0's root."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    cfg = TaskConfig(trees=4, depth=1, bins=4, min_parties=3, max_parties=3, lam=ONE, min_rows=3, step_blocks=5)
    fed = open_task(anvil_client, task, cfg, 3, num_features=5)
    rng = random.Random(13)
    rows = RowSource(rng, [p.address for p in fed.parties], 60, fed.num_features, cfg.bins + 1)
    while (st := task.state(fed.task_id)).tree < 2:
        rows.start_tree(st.tree)
        votes = random_votes(rng, fed.parties, len(st.open_nodes()), fed.num_features)
        rows.follow(run_level(task, fed.task_id, fed.parties, votes, rows, fed.resolver))
    assert (st.tree, st.level) == (2, 0) and task.node(fed.task_id, 0, 1).kind == 0
    audit = audit_events(read_task(anvil_client, task.address, fed.task_id))
    assert audit.ok and not audit.completed, audit.first_mismatch


@pytest.mark.parametrize("voted_trees", [1, 0])
def test_the_candidates_are_fixed_in_the_block_the_state_names(anvil_client: ChainClient, voted_trees: int) -> None:
    """``following.candidates_block``: in the histogram step, the candidates' events are in the block of the step's
    deadline minus ``stepBlocks``, whether the last vote fixed them (a voted tree) or the level's opening (drawn)."""
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    cfg = TaskConfig(trees=1, depth=2, bins=3, voted_trees=voted_trees, min_parties=3, max_parties=3, step_blocks=9)
    fed = open_task(anvil_client, task, cfg, 3)
    assert candidates_block(task.state(fed.task_id), cfg.step_blocks) == (
        None if voted_trees else fed.task.client.block_number
    )
    if voted_trees:
        anvil_client.mine(2)  # the votes come some blocks after the level opened
        for p in fed.parties:
            task.submit_votes(p, fed.task_id, 0, 0, [1])
    st = task.state(fed.task_id)
    block = candidates_block(st, cfg.step_blocks)
    assert block is not None and st.phase == Phase.HISTOGRAMS
    fixed = task.client.logs(task.contract, ["CandidatesFixed"], fed.task_id, block, block)
    assert [int(e.args["node"]) for e in fixed] == st.open_nodes() == [1]
    assert [e.block_number for e in task.client.logs(task.contract, ["CandidatesFixed"], fed.task_id)] == [block]
