"""Who may ask a party: requests to its endpoints signed by the member they claim to come from, refused before any
work otherwise. The verifier is a real party node (its parts real, its chain a placeholder) served by the real app
under uvicorn; ``Endorser.checks`` counts the requests that reached its check."""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.messages import encode_defunct
from fastapi.routing import APIRoute, APIWebSocketRoute
from websockets.sync.client import connect

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.party.endorse_client import ENDORSE_STREAM_PATH, EndorseClient, VerifierUnreachable, stream_url
from fgbdt_chain.node.party.endorse_server import ENDORSE_PATH, RELAY_PATH, EndorsementServer, create_app
from fgbdt_chain.node.party.joining import TaskTerms
from fgbdt_chain.node.party.party_node import PartyNode
from fgbdt_chain.node.party.peer_auth import (
    Credentials,
    PeerGuard,
    PeerLimits,
    Refused,
    RequestSigner,
    request_limit,
    request_text,
    tls_client_context,
)
from fgbdt_chain.node.party.relay import RELAY_STREAM_PATH
from fgbdt_chain.node.party.session import NodeSettings, PartySession

CHAIN_ID, TASK = 31337, 7
VERIFIER, ASKER, OTHER, OUTSIDER = (Account.from_key(bytes([i + 1]) * 32) for i in range(4))
ANY: Any = None


def _signer(account: Any, task: int = TASK) -> RequestSigner:
    return RequestSigner(account, lambda: CHAIN_ID, task)


def _signed(account: Any, body: bytes, at: float, nonce: str) -> Credentials:
    """A request's credentials with a chosen time and nonce."""
    text = request_text("POST", ENDORSE_PATH, CHAIN_ID, TASK, account.address, VERIFIER.address, nonce, int(at), body)
    signature = account.sign_message(encode_defunct(text)).signature
    return Credentials(account.address, nonce, int(at), "0x" + bytes(signature).hex())


def _body(party: str = ASKER.address, level: int = 0) -> bytes:
    return json.dumps({"task": TASK, "tree": 0, "level": level, "party": party, "nodes": [["1"] * 6]}).encode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _verifier(limits: PeerLimits, account: Any = VERIFIER) -> PartyNode:
    """A real party node of task ``TASK`` (``account``'s; the verifier's by default) whose members are the verifier,
    the asker and one other party; it has not started training, so its check answers 409 after counting the
    request."""
    session = PartySession(
        SimpleNamespace(client=SimpleNamespace(chain_id=CHAIN_ID)),  # type: ignore[arg-type]
        TASK,
        account,
        ANY,
        NodeSettings(peer_limits=limits),
        lambda message: None,
        ANY,
        TrainParams(depth=2),
        ANY,
        ANY,
    )
    session.parties = [VERIFIER.address, ASKER.address, OTHER.address]
    return PartyNode.assembled(session, TaskTerms(ANY, ANY, ANY, (0.0, 1.0), ANY, ANY, ANY))


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[tuple[PartyNode, str]]:
    limits = getattr(request, "param", PeerLimits())
    node = _verifier(limits)
    port = _free_port()
    server = EndorsementServer(node, "127.0.0.1", port)
    server.start()
    try:
        yield node, f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _post(endpoint: str, body: bytes, creds: Credentials | None, path: str = ENDORSE_PATH) -> httpx.Response:
    headers = {"content-type": "application/json", **(creds.headers() if creds else {})}
    return httpx.post(endpoint + path, content=body, headers=headers, timeout=10.0)


def test_a_member_s_signed_request_reaches_the_check_by_either_route(served: tuple[PartyNode, str]) -> None:
    node, endpoint = served
    body = _body()
    posted = _post(endpoint, body, _signer(ASKER).sign("POST", ENDORSE_PATH, body, VERIFIER.address))
    assert posted.status_code == 409 and "not started training" in posted.json()["detail"]
    client = EndorseClient(10.0, _signer(ASKER))
    try:
        assert client.ask(endpoint, body.decode(), audience=VERIFIER.address)[0] == 409
        assert client.ask(endpoint, body.decode(), audience=VERIFIER.address)[0] == 409  # a fresh nonce each time
    finally:
        client.close()
    assert node.endorser.checks == 3


def test_forged_replayed_stale_and_outsiders_requests_cost_no_check(served: tuple[PartyNode, str]) -> None:
    node, endpoint = served
    body = _body()
    refusals: list[tuple[int, str]] = []

    def refused(response: httpx.Response) -> None:
        refusals.append((response.status_code, response.json()["detail"]))

    refused(_post(endpoint, body, None))  # unsigned
    forged = _signer(OUTSIDER).sign("POST", ENDORSE_PATH, body, VERIFIER.address)
    refused(_post(endpoint, body, Credentials(ASKER.address, forged.nonce, forged.at, forged.signature)))
    # signed by the asker, for another verifier, for another task, for another body, for another route
    refused(_post(endpoint, body, _signer(ASKER).sign("POST", ENDORSE_PATH, body, OTHER.address)))
    refused(_post(endpoint, body, _signer(ASKER, TASK + 1).sign("POST", ENDORSE_PATH, body, VERIFIER.address)))
    refused(_post(endpoint, body, _signer(ASKER).sign("POST", ENDORSE_PATH, _body(level=1), VERIFIER.address)))
    refused(_post(endpoint, body, _signer(ASKER).sign("POST", RELAY_PATH, body, VERIFIER.address)))
    assert [s for s, _ in refusals] == [401] * 6 and "unsigned" in refusals[0][1]
    assert all("bad signature" in d for _, d in refusals[1:])
    # an outsider's own valid signature; a member posting in another member's name
    outsider = _signer(OUTSIDER).sign("POST", ENDORSE_PATH, _body(OUTSIDER.address), VERIFIER.address)
    refused(_post(endpoint, _body(OUTSIDER.address), outsider))
    assert refusals[-1][0] == 403 and "not an approved member" in refusals[-1][1]
    in_others_name = _body(OTHER.address)
    refused(
        _post(endpoint, in_others_name, _signer(ASKER).sign("POST", ENDORSE_PATH, in_others_name, VERIFIER.address))
    )
    assert refusals[-1][0] == 403 and "signed by" in refusals[-1][1]
    # a stale request: signed a minute ago
    refused(_post(endpoint, body, _signed(ASKER, body, time.time() - 60, "n1")))
    assert refusals[-1][0] == 401 and "clock" in refusals[-1][1]
    assert node.endorser.checks == 0
    # a replay: served once, refused the second time, by either route
    creds = _signer(ASKER).sign("POST", ENDORSE_PATH, body, VERIFIER.address)
    assert _post(endpoint, body, creds).status_code == 409
    replay = _post(endpoint, body, creds)
    assert replay.status_code == 401 and "replayed" in replay.json()["detail"]
    message = _signer(ASKER).sign("WS", ENDORSE_STREAM_PATH, body, VERIFIER.address).line() + "\n" + body.decode()
    with connect(stream_url(endpoint)) as ws:
        answers = []
        for _ in range(2):
            ws.send(message)
            answers.append(json.loads(ws.recv(timeout=10)))
        ws.send(body.decode())  # unsigned on the stream
        answers.append(json.loads(ws.recv(timeout=10)))
    assert [a["status"] for a in answers] == [409, 401, 401]
    assert "replayed" in answers[1]["body"]["detail"] and "unsigned" in answers[2]["body"]["detail"]
    assert node.endorser.checks == 2


def test_the_relay_routes_take_only_what_their_sender_signed(served: tuple[PartyNode, str]) -> None:
    """A request to relay names its party in ``from``: signed by another member, or unsigned, it is refused before
    the relay's own checks; signed by its party, it reaches them (this node does not relay yet: 409)."""
    _, endpoint = served
    body = json.dumps({"kind": "votes", "from": ASKER.address}).encode()
    assert _post(endpoint, body, None, RELAY_PATH).status_code == 401
    by_other = _signer(OTHER).sign("POST", RELAY_PATH, body, VERIFIER.address)
    assert _post(endpoint, body, by_other, RELAY_PATH).status_code == 403
    own = _post(endpoint, body, _signer(ASKER).sign("POST", RELAY_PATH, body, VERIFIER.address), RELAY_PATH)
    assert own.status_code == 409 and "does not relay" in own.json()["detail"]
    client = EndorseClient(10.0, _signer(ASKER))
    try:
        status, answer = client.ask(endpoint, body.decode(), RELAY_STREAM_PATH, VERIFIER.address)
    finally:
        client.close()
    assert status == 409 and "does not relay" in answer["detail"]


@pytest.mark.parametrize("served", [PeerLimits(rate=0.01, burst=2)], indirect=True)
def test_too_many_or_too_large_requests_are_refused_with_their_statuses(served: tuple[PartyNode, str]) -> None:
    node, endpoint = served
    body = _body()
    statuses = [
        _post(endpoint, body, _signer(ASKER).sign("POST", ENDORSE_PATH, body, VERIFIER.address)).status_code
        for _ in range(3)
    ]
    assert statuses == [409, 409, 429]  # the burst, then the rate
    others = body.replace(ASKER.address.encode(), OTHER.address.encode())
    other = _post(endpoint, others, _signer(OTHER).sign("POST", ENDORSE_PATH, others, VERIFIER.address))
    assert other.status_code == 409  # one member's limit is its own: the others are still served
    assert node.endorser.checks == 3
    limit = request_limit(node.params.depth, node.params.nbins)
    huge = b" " * (limit + 1)
    response = _post(endpoint, huge, _signer(OTHER).sign("POST", ENDORSE_PATH, huge, VERIFIER.address))
    assert response.status_code == 413 and str(limit) in response.json()["detail"]
    # the asker's own node reads a 429 as "ask again later", as it reads "not yet" (409), not as a refusal
    asking = _verifier(PeerLimits(), ASKER)
    asking.session.endpoints = {VERIFIER.address: endpoint}
    try:
        for _ in range(2):
            answer, reason, retry = asking.asker.ask(VERIFIER.address, body.decode())
            assert answer is None and retry
        assert "slow down" in reason
    finally:
        asking.session.verifiers.close()
    assert node.endorser.checks == 3
    message = _signer(OTHER).sign("WS", ENDORSE_STREAM_PATH, huge, VERIFIER.address).line() + "\n" + huge.decode()
    with connect(stream_url(endpoint), max_size=None) as ws:
        ws.send(message)
        answer = json.loads(ws.recv(timeout=10))
    assert answer["status"] == 413
    assert node.endorser.checks == 3


def test_a_nonce_cache_forgets_only_what_the_clock_window_refuses() -> None:
    """Each member's nonces are kept while a request with them could still be on time, and no longer."""
    now = [1_000_000.0]
    guard = PeerGuard(
        lambda: CHAIN_ID,
        TASK,
        VERIFIER.address,
        lambda: [VERIFIER.address, ASKER.address],
        lambda: 1 << 20,
        PeerLimits(skew_seconds=30, nonces_per_peer=3),
        clock=lambda: now[0],
    )

    def signed(at: float, nonce: str) -> Credentials:
        return _signed(ASKER, b"{}", at, nonce)

    assert guard.admit("POST", ENDORSE_PATH, b"{}", signed(now[0], "a")) == ASKER.address
    with pytest.raises(Refused, match="replayed"):
        guard.admit("POST", ENDORSE_PATH, b"{}", signed(now[0], "a"))
    guard.admit("POST", ENDORSE_PATH, b"{}", signed(now[0], "b"))
    guard.admit("POST", ENDORSE_PATH, b"{}", signed(now[0], "c"))
    with pytest.raises(Refused) as full:
        guard.admit("POST", ENDORSE_PATH, b"{}", signed(now[0], "d"))
    assert full.value.status == 429
    now[0] += 31  # "a" can no longer be on time: forgotten, and a request reusing it is refused by its clock
    with pytest.raises(Refused, match="clock"):
        guard.admit("POST", ENDORSE_PATH, b"{}", signed(now[0] - 31, "a"))
    assert guard.admit("POST", ENDORSE_PATH, b"{}", signed(now[0], "d")) == ASKER.address
    assert guard.refused == {401: 2, 429: 1}


def _ca_and_cert(folder: Path) -> tuple[Path, Path, Path]:
    """A self-signed CA and a certificate it signed for 127.0.0.1: (CA file, certificate file, key file)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("test federation CA"))
        .issuer_name(name("test federation CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("verifier"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


def test_an_https_endpoint_is_reached_by_peers_that_trust_its_ca_only(tmp_path: Path) -> None:
    """The endpoint serves HTTPS and WSS from its certificate; a party given the federation's CA file reaches it,
    one without it (the system's CAs) refuses the certificate, and plain HTTP gets no answer."""
    ca, cert, key = _ca_and_cert(tmp_path)
    node = _verifier(PeerLimits())
    port = _free_port()
    server = EndorsementServer(node, "127.0.0.1", port, tls=(str(cert), str(key)))
    server.start()
    endpoint = f"https://127.0.0.1:{port}"
    trusting = EndorseClient(10.0, _signer(ASKER), tls_client_context(str(ca)))
    stranger = EndorseClient(10.0, _signer(ASKER))
    try:
        assert trusting.ask(endpoint, _body().decode(), audience=VERIFIER.address)[0] == 409
        with pytest.raises(VerifierUnreachable, match="CERTIFICATE_VERIFY_FAILED"):
            stranger.ask(endpoint, _body().decode(), audience=VERIFIER.address)
        body = _body()
        creds = _signer(ASKER).sign("POST", ENDORSE_PATH, body, VERIFIER.address)
        headers = {"content-type": "application/json", **creds.headers()}
        posted = httpx.post(
            endpoint + ENDORSE_PATH,
            content=body,
            headers=headers,
            verify=ssl.create_default_context(cafile=ca),
            timeout=10.0,
        )
        assert posted.status_code == 409
        with pytest.raises(httpx.HTTPError):
            httpx.post(f"http://127.0.0.1:{port}{ENDORSE_PATH}", content=body, headers=headers, timeout=5.0)
    finally:
        trusting.close()
        stranger.close()
        server.stop()
    assert node.endorser.checks == 2


CLAIMS: dict[str, tuple[str, bytes]] = {
    ENDORSE_PATH: ("POST", _body()),
    ENDORSE_STREAM_PATH: ("WS", _body()),
    RELAY_PATH: ("POST", json.dumps({"kind": "votes", "from": ASKER.address}).encode()),
    RELAY_STREAM_PATH: ("WS", json.dumps({"kind": "votes", "from": ASKER.address}).encode()),
}
"""Every route of a party's endpoint that takes a request in a member's name (the asker's), with such a request."""
PUBLIC = {"/v1/health", "/openapi.json"}
"""The routes that answer anyone: what the chain says of the party, and the endpoint's own description."""


def test_no_route_answers_a_request_its_claimed_member_did_not_sign(served: tuple[PartyNode, str]) -> None:
    """Over every route the app serves: a route is either public (a GET that takes no request in anyone's name) or
    listed in ``CLAIMS``, and every listed one refuses an unsigned request, one signed by an outsider in the member's
    name, one signed by another member, and one the member signed for another route, with 401 or 403 from the
    guard, before any check; a route added to the app and not to this test fails it."""
    node, endpoint = served
    routes = {r.path: r for r in create_app(node).routes}  # the app the endpoint serves (``EndorsementServer``)
    assert set(routes) == PUBLIC | set(CLAIMS), "a route neither public nor known to take a member's request"
    for path in PUBLIC:
        methods = getattr(routes[path], "methods", set())
        assert methods <= {"GET", "HEAD"}, f"{path} answers {methods}"
        assert not isinstance(routes[path], APIWebSocketRoute)
        assert httpx.post(endpoint + path, content=_body(), timeout=10.0).status_code == 405
    for path, (kind, body) in CLAIMS.items():
        assert isinstance(routes[path], APIWebSocketRoute if kind == "WS" else APIRoute)
        other_route = next(p for p, (k, _) in CLAIMS.items() if k == kind and p != path)
        forged = _signer(OUTSIDER).sign(kind, path, body, VERIFIER.address)
        attempts = {
            "unsigned": None,
            "an outsider's signature in the member's name": Credentials(
                ASKER.address, forged.nonce, forged.at, forged.signature
            ),
            "another member's": _signer(OTHER).sign(kind, path, body, VERIFIER.address),
            "signed for another route": _signer(ASKER).sign(kind, other_route, body, VERIFIER.address),
        }
        for why, creds in attempts.items():
            if kind == "POST":
                response = _post(endpoint, body, creds, path)
                status, detail = response.status_code, response.json()["detail"]
            else:
                with connect(stream_url(endpoint, path)) as ws:
                    ws.send(body.decode() if creds is None else creds.line() + "\n" + body.decode())
                    answer = json.loads(ws.recv(timeout=10))
                status, detail = answer["status"], answer["body"]["detail"]
            assert status in (401, 403), (path, why, status, detail)
            assert "relay" not in str(detail) and "training" not in str(detail), (path, why, detail)
    assert node.endorser.checks == 0
