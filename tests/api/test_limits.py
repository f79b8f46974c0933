"""What one client may ask of the server (``api.limits``): a body, the event streams it holds open, a prediction
batch; past each limit a 4xx that names it, through a real uvicorn server on 127.0.0.1 (or the ASGI app where only
the app is involved) and the suite's shared anvil."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_helpers import served, trained_task
from eth_account.signers.local import LocalAccount
from fastapi.testclient import TestClient

from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.limits import Limits
from fgbdt_chain.api.service import Backend, Settings
from fgbdt_chain.ledger.devnet.anvil import Anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.toolchain.compile import Artifact
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract

pytestmark = pytest.mark.chain


@pytest.fixture
def limited(
    anvil_node: Anvil, task: TaskContract, relayer: LocalAccount, artifacts: dict[str, Artifact]
) -> Iterator[Any]:
    """A backend with the given limits (the others at their defaults)."""

    def make(**limits: int) -> Backend:
        key = "0x" + bytes(relayer.key).hex()
        return Backend(Settings(anvil_node.url, task.address, relayer_key=key, limits=Limits(**limits)), artifacts)

    yield make


def _refused(r: httpx.Response, status: int, error: str, flag: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["error"] == error and flag in body["detail"], body
    return body


def test_a_body_past_the_limit_is_413_whether_its_length_is_declared_or_not(limited: Any) -> None:
    batch = json.dumps({"rows": [[0.25, 0.5, 0.75]] * 100}).encode()  # 1,901 bytes
    assert len(batch) > 1000
    with served(limited(max_body_bytes=1000)) as url, httpx.Client(base_url=url, timeout=10) as http:
        headers = {"content-type": "application/json"}
        r = http.post("/v1/tasks/1/predictions", content=batch, headers=headers)
        _refused(r, 413, "BodyTooLarge", "--max-body-bytes")
        assert "1000 bytes" in r.json()["detail"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: refused once the bytes read pass the limit
            yield batch[:600]
            yield batch[600:]

        _refused(http.post("/v1/tasks/1/predictions", content=chunks(), headers=headers), 413, "BodyTooLarge", "1000")
        # a body within the limit goes on to the route (task 10^6 does not exist: 404)
        small = http.post("/v1/tasks/1000000/predictions", json={"rows": [[0.5, 0.5, 0.5]]})
        assert small.status_code == 404, small.text


@pytest.mark.parametrize(("total", "per_client", "flag"), [(2, 5, "--max-streams"), (5, 2, "--max-streams-per-client")])
def test_a_stream_past_a_limit_is_429_and_a_closed_one_frees_its_place(
    limited: Any, chain: ChainClient, task: TaskContract, total: int, per_client: int, flag: str
) -> None:
    backend = limited(max_streams=total, max_streams_per_client=per_client)
    open_task, _ = task.create_task(chain.new_account(10**20), TaskConfig(), [0], [ONE])
    every = "/v1/events?poll=0.25&timeout=60"
    one = f"/v1/tasks/{open_task}/events?poll=0.25&timeout=60"
    with served(backend) as url, httpx.Client(base_url=url, timeout=10) as a, httpx.Client(base_url=url) as b:
        with a.stream("GET", every) as first, b.stream("GET", one) as second:
            assert first.status_code == second.status_code == 200
            lines = [first.iter_lines(), second.iter_lines()]  # kept: a dropped iterator closes its connection
            assert all(next(it).startswith(":") for it in lines)
            assert backend.streams.open == 2
            for path in (every, one):  # both kinds of stream count against the same limits
                third = httpx.get(url + path, timeout=10)
                _refused(third, 429, "TooManyStreams", flag)
                assert int(third.headers["retry-after"]) > 0
        deadline = time.monotonic() + 10  # the server sees both clients go, and frees their places
        while backend.streams.open and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.streams.open == 0
        with a.stream("GET", every) as again:
            assert again.status_code == 200


def test_a_prediction_batch_past_the_limits_is_413_before_the_chain_is_read(limited: Any) -> None:
    with TestClient(create_app(limited(max_predict_rows=5, max_predict_columns=4))) as api:
        unknown = "/v1/tasks/1000000/predictions"  # no such task: a 413 rather than a 404 was decided first
        rows = _refused(api.post(unknown, json={"rows": [[0.5] * 3] * 6}), 413, "TooManyRows", "--max-predict-rows")
        assert rows["detail"].startswith("6 rows")
        wide = [[0.5] * 3, [0.5] * 3, [0.5] * 5]
        cols = _refused(api.post(unknown, json={"rows": wide}), 413, "TooManyColumns", "--max-predict-columns")
        assert cols["detail"].startswith("row 2 has 5 values")
        assert api.post(unknown, json={"rows": [[0.5] * 4] * 5}).status_code == 404


def test_a_stream_polling_more_often_than_the_server_does_is_422(limited: Any) -> None:
    with TestClient(create_app(limited())) as api:  # the default floor: 0.25 s
        for path in ("/v1/events", "/v1/tasks/1000000/events"):  # 422 before the task is looked up
            r = api.get(path, params={"poll": 0.1})
            assert r.status_code == 422, r.text
            error = r.json()["detail"][0]
            assert error["loc"] == ["query", "poll"] and "--min-stream-poll" in error["msg"]


def test_an_audit_past_the_audits_running_is_429_and_a_kept_verdict_is_not_run(
    limited: Any, chain: ChainClient, task: TaskContract
) -> None:
    backend = limited(max_audits=1)
    tid, _ = trained_task(chain, task, seed=9)
    with TestClient(create_app(backend)) as api:
        with backend.audits.slot():  # the one audit this server runs at once
            busy = api.get(f"/v1/tasks/{tid}/audit")
            _refused(busy, 429, "Busy", "--max-audits")
            assert int(busy.headers["retry-after"]) > 0
        assert api.get(f"/v1/tasks/{tid}/audit").json()["ok"] is True
        with backend.audits.slot():  # the finished task's verdict is kept: nothing runs
            assert api.get(f"/v1/tasks/{tid}/audit").json()["ok"] is True


def test_the_integer_features_of_the_bin_edges_are_bounded(limited: Any) -> None:
    with TestClient(create_app(limited())) as api:
        r = api.get("/v1/tasks/1/bin-edges", params={"integers": list(range(4097))})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "integers"]


def test_limits_are_checked_when_set() -> None:
    with pytest.raises(ValueError, match="max_streams must be at least 1"):
        Limits(max_streams=0)
