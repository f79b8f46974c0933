"""The endorsement exchange over a kept-open WebSocket: the stream route answers as the POST route does, and the
asker's client survives a verifier that restarted, reports one that is gone, and refuses what is not an endpoint.

The verifier here is the real app under uvicorn; its node is a recorder of what the check received, so that what
crosses the wire (and what the route makes of bad input) is what is asserted. The check itself is tested with real
histograms in the chain and end-to-end tests."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from eth_account import Account
from websockets.sync.client import connect

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.party.endorse_client import (
    ENDORSE_STREAM_PATH,
    EndorseClient,
    NoEndorsementStream,
    VerifierUnreachable,
    stream_url,
)
from fgbdt_chain.node.party.endorse_server import EndorsementServer
from fgbdt_chain.node.party.peer_auth import PeerLimits, RequestSigner

ASKER = Account.from_key(b"\x11" * 32)
PARTY = ASKER.address
VERIFIER = Account.from_key(b"\x12" * 32).address
MEMBER = Account.from_key(bytes([1]) * 32)
"""A third party of the task, the signer of the relayed request in the relay test."""


def _client(timeout: float, account: Any = ASKER) -> EndorseClient:
    """A client that signs as ``account``, a member of the recording node's task (``node.party.peer_auth``)."""
    return EndorseClient(timeout, RequestSigner(account, lambda: 31337, 1))


def _signed(message: str, path: str = ENDORSE_STREAM_PATH) -> str:
    """A stream message signed by the asker: its credentials' line, then ``message``."""
    creds = RequestSigner(ASKER, lambda: 31337, 1).sign("WS", path, message.encode(), VERIFIER)
    return creds.line() + "\n" + message


def _post(endpoint: str, path: str, body: Any) -> httpx.Response:
    """``body`` posted as JSON, signed by the asker."""
    raw = json.dumps(body).encode()
    creds = RequestSigner(ASKER, lambda: 31337, 1).sign("POST", path, raw, VERIFIER)
    headers = {"content-type": "application/json", **creds.headers()}
    return httpx.post(endpoint + path, content=raw, headers=headers, timeout=10.0)


class RecordingNode:
    """What ``create_app`` needs of a node: ``endorse(body) -> (status, body)``; answers as told, records the bodies."""

    def __init__(self) -> None:
        self.task_id, self.address, self.index, self.party = 1, VERIFIER, 0, None
        self.parties = [VERIFIER, PARTY, MEMBER.address]
        self.settings = SimpleNamespace(peer_limits=PeerLimits())
        self.task = SimpleNamespace(client=SimpleNamespace(chain_id=31337))
        self.params = TrainParams()
        self.bodies: list[dict[str, Any]] = []
        self.fail: Exception | None = None
        self.relay: Any = None  # not relaying until a test gives it a channel

    def endorse(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.fail is not None:
            raise self.fail
        self.bodies.append(body)
        if body["level"] == 9:
            return 403, {"detail": "refused: level nine"}
        return 200, {"signature": "0x" + "ab" * 65, "credit": {"g": "1", "h": "2", "n": str(len(body["nodes"]))}}


def _body(level: int = 0, nodes: int = 2) -> dict[str, Any]:
    rows = [[str(10**30 + i)] * 6 for i in range(nodes)]
    return {"task": 1, "tree": 3, "level": level, "party": PARTY, "nodes": rows}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def verifier() -> Any:
    node = RecordingNode()
    port = _free_port()
    server = EndorsementServer(node, "127.0.0.1", port)  # type: ignore[arg-type]
    server.start()
    try:
        yield node, f"http://127.0.0.1:{port}", port, server
    finally:
        server.stop()


@pytest.fixture
def client() -> Any:
    asker = _client(10.0)
    try:
        yield asker
    finally:
        asker.close()


def test_the_stream_answers_what_the_post_route_answers(verifier: Any, client: EndorseClient) -> None:
    node, endpoint, _, _ = verifier
    for level in (0, 9):
        status, answer = client.ask(endpoint, _body(level), audience=VERIFIER)
        posted = _post(endpoint, "/v1/endorse", _body(level))
        assert (status, answer) == (posted.status_code, posted.json())
    assert status == 403 and answer["detail"] == "refused: level nine"
    # the check got the validated request, the same by either route
    assert node.bodies[0] == node.bodies[1] == _body(0)


def test_bad_requests_and_a_failing_check_get_the_routes_statuses(verifier: Any, client: EndorseClient) -> None:
    node, endpoint, _, _ = verifier
    bad = {**_body(), "party": "not an address"}
    status, answer = client.ask(endpoint, bad, audience=VERIFIER)
    posted = _post(endpoint, "/v1/endorse", bad)
    assert status == posted.status_code == 422
    assert answer["detail"][0]["loc"] == posted.json()["detail"][0]["loc"] == ["body", "party"]
    # not JSON, or JSON in a binary message: the first a 422 that says so, the second read as the text would be
    conn = client._connection(stream_url(endpoint))
    conn.send(_signed("not json"))
    assert json.loads(conn.recv(timeout=10))["body"]["detail"][0]["type"] == "json_invalid"
    conn.send(_signed(json.dumps(_body())).encode())
    assert json.loads(conn.recv(timeout=10))["status"] == 200
    node.fail = RuntimeError("chain down")
    status, answer = client.ask(endpoint, _body(), audience=VERIFIER)
    assert status == 409 and "chain down" in answer["detail"]
    node.fail = None
    assert client.ask(endpoint, _body(), audience=VERIFIER)[0] == 200  # the connection outlived the errors
    assert len(node.bodies) == 2


def test_a_restarted_verifier_is_reached_again_and_a_gone_one_is_reported(verifier: Any, client: EndorseClient) -> None:
    node, endpoint, port, first = verifier
    assert client.ask(endpoint, _body(), audience=VERIFIER)[0] == 200
    # the verifier restarts on the same port: the kept connection is closed, the next request opens another
    first.stop()
    again = EndorsementServer(node, "127.0.0.1", port)
    again.start()
    try:
        assert client.ask(endpoint, _body(nodes=5), audience=VERIFIER) == (
            200,
            {"signature": "0x" + "ab" * 65, "credit": {"g": "1", "h": "2", "n": "5"}},
        )
    finally:
        again.stop()
    with pytest.raises(VerifierUnreachable):
        client.ask(endpoint, _body(), audience=VERIFIER)


@pytest.mark.parametrize("kept", [False, True])
def test_a_verifier_that_stops_reading_is_unreachable_after_the_timeout(kept: bool) -> None:
    """The verifier opens the stream and then reads nothing: the asker's send fills the TCP buffers and would block
    (websockets' synchronous send has no timeout). The client shuts the socket down at the timeout and reports the
    verifier unreachable; the asking thread is never left hanging, and a kept connection is not taken for one the
    verifier closed (no second connection, no second upload of the message)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    held: list[socket.socket] = []

    def accept_and_stall() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener closed: the test is over
                return
            held.append(conn)
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            key = next(
                line.split(b":", 1)[1].strip()
                for line in request.split(b"\r\n")
                if line.lower().startswith(b"sec-websocket-key")
            )
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            conn.sendall(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
            )  # and then nothing is ever read

    server = threading.Thread(target=accept_and_stall, daemon=True)
    server.start()
    client = EndorseClient(timeout=0.5)
    endpoint = f"http://127.0.0.1:{port}"
    if kept:
        client._connection(stream_url(endpoint))  # a connection kept from an earlier request
    outcome: list[BaseException | tuple[int, dict[str, Any]]] = []

    def ask() -> None:
        try:
            outcome.append(
                client.ask(endpoint, _body(nodes=120_000), audience=VERIFIER)
            )  # 25 MB: more than TCP buffers
        except VerifierUnreachable as exc:
            outcome.append(exc)

    start = time.monotonic()
    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    asker.join(20)
    try:
        assert not asker.is_alive(), "the send to a verifier that stopped reading never returned"
        assert isinstance(outcome[0], VerifierUnreachable)
        assert "no progress" in str(outcome[0]) or not kept
        assert len(held) == 1  # asked once, on one connection
        assert time.monotonic() - start < 10
    finally:
        for conn in held:  # first: a send still blocked (the assertion failed) then fails, and closing cannot hang
            conn.close()
        listener.close()
        asker.join(10)
        client.close()


def test_a_closed_client_leaves_no_watch_thread(verifier: Any) -> None:
    _, endpoint, _, _ = verifier

    def watches() -> int:
        return sum(t.name == "endorse-send-watch" and t.is_alive() for t in threading.enumerate())

    before = watches()
    for _ in range(3):
        client = _client(5.0)
        assert client.ask(endpoint, _body(), audience=VERIFIER)[0] == 200
        client.close()
    deadline = time.monotonic() + 5
    while watches() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watches() == before
    again = _client(5.0)  # a client used after close starts a watch again
    assert again.ask(endpoint, _body(), audience=VERIFIER)[0] == 200
    again.close()


def test_an_endpoint_without_the_stream_is_a_refusal_not_an_outage() -> None:
    """A node of an older release answers the handshake with 404: asking again would not change that."""

    class Plain(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(NoEndorsementStream, match=r"no endorsement stream at ws://127\.0\.0\.1:.*404"):
            EndorseClient(timeout=10.0).ask(f"http://127.0.0.1:{server.server_address[1]}", _body(), audience=VERIFIER)
    finally:
        server.shutdown()
        server.server_close()


def test_stream_urls_and_what_is_not_an_endpoint() -> None:
    assert stream_url("http://10.0.0.2:8000") == "ws://10.0.0.2:8000/v1/endorse/stream"
    assert stream_url("https://bank.example/fgbdt/") == "wss://bank.example/fgbdt/v1/endorse/stream"
    with pytest.raises(VerifierUnreachable, match="not an http"):
        stream_url("ftp://bank.example")
    with pytest.raises(VerifierUnreachable, match="not an http"):
        EndorseClient(timeout=1.0).ask("bank.example:8000", _body(), audience=VERIFIER)


def test_the_relay_routes_answer_alike_and_say_what_is_wrong(verifier: Any, client: EndorseClient) -> None:
    """``POST /v1/relay`` and its stream: a node that does not relay yet says so (409); malformed JSON and a malformed
    request are 422, with what is wrong; a forged one 403; nothing is held from any of them."""
    from types import SimpleNamespace

    from eth_account import Account

    from fgbdt_chain.node.party.relay import RELAY_STREAM_PATH, SELECTORS, RelayInbox

    node, endpoint, _, _ = verifier
    status, answer = client.ask(endpoint, {"kind": "votes", "from": PARTY}, RELAY_STREAM_PATH, audience=VERIFIER)
    posted = _post(endpoint, "/v1/relay", {"kind": "votes", "from": PARTY})
    assert status == posted.status_code == 409 and "does not relay" in answer["detail"] == posted.json()["detail"]
    keys = [Account.from_key(bytes([i + 1]) * 32) for i in range(2)]
    inbox = RelayInbox(1, "0x" + "11" * 20, [k.address for k in keys], 31337, "0x" + "22" * 20)
    node.relay = SimpleNamespace(inbox=inbox)
    status, answer = client.ask(endpoint, {"kind": "votes", "from": PARTY}, RELAY_STREAM_PATH, audience=VERIFIER)
    posted = _post(endpoint, "/v1/relay", {"kind": "votes", "from": PARTY})
    assert status == posted.status_code == 422 and "missing fields" in answer["detail"] == posted.json()["detail"]
    with connect(stream_url(endpoint, RELAY_STREAM_PATH)) as ws:
        ws.send(_signed("{not json", RELAY_STREAM_PATH))
        answer = json.loads(ws.recv(timeout=10))
    assert answer["status"] == 422 and answer["body"]["detail"].startswith("not JSON")
    forged = {
        "kind": "votes",
        "task": 1,
        "tree": 0,
        "level": 0,
        "from": keys[0].address,
        "to": "0x" + "11" * 20,
        "gas": 200_000,
        "nonce": 0,
        "deadline": int(time.time()) + 2,
        "data": "0x" + (SELECTORS["votes"] + b"".join(v.to_bytes(32, "big") for v in (1, 0, 1))).hex(),
        "signature": "0x" + "ab" * 65,
    }
    member = _client(10.0, MEMBER)
    try:
        status, answer = member.ask(endpoint, forged, RELAY_STREAM_PATH, audience=VERIFIER)
    finally:
        member.close()
    assert status == 403 and answer["detail"].startswith("signed by"), answer
    assert not inbox.holds("votes", 0, 0, keys[0].address)


def test_a_stop_without_waiting_returns_at_once_and_the_server_still_ends() -> None:
    """``stop(wait=False)``, as a node whose process ends next stops its server: uvicorn's graceful shutdown (a tick
    and a pause for the connections, 0.12-0.19 s) is not waited for, and the server ends anyway, an open stream
    with it."""
    port = _free_port()
    server = EndorsementServer(RecordingNode(), "127.0.0.1", port)  # type: ignore[arg-type]
    server.start()
    asker = _client(10.0)
    try:
        status, _ = asker.ask(f"http://127.0.0.1:{port}", json.dumps(_body()), audience=VERIFIER)
        assert status == 200  # a stream is open to it
        server.stop(wait=False)
        assert server.server.should_exit and server.server.force_exit
        assert server.thread.is_alive()  # not joined: it shuts down on its own
        server.thread.join(10)
        assert not server.thread.is_alive()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2.0)
    finally:
        asker.close()
        server.stop()


def test_after_the_warm_up_an_endpoint_imports_nothing_more_when_it_is_built_and_loaded() -> None:
    """What the fork server does once so that no forked party does it: FastAPI's and uvicorn's imports on first use
    (a fresh interpreter, since this one has served endpoints already)."""
    script = (
        "import sys\n"
        "from fgbdt_chain.node.party import endorse_server as s\n"
        "s.warm_up()\n"
        "before = set(sys.modules)\n"
        "s._config(s.create_app(None, s.PeerGuard(lambda: 0, 0, '', list, lambda: 0)), '127.0.0.1', 0).load()\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    # and the warm-up is what does it: without it, the first endpoint imports pydantic.v1 and uvicorn's protocols
    cold = script.replace("s.warm_up()\n", "")
    out = subprocess.run([sys.executable, "-c", cold], capture_output=True, text=True, check=True).stdout
    assert "pydantic.v1" in out and "uvicorn.protocols.http.auto" in out
