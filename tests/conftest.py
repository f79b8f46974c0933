"""Fixtures shared by the contract, API and end-to-end suites: the compiled contracts and one anvil per session.

A missing anvil fails the session instead of skipping: the suites must not silently test less.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from fgbdt_chain.ledger.devnet.anvil import Anvil, start_anvil
from fgbdt_chain.ledger.toolchain.compile import Artifact, load_artifacts


@pytest.fixture(autouse=True, scope="session")
def _own_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Devnet registries, keys and caches of the tests stay out of the user's own state and cache directories."""
    saved = {k: os.environ.get(k) for k in ("FGBDT_STATE_DIR", "FGBDT_CACHE_DIR")}
    os.environ["FGBDT_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
    os.environ["FGBDT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def artifacts() -> dict[str, Artifact]:
    return load_artifacts()


@pytest.fixture(scope="session")
def anvil_node() -> Iterator[Anvil]:
    node = start_anvil()
    try:
        yield node
    finally:
        node.stop()
