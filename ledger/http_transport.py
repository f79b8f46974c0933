"""web3's HTTP provider over one persistent ``http.client`` connection per thread.

Why: a party sends thousands of small JSON-RPC requests per task (state reads, event reads, transactions), and
web3's transport (a ``requests`` session over urllib3's pool) spent about 700 us of client CPU on each against an
idle anvil, against 130 us for the same request on a kept-alive ``http.client`` connection (measured here,
``eth_blockNumber`` 2,000 times each). With four parties and anvil sharing two cores that CPU is wall time. Only the
transport is replaced (``HTTPProvider._make_request``): web3 still encodes, caches and decodes, so every call and
error reads as before.

A kept-alive connection may have been closed by the node between two requests; a request that fails on a reused
connection before any answer arrived is sent once more on a fresh one, as urllib3 does for a dropped pooled
connection. A transport failure otherwise surfaces as an ``OSError`` (refused, reset, timed out), which the callers
already treat as a chain that is down.
"""

from __future__ import annotations

import http.client
import threading
from typing import Any
from urllib.parse import urlsplit

from web3 import HTTPProvider
from web3.types import RPCEndpoint

_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
"""What sending on a connection the node already closed raises."""


class KeepAliveHTTPProvider(HTTPProvider):
    """``HTTPProvider`` whose requests go over a persistent connection of the calling thread (``threading.local``:
    a party's main loop, its endorsement handlers and its block listener each keep their own)."""

    def __init__(self, endpoint_uri: str, timeout: float = 120.0, **kwargs: Any) -> None:
        super().__init__(endpoint_uri, request_kwargs={"timeout": timeout}, **kwargs)
        url = urlsplit(endpoint_uri)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) JSON-RPC URL: {endpoint_uri!r}")
        self._https = url.scheme == "https"
        self._host, self._port = url.hostname, url.port
        self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self._timeout = timeout
        self._local = threading.local()

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it served a request before."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn, True
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = kind(self._host, self._port, timeout=self._timeout)
        self._local.conn = conn
        return conn, False

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _make_request(self, method: RPCEndpoint, request_data: bytes) -> bytes:
        for attempt in range(2):
            conn, reused = self._connection()
            try:
                conn.request("POST", self._path, request_data, {"Content-Type": "application/json"})
                response = conn.getresponse()
                body = response.read()
            except _STALE:
                self._drop()
                if reused and attempt == 0:
                    continue  # the node closed the idle connection: once more on a fresh one
                raise
            except BaseException:
                self._drop()
                raise
            if response.status != 200:
                self._drop()
                raise ConnectionError(
                    f"{method} to {self.endpoint_uri}: HTTP {response.status} {response.reason}: {body[:200]!r}"
                )
            return body
        raise AssertionError("unreachable: the second attempt returns or raises")
