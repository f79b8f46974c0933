"""What one client can make the server do: the size of a request's body, the event streams it holds open, the rows
and columns of a prediction batch.

Why bounded: every unbounded input is a way for one client to take the server from the others (memory for a huge
body or batch, a thread and a chain poll a second for every stream held open). Each limit answers with a 4xx that
names it and its value, before the work: 413 for a body or a batch larger than the server takes, 429 with
``Retry-After`` for a stream beyond the open streams allowed (in all, and per client address) or an audit beyond the
audits running at once, 422 for a stream polling the chain more often than the server does. The defaults are
:class:`Limits`'s; ``fgbdt serve`` sets each with a flag of the same name (``--max-body-bytes`` ...).

A client is its address as the server sees it (``request.client``): behind a reverse proxy on this machine that is
the address the proxy forwards (uvicorn trusts ``X-Forwarded-For`` from 127.0.0.1 only), so a proxy elsewhere must
be listed in uvicorn's ``forwarded_allow_ips`` for the per-client limit to count clients rather than the proxy.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fgbdt_chain.api.errors import ApiError


@dataclass(frozen=True)
class Limits:
    """The server's limits (module docstring); each is a flag of ``fgbdt serve``."""

    max_body_bytes: int = 2 * 2**20
    """A request body's size: 2 MiB holds the largest PSD or bin edges a request may carry (256 KiB as hex) many
    times over, and a prediction batch of 10,000 rows of 20 features."""
    max_streams: int = 256
    """Event streams open at once, in all: each polls the chain every ``poll`` seconds from the server's threads."""
    max_streams_per_client: int = 8
    """Event streams one client address holds open at once (a dashboard uses one, a party follows its tasks)."""
    max_predict_rows: int = 10_000
    """Rows of one prediction batch."""
    max_predict_columns: int = 4_096
    """Values of one row of a prediction batch: the most features a task's schema has."""
    max_audits: int = 2
    """Audits running at once: each replays every transaction of its task, seconds of CPU for a long task (a
    finished task's verdict, once made, is kept and costs nothing: ``api.finished``)."""
    min_stream_poll: float = 0.25
    """Seconds between an event stream's reads of the chain, at least: each read is two JSON-RPC calls, so 256
    streams at the 0.05 s the API's schema allows would be 10,000 calls a second."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if name != "min_stream_poll" and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if not 0 < self.min_stream_poll <= 30:
            raise ValueError(f"min_stream_poll must be in (0, 30] seconds, got {self.min_stream_poll}")


LIMIT_HELP: dict[str, str] = {
    "max_body_bytes": "bytes of a request's body; a larger one is refused with 413",
    "max_streams": "event streams open at once, in all; one more is refused with 429",
    "max_streams_per_client": "event streams one client address holds open at once; one more is refused with 429",
    "max_predict_rows": "rows of one prediction batch (at most 10,000, the request schema's bound); more: 413",
    "max_predict_columns": "values of one row of a prediction batch; more: 413",
    "max_audits": "audits running at once; one more is refused with 429 (a finished task's kept verdict is not run)",
    "min_stream_poll": "seconds between an event stream's reads of the chain, at least; a shorter poll: 422",
}
"""Each limit's meaning for ``fgbdt serve``'s flags (``--max-body-bytes`` ...)."""


class BodyTooLarge(HTTPException):
    """A request body past ``max_body_bytes`` (413); raised while the body is read when it came without a length."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than this server takes ({limit} bytes, --max-body-bytes)")
        self.limit = limit


class BodyLimit:
    """ASGI middleware refusing a body larger than ``limit`` bytes: at once when its ``Content-Length`` says so
    (nothing of it is read), and as soon as the bytes read pass the limit when it is sent in chunks."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # the server has refused a Content-Length that is no number (h11: 400); a body without one is counted
        length = next((v for k, v in scope["headers"] if k == b"content-length"), b"")
        if length.isdigit() and int(length) > self.limit:
            body = json.dumps({"detail": BodyTooLarge(self.limit).detail, "error": "BodyTooLarge"}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 413, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, counted, send)


class Slots:
    """At most ``size`` of a costly work at once; one more is refused with 429 (not queued: a queue of audits would
    hold the server's threads while the clients that asked may long be gone)."""

    def __init__(self, size: int, what: str, flag: str) -> None:
        self._free = threading.BoundedSemaphore(size)
        self.size = size
        self.what = what
        self.flag = flag

    @contextmanager
    def slot(self) -> Iterator[None]:
        if not self._free.acquire(blocking=False):
            raise ApiError(
                429,
                f"{self.size} {self.what} are running, the most this server runs at once ({self.flag}); retry later",
                "Busy",
            )
        try:
            yield
        finally:
            self._free.release()


def check_poll(poll: float, limits: Limits) -> None:
    """422 for a stream asking to poll the chain more often than the server does (``min_stream_poll``)."""
    if poll < limits.min_stream_poll:
        msg = f"poll {poll:g} s is below this server's {limits.min_stream_poll:g} s (--min-stream-poll)"
        raise RequestValidationError([{"loc": ["query", "poll"], "msg": msg, "type": "greater_than_equal"}])


def client_of(request: Request) -> str:
    """The client a per-client limit counts: its address."""
    return request.client.host if request.client else "unknown"


class StreamGate:
    """Counts the open event streams, in all and per client, and refuses one past either limit (429)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._open: Counter[str] = Counter()

    @property
    def open(self) -> int:
        """Streams open now."""
        with self._lock:
            return sum(self._open.values())

    def enter(self, client: str) -> Callable[[], None]:
        """Count a new stream of ``client``; the function returned ends it (once, however often it is called)."""
        with self._lock:
            total = sum(self._open.values())
            if total >= self.limits.max_streams:
                raise ApiError(
                    429,
                    f"{total} event streams are open, the most this server holds (--max-streams); retry later",
                    "TooManyStreams",
                )
            if self._open[client] >= self.limits.max_streams_per_client:
                raise ApiError(
                    429,
                    f"{client} holds {self._open[client]} event streams open, the most one client may "
                    "(--max-streams-per-client): close one first",
                    "TooManyStreams",
                )
            self._open[client] += 1
        ended = threading.Event()

        def leave() -> None:
            with self._lock:
                if ended.is_set():
                    return
                ended.set()
                self._open[client] -= 1
                if self._open[client] <= 0:
                    del self._open[client]

        return leave


async def counted_stream(events: AsyncIterator[str], leave: Callable[[], None]) -> AsyncIterator[str]:
    """``events``, with the stream counted until it ends, fails or its client goes (``StreamGate.enter``)."""
    try:
        async for chunk in events:
            yield chunk
    finally:
        leave()
