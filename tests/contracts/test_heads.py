"""The new-block subscription (``ledger.rpc.heads``) on a real anvil, and its fallback where no WebSocket answers."""

from __future__ import annotations

import socket
import time

import pytest

from fgbdt_chain.ledger.devnet.anvil import Anvil, free_port
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.heads import NewHeads, quick_ack, ws_url


def _until_live(heads: NewHeads, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not heads.live:
        assert time.monotonic() < deadline, f"no subscription: {heads.error}"
        time.sleep(0.02)


def test_ws_url_keeps_host_port_and_path() -> None:
    assert ws_url("http://127.0.0.1:8545") == "ws://127.0.0.1:8545"
    assert ws_url("https://node.example/rpc/x") == "wss://node.example/rpc/x"
    with pytest.raises(ValueError, match="HTTP"):
        ws_url("ipc:///tmp/geth.ipc")


def test_anvil_pushes_every_new_block(anvil_node: Anvil, anvil_client: ChainClient) -> None:
    heads = NewHeads(anvil_node.url)
    try:
        _until_live(heads)
        start = anvil_client.block_number
        assert heads.wait(start, timeout=0.2) is None  # nothing mined: the wait times out
        anvil_client.mine(1)
        assert heads.wait(start, timeout=5.0) == start + 1
        anvil_client.mine(3)  # several blocks at once: the latest is what a follower needs
        deadline = time.monotonic() + 5.0
        while heads.latest < start + 4:
            assert time.monotonic() < deadline
            heads.wait(heads.latest, timeout=1.0)
        assert heads.latest == anvil_client.block_number == start + 4
        assert heads.wait(start + 2, timeout=0.0) == start + 4  # already past: no wait
    finally:
        heads.close()
    assert not heads.live


def test_no_websocket_means_polling() -> None:
    """A port with nothing behind it: the subscription is down, and ``wait`` answers at once so the caller polls."""
    heads = NewHeads(f"http://127.0.0.1:{free_port()}", connect_timeout=0.5)
    try:
        time.sleep(0.3)
        started = time.monotonic()
        assert heads.wait(-1, timeout=5.0) is None
        assert time.monotonic() - started < 1.0
        assert not heads.live and heads.error
    finally:
        heads.close()


def test_only_a_head_notification_moves_the_block() -> None:
    from fgbdt_chain.ledger.rpc.heads import _head_number

    note = '{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x1","result":{"number":"0x1f"}}}'
    assert _head_number(note) == 31
    for other in ('{"jsonrpc":"2.0","id":1,"result":"0x1"}', '{"params": null}', "[1, 2]", "not json", b"\x00"):
        assert _head_number(other) is None


def test_the_bloom_check_agrees_with_eth_bloom_and_marks_relevant_heads() -> None:
    import json

    from eth_bloom import BloomFilter

    from fgbdt_chain.ledger.rpc.heads import _head_of, bloom_has

    address, topic, other = b"\x11" * 20, b"\x22" * 32, b"\x33" * 32
    bloom = BloomFilter()
    bloom.add(address)
    bloom.add(topic)
    raw = int(bloom).to_bytes(256, "big")
    assert bloom_has(raw, address) and bloom_has(raw, topic)
    assert not bloom_has(raw, other) and not bloom_has(bytes(256), address)

    rare = BloomFilter()
    rare.add(address)
    rare.add(other)
    rare_raw = int(rare).to_bytes(256, "big")
    heads = NewHeads(
        f"http://127.0.0.1:{free_port()}",
        connect_timeout=0.2,
        watch=[[address, topic], [address, other]],
        narrow=[[address, other]],
    )
    try:
        for number, logs in ((5, raw), (6, bytes(256)), (4, raw)):
            note = {"params": {"result": {"number": hex(number), "logsBloom": "0x" + logs.hex()}}}
            parsed, head_bloom = _head_of(json.dumps(note))
            assert parsed == number and head_bloom is not None
            heads._set(
                live=True,
                number=number,
                relevant=heads._matches(head_bloom, heads.watch),
                narrowly=heads._matches(head_bloom, heads.narrow),
            )
        assert (heads.latest, heads.relevant) == (6, 5)  # block 6 holds nothing watched; 4 is older
        assert heads.narrowly_relevant == -1  # none held the rarer event
        for number, logs in ((7, rare_raw), (8, raw)):
            heads._set(
                live=True,
                number=number,
                relevant=heads._matches(logs, heads.watch),
                narrowly=heads._matches(logs, heads.narrow),
            )
        assert (heads.relevant, heads.narrowly_relevant) == (8, 7)
    finally:
        heads.close()
    assert _head_of('{"params":{"result":{"number":"0x7"}}}') == (7, None)  # no bloom: the block counts


def test_quick_ack_acknowledges_at_once_and_leaves_other_sockets_alone() -> None:
    """``heads.quick_ack``: Linux's ``TCP_QUICKACK`` on a TCP socket (the kernel clears it by itself, so the
    subscription sets it after every message); a socket that is not TCP, or a platform without the option, is left as
    it is rather than failing the subscription."""
    tcp = socket.socket()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        option = getattr(socket, "TCP_QUICKACK", None)
        if option is not None:
            tcp.setsockopt(socket.IPPROTO_TCP, option, 0)
            quick_ack(tcp)
            assert tcp.getsockopt(socket.IPPROTO_TCP, option) == 1
        quick_ack(udp)  # no TCP options on UDP: ignored
    finally:
        tcp.close()
        udp.close()
    quick_ack(tcp)  # closed: ignored


def test_a_node_back_at_an_earlier_block_is_followed_there() -> None:
    """A node that restarts from an earlier state (anvil saves its state when it stops; here a fresh chain on the
    same port) announces lower block numbers: the first after the reconnection is taken as the head, and ``wait``
    returns it, where waiting for a block above the old head stalled a follower until the chain grew past it."""
    from fgbdt_chain.ledger.devnet.anvil import start_anvil

    first = start_anvil()
    port = first.port
    heads = NewHeads(first.url, connect_timeout=2.0)
    try:
        _until_live(heads)
        ChainClient.connect(first.url).mine(20)
        deadline = time.monotonic() + 10
        while heads.latest < 20:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        first.stop()
        second = start_anvil(port=port)
        try:
            _until_live(heads, seconds=20.0)
            ChainClient.connect(second.url).mine(2)
            assert heads.wait(20, timeout=10.0) in (1, 2)
            deadline = time.monotonic() + 10
            while heads.latest != 2:
                assert time.monotonic() < deadline, heads.latest
                time.sleep(0.02)
            assert heads.relevant <= 2  # the first head after the reconnection counts as relevant
        finally:
            second.stop()
    finally:
        heads.close()
        first.stop()


def test_a_narrow_wait_sleeps_through_ordinary_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``wait(narrow=True)``: the requester's follower waits for a block that may end the task, not for every block
    (each of which it would read the task's state at), and a plain wait still sees every block."""
    import threading

    monkeypatch.setattr(NewHeads, "_run", lambda self: None)  # no subscription racing the states set here by hand
    heads = NewHeads(f"http://127.0.0.1:{free_port()}", connect_timeout=0.2, narrow=[[b"\x11" * 20, b"\x33" * 32]])
    try:
        heads._set(live=True, number=5, narrowly=True)
        assert heads.wait(5, 0.05, narrow=True) is None  # nothing newer that may hold the event
        got: list[int | None] = []
        waiter = threading.Thread(target=lambda: got.append(heads.wait(5, 10.0, narrow=True)))
        waiter.start()
        heads._set(live=True, number=6, narrowly=False)  # an ordinary block
        assert heads.wait(5, 1.0) == 6  # a plain wait returns at it
        time.sleep(0.05)
        assert not got and waiter.is_alive()
        heads._set(live=True, number=7, narrowly=True)
        waiter.join(10)
        assert got == [7]
        heads._set(live=False)
        assert heads.wait(7, 10.0, narrow=True) is None  # down: at once, the caller polls
    finally:
        heads.close()
