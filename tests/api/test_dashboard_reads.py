"""The dashboard's page and assets (served offline, from the package) and the reads it adds to the API: the task
list's stream of every task's events, a task's timeline, ``createTask``'s calldata and the common bin edges."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
from api_helpers import CREATE, Signer, refused_level, trained_task
from eth_account.signers.local import LocalAccount
from eth_utils import keccak
from fastapi.testclient import TestClient

from fgbdt_chain.api import models as m
from fgbdt_chain.api.dashboard import STATIC_DIR
from fgbdt_chain.api.service import create_call_args
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.edges import decode_edges
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import calldata
from fgbdt_chain.node.privacy.binning import local_sketch, sketch_rng
from fgbdt_chain.node.privacy.psd import build_psd
from fgbdt_chain.node.privacy.publish import encode_join

IMPORT = re.compile(r"""(?:import|from)\s*(?:[^"';]*?from\s*)?["'](\.[^"']+)["']""")


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (b.split("event: ")[1].split("\n")[0], json.loads(b.split("data: ")[1]))
        for b in text.split("\n\n")
        if "event: " in b
    ]


def test_the_page_and_every_module_it_loads_are_served_from_the_package(api: TestClient) -> None:
    """``/`` is the page; every script, module import and style sheet it reaches is served by the API with its
    type, from ``api/static`` (no other host: the dashboard works offline)."""
    r = api.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    urls = re.findall(r'(?:src|href)="(/ui/[^"]+)"', r.text)
    assert "/ui/app.js" in urls and "/ui/app.css" in urls
    seen: set[str] = set()
    todo = [u for u in urls if u.endswith(".js")]
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        got = api.get(url)
        assert got.status_code == 200, url
        assert got.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript"), url
        assert "http://" not in got.text.replace("http://www.w3.org/2000/svg", "") and "https://" not in got.text
        base = url.rsplit("/", 1)[0]
        todo += [f"{base}/{rel.removeprefix('./')}" for rel in IMPORT.findall(got.text)]
    assert {"/ui/sign.js", "/ui/vendor/noble.js", "/ui/task.js", "/ui/charts.js"} <= seen
    assert api.get("/ui/app.css").headers["content-type"].startswith("text/css")
    shipped = {p.relative_to(STATIC_DIR).as_posix() for p in STATIC_DIR.rglob("*.js")} - {"vendor/noble-src.mjs"}
    assert shipped == {u.removeprefix("/ui/") for u in seen}, "a module the page never loads"


def test_the_list_shows_trees_done_and_its_stream_names_every_task(
    api: TestClient, chain: ChainClient, task: TaskContract
) -> None:
    tid, _ = trained_task(chain, task, seed=5)
    listed = {t["task_id"]: t for t in api.get("/v1/tasks", params={"limit": 100}).json()["tasks"]}
    assert listed[tid]["trees_completed"] == listed[tid]["trees"] == 2
    with api.stream("GET", "/v1/events", params={"poll": 0.25, "timeout": 0.5}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = _events("".join(r.iter_text()))
    mine = [d["event"] for k, d in events if k == "task" and d["task_id"] == tid]
    assert mine[0] == "TaskCreated" and mine[-1] == "TaskCompleted"
    assert mine.count("LevelStarted") == 4 and "TrainingStarted" in mine and "PartyApproved" in mine
    assert events[-1][0] == "timeout"


def test_the_timeline_tells_each_level_who_submitted_and_what_it_resolved(
    api: TestClient, chain: ChainClient, task: TaskContract
) -> None:
    """Two trees of two levels: each level's two submissions with their endorsements, its closing block and the
    nodes it resolved; a window of one tree holds that tree only. A party that sent nothing at the second level
    (``leave``) is missing from its submitters and its later levels."""
    tid, accounts = trained_task(chain, task, seed=6)
    parties = {a.address for a in accounts[1:]}
    t = api.get(f"/v1/tasks/{tid}/timeline", params={"from_tree": 0, "trees": 5}).json()
    assert (t["from_tree"], t["to_tree"], t["trees"], t["depth"]) == (0, 2, 2, 2)
    assert [(lv["tree"], lv["level"]) for lv in t["levels"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for lv in t["levels"]:
        assert {s["party"] for s in lv["submissions"]} == parties == set(lv["submitters"])
        assert all(s["endorsements"] == 1 for s in lv["submissions"])  # the other party's signature
        assert lv["closed_block"] >= lv["started_block"] and lv["blocks"] >= 1
        assert lv["declined"] == []
    root = t["levels"][0]
    assert root["open_nodes"] == [1] and {n["node"] for n in root["nodes"] if n["kind"] != "candidates"} == {1}
    last = t["levels"][1]  # the depth limit: the leaves under level 1's nodes are set as it resolves
    assert {n["node"] for n in last["nodes"] if n["kind"] == "leaf"} >= {4, 5, 6, 7} & {
        n["node"] for n in last["nodes"]
    }
    assert any(n["kind"] == "leaf" for n in last["nodes"])
    one = api.get(f"/v1/tasks/{tid}/timeline", params={"from_tree": 1, "trees": 1}).json()
    assert [(lv["tree"], lv["level"]) for lv in one["levels"]] == [(1, 0), (1, 1)]
    assert api.get(f"/v1/tasks/{tid}/timeline", params={"from_tree": 7}).json()["levels"] == []
    assert api.get(f"/v1/tasks/{tid}/timeline", params={"trees": 51}).status_code == 422
    left, accounts = trained_task(chain, task, seed=7, leave=True)
    lv = api.get(f"/v1/tasks/{left}/timeline").json()["levels"]
    assert len(lv[1]["submissions"]) == len(lv[1]["submitters"]) == 1
    [quiet] = lv[1]["declined"]  # it voted and sent no histograms: silent, and no further part in the task
    assert quiet["party"] in {a.address for a in accounts[1:]} - set(lv[1]["submitters"])
    assert (quiet["kind"], quiet["source"]) == ("silent", None) and "sent no histograms" in quiet["reason"]
    assert [r for level in lv[2:] for r in level["declined"]] == []


def test_the_timeline_gives_each_refusal_the_contract_s_or_the_verifiers_reason(
    api: TestClient, chain: ChainClient, task: TaskContract
) -> None:
    """Four parties at a tree's root: one sends its histograms without endorsements (the contract reverts the mined
    transaction, then it declines), one has a relayer send them so (the relayer's batch records the failure), one
    declines without sending (short of the verifiers' quorum), one sends nothing before the deadline. The timeline
    names the contract's error and the transaction of the first two, the quorum the third missed, and the fourth as
    silent."""
    tid, parties, batch, error = refused_level(chain, task)
    refused, relayed, declining, quiet = parties
    [level] = api.get(f"/v1/tasks/{tid}/timeline").json()["levels"]
    why = {r["party"]: r for r in level["declined"]}
    assert set(why) == {p.address for p in parties} and level["submitters"] == []
    assert (why[refused.address]["kind"], why[refused.address]["source"]) == ("declined", "contract")
    assert f"submitHistograms reverted: {error}" in why[refused.address]["reason"]
    receipt = chain.w3.eth.get_transaction_receipt(why[refused.address]["transaction"])
    assert receipt["status"] == 0 and receipt["from"] == refused.address
    assert why[relayed.address]["source"] == "contract"
    assert why[relayed.address]["transaction"] == "0x" + batch.removeprefix("0x")
    assert f"submitHistograms reverted: {error}" in why[relayed.address]["reason"]
    assert (why[declining.address]["kind"], why[declining.address]["source"]) == ("declined", "verifiers")
    assert "2 of the 3 other parties" in why[declining.address]["reason"]
    assert (why[quiet.address]["kind"], why[quiet.address]["source"]) == ("silent", None)


def test_create_calldata_is_what_a_signed_create_must_carry(
    api: TestClient, task: TaskContract, chain: ChainClient, signer: Signer
) -> None:
    """The page signs the calldata this answers: the API's own rebuilding of the body (so the relayed request
    passes its check) and a task is created from it."""
    r = api.post("/v1/tasks/calldata", json=CREATE)
    assert r.status_code == 200, r.text
    want = calldata(task, "createTask", *create_call_args(m.CreateTaskRequest.model_validate(CREATE)))
    assert r.json() == {"function": "createTask", "to": task.address, "data": "0x" + want.hex()}
    bad = api.post("/v1/tasks/calldata", json={**CREATE, "parameters": {"trees": 0}})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "trees"


def test_bin_edges_are_merged_from_the_approved_parties_sketches_and_start_the_task(
    api: TestClient, chain: ChainClient, task: TaskContract, signer: Signer
) -> None:
    """Two parties publish real join payloads; the edges the API merges from them (an integer feature's cuts at
    half-integers) decode, hash as the contract will, and start the task through a signed request."""
    rng = np.random.default_rng(1)
    requester = chain.new_account(10**20)
    parties: list[LocalAccount] = [chain.new_account(10**19) for _ in range(2)]
    cfg = TaskConfig(trees=1, depth=1, bins=8, min_parties=2, max_parties=2, lam=ONE)
    tid, _ = task.create_task(requester, cfg, [0, 0], [10 * ONE, ONE])
    low, high = np.array([0.0, 0.0]), np.array([10.0, 1.0])
    r = api.get(f"/v1/tasks/{tid}/bin-edges")
    assert r.status_code == 409 and r.json()["error"] == "NotEnoughParties"
    for i, p in enumerate(parties):
        X = np.column_stack([rng.integers(0, 11, 500).astype(float), rng.random(500)])
        y = (rng.random(500) < 0.5).astype(float)
        sketch = local_sketch(X, low, high, resolution=64, epsilon=1.0, rng=sketch_rng(3, i))
        psd = build_psd(X, y, np.append(low, 0.0), np.append(high, 1.0), depth=2, rng=np.random.default_rng(i))
        task.join(p, tid, encode_join(psd, 1.0, sketch), f"http://p{i}.example")
        task.approve(requester, tid, p.address)
    assert api.get(f"/v1/tasks/{tid}/bin-edges", params={"integers": [2]}).status_code == 422
    r = api.get(f"/v1/tasks/{tid}/bin-edges", params={"integers": [0]})
    assert r.status_code == 200, r.text
    got = r.json()
    encoded = bytes.fromhex(got["bin_edges"][2:])
    assert got["parties"] == 2 and got["bin_edges_hash"] == "0x" + keccak(encoded).hex()
    edges = decode_edges(encoded)
    assert len(edges) == 2 and all(e - int(e) == 0.5 for e in edges[0]) and 1 <= len(edges[1]) <= 7
    auth = signer.auth(requester, "start", tid, encoded)
    started = api.post(f"/v1/tasks/{tid}/start", json={"bin_edges": got["bin_edges"], "auth": auth})
    assert started.status_code == 200, started.text
    assert api.get(f"/v1/tasks/{tid}/bin-edges").json()["error"] == "WrongStatus"
