"""Compile the project's Solidity sources into ABI and bytecode, cached by source hash.

Why this module exists: no native solc can be downloaded on the project's machines, so the compiler is either a
native ``solc`` already on PATH (preferred, it is faster) with the pinned version, or solc-js from the project's npm
dependencies, driven through ``ledger/solcjs_shim.cjs`` which speaks enough of solc's command line for py-solc-x.
Compilation with solc-js takes seconds, so artifacts are cached under ``.cache/solc`` (not committed) keyed by the
hash of every source, the settings and the compiler version: the tests and the devnet recompile only after an edit.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import solcx

REPO_ROOT: Path = Path(__file__).resolve().parent.parent
CONTRACTS_DIR: Path = REPO_ROOT / "contracts"
SHIM: Path = Path(__file__).resolve().parent / "solcjs_shim.cjs"
SOLC_VERSION: str = "0.8.37"
EVM_VERSION: str = "cancun"
"""Cancun rather than the compiler's newer default, so py-evm (the embedded chain) runs the same bytecode."""

SETTINGS: dict[str, Any] = {
    "optimizer": {"enabled": True, "runs": 200},
    "viaIR": True,
    "evmVersion": EVM_VERSION,
    "outputSelection": {
        "*": {"*": ["abi", "evm.bytecode.object", "evm.bytecode.linkReferences", "evm.deployedBytecode.object"]}
    },
}


class CompileError(RuntimeError):
    """The compiler reported errors (the message holds solc's formatted output)."""


@dataclass(frozen=True)
class Artifact:
    """ABI and creation bytecode of one contract; ``libraries`` names the deployed libraries its bytecode calls, with
    the byte offsets of each one's 20-byte address placeholder (see :meth:`linked`)."""

    name: str
    abi: list[dict[str, Any]]
    bytecode: str
    deployed_size: int
    libraries: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def linked(self, addresses: dict[str, str]) -> str:
        """The creation bytecode with every library placeholder replaced by that library's deployed address.

        Why libraries are deployed and linked: ``FGBDTChain`` calls the public functions of ``FGBDTMathLib`` and
        ``FGBDTRulesLib`` by DELEGATECALL instead of inlining them, which keeps its code under EIP-170's 24 KB.
        """
        code = list(self.bytecode.removeprefix("0x"))  # hex text: placeholders are not hex until linked
        for lib, offsets in self.libraries.items():
            if lib not in addresses:
                raise KeyError(f"{self.name} needs library {lib} deployed first")
            address = addresses[lib].removeprefix("0x").lower()
            for start in offsets:
                code[2 * start : 2 * start + 40] = address
        return "0x" + "".join(code)


def cache_dir() -> Path:
    """Where artifacts are cached; ``FGBDT_CACHE_DIR`` overrides the repository's ignored ``.cache``."""
    return Path(os.environ.get("FGBDT_CACHE_DIR", REPO_ROOT / ".cache")) / "solc"


def _version_of(binary: str) -> str | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except OSError:
        return None
    for line in out.splitlines():
        if line.startswith("Version:"):
            return line.split()[1].split("+")[0]
    return None


def find_solc() -> Path:
    """The compiler to use: ``FGBDT_SOLC``, a native ``solc`` of the pinned version, else the solc-js shim."""
    explicit = os.environ.get("FGBDT_SOLC")
    if explicit:
        return Path(explicit)
    native = shutil.which("solc")
    if native and _version_of(native) == SOLC_VERSION:
        return Path(native)
    if not (REPO_ROOT / "node_modules" / "solc").is_dir():
        raise CompileError("no solc found: run `npm ci` at the repository root to install solc-js")
    if os.access(SHIM, os.X_OK):
        return SHIM
    # A checkout that lost the executable bit: py-solc-x needs an executable, so wrap the shim in one.
    wrapper = cache_dir() / "solcjs"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec node "{SHIM}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


NODE_MODULES: Path = REPO_ROOT / "node_modules"
_IMPORT = re.compile(r"""^\s*import\s+(?:[^;]*?\s+from\s+)?["']([^"']+)["']\s*;""", re.MULTILINE)


def _imports(unit: str, text: str) -> list[str]:
    """Source unit names imported by ``text`` (solc's rules: ``./`` and ``../`` are relative to the importing unit,
    anything else is a direct name such as ``@openzeppelin/contracts/...``)."""
    out = []
    for path in _IMPORT.findall(text):
        if path.startswith(("./", "../")):
            path = posixpath.normpath(posixpath.join(posixpath.dirname(unit), path))
        out.append(path)
    return out


def source_files() -> dict[str, str]:
    """Every ``.sol`` file under ``contracts/`` keyed by its repository-relative path (the import namespace), plus
    every library file they import (transitively) from ``node_modules`` (OpenZeppelin), keyed by its import name.

    Why the imports are added as sources rather than through an include path: the standard-JSON input then holds
    every byte compiled, so the artifact cache key (a hash of the input) changes whenever any of them does, and the
    solc-js shim needs no file-system callback.
    """
    sources = {
        p.relative_to(REPO_ROOT).as_posix(): p.read_text(encoding="utf-8") for p in sorted(CONTRACTS_DIR.rglob("*.sol"))
    }
    pending = [imp for unit, text in sources.items() for imp in _imports(unit, text)]
    while pending:
        name = pending.pop()
        if name in sources:
            continue
        path = NODE_MODULES / name
        if not path.is_file():
            raise CompileError(f"cannot resolve Solidity import {name!r}: run `npm ci` at the repository root")
        text = path.read_text(encoding="utf-8")
        sources[name] = text
        pending.extend(_imports(name, text))
    return dict(sorted(sources.items()))


def _input(sources: dict[str, str]) -> dict[str, Any]:
    return {
        "language": "Solidity",
        "sources": {name: {"content": text} for name, text in sources.items()},
        "settings": SETTINGS,
    }


def _solc_errors(exc: solcx.exceptions.SolcError) -> str:
    """solc's formatted error messages, without the full JSON output py-solc-x puts in its message."""
    try:
        out = json.loads(getattr(exc, "stdout_data", "") or "{}")
        msgs = [e.get("formattedMessage", "") for e in out.get("errors", []) if e.get("severity") == "error"]
        if msgs:
            return "\n".join(msgs)
    except ValueError:
        pass
    return str(exc)[:4000]


def compile_all(force: bool = False) -> dict[str, Artifact]:
    """Compile (or load from cache) every contract, keyed by contract name."""
    sources = source_files()
    std_input = _input(sources)
    key = hashlib.sha256(json.dumps([SOLC_VERSION, std_input], sort_keys=True).encode()).hexdigest()
    cached = cache_dir() / f"{key}.json"
    if cached.exists() and not force:
        output = json.loads(cached.read_text())
    else:
        solc = find_solc()
        try:
            output = solcx.compile_standard(std_input, solc_binary=solc, base_path=str(REPO_ROOT))
        except solcx.exceptions.SolcError as exc:
            raise CompileError(_solc_errors(exc)) from exc
        errors = [e for e in output.get("errors", []) if e.get("severity") == "error"]
        if errors:
            raise CompileError("\n".join(e.get("formattedMessage", str(e)) for e in errors))
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        tmp.write_text(json.dumps(output))
        tmp.replace(cached)
    artifacts: dict[str, Artifact] = {}
    for contracts in output["contracts"].values():
        for name, data in contracts.items():
            links = data["evm"]["bytecode"].get("linkReferences", {})
            artifacts[name] = Artifact(
                name=name,
                abi=data["abi"],
                bytecode="0x" + data["evm"]["bytecode"]["object"],
                deployed_size=len(data["evm"]["deployedBytecode"]["object"]) // 2,
                libraries={
                    lib: tuple(ref["start"] for ref in refs) for file in links.values() for lib, refs in file.items()
                },
            )
    return artifacts


def warnings() -> list[str]:
    """Compiler warnings of the current sources (compiles without the cache); for reviews, not for the tests."""
    output = solcx.compile_standard(_input(source_files()), solc_binary=find_solc(), base_path=str(REPO_ROOT))
    return [e.get("formattedMessage", "") for e in output.get("errors", []) if e.get("severity") == "warning"]
