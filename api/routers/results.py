"""``/tasks/{task_id}/model``, ``/predictions``, ``/contributions``, ``/audit``, ``/withdraw``: what a task produced
and what it pays."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, Depends, Query, Response
from fastapi.exceptions import RequestValidationError

from fgbdt_chain.api import models as m
from fgbdt_chain.api.dependencies import BackendDep, KnownTask, find_task, kept_response, signed
from fgbdt_chain.api.errors import CONNECTION_ERRORS, ApiError
from fgbdt_chain.api.jsonable import jsonable
from fgbdt_chain.api.params import TaskId
from fgbdt_chain.api.responses import R409, R413, R429, READ, WRITE
from fgbdt_chain.api.service import Backend, CheckedRequest, SignedCall
from fgbdt_chain.ledger.audit.replay import AuditError, AuditReport, audit_chain

log = logging.getLogger("fgbdt.api")

router = APIRouter(tags=["results"])

MAX_ROW_ERRORS = 50
"""Wrong-width rows reported in one 422 (a client that gets the width wrong gets it wrong on every row)."""


async def withdraw_call(task_id: TaskId, body: m.EmptySigned) -> SignedCall:
    """``withdraw(taskId)``."""
    return SignedCall("withdraw", (task_id,), body.auth, task_id)


@router.post("/tasks/{task_id}/withdraw", response_model=m.TxResponse, responses=WRITE)
def withdraw(checked: Annotated[CheckedRequest, Depends(signed(withdraw_call))], backend: BackendDep) -> m.TxResponse:
    """Pay out what the task owes the signer (to the signer's address)."""
    return backend.relay(checked)


@router.get(
    "/tasks/{task_id}/model",
    responses={
        200: {
            "description": "The model: JSON (default) or LightGBM text",
            "content": {"application/json": {}, "text/plain": {}},
        },
        **READ,
        **R409,
    },
)
async def model(
    task_id: TaskId, backend: BackendDep, format: Annotated[Literal["json", "lightgbm"], Query()] = "json"
) -> Response:
    """The model as recorded on chain (complete trees): project JSON, or LightGBM's text format."""
    kind = f"model.{format}"

    def render() -> bytes:
        mdl = backend.model(task_id)
        if format == "lightgbm":
            return mdl.to_lightgbm().encode()
        return json.dumps(mdl.to_json_dict(), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()

    def read() -> bytes:
        find_task(task_id, backend)  # after `format` is validated (see api.dependencies)
        return backend.kept(task_id, kind, render)  # ModelNotReady: 409

    media = "application/json" if format == "json" else "text/plain; charset=utf-8"
    return await kept_response(backend, task_id, kind, media, read)


def check_batch(rows: list[list[float | None]], backend: Backend) -> None:
    """413 for a batch with more rows, or a row with more values, than the server scores in one request."""
    limits = backend.settings.limits
    if len(rows) > limits.max_predict_rows:
        raise ApiError(
            413,
            f"{len(rows)} rows: this server scores at most {limits.max_predict_rows} rows a request "
            "(--max-predict-rows); send them in batches",
            "TooManyRows",
        )
    widest = max(range(len(rows)), key=lambda i: len(rows[i]))
    if len(rows[widest]) > limits.max_predict_columns:
        raise ApiError(
            413,
            f"row {widest} has {len(rows[widest])} values: this server takes at most {limits.max_predict_columns} "
            "a row (--max-predict-columns)",
            "TooManyColumns",
        )


@router.post("/tasks/{task_id}/predictions", response_model=m.PredictResponse, responses={**READ, **R409, **R413})
def predict(task_id: TaskId, body: m.PredictRequest, backend: BackendDep) -> m.PredictResponse:
    """The chain's model's predictions of the posted rows (P(class 1), or values for a regression task); every row
    must have the model's width, and a batch at most the server's rows and values a row (413)."""
    check_batch(body.rows, backend)  # before any chain read
    task = find_task(task_id, backend)  # after the body is validated (see api.dependencies)
    mdl = backend.model(task.task_id)
    width = mdl.num_features
    bad = [
        {"loc": ["body", "rows", i], "msg": f"row has {len(r)} values, the model has {width} features", "type": "shape"}
        for i, r in enumerate(body.rows)
        if len(r) != width
    ]
    if bad:  # a 422 like the schema's own checks: the width is only known once the model is
        raise RequestValidationError(bad[:MAX_ROW_ERRORS])
    X = np.array([[math.nan if v is None else v for v in r] for r in body.rows], dtype=np.float64)
    pred = [float(p) for p in mdl.predict(X)]  # the task's loss: probabilities, or values in the labels' units
    binary = mdl.objective == "binary"
    return m.PredictResponse(
        rows=len(body.rows),
        features=width,
        trees=len(mdl.trees),
        objective="binary" if binary else "regression",
        predictions=pred,
        probabilities=pred if binary else None,
        labels=[int(p > 0.5) for p in pred] if binary else None,
    )


@router.get("/tasks/{task_id}/contributions", response_model=m.ContributionsResponse, responses=READ)
async def contributions(task_id: TaskId, backend: BackendDep) -> Response:
    """Every approved party's contribution (total, per tree, share) and reward (assigned, due, withdrawn)."""

    def read() -> bytes:
        task = find_task(task_id, backend)
        body = lambda: backend.contributions(task_id, task.state).model_dump_json().encode()  # noqa: E731
        return backend.kept(task_id, "contributions.json", body)

    return await kept_response(backend, task_id, "contributions.json", "application/json", read)


@router.get("/tasks/{task_id}/audit", response_model=m.AuditResponse, responses={**READ, **R409, **R429})
def audit(task: KnownTask, backend: BackendDep) -> m.AuditResponse:
    """Replay the task's transactions (``ledger.audit.replay``) and report whether the chain's record holds. A
    server runs a bounded number of audits at once (429 past it); a finished task's verdict is kept. 409: a task that
    has not started training has nothing to audit."""

    def replay() -> AuditReport:
        with backend.audits.slot():
            return audit_chain(backend.client(), backend.task().address, task.task_id)

    try:  # a finished task's verdict is kept while nothing new happens to it (api.finished)
        report = backend.kept(task.task_id, "audit", replay)
    except ApiError:
        raise  # 429: as many audits as the server runs at once are running
    except AuditError:
        raise  # 409: the task cannot be audited in its state
    except CONNECTION_ERRORS:
        raise  # 503 with Retry-After, as everywhere
    except Exception as exc:
        # the replay reads every transaction of the task: a node that cannot serve them (pruned history, a
        # transaction it does not return) makes the audit unavailable there, not the API broken
        log.exception("audit of task %s failed", task.task_id)
        raise ApiError(503, f"the audit failed to run: {type(exc).__name__}", "AuditUnavailable") from exc
    return m.AuditResponse(
        task_id=task.task_id,
        ok=report.ok,
        first_mismatch=report.first_mismatch,
        summary=report.summary(),
        report=report_json(report),
    )


def report_json(report: AuditReport) -> dict[str, Any]:
    """The whole report as JSON: counts, the located mismatch (its expected and recorded values, whatever their
    type, as JSON or as text), whether training completed."""
    out: dict[str, Any] = json.loads(json.dumps(jsonable(dataclasses.asdict(report)), default=str))
    return out
