"""``/tasks/{task_id}/events``: a task's progress as server-sent events, from the contract's events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from fgbdt_chain.api.dependencies import BackendDep, find_task
from fgbdt_chain.api.errors import CONNECTION_ERRORS
from fgbdt_chain.api.jsonable import jsonable
from fgbdt_chain.api.limits import check_poll, client_of, counted_stream
from fgbdt_chain.api.params import TaskId
from fgbdt_chain.api.responses import R429, READ
from fgbdt_chain.api.service import Backend
from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.wrappers.contracts import Status

router = APIRouter(tags=["progress"])

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
"""The contract events a client follows, and the SSE event name each is sent as."""


@router.get(
    "/tasks/{task_id}/events",
    responses={200: {"description": "Server-sent events", "content": {"text/event-stream": {}}}, **READ, **R429},
)
async def events(
    task_id: TaskId,
    backend: BackendDep,
    request: Request,
    from_block: Annotated[int, Query(ge=0, description="Replay events from this block")] = 0,
    poll: Annotated[float, Query(ge=0.05, le=30, description="Polling interval, seconds")] = 1.0,
    timeout: Annotated[float, Query(gt=0, le=86_400, description="Close the stream after (seconds)")] = 3600,
) -> StreamingResponse:
    """Progress of a task as server-sent events (`started`, `level`, `voting_closed`, `histograms_closed`,
    `node`, then `completed` or `cancelled`, which end the stream); `error` events report chain outages. A server
    holds a bounded number of streams open, in all and per client: one more is refused with 429; it polls the chain
    at most as often as its `--min-stream-poll` (a shorter `poll`: 422)."""
    check_poll(poll, backend.settings.limits)
    task = await run_in_threadpool(find_task, task_id, backend)  # after the query is validated (api.dependencies)
    return event_stream(backend, request, stream(backend, task.task_id, from_block, poll, timeout))


def event_stream(backend: Backend, request: Request, events: AsyncIterator[str]) -> StreamingResponse:
    """``events`` as a server-sent event response, counted among the open streams until it ends or its client
    goes (``api.limits.StreamGate``: 429 past the limits)."""
    leave = backend.streams.enter(client_of(request))
    return StreamingResponse(
        counted_stream(events, leave),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        background=BackgroundTask(leave),  # also when the client went before the stream's end
    )


async def stream(backend: Backend, task_id: int, from_block: int, poll: float, timeout: float) -> AsyncIterator[str]:
    """Poll the task's events and emit them as SSE until the task completes, is cancelled, or ``timeout``."""

    def emit(ev: Event) -> tuple[str, dict[str, Any], bool]:
        data = {"event": ev.name, "block": ev.block_number, **jsonable(ev.args)}
        return EVENT_KINDS[ev.name], data, ev.name in ("TaskCompleted", "TaskCancelled")

    def ended(next_block: int) -> str | None:
        st = backend.state(task_id)
        if st.status in (Status.COMPLETED, Status.CANCELLED) and next_block > from_block:
            # terminal state whose final event lies before from_block: say so and end
            return sse("completed" if st.status == Status.COMPLETED else "cancelled", {"event": "state"})
        return None

    def read(first: int, _latest: int) -> list[Event]:
        return backend.logs(task_id, list(EVENT_KINDS), first)

    async for chunk in poll_events(backend, "progress", from_block, poll, timeout, read, emit, ended):
        yield chunk


async def poll_events(
    backend: Backend,
    what: str,
    from_block: int,
    poll: float,
    timeout: float,
    read: Callable[[int, int], list[Event]],
    emit: Callable[[Event], tuple[str, dict[str, Any], bool]],
    ended: Callable[[int], str | None] | None = None,
) -> AsyncIterator[str]:
    """The polling loop of an event stream (a task's progress, the task list's): every ``poll`` seconds the events
    ``read(first, latest)`` of the blocks not sent yet, each sent as ``emit`` makes it (SSE name, data, and whether
    it ends the stream), until one ends it, ``ended(next block)`` says it ended while nothing came (an SSE to send
    last), or ``timeout``. Outages cannot become a 503 once the stream has started: they are sent as ``error``
    events and polling goes on, from the same block."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    next_block = from_block
    yield f": fgbdt {what} stream\n\n"
    while True:
        try:
            latest = await run_in_threadpool(lambda: backend.client().block_number)
            evs = await run_in_threadpool(read, next_block, latest) if latest >= next_block else []
        except CONNECTION_ERRORS as exc:
            yield sse("error", {"detail": f"chain unreachable: {exc}", "retry_after": backend.settings.retry_after})
            evs, latest = [], next_block - 1
        finished = False
        for ev in evs:
            kind, data, ends = emit(ev)
            yield sse(kind, data, f"{ev.block_number}-{ev.log_index}")
            finished = finished or ends
        next_block = max(next_block, latest + 1)
        if finished:
            return
        if not evs and ended is not None:
            try:
                last = await run_in_threadpool(ended, next_block)
            except CONNECTION_ERRORS:
                last = None
            if last is not None:
                yield last
                return
        if loop.time() >= end:
            yield sse("timeout", {"detail": "stream timeout reached"})
            return
        await asyncio.sleep(poll)


def sse(kind: str, data: dict[str, Any], event_id: str | None = None) -> str:
    """One server-sent event."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, default=str)}\n\n"
