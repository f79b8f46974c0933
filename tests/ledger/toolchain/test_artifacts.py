"""The shipped contract artifacts: what an installed package deploys without a compiler must be what the sources
compile to, and an edited contract must never be served from the stale file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fgbdt_chain.ledger.toolchain import compile as compiler
from fgbdt_chain.ledger.toolchain.compile import ARTIFACTS_FILE, compile_all, load_artifacts, shipped_artifacts


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FGBDT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_shipped_artifacts_equal_a_fresh_compile(own_cache: Path) -> None:
    shipped = shipped_artifacts()
    assert shipped is not None, "contracts/ changed since the artifacts were written: run `make artifacts`"
    fresh = compile_all(force=True)
    assert set(shipped) <= set(fresh)
    for name, artifact in shipped.items():
        assert artifact == fresh[name], name
    assert {"FGBDTChain", "FGBDTMathLib", "FGBDTRulesLib", "FGBDTForwarder", "FGBDTMath"} <= set(shipped)
    # EIP-170: every contract and library deployable on any chain
    assert all(a.deployed_size <= 24_576 for a in shipped.values())
    assert {"FGBDTResolveLib", "FGBDTPayoutLib", "FGBDTEndorseLib"} <= set(shipped["FGBDTChain"].libraries)
    # the compile was cached: the same input is not compiled twice
    assert len(list(own_cache.glob("solc/*.json"))) == 1
    assert compile_all() == fresh


def test_load_prefers_the_shipped_file_and_refuses_a_stale_one(tmp_path: Path) -> None:
    assert load_artifacts() == shipped_artifacts()
    doc = json.loads(ARTIFACTS_FILE.read_text())
    unit = next(u for u in doc["sources"] if u.startswith("contracts/"))
    doc["sources"][unit] = "0" * 64  # as if the contract had been edited after the file was written
    stale = tmp_path / "contracts.json"
    stale.write_text(json.dumps(doc))
    assert shipped_artifacts(stale) is None
    doc = json.loads(ARTIFACTS_FILE.read_text())
    doc["solc_version"] = "0.8.0"
    stale.write_text(json.dumps(doc))
    assert shipped_artifacts(stale) is None
    assert shipped_artifacts(tmp_path / "missing.json") is None


def test_check_command_reports_the_state(capsys: pytest.CaptureFixture[str]) -> None:
    assert compiler.main(["--check"]) == 0
    assert "match" in capsys.readouterr().out
