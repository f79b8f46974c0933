"""``/tasks``: open, list, read, start and cancel tasks."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from fgbdt_chain.api import models as m
from fgbdt_chain.api.dependencies import BackendDep, find_task, kept_response, signed
from fgbdt_chain.api.params import TaskId
from fgbdt_chain.api.responses import R503, READ, WRITE
from fgbdt_chain.api.service import CheckedRequest, SignedCall, create_call_args

router = APIRouter(tags=["tasks"])


async def create_call(body: m.CreateTaskRequest) -> SignedCall:
    """``createTask(cfg, featureMin, featureMax, binEdgesHash)`` of the body."""
    return SignedCall("createTask", create_call_args(body), body.auth)


async def start_call(task_id: TaskId, body: m.StartRequest) -> SignedCall:
    """``start(taskId, binEdges)``."""
    return SignedCall("start", (task_id, bytes.fromhex(body.bin_edges[2:])), body.auth, task_id)


async def cancel_call(task_id: TaskId, body: m.EmptySigned) -> SignedCall:
    """``cancel(taskId)``."""
    return SignedCall("cancel", (task_id,), body.auth, task_id)


@router.post("/tasks", response_model=m.CreatedTask, status_code=201, responses=WRITE)
def create_task(checked: Annotated[CheckedRequest, Depends(signed(create_call))], backend: BackendDep) -> m.CreatedTask:
    """Open a task (signed by the requester-to-be). Created with no reward: deposit it with a direct
    `fund(taskId)` transaction to the contract while the task is open."""
    res = backend.execute(checked)
    tid = int(res.event("TaskCreated").args["taskId"])
    return m.CreatedTask(
        tx_hash=res.tx_hash,
        block=res.block_number,
        gas_used=res.gas_used,
        task_id=tid,
        fund=f"send the reward in wei to {backend.task().address} calling fund({tid}) from any account",
    )


@router.get("/tasks", response_model=m.TaskList, responses=R503)
def list_tasks(
    backend: BackendDep,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> m.TaskList:
    """Tasks, newest first."""
    return backend.list_tasks(offset, limit)


@router.get("/tasks/{task_id}", response_model=m.TaskDetail, responses=READ)
async def read_task(task_id: TaskId, backend: BackendDep) -> Response:
    """State, schema, parameters, members, progress in trees and levels, and gas of one task."""

    def read() -> bytes:
        task = find_task(task_id, backend)
        return backend.kept(
            task_id, "detail.json", lambda: backend.detail(task_id, task.state).model_dump_json().encode()
        )

    return await kept_response(backend, task_id, "detail.json", "application/json", read)


@router.post("/tasks/{task_id}/start", response_model=m.TxResponse, responses=WRITE)
def start(checked: Annotated[CheckedRequest, Depends(signed(start_call))], backend: BackendDep) -> m.TxResponse:
    """Start training with the common bin edges (signed by the requester)."""
    return backend.relay(checked)


@router.post("/tasks/{task_id}/cancel", response_model=m.TxResponse, responses=WRITE)
def cancel(checked: Annotated[CheckedRequest, Depends(signed(cancel_call))], backend: BackendDep) -> m.TxResponse:
    """Cancel a task that has not started; the deposit becomes withdrawable by the requester."""
    return backend.relay(checked)
