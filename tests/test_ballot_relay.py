"""The relayer's inbox (``node.ballot_relay.BallotInbox``): which ballots it holds for a level, which it refuses and
why, and when it hands them over. The relay on chain is tested in ``tests/chain/test_ahead_votes.py`` and end to end
in ``tests/e2e``."""

from __future__ import annotations

import threading
import time

from eth_account import Account

from fgbdt_chain.ledger.forwarder import ForwardRequest, sign_request
from fgbdt_chain.node.ballot_relay import SUBMIT_VOTES_SELECTOR, BallotInbox, RelayedBallot, relayer_index

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
) -> RelayedBallot:
    req = ForwardRequest(
        KEYS[i].address,
        to,
        0,
        200_000,
        7,
        int(time.time()) + 60 if deadline is None else deadline,
        SUBMIT_VOTES_SELECTOR + bytes(96) if data is None else data,
    )
    return RelayedBallot(
        tree, level, req, sign_request(KEYS[i if signer is None else signer].key, req, CHAIN, FORWARDER)
    )


def _inbox() -> BallotInbox:
    return BallotInbox(5, TASK, PARTIES, CHAIN, FORWARDER)


def test_a_ballot_crosses_the_wire_unchanged() -> None:
    b = _ballot(1)
    task, back = RelayedBallot.parse(b.message(5))
    assert (task, back) == (5, b)


def test_the_inbox_holds_what_it_can_relay_and_says_why_not() -> None:
    inbox = _inbox()
    assert inbox.offer(_ballot(0).message(5)) == (202, {"held": True})
    refusals = {
        "task": _ballot(1).message(6),
        "party": _ballot(3).message(5),
        "contract": _ballot(1, to=FORWARDER).message(5),
        "function": _ballot(1, data=b"\x12\x34\x56\x78").message(5),
        "expired": _ballot(1, deadline=int(time.time()) - 1).message(5),
        "forged": _ballot(1, signer=2).message(5),
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
        bad_sig,
    ):
        status, answer = inbox.offer(malformed)
        assert status == 422 and answer["detail"], malformed
    assert inbox.holds(0, 1, PARTIES[0]) and not inbox.holds(0, 1, PARTIES[1])


def test_take_waits_for_the_expected_parties_then_closes_the_level() -> None:
    inbox = _inbox()
    inbox.offer(_ballot(0).message(5))
    late = threading.Timer(0.05, lambda: inbox.offer(_ballot(2).message(5)))
    late.start()
    started = time.monotonic()
    got = inbox.take(0, 1, PARTIES[::2], timeout=10.0)
    assert time.monotonic() - started < 5.0  # handed over as soon as the last expected one came
    assert [b.request.sender for b in got] == sorted(PARTIES[::2])
    # the level is closed: a ballot after it is told to send its own transaction, and its own is refused too
    assert inbox.offer(_ballot(1).message(5))[0] == 409
    assert not inbox.hold(_ballot(1))
    # a ballot for a later level is held; one for a level that will not be relayed any more is dropped
    assert inbox.offer(_ballot(1, level=2).message(5))[0] == 202


def test_take_gives_up_after_its_wait_with_what_it_holds() -> None:
    inbox = _inbox()
    assert inbox.hold(_ballot(0, level=3))
    started = time.monotonic()
    got = inbox.take(0, 3, PARTIES, timeout=0.1)
    assert 0.09 < time.monotonic() - started < 5.0
    assert [b.request.sender for b in got] == [PARTIES[0]]
    assert inbox.take(0, 4, [], timeout=10.0) == []  # nothing expected: no wait


def test_the_relayer_is_the_first_resolver() -> None:
    assert [relayer_index(level, 4) for level in range(6)] == [0, 1, 2, 3, 0, 1]
