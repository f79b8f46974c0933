"""A level too wide for one transaction goes as ``commitHistograms`` parts, and commits exactly what one
``submitHistograms`` would: the same root, the same model and contributions, and the audit replays it."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest
from chain_helpers import Federation, RowSource, open_task, reverts

from fgbdt_chain.ledger.audit.replay import AuditInput, audit_events, read_task
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.encoding import merkle_root, node_block, node_hash
from fgbdt_chain.ledger.spec.tx_size import CALLDATA_LIMIT, submit_overhead
from fgbdt_chain.ledger.wrappers.contracts import Phase, Status, TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.federation import LevelOutcome, run_level

pytestmark = pytest.mark.chain

CFG = TaskConfig(trees=2, depth=3, bins=3, min_parties=3, max_parties=3, min_rows=1, lam=0)
NODE_BYTES = 6 * (CFG.bins + 1) * 32
ENDORSERS = 2  # quorum of 2/3 of the two others
TWO_AND_TWO = submit_overhead(ENDORSERS) + 2 * NODE_BYTES
"""A limit at which four nodes go as a part of two, then the submission with the other two."""
ALL_THEN_NONE = 4 + 5 * 32 + 4 * NODE_BYTES
"""A limit at which four nodes go in one part, then a submission that carries the endorsements only."""


def _train(chain: ChainClient, task_contract: TaskContract, limit: int) -> tuple[Federation, list[LevelOutcome]]:
    fed = open_task(chain, task_contract, CFG, 3)
    fed.task = TaskContract(task_contract.client, task_contract.contract, calldata_limit=limit)
    source = RowSource(random.Random(11), [p.address for p in fed.parties], 60, fed.num_features, CFG.bins + 1)
    outs = []
    for tree in range(CFG.trees):
        source.start_tree(tree)
        while (st := fed.task.state(fed.task_id)).status == Status.TRAINING and st.tree == tree:
            k = len(st.open_nodes())
            votes = {p.address: [(i + j) % fed.num_features for j in range(k)] for i, p in enumerate(fed.parties)}
            out = run_level(fed.task, fed.task_id, fed.parties, votes, source, fed.resolver, resolve_batch=2)
            source.follow(out)
            outs.append(out)
    return fed, outs


def _roots(outs: list[LevelOutcome]) -> list[bytes]:
    return [bytes(e.args["root"]) for o in outs for t in o.txs for e in t.events_named("HistogramsSubmitted")]


@pytest.fixture(scope="module")
def anvil_task(anvil_client: ChainClient) -> TaskContract:
    return TaskContract.deploy(anvil_client, anvil_client.new_account(10**22))


@pytest.mark.parametrize("limit", [TWO_AND_TWO, ALL_THEN_NONE])
def test_parts_commit_what_one_submission_would(
    anvil_client: ChainClient, anvil_task: TaskContract, limit: int
) -> None:
    """Two trees of depth 3 (anvil: whole tasks), once in whole levels and once with every 4-node level in parts."""
    whole, whole_outs = _train(anvil_client, anvil_task, CALLDATA_LIMIT)
    parted, parted_outs = _train(anvil_client, anvil_task, limit)
    committed = [t for o in parted_outs for t in o.txs if t.function == "commitHistograms"]
    assert committed and not any(t.function == "commitHistograms" for o in whole_outs for t in o.txs)
    assert max(len(o.open_nodes) for o in parted_outs) == 4  # the widest level needed parts
    assert _roots(parted_outs) == _roots(whole_outs)
    for a, b in zip(whole_outs, parted_outs, strict=True):
        assert a.open_nodes == b.open_nodes
        for nd in a.open_nodes:
            assert whole.task.node(whole.task_id, a.tree, nd) == parted.task.node(parted.task_id, b.tree, nd)
    for pw, pp in zip(whole.parties, parted.parties, strict=True):
        assert whole.task.contribution(whole.task_id, pw.address) == parted.task.contribution(
            parted.task_id, pp.address
        )
    assert parted.task.state(parted.task_id).status == Status.COMPLETED


def test_part_guards(chain: ChainClient, task_contract: TaskContract) -> None:
    """A part may not separate siblings nor run past the level; the submission must complete exactly what the
    parts left and commits to the whole level; nothing is taken after it."""
    fed = open_task(chain, task_contract, CFG, 3)
    t, tid = fed.task, fed.task_id
    source = RowSource(random.Random(3), [p.address for p in fed.parties], 60, fed.num_features, CFG.bins + 1)
    source.start_tree(0)
    while len(t.state(tid).open_nodes()) < 4:
        k = len(t.state(tid).open_nodes())
        source.follow(run_level(t, tid, fed.parties, {p.address: [0] * k for p in fed.parties}, source, fed.resolver))
    st = t.state(tid)
    assert st.level == 2
    for p in fed.parties:
        t.submit_votes(p, tid, 0, 2, [1, 1, 1, 1])
    assert t.state(tid).phase == Phase.HISTOGRAMS
    p = fed.parties[0]
    nodes = st.open_nodes()
    hists = [source(p.address, nd, (t.node(tid, 0, nd).cand0, t.node(tid, 0, nd).cand1)) for nd in nodes]
    reverts("LengthMismatch", t.commit_histograms, p, tid, 0, 2, hists[:1])  # splits a pair of siblings
    reverts("LengthMismatch", t.commit_histograms, p, tid, 0, 2, [*hists, *hists[:2]])  # past the level
    reverts("InheritedTotalsMismatch", t.commit_histograms, p, tid, 0, 2, hists[2:])  # nodes 6, 7 sent as 4, 5
    res = t.commit_histograms(p, tid, 0, 2, hists[:2])
    assert (
        int(res.event("HistogramsCommitted").args["first"]),
        len(res.event("HistogramsCommitted").args["data"]),
    ) == (
        0,
        2 * NODE_BYTES // 32,
    )
    signed = [t.endorse(q, tid, 0, 2, p.address, hists) for q in fed.parties[1:]]
    endorsements = [e.as_tuple() for e in signed]
    whole = [x for h in hists for x in node_block(h)]
    reverts("LengthMismatch", t._tx, "submitHistograms", tid, 0, 2, whole, endorsements, sender=p)
    # a sender that restarted here finds its part on chain and sends the rest only
    committed = t.committed_nodes(tid, 0, 2, p.address, CFG.bins + 1, res.block_number - 1)
    assert committed == 2
    done = t.submit_histograms(p, tid, 0, 2, hists, signed, committed=committed)
    assert not done.parts and len(done.event("HistogramsSubmitted").args["data"]) == 2 * NODE_BYTES // 32
    assert bytes(done.event("HistogramsSubmitted").args["root"]) == merkle_root([node_hash(h) for h in hists])
    reverts("AlreadySubmitted", t.commit_histograms, p, tid, 0, 2, hists[:2])
    reverts("AlreadySubmitted", t._tx, "submitHistograms", tid, 0, 2, [], endorsements, sender=p)


@pytest.fixture(scope="module")
def parted_record(anvil_client: ChainClient, anvil_task: TaskContract) -> AuditInput:
    fed, _ = _train(anvil_client, anvil_task, TWO_AND_TWO)
    return read_task(anvil_client, fed.task.address, fed.task_id)


def test_the_audit_replays_a_task_sent_in_parts(parted_record: AuditInput) -> None:
    report = audit_events(parted_record)
    assert report.ok and report.completed, report.first_mismatch
    parts = [e for e in parted_record.events if e.name == "HistogramsCommitted"]
    assert parts and report.counts.histograms == sum(e.name == "HistogramsSubmitted" for e in parted_record.events)


def _tampered(record: AuditInput, change: Callable[[dict[str, Any]], None]) -> AuditInput:
    """A copy of ``record`` whose first ``HistogramsCommitted`` event is changed."""
    events = list(record.events)
    i = next(i for i, e in enumerate(events) if e.name == "HistogramsCommitted")
    args = {k: (list(v) if isinstance(v, list | tuple) else v) for k, v in events[i].args.items()}
    change(args)
    events[i] = dataclasses.replace(events[i], args=args)
    return dataclasses.replace(record, events=events)


def test_a_tampered_part_is_caught(parted_record: AuditInput) -> None:
    def bump(args: dict[str, Any]) -> None:
        args["data"][5] += 1

    m = audit_events(_tampered(parted_record, bump)).mismatch
    assert m is not None and m.field == "histogram commitment (Merkle root of the data)"


def test_a_part_out_of_order_is_caught(parted_record: AuditInput) -> None:
    def shift(args: dict[str, Any]) -> None:
        args["first"] = 2

    m = audit_events(_tampered(parted_record, shift)).mismatch
    assert m is not None and m.field == "committed part's first node" and m.recorded == 2
