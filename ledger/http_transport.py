"""web3's HTTP provider over libcurl (pycurl), one kept-alive connection per thread.

Why: a party sends thousands of small JSON-RPC requests per task (state reads, event reads, transactions). web3's own
transport (a ``requests`` session over urllib3's pool) spent about 700 us of client CPU on each against an idle anvil,
and a kept-alive ``http.client`` connection still 87 us, most of it parsing the response's headers with the standard
library's e-mail parser; libcurl takes 25 us (``eth_blockNumber`` 2,000 times each, measured here). With four parties
and anvil sharing two cores that CPU is wall time. Only the transport is replaced (``HTTPProvider._make_request``):
web3 still encodes, caches and decodes, so every call and error reads as before.

libcurl keeps each handle's connection open between requests, and sends a request once more on a fresh connection
when the node had closed the kept one before answering. A transport failure surfaces as a ``ConnectionError`` (an
``OSError``: refused, reset, timed out, an HTTP status other than 200), which the callers already treat as a chain
that is down.
"""

from __future__ import annotations

import http
import io
import threading
from typing import Any
from urllib.parse import urlsplit

import pycurl
from web3 import HTTPProvider
from web3.types import RPCEndpoint


class KeepAliveHTTPProvider(HTTPProvider):
    """``HTTPProvider`` whose requests go through a libcurl handle of the calling thread (``threading.local``: a
    party's main loop, its endorsement handlers and its block listener each keep their own connection)."""

    def __init__(self, endpoint_uri: str, timeout: float = 120.0, **kwargs: Any) -> None:
        super().__init__(endpoint_uri, request_kwargs={"timeout": timeout}, **kwargs)
        url = urlsplit(endpoint_uri)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) JSON-RPC URL: {endpoint_uri!r}")
        self._timeout_ms = max(1, int(timeout * 1000))
        self._local = threading.local()

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
        curl.setopt(pycurl.TCP_NODELAY, 1)
        curl.setopt(pycurl.NOSIGNAL, 1)  # timeouts without SIGALRM, which threads must not use
        curl.setopt(pycurl.TIMEOUT_MS, self._timeout_ms)
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, self._timeout_ms)
        self._local.curl = curl
        return curl

    def _drop(self) -> None:
        curl = getattr(self._local, "curl", None)
        self._local.curl = None
        if curl is not None:
            curl.close()

    def _make_request(self, method: RPCEndpoint, request_data: bytes) -> bytes:
        curl = self._curl()
        body = io.BytesIO()
        curl.setopt(pycurl.POSTFIELDS, request_data)
        curl.setopt(pycurl.WRITEDATA, body)
        try:
            curl.perform()
        except pycurl.error as exc:
            self._drop()
            code, message = exc.args
            raise ConnectionError(f"{method} to {self.endpoint_uri}: {message} (libcurl error {code})") from None
        status = int(curl.getinfo(pycurl.RESPONSE_CODE))
        answer = body.getvalue()
        if status != 200:
            self._drop()
            try:
                reason = http.HTTPStatus(status).phrase
            except ValueError:
                reason = "unknown status"
            raise ConnectionError(f"{method} to {self.endpoint_uri}: HTTP {status} {reason}: {answer[:200]!r}")
        return answer
