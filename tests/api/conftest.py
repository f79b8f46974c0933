"""API test fixtures: one anvil with the contracts (and forwarder) deployed, a relayer, and a TestClient.

Why a live chain rather than mocks: the API's whole job is to rebuild calldata, check ERC-2771 signatures against the
deployed forwarder and relay; only the real forwarder and contract can tell whether that agrees byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_helpers import Signer
from eth_account.signers.local import LocalAccount
from fastapi.testclient import TestClient

from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.service import Backend, Settings
from fgbdt_chain.ledger.devnet.anvil import Anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.toolchain.compile import Artifact
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder


@pytest.fixture(scope="session")
def chain(anvil_node: Anvil, artifacts: dict[str, Artifact]) -> ChainClient:
    client = ChainClient.connect(anvil_node.url)
    client.artifacts = artifacts
    return client


@pytest.fixture(scope="session")
def task(chain: ChainClient) -> TaskContract:
    return TaskContract.deploy(chain, chain.new_account(10**22))


@pytest.fixture(scope="session")
def forwarder(task: TaskContract) -> Forwarder:
    return Forwarder.of(task)


@pytest.fixture(scope="session")
def relayer(chain: ChainClient) -> LocalAccount:
    return chain.new_account(10**22)


@pytest.fixture(scope="session")
def backend(anvil_node: Anvil, task: TaskContract, relayer: LocalAccount, artifacts: dict[str, Artifact]) -> Backend:
    settings = Settings(anvil_node.url, task.address, relayer_key="0x" + bytes(relayer.key).hex())
    return Backend(settings, artifacts)


@pytest.fixture(scope="session")
def api(backend: Backend) -> Iterator[TestClient]:
    with TestClient(create_app(backend), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="session")
def signer(backend: Backend, forwarder: Forwarder) -> Signer:
    return Signer(backend, forwarder)
