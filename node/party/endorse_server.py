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
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import uvicorn
from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from fgbdt_chain.node.party.endorse_client import ENDORSE_STREAM_PATH
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


class EndorseResponse(BaseModel):
    signature: str
    overlap: float


def create_app(node: PartyNode) -> FastAPI:
    app = FastAPI(title="FGBDT-Chain party endorsement endpoint", version="1")

    @app.get("/v1/health")
    def health() -> dict[str, object]:
        return {"task": node.task_id, "party": node.address, "index": node.index, "training": node.party is not None}

    # Both routes check on the server's event loop, not handed to a worker thread: the check takes about a
    # millisecond (median) while an asker's round trip took nine, and the three askers of a level are served one
    # after another either way (they share the interpreter lock and this node's lock). Measured on chain, 50 trees
    # of depth 6: a level in 53 ms against 56.

    @app.post("/v1/endorse", response_model=EndorseResponse, responses={403: {}, 409: {}, 422: {}})
    async def endorse(req: EndorseRequest) -> JSONResponse:
        status, body = check(node, req)
        return JSONResponse(body, status_code=status)

    def endorse_message(data: str | bytes) -> tuple[int, dict[str, Any]]:
        try:
            req = EndorseRequest.model_validate_json(data)
        except ValidationError as exc:  # located as FastAPI locates the POST body's errors
            errors = json.loads(exc.json(include_url=False))
            return 422, {"detail": [{**e, "loc": ["body", *e["loc"]]} for e in errors]}
        return check(node, req)

    @app.websocket(ENDORSE_STREAM_PATH)
    async def endorse_stream(socket: WebSocket) -> None:
        await serve_stream(socket, endorse_message)

    @app.post("/v1/relay", status_code=202, responses={403: {}, 409: {}, 422: {}})
    async def relay_request(body: dict[str, Any]) -> JSONResponse:
        status, answer = offer(node, body)
        return JSONResponse(answer, status_code=status)

    def relay_message(data: str | bytes) -> tuple[int, dict[str, Any]]:
        try:
            body = json.loads(data)
        except ValueError as exc:
            return 422, {"detail": f"not JSON: {exc}"}
        return offer(node, body)

    @app.websocket(RELAY_STREAM_PATH)
    async def relay_stream(socket: WebSocket) -> None:
        """Requests to relay (``node.party.relay``), one per message, each answered as ``POST /v1/relay``."""
        await serve_stream(socket, relay_message)

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
    return uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)


def warm_up() -> None:
    """Build and load an endpoint once, serving nothing: FastAPI imports ``pydantic.v1`` at its first route and
    uvicorn its protocols and event loop at its first start, 45 ms of a party's start (four parties starting at once
    on two cores). The fork server calls this while it loads a node, so that no forked party pays it."""
    _config(create_app(cast("PartyNode", None))).load()


class EndorsementServer:
    """uvicorn serving :func:`create_app` in a daemon thread."""

    def __init__(self, node: PartyNode, host: str, port: int) -> None:
        config = _config(create_app(node), host, port)
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
