"""End-to-end fixtures: a real anvil, the deployed contracts, and a small binary data set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fgbdt_chain.ledger.devnet.anvil import Anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.wrappers.contracts import TaskContract


@pytest.fixture(scope="session")
def e2e_contract(anvil_node: Anvil) -> str:
    client = ChainClient.connect(anvil_node.url)
    return TaskContract.deploy(client, client.new_account(10**22)).address


@pytest.fixture(scope="session")
def toy_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4,000 rows, 5 features, a linear signal: enough rows per party for a PSD that the verifiers can use."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(4000, 5))
    y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=4000) > 0).astype(int)
    path = tmp_path_factory.mktemp("toy") / "toy.csv"
    with open(path, "w") as f:
        f.write("label,a,b,c,d,e\n")
        for yi, row in zip(y, X, strict=True):
            f.write(",".join([str(yi), *(f"{v:.5f}" for v in row)]) + "\n")
    return path
