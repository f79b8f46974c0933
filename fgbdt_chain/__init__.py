"""FGBDT-Chain: fair, auditable federated gradient boosting.

The package maps the project's top-level folders: ``fgbdt_chain.node`` (the parties' side), ``fgbdt_chain.ledger``
(the chain's side and the contract math), ``fgbdt_chain.api`` (the REST API) and ``fgbdt_chain.deploy`` (the command
line, the devnet, the demo); the Solidity sources and their compiled artifacts ship in ``fgbdt_chain/contracts``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fgbdt-chain")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
