"""Typed dependencies of the routes: the backend and its settings, the task lookup, and the signed-request check.

Why dependencies: a route declares what it needs as a typed parameter (``backend: BackendDep``, ``task: KnownTask``,
``checked: Annotated[CheckedRequest, Depends(signed(join_call))]``) and FastAPI provides it before the route's body
runs, so the body does only its own work and every route looks tasks up and checks signatures the same way. The
dependencies that read the chain are plain functions, which FastAPI runs in its threadpool (the chain client
blocks); what they raise (404, reverts, outages) is answered by :mod:`api.error_handlers`.

Bad input is a 422 before anything reads the chain, whatever else is wrong (an unknown task, a chain that is down).
FastAPI calls a route's dependencies before it validates the route's own query and body parameters, so
:data:`KnownTask` serves the routes whose only input is the task id; a route with more inputs (the model's format,
the rows to score, the stream's options) calls :func:`find_task` itself once they are validated. A signed write is
checked by :func:`signed`, which depends on the validated path and body and looks the task up after the signature
(401 before 404).

No ``from __future__ import annotations`` in this module: :func:`signed` builds a dependency whose annotation names a
closure variable, which FastAPI could not resolve from a string annotation.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Response
from fastapi.concurrency import run_in_threadpool

from fgbdt_chain.api.params import TaskId
from fgbdt_chain.api.service import Backend, CheckedRequest, Settings, SignedCall
from fgbdt_chain.ledger.wrappers.contracts import TaskState


def backend_of(request: Request) -> Backend:
    """The backend :func:`api.app.create_app` bound to the application serving ``request``."""
    backend: Backend = request.app.state.backend
    return backend


async def get_backend(request: Request) -> Backend:
    """The application's backend (async: no chain access, so no threadpool hop)."""
    return backend_of(request)


BackendDep = Annotated[Backend, Depends(get_backend)]
"""The chain access of the application (tests and ``fgbdt serve`` pass their own to ``create_app``)."""


async def get_settings(backend: BackendDep) -> Settings:
    """Where the chain is and how long clients should wait after an outage."""
    return backend.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


@dataclass(frozen=True)
class TaskRef:
    """A task that exists on chain, with the state it had when it was looked up."""

    task_id: int
    state: TaskState


def find_task(task_id: TaskId, backend: BackendDep) -> TaskRef:
    """The task named by the path; 404 when the contract has no such task."""
    return TaskRef(task_id, backend.state(task_id))


KnownTask = Annotated[TaskRef, Depends(find_task)]
"""The path's task, looked up on chain (404 when unknown)."""


async def kept_response(
    backend: Backend, task_id: int, kind: str, media_type: str, read: Callable[[], bytes]
) -> Response:
    """The body of a read: a finished task's, checked against the chain less than ``recheck`` seconds ago, straight
    from memory on the event loop (``api.finished``); else ``read()`` in the threadpool (it looks the task up, 404,
    and reads it from the chain or from memory after a check).

    Why a route of its own kind: under 200 clients the hop to a thread and back, and the response model's validation
    and serialisation, were most of a kept read's cost; a kept body is bytes, served as they are."""
    body = backend.finished.fresh(task_id, kind)
    if body is None:
        body = await run_in_threadpool(read)
    return Response(body, media_type=media_type)


def signed(build: Callable[..., SignedCall]) -> Callable[..., Iterator[CheckedRequest]]:
    """A dependency checking the signed request that ``build`` makes of a route's path and body.

    ``build`` is itself a dependency (its parameters are the route's path parameters and body, validated first:
    422 before any check); the returned dependency runs :meth:`Backend.check` on its call: 503 without a relayer,
    401 for the signature and expiry, 409 for a nonce used, ahead or being relayed by another request, 404 for an
    unknown task, 403 for the on-chain role, 409 when the call would revert. The route then only relays the checked
    request; the signer's nonce stays held until it has (:meth:`Backend.checked`), so of two requests signed with
    one nonce and sent at once, one is relayed and the other refused with 409.
    """

    def check(call: Annotated[SignedCall, Depends(build)], backend: BackendDep) -> Iterator[CheckedRequest]:
        with backend.checked(call) as checked:
            yield checked

    check.__doc__ = f"The checked, signed request of {build.__name__}."
    return check
