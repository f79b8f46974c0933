"""Reads the dashboard needs beside the task resources: every task's events as one stream, a task's timeline, the
calldata of a task to create (for a browser to sign) and the common bin edges a requester starts training with.

Why here and not in the browser: the task list follows every task, which the per-task stream cannot do on one
connection; the timeline reads a window of trees by block range; ``createTask``'s calldata follows the parameters'
conversion (``api.service.config_of``: fixed point, a private task's raised regularisation) that a page should not
re-implement; and the bin edges are merged from the parties' sketches as the command line's requester merges them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import numpy as np
from eth_utils import keccak
from fastapi import APIRouter, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse

from fgbdt_chain.api import dashboard_models as dm
from fgbdt_chain.api import models as m
from fgbdt_chain.api.dependencies import BackendDep, find_task
from fgbdt_chain.api.errors import ApiError
from fgbdt_chain.api.limits import check_poll
from fgbdt_chain.api.params import TaskId
from fgbdt_chain.api.responses import R409, R429, R503, READ
from fgbdt_chain.api.routers.events import event_stream, poll_events
from fgbdt_chain.api.service import Backend, create_call_args
from fgbdt_chain.api.timeline import timeline
from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec.edges import encode_edges
from fgbdt_chain.ledger.wrappers.contracts import Status
from fgbdt_chain.ledger.wrappers.forwarder import calldata
from fgbdt_chain.node.privacy.binning import edges_from_sketch, snap_integer_edges
from fgbdt_chain.node.privacy.publish import PayloadError, decode_join

router = APIRouter(tags=["dashboard"])

LIST_EVENTS = (
    "TaskCreated",
    "JoinRequested",
    "PartyApproved",
    "PartyRefused",
    "TaskFunded",
    "TrainingStarted",
    "LevelStarted",
    "TaskCompleted",
    "TaskCancelled",
    "Withdrawn",
)
"""The events that change a line of the task list (state, parties, trees done, reward)."""
MAX_TIMELINE_TREES = 50


@router.get(
    "/events", responses={200: {"description": "Server-sent events", "content": {"text/event-stream": {}}}, **R429}
)
async def all_events(
    backend: BackendDep,
    request: Request,
    from_block: Annotated[int, Query(ge=0, description="Replay events from this block")] = 0,
    poll: Annotated[float, Query(ge=0.05, le=30, description="Polling interval, seconds")] = 1.0,
    timeout: Annotated[float, Query(gt=0, le=86_400, description="Close the stream after (seconds)")] = 3600,
) -> StreamingResponse:
    """Every task's list-changing events (created, joined, approved, funded, started, a level, completed,
    cancelled, withdrawn) as server-sent events named `task`, each with its `task_id`, `event` and `block`; `error`
    events report chain outages, `timeout` ends the stream. One stream more than the server holds (in all, or of
    this client) is refused with 429; a `poll` shorter than the server's `--min-stream-poll` with 422."""
    check_poll(poll, backend.settings.limits)
    return event_stream(backend, request, _stream(backend, from_block, poll, timeout))


async def _stream(backend: Backend, from_block: int, poll: float, timeout: float) -> AsyncIterator[str]:
    def read(first: int, latest: int) -> list[Event]:
        task = backend.task()
        return task.client.logs(task.contract, LIST_EVENTS, None, first, latest)

    def emit(ev: Event) -> tuple[str, dict[str, Any], bool]:
        return "task", {"task_id": int(ev.args["taskId"]), "event": ev.name, "block": ev.block_number}, False

    async for chunk in poll_events(backend, "task list", from_block, poll, timeout, read, emit):
        yield chunk


@router.get("/tasks/{task_id}/timeline", response_model=dm.Timeline, responses=READ)
def task_timeline(
    task_id: TaskId,
    backend: BackendDep,
    from_tree: Annotated[int, Query(ge=0, lt=2**16, description="First tree")] = 0,
    trees: Annotated[int, Query(ge=1, le=MAX_TIMELINE_TREES, description="How many trees")] = 5,
) -> dm.Timeline:
    """Levels of a window of trees: when each started, who voted, who submitted with how many endorsements, whose
    histograms were not taken and why (the contract's error where a call reverted, the verifiers' quorum where the
    party declined without one, or silent), when the histograms closed and what each node became."""
    task = find_task(task_id, backend)  # after the query is validated (api.dependencies)
    return timeline(backend.task(), task.task_id, from_tree, trees, backend.forwarder())


@router.post("/tasks/calldata", response_model=dm.Calldata, responses=R503)
def create_calldata(body: m.CreateTaskRequest, backend: BackendDep) -> dm.Calldata:
    """The `createTask` calldata of a `POST /v1/tasks` body (its `auth` is ignored): the `data` of the
    `ForwardRequest` a client signs to create that task."""
    task = backend.task()
    data = calldata(task, "createTask", *create_call_args(body))
    return dm.Calldata(function="createTask", to=task.address, data="0x" + data.hex())


@router.get("/tasks/{task_id}/bin-edges", response_model=dm.BinEdges, responses={**READ, **R409})
def bin_edges(
    task_id: TaskId,
    backend: BackendDep,
    integers: Annotated[
        list[int] | None,
        Query(max_length=4096, description="Features whose values are integers (cuts at half-integers)"),
    ] = None,
) -> dm.BinEdges:
    """The common bin edges merged from the approved parties' sketches (in party order, on the task's schema and
    bins), encoded as `POST /v1/tasks/{task_id}/start` takes them."""
    found = find_task(task_id, backend)
    if found.state.status != Status.OPEN:
        raise ApiError(409, f"task {task_id} is not open: its edges are fixed", "WrongStatus")
    task = backend.task()
    parties = task.parties(task_id)
    if not parties:
        raise ApiError(409, f"task {task_id} has no approved party yet", "NotEnoughParties")
    payloads = {str(e.args["party"]): bytes(e.args["psd"]) for e in backend.logs(task_id, ["JoinRequested"])}
    created = backend.logs(task_id, ["TaskCreated"])[0].args
    low = np.array([m.from_fixed(int(v)) for v in created["featureMin"]])
    high = np.array([m.from_fixed(int(v)) for v in created["featureMax"]])
    flags = None
    if integers:
        bad = [i for i in integers if not 0 <= i < len(low)]
        if bad:  # a 422 like the schema's own: the number of features is only known from the chain
            msg = f"feature {bad[0]} does not exist: the task has {len(low)} features"
            raise RequestValidationError([{"loc": ["query", "integers"], "msg": msg, "type": "value_error"}])
        flags = np.zeros(len(low), dtype=bool)
        flags[integers] = True
    try:
        sketches = [decode_join(payloads[p]).sketch for p in parties]
    except PayloadError as exc:
        raise ApiError(409, f"a party's join payload holds no readable sketch: {exc}", "PayloadError") from exc
    edges = snap_integer_edges(edges_from_sketch(sketches, low, high, task.config(task_id).bins), flags)
    encoded = encode_edges([e.tolist() for e in edges])
    return dm.BinEdges(
        task_id=task_id,
        parties=len(parties),
        bin_edges="0x" + encoded.hex(),
        bin_edges_hash="0x" + keccak(encoded).hex(),
    )
