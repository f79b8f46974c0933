"""The next level's endorsements ahead (``node.ahead``): the candidates a party computes from the relayer's ballots are
the chain's, the book keeps what a verifier endorsed ahead apart until the level is confirmed, and a verifier signs
ahead only what it would sign at the level. The whole exchange runs on a real chain in ``tests/e2e``."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from eth_abi import encode
from eth_account import Account

from fgbdt_chain.ledger import reference as ref
from fgbdt_chain.ledger.encoding import endorsement_digest, merkle_root, node_block, node_hash, recover_signer
from fgbdt_chain.ledger.reference import ONE, NodeHistograms
from fgbdt_chain.node.ahead import (
    AheadBook,
    AheadLevel,
    AheadResult,
    ahead_candidates,
    ballot_votes,
    ballots_message,
    may_endorse_ahead,
    parse_ballots,
)
from fgbdt_chain.node.endorsement import EndorsementRule
from fgbdt_chain.node.party_node import NodeSettings, PartyNode
from fgbdt_chain.node.relay import SELECTORS


@pytest.mark.parametrize("rule", [ref.TIE_LOWER_INDEX, ref.TIE_HASHED])
def test_the_candidates_ahead_are_each_nodes_top2_of_the_ballots_cut_to_the_children_that_opened(rule: int) -> None:
    rng = np.random.default_rng(3)
    previous = [4, 5, 7]
    opened = [8, 9, 14, 15]  # node 5 made a leaf: its children's votes are not counted
    ballots = [rng.integers(-1, 6, size=2 * len(previous)).tolist() for _ in range(4)]
    got = ahead_candidates(ballots, previous, opened, 6, rule, tree=2)
    cut = [ref.ahead_ballot(b, previous, opened) for b in ballots]
    assert got == tuple(ref.top2([c[i] for c in cut], 6, rule, 2, n) for i, n in enumerate(opened))
    with pytest.raises(ValueError, match="two per node"):
        ahead_candidates([b[:-1] for b in ballots], previous, opened, 6, rule, tree=2)
    with pytest.raises(ValueError, match="not a feature index"):
        ahead_candidates([[9] * 6] * 4, previous, opened, 6, rule, tree=2)


def test_a_relayed_ballots_votes_are_read_from_its_calldata() -> None:
    data = SELECTORS["votes"] + encode(["uint256", "uint256", "uint256", "int256[]"], [7, 3, 2, [5, -1, 0, 12]])
    assert ballot_votes(data) == (3, 2, [5, -1, 0, 12])


def test_a_ballots_message_is_signed_by_its_relayer_and_a_malformed_one_says_what_is_wrong() -> None:
    parties = ["0xA", "0xB"]
    relayer = Account.create()
    message = ballots_message(1, 2, 3, {"0xA": [1, -1], "0xB": [0, 2]}, bytes(relayer.key))
    assert parse_ballots(message, parties) == (1, 2, 3, {"0xA": [1, -1], "0xB": [0, 2]}, relayer.address)
    forged = {**message, "ballots": {"0xA": [1, -1], "0xB": [0, 3]}}  # another ballot under the same signature
    assert parse_ballots(forged, parties)[4] != relayer.address
    for bad, reason in [
        ([], "JSON object"),
        ({**message, "tree": -1}, "tree must be a non-negative integer"),
        ({**message, "level": True}, "level must be a non-negative integer"),
        ({**message, "ballots": {"0xA": [1]}}, "one ballot of every party"),
        ({**message, "ballots": {"0xA": [1], "0xC": [1]}}, "one ballot of every party"),
        ({**message, "ballots": {"0xA": [1, "2"], "0xB": [1]}}, "the ballot of 0xA must be"),
        ({**message, "ballots": {"0xA": [2**70], "0xB": [1]}}, "the ballot of 0xA must be"),  # past int64
        ({**message, "ballots": {"0xA": [-2], "0xB": [1]}}, "the ballot of 0xA must be"),
        ({**message, "ballots": {"0xA": [], "0xB": [1]}}, "the ballot of 0xA must be"),
        ({**message, "ballots": {"0xA": [0] * 257, "0xB": [1]}}, "the ballot of 0xA must be"),
        ({**message, "signature": "0x12"}, "signature is not valid"),
        ({**message, "signature": "zz"}, "signature is not valid"),
    ]:
        with pytest.raises(ValueError, match=reason):
            parse_ballots(bad, parties)


def test_only_levels_below_a_root_under_the_statistical_rule_without_noise_are_endorsed_ahead() -> None:
    assert may_endorse_ahead(1, ref.ENDORSE_STATISTICAL, private=False)
    assert not may_endorse_ahead(0, ref.ENDORSE_STATISTICAL, private=False)  # the root's test measures the claims
    assert not may_endorse_ahead(3, ref.ENDORSE_OVERLAP, private=False)  # its verdict reads the candidates
    assert not may_endorse_ahead(3, ref.ENDORSE_STATISTICAL, private=True)  # noise drawn as the level opens


def _hist(scale: int = 1) -> NodeHistograms:
    """One node's histograms that keep the binary loss's rules (equal candidate totals, the per-bin bounds)."""
    n = ((3, 2, 0), (1, 4, 0))
    g = tuple(tuple(c * ONE // 8 * scale for c in row) for row in n)
    h = tuple(tuple(c * ONE // 8 for c in row) for row in n)
    return NodeHistograms((0, 1), g, h, n)


def test_the_book_keeps_what_was_endorsed_ahead_apart_until_the_level_is_confirmed() -> None:
    book = AheadBook()
    assert book.put_ballots(1, 2, {"0xA": [1]}) and not book.put_ballots(1, 2, {"0xA": [2]})
    assert book.ballots[(1, 2)] == {"0xA": [1]}  # a message sent twice changes nothing
    hist = [_hist()]
    assert book.hold(1, 2, "0xA", hist, b"r") is None  # not confirmed yet: held
    assert book.confirm(1, 2, opened_as=True) == {"0xA": (hist, b"r")}
    assert book.confirm(1, 2, opened_as=True) == {}  # once
    assert book.hold(1, 2, "0xC", hist, b"s") is True  # after the confirmation: counts at once
    assert book.hold(1, 3, "0xA", hist, b"r") is None
    assert book.confirm(1, 3, opened_as=False) == {}  # opened otherwise: dropped
    assert book.hold(1, 3, "0xC", hist, b"s") is False
    assert not book.put_ballots(1, 3, {"0xA": [1]})  # ballots after the level opened start nothing
    book.put_ballots(4, 1, {"0xA": [1]})  # trees before the last two are forgotten
    assert set(book.ballots) == {(4, 1)} and set(book.verdicts) == set() and book.running == {(4, 1)}


def test_a_party_waits_for_its_own_exchange_ahead_only_while_it_runs() -> None:
    book = AheadBook()
    assert book.result(0, 1, timeout=0.0) is None  # none ran
    assert book.put_ballots(0, 1, {"0xA": [1]})  # the ballots claim the exchange, before its thread starts
    level = AheadLevel(0, 1, (2, 3), ((0, 1), (1, 2)), ((1, 0, 3),), np.zeros(3, dtype=np.int64))
    done = AheadResult(level, [_hist()], {})
    threading.Timer(0.05, book.finish, (0, 1, done)).start()
    started = time.monotonic()
    assert book.result(0, 1, timeout=30.0) is done
    assert time.monotonic() - started < 30.0  # woken by the finish, not by the timeout
    assert book.put_ballots(0, 2, {"0xA": [1]})
    assert book.result(0, 2, timeout=0.0) is None  # still running: the caller asks after the block


def test_a_level_opened_as_computed_needs_the_same_nodes_candidates_splits_and_rows() -> None:
    level = AheadLevel(0, 1, (2, 3), ((0, 1), (1, 2)), ((1, 4, 7),), np.array([0, 1, -1]))
    chain = {1: (4, 7)}
    assert level.opened_as([2, 3], [(0, 1), (1, 2)], chain)
    assert not level.opened_as([2, 3], [(0, 1), (2, 1)], chain)
    assert not level.opened_as([2], [(0, 1)], chain)
    assert not level.opened_as([2, 3], [(0, 1), (1, 2)], {1: (4, 8)})  # the root split elsewhere: rows moved
    assert not level.opened_as([2, 3], [(0, 1), (1, 2)], {})  # its split not read yet
    assert level.same([2, 3], [(0, 1), (1, 2)], chain, np.array([0, 1, -1]))
    assert not level.same([2, 3], [(0, 1), (1, 2)], chain, np.array([0, 0, -1]))
    # what a request ahead says it was built for, as it arrives in JSON
    sent = json.loads(json.dumps(level.assumed()))
    assert level.agrees(sent) and not level.agrees({**sent, "candidates": [[0, 1], [2, 1]]}) and not level.agrees(None)


def _verifier() -> Any:
    """A party node with what checking ahead reads: three parties, itself the second, the binary loss, a level of
    nodes 2 and 3 of tree 1 computed ahead."""
    node: Any = object.__new__(PartyNode)
    node.task_id = 5
    node.parties = ["0x" + "aa" * 20, "0x" + "bb" * 20, "0x" + "cc" * 20]
    node.address = node.parties[1]
    node.account = Account.create()
    node.task = SimpleNamespace(client=SimpleNamespace(chain_id=31337), address="0x" + "11" * 20)
    node.settings = NodeSettings()
    node.relay = object()
    node.excluded = False
    node.party = SimpleNamespace(rows=None, privacy=SimpleNamespace(private=False))
    node.cfg = SimpleNamespace(endorse_rule=ref.ENDORSE_STATISTICAL, objective=0, epsilon=0)
    node.rule = EndorsementRule()
    node.params = SimpleNamespace(nbins=3)
    node.estimators = [None, None, None]
    node._grads = (np.zeros(3), np.zeros(3), np.zeros(3))
    node.ahead = AheadBook()
    node.ahead.levels[(1, 1)] = AheadLevel(1, 1, (2, 3), ((0, 1), (0, 1)), ((1, 0, 1),), np.zeros(3, dtype=np.int64))
    node.lock = threading.RLock()
    node._endorsed_changed = threading.Condition(node.lock)
    node._endorsed, node._endorsed_roots = {}, {}
    node._routed, node._contexts = None, {}  # nothing of another level resolved here
    return node


ASSUMED = {"open": [2, 3], "candidates": [[0, 1], [0, 1]], "splits": [[1, 0, 1]]}
"""What the asker built its histograms for: the level ``_verifier`` computed."""


def _request(node: Any, hists: list[NodeHistograms], **changes: Any) -> dict[str, Any]:
    body = {
        "task": node.task_id,
        "tree": 1,
        "level": 1,
        "party": node.parties[0],
        "nodes": [[str(v) for v in node_block(x)] for x in hists],
    }
    return {**body, **changes}


def test_a_verifier_signs_ahead_what_keeps_the_exact_rules_and_keeps_it_apart_until_the_level_opens() -> None:
    node = _verifier()
    hists = [_hist(), _hist(2)]
    status, answer = node.endorse_ahead(_request(node, hists), ASSUMED)
    assert status == 200, answer
    root = merkle_root([node_hash(x) for x in hists])
    digest = endorsement_digest(31337, node.task.address, 5, 1, 1, node.parties[0], root, ref.NEUTRAL)
    assert recover_signer(digest, bytes.fromhex(answer["signature"][2:])) == node.account.address
    assert node._endorsed == {}  # held, not yet what this party votes and resolves from
    assert node.ahead.held[(1, 1)] == {node.parties[0]: (hists, root)}
    for party, (held, r) in node.ahead.confirm(1, 1, opened_as=True).items():
        node._keep_endorsed(1, 1, party, held, r)
    assert node._endorsed[(1, 1)] == {node.parties[0]: hists}
    # once open, a request ahead is sent to the level
    status, answer = node.endorse_ahead(_request(node, hists, party=node.parties[2]), ASSUMED)
    assert (status, answer["retry"]) == (409, False)


def test_a_verifier_refuses_ahead_what_it_would_refuse_at_the_level_and_says_when_to_ask_again() -> None:
    node = _verifier()
    good = [_hist(), _hist()]
    cases = [
        (_request(node, good, task=6), 422, "serves task 5 only"),
        (_request(node, good, party=node.address), 422, "cannot endorse itself"),
        (_request(node, good, party="0x" + "dd" * 20), 403, "not an approved member"),
        (_request(node, good, level=0), 422, "not endorsed before it opens"),
        (_request(node, good, level=2), 409, "not computed here yet"),
        (_request(node, good[:1]), 422, "expected 2 node blocks of 18 integers"),
        (_request(node, good, nodes=[["x"]]), 422, "integer lists"),
        (_request(node, [_hist(), _hist(20)]), 422, "the contract refuses these histograms"),  # |g| past n * ONE
    ]
    for body, status, detail in cases:
        got, answer = node.endorse_ahead(body, ASSUMED)
        assert (got, detail in str(answer["detail"])) == (status, True), (body, answer)
    assert node.endorse_ahead(_request(node, good, level=2), ASSUMED)[1]["retry"] is True  # asked again shortly
    # built for another level than this party computed (other ballots, other splits): never signed ahead
    for other in ({**ASSUMED, "candidates": [[1, 0], [0, 1]]}, {**ASSUMED, "splits": [[1, 0, 2]]}, None):
        status, answer = node.endorse_ahead(_request(node, good), other)
        assert (status, answer["retry"]) == (409, False) and "computed otherwise" in answer["detail"]
    node.ahead.confirm(1, 1, opened_as=False)  # the chain opened the level otherwise
    status, answer = node.endorse_ahead(_request(node, good), ASSUMED)
    assert (status, answer["retry"]) == (409, False)
    node.party = None  # a node that has not started
    assert node.endorse_ahead(_request(node, good), ASSUMED)[0] == 409


class _Pool:
    """Records what is submitted instead of running it."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Any, ...]] = []

    def submit(self, fn: Any, *args: Any) -> None:
        self.jobs.append((fn.__name__, *args))


def _computing() -> Any:
    """``_verifier`` that computes the level ahead itself: its own resolution of tree 1's root split node 1 (feature 0
    at threshold 1) and routed its rows, ballots come in."""
    node = _verifier()
    node.ahead = AheadBook()
    node._routed = (1, 1, (2, 3), {1: (0, 1)}, np.array([2, 3, 3]))
    node._contexts = {(1, 0): SimpleNamespace(open_nodes=[1])}
    node.party = SimpleNamespace(rows=SimpleNamespace(slots=np.zeros((3, 4))), privacy=SimpleNamespace(private=False))
    node.cfg = SimpleNamespace(endorse_rule=ref.ENDORSE_STATISTICAL, objective=0, epsilon=0, tie_break=ref.TIE_HASHED)
    node.params = SimpleNamespace(nbins=3, depth=3)
    node._grad_tree = 1
    node._ahead_worker, node._asking_ahead, node._stopping = _Pool(), _Pool(), False
    node.log = lambda text: None
    return node


def test_a_party_computes_the_level_ahead_from_its_own_routing_and_the_relayers_ballots() -> None:
    node = _computing()
    ballots = {p: [1, 2] for p in node.parties}  # two votes per node of the level before: node 1's children
    assert node._ahead_level(1, 1) is None  # no ballots yet
    node.ahead.ballots[(1, 1)] = ballots
    found = node._ahead_level(1, 1)
    assert found is not None and node._ahead_level(1, 1) is found  # computed once
    assert found.open_nodes == (2, 3) and found.splits == ((1, 0, 1),)
    assert found.candidates == ahead_candidates(list(ballots.values()), [1], [2, 3], 4, ref.TIE_HASHED, 1)
    assert found.k_of_row.tolist() == [0, 1, 1]
    node.ahead = AheadBook()
    node.ahead.ballots[(1, 1)] = {p: [9, 9] for p in node.parties}  # votes past the 4 features
    assert node._ahead_level(1, 1) is None  # not ballots the chain would take: nothing ahead, no error


def test_only_the_levels_relayer_passes_ballots_on_and_only_for_the_tree_at_hand() -> None:
    node = _computing()
    node.address = node.parties[0]  # the receiver; party 1 relays level 1 and passes on the ballots of level 2
    relayer = Account.create()
    node.parties[1] = relayer.address
    ok = ballots_message(5, 1, 2, {p: [1, 2] for p in node.parties}, bytes(relayer.key))
    forged = ballots_message(5, 1, 2, ok["ballots"], bytes(Account.create().key))
    assert node.ahead_ballots(forged)[0] == 403
    assert node.ahead_ballots({**ok, "tree": 3})[0] == 422  # not the tree this party works on, nor the next
    assert node.ahead_ballots({**ok, "level": 3})[0] == 422  # past the depth
    assert node.ahead_ballots({**ok, "task": 6})[0] == 422
    assert node._ahead_worker.jobs == []
    assert node.ahead_ballots(ok) == (200, {})
    assert node._ahead_worker.jobs == [("_exchange_ahead", 1, 2)] and node.ahead.running == {(1, 2)}
    assert node.ahead_ballots(ok) == (200, {})  # sent twice: one exchange
    assert len(node._ahead_worker.jobs) == 1


def test_a_verifier_counts_what_it_endorsed_ahead_only_if_the_level_opened_as_it_computed() -> None:
    for chain_splits, counts in (({1: (0, 1)}, True), ({1: (0, 2)}, False)):
        node = _computing()
        node.ahead.ballots[(1, 1)] = {p: [1, 2] for p in node.parties}
        found = node._ahead_level(1, 1)
        assert found is not None
        hists = [_hist(), _hist()]
        node.ahead.hold(1, 1, node.parties[0], hists, b"root")
        node.trees = SimpleNamespace(splits={1: chain_splits})
        node.candidates = lambda ctx, found=found: list(found.candidates)
        node._confirm_ahead(SimpleNamespace(tree=1, level=1, open_nodes=[2, 3]))
        assert node.ahead.verdicts[(1, 1)] is counts
        assert node._endorsed == ({(1, 1): {node.parties[0]: hists}} if counts else {})


def test_a_relayer_passes_nothing_on_for_ballots_it_cannot_read() -> None:
    node = _computing()
    node.parties = [node.account.address, "0x" + "bb" * 20]
    node.address = node.parties[0]
    node._ahead_target = lambda ctx: ((1, 2), False)
    votes = SELECTORS["votes"] + encode(["uint256", "uint256", "uint256", "int256[]"], [5, 1, 2, [1, 0]])
    mine = SimpleNamespace(request=SimpleNamespace(data=votes, sender=node.parties[0]))
    truncated = SimpleNamespace(request=SimpleNamespace(data=SELECTORS["votes"] + bytes(96), sender=node.parties[1]))
    ctx = SimpleNamespace(tree=1, level=1)
    node._pass_ballots(ctx, [mine, truncated], set(node.parties))
    assert node._asking_ahead.jobs == [] and node.ahead.ballots == {}
    theirs = SimpleNamespace(request=SimpleNamespace(data=votes, sender=node.parties[1]))
    node._pass_ballots(ctx, [mine, theirs], {node.parties[0]})  # a party out of the task: nothing ahead
    assert node._asking_ahead.jobs == []
    node._pass_ballots(ctx, [mine, theirs], set(node.parties))
    assert [j[:2] for j in node._asking_ahead.jobs] == [("_tell", node.parties[1])]
    assert node.ahead.ballots[(1, 2)] == {p: [1, 0] for p in node.parties}
