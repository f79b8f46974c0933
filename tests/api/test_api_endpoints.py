"""Every endpoint of the REST API and every error status, through TestClient against a live anvil."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from api_helpers import CREATE, EDGES, Signer, trained_task
from eth_account.signers.local import LocalAccount
from fastapi.testclient import TestClient

from fgbdt_chain.api import models
from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.routers import results
from fgbdt_chain.api.service import Backend, Settings, config_of, parameters_of, request_parameters
from fgbdt_chain.deploy.requester import ChainSetup, task_config
from fgbdt_chain.ledger.devnet.anvil import free_port, start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.reference import ONE, to_fixed
from fgbdt_chain.ledger.spec.task_params import TaskParameters
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.chain_model import model_from_chain
from fgbdt_chain.ledger.wrappers.contracts import Status, TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder
from fgbdt_chain.node.sim.experiment import PrepConfig

pytestmark = pytest.mark.chain


@pytest.fixture(scope="module")
def trained(chain: ChainClient, task: TaskContract) -> tuple[int, list[LocalAccount]]:
    return trained_task(chain, task)


def _create(api: TestClient, signer: Signer, account: LocalAccount, body: dict[str, Any] = CREATE) -> int:
    r = api.post("/v1/tasks", json=signer.create_body(account, body))
    assert r.status_code == 201, r.text
    return int(r.json()["task_id"])


def _error(r: Any, status: int, error: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert "Traceback" not in r.text
    if error is not None:
        assert body["error"] == error, body
    return body


# ---------------------------------------------------------------------------- meta


def test_health_signing_nonce(api: TestClient, task: TaskContract, forwarder: Forwarder, relayer: LocalAccount) -> None:
    h = api.get("/v1/health").json()
    assert h["chain_id"] == 31337 and h["contract"] == task.address and h["forwarder"] == forwarder.address
    assert h["relayer"] == relayer.address and h["relayer_balance_wei"] > 0
    s = api.get("/v1/signing").json()
    assert s["domain"]["name"] == "FGBDTForwarder" and s["domain"]["verifyingContract"] == forwarder.address
    assert [f["name"] for f in s["types"]["ForwardRequest"]] == [
        "from",
        "to",
        "value",
        "gas",
        "nonce",
        "deadline",
        "data",
    ]
    n = api.get(f"/v1/nonces/{relayer.address}").json()
    assert n == {"address": relayer.address, "nonce": 0}
    _error(api.get("/v1/nonces/0x1234"), 422)


def test_openapi_is_versioned_and_has_examples(api: TestClient) -> None:
    doc = api.get("/openapi.json").json()
    assert all(p.startswith("/v1/") for p in doc["paths"])
    schemas = doc["components"]["schemas"]
    assert "example" in schemas["CreateTaskRequest"] and "example" in schemas["SignedAuth"]


# ---------------------------------------------------------------------------- lifecycle through signed requests


def test_create_fund_join_approve_refuse_start(
    api: TestClient, chain: ChainClient, task: TaskContract, signer: Signer
) -> None:
    requester = chain.new_account(10**20)
    parties = [chain.new_account(0) for _ in range(3)]  # parties need no ether: the relayer pays
    tid = _create(api, signer, requester)
    detail = api.get(f"/v1/tasks/{tid}").json()
    assert detail["requester"] == requester.address and detail["status"] == "open" and detail["reward_wei"] == 0
    assert detail["parameters"]["trees"] == 2 and detail["task_schema"]["feature_max"] == [1.0, 1.0, 1.0]
    assert detail["parameters"]["tie_break"] == "hashed"  # the default, read back from the chain's config
    assert detail["gas"]["transactions"] == 1 and detail["gas"]["total_gas_used"] > 0
    # the reward comes from the requester's own direct transaction
    task.fund(requester, tid, 7 * 10**17)
    assert api.get(f"/v1/tasks/{tid}").json()["reward_wei"] == 7 * 10**17
    listed = api.get("/v1/tasks", params={"limit": 100}).json()
    assert any(t["task_id"] == tid and t["reward_wei"] == 7 * 10**17 for t in listed["tasks"])

    for i, p in enumerate(parties):
        body = {"psd": "0x0102" + f"{i:02x}", "endpoint": f"http://p{i}.example"}
        body["auth"] = signer.auth(p, "join", tid, bytes.fromhex(body["psd"][2:]), body["endpoint"])
        r = api.post(f"/v1/tasks/{tid}/join-requests", json=body)
        assert r.status_code == 201, r.text
    again = {"psd": "0x00", "endpoint": "x"}
    again["auth"] = signer.auth(parties[0], "join", tid, b"\x00", "x")  # type: ignore[assignment]
    _error(api.post(f"/v1/tasks/{tid}/join-requests", json=again), 409, "AlreadyJoined")
    reqs = api.get(f"/v1/tasks/{tid}/join-requests").json()["requests"]
    assert [(q["address"], q["status"]) for q in reqs] == [(p.address, "pending") for p in parties]

    # approval by anyone but the requester: 403 before anything is relayed
    outsider_auth = signer.auth(parties[1], "approve", tid, parties[0].address)
    path = f"/v1/tasks/{tid}/join-requests/{parties[0].address}"
    _error(api.post(f"{path}/approve", json={"auth": outsider_auth}), 403, "NotRequester")
    # start with too few parties: the contract would revert: 409
    st_auth = signer.auth(requester, "start", tid, EDGES)
    _error(api.post(f"/v1/tasks/{tid}/start", json={"bin_edges": "0x" + EDGES.hex(), "auth": st_auth}), 409)
    for p in parties[:2]:
        a = signer.auth(requester, "approve", tid, p.address)
        r = api.post(f"/v1/tasks/{tid}/join-requests/{p.address}/approve", json={"auth": a})
        assert r.status_code == 200, r.text
    a = signer.auth(requester, "refuse", tid, parties[2].address)
    assert api.post(f"/v1/tasks/{tid}/join-requests/{parties[2].address}/refuse", json={"auth": a}).status_code == 200
    members = {q["address"]: q for q in api.get(f"/v1/tasks/{tid}").json()["members"]}
    assert [members[p.address]["status"] for p in parties] == ["approved", "approved", "refused"]
    assert members[parties[1].address]["index"] == 1
    # edges the parties could not decode (the format before the slots header): 422 before anything is relayed
    v1 = EDGES[:4] + b"\x01" + EDGES[5:]
    v1_auth = signer.auth(requester, "start", tid, v1)
    r = api.post(f"/v1/tasks/{tid}/start", json={"bin_edges": "0x" + v1.hex(), "auth": v1_auth})
    assert "unsupported bin-edges version 1" in str(_error(r, 422))
    # a non-requester cannot start
    bad = signer.auth(parties[0], "start", tid, EDGES)
    _error(api.post(f"/v1/tasks/{tid}/start", json={"bin_edges": "0x" + EDGES.hex(), "auth": bad}), 403)
    st_auth = signer.auth(requester, "start", tid, EDGES)
    r = api.post(f"/v1/tasks/{tid}/start", json={"bin_edges": "0x" + EDGES.hex(), "auth": st_auth})
    assert r.status_code == 200, r.text
    d = api.get(f"/v1/tasks/{tid}").json()
    assert d["status"] == "training" and d["progress"]["phase"] == "voting" and d["progress"]["open_nodes"] == [1]
    assert d["progress"]["levels_started"] == 1 and d["progress"]["trees_completed"] == 0
    assert task.state(tid).requester == requester.address


def test_cancel_and_withdraw(api: TestClient, chain: ChainClient, task: TaskContract, signer: Signer) -> None:
    requester = chain.new_account(10**20)
    tid = _create(api, signer, requester)
    task.fund(requester, tid, 10**18)
    # nothing owed yet: 403
    _error(api.post(f"/v1/tasks/{tid}/withdraw", json={"auth": signer.auth(requester, "withdraw", tid)}), 403)
    r = api.post(f"/v1/tasks/{tid}/cancel", json={"auth": signer.auth(requester, "cancel", tid)})
    assert r.status_code == 200, r.text
    assert api.get(f"/v1/tasks/{tid}").json()["status"] == "cancelled"
    before = chain.balance(requester.address)
    r = api.post(f"/v1/tasks/{tid}/withdraw", json={"auth": signer.auth(requester, "withdraw", tid)})
    assert r.status_code == 200, r.text
    assert chain.balance(requester.address) == before + 10**18  # the relayer paid the gas
    c = api.get(f"/v1/tasks/{tid}/contributions").json()
    assert c["requester_withdrawn_wei"] == 10**18 and c["requester_due_wei"] == 0 and c["parties"] == []


# ---------------------------------------------------------------------------- 401: signatures


def test_signature_errors_are_401_and_nonce_conflicts_409(
    api: TestClient, chain: ChainClient, signer: Signer, forwarder: Forwarder
) -> None:
    alice, mallory = chain.new_account(0), chain.new_account(0)
    body = signer.create_body(alice, CREATE)
    # missing
    _error(api.post("/v1/tasks", json={k: v for k, v in body.items() if k != "auth"}), 401)
    # malformed hex / wrong length
    for sig in ("0xzz", "0x1234", "nothex"):
        _error(api.post("/v1/tasks", json={**body, "auth": {**body["auth"], "signature": sig}}), 401)
    # signed by another key while claiming alice
    forged = signer.create_body(mallory, CREATE, signer=alice.address)
    _error(api.post("/v1/tasks", json=forged), 401)
    # the body differs from what was signed (a smuggled parameter)
    tampered = {**body, "parameters": {**CREATE["parameters"], "trees": 50}}
    _error(api.post("/v1/tasks", json=tampered), 401)
    # expired
    _error(api.post("/v1/tasks", json=signer.create_body(alice, CREATE, deadline=1_000_000)), 401)
    # a nonce ahead of the forwarder's, and one used already: valid signatures, conflicting with the chain (409)
    ahead = _error(api.post("/v1/tasks", json=signer.create_body(alice, CREATE, nonce=5)), 409, "NonceAhead")
    assert "nonce 5" in ahead["detail"] and "0" in ahead["detail"]
    ok = api.post("/v1/tasks", json=body)
    assert ok.status_code == 201
    replay = api.post("/v1/tasks", json=body)
    assert "sign again with nonce 1" in _error(replay, 409, "NonceUsed")["detail"]
    assert forwarder.nonce(alice.address) == 1


# ---------------------------------------------------------------------------- 422 / 404


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"task_schema": {"feature_min": [2.0], "feature_max": [1.0]}}, ["body", "task_schema"]),
        ({"task_schema": {"feature_min": [0.0, 1.0], "feature_max": [1.0]}}, ["body", "task_schema"]),
        ({"parameters": {"depth": 9}}, ["body", "parameters", "depth"]),
        ({"parameters": {"min_parties": 5, "max_parties": 2}}, ["body", "parameters"]),
        ({"parameters": {"max_parties": 64, "bins": 16, "depth": 8}}, ["body", "parameters"]),
        ({"parameters": {"alpha": 0}}, ["body", "parameters", "alpha"]),
        ({"parameters": {"tie_break": "lowest"}}, ["body", "parameters", "tie_break"]),
        ({"task_schema": None}, ["body", "task_schema"]),
        ({"auth": {"signer": "0x12", "nonce": -1, "deadline": 1, "gas": 1, "signature": ""}}, ["body", "auth"]),
    ],
)
def test_bad_input_is_422_with_fields(api: TestClient, patch: dict[str, Any], where: list[str]) -> None:
    r = api.post("/v1/tasks", json={**CREATE, **patch})
    assert r.status_code == 422, r.text
    locs = [e["loc"] for e in r.json()["detail"]]
    assert any(loc[: len(where)] == where for loc in locs), locs


def test_unknown_task_is_404(api: TestClient, chain: ChainClient, signer: Signer, task: TaskContract) -> None:
    tid = task.task_count() + 100
    for path in ("", "/join-requests", "/model", "/contributions", "/audit", "/events"):
        _error(api.get(f"/v1/tasks/{tid}{path}"), 404)
    _error(api.post(f"/v1/tasks/{tid}/predictions", json={"rows": [[0.1, 0.2, 0.3]]}), 404)
    acct = chain.new_account(0)
    _error(api.post(f"/v1/tasks/{tid}/cancel", json={"auth": signer.auth(acct, "cancel", tid)}), 404)
    _error(api.get("/v1/tasks/0"), 422)
    _error(api.get("/v1/tasks/abc"), 422)


# ---------------------------------------------------------------------------- results of a trained task


def test_model_predictions_contributions(
    api: TestClient, task: TaskContract, trained: tuple[int, list[LocalAccount]]
) -> None:
    tid, accounts = trained
    assert task.state(tid).status == Status.COMPLETED
    d = api.get(f"/v1/tasks/{tid}").json()
    assert d["status"] == "completed" and d["progress"]["trees_completed"] == 2 and d["progress"]["phase"] is None
    assert d["progress"]["levels_started"] >= 2
    model = api.get(f"/v1/tasks/{tid}/model").json()
    assert model["bins"] == 4 and len(model["trees"]) == 2
    text = api.get(f"/v1/tasks/{tid}/model", params={"format": "lightgbm"})
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    assert text.text.startswith("tree") and "Tree=1" in text.text
    _error(api.get(f"/v1/tasks/{tid}/model", params={"format": "xml"}), 422)

    rows = [[0.1, 0.6, 0.9], [None, 0.3, 0.2]]
    p = api.post(f"/v1/tasks/{tid}/predictions", json={"rows": rows}).json()
    assert p["rows"] == 2 and p["features"] == 3 and p["trees"] == 2
    assert all(0 < x < 1 for x in p["probabilities"]) and p["labels"] == [int(x > 0.5) for x in p["probabilities"]]
    assert p["objective"] == "binary" and p["predictions"] == p["probabilities"]
    bad = api.post(f"/v1/tasks/{tid}/predictions", json={"rows": [[0.1, 0.2, 0.3], [0.1]]})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "rows", 1]
    _error(api.post(f"/v1/tasks/{tid}/predictions", json={"rows": [["a", 1, 2]]}), 422)
    _error(api.post(f"/v1/tasks/{tid}/predictions", json={"rows": []}), 422)

    c = api.get(f"/v1/tasks/{tid}/contributions").json()
    parties = [a.address for a in accounts[1:]]
    assert [q["party"] for q in c["parties"]] == parties
    for q in c["parties"]:
        assert q["total"] == task.contribution(tid, q["party"]) == sum(q["per_tree"]) and len(q["per_tree"]) == 2
        assert q["reward_due_wei"] == task.owed(tid, q["party"]) == q["reward_assigned_wei"]
        assert q["reward_forfeited_wei"] == 0  # every party took part to the last step
    assert abs(sum(q["share"] for q in c["parties"]) - 1.0) < 1e-9 or c["positive_total"] == 0
    assigned = sum(q["reward_assigned_wei"] for q in c["parties"]) + c["requester_due_wei"]
    assert assigned == c["reward_wei"] == 10**18


def test_contributions_show_a_forfeit(api: TestClient, chain: ChainClient, task: TaskContract) -> None:
    """A party that stopped sending histograms is not paid: share 0, its amount shown as forfeited, and the
    requester owed the rest (the API follows the contract's payout, ``reference.payouts``)."""
    tid, _ = trained_task(chain, task, seed=3, leave=True)
    c = api.get(f"/v1/tasks/{tid}/contributions").json()
    assert c["status"] == "completed"
    [left] = [q for q in c["parties"] if q["reward_forfeited_wei"] > 0]
    [stayed] = [q for q in c["parties"] if q is not left]
    assert left["share"] == 0.0 and left["reward_assigned_wei"] == left["reward_due_wei"] == 0 and left["total"] > 0
    totals = [q["total"] for q in c["parties"]]
    due = ref.payouts(totals, [q is stayed for q in c["parties"]], 10**18)
    assert [q["reward_forfeited_wei"] for q in c["parties"]] == list(due.forfeited)
    assert stayed["share"] == max(stayed["total"], 0) / c["positive_total"] and stayed["reward_due_wei"] > 0
    assert c["requester_due_wei"] == due.requester >= left["reward_forfeited_wei"]


def test_a_regression_task_predicts_values(api: TestClient, chain: ChainClient, task: TaskContract) -> None:
    """The predictions of a regression task are the model's values in the labels' units (probabilities answered
    500 for them: the model has no P(class 1)); what ``model_from_chain`` predicts, with its label scale."""
    tid, _ = trained_task(chain, task, seed=5, objective="regression")
    rows = [[0.1, 0.6, 0.9], [None, 0.3, 0.2], [0.9, 0.9, 0.1]]
    p = api.post(f"/v1/tasks/{tid}/predictions", json={"rows": rows}).json()
    assert p["objective"] == "regression" and p["probabilities"] is None and p["labels"] is None
    model = model_from_chain(task, tid)
    assert model.objective == "regression" and model.label_scale == 1.0
    X = np.array([[math.nan if v is None else v for v in r] for r in rows])
    assert p["predictions"] == model.predict(X).tolist() and len(set(p["predictions"])) > 1


def test_model_of_unstarted_task_is_409(api: TestClient, chain: ChainClient, signer: Signer) -> None:
    tid = _create(api, signer, chain.new_account(0))
    _error(api.get(f"/v1/tasks/{tid}/model"), 409, "ModelNotReady")
    _error(api.post(f"/v1/tasks/{tid}/predictions", json={"rows": [[0.1, 0.2, 0.3]]}), 409)


def test_progress_stream_of_completed_task(api: TestClient, trained: tuple[int, list[LocalAccount]]) -> None:
    tid, _ = trained
    with api.stream("GET", f"/v1/tasks/{tid}/events", params={"poll": 0.25}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        text = "".join(r.iter_text())
    events = [
        (b.split("event: ")[1].split("\n")[0], json.loads(b.split("data: ")[1]))
        for b in text.split("\n\n")
        if "event: " in b
    ]
    kinds = [k for k, _ in events]
    assert kinds[0] == "started" and kinds[-1] == "completed"
    levels = [(d["tree"], d["level"]) for k, d in events if k == "level"]
    assert levels[0] == (0, 0) and {t for t, _ in levels} == {0, 1}
    assert "node" in kinds and "voting_closed" in kinds and "histograms_closed" in kinds


def test_progress_stream_times_out_on_open_task(api: TestClient, chain: ChainClient, signer: Signer) -> None:
    tid = _create(api, signer, chain.new_account(0))
    with api.stream("GET", f"/v1/tasks/{tid}/events", params={"poll": 0.25, "timeout": 0.3}) as r:
        text = "".join(r.iter_text())
    assert "event: timeout" in text and "event: completed" not in text


def test_audit_verdict(api: TestClient, chain: ChainClient, signer: Signer, trained: tuple[int, list[Any]]) -> None:
    tid, _ = trained
    r = api.get(f"/v1/tasks/{tid}/audit")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ok"] is True and body["first_mismatch"] is None and body["summary"].startswith("OK")
    assert body["report"]["completed"] is True
    unstarted = _create(api, signer, chain.new_account(0))
    _error(api.get(f"/v1/tasks/{unstarted}/audit"), 409, "AuditError")


def test_audit_that_cannot_run_is_503(
    api: TestClient, backend: Backend, trained: tuple[int, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An audit that fails to run (e.g. a node that cannot return the task's old transactions) is "unavailable
    here", 503, not a 500; its cause stays in the server's log."""

    def no_history(*_: Any) -> None:
        raise RuntimeError("transaction 0xabc not found (secret detail)")

    monkeypatch.setattr(results, "audit_chain", no_history)
    backend.finished.drop(trained[0])  # a finished task's verdict is kept (api.finished): this audit runs again
    r = api.get(f"/v1/tasks/{trained[0]}/audit")
    body = _error(r, 503, "AuditUnavailable")
    assert body["detail"] == "the audit failed to run: RuntimeError" and r.headers["retry-after"] == "5"


# ---------------------------------------------------------------------------- 503 and 500


def test_chain_down_is_503_with_retry_after(task: TaskContract, relayer: LocalAccount, signer: Signer) -> None:
    settings = Settings(f"http://127.0.0.1:{free_port()}", task.address, relayer_key="0x" + bytes(relayer.key).hex())
    with TestClient(create_app(Backend(settings)), raise_server_exceptions=False) as down:
        for path in ("/v1/health", "/v1/tasks", "/v1/tasks/1", "/v1/tasks/1/model", "/v1/tasks/1/events"):
            r = down.get(path)
            assert r.status_code == 503, (path, r.text)
            assert r.headers["retry-after"] == "5" and "Traceback" not in r.text
        body = {"auth": {"signer": relayer.address, "nonce": 0, "deadline": 2**40, "gas": 100000, "signature": "0x"}}
        r = down.post("/v1/tasks/1/cancel", json=body)
        assert r.status_code == 503 and r.headers["retry-after"] == "5"


def test_bad_input_is_422_before_the_chain_is_read(task: TaskContract, relayer: LocalAccount) -> None:
    """Input errors answer 422 even when the task lookup or the signature check would fail (here: no chain at all):
    the routes look tasks up only after FastAPI validated their query and body."""
    settings = Settings(f"http://127.0.0.1:{free_port()}", task.address, relayer_key="0x" + bytes(relayer.key).hex())
    with TestClient(create_app(Backend(settings)), raise_server_exceptions=False) as down:
        for method, path, body in [
            ("GET", "/v1/tasks/1/model?format=xml", None),
            ("GET", "/v1/tasks/1/events?poll=0", None),
            ("POST", "/v1/tasks/1/predictions", {"rows": []}),
            ("POST", "/v1/tasks/1/start", {"bin_edges": "0x"}),
            ("POST", "/v1/tasks/1/join-requests", {"psd": "zz"}),
            ("POST", "/v1/tasks", {"task_schema": {"feature_min": [2.0], "feature_max": [1.0]}}),
        ]:
            r = down.request(method, path, json=body)
            assert r.status_code == 422 and isinstance(r.json()["detail"], list), (path, r.text)


def test_chain_going_down_is_503(artifacts: dict[str, Any], relayer: LocalAccount) -> None:
    node = start_anvil()
    try:
        client = ChainClient.connect(node.url)
        client.artifacts = artifacts
        task = TaskContract.deploy(client, client.new_account(10**20))
        backend = Backend(Settings(node.url, task.address, rpc_timeout=2), artifacts)
        with TestClient(create_app(backend), raise_server_exceptions=False) as c:
            assert c.get("/v1/tasks").status_code == 200
            node.stop()
            for path in ("/v1/tasks", "/v1/health", "/v1/tasks/1/contributions"):
                r = c.get(path)
                assert r.status_code == 503 and r.headers["retry-after"] == "5", (path, r.text)
    finally:
        node.stop()


def test_unexpected_error_is_500_without_trace(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app(backend)

    def boom(*_: Any) -> None:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(backend, "list_tasks", boom)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/v1/tasks")
    assert r.status_code == 500 and "secret" not in r.text and "Traceback" not in r.text


def test_read_only_api_refuses_writes(anvil_node: Any, task: TaskContract, chain: ChainClient, signer: Signer) -> None:
    ro = Backend(Settings(anvil_node.url, task.address))
    with TestClient(create_app(ro), raise_server_exceptions=False) as c:
        acct = chain.new_account(0)
        r = c.post("/v1/tasks", json=signer.create_body(acct, CREATE))
        assert r.status_code == 503 and r.headers["retry-after"]
        assert c.get("/v1/health").json()["relayer"] is None


@pytest.mark.parametrize(("name", "code"), [("hashed", 1), ("index", 0)])
def test_tie_break_maps_to_the_contract_rule_and_back(name: str, code: int) -> None:
    cfg = config_of(models.TaskParameters(tie_break=name))  # type: ignore[arg-type]
    assert cfg.tie_break == code and parameters_of(cfg).tie_break == name


def test_the_same_parameters_give_the_same_config_on_chain_through_the_api_and_the_command_line(
    api: TestClient, signer: Signer, chain: ChainClient, task: TaskContract
) -> None:
    """One mapping of task parameters (``ledger.spec.task_params``): a task created by the requester of ``fgbdt train``
    and one created through ``POST /v1/tasks`` with the same parameters hold identical configs on chain, reals
    included (the API once truncated 0.07 where the command line rounded it)."""
    params = TrainParams(trees=7, depth=4, bins=12, learning_rate=0.07, lam=0.3, min_rows=9, alpha=0.25)
    setup = ChainSetup(
        rpc="", contract=task.address, requester=chain.new_account(10**21), workdir=Path("."), refusal_rate=3e-7
    )
    prep = SimpleNamespace(params=params, config=PrepConfig(parties=3), label_range=(0.0, 1.0))
    cli = task_config(prep, setup)  # type: ignore[arg-type]  # the fields task_config reads
    tid_cli, _ = task.create_task(setup.requester, cli, [0, 0], [ONE, ONE])
    parameters = request_parameters(TaskParameters.of(cli)).model_dump()
    body = {"task_schema": {"feature_min": [0.0, 0.0], "feature_max": [1.0, 1.0]}, "parameters": parameters}
    tid_api = _create(api, signer, chain.new_account(10**21), body)
    assert task.config(tid_api) == task.config(tid_cli) == cli
    assert task.config(tid_api).learning_rate == to_fixed(0.07) and task.config(tid_api).refusal_rate == to_fixed(3e-7)
