"""The fault drills' TCP proxies on loopback: bytes pass in order with end-of-file, a hold stops them until release,
and a lossy link delivers everything in order while delaying some chunks."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from fgbdt_chain.deploy.tcp_proxies import HoldingProxies, LossyProxies, TcpProxies
from fgbdt_chain.ledger.devnet.anvil import free_port


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while chunk := self.request.recv(65536):
            self.request.sendall(chunk)


@pytest.fixture
def echo() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _through(proxies: TcpProxies, target: int) -> socket.socket:
    port = free_port()
    proxies.add(("127.0.0.1", port), ("127.0.0.1", target))
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def test_a_plain_proxy_passes_bytes_and_the_end(echo: int) -> None:
    proxies = TcpProxies()
    try:
        with _through(proxies, echo) as sock:
            data = bytes(range(256)) * 1000
            sock.sendall(data)
            assert _read(sock, len(data)) == data
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(1) == b""  # the end passed on both ways
    finally:
        proxies.close()


def test_a_hold_stops_every_byte_until_release(echo: int) -> None:
    proxies = HoldingProxies()
    try:
        with _through(proxies, echo) as sock:
            sock.sendall(b"before")
            assert _read(sock, 6) == b"before"
            proxies.hold()
            sock.sendall(b"during")
            sock.settimeout(0.5)
            with pytest.raises(TimeoutError):
                sock.recv(6)
            proxies.release()
            sock.settimeout(5)
            assert _read(sock, 6) == b"during"
    finally:
        proxies.close()


def test_a_lossy_link_delivers_in_order_and_delays_some_chunks(echo: int) -> None:
    proxies = LossyProxies(seed=3, one_way=0.001, jitter=0.0005, loss=0.5, rto=0.01)
    try:
        with _through(proxies, echo) as sock:
            sent = b""
            for i in range(40):
                msg = f"message {i:03d};".encode()
                sock.sendall(msg)
                sent += msg
                assert _read(sock, len(msg)) == msg
        assert proxies.delayed > 0
    finally:
        proxies.close()
