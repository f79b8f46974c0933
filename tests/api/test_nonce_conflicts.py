"""Two signed requests with one forwarder nonce: one lands, the other is refused with 409 and the reason, whether
they arrive at once, one while the other is relayed, or one after the other; and what lands is on chain once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from api_helpers import CREATE, Signer, served
from fastapi.testclient import TestClient

from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.errors import ApiError
from fgbdt_chain.api.models import CreateTaskRequest
from fgbdt_chain.api.service import Backend, Settings, SignedCall, create_call_args
from fgbdt_chain.ledger.devnet.anvil import Anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.toolchain.compile import Artifact
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder, create_task_args

pytestmark = pytest.mark.chain


def _body(salt: float) -> dict[str, Any]:
    """A create body of its own (another calldata, so another signed request for the same nonce)."""
    return {**CREATE, "task_schema": {"feature_min": [0.0] * 3, "feature_max": [1.0 + salt] * 3}}


def _created_by(task: TaskContract, address: str) -> list[int]:
    events = task.client.logs(task.contract, ["TaskCreated"])
    return [int(e.args["taskId"]) for e in events if e.args["requester"] == address]


def test_requests_with_one_nonce_sent_at_once_land_once(
    backend: Backend, chain: ChainClient, task: TaskContract, forwarder: Forwarder, signer: Signer
) -> None:
    with served(backend) as url, ThreadPoolExecutor(3) as pool:
        for round_ in range(3):
            alice = chain.new_account(0)
            bodies = [signer.create_body(alice, _body(round_ + i / 10), nonce=0) for i in range(3)]
            answers = list(pool.map(lambda b: httpx.post(f"{url}/v1/tasks", json=b, timeout=60), bodies))
            assert sorted(r.status_code for r in answers) == [201, 409, 409], [r.text for r in answers]
            for r in answers:
                if r.status_code == 409:
                    refusal = r.json()
                    assert refusal["error"] in ("NonceInUse", "NonceUsed") and "nonce 0" in refusal["detail"]
            won = next(r.json() for r in answers if r.status_code == 201)
            assert _created_by(task, alice.address) == [won["task_id"]]
            assert forwarder.nonce(alice.address) == 1


def test_a_request_whose_nonce_is_being_relayed_is_409_at_once(
    api: TestClient, backend: Backend, chain: ChainClient, task: TaskContract, signer: Signer
) -> None:
    alice = chain.new_account(0)
    held = signer.create_body(alice, _body(0.5))
    request = CreateTaskRequest.model_validate(held)
    call = SignedCall("createTask", create_call_args(request), request.auth)
    with backend.checked(call):  # checked, not yet relayed
        r = api.post("/v1/tasks", json=signer.create_body(alice, _body(0.6)))
        assert r.status_code == 409 and r.json()["error"] == "NonceInUse", r.text
        assert f"{alice.address} signed with nonce 0 is being relayed" in r.json()["detail"]
    # the held request was never relayed: its nonce is free again
    assert api.post("/v1/tasks", json=signer.create_body(alice, _body(0.6))).status_code == 201
    assert len(_created_by(task, alice.address)) == 1


def test_a_nonce_used_while_its_request_was_relayed_is_409(
    backend: Backend, chain: ChainClient, task: TaskContract, forwarder: Forwarder, signer: Signer
) -> None:
    """Another relayer (or another server) uses the nonce between the check and the relay: the forwarder refuses the
    request, and the client is told its nonce was used, not that the contract would revert."""
    alice, other_relayer = chain.new_account(0), chain.new_account(10**20)
    body = signer.create_body(alice, _body(0.7))
    request = CreateTaskRequest.model_validate(body)
    call = SignedCall("createTask", create_call_args(request), request.auth)
    with backend.checked(call) as checked:
        args = create_task_args(TaskConfig(), [0], [ONE])
        forwarder.relay_call(other_relayer, alice, task, "createTask", *args)  # nonce 0, used elsewhere
        with pytest.raises(ApiError) as err:
            backend.execute(checked)
    assert err.value.status == 409 and err.value.error == "NonceUsed"
    assert "was used by another request" in err.value.detail
    assert len(_created_by(task, alice.address)) == 1 and forwarder.nonce(alice.address) == 1


def test_a_relayer_key_used_by_two_servers_relays_every_write(
    anvil_node: Anvil, chain: ChainClient, task: TaskContract, signer: Signer, artifacts: dict[str, Artifact]
) -> None:
    """Each server counts its relayer's transaction nonces itself; when another used the key meanwhile, the node
    refuses the transaction (nonce too low) and the request, which did not land, is sent once more: a 201, not a
    500."""
    key = "0x" + bytes(chain.new_account(10**21).key).hex()
    first, second = (Backend(Settings(anvil_node.url, task.address, relayer_key=key), artifacts) for _ in range(2))
    with TestClient(create_app(first)) as a, TestClient(create_app(second)) as b:
        for api in (a, b, a, b):
            alice = chain.new_account(0)
            r = api.post("/v1/tasks", json=signer.create_body(alice, _body(0.8)))
            assert r.status_code == 201, r.text
            assert _created_by(task, alice.address) == [r.json()["task_id"]]
