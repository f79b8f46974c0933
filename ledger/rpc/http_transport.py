"""web3's HTTP provider over libcurl (pycurl), one kept-alive connection per thread.

Why: a party sends thousands of small JSON-RPC requests per task (state reads, event reads, transactions). web3's own
transport (a ``requests`` session over urllib3's pool) spent about 700 us of client CPU on each against an idle anvil,
and a kept-alive ``http.client`` connection still 87 us, most of it parsing the response's headers with the standard
library's e-mail parser; libcurl takes 25 us, 50 with the progress callback below (``eth_blockNumber`` 2,000 times
each, measured here). With four parties and anvil sharing two cores that CPU is wall time. Only the transport is
replaced (``HTTPProvider._make_request``): web3 still encodes, caches and decodes, so every call and error reads as
before.

libcurl keeps each handle's connection open between requests, and sends a request once more on a fresh connection
when the node had closed the kept one before answering. A transport failure surfaces as an ``OSError`` (a
``ConnectionError``: refused, reset, an HTTP status other than 200), which the callers already treat as a chain that
is down, and a node that says nothing for the timeout raises ``TimeoutError``. As ``http.client`` did: no proxy
from the environment (libcurl would send the node's traffic, transactions and all, through ``http_proxy``), a
timeout that counts silence, not a long answer that keeps arriving (``_Watch``), Python's signal handlers run while
a request waits (a party told to stop stops), and ``SSL_CERT_FILE`` names the certificates an ``https`` node is
checked against.

A hosted node or the gateway before a consortium's node may answer "busy" (HTTP 429, 502, 503, 504) for a moment:
such a request is sent again after a pause that doubles (``RETRY_PAUSES``), and only the last answer raises. Every
JSON-RPC request may be sent twice: a transaction sent again has the same hash, which the node already holds.
"""

from __future__ import annotations

import http
import io
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pycurl
from web3 import HTTPProvider
from web3.types import RPCEndpoint

RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""HTTP statuses of a node (or its gateway) that is busy for now, not of a request it refuses."""
RETRY_PAUSES: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)
"""Seconds before each new attempt after a busy answer: four more attempts within about 4 s."""


class KeepAliveHTTPProvider(HTTPProvider):
    """``HTTPProvider`` whose requests go through a libcurl handle of the calling thread (``threading.local``: a
    party's main loop, its endorsement handlers and its block listener each keep their own connection)."""

    def __init__(self, endpoint_uri: str, timeout: float = 120.0, **kwargs: Any) -> None:
        super().__init__(endpoint_uri, request_kwargs={"timeout": timeout}, **kwargs)
        url = urlsplit(endpoint_uri)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) JSON-RPC URL: {endpoint_uri!r}")
        self._timeout = timeout
        self._local = threading.local()

    @contextmanager
    def patience(self, seconds: float) -> Iterator[None]:
        """Within the block, this thread's requests end after ``seconds`` of silence instead of the provider's
        timeout: for a request that a node is known to leave unanswered now and then, better asked again soon."""
        before = getattr(self._local, "patience", None)
        self._local.patience = seconds
        try:
            yield
        finally:
            self._local.patience = before

    def _curl(self) -> pycurl.Curl:
        """This thread's handle, made on its first request."""
        curl: pycurl.Curl | None = getattr(self._local, "curl", None)
        if curl is not None:
            return curl
        curl = pycurl.Curl()
        curl.setopt(pycurl.URL, str(self.endpoint_uri))
        curl.setopt(pycurl.POST, 1)
        # no "Expect: 100-continue" round trip before a large body (a histogram transaction)
        curl.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json", "Expect:"])
        curl.setopt(pycurl.PROXY, "")  # the node directly, whatever http_proxy says
        curl.setopt(pycurl.TCP_NODELAY, 1)
        curl.setopt(pycurl.NOSIGNAL, 1)  # timeouts without SIGALRM, which threads must not use
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, int(self._timeout * 1000)))
        curl.setopt(pycurl.NOPROGRESS, 0)  # the progress callback of each request (``_Watch``)
        if os.environ.get("SSL_CERT_FILE"):
            curl.setopt(pycurl.CAINFO, os.environ["SSL_CERT_FILE"])
        self._local.curl = curl
        return curl

    def _drop(self) -> None:
        curl = getattr(self._local, "curl", None)
        self._local.curl = None
        if curl is not None:
            curl.close()

    def _make_request(self, method: RPCEndpoint, request_data: bytes) -> bytes:
        for pause in RETRY_PAUSES:
            try:
                return self._request_once(method, request_data)
            except _Busy:
                time.sleep(pause)
        try:
            return self._request_once(method, request_data)
        except _Busy as busy:
            raise ConnectionError(str(busy)) from None

    def _request_once(self, method: RPCEndpoint, request_data: bytes) -> bytes:
        curl = self._curl()
        body = io.BytesIO()
        timeout = getattr(self._local, "patience", None) or self._timeout
        watch = _Watch(timeout)
        curl.setopt(pycurl.POSTFIELDS, request_data)
        curl.setopt(pycurl.WRITEDATA, body)
        curl.setopt(pycurl.XFERINFOFUNCTION, watch)
        try:
            curl.perform()
        except pycurl.error as exc:
            self._drop()
            code, message = exc.args
            what = f"{method} to {self.endpoint_uri}: {message} (libcurl error {code})"
            # the errors http.client raised: a timeout (an OSError, not a ConnectionError), a refused connection
            if watch.expired or code == pycurl.E_OPERATION_TIMEDOUT:
                raise TimeoutError(f"{method} to {self.endpoint_uri}: no answer for {timeout:g} s") from None
            if code == pycurl.E_COULDNT_CONNECT:
                raise ConnectionRefusedError(what) from None
            raise ConnectionError(what) from None
        except BaseException:  # a signal handler's exception (SystemExit, KeyboardInterrupt) out of the callback
            self._drop()
            raise
        status = int(curl.getinfo(pycurl.RESPONSE_CODE))
        answer = body.getvalue()
        if status != 200:
            self._drop()
            try:
                reason = http.HTTPStatus(status).phrase
            except ValueError:
                reason = "unknown status"
            message = f"{method} to {self.endpoint_uri}: HTTP {status} {reason}: {answer[:200]!r}"
            raise _Busy(message) if status in RETRY_STATUSES else ConnectionError(message)
        return answer


class _Busy(ConnectionError):
    """A busy answer (``RETRY_STATUSES``), asked again."""


class _Watch:
    """libcurl's progress callback of one request, which it calls several times a second while it waits.

    It ends the request after ``timeout`` seconds in which no byte went either way, as a socket timeout did (a long
    answer that keeps arriving is not cut); libcurl's own limits count the whole request, or an average speed over
    several seconds. And each call gives Python's signal handlers their turn: an exception one raises (SIGTERM's
    ``SystemExit``) ends the request at once, where a request waiting inside libcurl would hold it for the timeout."""

    __slots__ = ("expired", "last", "moved", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.last = time.monotonic()
        self.moved = (0, 0)
        self.expired = False

    def __call__(self, download_total: int, downloaded: int, upload_total: int, uploaded: int) -> int:
        now = time.monotonic()
        if (downloaded, uploaded) != self.moved:
            self.moved, self.last = (downloaded, uploaded), now
        elif now - self.last > self.timeout:
            self.expired = True
            return 1  # abort
        return 0
