"""The JSON-RPC transport parties use (``ledger.rpc.http_transport``): one kept-alive connection per thread, a fresh one
when the node closed it, and transport failures (refused, timed out, an HTTP error) as ``OSError``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pycurl
import pytest
from web3 import Web3

from fgbdt_chain.ledger.devnet.anvil import Anvil, free_port
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.http_transport import KeepAliveHTTPProvider


class OneRequestPerConnection:
    """A JSON-RPC server that answers ``eth_blockNumber`` with HTTP/1.1 keep-alive headers, then closes the connection
    without saying so: the next request on that connection finds it gone. ``status`` sets the HTTP status; the first
    ``busy`` answers are 503 Service Unavailable."""

    def __init__(self, status: int = 200, busy: int = 0) -> None:
        self.status = status
        self.busy = busy
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(next(v for k, v in _headers(head) if k == "content-length"))
                while len(body) < length:
                    body += conn.recv(65536)
                request = json.loads(body)
                answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": "0x2a"}).encode()
                status = 503 if self.connections <= self.busy else self.status
                reason = {200: "OK", 503: "Service Unavailable"}.get(status, "Bad Gateway")
                conn.sendall(
                    f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(answer)}\r\nConnection: keep-alive\r\n\r\n".encode()
                    + answer
                )

    def close(self) -> None:
        self.sock.close()


def _headers(head: bytes) -> Iterator[tuple[str, str]]:
    for line in head.decode().split("\r\n")[1:]:
        key, _, value = line.partition(":")
        yield key.strip().lower(), value.strip()


@pytest.mark.chain
def test_a_threads_requests_share_one_connection(anvil_node: Anvil) -> None:
    client = ChainClient.connect(anvil_node.url)
    provider = client.w3.provider
    assert isinstance(provider, KeepAliveHTTPProvider)
    first = client.block_number
    curl = provider._local.curl
    client.mine(2)
    assert client.block_number == first + 2
    assert provider._local.curl is curl and curl.getinfo(pycurl.NUM_CONNECTS) == 0  # the connection, kept
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.extend([client.block_number, provider._local.curl]))
    worker.start()
    worker.join()
    assert seen[0] == first + 2 and seen[1] is not curl  # another thread, its own handle and connection


def test_a_connection_the_node_closed_is_replaced() -> None:
    server = OneRequestPerConnection()
    try:
        w3 = Web3(KeepAliveHTTPProvider(server.url, timeout=5))
        assert [w3.eth.block_number for _ in range(3)] == [42, 42, 42]
        assert server.connections == 3  # each request after the first found its connection closed, and retried
    finally:
        server.close()


def test_transport_failures_are_os_errors_that_say_what_happened() -> None:
    server = OneRequestPerConnection(status=502)
    try:
        w3 = Web3(KeepAliveHTTPProvider(server.url, timeout=5))
        with pytest.raises(ConnectionError, match=r"eth_blockNumber .*HTTP 502 Bad Gateway"):
            _ = w3.eth.block_number
    finally:
        server.close()
    with pytest.raises(OSError):
        _ = Web3(KeepAliveHTTPProvider(f"http://127.0.0.1:{free_port()}", timeout=5)).eth.block_number
    with pytest.raises(ValueError, match="not an http"):
        KeepAliveHTTPProvider("ws://127.0.0.1:8545")


def test_a_busy_node_is_asked_again_after_a_pause() -> None:
    """HTTP 503 (and 429, 502, 504) is a node or gateway busy for a moment: the request goes again after pauses
    that double, and the caller sees the answer that came."""
    server = OneRequestPerConnection(busy=2)
    try:
        started = time.monotonic()
        assert Web3(KeepAliveHTTPProvider(server.url, timeout=5)).eth.block_number == 42
        assert server.connections == 3 and time.monotonic() - started >= 0.25 + 0.5
    finally:
        server.close()


def test_a_node_that_does_not_answer_times_out_and_its_connection_is_dropped() -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections (the kernel's backlog) and never answers
    try:
        provider = KeepAliveHTTPProvider(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.3)
        with pytest.raises(TimeoutError, match=r"eth_blockNumber .*no answer for 0.3 s"):
            _ = Web3(provider).eth.block_number
        assert provider._local.curl is None  # dropped: a request after a failure takes a fresh connection
    finally:
        silent.close()


def test_patience_shortens_the_wait_of_this_threads_requests_only_within_its_block() -> None:
    silent = socket.create_server(("127.0.0.1", 0))
    try:
        provider = KeepAliveHTTPProvider(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=30)
        with provider.patience(0.2), pytest.raises(TimeoutError, match=r"no answer for 0.2 s"):
            _ = Web3(provider).eth.block_number
        assert getattr(provider._local, "patience", None) is None  # the provider's own timeout again
    finally:
        silent.close()


def test_a_proxy_in_the_environment_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's traffic goes to the node: libcurl would otherwise follow ``http_proxy`` (``http.client`` never did),
    here a port where nothing listens."""
    dead = f"http://127.0.0.1:{free_port()}"
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    server = OneRequestPerConnection()
    try:
        assert Web3(KeepAliveHTTPProvider(server.url, timeout=5)).eth.block_number == 42
    finally:
        server.close()


def test_a_signal_handler_ends_a_request_that_waits() -> None:
    """A party told to stop (SIGTERM, whose handler raises ``SystemExit``) stops while a request waits for a silent
    node, not when the request times out: libcurl's progress callback lets Python run the handler."""
    script = f"""
import signal, socket, sys, threading, time
from web3 import Web3
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from fgbdt_chain.ledger.rpc.http_transport import KeepAliveHTTPProvider
silent = socket.create_server(("127.0.0.1", 0))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
threading.Timer(0.3, lambda: signal.raise_signal(signal.SIGTERM)).start()
start = time.monotonic()
try:
    Web3(KeepAliveHTTPProvider(f"http://127.0.0.1:{{silent.getsockname()[1]}}", timeout=30)).eth.block_number
finally:
    print(round(time.monotonic() - start, 2))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert float(done.stdout.strip()) < 5.0  # the request would wait 30 s
