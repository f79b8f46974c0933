"""A task created through the REST API with no parameters trains on chain what ``fgbdt simulate`` trains with none.

Both read their defaults from ``ledger.spec.parameters``; this runs the whole path: the API's request model, its
contract encoding, the party processes reading the config back, and the simulator through its command line. Only
``trees`` is given (2 instead of 100, so that the run fits a test's time); every other parameter, the depth of 6
included, is the table's default on both sides, and the partition is ``simulate``'s default too (4 parties, theta
0.8, seed 0).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from fastapi.testclient import TestClient

from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.client import create_task_body
from fgbdt_chain.api.service import Backend, Settings
from fgbdt_chain.deploy.cli import main as cli_main
from fgbdt_chain.deploy.requester import ETHER, BlockClock, ChainSetup, Requester
from fgbdt_chain.ledger.devnet.anvil import Anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.usage import ChainUsage
from fgbdt_chain.ledger.spec.task_params import TaskConfig
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.chain_model import model_from_chain
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder
from fgbdt_chain.node.data.loaders import load_train_test
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare

pytestmark = [pytest.mark.chain, pytest.mark.slow]

TREES = 2
"""The one parameter given, on both sides: the default 100 trees of depth 6 take minutes of transactions."""


class ApiRequester(Requester):
    """The requester of ``fgbdt train``, except that it opens its task through the REST API, giving only ``trees``."""

    def __init__(self, api: TestClient, forwarder: Forwarder, *args: Any) -> None:
        super().__init__(*args)
        self.api, self.forwarder = api, forwarder

    def open_task(self) -> int:
        low, high = self.prep.ranges
        body = {
            "task_schema": {"feature_min": [float(v) for v in low], "feature_max": [float(v) for v in high]},
            "parameters": {"trees": TREES},
        }
        self.start_block = self.client.block_number
        self.usage = ChainUsage(self.start_block)
        signed = create_task_body(self.forwarder, self.task, self.setup.requester, body)
        created = self.api.post("/v1/tasks", json=signed)
        assert created.is_success, created.text
        self.task_id = int(created.json()["task_id"])
        self.task.fund(self.setup.requester, self.task_id, ETHER)
        return self.task_id


def test_a_task_created_through_the_api_with_defaults_trains_what_simulate_trains(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path
) -> None:
    sim_model, sim_report = tmp_path / "simulate.json", tmp_path / "simulate-report.json"
    argv = ["simulate", "--data", str(toy_csv), "--trees", str(TREES), "--quiet", "--no-baselines"]
    assert cli_main([*argv, "--model", str(sim_model), "--json", str(sim_report)]) == 0
    simulated = Model.load(sim_model)
    report = json.loads(sim_report.read_text())

    train, test = load_train_test(toy_csv, seed=0)
    prep = prepare(train, test, TrainParams(trees=TREES), PrepConfig())
    client = ChainClient.connect(anvil_node.url)
    requester = Account.create()
    client.fund(requester.address, 10**21)
    relayer = client.new_account(10**21)
    task = TaskContract.at(client, e2e_contract)
    backend = Backend(Settings(anvil_node.url, e2e_contract, relayer_key="0x" + bytes(relayer.key).hex()))
    setup = ChainSetup(rpc=anvil_node.url, contract=e2e_contract, requester=requester, workdir=tmp_path / "chain")
    with TestClient(create_app(backend), raise_server_exceptions=False) as api:
        req = ApiRequester(api, Forwarder.of(task), prep, setup)
        try:
            req.open_task()
            with BlockClock(req.client, setup.clock_tick):
                req.launch_parties()
                req.approve_and_start()
                req.follow()
            assert req.wait_parties() == [0] * prep.config.parties
        finally:
            req.stop_parties()
        parameters = api.get(f"/v1/tasks/{req.task_id}").json()["parameters"]

    # the API wrote the table's defaults, as the contract recorded them and the API reads them back
    assert task.config(req.task_id) == dataclasses.replace(TaskConfig(), trees=TREES)
    assert parameters["depth"] == 6 and parameters["lam"] == 0.1 and parameters["min_rows"] == 20
    # and the parties trained simulate's model, bit for bit, with its contributions
    chain = model_from_chain(task, req.task_id)
    assert chain.edges == simulated.edges
    for t, (a, b) in enumerate(zip(chain.trees, simulated.trees, strict=True)):
        got = {k: (v.feature, v.threshold, v.gain_fixed, v.value_fixed) for k, v in a.nodes.items()}
        want = {k: (v.feature, v.threshold, v.gain_fixed, v.value_fixed) for k, v in b.nodes.items()}
        assert got == want, f"tree {t} differs"
    assert chain.trees == simulated.trees
    assert max(tree.depth for tree in chain.trees) == 6  # the default depth was trained, not a shallower one
    totals = [str(task.contribution(req.task_id, p)) for p in task.parties(req.task_id)]
    assert totals == [c["total_fixed"] for c in report["contributions"]]
    assert req.report(time.monotonic())["test_error"] == report["test_error"]
