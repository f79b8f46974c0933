"""The party's endorsement endpoint: other parties post their level histograms, this party checks and signs.

A small FastAPI app run by uvicorn in a background thread of the node process, so the node can follow the chain
and answer verifiers at the same time. The check itself is :meth:`node.party.party_node.PartyNode.endorse`.

Two routes give the same check and answers: ``POST /v1/endorse``, one request per HTTP call, and the WebSocket
``/v1/endorse/stream``, where a party keeps one connection per verifier and sends one request per message
(``node.party.endorse_client``: a quarter of the CPU per request). Each stream answer is ``{"status", "body"}``: the
HTTP status and body the POST route would have answered with.

Requests to relay come the same two ways (``POST /v1/relay`` and the WebSocket ``/v1/relay/stream``): another
party hands this one, the level's relayer, its signed histograms or ballot to send with the others'
(``node.party.relay``).

Every request on these routes is signed by the member it claims to come from, and refused before anything is done
with it when it is not (``node.party.peer_auth``: 401 unsigned, forged, stale or replayed, 403 not a member or not the
party the body names, 413 too large, 429 too many). ``GET /v1/health`` answers anyone: it says only what the chain
says (the task, this party's address and index, and whether it trains).

A refused endorsement says that this verifier refuses, not why in numbers: the protocol publishes a verifier's
signature and the credit it signs, nothing else computed from its rows (the reasons, with their statistics, go to the
verifier's own log).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import uvicorn
from eth_utils import to_checksum_address
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from fgbdt_chain.ledger.spec.parameters import MAX_DEPTH
from fgbdt_chain.node.party.endorse_client import ENDORSE_STREAM_PATH
from fgbdt_chain.node.party.peer_auth import Credentials, PeerGuard, PeerLimits, Refused, request_limit
from fgbdt_chain.node.party.relay import RELAY_STREAM_PATH

if TYPE_CHECKING:
    from fgbdt_chain.node.party.party_node import PartyNode


class EndorseRequest(BaseModel):
    """One party's whole-level histograms, as it will submit them (node blocks in the contract's word layout)."""

    task: int = Field(ge=0, examples=[1])
    tree: int = Field(ge=0, examples=[0])
    level: int = Field(ge=0, examples=[0])
    party: str = Field(pattern=r"^0x[0-9a-fA-F]{40}$", examples=["0x90F8bf6A479f320ead074411a4B0e7944Ea8c9C1"])
    nodes: list[list[str]] = Field(description="per open node, 6 * nbins integers as decimal strings")


class Credit(BaseModel):
    g: str
    h: str
    n: str


class EndorseResponse(BaseModel):
    """What the protocol publishes of an endorsement: the verifier's signature and the credit it signed."""

    signature: str
    credit: Credit


ENDORSE_PATH, RELAY_PATH = "/v1/endorse", "/v1/relay"
WS_MAX_BYTES = request_limit(MAX_DEPTH, 256) + 4096
"""The largest stream message uvicorn reads (the widest level of any task); the guard holds each task to its own."""


def guard_of(node: PartyNode, limits: PeerLimits | None = None) -> PeerGuard:
    """The guard of a party node's endpoints: its task's approved members, signing for this party, held to the
    task's widest level."""
    return PeerGuard(
        lambda: node.task.client.chain_id,
        node.task_id,
        node.address,
        lambda: node.parties,
        lambda: request_limit(node.params.depth, node.params.nbins),
        limits,
    )


def _refusal(refused: Refused) -> tuple[int, dict[str, Any]]:
    return refused.status, {"detail": refused.reason}


def _claims(body: Any, field: str, signer: str) -> None:
    """:class:`Refused` (403) unless the body's ``field`` names the request's signer."""
    claimed = body.get(field) if isinstance(body, dict) else None
    try:
        same = isinstance(claimed, str) and to_checksum_address(claimed) == signer
    except ValueError:
        same = False
    if not same:
        raise Refused(403, f"the request names {claimed!r} but is signed by {signer}")


async def _read_body(request: Request, guard: PeerGuard) -> bytes:
    """The request's body, refused (413) as soon as it is known to pass the limit: by its Content-Length before
    reading, or while reading."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        guard.size(int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        guard.size(size)
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(node: PartyNode, guard: PeerGuard | None = None) -> FastAPI:
    # the schema (/openapi.json) describes the endpoint to peers' operators; no Swagger or ReDoc pages, which load
    # their scripts from a CDN that a party's host behind its firewall does not reach
    app = FastAPI(title="FGBDT-Chain party endorsement endpoint", version="1", docs_url=None, redoc_url=None)
    gate = guard if guard is not None else guard_of(node, node.settings.peer_limits)

    @app.get("/v1/health")
    def health() -> dict[str, object]:
        return {"task": node.task_id, "party": node.address, "index": node.index, "training": node.party is not None}

    # Both routes check on the server's event loop, not handed to a worker thread: the check takes about a
    # millisecond (median) while an asker's round trip took nine, and the three askers of a level are served one
    # after another either way (they share the interpreter lock and this node's lock). Measured on chain, 50 trees
    # of depth 6: a level in 53 ms against 56.

    def endorse_body(signer: str, data: bytes) -> tuple[int, dict[str, Any]]:
        try:
            req = EndorseRequest.model_validate_json(data)
        except ValidationError as exc:  # located as FastAPI locates the POST body's errors
            errors = json.loads(exc.json(include_url=False))
            return 422, {"detail": [{**e, "loc": ["body", *e["loc"]]} for e in errors]}
        try:
            _claims({"party": req.party}, "party", signer)
        except Refused as refused:
            return _refusal(refused)
        return check(node, req)

    def relay_body(signer: str, data: bytes) -> tuple[int, dict[str, Any]]:
        try:
            body = json.loads(data)
        except ValueError as exc:
            return 422, {"detail": f"not JSON: {exc}"}
        try:
            _claims(body, "from", signer)
        except Refused as refused:
            return _refusal(refused)
        return offer(node, body)

    def guarded(
        path: str, method: str, serve: Callable[[str, bytes], tuple[int, dict[str, Any]]]
    ) -> Callable[[Credentials | None, bytes], tuple[int, dict[str, Any]]]:
        def answer(creds: Credentials | None, data: bytes) -> tuple[int, dict[str, Any]]:
            try:
                signer = gate.admit(method, path, data, creds)
            except Refused as refused:
                return _refusal(refused)
            return serve(signer, data)

        return answer

    def posted(path: str, serve: Callable[[str, bytes], tuple[int, dict[str, Any]]]) -> Any:
        answer = guarded(path, "POST", serve)

        async def route(request: Request) -> JSONResponse:
            try:
                data = await _read_body(request, gate)
            except Refused as refused:
                return JSONResponse({"detail": refused.reason}, status_code=refused.status)
            status, body = answer(Credentials.of_headers(request.headers), data)
            return JSONResponse(body, status_code=status)

        return route

    def streamed(path: str, serve: Callable[[str, bytes], tuple[int, dict[str, Any]]]) -> Any:
        answer = guarded(path, "WS", serve)

        async def route(socket: WebSocket) -> None:
            await serve_stream(socket, lambda message: answer(*Credentials.split_message(message)))

        return route

    signed: dict[int | str, dict[str, Any]] = {401: {}, 403: {}, 409: {}, 413: {}, 422: {}, 429: {}}
    app.post(
        ENDORSE_PATH,
        response_model=EndorseResponse,
        responses=signed,
        openapi_extra={
            "requestBody": {"content": {"application/json": {"schema": EndorseRequest.model_json_schema()}}}
        },
    )(posted(ENDORSE_PATH, endorse_body))
    app.websocket(ENDORSE_STREAM_PATH)(streamed(ENDORSE_STREAM_PATH, endorse_body))
    app.post(RELAY_PATH, status_code=202, responses=signed)(posted(RELAY_PATH, relay_body))
    # requests to relay (node.party.relay), one per message, each answered as POST /v1/relay
    app.websocket(RELAY_STREAM_PATH)(streamed(RELAY_STREAM_PATH, relay_body))
    return app


async def serve_stream(socket: WebSocket, answer: Callable[[str | bytes], tuple[int, dict[str, Any]]]) -> None:
    """One request per message, each answered ``{"status", "body"}`` as its POST route would, until the peer leaves.
    JSON comes in a text or a binary message alike (a binary one closed the connection on a KeyError)."""
    await socket.accept()
    try:
        while True:
            message = await socket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            status, body = answer(text if text is not None else message.get("bytes") or b"")
            await socket.send_text(json.dumps({"status": status, "body": body}))
    except WebSocketDisconnect:
        return


def offer(node: PartyNode, body: Any) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of a request handed over to relay, whichever route it came by."""
    channel = node.relay
    if channel is None:
        return 409, {"detail": "this party does not relay (yet): send the transaction"}
    return channel.inbox.offer(body)


def check(node: PartyNode, req: EndorseRequest) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of one endorsement request, whichever route it came by."""
    try:
        return node.endorse(req.model_dump())
    except Exception as exc:  # the chain may be down: the asker tries again later
        return 409, {"detail": f"cannot check now: {type(exc).__name__}: {exc}"}


def _config(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> uvicorn.Config:
    return uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, ws_max_size=WS_MAX_BYTES)


def warm_up() -> None:
    """Build and load an endpoint once, serving nothing: FastAPI imports ``pydantic.v1`` at its first route and
    uvicorn its protocols and event loop at its first start, 45 ms of a party's start (four parties starting at once
    on two cores). The fork server calls this while it loads a node, so that no forked party pays it."""
    _config(create_app(cast("PartyNode", None), PeerGuard(lambda: 0, 0, "", list, lambda: 0))).load()


class EndorsementServer:
    """uvicorn serving :func:`create_app` in a daemon thread."""

    def __init__(
        self,
        node: PartyNode,
        host: str,
        port: int,
        guard: PeerGuard | None = None,
        tls: tuple[str, str] | None = None,
    ) -> None:
        """``tls``: (certificate chain file, private key file) in PEM, to serve HTTPS and WSS."""
        config = _config(create_app(node, guard), host, port)
        if tls is not None:
            config.ssl_certfile, config.ssl_keyfile = tls
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="endorse-server", daemon=True)

    def start(self, timeout: float = 15.0) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the endorsement server did not start (is the port free?)")
            time.sleep(0.002)  # a party joins once its endpoint serves: every party's start waits for the last

    def stop(self, wait: bool = True) -> None:
        """Stop serving; ``wait``: until uvicorn shut down gracefully (each connection closed, the tasks done).

        A node whose process ends right after does not wait: uvicorn notices the request at its next tick (0.1 s)
        and then pauses another 0.1 s for the connections, 0.12-0.19 s measured per party at the end of a task,
        which the requester's wait for the parties to exit added to every run. The daemon thread ends with the
        process, and the peers see their connections drop, as after a crash they already ride out."""
        self.server.should_exit = True
        if wait:
            self.thread.join(timeout=5)
        else:
            self.server.force_exit = True
