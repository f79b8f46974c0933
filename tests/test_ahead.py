"""The next level's endorsements ahead (``node.ahead``): the candidates a party computes from the relayer's ballots are
the chain's, the book keeps what a verifier endorsed ahead apart until the level is confirmed, and a verifier signs
ahead only what it would sign at the level. The whole exchange runs on a real chain in ``tests/e2e``."""

from __future__ import annotations

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


def test_a_ballots_message_round_trips_and_a_malformed_one_says_what_is_wrong() -> None:
    parties = ["0xA", "0xB"]
    message = ballots_message(1, 2, 3, {"0xA": [1, -1], "0xB": [0, 2]})
    assert parse_ballots(message, parties) == (1, 2, 3, {"0xA": [1, -1], "0xB": [0, 2]})
    for bad, reason in [
        ([], "JSON object"),
        ({**message, "tree": -1}, "tree must be a non-negative integer"),
        ({**message, "level": True}, "level must be a non-negative integer"),
        ({**message, "ballots": {}}, "non-empty object"),
        ({**message, "ballots": {"0xC": [1]}}, "0xC is not a party"),
        ({**message, "ballots": {"0xA": [1, "2"]}}, "list of integers"),
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
    book.put_ballots(4, 1, {"0xA": [1]})  # trees before the last two are forgotten
    assert set(book.ballots) == {(4, 1)} and set(book.verdicts) == set()


def test_a_party_waits_for_its_own_exchange_ahead_only_while_it_runs() -> None:
    book = AheadBook()
    assert book.result(0, 1, timeout=0.0) is None  # none ran
    assert book.start(0, 1) and not book.start(0, 1)
    level = AheadLevel(0, 1, (2, 3), ((0, 1), (1, 2)), np.zeros(3, dtype=np.int64))
    done = AheadResult(level, [_hist()], {})
    threading.Timer(0.05, book.finish, (0, 1, done)).start()
    started = time.monotonic()
    assert book.result(0, 1, timeout=30.0) is done
    assert time.monotonic() - started < 30.0  # woken by the finish, not by the timeout
    assert not book.start(0, 1)  # it ran: not again
    assert book.start(0, 2)
    assert book.result(0, 2, timeout=0.0) is None  # still running: the caller asks after the block


def test_a_level_opened_as_computed_needs_the_same_nodes_candidates_and_rows() -> None:
    level = AheadLevel(0, 1, (2, 3), ((0, 1), (1, 2)), np.array([0, 1, -1]))
    assert level.opened_as([2, 3], [(0, 1), (1, 2)])
    assert not level.opened_as([2, 3], [(0, 1), (2, 1)])
    assert not level.opened_as([2], [(0, 1)])
    assert level.same([2, 3], [(0, 1), (1, 2)], np.array([0, 1, -1]))
    assert not level.same([2, 3], [(0, 1), (1, 2)], np.array([0, 0, -1]))


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
    node.ahead.levels[(1, 1)] = AheadLevel(1, 1, (2, 3), ((0, 1), (0, 1)), np.zeros(3, dtype=np.int64))
    node.lock = threading.RLock()
    node._endorsed_changed = threading.Condition(node.lock)
    node._endorsed, node._endorsed_roots = {}, {}
    node._routed, node._contexts = None, {}  # nothing of another level resolved here
    return node


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
    status, answer = node.endorse_ahead(_request(node, hists))
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
    status, answer = node.endorse_ahead(_request(node, hists, party=node.parties[2]))
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
        got, answer = node.endorse_ahead(body)
        assert (got, detail in str(answer["detail"])) == (status, True), (body, answer)
    assert node.endorse_ahead(_request(node, good, level=2))[1]["retry"] is True  # asked again shortly
    node.ahead.confirm(1, 1, opened_as=False)  # the chain opened the level otherwise
    status, answer = node.endorse_ahead(_request(node, good))
    assert (status, answer["retry"]) == (409, False)
    node.party = None  # a node that has not started
    assert node.endorse_ahead(_request(node, good))[0] == 409
