"""``/tasks/{task_id}/deposit``: a reward deposit signed by the client's own key (``api.deposits``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from fgbdt_chain.api import dashboard_models as dm
from fgbdt_chain.api.dependencies import BackendDep, find_task
from fgbdt_chain.api.deposits import broadcast_deposit, deposit_transaction
from fgbdt_chain.api.models import ErrorResponse
from fgbdt_chain.api.params import TaskId
from fgbdt_chain.api.responses import R409, READ

router = APIRouter(tags=["deposits"])

Address = Annotated[str, Query(pattern=r"^0x[0-9a-fA-F]{40}$", description="The depositor's address.")]


@router.get("/tasks/{task_id}/deposit", response_model=dm.DepositTransaction, responses={**READ, **R409})
def deposit_to_sign(
    task_id: TaskId,
    backend: BackendDep,
    sender: Address,
    amount_wei: Annotated[int, Query(gt=0, lt=2**128, description="The deposit in wei.")],
) -> dm.DepositTransaction:
    """The `fund(taskId)` transaction `sender` signs to add `amount_wei` to an open task's reward: nonce, gas and
    fees as the chain asks now. 409 where the task is not open or the sender cannot pay the deposit and its gas."""
    find_task(task_id, backend)  # after the query is validated (api.dependencies)
    return deposit_transaction(backend, task_id, sender, amount_wei)


@router.post(
    "/tasks/{task_id}/deposit",
    response_model=dm.DepositResult,
    responses={
        **READ,
        **R409,
        504: {"model": ErrorResponse, "description": "Not mined in time"},
    },
)
def deposit(task_id: TaskId, body: dm.DepositRequest, backend: BackendDep) -> dm.DepositResult:
    """Broadcast a signed `fund(taskId)` transaction (from `GET` of this path, signed by the depositor) once it is
    shown to deposit into this task on this chain; answers once it is mined. The API signs nothing here and sees no
    key: the transaction spends its signer's ether and can only do what it says."""
    find_task(task_id, backend)
    return broadcast_deposit(backend, task_id, body.raw_transaction)
