"""Client-side helpers of the API tests: signing request bodies as a real client would, a trained task, and a level
whose parties were refused."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from eth_account.signers.local import LocalAccount

from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.client import auth_for, create_task_body
from fgbdt_chain.api.service import Backend
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec.edges import encode_edges
from fgbdt_chain.ledger.spec.reference import OBJECTIVES, ONE, ObjectiveName
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract, submit_histograms_args
from fgbdt_chain.ledger.wrappers.federation import RowSource, run_level
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder

EDGES = encode_edges([[0.25, 0.5, 0.75]] * 3)
"""Bin edges of the test tasks: 3 features, 4 bins."""


class Signer:
    """Builds the ``auth`` object of a request body: the signed ForwardRequest of the endpoint's contract call."""

    def __init__(self, backend: Backend, forwarder: Forwarder) -> None:
        self.backend = backend
        self.forwarder = forwarder

    def auth(self, account: LocalAccount, function: str, *args: Any, **kw: Any) -> dict[str, Any]:
        """``auth`` for ``function(args)`` signed by ``account`` (see :func:`api.client.auth_for`)."""
        kw.setdefault("gas", 3_000_000)
        return auth_for(self.forwarder, self.backend.task(), account, function, *args, **kw)

    def create_body(self, account: LocalAccount, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        """A signed ``POST /v1/tasks`` body (the calldata is derived exactly as the API derives it)."""
        kw.setdefault("gas", 3_000_000)
        return create_task_body(self.forwarder, self.backend.task(), account, body, **kw)


CREATE = {
    "task_schema": {"feature_min": [0.0, 0.0, 0.0], "feature_max": [1.0, 1.0, 1.0]},
    "parameters": {"trees": 2, "depth": 2, "bins": 4, "min_parties": 2, "max_parties": 3, "lam": 1.0},
}


def trained_task(
    chain: ChainClient,
    task: TaskContract,
    seed: int = 0,
    reward: int = 10**18,
    leave: bool = False,
    objective: ObjectiveName = "binary",
) -> tuple[int, list[Any]]:
    """A completed 2-party, 2-tree, depth-2 task driven directly through the contract with the histograms of
    synthetic rows; with ``leave`` the party with the larger total after the first level sends nothing at the second
    (so it takes no further part, and forfeits). A regression task's labels lie in [0, 1], its stated range."""
    rng = random.Random(seed)
    cfg = TaskConfig(
        trees=2, depth=2, bins=4, min_parties=2, max_parties=2, lam=ONE, step_blocks=5, objective=OBJECTIVES[objective]
    )
    requester = chain.new_account(10**21)
    parties = [chain.new_account(10**20) for _ in range(2)]
    resolver = chain.new_account(10**20)
    tid, _ = task.create_task(requester, cfg, [0] * 3, [ONE] * 3, reward=reward)
    for i, p in enumerate(parties):
        task.join(p, tid, b"psd" + bytes([i]), f"http://p{i}.example")
        task.approve(requester, tid, p.address)
    task.start(requester, tid, EDGES)
    rows = RowSource(rng, [p.address for p in parties], 50, 3, cfg.bins + 1, objective)
    taking_part = list(parties)
    step = 0
    while task.state(tid).status == 2:
        st = task.state(tid)
        if st.level == 0:
            rows.start_tree(st.tree)
        votes = {p.address: [rng.randint(0, 2) for _ in st.open_nodes()] for p in taking_part}
        silent = set()
        if leave and step == 1:
            silent = {max(parties, key=lambda p: task.contribution(tid, p.address)).address}
        out = run_level(task, tid, taking_part, votes, rows, resolver, silent_hists=silent, endorsers=parties)
        rows.follow(out)
        taking_part = [p for p in parties if p.address in out.submitters]
        step += 1
    return tid, [requester, *parties]


def future(seconds: int = 600) -> int:
    """A deadline ``seconds`` from now."""
    return int(time.time()) + seconds


@contextmanager
def served(backend: Backend) -> Iterator[str]:
    """The API of ``backend`` served by uvicorn on 127.0.0.1 in a thread: what only a real server shows (request
    bodies as they arrive, streams held open on several connections, a client's address); yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(create_app(backend), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def refused_level(chain: ChainClient, task: TaskContract) -> tuple[int, list[LocalAccount], str, str]:
    """A task of four parties whose first level takes no histograms, each party refused another way: the first sends
    them without endorsements as its own transaction (mined with a given gas limit, so without an estimate first,
    and reverted), the second has a relayer's batch send them so (the batch records the failure), both then decline;
    the third declines without sending, the fourth sends nothing before the deadline. Returns the task, the four
    parties, the batch's transaction and the contract's error."""
    requester, resolver = chain.new_account(10**20), chain.new_account(10**20)
    parties = [chain.new_account(10**20) for _ in range(4)]
    cfg = TaskConfig(trees=1, depth=1, bins=4, min_parties=4, max_parties=4, lam=ONE, step_blocks=8)
    tid, _ = task.create_task(requester, cfg, [0] * 3, [ONE] * 3)
    for i, p in enumerate(parties):
        task.join(p, tid, b"psd" + bytes([i]), f"http://p{i}.example")
        task.approve(requester, tid, p.address)
    task.start(requester, tid, EDGES)
    for p in parties:
        task.submit_votes(p, tid, 0, 0, [0])
    rec = task.node(tid, 0, 1)
    rows = RowSource(random.Random(3), [p.address for p in parties], 50, 3, cfg.bins + 1)
    rows.start_tree(0)
    refused, relayed, declining, _ = parties
    args = submit_histograms_args(tid, 0, 0, [rows(refused.address, 1, (rec.cand0, rec.cand1))], [])
    try:
        chain.transact(task.contract, "submitHistograms", *args, sender=refused, gas=3_000_000)
    except ContractRevert as exc:
        error = exc.name
    else:
        raise AssertionError("the contract took histograms without endorsements")
    task.decline_histograms(refused, tid, 0, 0)
    fwd = Forwarder.of(task)
    data = bytes.fromhex(chain.encode_call(task.contract, "submitHistograms", args)[2:])
    req = fwd.build(relayed.address, task.address, data, gas=2_000_000)
    batch = fwd.execute_batch(resolver, [(req, fwd.sign(relayed, req))])
    assert fwd.nonce(relayed.address) == 1  # the batch ran the request, which failed alone
    task.decline_histograms(relayed, tid, 0, 0)
    task.decline_histograms(declining, tid, 0, 0)
    chain.mine(max(1, task.state(tid).step_deadline - chain.block_number + 1))
    task.close_step(resolver, tid)
    return tid, parties, batch.tx_hash, error
