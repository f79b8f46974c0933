"""The relayer's inbox (``node.party.relay.RelayInbox``): which ballots it holds for a level, which it refuses and
why, and when it hands them over. The relay on chain is tested in ``tests/contracts/test_ahead_votes.py`` and end to end
in ``tests/e2e``."""

from __future__ import annotations

import threading
import time

import pytest
from eth_account import Account

from fgbdt_chain.ledger.devnet.anvil import start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.wrappers.forwarder import ForwardRequest, sign_request
from fgbdt_chain.node.party.relay import (
    INTERVAL_SAMPLE_BLOCKS,
    RELAY_TTL_SECONDS,
    SELECTORS,
    RelayedRequest,
    RelayInbox,
    measured_block_seconds,
    relay_patience,
    relay_ttl,
    relayer_index,
)

FORWARDER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
TASK = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
CHAIN = 31337
KEYS = [Account.from_key(bytes([i + 1]) * 32) for i in range(4)]
PARTIES = [a.address for a in KEYS[:3]]  # the fourth key is no party


def _ballot(
    i: int,
    tree: int = 0,
    level: int = 1,
    *,
    to: str = TASK,
    data: bytes | None = None,
    deadline: int | None = None,
    signer: int | None = None,
) -> RelayedRequest:
    req = ForwardRequest(
        KEYS[i].address,
        to,
        0,
        200_000,
        7,
        int(time.time()) + RELAY_TTL_SECONDS if deadline is None else deadline,
        _votes_call(tree, level) if data is None else data,
    )
    return RelayedRequest(
        "votes", tree, level, req, sign_request(KEYS[i if signer is None else signer].key, req, CHAIN, FORWARDER)
    )


def _words(values: tuple) -> bytes:
    """The static head of a call's first arguments (a list among them left as a zero word)."""
    return b"".join((v if isinstance(v, int) else 0).to_bytes(32, "big") for v in values)


def _votes_call(tree: int, level: int, task: int = 5) -> bytes:
    """The head of a ``submitVotes`` call of task 5 ahead of (tree, level): the next level's."""
    return SELECTORS["votes"] + b"".join(v.to_bytes(32, "big") for v in (task, tree, level + 1))


def _inbox() -> RelayInbox:
    return RelayInbox(5, TASK, PARTIES, CHAIN, FORWARDER)


def test_a_ballot_crosses_the_wire_unchanged() -> None:
    b = _ballot(1)
    task, back = RelayedRequest.parse(b.message(5))
    assert (task, back) == (5, b)


def test_the_inbox_holds_what_it_can_relay_and_says_why_not() -> None:
    inbox = _inbox()
    assert inbox.offer(_ballot(0).message(5)) == (202, {"held": True})
    refusals = {
        "task": _ballot(1).message(6),
        "party": _ballot(3).message(5),
        "contract": _ballot(1, to=FORWARDER).message(5),
        "function": _ballot(1, data=b"\x12\x34\x56\x78").message(5),
        "kind": {**_ballot(1).message(5), "kind": "histograms"},  # a ballot's call sent as histograms
        "expired": _ballot(1, deadline=int(time.time()) - 1).message(5),
        "forged": _ballot(1, signer=2).message(5),
        "far deadline": _ballot(1, deadline=int(time.time()) + 3600).message(5),
        "another level": _ballot(1, data=_votes_call(0, 4)).message(5),
        "another task": _ballot(1, data=_votes_call(0, 1, task=6)).message(5),
        "too much gas": {**_ballot(1).message(5), "gas": 10**9},
        "mangled signature": {**_ballot(1).message(5), "signature": "0x" + "ff" * 65},
    }
    for why, message in refusals.items():
        status, answer = inbox.offer(message)
        assert status == 403, (why, answer)
    bad_sig = {**_ballot(1).message(5), "signature": "0x1234"}
    for malformed in (
        [1, 2],
        {k: v for k, v in _ballot(1).message(5).items() if k != "nonce"},
        {**_ballot(1).message(5), "level": -1},
        {**_ballot(1).message(5), "gas": True},
        {**_ballot(1).message(5), "data": "0xzz"},
        {**_ballot(1).message(5), "kind": "resolution"},
        bad_sig,
    ):
        status, answer = inbox.offer(malformed)
        assert status == 422 and answer["detail"], malformed
    assert inbox.holds("votes", 0, 1, PARTIES[0]) and not inbox.holds("votes", 0, 1, PARTIES[1])
    assert not inbox.holds("histograms", 0, 1, PARTIES[0])  # each kind is held on its own


def test_take_waits_for_the_expected_parties_then_closes_the_level() -> None:
    inbox = _inbox()
    inbox.offer(_ballot(0).message(5))
    late = threading.Timer(0.05, lambda: inbox.offer(_ballot(2).message(5)))
    late.start()
    started = time.monotonic()
    got = inbox.take("votes", 0, 1, PARTIES[::2], timeout=10.0)
    assert time.monotonic() - started < 5.0  # handed over as soon as the last expected one came
    assert [b.request.sender for b in got] == sorted(PARTIES[::2])
    # the level is closed: a ballot after it is told to send its own transaction, and its own is refused too
    assert inbox.offer(_ballot(1).message(5))[0] == 409
    assert not inbox.hold(_ballot(1))
    # a ballot for a later level is held; one for a level before the one taken, or two trees on, is refused
    assert inbox.offer(_ballot(1, level=2).message(5))[0] == 202
    assert inbox.offer(_ballot(1, level=0).message(5))[0] == 409
    assert inbox.offer(_ballot(1, tree=2, level=0).message(5))[0] == 409
    # a tree that ended before this party's levels leaves its last taken level a tree behind: the task's tree, as
    # its node read it, says which tree is next
    inbox.note_tree(2)
    assert inbox.offer(_ballot(1, tree=2, level=1).message(5))[0] == 202
    assert inbox.offer(_ballot(1, tree=3, level=1).message(5))[0] == 202
    status, answer = inbox.offer(_ballot(1, tree=4, level=1).message(5))
    assert status == 409 and "tree 4 is not next: this party is at tree 2" in answer["detail"]
    inbox.note_tree(1)  # an older read does not move it back
    assert inbox.offer(_ballot(2, tree=3, level=1).message(5))[0] == 202


def test_take_gives_up_after_its_wait_with_what_it_holds() -> None:
    inbox = _inbox()
    assert inbox.hold(_ballot(0, level=3))
    started = time.monotonic()
    got = inbox.take("votes", 0, 3, PARTIES, timeout=0.1)
    assert 0.09 < time.monotonic() - started < 5.0
    assert [b.request.sender for b in got] == [PARTIES[0]]
    assert inbox.take("votes", 0, 4, [], timeout=10.0) == []  # nothing expected: no wait


def test_the_relayer_is_the_first_resolver() -> None:
    assert [relayer_index(level, 4) for level in range(6)] == [0, 1, 2, 3, 0, 1]


def test_the_kinds_name_the_contracts_functions(artifacts: dict) -> None:
    """The selectors a relayer takes are those of ``FGBDTChain``'s ABI as compiled."""
    from eth_utils import function_abi_to_4byte_selector

    from fgbdt_chain.node.party.relay import SELECTORS

    abi = {f["name"]: f for f in artifacts["FGBDTChain"].abi if f.get("type") == "function"}
    assert {
        "votes": function_abi_to_4byte_selector(abi["submitVotes"]),
        "histograms": function_abi_to_4byte_selector(abi["submitHistograms"]),
    } == SELECTORS


class _Asker:
    """The endorsement client's stand-in: answers a hand-over as told, records what was handed."""

    def __init__(self, answer: tuple[int, dict] | Exception) -> None:
        self.answer, self.asked, self.audiences = answer, [], []

    def ask(self, endpoint: str, body: dict, path: str, audience: str = "") -> tuple[int, dict]:
        self.asked.append((endpoint, body, path))
        self.audiences.append(audience)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _channel(index: int, asker: object) -> tuple[object, list[str], list[list]]:
    """A relay channel of party ``index`` of four, over a stand-in task and forwarder (its nonce reads and batches
    recorded)."""
    from types import SimpleNamespace

    from fgbdt_chain.node.party.relay import RelayChannel

    reads: list[str] = []
    batches: list[list] = []
    channel = object.__new__(RelayChannel)
    channel.task = SimpleNamespace(
        address=TASK,
        contract=None,
        client=SimpleNamespace(
            chain_id=CHAIN, encode_call=lambda c, f, a: "0x" + (SELECTORS["votes"] + _words(a[:3])).hex()
        ),
    )
    channel.task_id, channel.account, channel.index, channel.ttl = 5, KEYS[index], index, RELAY_TTL_SECONDS
    channel.parties = [k.address for k in KEYS]
    channel.endpoints = {p: f"http://party{i}" for i, p in enumerate(channel.parties)}
    channel.asker = asker
    channel.forwarder = SimpleNamespace(
        address=FORWARDER,
        nonce=lambda a: reads.append(a) or 40,
        execute_batch=lambda sender, signed: batches.append(signed) or SimpleNamespace(gas_used=1),
    )
    channel.inbox = RelayInbox(5, TASK, channel.parties, CHAIN, FORWARDER)
    channel.nonce = None
    return channel, reads, batches


def test_a_request_goes_to_the_levels_relayer_and_the_nonce_counts_on_while_taken() -> None:
    """A party hands its signed request to the level's relayer (party ``level mod M``) and counts its forwarder
    nonce on; refused or unreachable, it reads the next nonce from the forwarder before the next request (the relayer
    may hold the request or not). The relayer of a level holds its own."""
    from fgbdt_chain.node.party.endorse_client import VerifierUnreachable

    channel, reads, _ = _channel(2, _Asker((202, {"held": True})))
    first = channel.request("votes", 3, 1, "submitVotes", (5, 3, 2, [0, 1]), 200_000)
    assert channel.hand_over(first) is None
    ((endpoint, body, path),) = channel.asker.asked
    assert endpoint == "http://party1" and path == "/v1/relay/stream" and body["nonce"] == 40
    assert channel.asker.audiences == [channel.parties[1]]  # signed for the relayer it goes to
    assert channel.hand_over(channel.request("votes", 3, 5, "submitVotes", (5, 3, 6, [0]), 200_000)) is None
    assert channel.asker.asked[-1][0] == "http://party1" and channel.asker.asked[-1][1]["nonce"] == 41
    assert reads == [channel.account.address]  # counted on, not read again
    for answer in ((409, {"detail": "relayed already"}), VerifierUnreachable("refused")):
        refused, reads, _ = _channel(2, _Asker(answer))
        why = refused.hand_over(refused.request("votes", 3, 1, "submitVotes", (5, 3, 2, [0, 1]), 200_000))
        assert why is not None and why.startswith("party 1") and refused.nonce is None
    own, _, _ = _channel(1, _Asker(AssertionError("no hand-over to itself")))
    assert own.hand_over(own.request("votes", 3, 1, "submitVotes", (5, 3, 2, [0, 1]), 200_000)) is None
    assert own.inbox.holds("votes", 3, 1, own.account.address)


def test_the_relayer_sends_what_it_holds_once_in_batches() -> None:
    relayer, _, batches = _channel(1, _Asker(AssertionError("no hand-over")))
    for i in (0, 3):
        sender, _, _ = _channel(i, _Asker((202, {})))
        relayed = sender.request("votes", 3, 1, "submitVotes", (5, 3, 2, [0, 1]), 200_000)
        assert relayer.inbox.offer(relayed.message(5))[0] == 202
    relayer.hand_over(relayer.request("votes", 3, 1, "submitVotes", (5, 3, 2, [0, 1]), 200_000))
    started = time.monotonic()
    count, results, failures = relayer.send("votes", 3, 1, [KEYS[i].address for i in (0, 1, 3)], timeout=30.0)
    assert time.monotonic() - started < 10  # all three came: no wait for the timeout
    assert (count, len(results), failures) == (3, 1, [])
    assert sorted(req.sender for req, _ in batches[0]) == sorted(KEYS[i].address for i in (0, 1, 3))
    assert relayer.send("votes", 3, 1, [], timeout=0.0) == (0, [], [])  # once


def test_wait_leaves_the_level_open_and_take_closes_it() -> None:
    inbox = _inbox()
    inbox.offer(_ballot(0).message(5))
    started = time.monotonic()
    assert [b.request.sender for b in inbox.wait("votes", 0, 1, PARTIES[:2], timeout=0.05)] == [PARTIES[0]]
    assert time.monotonic() - started >= 0.04  # waited for the second
    assert inbox.offer(_ballot(1).message(5))[0] == 202  # still open
    got = inbox.take("votes", 0, 1, PARTIES[:2], timeout=0.0)
    assert sorted(b.request.sender for b in got) == sorted(PARTIES[:2])
    assert inbox.offer(_ballot(2).message(5))[0] == 409


def test_the_relayer_counts_the_nonce_of_its_own_request() -> None:
    channel, reads, _ = _channel(1, _Asker(AssertionError("no hand-over")))
    mine = channel.request("resolution", 3, 1, "resolveNodes", (5, [2]), 1_000_000)
    channel.keep_own()
    after = channel.request("votes", 3, 2, "submitVotes", (5, 3, 3, [0]), 200_000)
    assert (mine.request.nonce, after.request.nonce, len(reads)) == (40, 41, 1)


def test_the_time_to_live_follows_the_block_interval() -> None:
    """A request must outlive the blocks that can take its batch: two intervals past the devnet's margin. At a block
    every 5 s it lives 13 s, which the devnet's inbox refuses as too far and a 5 s chain's inbox holds."""
    assert relay_ttl(0.0) == RELAY_TTL_SECONDS
    assert relay_ttl(1.0) == RELAY_TTL_SECONDS + 2
    assert relay_ttl(5.0) == 13 and relay_ttl(0.4) == RELAY_TTL_SECONDS + 1
    assert relay_patience(relay_ttl(5.0)) > relay_ttl(5.0) + 1  # past the deadline, its seconds rounded down
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="block interval"):
            relay_ttl(bad)
    now = time.time()
    late = _ballot(1, deadline=int(now) + relay_ttl(5.0)).message(5)
    devnet = RelayInbox(5, TASK, PARTIES, CHAIN, FORWARDER)
    five_seconds = RelayInbox(5, TASK, PARTIES, CHAIN, FORWARDER, ttl=relay_ttl(5.0))
    assert devnet.offer(late, now=now)[0] == 403  # 13 s away: too far for 3 s and the clock slack
    assert five_seconds.offer(late, now=now - 4)[0] == 202  # the relayer's clock 4 s behind: within 13 s and the slack


@pytest.mark.chain
def test_the_block_interval_is_measured_from_the_latest_blocks() -> None:
    """The median gap of the latest blocks' timestamps: anvil told to space its blocks 5 s apart reads as 5 s, and a
    chain of one block as a block per transaction (0)."""
    node = start_anvil()
    try:
        client = ChainClient.connect(node.url)
        assert measured_block_seconds(client) == 0.0  # the genesis block alone
        client.w3.provider.make_request("anvil_setBlockTimestampInterval", [5])  # type: ignore[arg-type]
        client.mine(INTERVAL_SAMPLE_BLOCKS + 2)
        assert measured_block_seconds(client) == 5.0
        assert relay_ttl(measured_block_seconds(client)) == 13
    finally:
        node.stop()
