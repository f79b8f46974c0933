"""Fixtures shared by the contract, API and end-to-end suites: the compiled contracts and one anvil per session.

A missing anvil fails the session instead of skipping: the suites must not silently test less.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fgbdt_chain.ledger.anvil import Anvil, start_anvil
from fgbdt_chain.ledger.compile import Artifact, compile_all


@pytest.fixture(scope="session")
def artifacts() -> dict[str, Artifact]:
    return compile_all()


@pytest.fixture(scope="session")
def anvil_node() -> Iterator[Anvil]:
    node = start_anvil()
    try:
        yield node
    finally:
        node.stop()
