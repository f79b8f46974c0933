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
import importlib.util
import os
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("fgbdt-chain")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

if importlib.util.find_spec("sha3") is not None:
    # keccak256 by safe-pysha3 (a dependency) instead of eth-hash's first choice, pycryptodome: the same hashes at a
    # sixth of the cost per call (0.5 against 3.4 us for 64 bytes, measured), and a party node hashes thousands of
    # small blocks per tree (node hashes, Merkle trees, transactions, addresses). ETH_HASH_BACKEND is eth-hash's own
    # switch, read at its first hash; a choice already made in the environment stands
    os.environ.setdefault("ETH_HASH_BACKEND", "pysha3")

if TYPE_CHECKING:
    from fgbdt_chain.node.engine import train
    from fgbdt_chain.node.model import Model
    from fgbdt_chain.node.sklearn import FGBDTClassifier, FGBDTRegressor

_LAZY = {
    "train": "fgbdt_chain.node.engine",
    "Model": "fgbdt_chain.node.model",
    "FGBDTClassifier": "fgbdt_chain.node.sklearn",
    "FGBDTRegressor": "fgbdt_chain.node.sklearn",
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
