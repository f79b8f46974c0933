"""New blocks as the node pushes them (``eth_subscribe("newHeads")`` over WebSocket), for followers acting on each.

Why: a party acts only when a block arrives (task state changes nowhere else). Polling ``eth_blockNumber`` every
``poll_seconds`` costs a request per poll and, on average, half a poll of latency per dependent round; a subscription
wakes the follower as soon as the node announces the block. Nodes that serve no WebSocket (the embedded chain, an
HTTP-only gateway) leave :attr:`NewHeads.live` false and the follower polls as before; a dropped connection is
retried in the background (a chain outage), polling meanwhile.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

from eth_utils import keccak
from websockets.exceptions import WebSocketException
from websockets.sync.client import ClientConnection, connect

NEW_HEADS = "newHeads"
RECONNECT_SECONDS = (1.0, 30.0)
"""Pause before subscribing again after the connection dropped or was refused: the first, doubling up to the second
while attempts keep failing (a node that serves no WebSocket is not asked every second forever)."""


def ws_url(http_url: str) -> str:
    """The WebSocket URL of a JSON-RPC node served over HTTP on the same port (anvil and geth serve both)."""
    parts = urlsplit(http_url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"not an HTTP(S) JSON-RPC URL: {http_url!r}")
    return urlunsplit(("wss" if parts.scheme == "https" else "ws", *parts[1:]))


def bloom_has(bloom: bytes, item: bytes) -> bool:
    """Whether a block's 2048-bit logs bloom may hold ``item`` (an address or a topic): its three bits are set."""
    return all((bloom[255 - bit // 8] >> (bit % 8)) & 1 for bit in _bloom_bits(item))


@functools.lru_cache(maxsize=256)
def _bloom_bits(item: bytes) -> tuple[int, ...]:
    """The three bloom bits of ``item``: a watched address or topic is hashed once, not at every block."""
    h = keccak(item)
    return tuple(((h[i] << 8) | h[i + 1]) & 2047 for i in (0, 2, 4))


class NewHeads:
    """The latest block number the node announced; :meth:`wait` blocks until a newer one (or a timeout)."""

    def __init__(
        self,
        http_url: str,
        connect_timeout: float = 5.0,
        watch: Sequence[Sequence[bytes]] = (),
        narrow: Sequence[Sequence[bytes]] = (),
    ) -> None:
        self.url = ws_url(http_url)
        self.connect_timeout = connect_timeout
        self.watch = [list(items) for items in watch]
        self.narrow = [list(items) for items in narrow]
        self.latest = -1
        """The latest block number announced (-1: none yet): the highest since the subscription (re)started. The
        first block after a reconnection counts even if lower: a node restarted from a saved state may have lost its
        last blocks (anvil saves its state when it stops)."""
        self.relevant = -1
        """The highest announced block whose logs bloom may hold every item of one of ``watch``'s sets (a contract
        address and an event topic, say), or that came first after (re)subscribing; every block without ``watch``.
        A follower that acts only on some events skips the other blocks' reads: a bloom has false positives,
        never false negatives."""
        self.narrowly_relevant = -1
        """As ``relevant``, for the ``narrow`` sets (a follower with nothing to do until a rarer event, say)."""
        self._resubscribed = False
        self.live = False
        """Whether the subscription is up: while false, callers poll."""
        self.error = ""
        """Why the last attempt to subscribe failed (for the follower's log)."""
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self._socket_lock = threading.Lock()
        self._socket: ClientConnection | None = None
        self._thread = threading.Thread(target=self._run, name="new-heads", daemon=True)
        self._thread.start()

    def wait(self, after: int, timeout: float, narrow: bool = False) -> int | None:
        """A block number other than ``after`` once the node announced one (above it, or below it after the node went
        back to an earlier state), else None after ``timeout`` seconds (or at once while the subscription is down:
        the caller polls then). ``narrow``: of the blocks that may hold one of the ``narrow`` sets
        (``narrowly_relevant``), for a follower that waits for a rarer event between polls of its own."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while (number := self.narrowly_relevant if narrow else self.latest) == after or number < 0:  # -1: none yet
                left = deadline - time.monotonic()
                if not self.live or left <= 0:
                    return None
                self._changed.wait(left)
            return number

    def close(self) -> None:
        """Stop: the connection is closed (also one still being opened) and the thread ends."""
        with self._socket_lock:
            self._closed.set()
            sock = self._socket
        if sock is not None:
            sock.close()
        self._thread.join(timeout=self.connect_timeout + 5.0)

    def _run(self) -> None:
        pause = RECONNECT_SECONDS[0]
        while not self._closed.is_set():
            try:
                with connect(self.url, open_timeout=self.connect_timeout, max_size=None) as sock:
                    with self._socket_lock:  # close() that came while connecting: stop here
                        if self._closed.is_set():
                            return
                        self._socket = sock
                    request = {"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": [NEW_HEADS]}
                    sock.send(json.dumps(request))
                    answer = json.loads(sock.recv(timeout=self.connect_timeout))
                    if "error" in answer:
                        raise ConnectionError(f"eth_subscribe refused: {answer['error']}")
                    self._resubscribed = True  # blocks may have gone by unannounced: the next one counts
                    self._set(live=True)
                    pause = RECONNECT_SECONDS[0]
                    quick_ack(sock.socket)
                    for message in sock:
                        quick_ack(sock.socket)
                        number, bloom = _head_of(message)
                        if number is not None:
                            first, self._resubscribed = self._resubscribed, False
                            relevant = first or bloom is None or self._matches(bloom, self.watch)
                            narrowly = first or bloom is None or self._matches(bloom, self.narrow)
                            self._set(live=True, number=number, relevant=relevant, first=first, narrowly=narrowly)
            except (OSError, WebSocketException, TimeoutError, ValueError, ConnectionError) as exc:
                self.error = f"{type(exc).__name__}: {exc}"
            finally:
                self._socket = None
                self._set(live=False)
            self._closed.wait(pause)
            pause = min(RECONNECT_SECONDS[1], 2 * pause)

    @staticmethod
    def _matches(bloom: bytes, watch: list[list[bytes]]) -> bool:
        return not watch or any(all(bloom_has(bloom, item) for item in items) for items in watch)

    def _set(
        self, live: bool, number: int | None = None, relevant: bool = False, first: bool = False, narrowly: bool = False
    ) -> None:
        """Record a state of the subscription; ``first``: the first block after (re)subscribing, taken as the node's
        head even below what was announced before."""
        with self._changed:
            self.live = live
            if number is not None and (number > self.latest or first):
                self.latest = number
            if number is not None and relevant and (number > self.relevant or first):
                self.relevant = number
            if number is not None and narrowly and (number > self.narrowly_relevant or first):
                self.narrowly_relevant = number
            self._changed.notify_all()


def quick_ack(sock: socket.socket) -> None:
    """Acknowledge what arrives on ``sock`` at once (Linux ``TCP_QUICKACK``; the kernel drops back to delayed
    acknowledgements on its own, so it is set again after every message). Elsewhere nothing.

    Why: blocks come a few milliseconds apart, and anvil's WebSocket writes them with Nagle's algorithm on, which
    holds a notification back until the previous one is acknowledged, while the receiving kernel delays that
    acknowledgement by up to 40 ms. Measured with every party's steps timed (20 trees of depth 6): a party saw the
    block that closed a step 38 ms (median) after it was mined, on every level twice; with quick acknowledgements,
    1 ms, and the run took 12 s instead of 19-20 s."""
    option = getattr(socket, "TCP_QUICKACK", None)
    if option is None:
        return
    with contextlib.suppress(OSError):  # a closed socket, or one that is not TCP: nothing to acknowledge
        sock.setsockopt(socket.IPPROTO_TCP, option, 1)


def _head_number(message: str | bytes) -> int | None:
    """The block number of a ``newHeads`` notification; None for anything else (the subscription's answer, a
    malformed or unexpected message), which must not end the subscription."""
    return _head_of(message)[0]


def _head_of(message: str | bytes) -> tuple[int | None, bytes | None]:
    """(block number, logs bloom) of a ``newHeads`` notification; (None, None) for anything else, and a None bloom
    where the header has none (a node that leaves it out: every block then counts)."""
    try:
        head = json.loads(message)["params"]["result"]
        number = int(head["number"], 16)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None, None
    try:
        bloom = bytes.fromhex(str(head["logsBloom"]).removeprefix("0x"))
    except (ValueError, TypeError, KeyError):
        return number, None
    return number, bloom if len(bloom) == 256 else None
