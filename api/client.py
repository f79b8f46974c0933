"""Client side of the API's signed requests: the ``auth`` object of a request body, for Python callers.

Why here: a body's signature must cover exactly the calldata the API rebuilds from that body, so the client must
derive it with the API's own rules (:func:`api.service.create_call_args` for ``createTask``, the contract's argument
order for the others). The demo, the tests and any Python client use these functions instead of re-deriving them.
"""

from __future__ import annotations

from typing import Any

from eth_account.signers.local import LocalAccount

from fgbdt_chain.api import models as m
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import DEFAULT_GAS, DEFAULT_TTL, Forwarder, calldata

WRITE_CALLS: dict[str, str] = {
    "POST /v1/tasks": "createTask(cfg, featureMin, featureMax, binEdgesHash)",
    "POST /v1/tasks/{id}/join-requests": "join(taskId, psd, endpoint)",
    "POST /v1/tasks/{id}/join-requests/{party}/approve": "approve(taskId, party)",
    "POST /v1/tasks/{id}/join-requests/{party}/refuse": "refuse(taskId, party)",
    "POST /v1/tasks/{id}/start": "start(taskId, binEdges)",
    "POST /v1/tasks/{id}/cancel": "cancel(taskId)",
    "POST /v1/tasks/{id}/withdraw": "withdraw(taskId)",
}
"""The contract call each state-changing endpoint makes (and so the calldata its ``auth`` must sign)."""


def auth_for(
    forwarder: Forwarder,
    task: TaskContract,
    account: LocalAccount,
    function: str,
    *args: Any,
    gas: int = DEFAULT_GAS,
    ttl: int = DEFAULT_TTL,
    nonce: int | None = None,
    deadline: int | None = None,
    signer: str | None = None,
) -> dict[str, Any]:
    """The ``auth`` object for ``function(*args)`` signed by ``account`` (``signer`` overrides the claimed address,
    for tests of forged requests; ``nonce`` defaults to the forwarder's current one)."""
    req = forwarder.build(
        signer or account.address,
        task.address,
        calldata(task, function, *args),
        gas=gas,
        ttl=ttl,
        nonce=nonce,
        deadline=deadline,
    )
    return {
        "signer": req.sender,
        "nonce": req.nonce,
        "deadline": req.deadline,
        "gas": req.gas,
        "signature": "0x" + forwarder.sign(account, req).hex(),
    }


def create_task_body(
    forwarder: Forwarder, task: TaskContract, account: LocalAccount, body: dict[str, Any], **kw: Any
) -> dict[str, Any]:
    """A signed ``POST /v1/tasks`` body: ``body`` (schema, parameters) plus its ``auth``."""
    from fgbdt_chain.api.service import create_call_args

    args = create_call_args(m.CreateTaskRequest.model_validate(body))
    return {**body, "auth": auth_for(forwarder, task, account, "createTask", *args, **kw)}
