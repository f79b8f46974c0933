"""The error responses each kind of operation documents in the OpenAPI schema.

Why written down per kind: a read can answer 404 (unknown task) and 503 (chain unreachable), a signed write also
401, 403 and 409; the schema lists exactly these, so clients and the property-based test (schemathesis) know every
status an operation may return. Which exception becomes which status is decided in :mod:`api.error_handlers`.
"""

from __future__ import annotations

from typing import Any

from fgbdt_chain.api.models import ErrorResponse

Responses = dict[int | str, dict[str, Any]]


def _err(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


R404: Responses = {404: _err("Unknown task")}
R409: Responses = {409: _err("The task is not in a state that allows this (contract would revert)")}
R413: Responses = {413: _err("The request is larger than the server takes (body, rows or values a row)")}
R429: Responses = {
    429: _err("Too many event streams open (in all or of this client) or audits running (Retry-After set)")
}
R503: Responses = {503: _err("Chain unreachable (Retry-After set)")}
READ: Responses = {**R404, **R503}
"""A read of one task."""
WRITE: Responses = {
    401: _err("Missing or bad signature, or expired request"),
    403: _err("The signer lacks the on-chain role"),
    **R404,
    409: _err(
        "The nonce was used, is ahead of the forwarder's, or is being relayed for another request of the signer "
        "(NonceUsed, NonceAhead, NonceInUse); or the task is not in a state that allows this (contract would revert)"
    ),
    **R503,
}
"""A signed state change."""
