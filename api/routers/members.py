"""``/tasks/{task_id}/join-requests``: parties ask to join; the requester approves or refuses them."""

from __future__ import annotations

from typing import Annotated

from eth_utils import to_checksum_address
from fastapi import APIRouter, Depends

from fgbdt_chain.api import models as m
from fgbdt_chain.api.dependencies import BackendDep, KnownTask, signed
from fgbdt_chain.api.params import PartyPath, TaskId
from fgbdt_chain.api.responses import READ, WRITE
from fgbdt_chain.api.service import CheckedRequest, SignedCall

router = APIRouter(tags=["members"])


async def join_call(task_id: TaskId, body: m.JoinRequest) -> SignedCall:
    """``join(taskId, psd, endpoint)``."""
    return SignedCall("join", (task_id, bytes.fromhex(body.psd[2:]), body.endpoint), body.auth, task_id)


async def approve_call(task_id: TaskId, party: PartyPath, body: m.EmptySigned) -> SignedCall:
    """``approve(taskId, party)``."""
    return SignedCall("approve", (task_id, to_checksum_address(party)), body.auth, task_id)


async def refuse_call(task_id: TaskId, party: PartyPath, body: m.EmptySigned) -> SignedCall:
    """``refuse(taskId, party)``."""
    return SignedCall("refuse", (task_id, to_checksum_address(party)), body.auth, task_id)


@router.get("/tasks/{task_id}/join-requests", response_model=m.JoinRequestList, responses=READ)
def join_requests(task: KnownTask, backend: BackendDep) -> m.JoinRequestList:
    """Every join request of the task and its status (pending, approved, refused)."""
    return m.JoinRequestList(task_id=task.task_id, requests=backend.members(task.task_id))


@router.post("/tasks/{task_id}/join-requests", response_model=m.TxResponse, status_code=201, responses=WRITE)
def join(checked: Annotated[CheckedRequest, Depends(signed(join_call))], backend: BackendDep) -> m.TxResponse:
    """Ask to join (signed by the party), publishing its PSD and endorsement endpoint."""
    return backend.relay(checked)


@router.post("/tasks/{task_id}/join-requests/{party}/approve", response_model=m.TxResponse, responses=WRITE)
def approve(checked: Annotated[CheckedRequest, Depends(signed(approve_call))], backend: BackendDep) -> m.TxResponse:
    """Approve a pending party (signed by the requester)."""
    return backend.relay(checked)


@router.post("/tasks/{task_id}/join-requests/{party}/refuse", response_model=m.TxResponse, responses=WRITE)
def refuse(checked: Annotated[CheckedRequest, Depends(signed(refuse_call))], backend: BackendDep) -> m.TxResponse:
    """Refuse a pending party (signed by the requester)."""
    return backend.relay(checked)
