"""One task through ``fgbdt deploy``, ``fgbdt train`` and ``fgbdt audit`` on each kind of chain the project meets.

anvil (the devnet), ganache 7.9 (an EVM that stops at Shanghai, no ``eth_sendRawTransactionSync``, its own error
shapes), the Hardhat network (no sync send, "not supported" errors) and the embedded py-evm chain: each started
fresh, the contracts deployed by ``fgbdt deploy`` from a funded key (no unlocked account, no dev method is used to
deploy or fund), the parties funded by ``fgbdt train --funder-key``, and the task audited from the deployment file.
On every chain the model is the simulator's, tree for tree: the Shanghai build that ganache gets trains the same
model as the Cancun build.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account

from fgbdt_chain.deploy.cli import main as cli_main
from fgbdt_chain.deploy.deployment import write_key
from fgbdt_chain.ledger.devnet.anvil import start_anvil
from fgbdt_chain.ledger.devnet.embedded_rpc import start_embedded_chain
from fgbdt_chain.ledger.devnet.nodes import DEV_KEY, GANACHE_KEY, start_ganache, start_hardhat
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.node.model.trees import Model

pytestmark = [pytest.mark.chain, pytest.mark.slow]

SHAPE = ["--parties", "3", "--trees", "2", "--depth", "2", "--bins", "8", "--psd-max-rows", "40", "--seed", "0"]
"""A few trees: every step of a level (votes, histograms, endorsements, resolution) and of a task (join, approve,
start, payout) happens, within about a minute on the slowest chain."""
EXPECTED_BUILD = {"anvil": "cancun", "ganache": "shanghai", "hardhat": "cancun", "embedded": "cancun"}


@pytest.fixture(params=sorted(EXPECTED_BUILD))
def chain_node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """(name, RPC URL, a funded key file) of a freshly started chain."""
    name = str(request.param)
    key = tmp_path / "funder.key"
    if name == "embedded":
        chain = start_embedded_chain(process=True)
        funded = Account.create()
        ChainClient.connect(chain.url).fund(funded.address, 10**22)  # its dev account: setup only
        write_key(key, funded)
        try:
            yield name, chain.url, key
        finally:
            chain.stop()
        return
    node = {"anvil": start_anvil, "ganache": start_ganache, "hardhat": start_hardhat}[name]()
    write_key(key, Account.from_key(GANACHE_KEY if name == "ganache" else DEV_KEY))
    try:
        yield name, node.url, key
    finally:
        node.stop()


def test_a_task_deploys_trains_and_audits_on_every_chain(
    chain_node: tuple[str, str, Path], toy_csv: Path, tmp_path: Path
) -> None:
    name, url, key = chain_node
    deployment = tmp_path / "deployment.json"
    assert cli_main(["deploy", "--rpc", url, "--key", str(key), "--out", str(deployment)]) == 0
    info = json.loads(deployment.read_text())
    assert info["evm_version"] == EXPECTED_BUILD[name] and info["rpc_url"] == url
    client = ChainClient.connect(url)
    assert all(client.w3.eth.get_code(a) for a in [*info["contracts"].values(), *info["libraries"].values()])

    report_file, model_file = tmp_path / "report.json", tmp_path / "model.json"
    funder = Account.from_key(key.read_text().strip()).address
    sent_before = client.w3.eth.get_transaction_count(funder)
    train = ["train", "--deployment", str(deployment), "--funder-key", str(key), "--party-fund", "5", "--quiet"]
    out = ["--data", str(toy_csv), *SHAPE, "--workdir", str(tmp_path / "w")]
    assert cli_main([*train, *out, "--json", str(report_file), "--model", str(model_file)]) == 0
    report = json.loads(report_file.read_text())
    assert report["tx_count"] > 0 and sum(c["total"] for c in report["contributions"]) > 0

    sim_model = tmp_path / "simulated.json"
    assert cli_main(["simulate", "--data", str(toy_csv), *SHAPE, "--model", str(sim_model)]) == 0
    assert Model.load(model_file).trees == Model.load(sim_model).trees

    assert cli_main(["audit", "--deployment", str(deployment), "--task", str(report["task"])]) == 0
    # the funder key paid the requester and the three parties, one signed transfer each
    assert client.w3.eth.get_transaction_count(funder) == sent_before + 4
