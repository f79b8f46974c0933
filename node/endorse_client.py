"""The asker's side of the endorsement exchange: one kept-open WebSocket per verifier.

Every level, each party asks each other party to check and sign its histograms: twelve requests a level with four
parties, 300 levels for 50 trees of depth 6. As HTTP requests (httpx to FastAPI under uvicorn) each cost about 1.0 ms
of CPU between the two processes; as a message on an open WebSocket to the same app, 0.26 ms (measured here with the
request of a level of eight nodes, ``node.endorse_server``). With four parties and the chain on two cores, that CPU
is wall time. The verifier's check, its answers and its errors are those of ``POST /v1/endorse``: each answer
carries the status the route would have answered with.

A connection the verifier closed (it restarted, or the chain was down) is opened again once for the same request;
anything else unreachable is reported as such, and the asker tries that verifier again later. An endpoint that
answers the WebSocket handshake with an HTTP error (a node of an older release has no stream route) is a refusal
that asking again will not change.
"""

from __future__ import annotations

import json
import threading
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

ENDORSE_STREAM_PATH = "/v1/endorse/stream"
"""The verifier's WebSocket route (``node.endorse_server``), beside ``POST /v1/endorse``."""


class VerifierUnreachable(Exception):
    """No answer from a verifier: refused, dropped or timed out (worth asking again), or not an endpoint at all."""


class NoEndorsementStream(VerifierUnreachable):
    """The endpoint answered the handshake with an HTTP error: it serves no endorsement stream (asking again will
    not change that)."""


def stream_url(endpoint: str) -> str:
    """The WebSocket URL of a party's published endpoint (``http://host:port``; ``https`` becomes ``wss``)."""
    url = urlsplit(endpoint.rstrip("/"))
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(url.scheme)
    if scheme is None or not url.netloc:
        raise VerifierUnreachable(f"not an http(s) endpoint: {endpoint!r}")
    return urlunsplit((scheme, url.netloc, url.path + ENDORSE_STREAM_PATH, "", ""))


class EndorseClient:
    """The open connections of one party to its verifiers; safe to use from several threads, one request in flight
    per verifier at a time (an answer is matched to its request by order)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._connections: dict[str, tuple[ClientConnection, ExitStack]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def ask(self, endpoint: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(status, answer) for one endorsement request, as ``POST /v1/endorse`` would answer it."""
        url = stream_url(endpoint)
        with self._guard:
            lock = self._locks.setdefault(url, threading.Lock())
        message = json.dumps(body)
        with lock:
            for attempt in range(2):
                reused = url in self._connections
                try:
                    conn = self._connection(url)
                    conn.send(message)
                    answer = json.loads(conn.recv(timeout=self.timeout))
                    return int(answer["status"]), dict(answer["body"])
                except ConnectionClosed as exc:
                    self._drop(url)
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
            connect(url, open_timeout=self.timeout, close_timeout=0.1, max_size=None, compression=None)
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


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
