"""The shipped contract artifacts: what an installed package deploys without a compiler must be what the sources
compile to, and an edited contract must never be served from the stale file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fgbdt_chain.ledger.toolchain import compile as compiler
from fgbdt_chain.ledger.toolchain.compile import (
    ARTIFACTS_FILE,
    BEFORE_CANCUN,
    EVM_VERSION,
    EVM_VERSIONS,
    compile_all,
    load_artifacts,
    shipped_artifacts,
)

METADATA = bytes.fromhex("a264697066735822")
"""The start of solc's CBOR metadata (``{"ipfs": <34 bytes>, "solc": <3 bytes>}``, 51 bytes and its 2-byte length):
data, not code, inside both creation and runtime bytecode."""


def opcodes(bytecode: str) -> set[int]:
    """The opcodes of ``bytecode`` (library placeholders zeroed), push data and metadata skipped."""
    text = bytecode.removeprefix("0x")
    while "__$" in text:  # a library placeholder: 40 hex characters
        start = text.index("__$")
        text = text[:start] + "0" * 40 + text[start + 40 :]
    code = bytes.fromhex(text)
    seen, i = set(), 0
    while i < len(code):
        if code.startswith(METADATA, i):
            i += 53
            continue
        op = code[i]
        seen.add(op)
        i += 1 + (op - 0x5F if 0x60 <= op <= 0x7F else 0)
    return seen


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


def test_every_other_evm_build_is_shipped_as_it_compiles_and_runs_on_its_fork(own_cache: Path) -> None:
    """The bytecode for chains without Cancun (ganache, an older consortium fork): shipped, equal to a fresh
    compile, with the ABI of the main build, and without MCOPY (0x5e), which such a chain cannot run; the Cancun
    build has it (the compiler copies memory with it), which is why the other build exists."""
    main = shipped_artifacts()
    assert main is not None and any(0x5E in opcodes(a.bytecode) for a in main.values())
    for version in EVM_VERSIONS:
        if version == EVM_VERSION:
            continue
        shipped = shipped_artifacts(evm_version=version)
        assert shipped is not None, f"no current {version} build: run `make artifacts`"
        fresh = compile_all(force=True, evm_version=version)
        assert set(shipped) == set(main) and set(shipped) <= set(fresh)
        for name, artifact in shipped.items():
            assert artifact == fresh[name] and artifact.abi == main[name].abi, (version, name)
            assert artifact.deployed_size <= 24_576, (version, name)
            if version in BEFORE_CANCUN:
                assert 0x5E not in opcodes(artifact.bytecode), (version, name)
        assert load_artifacts(version) == shipped


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
