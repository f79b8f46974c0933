"""The asker's side of the endorsement exchange: one kept-open WebSocket per verifier.

Every level, each party asks each other party to check and sign its histograms: twelve requests a level with four
parties, 300 levels for 50 trees of depth 6. As HTTP requests (httpx to FastAPI under uvicorn) each cost about 1.0 ms
of CPU between the two processes; as a message on an open WebSocket to the same app, 0.26 ms (measured here with the
request of a level of eight nodes, ``node.party.endorse_server``). With four parties and the chain on two cores, that
CPU is wall time. The verifier's check, its answers and its errors are those of ``POST /v1/endorse``: each answer
carries the status the route would have answered with.

A send that outlasts the timeout (a verifier that stopped reading, its TCP window shut) has its socket shut down by a
watch thread, since websockets' synchronous ``send`` takes no timeout: the asker is told the verifier is
unreachable instead of waiting for the keepalive to give up.

A connection the verifier closed (it restarted, or the chain was down) is opened again once for the same request;
anything else unreachable is reported as such, and the asker tries that verifier again later. An endpoint that
answers the WebSocket handshake with an HTTP error (a node of an older release has no stream route) is a refusal
that asking again will not change.

Every message is signed by this party's task key for the verifier it goes to (``node.party.peer_auth``), afresh for
each attempt: the verifier refuses a nonce it has seen.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import ssl
import threading
import time
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from fgbdt_chain.node.party.peer_auth import RequestSigner

ENDORSE_STREAM_PATH = "/v1/endorse/stream"
"""The verifier's WebSocket route (``node.party.endorse_server``), beside ``POST /v1/endorse``."""


class VerifierUnreachable(Exception):
    """No answer from a verifier: refused, dropped or timed out (worth asking again), or not an endpoint at all."""


class NoEndorsementStream(VerifierUnreachable):
    """The endpoint answered the handshake with an HTTP error: it serves no endorsement stream (asking again will
    not change that)."""


def stream_url(endpoint: str, path: str = ENDORSE_STREAM_PATH) -> str:
    """The WebSocket URL of a party's published endpoint (``http://host:port``; ``https`` becomes ``wss``) for the
    stream at ``path``."""
    url = urlsplit(endpoint.rstrip("/"))
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(url.scheme)
    if scheme is None or not url.netloc:
        raise VerifierUnreachable(f"not an http(s) endpoint: {endpoint!r}")
    return urlunsplit((scheme, url.netloc, url.path + path, "", ""))


class _SendWatch:
    """Deadlines of the sends in flight, and one daemon thread that shuts down the socket of a send past its
    deadline (``sendall`` then fails with an ``OSError``). A send costs a lock and a dictionary entry; the thread wakes
    at the earliest deadline it knows of (a send that ended leaves its wake-up in place: at most one per timeout), and
    is started with the first send."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sends: dict[int, tuple[float, socket.socket]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self._wakes_at = math.inf
        self._generation = 0
        """The running thread's: ``stop`` moves it on, and a thread whose generation is past ends."""
        self._fired: set[int] = set()

    def start(self, sock: socket.socket, timeout: float) -> int:
        with self._cond:
            self._next += 1
            deadline = time.monotonic() + timeout
            self._sends[self._next] = (deadline, sock)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, args=(self._generation,), name="endorse-send-watch", daemon=True
                )
                self._thread.start()
            elif deadline < self._wakes_at:  # only when it would wake too late: not once per send
                self._cond.notify_all()
            return self._next

    def done(self, ticket: int) -> bool:
        """Ends the send's watch; True when the watch had shut its socket down (the send timed out)."""
        with self._cond:
            self._sends.pop(ticket, None)
            if ticket in self._fired:
                self._fired.discard(ticket)
                return True
            return False

    def stop(self) -> None:
        """Ends the watch thread (the client is closed; a later send starts another)."""
        with self._cond:
            self._generation += 1
            self._thread = None
            self._cond.notify_all()

    def _run(self, generation: int) -> None:
        with self._cond:
            while self._generation == generation:
                now = time.monotonic()
                for ticket, (deadline, sock) in list(self._sends.items()):
                    if deadline <= now:
                        del self._sends[ticket]
                        self._fired.add(ticket)
                        with contextlib.suppress(OSError):  # already closed
                            sock.shutdown(socket.SHUT_RDWR)
                self._wakes_at = min((d for d, _ in self._sends.values()), default=math.inf)
                self._cond.wait(None if self._wakes_at == math.inf else max(self._wakes_at - now, 0.0))


class EndorseClient:
    """The open connections of one party to its verifiers; safe to use from several threads, one request in flight
    per verifier at a time (an answer is matched to its request by order)."""

    def __init__(self, timeout: float, signer: RequestSigner | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.timeout = timeout
        self.signer = signer
        """Signs each message for its verifier; None sends them unsigned (every party endpoint refuses those)."""
        self.tls = tls
        """How ``wss://`` endpoints are verified (a CA file's context); None: the system's CAs."""
        self._connections: dict[str, tuple[ClientConnection, ExitStack]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._watch = _SendWatch()

    def ask(
        self, endpoint: str, body: dict[str, Any] | str, path: str = ENDORSE_STREAM_PATH, audience: str = ""
    ) -> tuple[int, dict[str, Any]]:
        """(status, answer) for one request on the stream at ``path`` (``body`` as JSON, or a dict): an endorsement
        request by default, as ``POST /v1/endorse`` would answer it; a request to relay on
        ``node.party.relay.RELAY_STREAM_PATH``. ``audience``: the address of the party asked, which the signature
        names."""
        url = stream_url(endpoint, path)
        with self._guard:
            lock = self._locks.setdefault(url, threading.Lock())
        payload = body if isinstance(body, str) else json.dumps(body)
        raw = payload.encode()
        with lock:
            for attempt in range(2):
                reused = url in self._connections
                timed_out = False
                message = payload
                if self.signer is not None:
                    message = self.signer.sign("WS", path, raw, audience).line() + "\n" + payload
                try:
                    conn = self._connection(url)
                    ticket = self._watch.start(conn.socket, self.timeout)
                    try:
                        conn.send(message)
                    finally:
                        timed_out = self._watch.done(ticket)
                    answer = json.loads(conn.recv(timeout=self.timeout))
                    return int(answer["status"]), dict(answer["body"])
                except ConnectionClosed as exc:
                    self._drop(url)
                    if timed_out:  # the watch shut the send down: the verifier is not reading, not restarted
                        raise VerifierUnreachable(f"no progress sending to {url} within {self.timeout} s") from exc
                    if reused and attempt == 0:
                        continue  # the verifier closed a kept connection (e.g. it restarted): once more, afresh
                    raise VerifierUnreachable(_reason(exc)) from exc
                except InvalidStatus as exc:
                    self._drop(url)
                    raise NoEndorsementStream(f"no endorsement stream at {url}: {_reason(exc)}") from exc
                except (OSError, TimeoutError, WebSocketException, ValueError, KeyError, TypeError) as exc:
                    self._drop(url)
                    raise VerifierUnreachable(_reason(exc)) from exc
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _connection(self, url: str) -> ClientConnection:
        kept = self._connections.get(url)
        if kept is not None:
            return kept[0]
        stack = ExitStack()  # the connection as the context manager websockets asks it to be used as, kept open
        # a short closing handshake: a connection is dropped after a timeout, when its verifier is still busy
        conn = stack.enter_context(
            connect(
                url,
                open_timeout=self.timeout,
                close_timeout=0.1,
                max_size=None,
                compression=None,
                ssl=self.tls if url.startswith("wss:") else None,
            )
        )
        self._connections[url] = (conn, stack)
        return conn

    def _drop(self, url: str) -> None:
        kept = self._connections.pop(url, None)
        if kept is not None:
            kept[1].close()

    def close(self) -> None:
        for url in list(self._connections):
            self._drop(url)
        self._watch.stop()


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
