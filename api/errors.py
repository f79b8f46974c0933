"""What can go wrong in the API, as exception types; :mod:`api.error_handlers` turns them into responses.

Why apart from the handlers: the backend (:mod:`api.service`) raises these without knowing about HTTP responses,
and the handlers are the one place that decides what a client sees for each of them.
"""

from __future__ import annotations

import requests


class ApiError(Exception):
    """An error with the HTTP status and message the client gets (``error`` names a contract error, if any)."""

    def __init__(self, status: int, detail: str, error: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.error = error


class ChainUnavailable(Exception):
    """The JSON-RPC node does not answer (maps to 503 with ``Retry-After``)."""


CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    ChainUnavailable,
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    ConnectionError,
    TimeoutError,
)
"""Exceptions that mean "the chain node is unreachable right now": a 503 with ``Retry-After``, never a 500."""
