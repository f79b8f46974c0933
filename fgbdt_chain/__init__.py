"""FGBDT-Chain: fair, auditable federated gradient boosting.

The Python API, in LightGBM's shape: ``train(params, parties=[(X0, y0), (X1, y1), ...])`` returns a :class:`Model`
(``predict``, ``save``/``load``, ``contributions``), and ``FGBDTClassifier``/``FGBDTRegressor`` are scikit-learn
estimators. They are imported on first use (``__getattr__`` below): the engine pulls in numba and scikit-learn,
about two seconds, which ``fgbdt --version`` and ``import fgbdt_chain`` should not pay.

The package maps the project's top-level folders: ``fgbdt_chain.node`` (the parties' side), ``fgbdt_chain.ledger``
(the chain's side and the contract math), ``fgbdt_chain.api`` (the REST API) and ``fgbdt_chain.deploy`` (the command
line, the devnet, the demo); the Solidity sources and their compiled artifacts ship in ``fgbdt_chain/contracts``.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("fgbdt-chain")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

_KECCAK_OF_NOTHING = bytes.fromhex("c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")


def _fast_keccak() -> None:
    """keccak256 by safe-pysha3 (a dependency) instead of eth-hash's first choice, pycryptodome: the same hashes at a
    sixth of the cost per call (0.5 against 3.4 us for 64 bytes, measured), and a party node hashes thousands of small
    blocks per tree (node hashes, Merkle trees, transactions, addresses).

    Swapped in this process only, on eth-hash's shared ``keccak`` (which eth-utils, eth-account and web3 call), after
    checking one digest: the ``ETH_HASH_BACKEND`` variable would also reach every subprocess, and names a backend
    whether or not it works there. A backend the environment names stands; without safe-pysha3 nothing changes."""
    if os.environ.get("ETH_HASH_BACKEND"):
        return
    try:
        from eth_hash.auto import keccak
        from eth_hash.backends import pysha3

        if pysha3.keccak256(b"") != _KECCAK_OF_NOTHING:
            return
    except Exception:  # not installed, or a module of that name that is not it: pycryptodome serves as before
        return
    # the same positional call; eth-hash's annotations name the argument differently
    keccak.hasher = pysha3.backend.keccak256  # type: ignore[assignment]
    keccak.preimage = pysha3.backend.preimage  # type: ignore[assignment]


_fast_keccak()

if TYPE_CHECKING:
    from fgbdt_chain.node.model.trees import Model
    from fgbdt_chain.node.sim.engine import train
    from fgbdt_chain.node.sim.sklearn import FGBDTClassifier, FGBDTRegressor

_LAZY = {
    "train": "fgbdt_chain.node.sim.engine",
    "Model": "fgbdt_chain.node.model.trees",
    "FGBDTClassifier": "fgbdt_chain.node.sim.sklearn",
    "FGBDTRegressor": "fgbdt_chain.node.sim.sklearn",
}
"""Public name -> the module that defines it, imported when the name is first read."""

__all__ = ["FGBDTClassifier", "FGBDTRegressor", "Model", "__version__", "train"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fgbdt_chain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
