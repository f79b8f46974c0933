"""Every guard of FGBDTChain reverts with its named custom error (decoded by the ledger client)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from chain_helpers import EDGES, Federation, RowSource, edges_for, open_task, random_hist, reverts
from eth_account import Account
from eth_utils import keccak

from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.edges import SLOTS_OFFSET
from fgbdt_chain.ledger.spec.encoding import (
    ENDORSEMENT_DOMAIN_NAME,
    ENDORSEMENT_DOMAIN_VERSION,
    endorsement_digest,
    endorsement_typed_data,
    merkle_root,
    node_block,
    node_hash,
    sign_endorsement,
)
from fgbdt_chain.ledger.spec.reference import ONE, NodeHistograms
from fgbdt_chain.ledger.spec.shapley_estimate import task_seed
from fgbdt_chain.ledger.spec.tx_size import CALLDATA_LIMIT, largest_fitting, widest_resolution_bytes
from fgbdt_chain.ledger.wrappers.contracts import Endorsement, Phase, Status, TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.federation import run_level
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.party.party_node import NodeError, PartyNode

pytestmark = pytest.mark.chain

CFG = TaskConfig(trees=1, depth=1, bins=3, min_parties=3, max_parties=4, step_blocks=20, join_blocks=30)


@pytest.fixture
def fed(chain: ChainClient, task_contract: TaskContract) -> Federation:
    return open_task(chain, task_contract, CFG, 4)


def _hists(fed: Federation, seed: int = 1) -> list[NodeHistograms]:
    return [random_hist(random.Random(seed), (0, 1), CFG.bins + 1)]


def _vote_all(fed: Federation) -> None:
    """Every party votes; the last vote closes the step (``VotingClosed`` in its transaction)."""
    for i, p in enumerate(fed.parties):
        res = fed.task.submit_votes(p, fed.task_id, 0, 0, [0])
        assert bool(res.events_named("VotingClosed")) == (i == len(fed.parties) - 1)
    assert fed.task.state(fed.task_id).phase == Phase.HISTOGRAMS


def test_membership_guards(chain: ChainClient, task_contract: TaskContract) -> None:
    fed = open_task(chain, task_contract, CFG, 2, start=False)
    t, tid, req = fed.task, fed.task_id, fed.requester
    stranger, pending, refused = (chain.new_account(10**19) for _ in range(3))
    t.join(pending, tid, b"psd", "http://p")
    t.join(refused, tid, b"psd", "http://r")
    reverts("AlreadyJoined", t.join, pending, tid, b"psd", "http://p")
    reverts("NotRequester", t.approve, stranger, tid, pending.address)
    reverts("NotPending", t.approve, req, tid, stranger.address)
    t.refuse(req, tid, refused.address)
    reverts("NotPending", t.approve, req, tid, refused.address)
    reverts("NotEnoughParties", t.start, req, tid, EDGES)
    reverts("UnknownTask", t.start, req, tid + 1000, EDGES)
    t.approve(req, tid, pending.address)
    reverts("BinEdgesMismatch", t.start, req, tid, b"")
    reverts("BinEdgesMismatch", t.start, req, tid, EDGES[:10])  # too short to name the histogram slots
    # the slots the encoding's header names must be 3 (the missing slot, two value bins) to bins + 1
    assert reverts("InvalidConfig", t.start, req, tid, edges_for(CFG.bins + 1)).args_[0].rstrip(b"\0") == b"slots"
    low = bytearray(EDGES)
    low[SLOTS_OFFSET : SLOTS_OFFSET + 2] = (2).to_bytes(2, "big")
    reverts("InvalidConfig", t.start, req, tid, bytes(low))
    v1 = EDGES[:4] + b"\x01" + EDGES[5:]  # the format before the header named the slots: bytes 9-10 mean else
    reverts("BinEdgesMismatch", t.start, req, tid, v1)
    reverts("BinEdgesMismatch", t.start, req, tid, b"XXXX" + EDGES[4:])
    t.start(req, tid, edges_for(2))  # 3 slots, the fewest: every feature with one cut
    assert t.state(tid).status == Status.TRAINING
    reverts("NotMember", t.submit_votes, stranger, tid, 0, 0, [0])
    reverts("NotApproved", t.submit_votes, refused, tid, 0, 0, [0])
    reverts("WrongStatus", t.join, stranger, tid, b"psd", "http://s")
    reverts("WrongStatus", t.cancel, req, tid)


def test_join_window_and_party_limit(chain: ChainClient, task_contract: TaskContract) -> None:
    fed = open_task(chain, task_contract, CFG, 4, start=False)
    late = chain.new_account(10**19)
    t = fed.task
    t.join(late, fed.task_id, b"psd", "http://late")
    reverts("PartyLimitReached", t.approve, fed.requester, fed.task_id, late.address)
    chain.mine(CFG.join_blocks + 1)
    reverts("JoinWindowClosed", t.join, chain.new_account(10**19), fed.task_id, b"psd", "http://x")


def test_invalid_config(chain: ChainClient, task_contract: TaskContract) -> None:
    req = chain.new_account(10**19)
    for bad in (
        TaskConfig(depth=9),
        TaskConfig(hessian_mode=2),
        TaskConfig(min_rows=0),
        TaskConfig(max_parties=ref.MAX_PARTIES + 1),
    ):
        reverts("InvalidConfig", task_contract.create_task, req, bad, [0], [ONE])
    reverts("InvalidConfig", task_contract.create_task, req, CFG, [ONE], [0])
    e = reverts("InvalidConfig", task_contract.create_task, req, TaskConfig(depth=0), [0], [ONE])
    assert e.args_ == (b"depth".ljust(32, b"\x00"),)
    e = reverts("InvalidConfig", task_contract.create_task, req, TaskConfig(tie_break=2), [0], [ONE])
    assert e.args_ == (b"tieBreak".ljust(32, b"\x00"),)


def test_a_task_whose_node_cannot_resolve_in_a_transaction_is_refused(
    chain: ChainClient, task_contract: TaskContract
) -> None:
    """The contract refuses what ``tx_size.check_resolution_fits`` refuses, at the same byte count and limit."""
    req = chain.new_account(10**19)
    wide = TaskConfig(depth=8, bins=16, min_parties=2, max_parties=64)
    e = reverts("ResolutionTooLarge", task_contract.create_task, req, wide, [0], [ONE])
    assert e.args_ == (widest_resolution_bytes(64, 16, 8), CALLDATA_LIMIT)
    most = largest_fitting(None, 16, 8)
    reverts("ResolutionTooLarge", task_contract.create_task, req, replace(wide, max_parties=most + 1), [0], [ONE])
    task_contract.create_task(req, replace(wide, max_parties=most), [0], [ONE])
    task_contract.create_task(req, replace(wide, bins=largest_fitting(64, None, 8)), [0], [ONE])


def _seed_of(chain: ChainClient, block: int, task_id: int) -> int:
    """The reference's derivation (``shapley_estimate.task_seed``) from the hash of ``block``."""
    return task_seed(bytes(chain.w3.eth.get_block(block)["hash"]), task_id)


def test_the_shapley_seed_is_a_block_hash_nobody_knew_when_sending(
    chain: ChainClient, task_contract: TaskContract
) -> None:
    """``start`` fixes no seed: the next task transaction, in a later block, derives it from the hash of ``start``'s
    own block, which its sender could not know, once. A seed block whose hash expired unread (256 blocks) is replaced
    by the block of the transaction that finds it so, and the next one fixes the seed from that."""
    cfg = replace(CFG, step_blocks=1000)
    fed = open_task(chain, task_contract, cfg, 3, start=False)
    t = fed.task
    started = t.start(fed.requester, fed.task_id, EDGES)
    assert not started.events_named("ShapleySeedFixed") and t.shapley_seed(fed.task_id) is None
    (ev,) = t.submit_votes(fed.parties[0], fed.task_id, 0, 0, [0]).events_named("ShapleySeedFixed")
    want = _seed_of(chain, started.block_number, fed.task_id)
    assert (int(ev.args["seed"]), int(ev.args["seedBlock"])) == (want, started.block_number)
    assert not t.submit_votes(fed.parties[1], fed.task_id, 0, 0, [0]).events_named("ShapleySeedFixed")  # once
    fixed = t.shapley_seed(fed.task_id)
    assert fixed is not None and (fixed.seed, fixed.seed_block) == (want, started.block_number)

    late = open_task(chain, task_contract, cfg, 3, start=False)
    t.start(late.requester, late.task_id, EDGES)
    chain.mine(300)
    first = t.submit_votes(late.parties[0], late.task_id, 0, 0, [0])
    assert not first.events_named("ShapleySeedFixed")
    (ev,) = t.submit_votes(late.parties[1], late.task_id, 0, 0, [0]).events_named("ShapleySeedFixed")
    want = _seed_of(chain, first.block_number, late.task_id)
    assert (int(ev.args["seed"]), int(ev.args["seedBlock"])) == (want, first.block_number)


def test_the_label_range_is_checked(chain: ChainClient, task_contract: TaskContract) -> None:
    """A binary task's labels are 0 and 1; a regression task's range must be one (every party's PSD splits the
    label over it). A regression range is recorded as given and read back."""
    req = chain.new_account(10**19)
    for bad in (
        TaskConfig(label_max=2 * ONE),
        TaskConfig(label_min=-1),
        TaskConfig(objective=1, label_min=ONE, label_max=0),
    ):
        e = reverts("InvalidConfig", task_contract.create_task, req, bad, [0], [ONE])
        assert e.args_ == (b"label".ljust(32, b"\x00"),)
    cfg = TaskConfig(objective=1, label_min=-3 * ONE, label_max=29 * ONE)
    tid, _ = task_contract.create_task(req, cfg, [0], [ONE])
    assert task_contract.config(tid) == cfg
    # a party whose labels are not in the task's units stops before it joins, saying which and why
    party = chain.new_account(10**19)
    rows = Dataset(np.zeros((3, 1)), np.array([5.0, 290.0, -1.0]), ["x"], "prices.csv")
    with pytest.raises(NodeError, match=r"1 of prices.csv's labels lie outside the task's label range \[-3, 29\]"):
        PartyNode(task_contract, tid, party, rows, "http://p.example", log=lambda _: None)
    inside = Dataset(np.zeros((2, 1)), np.array([-3.0, 29.0]), ["x"])
    assert PartyNode(task_contract, tid, party, inside, "http://p", log=lambda _: None).label_range == (-3.0, 29.0)


def test_drawn_candidates_have_no_vote_round(chain: ChainClient, task_contract: TaskContract) -> None:
    """With drawn candidates the level opens in its histogram step with the candidates fixed: votes revert
    ``WrongPhase`` and closing the step before its deadline ``StepStillOpen``; the histogram step closes early once
    every party taking part sent or declined; a party out of the task (silent once) is refused with ``Excluded``, not
    ``DidNotVote``."""
    cfg = TaskConfig(trees=1, depth=2, bins=3, voted_trees=0, min_parties=3, max_parties=3)
    fed = open_task(chain, task_contract, cfg, 3)
    t, tid = fed.task, fed.task_id
    st = t.state(tid)
    assert (st.phase, st.tree, st.level) == (Phase.HISTOGRAMS, 0, 0)
    rec = t.node(tid, 0, 1)
    assert (rec.cand0, rec.cand1) == ref.drawn_candidates(fed.num_features, 0, 1)
    reverts("WrongPhase", t.submit_votes, fed.parties[0], tid, 0, 0, [0])
    reverts("StepStillOpen", t.close_step, fed.resolver, tid)
    rows = RowSource(random.Random(3), [p.address for p in fed.parties], 40, fed.num_features, cfg.bins + 1)
    rows.start_tree(0)
    out = run_level(t, tid, fed.parties, {}, rows, fed.resolver, silent_hists={fed.parties[2].address}, resolve_batch=1)
    assert out.submitters == [p.address for p in fed.parties[:2]]
    st = t.state(tid)
    assert st.level == 1 and st.phase == Phase.HISTOGRAMS
    for nd in st.open_nodes():
        rec = t.node(tid, 0, nd)
        assert (rec.cand0, rec.cand1) == ref.drawn_candidates(fed.num_features, 0, nd)
    reverts("Excluded", t.submit_histograms, fed.parties[2], tid, 0, 1, [], [])
    reverts("Excluded", t.decline_histograms, fed.parties[2], tid, 0, 1)
    t.decline_histograms(fed.parties[0], tid, 0, 1)
    reverts("StepStillOpen", t.close_step, fed.resolver, tid)
    # both parties taking part have answered: the last decline closes the step, no wait for the deadline
    closed = t.decline_histograms(fed.parties[1], tid, 0, 1).event("HistogramsClosed")
    assert (closed.args["submitters"], closed.args["submitterMask"]) == (0, 0)  # the mask starts each level empty
    assert t.state(tid).phase == Phase.RESOLVING
    reverts("WrongPhase", t.close_step, fed.resolver, tid)


def test_vote_guards(fed: Federation) -> None:
    t, tid, p = fed.task, fed.task_id, fed.parties[0]
    reverts("WrongStep", t.submit_votes, p, tid, 1, 0, [0])
    reverts("WrongStep", t.submit_votes, p, tid, 0, 1, [0])
    reverts("UnknownTask", t.submit_votes, p, tid + 1000, 0, 0, [0])
    reverts("LengthMismatch", t.submit_votes, p, tid, 0, 0, [0, 1])
    reverts("InvalidVote", t.submit_votes, p, tid, 0, 0, [fed.num_features])
    reverts("InvalidVote", t.submit_votes, p, tid, 0, 0, [-2])
    reverts("WrongPhase", t.submit_histograms, p, tid, 0, 0, _hists(fed), [])
    t.submit_votes(p, tid, 0, 0, [-1])
    reverts("AlreadyVoted", t.submit_votes, p, tid, 0, 0, [1])
    reverts("StepStillOpen", t.close_step, fed.resolver, tid)


def test_endorsement_guards(chain: ChainClient, fed: Federation) -> None:
    t, tid = fed.task, fed.task_id
    p, others = fed.parties[0], fed.parties[1:]
    _vote_all(fed)
    hists = _hists(fed)
    good = [t.endorse(q, tid, 0, 0, p.address, hists) for q in others]
    # quorum for M = 4 is ceil(2 * 3 / 3) = 2
    e = reverts("InsufficientEndorsements", t.submit_histograms, p, tid, 0, 0, hists, good[:1])
    assert e.args_ == (1, 2)
    reverts("DuplicateEndorsement", t.submit_histograms, p, tid, 0, 0, hists, [good[0], good[0]])
    self_sig = t.endorse(p, tid, 0, 0, p.address, hists)
    reverts("SelfEndorsement", t.submit_histograms, p, tid, 0, 0, hists, [good[0], self_sig])
    outsider = Account.create()
    forged = t.endorse(outsider, tid, 0, 0, p.address, hists)
    reverts("EndorserNotMember", t.submit_histograms, p, tid, 0, 0, hists, [good[0], forged])
    # replays: signatures by members over another party, level, task, chain or contract recover to strangers
    root = merkle_root([node_hash(h) for h in hists])
    replays = [
        t.endorse(others[1], tid, 0, 0, others[0].address, hists),
        t.endorse(others[1], tid, 0, 1, p.address, hists),
        t.endorse(others[1], tid + 1, 0, 0, p.address, hists),
        Endorsement(
            sign_endorsement(
                others[1].key, endorsement_digest(chain.chain_id + 1, t.address, tid, 0, 0, p.address, root)
            )
        ),
        Endorsement(
            sign_endorsement(others[1].key, endorsement_digest(chain.chain_id, p.address, tid, 0, 0, p.address, root))
        ),
    ]
    for bad in replays:
        reverts("EndorserNotMember", t.submit_histograms, p, tid, 0, 0, hists, [good[0], bad])
    # different histograms than endorsed: the signatures no longer match
    other = _hists(fed, seed=2)
    reverts("EndorserNotMember", t.submit_histograms, p, tid, 0, 0, other, good[:2])
    high_s = bytearray(good[1].signature)
    high_s[32:64] = (2**256 - 1).to_bytes(32, "big")
    reverts("InvalidSignature", t.submit_histograms, p, tid, 0, 0, hists, [good[0], Endorsement(bytes(high_s))])
    reverts(
        "InvalidSignature", t.submit_histograms, p, tid, 0, 0, hists, [good[0], Endorsement(good[1].signature[:64])]
    )
    # the credit is signed: claiming a better one than the endorser attested recovers to a stranger
    better = Endorsement(good[1].signature, ref.Credit(2 * ONE, ONE, ONE))
    reverts("EndorserNotMember", t.submit_histograms, p, tid, 0, 0, hists, [good[0], better])
    # credits the contract cannot store are refused before any signature is recovered
    data = [x for h in hists for x in node_block(h)]
    raw = [good[0].as_tuple(), (good[1].signature, 2**80, ONE, ONE)]
    e = reverts("CreditOutOfRange", t.client.transact, t.contract, "submitHistograms", tid, 0, 0, data, raw, sender=p)
    assert e.args_ == (1,)
    reverts("LengthMismatch", t.submit_histograms, p, tid, 0, 0, hists + hists, good[:2])
    reverts("WrongStep", t.submit_histograms, p, tid, 0, 1, hists, good[:2])
    res = t.submit_histograms(p, tid, 0, 0, hists, good[:2])
    assert res.event("HistogramsSubmitted").args["endorsements"] == 2
    reverts("AlreadySubmitted", t.submit_histograms, p, tid, 0, 0, hists, good[:2])


def test_an_endorsement_a_wallet_signs_as_typed_data_is_accepted(chain: ChainClient, fed: Federation) -> None:
    """The contract publishes its EIP-712 domain (``eip712Domain``, ERC-5267), the one the endorsements are signed
    under; a signature made as a wallet signs typed data (eth-account's ``sign_typed_data`` of the payload the wallet
    shows) endorses as it is, and v 0 or 1 in place of 27 or 28 is refused (OpenZeppelin's ``ECDSA``)."""
    t, tid = fed.task, fed.task_id
    p, others = fed.parties[0], fed.parties[1:]
    fields, name, version, chain_id, verifying, _, _ = chain.call(t.contract, "eip712Domain")
    assert (fields, name, version, chain_id) == (
        b"\x0f",
        ENDORSEMENT_DOMAIN_NAME,
        ENDORSEMENT_DOMAIN_VERSION,
        chain.chain_id,
    )
    assert verifying.lower() == t.address.lower()
    _vote_all(fed)
    hists = _hists(fed)
    root = merkle_root([node_hash(h) for h in hists])
    payload = endorsement_typed_data(chain.chain_id, t.address, tid, 0, 0, p.address, root)
    wallet = [Endorsement(bytes(Account.sign_typed_data(q.key, full_message=payload).signature)) for q in others[:2]]
    assert wallet[0] == t.endorse(others[0], tid, 0, 0, p.address, hists)
    low_v = Endorsement(wallet[1].signature[:64] + bytes([wallet[1].signature[64] - 27]))
    e = reverts("InvalidSignature", t.submit_histograms, p, tid, 0, 0, hists, [wallet[0], low_v])
    assert e.args_ == (1,)
    res = t.submit_histograms(p, tid, 0, 0, hists, wallet)
    assert res.event("HistogramsSubmitted").args["endorsements"] == 2


def test_resolution_guards(fed: Federation) -> None:
    t, tid = fed.task, fed.task_id
    _vote_all(fed)
    level = {}
    for p in fed.parties:
        level[p.address] = _hists(fed, seed=int(p.address, 16) % 1000)
        others = [q for q in fed.parties if q.address != p.address][:2]
        if p == fed.parties[-1]:  # not resolvable before the step closes, and the last submission closes it
            reverts("WrongPhase", t.resolve_node, fed.resolver, tid, 1, [1], list(level.values()))
        t.submit_histograms(
            p, tid, 0, 0, level[p.address], [t.endorse(q, tid, 0, 0, p.address, level[p.address]) for q in others]
        )
    all_hists = [level[p.address] for p in fed.parties]
    assert t.state(tid).phase == Phase.RESOLVING
    reverts("NodeNotOpen", t.resolve_node, fed.resolver, tid, 2, [2], all_hists)
    reverts("LengthMismatch", t.resolve_node, fed.resolver, tid, 1, [1], all_hists[:3])
    tampered = list(all_hists)
    h = tampered[2][0]
    tampered[2] = [NodeHistograms(h.features, h.g, h.h, ((h.n[0][0] + 1, *h.n[0][1:]), h.n[1]))]
    e = reverts("HistogramMismatch", t.resolve_node, fed.resolver, tid, 1, [1], tampered)
    assert e.args_[1] == fed.parties[2].address
    t.resolve_node(fed.resolver, tid, 1, [1], all_hists)
    assert t.state(tid).status == Status.COMPLETED
    # everything after completion is refused
    p = fed.parties[0]
    reverts("WrongStatus", t.submit_votes, p, tid, 0, 0, [0])
    reverts("WrongStatus", t.close_step, fed.resolver, tid)
    reverts("WrongStatus", t.resolve_node, fed.resolver, tid, 1, [1], all_hists)
    reverts("WrongStatus", t.start, fed.requester, tid, EDGES)


def test_histograms_need_a_vote(fed: Federation) -> None:
    t, tid = fed.task, fed.task_id
    for p in fed.parties[1:]:
        t.submit_votes(p, tid, 0, 0, [0])
    fed.task.client.mine(CFG.step_blocks + 1)
    t.close_step(fed.resolver, tid)
    p = fed.parties[0]
    hists = _hists(fed)
    sigs = [t.endorse(q, tid, 0, 0, p.address, hists) for q in fed.parties[1:3]]
    reverts("DidNotVote", t.submit_histograms, p, tid, 0, 0, hists, sigs)


def test_deadlines_skip_missing_party_only_after_deadline(chain: ChainClient, fed: Federation) -> None:
    t, tid = fed.task, fed.task_id
    silent = fed.parties[3]
    for p in fed.parties[:3]:
        t.submit_votes(p, tid, 0, 0, [1])
    reverts("StepStillOpen", t.close_step, fed.resolver, tid)
    chain.mine(t.state(tid).step_deadline - chain.block_number + 1)
    reverts("StepDeadlinePassed", t.submit_votes, silent, tid, 0, 0, [1])
    closed = t.close_step(fed.resolver, tid)
    assert closed.event("VotingClosed").args["voters"] == 3
    assert t.state(tid).phase == Phase.HISTOGRAMS
    # histogram step: one voter stays silent, the step cannot close early, then closes without it
    hists = {p.address: _hists(fed, seed=i) for i, p in enumerate(fed.parties)}
    for p in fed.parties[:2]:
        sigs = [t.endorse(q, tid, 0, 0, p.address, hists[p.address]) for q in fed.parties if q != p][:2]
        t.submit_histograms(p, tid, 0, 0, hists[p.address], sigs)
    reverts("StepStillOpen", t.close_step, fed.resolver, tid)
    chain.mine(t.state(tid).step_deadline - chain.block_number + 1)
    late = fed.parties[2]
    sigs = [t.endorse(q, tid, 0, 0, late.address, hists[late.address]) for q in fed.parties if q != late][:2]
    reverts("StepDeadlinePassed", t.submit_histograms, late, tid, 0, 0, hists[late.address], sigs)
    closed = t.close_step(fed.resolver, tid).event("HistogramsClosed")
    assert (closed.args["submitters"], closed.args["submitterMask"]) == (2, 0b011)  # parties 0 and 1, not 2
    res = t.resolve_node(fed.resolver, tid, 1, [1], [hists[p.address] for p in fed.parties[:2]])
    assert list(res.event("ContributionsAdded").args["parties"]) == [p.address for p in fed.parties[:2]]
    assert t.contribution(tid, silent.address) == 0 and t.contribution(tid, late.address) == 0
    assert t.state(tid).status == Status.COMPLETED


def test_rewards_withdraw_once(chain: ChainClient, task_contract: TaskContract) -> None:
    cfg = TaskConfig(trees=1, depth=2, bins=3, min_parties=3, max_parties=3, min_rows=1, lam=0)
    fed = open_task(chain, task_contract, cfg, 3, reward=6 * 10**18)
    rows = RowSource(random.Random(5), [p.address for p in fed.parties], 40, fed.num_features, cfg.bins + 1)
    rows.start_tree(0)
    t, tid = fed.task, fed.task_id
    while t.state(tid).status == Status.TRAINING:
        nodes = t.state(tid).open_nodes()
        rows.follow(
            run_level(t, tid, fed.parties, {p.address: [0] * len(nodes) for p in fed.parties}, rows, fed.resolver)
        )
    owed = {p.address: t.owed(tid, p.address) for p in fed.parties}
    owed[fed.requester.address] = t.owed(tid, fed.requester.address)
    assert sum(owed.values()) == 6 * 10**18
    payee = max(owed, key=lambda a: owed[a])
    acct = next(p for p in [*fed.parties, fed.requester] if p.address == payee)
    before = chain.balance(payee)
    res = t.withdraw(acct, tid)
    assert res.event("Withdrawn").args["amount"] == owed[payee]
    # the payee paid gas at 2 * base fee + 1; its balance grew by the payout minus that gas
    assert chain.balance(payee) > before + owed[payee] - 10**16
    reverts("NothingToWithdraw", t.withdraw, acct, tid)


def test_a_party_that_leaves_forfeits_its_reward(chain: ChainClient, task_contract: TaskContract) -> None:
    """Paid on completion only: the party with the largest positive total after the first level stays silent at the
    second; it is owed nothing, ``RewardForfeited`` carries its pro-rata amount, the requester gets it back, and
    every amount is ``reference.payouts`` of the stored totals."""
    cfg = TaskConfig(trees=1, depth=2, bins=3, min_parties=3, max_parties=3, min_rows=1, lam=0)
    reward = 6 * 10**18
    fed = open_task(chain, task_contract, cfg, 3, reward=reward)
    rows = RowSource(random.Random(5), [p.address for p in fed.parties], 40, fed.num_features, cfg.bins + 1)
    rows.start_tree(0)
    t, tid = fed.task, fed.task_id
    nodes = t.state(tid).open_nodes()
    zero_votes = {p.address: [0] * len(nodes) for p in fed.parties}
    rows.follow(run_level(t, tid, fed.parties, zero_votes, rows, fed.resolver))
    leaver = max(fed.parties, key=lambda p: t.contribution(tid, p.address))
    assert t.contribution(tid, leaver.address) > 0 and t.state(tid).status == Status.TRAINING
    nodes = t.state(tid).open_nodes()
    votes = {p.address: [0] * len(nodes) for p in fed.parties}
    run_level(t, tid, fed.parties, votes, rows, fed.resolver, silent_hists={leaver.address})
    assert t.state(tid).status == Status.COMPLETED
    totals = [t.contribution(tid, p.address) for p in fed.parties]
    due = ref.payouts(totals, [p.address != leaver.address for p in fed.parties], reward)
    [forfeit] = chain.logs(t.contract, ["RewardForfeited"], tid)
    assert forfeit.args["party"] == leaver.address and forfeit.args["amount"] > 0
    assert forfeit.args["amount"] == due.forfeited[fed.parties.index(leaver)]
    assert t.owed(tid, leaver.address) == 0
    assert [t.owed(tid, p.address) for p in fed.parties] == list(due.paid)
    assert t.owed(tid, fed.requester.address) == due.requester >= forfeit.args["amount"]
    assert sum(due.paid) + due.requester == reward
    reverts("NothingToWithdraw", t.withdraw, leaver, tid)


def test_cancel_reclaim_and_reentrancy(chain: ChainClient, task_contract: TaskContract) -> None:
    attacker_owner = chain.new_account(10**20)
    attacker = chain.deploy("ReentrantRequester", attacker_owner, task_contract.address)
    chain.transact(attacker, "openAndCancel", CFG.as_tuple(), sender=attacker_owner, value=10**18)
    tid = int(chain.call(attacker, "taskId"))
    assert task_contract.state(tid).status == Status.CANCELLED
    assert task_contract.owed(tid, attacker.address) == 10**18
    chain.transact(attacker, "attack", sender=attacker_owner)
    inner = bytes(chain.call(attacker, "innerError"))
    assert chain.decoder.decode(inner).name == "ReentrancyGuardReentrantCall"  # OpenZeppelin's storage guard
    assert chain.call(attacker, "reentered") is False
    assert int(chain.call(attacker, "received")) == 10**18
    assert chain.balance(attacker.address) == 10**18
    assert task_contract.owed(tid, attacker.address) == 0


def test_requester_reclaims_unstarted_task(chain: ChainClient, task_contract: TaskContract) -> None:
    fed = open_task(chain, task_contract, CFG, 1, start=False, reward=2 * 10**18)
    t = fed.task
    reverts("NotRequester", t.cancel, fed.parties[0], fed.task_id)
    t.cancel(fed.requester, fed.task_id)
    assert t.owed(fed.task_id, fed.requester.address) == 2 * 10**18
    t.withdraw(fed.requester, fed.task_id)
    reverts("NothingToWithdraw", t.withdraw, fed.requester, fed.task_id)
    reverts("WrongStatus", t.start, fed.requester, fed.task_id, EDGES)


def test_start_publishes_the_bin_edges_and_checks_a_committed_hash(
    chain: ChainClient, task_contract: TaskContract
) -> None:
    req = chain.new_account(10**20)
    party = chain.new_account(10**19)
    cfg = TaskConfig(trees=1, depth=1, bins=3, min_parties=1, max_parties=4, step_blocks=20, join_blocks=30)
    committed, _ = task_contract.create_task(req, cfg, [0], [ONE], keccak(EDGES))
    task_contract.join(party, committed, b"psd", "http://p")
    task_contract.approve(req, committed, party.address)
    e = reverts("BinEdgesMismatch", task_contract.start, req, committed, b"other edges")
    assert e.args_[1] == keccak(EDGES) and e.args_[2] == keccak(b"other edges")
    res = task_contract.start(req, committed, EDGES)
    fixed = res.event("BinEdgesFixed").args
    assert fixed["binEdges"] == EDGES and fixed["binEdgesHash"] == keccak(EDGES)


def test_batched_resolution_is_all_or_nothing(chain: ChainClient, task_contract: TaskContract) -> None:
    """``resolveNodes`` checks every node as ``resolveNode`` does; one bad node reverts the whole batch, leaving
    nothing resolved; a good batch resolves its nodes in any order and closes the level."""
    cfg = TaskConfig(trees=1, depth=2, bins=3, min_parties=3, max_parties=3, min_rows=1, lam=0)
    fed = open_task(chain, task_contract, cfg, 3)
    t, tid = fed.task, fed.task_id
    source = RowSource(random.Random(5), [p.address for p in fed.parties], 40, fed.num_features, cfg.bins + 1)
    source.start_tree(0)
    source.follow(run_level(t, tid, fed.parties, {p.address: [0] for p in fed.parties}, source, fed.resolver))
    assert t.state(tid).open_nodes() == [2, 3]  # the root split
    out = run_level(
        t, tid, fed.parties, {p.address: [1, 0] for p in fed.parties}, source, fed.resolver, resolve_batch=0
    )
    level = [out.hists[a] for a in out.submitters]
    assert t.state(tid).phase == Phase.RESOLVING
    reverts("LengthMismatch", t.resolve_nodes, fed.resolver, tid, [], [2, 3], level)
    reverts("NodeNotOpen", t.resolve_nodes, fed.resolver, tid, [2, 2], [2, 3], level)
    tampered = [list(h) for h in level]
    h = tampered[1][1]
    tampered[1][1] = NodeHistograms(h.features, h.g, h.h, ((h.n[0][0] + 1, *h.n[0][1:]), h.n[1]))
    e = reverts("HistogramMismatch", t.resolve_nodes, fed.resolver, tid, [2, 3], [2, 3], tampered)
    assert e.args_[1] == fed.parties[1].address
    assert t.state(tid).resolved_mask == 0  # nothing of a failed batch stays
    res = t.resolve_nodes(fed.resolver, tid, [3, 2], [2, 3], level)
    assert sorted(int(ev.args["node"]) for ev in res.events_named("ContributionsAdded")) == [2, 3]
    assert t.state(tid).status == Status.COMPLETED


def test_declining_voter_lets_the_step_close_early(chain: ChainClient, fed: Federation) -> None:
    """A voter refused endorsement declines: the step closes once the others submitted, before the deadline; it
    can neither submit nor decline again, a non-voter cannot decline, and it earns nothing for the level."""
    t, tid = fed.task, fed.task_id
    silent, decliner = fed.parties[3], fed.parties[2]
    for p in fed.parties[:3]:
        t.submit_votes(p, tid, 0, 0, [1])
    chain.mine(t.state(tid).step_deadline - chain.block_number + 1)
    t.close_step(fed.resolver, tid)
    reverts("DidNotVote", t.decline_histograms, silent, tid, 0, 0)
    reverts("WrongStep", t.decline_histograms, decliner, tid, 0, 1)
    hists = {p.address: _hists(fed, seed=i) for i, p in enumerate(fed.parties)}
    ev = t.decline_histograms(decliner, tid, 0, 0).event("HistogramsDeclined")
    assert ev.args["party"] == decliner.address and int(ev.args["level"]) == 0
    reverts("AlreadySubmitted", t.decline_histograms, decliner, tid, 0, 0)
    sigs = [t.endorse(q, tid, 0, 0, decliner.address, hists[decliner.address]) for q in fed.parties[:2]]
    reverts("AlreadySubmitted", t.submit_histograms, decliner, tid, 0, 0, hists[decliner.address], sigs)
    p0, p1 = fed.parties[:2]
    t.submit_histograms(
        p0,
        tid,
        0,
        0,
        hists[p0.address],
        [t.endorse(q, tid, 0, 0, p0.address, hists[p0.address]) for q in (p1, decliner)],
    )
    reverts("StepStillOpen", t.close_step, fed.resolver, tid)
    t.submit_histograms(
        p1,
        tid,
        0,
        0,
        hists[p1.address],
        [t.endorse(q, tid, 0, 0, p1.address, hists[p1.address]) for q in (p0, decliner)],
    )
    assert chain.block_number <= t.state(tid).step_deadline
    assert t.state(tid).phase == Phase.RESOLVING  # closed by p1's submission, the last one owed
    closed = [ev for ev in t.client.logs(t.contract, ["HistogramsClosed"], tid) if int(ev.args["tree"]) == 0]
    assert [(int(ev.args["submitters"]), int(ev.args["submitterMask"])) for ev in closed] == [(2, 0b0011)]
    res = t.resolve_node(fed.resolver, tid, 1, [1], [hists[p0.address], hists[p1.address]])
    assert list(res.event("ContributionsAdded").args["parties"]) == [p0.address, p1.address]
    assert t.contribution(tid, decliner.address) == 0
