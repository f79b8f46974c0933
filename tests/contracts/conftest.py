"""Shared chain fixtures: one anvil per test session, one embedded py-evm chain, compiled artifacts once.

Tests that must hold on both chains take the ``chain`` fixture, parametrised over ``anvil`` and ``embedded`` (the
embedded chain as the demo runs it: its JSON-RPC server in a process of its own, which keeps py-evm's work off the
test's interpreter and reads logs from its own index); the heavy randomised differential tests run on anvil only
(loopback JSON-RPC with batched ``eth_call`` is far faster).
A missing anvil fails the session instead of skipping: the suite must not silently test less.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from eth_account.signers.local import LocalAccount

from fgbdt_chain.ledger.devnet.anvil import Anvil
from fgbdt_chain.ledger.devnet.embedded_rpc import start_embedded_chain
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.toolchain.compile import Artifact
from fgbdt_chain.ledger.wrappers.contracts import MathContract, TaskContract


@pytest.fixture(scope="session")
def anvil_client(anvil_node: Anvil, artifacts: dict[str, Artifact]) -> ChainClient:
    client = ChainClient.connect(anvil_node.url)
    client.artifacts = artifacts
    return client


@pytest.fixture(scope="session")
def embedded_client(artifacts: dict[str, Artifact]) -> Iterator[ChainClient]:
    """The embedded chain as the demo runs it without anvil: its JSON-RPC server in a process of its own."""
    node = start_embedded_chain(process=True)
    try:
        client = ChainClient.connect(node.url)
        client.artifacts = artifacts
        yield client
    finally:
        node.stop()


@pytest.fixture(scope="session", params=["anvil", "embedded"])
def chain(request: pytest.FixtureRequest) -> ChainClient:
    client: ChainClient = request.getfixturevalue(f"{request.param}_client")
    return client


@pytest.fixture(scope="session")
def deployer(chain: ChainClient) -> LocalAccount:
    return chain.new_account(10**23)


@pytest.fixture(scope="session")
def math(chain: ChainClient, deployer: LocalAccount) -> MathContract:
    return MathContract.deploy(chain, deployer)


@pytest.fixture(scope="session")
def anvil_math(anvil_client: ChainClient) -> MathContract:
    return MathContract.deploy(anvil_client, anvil_client.new_account(10**22))


@pytest.fixture(scope="session")
def task_contract(chain: ChainClient, deployer: LocalAccount) -> TaskContract:
    return TaskContract.deploy(chain, deployer)
