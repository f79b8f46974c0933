"""A finished task's reads are served from memory while nothing new happens to it (``api.finished``), and no longer
once something does: a withdrawal sent straight to the contract is seen at the next check, one relayed by the API at
once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from api_helpers import Signer, trained_task
from eth_account.signers.local import LocalAccount
from fastapi.testclient import TestClient

from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.service import Backend, Settings
from fgbdt_chain.ledger.devnet.anvil import Anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.toolchain.compile import Artifact
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder

pytestmark = pytest.mark.chain

READS = ("", "/contributions", "/model", "/model?format=lightgbm", "/join-requests", "/audit")


@pytest.fixture(scope="module")
def finished(chain: ChainClient, task: TaskContract) -> tuple[int, list[Any]]:
    return trained_task(chain, task, seed=5)


def _api(
    anvil_node: Anvil, task: TaskContract, relayer: LocalAccount, artifacts: dict[str, Artifact], recheck: float
) -> tuple[Backend, TestClient]:
    relayer = task.client.new_account(10**21)  # its own: the shared relayer keeps its nonces to itself
    key = "0x" + bytes(relayer.key).hex()
    backend = Backend(Settings(anvil_node.url, task.address, relayer_key=key, recheck=recheck), artifacts)
    return backend, TestClient(create_app(backend))


class Calls:
    """The JSON-RPC calls a backend makes."""

    def __init__(self, backend: Backend) -> None:
        self.count = 0
        provider = backend.client().w3.provider
        send = provider.make_request

        def counted(method: Any, params: Any) -> Any:
            self.count += 1
            return send(method, params)

        provider.make_request = counted  # type: ignore[method-assign]


@pytest.fixture
def kept(
    anvil_node: Anvil, task: TaskContract, relayer: LocalAccount, artifacts: dict[str, Artifact]
) -> Iterator[tuple[Backend, TestClient]]:
    backend, api = _api(anvil_node, task, relayer, artifacts, recheck=3600)
    with api:
        yield backend, api


def test_a_finished_task_is_read_from_the_chain_once(
    kept: tuple[Backend, TestClient], finished: tuple[int, list[Any]]
) -> None:
    backend, api = kept
    tid, _ = finished
    first = {path: api.get(f"/v1/tasks/{tid}{path}") for path in READS}
    assert all(r.status_code == 200 for r in first.values()), {p: r.text for p, r in first.items()}
    calls = Calls(backend)
    again = {path: api.get(f"/v1/tasks/{tid}{path}") for path in READS}
    assert calls.count == 0
    assert {p: r.content for p, r in again.items()} == {p: r.content for p, r in first.items()}
    assert again["/model?format=lightgbm"].headers["content-type"].startswith("text/plain")
    assert api.post(f"/v1/tasks/{tid}/predictions", json={"rows": [[0.2, 0.5, 0.9]]}).status_code == 200
    assert calls.count == 0


def test_a_withdrawal_sent_to_the_contract_is_seen_at_the_next_check(
    anvil_node: Anvil,
    task: TaskContract,
    relayer: LocalAccount,
    artifacts: dict[str, Artifact],
    chain: ChainClient,
) -> None:
    tid, accounts = trained_task(chain, task, seed=6)
    _, api = _api(anvil_node, task, relayer, artifacts, recheck=0.05)
    with api:
        party = next(a for a in accounts[1:] if task.owed(tid, a.address) > 0)
        before = api.get(f"/v1/tasks/{tid}/contributions").json()
        row = next(p for p in before["parties"] if p["party"] == party.address)
        assert row["withdrawn_wei"] == 0 and row["reward_due_wei"] > 0
        task.withdraw(party, tid)  # straight to the contract: the API relays nothing
        time.sleep(0.1)
        after = api.get(f"/v1/tasks/{tid}/contributions").json()
        row_after = next(p for p in after["parties"] if p["party"] == party.address)
        assert row_after["withdrawn_wei"] == row["reward_due_wei"] and row_after["reward_due_wei"] == 0
        assert api.get(f"/v1/tasks/{tid}").json()["gas"]["transactions"] > 0


def test_a_write_the_api_relays_drops_the_task_s_reads_at_once(
    kept: tuple[Backend, TestClient],
    task: TaskContract,
    forwarder: Forwarder,
    signer: Signer,
    chain: ChainClient,
) -> None:
    _, api = kept  # checked once an hour: only the relayed write can make the API read again
    tid, accounts = trained_task(chain, task, seed=7)
    party = next(a for a in accounts[1:] if task.owed(tid, a.address) > 0)
    due = next(p for p in api.get(f"/v1/tasks/{tid}/contributions").json()["parties"] if p["party"] == party.address)
    r = api.post(f"/v1/tasks/{tid}/withdraw", json={"auth": signer.auth(party, "withdraw", tid)})
    assert r.status_code == 200, r.text
    rows = api.get(f"/v1/tasks/{tid}/contributions").json()["parties"]
    row = next(p for p in rows if p["party"] == party.address)
    assert row["reward_due_wei"] == 0 and row["withdrawn_wei"] == due["reward_due_wei"] + due["withdrawn_wei"]
