"""Where FGBDT-Chain finds its own files and where it writes: the one module that knows.

Why one module: the package runs from a clone (``make``), from an editable install and from a wheel in
site-packages. Files it ships (contracts, compiled artifacts, the solc shim, the demo data) are found relative to the
package; files it writes (compiler cache, devnet state, keys) never go inside the package, which may be read-only and
is replaced by every upgrade, but in the user's cache and state directories (XDG), each overridable by an
environment variable. External tools (solc-js, OpenZeppelin, anvil) come from a ``node_modules`` folder: the clone's,
the working directory's, or one named by ``FGBDT_NODE_MODULES``.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_ROOT: Path = Path(__file__).resolve().parents[2]
"""The folder holding ``contracts/``, ``ledger/``, ``node/``...: the clone's root (the ``fgbdt_chain/<name>`` entries
are symlinks, resolved here) or ``site-packages/fgbdt_chain`` in a wheel install."""

CONTRACTS_DIR: Path = PACKAGE_ROOT / "contracts"
LEDGER_DIR: Path = PACKAGE_ROOT / "ledger"
APP_NAME = "fgbdt-chain"


def _xdg(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable)
    return Path(value) if value and os.path.isabs(value) else Path.home() / fallback


def cache_dir() -> Path:
    """Rebuildable files (compiled artifacts of edited contracts, wrappers): ``$FGBDT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/fgbdt-chain`` (``~/.cache/fgbdt-chain``)."""
    explicit = os.environ.get("FGBDT_CACHE_DIR")
    return Path(explicit) if explicit else _xdg("XDG_CACHE_HOME", ".cache") / APP_NAME


def state_dir() -> Path:
    """Files worth keeping between sessions (devnet chain state, deployment files, the relayer's key):
    ``$FGBDT_STATE_DIR``, else ``$XDG_STATE_HOME/fgbdt-chain`` (``~/.local/state/fgbdt-chain``)."""
    explicit = os.environ.get("FGBDT_STATE_DIR")
    return Path(explicit) if explicit else _xdg("XDG_STATE_HOME", ".local/state") / APP_NAME


def node_modules_dirs() -> list[Path]:
    """Existing ``node_modules`` folders to look in, first match wins: ``$FGBDT_NODE_MODULES``, the clone's (next
    to ``package.json``), the working directory's."""
    candidates = [os.environ.get("FGBDT_NODE_MODULES"), PACKAGE_ROOT / "node_modules", Path.cwd() / "node_modules"]
    out: list[Path] = []
    for c in candidates:
        if c and Path(c).is_dir() and Path(c).resolve() not in out:
            out.append(Path(c).resolve())
    return out


def npm_hint() -> str:
    """What to run to get the npm toolchain, for error messages: in a clone, ``npm ci`` there; else ``npm install``
    of the pinned packages in the working directory."""
    if (PACKAGE_ROOT / "package.json").is_file():
        return f"run `npm ci` in {PACKAGE_ROOT}"
    return "run `npm install @foundry-rs/anvil@1.7.1 solc@0.8.37 @openzeppelin/contracts@5.7.0` in this directory"
