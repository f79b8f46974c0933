"""The one place that decides what a client sees when something goes wrong.

Why one place: routes, dependencies and the backend raise what happened (:class:`~api.errors.ApiError` with its
status, a contract revert, an unreachable node, a model not recorded yet, an audit that cannot run) and never build
error responses themselves, so every error has the same shape, ``{"detail": ..., "error": ...}``, or FastAPI's
field-level ``{"detail": [{"loc", "msg", "type"}]}`` for bad input (422), every outage carries ``Retry-After``, and
no stack trace ever reaches a client (unexpected errors are a logged, generic 500).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from fgbdt_chain.api.dependencies import backend_of
from fgbdt_chain.api.errors import CONNECTION_ERRORS, ApiError
from fgbdt_chain.api.limits import BodyTooLarge
from fgbdt_chain.ledger.audit.replay import AuditError
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.wrappers.chain_model import ModelNotReady

log = logging.getLogger("fgbdt.api")


def error_body(detail: str, error: str | None = None) -> dict[str, str | None]:
    """The body of every non-422 error (``api.models.ErrorResponse``)."""
    return {"detail": detail, "error": error}


def _retry_after(request: Request) -> dict[str, str]:
    return {"Retry-After": str(backend_of(request).settings.retry_after)}


async def api_error(request: Request, exc: ApiError) -> JSONResponse:
    """The status and message the backend chose; a 503 or a 429 (a limit of open streams) says when to retry."""
    headers = _retry_after(request) if exc.status in (429, 503) else None
    return JSONResponse(error_body(exc.detail, exc.error), status_code=exc.status, headers=headers)


async def body_too_large(_: Request, exc: BodyTooLarge) -> JSONResponse:
    """413: a body sent in chunks passed ``--max-body-bytes`` while it was read (``api.limits.BodyLimit``)."""
    return JSONResponse(error_body(exc.detail, "BodyTooLarge"), status_code=413)


async def contract_revert(_: Request, exc: ContractRevert) -> JSONResponse:
    """409 naming the contract's custom error: the task is not in a state that allows the call."""
    return JSONResponse(error_body(f"the contract reverted: {exc}", exc.name), status_code=409)


async def chain_unreachable(request: Request, exc: Exception) -> JSONResponse:
    """503 with ``Retry-After``: the chain node does not answer (the API reconnects when it is back)."""
    log.warning("chain unreachable: %s", exc)
    rpc_url = backend_of(request).settings.rpc_url
    return JSONResponse(
        error_body(f"chain node at {rpc_url} is unreachable; retry later"),
        status_code=503,
        headers=_retry_after(request),
    )


async def model_not_ready(_: Request, exc: ModelNotReady) -> JSONResponse:
    """409: the task has no recorded model yet (not started, or no complete tree)."""
    return JSONResponse(error_body(str(exc), "ModelNotReady"), status_code=409)


async def audit_error(_: Request, exc: AuditError) -> JSONResponse:
    """409: the task cannot be audited in its state (``ledger.audit.replay`` refuses it)."""
    return JSONResponse(error_body(f"the task cannot be audited: {exc}", "AuditError"), status_code=409)


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    """500 with a generic message; the details go to the server's log only."""
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(error_body("internal error (logged on the server)"), status_code=500)


def register_error_handlers(app: FastAPI) -> None:
    """Install the handlers on ``app`` (Starlette picks the most specific class of a raised exception)."""
    app.exception_handler(ApiError)(api_error)
    app.exception_handler(BodyTooLarge)(body_too_large)
    app.exception_handler(ContractRevert)(contract_revert)
    for cls in CONNECTION_ERRORS:
        app.exception_handler(cls)(chain_unreachable)
    app.exception_handler(ModelNotReady)(model_not_ready)
    app.exception_handler(AuditError)(audit_error)
    # FastAPI's own answer to bad input (field-level 422), registered here so every mapping is in one list
    app.exception_handler(RequestValidationError)(request_validation_exception_handler)
    app.exception_handler(Exception)(unexpected)
