"""A reward deposit signed by the depositor's own key and broadcast by the API (``api.deposits``): the transaction
the API asks to sign is a ``fund`` of the task that the chain takes, and the API broadcasts nothing else."""

from __future__ import annotations

from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from fastapi.testclient import TestClient

from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract


def _open_task(chain: ChainClient, task: TaskContract) -> int:
    requester = chain.new_account(10**20)
    tid, _ = task.create_task(requester, TaskConfig(trees=1, depth=1, bins=4, lam=ONE), [0], [ONE])
    return tid


def _signed(tx: dict[str, Any], key: LocalAccount) -> str:
    """The transaction the API described, signed as a wallet or the dashboard signs it."""
    fields: dict[str, Any] = {k: tx[k] for k in ("nonce", "to", "value", "data", "gas")}
    fields["chainId"] = tx["chain_id"]
    if tx["tx_type"] == 2:
        fields |= {"maxFeePerGas": tx["max_fee_per_gas"], "maxPriorityFeePerGas": tx["max_priority_fee_per_gas"]}
    else:
        fields["gasPrice"] = tx["gas_price"]
    return "0x" + bytes(key.sign_transaction(fields).raw_transaction).hex()


def test_a_deposit_signed_by_its_sender_is_broadcast_and_adds_to_the_reward(
    api: TestClient, chain: ChainClient, task: TaskContract
) -> None:
    tid = _open_task(chain, task)
    depositor = chain.new_account(10**19)
    r = api.get(f"/v1/tasks/{tid}/deposit", params={"sender": depositor.address, "amount_wei": 3 * 10**17})
    assert r.status_code == 200, r.text
    tx = r.json()
    assert (tx["to"], tx["value"], tx["chain_id"]) == (task.address, 3 * 10**17, chain.chain_id)
    sent = api.post(f"/v1/tasks/{tid}/deposit", json={"raw_transaction": _signed(tx, depositor)})
    assert sent.status_code == 200, sent.text
    got = sent.json()
    assert (got["sender"], got["amount_wei"], got["reward_wei"]) == (depositor.address, 3 * 10**17, 3 * 10**17)
    assert task.state(tid).reward == 3 * 10**17
    again = api.post(f"/v1/tasks/{tid}/deposit", json={"raw_transaction": _signed(tx, depositor)})
    assert again.status_code == 409 and again.json()["error"] == "ChainRefused"  # its nonce is spent
    assert "nonce" in again.json()["detail"].lower()


def test_only_a_fund_of_this_task_on_this_chain_is_broadcast(
    api: TestClient, chain: ChainClient, task: TaskContract
) -> None:
    tid, other = _open_task(chain, task), _open_task(chain, task)
    depositor = chain.new_account(10**19)
    tx = api.get(f"/v1/tasks/{tid}/deposit", params={"sender": depositor.address, "amount_wei": 10**15}).json()

    def refusal(task_id: int, raw: str) -> str:
        r = api.post(f"/v1/tasks/{task_id}/deposit", json={"raw_transaction": raw})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "raw_transaction"], r.text
        return str(r.json()["detail"][0]["msg"])

    assert f"not fund({other})" in refusal(other, _signed(tx, depositor))
    assert "not the task contract" in refusal(tid, _signed({**tx, "data": "0x", "to": depositor.address}, depositor))
    assert f"chain {chain.chain_id + 1}" in refusal(tid, _signed({**tx, "chain_id": chain.chain_id + 1}, depositor))
    assert "not a signed transaction" in refusal(tid, "0x02c0")
    assert "neither" in refusal(tid, "0x00")
    assert task.state(tid).reward == task.state(other).reward == 0


def test_a_deposit_the_chain_would_refuse_is_refused_before_signing(
    api: TestClient, chain: ChainClient, task: TaskContract
) -> None:
    tid = _open_task(chain, task)
    poor = Account.create()
    r = api.get(f"/v1/tasks/{tid}/deposit", params={"sender": poor.address, "amount_wei": 10**18})
    assert r.status_code == 409 and r.json()["error"] == "InsufficientFunds", r.text
    requester = chain.new_account(10**20)
    cancelled, _ = task.create_task(requester, TaskConfig(trees=1, depth=1, bins=4, lam=ONE), [0], [ONE])
    task.cancel(requester, cancelled)
    rich = chain.new_account(10**19)
    r = api.get(f"/v1/tasks/{cancelled}/deposit", params={"sender": rich.address, "amount_wei": 10**15})
    assert r.status_code == 409 and r.json()["error"] == "WrongStatus" and "cancelled" in r.json()["detail"]
    assert api.get(f"/v1/tasks/{tid}/deposit", params={"sender": rich.address, "amount_wei": 0}).status_code == 422
