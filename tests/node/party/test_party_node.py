"""The party node's parts, each over fakes of the chain: the check that a level's opening splits are all known before
rows are routed, the reading of a resolution revert that means the node's events lag its state, the tree records,
the restart check, the votes sent ahead and the relay's hand-overs."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from web3.exceptions import Web3RPCError

from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec.encoding import merkle_root, node_hash
from fgbdt_chain.ledger.spec.reference import ONE, NodeHistograms, Totals
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.spec.tx_size import resolution_batches
from fgbdt_chain.ledger.wrappers.contracts import Phase, Status, TaskState
from fgbdt_chain.node.party.following import ChainLag, splits_open
from fgbdt_chain.node.party.joining import TaskTerms
from fgbdt_chain.node.party.level_state import LevelContext
from fgbdt_chain.node.party.party_node import PartyNode
from fgbdt_chain.node.party.resolution import fewer_histograms_than_chain, resolution_share
from fgbdt_chain.node.party.session import NodeError, NodeSettings, PartySession
from fgbdt_chain.node.party.tree_log import LIGHT_EVENTS, RESCAN_BLOCKS, TreeLog

ANY: Any = None
"""A placeholder for what a test's part never reads."""


def _node(**fields: Any) -> PartyNode:
    """A party node whose parts are real, over a session that holds ``fields`` (fakes of the chain, this party's
    rows) and placeholders for the rest."""
    session = PartySession(
        ANY, 1, SimpleNamespace(address="0x0"), ANY, NodeSettings(), lambda message: None, *[ANY] * 4
    )
    for name, value in fields.items():
        setattr(session, name, value)
    return PartyNode.assembled(session, TaskTerms(ANY, ANY, ANY, (0.0, 1.0), ANY, ANY, ANY))


def test_splits_open_the_level_exactly() -> None:
    splits = {1: (3, 2), 2: (0, 1), 3: (5, 4)}
    assert splits_open({}, 0, [1])
    assert splits_open(splits, 1, [2, 3])
    assert splits_open(splits, 2, [7, 6, 5, 4])  # any order
    # a split of the previous level not served yet (node 3's): its children look closed, routing would be wrong
    assert not splits_open({1: (3, 2), 2: (0, 1)}, 2, [4, 5, 6, 7])
    # a record from another level does not count
    assert not splits_open({1: (3, 2), 4: (1, 1)}, 2, [4, 5])


def test_a_resolution_short_of_submitters_reads_as_lag_not_failure() -> None:
    # the chain counts three submitters (3 x 18 words), the party read only two parties' events
    assert fewer_histograms_than_chain(ContractRevert("LengthMismatch", (54, 36), function="resolveNodes"))
    # more histograms than the chain counts, or any other revert, is a real failure
    assert not fewer_histograms_than_chain(ContractRevert("LengthMismatch", (36, 54)))
    assert not fewer_histograms_than_chain(ContractRevert("NodeNotOpen", (1, 1)))
    assert not fewer_histograms_than_chain(ContractRevert("LengthMismatch", ()))


def test_a_resolution_in_the_seed_block_is_looked_at_again_however_often_not_counted_as_a_failure() -> None:
    """``ShapleySeedPending`` (a resolution mined in ``start``'s block, whose hash is the task's Shapley seed, read
    from the next block on) leaves the nodes to the next poll as often as it comes; another revert of the same nodes
    gives up after 20."""

    def reverting(name: str) -> Any:
        def resolve_nodes(*args: Any, **kwargs: Any) -> Any:
            raise ContractRevert(name, (7, 41), function="resolveNodes")

        return resolve_nodes

    for name, gives_up in (("ShapleySeedPending", False), ("NodeNotOpen", True)):
        task = SimpleNamespace(resolve_nodes=reverting(name))
        node = _node(task=task, parties=["0x0", "0x1"], params=SimpleNamespace(nbins=4), index=0)
        node.chain.submitted_histograms = lambda ctx: [[], []]  # type: ignore[method-assign]
        ctx = LevelContext(0, 0, [1], np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))
        failed_at = None
        for attempt in range(1, 26):
            try:
                node.resolver.resolve(ctx, 0, anyone=True)
            except NodeError:
                failed_at = attempt
                break
            assert node.chain.again  # looked at again next poll
        assert failed_at == (21 if gives_up else None), name


def test_a_finished_tree_whose_leaves_are_not_served_yet_is_lag_then_failure() -> None:
    """A drawn tree's next level starts in the block that finished the tree, so a party can see the new tree in the
    state before the node serves the finished tree's leaves: that is lag (look again), and only a gap that outlasts
    the chain-outage window is an inconsistent chain."""

    class Trees:
        def __init__(self) -> None:
            self.splits: dict[int, dict[int, tuple[int, int]]] = {0: {1: (0, 1)}}
            self.leaves: dict[int, dict[int, int]] = {0: {2: ONE}}  # node 3's leaf not served yet
            self.next_block = 5
            self.level_starts: dict[tuple[int, int], tuple[int, int]] = {}
            self.reread: list[int | None] = []

        def refresh(self, since: int | None = None) -> None:
            self.reread.append(since)

    party = SimpleNamespace(rows=SimpleNamespace(slots=np.array([[1], [2], [3]])), score=np.zeros(3), n_rows=3)
    node = _node(
        party=party, params=TrainParams(trees=2, depth=1, bins=4), settings=NodeSettings(chain_outage_seconds=0.05)
    )
    trees = node.chain.trees = Trees()  # type: ignore[assignment]
    # where tree 0 started: the re-read goes back to there, not to block 0
    trees.level_starts = {(0, 0): (3, 0), (0, 1): (4, 0)}
    levels = node.levels
    with pytest.raises(ChainLag, match="not served yet"):
        levels.apply_completed_trees(1)
    assert levels.applied_trees == 0 and not party.score.any()
    assert trees.reread == [None, 3]
    time.sleep(0.1)
    with pytest.raises(NodeError, match="have no leaf value"):
        levels.apply_completed_trees(1)
    trees.leaves[0][3] = -ONE  # served at last
    levels.apply_completed_trees(1)
    assert levels.applied_trees == 1 and party.score.tolist() == [1.0, -1.0, -1.0]


def test_a_level_start_not_served_yet_bounds_reads_by_the_last_known_start() -> None:
    """Event reads start where their level started; while its ``LevelStarted`` is not served yet, at the latest
    earlier level's start (a level never starts before it), where block 0 made each such read scan the whole chain."""
    asked: list[tuple[int, int | str]] = []

    def logs(contract: object, names: list[str], task_id: int, start: int, latest: int | str = "latest") -> list:
        asked.append((start, latest))
        return []

    chain = _node(task=SimpleNamespace(client=SimpleNamespace(block_number=40, logs=logs), contract=None)).chain
    starts = {(2, 0): (10, 0), (2, 1): (14, 0), (3, 0): (30, 0)}
    chain.trees = SimpleNamespace(level_starts=starts, next_block=0)  # type: ignore[assignment]
    chain.level_scan = 38
    chain.heads = None  # not subscribed: the node is asked for its latest block
    assert chain.level_block(2, 1) == 14 and asked == []  # known: no query
    assert chain.level_block(2, 2) == 14  # not served yet: tree 2's level 1 started before it
    assert asked == [(38 - RESCAN_BLOCKS, 40)] and chain.level_scan == 41  # the scan went over the new blocks only
    assert chain.level_block(3, 1) == 30
    assert chain.level_block(1, 4) == 0  # nothing known before it: from the start
    # subscribed: read up to the node's latest without asking its number; counted up to the announced block only,
    # so blocks past the announcement (served, not yet announced) are read again next time
    chain.heads = SimpleNamespace(live=True, latest=45)  # type: ignore[assignment]
    asked.clear()
    assert chain.level_block(3, 2) == 30
    assert asked == [(41 - RESCAN_BLOCKS, "latest")] and chain.level_scan == 46
    chain.heads = SimpleNamespace(live=True, latest=44)  # type: ignore[assignment]  # an older one: the scan stays
    chain.level_block(3, 3)
    assert asked[-1] == (46 - RESCAN_BLOCKS, "latest") and chain.level_scan == 46


@pytest.mark.parametrize("parties", [2, 3, 4, 7])
def test_resolution_shares_are_whole_transactions_the_same_for_every_party(parties: int) -> None:
    nbins = 16
    for level in range(9):
        open_nodes = 1 << level
        share = resolution_share(open_nodes, parties, nbins, 16)
        assert 1 <= share <= 16
        # a share fits one resolveNodes call with every party submitting
        assert resolution_batches(share, parties, nbins, open_nodes, 1, 16) == share
        owners = [(j // share + level) % parties for j in range(open_nodes)]
        runs = -(-open_nodes // share)
        assert len(set(owners)) == min(parties, runs)  # nobody's share is empty while a run is unassigned
    assert resolution_share(32, 4, nbins, 1) == 1  # --resolve-batch 1: one node per share, as before


def test_every_command_is_mapped_to_the_module_that_registers_it() -> None:
    import argparse
    import importlib

    from fgbdt_chain.deploy.cli import COMMAND_MODULES, COMMAND_OF, build_parser

    assert set(COMMAND_OF.values()) == set(COMMAND_MODULES)
    for name in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name).register(sub)
        for command in sub.choices:
            assert COMMAND_OF[command] == name
    only_node = build_parser("node")
    assert only_node.parse_args(["node", "--task", "1", "--key", "k", "--data", "d"]).command == "node"
    with pytest.raises(SystemExit):
        only_node.parse_args(["simulate", "--data", "d"])


def test_a_carry_uses_the_endorsed_histograms_only_where_the_chain_has_their_roots() -> None:
    """``Endorser.endorsed_levels``: a finished tree's levels as this party endorsed them when every level's endorsed
    root is the root the party submitted (read once per tree), else None (the events are read instead)."""
    reads: list[int] = []
    root_hist, left, right = (NodeHistograms((0, 1), ((k, 0), (k, 0)), ((0, 0),) * 2, ((1, 0),) * 2) for k in range(3))
    r0, r1 = merkle_root([node_hash(root_hist)]), merkle_root([node_hash(left), node_hash(right)])
    chain_roots = {("0xP", 0, 0): r0, ("0xP", 0, 1): r1, ("0xQ", 0, 0): b"q0"}

    def submitted_roots(task_id: int, start: int) -> dict[tuple[str, int, int], bytes]:
        reads.append(start)
        return dict(chain_roots)

    node = _node(params=TrainParams(depth=2), task=SimpleNamespace(submitted_roots=submitted_roots))
    node.chain.level_block = lambda tree, level: 0  # type: ignore[method-assign]
    endorser = node.endorser
    endorser.endorsed = {(0, 0): {"0xP": [root_hist]}, (0, 1): {"0xP": [left, right]}}
    endorser.endorsed_roots = {(0, 0): {"0xP": r0}, (0, 1): {"0xP": r1}}  # as endorse() signed them
    splits, leaves = {1: (0, 1)}, {2: ONE, 3: -ONE}
    late = chain_roots.pop(("0xP", 0, 1))  # level 1's submission not served yet: the events are read instead
    assert endorser.endorsed_levels("0xP", 0, splits, leaves) is None and len(reads) == 1
    chain_roots[("0xP", 0, 1)] = late  # served now: read again, once
    assert endorser.endorsed_levels("0xP", 0, splits, leaves) == [{1: root_hist}, {2: left, 3: right}]
    assert endorser.endorsed_levels("0xP", 0, splits, leaves) is not None and len(reads) == 2
    chain_roots[("0xP", 0, 1)] = b"other"  # the party submitted what others endorsed, not this copy
    endorser._roots = {}
    assert endorser.endorsed_levels("0xP", 0, splits, leaves) is None
    assert endorser.endorsed_levels("0xQ", 0, splits, leaves) is None  # nothing endorsed of it
    with pytest.raises(ChainLag, match="splits are not served yet"):
        chain_roots[("0xP", 0, 1)] = r1
        endorser.endorsed_levels("0xP", 0, splits, {2: ONE})  # node 3's leaf not served


def test_candidates_come_from_the_named_block_or_the_records_when_its_logs_lag() -> None:
    """``candidates``: the ``CandidatesFixed`` events of the block ``candidates_block`` names; where the node's log
    index is behind the state that named it (anvil: "block height is N but requested was N + 1"), the node records,
    which the state already holds."""
    asked: list[tuple[Any, ...]] = []

    def logs(contract: object, names: list[str], task_id: int, start: int, end: int | str = "latest") -> list[Any]:
        asked.append((start, end))
        if start > 7:
            raise Web3RPCError("BlockOutOfRangeError: block height is 7 but requested was 8")
        return [SimpleNamespace(args={"tree": 3, "node": n, "first": n, "second": 9}) for n in (2, 3)]

    def call_many(contract: object, fn: str, calls: list[tuple[int, int, int]]) -> list[tuple[int, ...]]:
        assert fn == "getNode"
        return [(1, 5, 6, 0, 0, 3, 0, 0, 0, 0) for _ in calls]

    node = _node(task=SimpleNamespace(contract=None, client=SimpleNamespace(logs=logs, call_many=call_many)))
    node.chain.trees = SimpleNamespace(candidates={}, refresh=lambda: False)  # type: ignore[assignment]  # none new

    def ctx(block: int) -> LevelContext:
        empty = np.zeros(0)
        return LevelContext(3, 1, [2, 3], empty.astype(np.int64), empty, empty, empty, fixed_block=block)

    assert node.candidates(ctx(7)) == [(2, 9), (3, 9)] and asked == [(7, 7)]  # the one block, its events
    assert node.candidates(ctx(8)) == [(5, 6), (5, 6)]  # not served yet: the records
    assert node.chain.candidates_by_tree[3] == {2: (5, 6), 3: (5, 6)}


def fresh(logs: Any) -> Any:
    """``ChainClient.fresh_logs`` over a fake ``logs`` whose events are already decoded: only those not yet seen."""

    def fresh_logs(contract: object, names: list[str], task_id: int, start: int, end: int | str, seen: dict) -> list:
        out = []
        for e in logs(contract, names, task_id, start, end):
            key = (repr(sorted(e.args.items())).encode(), getattr(e, "log_index", 0))
            if key not in seen:
                seen[key] = getattr(e, "block_number", 0)
                out.append(e)
        return out

    return fresh_logs


def test_one_read_of_the_light_events_serves_the_splits_candidates_level_start_and_closed_step() -> None:
    """The resolution that opens a level records the splits before it, the level's start and (its ballots sent
    ahead) its candidates in one transaction: one incremental read (``LIGHT_EVENTS``) brings them all, and the
    candidates, the level's start and its closed histogram step are then answered without a query of their own.
    Records of trees before the previous one are dropped; a log read again is not decoded again; a closed step the
    read missed (served late) is looked for from the level's start; an outage forgets what may be gone."""
    asked: list[tuple[list[str], int, int | str]] = []
    served: list[SimpleNamespace] = []

    def ev(name: str, block: int, **args: int) -> SimpleNamespace:
        return SimpleNamespace(name=name, args=args, block_number=block, log_index=0)

    def logs(contract: object, names: list[str], task_id: int, start: int, end: int | str = "latest") -> list:
        asked.append((list(names), start, end))
        return [e for e in served if e.block_number >= start and e.name in names]

    client = SimpleNamespace(logs=logs, call_many=None, block_number=0, forget_nonces=lambda: None)
    client.fresh_logs = fresh(logs)
    task = SimpleNamespace(contract=None, client=client)
    announced = [10]
    node = _node(task=task)
    chain = node.chain
    chain.trees = TreeLog(task, 1, lambda: announced[0])  # type: ignore[arg-type]
    served += [
        ev("NodeSplit", 10, tree=4, node=1, feature=2, threshold=5, sides=[1, 2, 3, 4, 5, 6]),
        ev("LevelStarted", 10, tree=4, level=1),
        ev("CandidatesFixed", 10, tree=4, node=2, first=2, second=7),
        ev("CandidatesFixed", 10, tree=4, node=3, first=0, second=2),
        ev("CandidatesFixed", 3, tree=2, node=1, first=1, second=3),  # two trees back: dropped
    ]
    assert node.trees.refresh() and len(asked) == 1 and set(asked[0][0]) == set(LIGHT_EVENTS)
    assert node.trees.splits == {4: {1: (2, 5)}} and 2 not in node.trees.candidates
    empty = np.zeros(0)
    ctx = LevelContext(4, 1, [2, 3], empty.astype(np.int64), empty, empty, empty, fixed_block=10)
    assert node.candidates(ctx) == [(2, 7), (0, 2)] and len(asked) == 1  # no query of its own
    assert chain.level_block(4, 1) == 10 and len(asked) == 1
    # not closed yet, and no block announced since the read: its own query (the state may be ahead of the heads)
    assert chain.closed_submitters(ctx) is None and asked[-1] == (["HistogramsClosed"], 10, "latest")
    assert node.trees.refresh() is False and len(asked) == 2
    served.append(ev("HistogramsClosed", 11, tree=4, level=1, submitterMask=0b1011))
    announced[0] = 11
    assert chain.closed_submitters(ctx) == 0b1011 and len(asked) == 3  # one read, shared with the tree records
    assert asked[-1][0] == list(LIGHT_EVENTS)
    assert chain.closed_submitters(ctx) == 0b1011 and len(asked) == 3
    # the logs the reads take again are decoded once, and only those of the blocks read again are remembered
    kept = [b for b in (3, 10, 10, 10, 10, 11) if b >= 11 - RESCAN_BLOCKS]  # the blocks read again
    assert sorted(node.trees._decoded.values()) == kept
    served.append(ev("LevelStarted", 20, tree=4, level=2))
    announced[0] = 30
    assert node.trees.refresh() and node.trees.level_starts[(4, 2)] == (20, 0)
    assert sorted(node.trees._decoded.values()) == [b for b in (*kept, 20) if b >= 12 - RESCAN_BLOCKS]
    announced[0] = 40
    assert node.trees.refresh() and node.trees._decoded == {}  # the blocks from 31 - RESCAN_BLOCKS on: none of them
    # a level whose close the reads missed (served after they had passed its block): from the level's start
    served.append(ev("HistogramsClosed", 25, tree=4, level=2, submitterMask=0b0111))
    ctx2 = LevelContext(4, 2, [4, 5], empty.astype(np.int64), empty, empty, empty)
    announced[0] = 41
    assert chain.closed_submitters(ctx2) == 0b0111
    assert asked[-2][0] == list(LIGHT_EVENTS) and asked[-1] == (["HistogramsClosed"], 20, "latest")
    # a level start the reads did not bring: looked for past what they read (block 42 - RESCAN_BLOCKS), not from block 0
    assert chain.level_block(9, 0) == 20 and asked[-1] == (["LevelStarted"], 42 - RESCAN_BLOCKS, 0)
    node.trees.forget_recent()  # after an outage: read again from the start
    assert node.trees.closed == {} and node.trees.level_starts == {} and node.trees.next_block == 0
    assert node.trees._decoded == {}


def test_the_tree_log_reads_up_to_the_announced_block_without_asking_the_number() -> None:
    """Subscribed, a refresh reads to the node's latest and counts to the announced block (one request, where the
    block number was a second); unsubscribed, it asks the number. Either way nothing is read while no block is new,
    and the last few blocks are read again (a node may announce a block before it serves its logs)."""
    asked: list[tuple[int, int | str]] = []
    numbers: list[int] = []

    class Client:
        @property
        def block_number(self) -> int:
            numbers.append(1)
            return 20

        def logs(self, contract: object, names: list[str], task_id: int, start: int, latest: int | str) -> list:
            asked.append((start, latest))
            split = {"tree": 1, "node": 1, "feature": 3, "threshold": 2, "sides": [5, 7, 3, -5, 9, 4]}
            return [SimpleNamespace(name="NodeSplit", args=split)] if start == 0 else []

        def fresh_logs(self, *args: Any) -> list:
            return fresh(self.logs)(*args)

    task = SimpleNamespace(client=Client(), contract=None)
    announced = [12]
    log = TreeLog(task, 7, lambda: announced[0])  # type: ignore[arg-type]
    log.refresh()
    assert asked == [(0, "latest")] and numbers == [] and log.next_block == 13
    assert log.splits == {1: {1: (3, 2)}}
    assert log.totals == {1: {2: Totals(5, 7, 3), 3: Totals(-5, 9, 4)}}  # the children's, from the sides
    log.refresh()  # nothing announced since: no request at all
    assert len(asked) == 1
    announced[0] = 15
    log.refresh()
    assert asked[-1] == (13 - RESCAN_BLOCKS, "latest") and log.next_block == 16
    announced[0] = -1  # the subscription dropped: the node is asked for its number
    log.refresh()
    assert numbers == [1] and asked[-1] == (16 - RESCAN_BLOCKS, 20) and log.next_block == 21


def test_after_an_outage_a_party_asks_the_chain_what_it_sent_again() -> None:
    """A node restarted from a saved state can lose the blocks mined since the save: a party that remembered its
    vote as sent must look again (every party of a run once believed it had voted, and failed its submission with
    ``DidNotVote`` when the others closed the step), and its noted block numbers may be past the node's new head."""
    asked: list[tuple[str, int]] = []

    def logs(contract: object, names: list[str], task_id: int, start: int, latest: int | str = "latest") -> list:
        asked.append((names[0], start))
        return []  # the vote is gone

    task = SimpleNamespace(client=SimpleNamespace(block_number=12, logs=logs, forget_nonces=lambda: None))
    task.contract = None
    node = _node(task=task, address="0x" + "ab" * 20)
    sent = node.sent
    sent.seen = {("VotesSubmitted", 4, 2)}
    node.ahead.ahead = {(4, 2)}
    sent.fresh_from = (4, 0)
    node.trees.next_block = 98
    node.trees.level_starts = {(4, 0): (90, 0), (4, 2): (97, 0)}
    node.chain.level_scan = 98
    assert sent.has(["VotesSubmitted"], 4, 2) and asked == []  # remembered: no read
    node.forget_recent_chain()
    assert node.trees.level_starts == {}
    assert node.chain.level_scan == 0 and node.trees.next_block == 0
    assert node.ahead.ahead == set()  # a vote sent ahead may be gone too: it may send it again
    assert not sent.has(["VotesSubmitted"], 4, 2)  # read again, and not there: it votes again
    assert ("VotesSubmitted", 0) in asked  # from a level start the node still has, not block 97


def test_a_party_seeds_its_training_noise_from_its_key_unless_an_experiment_gives_a_seed() -> None:
    """Without an experiment's seed the DP noise is keyed to the party's key and task (``secret_noise_seed``), so a
    node restarted mid-level (or before its join was mined) draws what it drew before; with one, the experiment's seed
    (the simulator's streams)."""

    def node(key: bytes, task_id: int, seed: int | None) -> Any:
        task = SimpleNamespace(address="0x" + "12" * 20, client=SimpleNamespace(chain_id=31337))
        return _node(
            account=SimpleNamespace(key=key), task=task, task_id=task_id, settings=NodeSettings(seed=seed)
        ).joiner

    key = bytes(range(32))
    assert node(key, 3, None).noise_seed() == node(key, 3, None).noise_seed()  # a restart: the same stream
    # the join's sketch and PSD noise too: a node restarted before its join was mined sends the same payload
    first, again, other = (
        [rng.random(3).tolist() for rng in n.rngs()]
        for n in (node(key, 3, None), node(key, 3, None), node(bytes(range(1, 33)), 3, None))
    )
    assert first == again and first != other and first[0] != first[1]
    assert node(key, 3, None).noise_seed() != node(key, 4, None).noise_seed()
    assert node(key, 3, None).noise_seed() != node(bytes(range(1, 33)), 3, None).noise_seed()
    assert node(key, 3, 11).noise_seed() == 11


def _ahead_node() -> Any:
    """A party node with only what the votes sent ahead read: three parties, itself the second."""
    node = _node(parties=["0xA", "0xB", "0xC"], address="0xB")
    node.chain.trees = SimpleNamespace(splits={}, level_starts={}, voting_closed={}, next_block=0)
    return node


def test_votes_go_ahead_only_from_the_submissions_the_chain_accepted() -> None:
    """The submissions a party holds (its own, those it endorsed) serve when they are from exactly the parties the
    level's ``HistogramsClosed`` marks (bit p for party p), in party order; otherwise, as when a party it endorsed
    did not get in while one it refused did (as many, other parties), it votes when the level opens instead."""
    node = _ahead_node()
    ctx = LevelContext(0, 1, [2, 3], np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0))
    mine, a, c = ["mine"], ["a"], ["c"]
    held = node.resolver.held_submissions
    assert held(ctx, 0b111) is None  # endorsed nobody: nothing held
    node.endorser.endorsed[(0, 1)] = {"0xC": c, "0xA": a}
    ctx.histograms = mine
    assert held(ctx, 0b101) == [a, c]  # its own not submitted: the two it endorsed
    node.sent.seen.add(("HistogramsSubmitted", 0, 1))
    assert held(ctx, 0b111) == [a, mine, c]
    assert held(ctx, 0b011) is None  # the chain took one fewer than this party holds
    node.endorser.endorsed[(0, 1)] = {"0xA": a}
    assert held(ctx, 0b110) is None  # as many as held, but 0xC instead of 0xA
    assert held(ctx, 0b011) == [a, mine]
    ctx.from_events = True  # a resolution from the endorsed copies failed: they are not trusted
    assert held(ctx, 0b011) is None


def test_rows_routed_ahead_serve_the_level_only_where_the_chain_split_alike() -> None:
    node = _ahead_node()
    ids = np.array([4, 5, 6, 7])
    levels = node.levels
    levels.routed = (0, 2, (4, 5, 6, 7), {2: (1, 3), 3: (0, 2)}, ids)
    assert levels.routed_ahead(0, 2, [4, 5, 6, 7]) is None  # the chain's splits not known yet
    node.trees.splits[0] = {1: (2, 2), 2: (1, 3), 3: (0, 2)}
    assert levels.routed_ahead(0, 2, [4, 5, 6, 7]) is ids
    assert levels.routed_ahead(0, 2, [4, 5]) is None  # another level
    assert levels.routed_ahead(1, 2, [4, 5, 6, 7]) is None  # another tree
    node.trees.splits[0] = {1: (2, 2), 2: (1, 4), 3: (0, 2)}  # node 2 split at another threshold
    assert levels.routed_ahead(0, 2, [4, 5, 6, 7]) is None


@pytest.mark.parametrize(
    ("depth", "level", "fresh_from", "voted", "blocks", "start"),
    [
        # a level's votes sent ahead: from the level before's start
        (6, 1, (5, 1), (4, 2), {(4, 0): 90, (4, 1): 95, (4, 2): 99}, 95),
        # at a tree's last level they are the next tree's root ballot: from that last level's start, before the root's
        (3, 2, (5, 1), (5, 0), {(4, 1): 80, (4, 2): 90, (5, 0): 99}, 90),
    ],
    ids=["next-level", "next-root"],
)
def test_a_party_that_first_looks_at_a_resolving_level_reads_the_votes_it_sent_ahead_from_the_chain(
    depth: int,
    level: int,
    fresh_from: tuple[int, int],
    voted: tuple[int, int],
    blocks: dict[tuple[int, int], int],
    start: int,
) -> None:
    """Votes sent ahead belong to the step after the resolving one (the next level, or, the tree ending there, the
    next tree's root): a party that starts following the task there (a restart, an outage) may have sent them
    already, so those steps are not ones it followed from its start and its vote record is read from the chain, from
    where the votes sent ahead are (otherwise it would skip the histograms of a level that opened with them)."""
    node = _ahead_node()
    node.session.params = SimpleNamespace(depth=depth)
    resolving = TaskState("0x0", Status.TRAINING, Phase.RESOLVING, 4, level, 0b1, 0, 120, 0)
    node.session.task = SimpleNamespace(state=lambda task_id: resolving)

    def lagging(*args: object) -> None:
        raise ChainLag("not served yet")  # ends the look right after the state is read

    node.context = lagging
    assert node.step() is False
    assert node.sent.fresh_from == fresh_from and node.chain.again
    asked: list[tuple[str, int]] = []

    def logs(contract: object, names: list[str], task_id: int, start: int, latest: int | str = "latest") -> list:
        asked.append((names[0], start))
        event = SimpleNamespace(args={"tree": voted[0], "level": voted[1], "party": node.address})
        return [event]  # its votes sent ahead, before the level started

    node.session.task = SimpleNamespace(client=SimpleNamespace(logs=logs), contract=None)
    starts = {key: (block, 0) for key, block in blocks.items()}
    node.chain.trees = SimpleNamespace(level_starts=starts, next_block=0)
    node.chain.level_scan = 100
    assert node.sent.has(["VotesSubmitted"], *voted)
    assert asked == [("VotesSubmitted", start)]


@pytest.mark.parametrize(
    ("blocks", "counted"),
    [({(4, 0): 80, (4, 1): 90, (5, 0): 99}, True), ({(4, 0): 80, (4, 1): 90, (4, 2): 95, (5, 0): 99}, False)],
    ids=["tree-stopped-there", "tree-went-on"],
)
def test_a_root_ballot_sent_where_a_tree_stopped_short_counts_only_if_the_chain_stopped_it_there(
    blocks: dict[tuple[int, int], int], counted: bool
) -> None:
    """A party that computed that tree 4 stops at level 1 (depth 3) sent tree 5's root ballot with that level's
    resolution (block 92). The chain counts it only if tree 4 did stop there; the party, following the task from its
    start, reads which from the chain: its ballot is after the start of tree 4's last level exactly when that level
    was level 1. Otherwise it votes in the root's round (a missed vote would leave it out of the task)."""
    node = _ahead_node()
    sent = node.sent
    sent.fresh_from = (0, 1)  # followed from the start
    sent.early_roots = {5}
    node.session.params = SimpleNamespace(depth=3)
    asked: list[int] = []

    def logs(contract: object, names: list[str], task_id: int, start: int, latest: int | str = "latest") -> list:
        if names == ["LevelStarted"]:
            return []  # no level started that the node does not know of
        asked.append(start)
        ballot = SimpleNamespace(block_number=92, log_index=1, args={"tree": 5, "level": 0, "party": node.address})
        return [e for e in [ballot] if e.block_number >= start]

    node.session.task = SimpleNamespace(client=SimpleNamespace(logs=logs, block_number=100), contract=None)
    node.chain.level_scan = 100
    starts = {key: (block, 0) for key, block in blocks.items()}
    node.chain.trees = SimpleNamespace(level_starts=starts, next_block=0)
    assert sent.has(["VotesSubmitted"], 5, 0) is counted
    assert asked == [blocks.get((4, 2), 90)]  # from tree 4's last level's start
    if counted:
        # the next level started in the ballot's block, after it (a network that mines at intervals): not counted
        sent.seen.clear()
        starts[(4, 2)] = (92, 3)
        assert sent.has(["VotesSubmitted"], 5, 0) is False
    sent.early_roots, looked = set(), len(asked)
    assert sent.has(["VotesSubmitted"], 6, 0) is False and len(asked) == looked  # followed from its start: not read


def test_a_party_that_owes_a_level_nothing_more_waits_for_the_next_to_open() -> None:
    """Quiet (``Relayer.owes_nothing_more``): its histograms handed to the relayer, its ballot too where the next
    level votes, and no resolution share; never the relayer itself."""
    node = _node(
        parties=["0xA", "0xB", "0xC", "0xD"],
        index=2,
        relay=SimpleNamespace(relayer=lambda level: level % 4),
        params=SimpleNamespace(depth=4, nbins=17),
        cfg=SimpleNamespace(trees=5, voted_trees=5),
    )
    owes_nothing_more, sent = node.relayer.owes_nothing_more, node.sent
    sent.handed = {(3, 1): 0.0}
    sent.relayed = {(3, 2)}
    narrow = SimpleNamespace(tree=3, level=1, open_nodes=[2, 3])  # two nodes: one resolution, the relayer's
    assert owes_nothing_more(narrow)
    sent.relayed = set()
    assert not owes_nothing_more(narrow)  # its ballot is still to send
    node.session.cfg = SimpleNamespace(trees=5, voted_trees=3)  # tree 3 draws: no ballot
    assert owes_nothing_more(narrow)
    assert not owes_nothing_more(SimpleNamespace(tree=3, level=2, open_nodes=[4, 5]))  # it relays level 2
    sent.handed = {(3, 0): 0.0}
    wide = SimpleNamespace(tree=3, level=0, open_nodes=list(range(1, 60)))  # runs to every party
    assert resolution_share(59, 4, 17, node.settings.resolve_batch) < 59
    assert not owes_nothing_more(wide)
    sent.handed = {}
    assert not owes_nothing_more(narrow)  # nothing handed


def test_the_parties_taking_part_are_those_the_step_before_accepted() -> None:
    chain = _node(parties=["0xA", "0xB", "0xC"]).chain
    chain.trees = SimpleNamespace(closed={(4, 1): 0b111, (4, 2): 0b101})
    assert chain.taking_part(4, 3) == {"0xA", "0xC"}
    assert chain.taking_part(4, 2) == {"0xA", "0xB", "0xC"}
    assert chain.taking_part(0, 0) == {"0xA", "0xB", "0xC"}


def test_the_relayer_folds_its_resolution_only_when_it_can_size_it_and_holds_the_submissions() -> None:
    """``Relayer.folded_resolution``: never before this party resolved a node itself (``Resolver.node_gas``), nor
    from other submissions than the batch sends, nor for a share wider than one call; otherwise run 0 of the level,
    signed with the next nonce, granting twice the costliest node seen per node."""
    made: list[tuple] = []
    relay = SimpleNamespace(
        request=lambda kind, tree, level, fn, args, gas: made.append((kind, fn, args[1], gas)) or SimpleNamespace(),
        keep_own=lambda: made.append(("nonce",)),
    )
    node = _node(
        parties=["0xA", "0xB", "0xC", "0xD"], address="0xB", task_id=5, params=SimpleNamespace(nbins=3, depth=4)
    )
    node.session.relay = relay
    hist = NodeHistograms((0, 1), ((1, 1, 1), (1, 1, 1)), ((2, 2, 2), (2, 2, 2)), ((3, 3, 3), (3, 3, 3)))
    held = {p: [hist, hist] for p in ("0xA", "0xB", "0xC")}
    node.resolver.held_by_party = lambda ctx: held  # type: ignore[method-assign]
    ctx = SimpleNamespace(tree=2, level=1, open_nodes=[2, 3])
    folded = node.relayer.folded_resolution
    assert node.resolver.node_gas == 0
    assert folded(ctx, {"0xA", "0xB", "0xC"}) is None and made == []
    node.resolver.node_gas = 400_000
    assert folded(ctx, {"0xA", "0xB"}) is None and made == []  # another set of submissions
    assert folded(ctx, {"0xA", "0xB", "0xC"}) is not None
    assert made == [("resolution", "resolveNodes", [2, 3], 2 * 400_000 * 2 + 200_000), ("nonce",)]


def test_histograms_handed_over_and_not_landed_are_submitted_as_the_partys_own() -> None:
    """Past the patience, a party submits the level's histograms itself: not handed to the same relayer again (it
    may be answering and never sending), and with the relayer's requests expired by then (their time to live)."""
    from fgbdt_chain.node.party.relay import RELAY_TTL_SECONDS, relay_patience, relay_ttl

    assert relay_patience(RELAY_TTL_SECONDS) > RELAY_TTL_SECONDS + 1  # the deadline's seconds round down
    hist = NodeHistograms((0, 1), ((1, 1, 1), (1, 1, 1)), ((2, 2, 2), (2, 2, 2)), ((3, 3, 3), (3, 3, 3)))
    handed: list[int] = []
    sent: list[int] = []
    node = _node(
        parties=["0xA", "0xB", "0xC"],
        address="0xB",
        task_id=5,
        account=SimpleNamespace(address="0xB"),
        cfg=SimpleNamespace(quorum_num=2, quorum_den=3),
        params=SimpleNamespace(nbins=3),
        relay=SimpleNamespace(ttl=relay_ttl(5.0), forget_nonce=lambda: None),
        task=SimpleNamespace(submit_histograms=lambda *args: sent.append(args[3]) or SimpleNamespace(gas_used=1)),
    )
    # blocks every 5 s: the requests live 13 s, and the party waits past that
    assert node.session.relay_patience() == relay_patience(13) > 13 + 1
    node.levels.my_histograms = lambda ctx: [hist]  # type: ignore[method-assign]
    node.asker.collect = lambda ctx, hists, need, deadline: (["e1", "e2"], [])  # type: ignore[method-assign]
    node.relayer.hand_over_histograms = (  # type: ignore[method-assign]
        lambda ctx, hists, endorsements: handed.append(ctx.level) or True
    )
    ctx = SimpleNamespace(tree=3, level=0, open_nodes=[1])
    node.work.send_histograms(ctx, deadline=100)
    assert (handed, sent) == ([0], [])  # handed to the relayer
    node.sent.own_submission.add((3, 0))
    node.work.send_histograms(ctx, deadline=100)
    assert (handed, sent) == ([0], [0]) and ("HistogramsSubmitted", 3, 0) in node.sent.seen


def test_each_look_at_the_chain_tells_the_relay_inbox_the_tasks_tree() -> None:
    """``step`` notes the task's tree in the relay inbox (``RelayInbox.note_tree``): a relayer whose levels a tree
    ended before still takes the next tree's requests."""
    node = _ahead_node()
    node.sent.fresh_from = (0, 0)
    node.session.params = SimpleNamespace(depth=4)
    state = TaskState("0x0", Status.TRAINING, Phase.HISTOGRAMS, 7, 2, 0b1, 0, 120, 0)
    node.session.task = SimpleNamespace(state=lambda task_id: state)
    noted: list[int] = []
    node.session.relay = SimpleNamespace(inbox=SimpleNamespace(note_tree=noted.append))

    def lagging(*args: object) -> None:
        raise ChainLag("not served yet")  # ends the look right after the state is read

    node.context = lagging
    assert node.step() is False
    assert noted == [7]


def test_a_verifier_unreachable_two_levels_running_is_not_waited_for_past_the_quorum() -> None:
    """Once a quorum of endorsements is in, a verifier that was unreachable when the last collection ended is asked
    once and not waited for (a party gone for good cost every other party the patience at every level); one that
    answers again is waited for again. Before the quorum, or past half of the step's blocks, the usual rules hold."""
    from fgbdt_chain.ledger.spec.reference import NEUTRAL

    asked: list[str] = []
    reachable = {"0xB": True, "0xC": True, "0xD": False}

    def ask(party: str, body: str) -> tuple[Any, str, bool]:
        asked.append(party)
        if reachable[party]:
            return (bytes(65), NEUTRAL), "", False
        return None, "unreachable (ConnectionRefusedError)", True

    node = _node(
        parties=["0xA", "0xB", "0xC", "0xD"],
        address="0xA",
        task_id=5,
        cfg=SimpleNamespace(step_blocks=100),
        settings=NodeSettings(endorse_patience_seconds=0.3, poll_seconds=0.01),
    )
    node.asker.ask = ask  # type: ignore[method-assign]
    node.chain.latest_block = lambda: 0  # type: ignore[method-assign]
    hist = NodeHistograms((0, 1), ((1, 1, 1), (1, 1, 1)), ((2, 2, 2), (2, 2, 2)), ((3, 3, 3), (3, 3, 3)))
    ctx = SimpleNamespace(tree=1, level=0)

    def collect(level: int) -> list[str]:
        asked.clear()
        ctx.level = level
        endorsements, _ = node.asker.collect(ctx, [hist], 2, deadline=100)  # type: ignore[arg-type]
        assert endorsements is not None and len(endorsements) == 2
        return list(asked)

    assert collect(0).count("0xD") > 1  # gone since this level: asked until the patience ran out
    assert node.asker.gone == {"0xD"}
    assert collect(1).count("0xD") == 1  # unreachable at the last level too: asked once, not waited for
    reachable["0xD"] = True
    assert collect(2).count("0xD") == 1 and node.asker.gone == set()  # answered again
    reachable["0xD"] = False
    assert collect(3).count("0xD") > 1  # gone again: waited for once more
    node.chain.latest_block = lambda: 50  # type: ignore[method-assign]
    node.asker.gone = set()
    assert collect(4).count("0xD") == 1  # half of the step's 100 blocks passed: no time to wait
