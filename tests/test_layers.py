"""The package's layers hold: no module imports from a higher layer than its own.

The layers are stated once, as the import-linter contract in pyproject.toml (``[tool.importlinter]``), and
``lint-imports`` checks every import of the package against it, those inside functions included; only imports under
``if TYPE_CHECKING:`` are left out (they load nothing at run time).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fgbdt_chain

ROOT = Path(__file__).resolve().parents[1]

NOT_CODE = frozenset({"ledger.artifacts"})
"""Subpackages that hold data, not modules (the compiled contracts' artifacts)."""


def _layers() -> list[str]:
    """Every part the layers contract names, high to low."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    assert config["root_package"] == "fgbdt_chain" and contract["containers"] == ["fgbdt_chain"]
    return [part.strip() for layer in contract["layers"] for part in layer.split("|")]


def test_no_module_imports_from_a_higher_layer() -> None:
    lint = Path(sys.executable).with_name("lint-imports")  # the dev extra installs it next to the interpreter
    run = subprocess.run(
        [str(lint), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report
    assert "0 broken" in report, report


def test_every_subpackage_is_in_a_layer() -> None:
    """A part the contract does not name is not checked at all: each subpackage of node and ledger, and api and
    deploy, is in exactly one layer."""
    parts = _layers()
    packages = {"api", "deploy"} | {
        f"{top}.{p.name}" for top in ("node", "ledger") for p in (ROOT / top).iterdir() if (p / "__init__.py").exists()
    }
    assert sorted(parts) == sorted(packages - NOT_CODE)


@pytest.mark.parametrize("name", fgbdt_chain.__all__)
def test_the_package_names_still_resolve(name: str) -> None:
    """``fgbdt_chain``'s public names (``train``, ``Model``, the scikit-learn estimators, imported on first use)
    are found where its lazy table says."""
    value = getattr(fgbdt_chain, name)
    if name != "__version__":
        module = importlib.import_module(fgbdt_chain._LAZY[name])
        assert value is getattr(module, name) and value.__name__ == name
