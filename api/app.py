"""The FGBDT-Chain REST API (FastAPI): versioned paths under ``/v1``, typed models, signed state changes.

Why this shape: reads are public and come straight from the chain (views and events), so any client can check what it
is told; every state change is an ERC-2771 request signed by the caller's key, rebuilt here from the typed body and
checked (signature, expiry, nonce, on-chain role) before the API's relayer pays for it. Errors are uniform: 422 with
field-level messages for bad input, 401 for a missing or bad signature, 403 for the wrong role, 404 for an unknown
task, 409 when the contract would revert, 503 with ``Retry-After`` when the chain is unreachable, and never a stack
trace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import FastAPI, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from fgbdt_chain.api import models as m
from fgbdt_chain.api.service import CONNECTION_ERRORS, ApiError, Backend, Settings
from fgbdt_chain.ledger.chain_model import ModelNotReady, model_from_chain
from fgbdt_chain.ledger.contracts import Status
from fgbdt_chain.ledger.errors import ContractRevert
from fgbdt_chain.ledger.forwarder import FORWARD_REQUEST_TYPES, domain

log = logging.getLogger("fgbdt.api")

TaskId = Annotated[int, Path(ge=1, lt=2**63, description="Task id (1..taskCount).", examples=[1])]
PartyPath = Annotated[str, Path(pattern=r"^0x[0-9a-fA-F]{40}$", description="Party address.")]


def _err(status: int, description: str) -> dict[str, Any]:
    return {"model": m.ErrorResponse, "description": description}


Responses = dict[int | str, dict[str, Any]]
R404: Responses = {404: _err(404, "Unknown task")}
R409: Responses = {409: _err(409, "The task is not in a state that allows this (contract would revert)")}
R503: Responses = {503: _err(503, "Chain unreachable (Retry-After set)")}
READ: Responses = {**R404, **R503}
WRITE: Responses = {
    401: _err(401, "Missing or bad signature, expired request or wrong nonce"),
    403: _err(403, "The signer lacks the on-chain role"),
    **R404,
    **R409,
    **R503,
}

EVENT_KINDS: dict[str, str] = {
    "TrainingStarted": "started",
    "LevelStarted": "level",
    "VotingClosed": "voting_closed",
    "HistogramsClosed": "histograms_closed",
    "NodeSplit": "node",
    "LeafSet": "node",
    "TaskCompleted": "completed",
    "TaskCancelled": "cancelled",
}


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes | bytearray):
        return "0x" + bytes(v).hex()
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


def create_app(backend: Backend) -> FastAPI:
    """The application bound to ``backend`` (tests pass their own, the ``serve`` command one from its flags)."""
    app = FastAPI(
        title="FGBDT-Chain API",
        version="1.0.0",
        description=(
            "Federated gradient boosting with on-chain fairness. Reads are public. State changes carry `auth`: an "
            "EIP-712 signature of an ERC-2771 `ForwardRequest` (OpenZeppelin ERC2771Forwarder) whose `data` is the "
            "calldata of the endpoint's contract call, rebuilt by the API from the body; the API checks it and the "
            "signer's on-chain role, then relays it. Rewards are deposited with a direct `fund(taskId)` transaction."
        ),
    )
    app.state.backend = backend

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        headers = {"Retry-After": str(backend.settings.retry_after)} if exc.status == 503 else None
        return JSONResponse({"detail": exc.detail, "error": exc.error}, status_code=exc.status, headers=headers)

    @app.middleware("http")
    async def _guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        try:
            return await call_next(request)
        except CONNECTION_ERRORS as exc:
            log.warning("chain unreachable: %s", exc)
            return _unavailable(backend)
        except ContractRevert as exc:
            return JSONResponse({"detail": f"the contract reverted: {exc}", "error": exc.name}, status_code=409)
        except Exception:
            log.exception("unhandled error on %s %s", request.method, request.url.path)
            return JSONResponse({"detail": "internal error (logged on the server)", "error": None}, status_code=500)

    async def call(fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking chain code off the event loop, mapping outages to 503."""
        try:
            return await run_in_threadpool(fn, *args)
        except CONNECTION_ERRORS as exc:
            raise ApiError(503, f"chain unreachable: {exc}") from exc

    # ---------------------------------------------------------------- meta

    @app.get("/v1/health", response_model=m.HealthResponse, responses=R503, tags=["meta"])
    async def health() -> m.HealthResponse:
        """The chain id, latest block, contract and forwarder addresses, and the relayer's balance."""

        def run() -> m.HealthResponse:
            client = backend.client()
            relayer = backend.relayer.address if backend.relayer else None
            return m.HealthResponse(
                chain_id=client.chain_id,
                block=client.block_number,
                contract=backend.task().address,
                forwarder=backend.forwarder().address,
                relayer=relayer,
                relayer_balance_wei=client.balance(relayer) if relayer else None,
            )

        result: m.HealthResponse = await call(run)
        return result

    @app.get("/v1/signing", response_model=m.SigningInfo, responses=R503, tags=["meta"])
    async def signing() -> m.SigningInfo:
        """EIP-712 domain and types of the `ForwardRequest` every state-changing request must sign."""

        def run() -> m.SigningInfo:
            client = backend.client()
            fw = backend.forwarder()
            return m.SigningInfo(
                chain_id=client.chain_id,
                forwarder=fw.address,
                contract=backend.task().address,
                relayer=backend.relayer.address if backend.relayer else None,
                domain=domain(client.chain_id, fw.address),
                types=FORWARD_REQUEST_TYPES,
                primary_type="ForwardRequest",
            )

        result: m.SigningInfo = await call(run)
        return result

    @app.get("/v1/nonces/{address}", response_model=m.NonceResponse, responses=R503, tags=["meta"])
    async def nonce(address: PartyPath) -> m.NonceResponse:
        """The forwarder nonce the next signed request of `address` must carry."""
        n = await call(lambda: backend.forwarder().nonce(address))
        return m.NonceResponse(address=address, nonce=n)

    # ---------------------------------------------------------------- tasks

    @app.post("/v1/tasks", response_model=m.CreatedTask, status_code=201, responses=WRITE, tags=["tasks"])
    async def create_task(body: m.CreateTaskRequest) -> m.CreatedTask:
        """Open a task (signed by the requester-to-be). Created with no reward: deposit it with a direct
        `fund(taskId)` transaction to the contract while the task is open."""
        res = await call(backend.relay, None, body.auth, "createTask", backend.create_args(body))
        tid = int(res.event("TaskCreated").args["taskId"])
        return m.CreatedTask(
            tx_hash=res.tx_hash,
            block=res.block_number,
            gas_used=res.gas_used,
            task_id=tid,
            fund=f"send the reward in wei to {backend.task().address} calling fund({tid}) from any account",
        )

    @app.get("/v1/tasks", response_model=m.TaskList, responses=R503, tags=["tasks"])
    async def list_tasks(
        offset: Annotated[int, Query(ge=0, le=2**31)] = 0, limit: Annotated[int, Query(ge=1, le=100)] = 20
    ) -> m.TaskList:
        """Tasks, newest first."""
        result: m.TaskList = await call(backend.list_tasks, offset, limit)
        return result

    @app.get("/v1/tasks/{task_id}", response_model=m.TaskDetail, responses=READ, tags=["tasks"])
    async def read_task(task_id: TaskId) -> m.TaskDetail:
        """State, schema, parameters, members, progress in trees and levels, and gas of one task."""
        result: m.TaskDetail = await call(backend.detail, task_id)
        return result

    @app.get("/v1/tasks/{task_id}/join-requests", response_model=m.JoinRequestList, responses=READ, tags=["members"])
    async def join_requests(task_id: TaskId) -> m.JoinRequestList:
        """Every join request of the task and its status (pending, approved, refused)."""

        def run() -> m.JoinRequestList:
            backend.state(task_id)
            return m.JoinRequestList(task_id=task_id, requests=backend.members(task_id))

        result: m.JoinRequestList = await call(run)
        return result

    async def _write(task_id: int, auth: m.SignedAuth | None, function: str, *args: Any) -> m.TxResponse:
        res = await call(backend.relay, task_id, auth, function, (task_id, *args))
        return m.TxResponse(tx_hash=res.tx_hash, block=res.block_number, gas_used=res.gas_used, task_id=task_id)

    @app.post(
        "/v1/tasks/{task_id}/join-requests",
        response_model=m.TxResponse,
        status_code=201,
        responses=WRITE,
        tags=["members"],
    )
    async def join(task_id: TaskId, body: m.JoinRequest) -> m.TxResponse:
        """Ask to join (signed by the party), publishing its PSD and endorsement endpoint."""
        return await _write(task_id, body.auth, "join", bytes.fromhex(body.psd[2:]), body.endpoint)

    @app.post(
        "/v1/tasks/{task_id}/join-requests/{party}/approve",
        response_model=m.TxResponse,
        responses=WRITE,
        tags=["members"],
    )
    async def approve(task_id: TaskId, party: PartyPath, body: m.EmptySigned) -> m.TxResponse:
        """Approve a pending party (signed by the requester)."""
        return await _write(task_id, body.auth, "approve", _checksum(party))

    @app.post(
        "/v1/tasks/{task_id}/join-requests/{party}/refuse",
        response_model=m.TxResponse,
        responses=WRITE,
        tags=["members"],
    )
    async def refuse(task_id: TaskId, party: PartyPath, body: m.EmptySigned) -> m.TxResponse:
        """Refuse a pending party (signed by the requester)."""
        return await _write(task_id, body.auth, "refuse", _checksum(party))

    @app.post("/v1/tasks/{task_id}/start", response_model=m.TxResponse, responses=WRITE, tags=["tasks"])
    async def start(task_id: TaskId, body: m.StartRequest) -> m.TxResponse:
        """Start training with the common bin edges (signed by the requester)."""
        return await _write(task_id, body.auth, "start", bytes.fromhex(body.bin_edges[2:]))

    @app.post("/v1/tasks/{task_id}/cancel", response_model=m.TxResponse, responses=WRITE, tags=["tasks"])
    async def cancel(task_id: TaskId, body: m.EmptySigned) -> m.TxResponse:
        """Cancel a task that has not started; the deposit becomes withdrawable by the requester."""
        return await _write(task_id, body.auth, "cancel")

    @app.post("/v1/tasks/{task_id}/withdraw", response_model=m.TxResponse, responses=WRITE, tags=["results"])
    async def withdraw(task_id: TaskId, body: m.EmptySigned) -> m.TxResponse:
        """Pay out what the task owes the signer (to the signer's address)."""
        return await _write(task_id, body.auth, "withdraw")

    # ---------------------------------------------------------------- results

    def _model(task_id: int) -> Any:
        backend.state(task_id)
        try:
            return model_from_chain(backend.task(), task_id)
        except ModelNotReady as exc:
            raise ApiError(409, str(exc), "ModelNotReady") from exc

    @app.get(
        "/v1/tasks/{task_id}/model",
        responses={
            200: {
                "description": "The model: JSON (default) or LightGBM text",
                "content": {"application/json": {}, "text/plain": {}},
            },
            **READ,
            **R409,
        },
        tags=["results"],
    )
    async def model(task_id: TaskId, format: Annotated[Literal["json", "lightgbm"], Query()] = "json") -> Response:
        """The model as recorded on chain (complete trees): project JSON, or LightGBM's text format."""
        mdl = await call(_model, task_id)
        if format == "lightgbm":
            return PlainTextResponse(mdl.to_lightgbm())
        return JSONResponse(mdl.to_json_dict())

    @app.post(
        "/v1/tasks/{task_id}/predictions",
        response_model=m.PredictResponse,
        responses={**READ, **R409},
        tags=["results"],
    )
    async def predict(task_id: TaskId, body: m.PredictRequest) -> Response | m.PredictResponse:
        """P(class 1) of the posted rows under the chain's model; every row must have the model's width."""
        mdl = await call(_model, task_id)
        width = mdl.num_features
        bad = [
            {
                "loc": ["body", "rows", i],
                "msg": f"row has {len(r)} values, the model has {width} features",
                "type": "shape",
            }
            for i, r in enumerate(body.rows)
            if len(r) != width
        ]
        if bad:
            return JSONResponse({"detail": bad[:50]}, status_code=422)
        X = np.array([[math.nan if v is None else v for v in r] for r in body.rows], dtype=np.float64)
        proba = mdl.predict_proba(X)
        return m.PredictResponse(
            rows=len(body.rows),
            features=width,
            trees=len(mdl.trees),
            probabilities=[float(p) for p in proba],
            labels=[int(p > 0.5) for p in proba],
        )

    @app.get(
        "/v1/tasks/{task_id}/contributions", response_model=m.ContributionsResponse, responses=READ, tags=["results"]
    )
    async def contributions(task_id: TaskId) -> m.ContributionsResponse:
        """Every approved party's contribution (total, per tree, share) and reward (assigned, due, withdrawn)."""
        result: m.ContributionsResponse = await call(backend.contributions, task_id)
        return result

    @app.get("/v1/tasks/{task_id}/audit", response_model=m.AuditResponse, responses=READ, tags=["results"])
    async def audit(task_id: TaskId) -> m.AuditResponse:
        """Replay the task's transactions (``ledger.audit``) and report whether the chain's record holds."""

        def run() -> m.AuditResponse:
            backend.state(task_id)
            fn, usage_error = _audit_function()
            try:
                report = fn(backend.client(), backend.task().address, task_id)
            except CONNECTION_ERRORS:
                raise
            except usage_error as exc:
                raise ApiError(409, f"the task cannot be audited: {exc}", "AuditError") from exc
            except Exception as exc:
                log.exception("audit of task %s failed", task_id)
                raise ApiError(503, f"the audit failed to run: {type(exc).__name__}", "AuditUnavailable") from exc
            mismatch = _field(report, "first_mismatch")
            return m.AuditResponse(
                task_id=task_id,
                ok=bool(_field(report, "ok")),
                first_mismatch=None if mismatch is None else str(mismatch),
                summary=str(report.summary()) if hasattr(report, "summary") else None,
                report=_report_dict(report),
            )

        result: m.AuditResponse = await call(run)
        return result

    # ---------------------------------------------------------------- progress stream

    @app.get(
        "/v1/tasks/{task_id}/events",
        responses={200: {"description": "Server-sent events", "content": {"text/event-stream": {}}}, **READ},
        tags=["progress"],
    )
    async def events(
        task_id: TaskId,
        from_block: Annotated[int, Query(ge=0, description="Replay events from this block")] = 0,
        poll: Annotated[float, Query(ge=0.05, le=30, description="Polling interval, seconds")] = 1.0,
        timeout: Annotated[float, Query(gt=0, le=86_400, description="Close the stream after (seconds)")] = 3600,
    ) -> StreamingResponse:
        """Progress of a task as server-sent events (`started`, `level`, `voting_closed`, `histograms_closed`,
        `node`, then `completed` or `cancelled`, which end the stream); `error` events report chain outages."""
        await call(backend.state, task_id)
        return StreamingResponse(
            _stream(backend, task_id, from_block, poll, timeout),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return app


async def _stream(backend: Backend, task_id: int, from_block: int, poll: float, timeout: float) -> AsyncIterator[str]:
    """Poll the task's events and emit them as SSE until the task completes, is cancelled, or ``timeout``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    next_block = from_block
    yield ": fgbdt progress stream\n\n"
    while True:
        try:
            latest = await run_in_threadpool(lambda: backend.client().block_number)
            evs = (
                await run_in_threadpool(backend.logs, task_id, list(EVENT_KINDS), next_block)
                if latest >= next_block
                else []
            )
        except CONNECTION_ERRORS as exc:
            yield _sse("error", {"detail": f"chain unreachable: {exc}", "retry_after": backend.settings.retry_after})
            evs, latest = [], next_block - 1
        finished = False
        for ev in evs:
            data = {"event": ev.name, "block": ev.block_number, **_jsonable(ev.args)}
            yield _sse(EVENT_KINDS[ev.name], data, f"{ev.block_number}-{ev.log_index}")
            finished = finished or ev.name in ("TaskCompleted", "TaskCancelled")
        next_block = max(next_block, latest + 1)
        if finished:
            return
        if not evs:
            try:
                st = await run_in_threadpool(backend.state, task_id)
                if st.status in (Status.COMPLETED, Status.CANCELLED) and next_block > from_block:
                    # terminal state whose final event lies before from_block: say so and end
                    yield _sse("completed" if st.status == Status.COMPLETED else "cancelled", {"event": "state"})
                    return
            except CONNECTION_ERRORS:
                pass
        if loop.time() >= end:
            yield _sse("timeout", {"detail": "stream timeout reached"})
            return
        await asyncio.sleep(poll)


def _sse(kind: str, data: dict[str, Any], event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, default=str)}\n\n"


def _unavailable(backend: Backend) -> JSONResponse:
    return JSONResponse(
        {"detail": f"chain node at {backend.settings.rpc_url} is unreachable; retry later", "error": None},
        status_code=503,
        headers={"Retry-After": str(backend.settings.retry_after)},
    )


def _checksum(address: str) -> str:
    from eth_utils import to_checksum_address

    return str(to_checksum_address(address))


def _audit_function() -> tuple[Callable[..., Any], type[BaseException]]:
    """``ledger.audit.audit_chain(client, address, task_id)`` and its usage-error class, imported lazily: the module
    is developed separately, and a server without it still serves everything else (503 here)."""
    try:
        mod = importlib.import_module("fgbdt_chain.ledger.audit")
    except ImportError as exc:
        raise ApiError(503, f"the audit is not available on this server ({exc})", "AuditUnavailable") from exc
    fn = getattr(mod, "audit_chain", None)
    if not callable(fn):
        raise ApiError(503, "ledger.audit has no audit_chain(client, address, task_id)", "AuditUnavailable")
    usage = getattr(mod, "AuditError", None)
    return fn, usage if isinstance(usage, type) and issubclass(usage, BaseException) else _NoError


class _NoError(Exception):
    """Placeholder when ``ledger.audit`` defines no usage-error class."""


def _field(report: Any, name: str) -> Any:
    return report.get(name) if isinstance(report, dict) else getattr(report, name, None)


def _report_dict(report: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(report) and not isinstance(report, type):
        raw: dict[str, Any] = dataclasses.asdict(report)
    else:
        raw = report if isinstance(report, dict) else dict(getattr(report, "__dict__", {}))
    out: dict[str, Any] = {}
    for k, v in raw.items():
        try:
            json.dumps(_jsonable(v), default=str)
            out[str(k)] = json.loads(json.dumps(_jsonable(v), default=str))
        except (TypeError, ValueError):
            out[str(k)] = str(v)
    return out


def settings_app(rpc_url: str, contract: str, forwarder: str | None = None, relayer_key: str | None = None) -> FastAPI:
    """Convenience: an app from plain settings."""
    return create_app(Backend(Settings(rpc_url, contract, forwarder, relayer_key)))
