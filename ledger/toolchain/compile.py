"""The contracts' ABI and bytecode: shipped with the package, compiled only when the sources changed.

Why shipped artifacts: an installed package must run on machines without Node.js, and compiling with solc-js takes
half a minute. ``ledger/artifacts/contracts.json`` holds every contract of ``contracts/`` as compiled from the
sources in the package (with the compiler version, the settings and the hash of every source unit, OpenZeppelin's
included); :func:`load_artifacts` uses it whenever the project's sources on disk hash to what it records, and a test
compiles afresh and checks that the file equals the result. ``python -m fgbdt_chain.ledger.toolchain.compile --write``
(``make artifacts``) regenerates it after a contract edit. Chains whose EVM predates Cancun get another build of the
same sources (``EVM_VERSIONS``; ``contracts-shanghai.json``, bytecode only), which ``fgbdt deploy`` picks by probing
the chain.

Compiling needs either a native ``solc`` of the pinned version on PATH or solc-js from npm, driven through
``ledger/solcjs_shim.cjs`` which speaks enough of solc's command line for py-solc-x; edited sources are compiled once
and cached in the user's cache directory (``ledger.toolchain.paths``), keyed by the hash of every source, the settings
and the compiler version.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fgbdt_chain.ledger.toolchain import paths
from fgbdt_chain.ledger.toolchain.paths import CONTRACTS_DIR, PACKAGE_ROOT

SHIM: Path = paths.LEDGER_DIR / "solcjs_shim.cjs"
ARTIFACTS_FILE: Path = paths.LEDGER_DIR / "artifacts" / "contracts.json"
ARTIFACTS_FORMAT = "fgbdt-artifacts/1"

if TYPE_CHECKING:
    import solcx
SOLC_VERSION: str = "0.8.37"
EVM_VERSION: str = "cancun"
"""Cancun rather than the compiler's newer default, so py-evm (the embedded chain) runs the same bytecode."""
EVM_VERSIONS: tuple[str, ...] = (EVM_VERSION, "shanghai")
"""The EVM versions the package ships bytecode for, newest first: ``fgbdt deploy`` probes a chain
(``ledger.rpc.evm_probe``) and deploys the newest it runs. Shanghai for the chains without Cancun's MCOPY (ganache
7.9, consortium networks on an older fork); the ABI is the same for all."""

SETTINGS: dict[str, Any] = {
    # runs 60, not solc's 200: FGBDTChain must stay under EIP-170's 24,576 bytes, and of the values measured (1, 30,
    # 60, 70-80, 100, 200) 60 gives the smallest code: 24,119 bytes; 70-100 about 60 bytes more, 1 and 30 about 470
    # more, 200 over the limit
    "optimizer": {"enabled": True, "runs": 60},
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
    """Where compiled artifacts of edited sources are cached (``ledger.toolchain.paths.cache_dir``)."""
    return paths.cache_dir() / "solc"


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
    homes = [d for d in paths.node_modules_dirs() if (d / "solc").is_dir()]
    if not homes:
        raise CompileError(f"no Solidity compiler: install solc {SOLC_VERSION} on PATH, or solc-js: {paths.npm_hint()}")
    if os.access(SHIM, os.X_OK) and homes[0] == (PACKAGE_ROOT / "node_modules").resolve():
        return SHIM
    # py-solc-x needs an executable: wrap the shim (a checkout that lost the executable bit, an installed package
    # whose shim is not executable, or solc-js in another node_modules, which FGBDT_NODE_ROOT points the shim at)
    wrapper = cache_dir() / "solcjs"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nFGBDT_NODE_ROOT="{homes[0].parent}" exec node "{SHIM}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


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
    sources = project_sources()
    pending = [imp for unit, text in sources.items() for imp in _imports(unit, text)]
    while pending:
        name = pending.pop()
        if name in sources:
            continue
        found = [d / name for d in paths.node_modules_dirs() if (d / name).is_file()]
        if not found:
            raise CompileError(f"cannot resolve Solidity import {name!r}: {paths.npm_hint()}")
        text = found[0].read_text(encoding="utf-8")
        sources[name] = text
        pending.extend(_imports(name, text))
    return dict(sorted(sources.items()))


def project_sources() -> dict[str, str]:
    """The project's own ``.sol`` files, keyed ``contracts/...`` (their import names)."""
    return {
        "contracts/" + p.relative_to(CONTRACTS_DIR).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(CONTRACTS_DIR.rglob("*.sol"))
    }


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def settings_for(evm_version: str = EVM_VERSION) -> dict[str, Any]:
    """The compiler settings of one EVM version (``SETTINGS`` with its ``evmVersion``)."""
    if evm_version not in EVM_VERSIONS:
        raise ValueError(f"no bytecode is built for EVM {evm_version!r} (known: {', '.join(EVM_VERSIONS)})")
    return {**SETTINGS, "evmVersion": evm_version}


MCOPY_CALL = re.compile(r"\bmcopy\(")
WORD_COPY = (
    "function fgbdt_copy(d_, s_, n_) { switch lt(s_, d_) "
    "case 0 { for { let k_ := 0 } lt(k_, n_) { k_ := add(k_, 1) } "
    "{ mstore8(add(d_, k_), byte(0, mload(add(s_, k_)))) } } "
    "default { for { let k_ := n_ } gt(k_, 0) { } "
    "{ k_ := sub(k_, 1) mstore8(add(d_, k_), byte(0, mload(add(s_, k_)))) } } "
    "} fgbdt_copy("
)
"""A byte-wise memory move (backwards where the source lies below the destination, so that overlapping areas move
as MCOPY moves them), defined in place of each inline-assembly ``mcopy(`` call."""
BEFORE_CANCUN = frozenset({"shanghai", "paris", "london", "berlin"})


def sources_for(sources: dict[str, str], evm_version: str) -> dict[str, str]:
    """The sources compiled for ``evm_version``: as they are, except before Cancun, where OpenZeppelin's inline
    assembly calls to ``mcopy`` (``utils/Bytes.sol``, imported through ``Strings`` by ``EIP712``; solc refuses them for
    an older EVM) become a Yul function that moves the same bytes one at a time. None of the project's contracts calls
    those ``Bytes`` functions (``test_artifacts`` checks that no bytecode of such a version holds MCOPY); the project's
    own sources are never rewritten."""
    if evm_version not in BEFORE_CANCUN:
        return sources
    return {
        unit: text if unit.startswith("contracts/") else MCOPY_CALL.sub(WORD_COPY, text)
        for unit, text in sources.items()
    }


def _input(sources: dict[str, str], evm_version: str = EVM_VERSION) -> dict[str, Any]:
    return {
        "language": "Solidity",
        "sources": {name: {"content": text} for name, text in sources_for(sources, evm_version).items()},
        "settings": settings_for(evm_version),
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


def _compile_output(std_input: dict[str, Any]) -> dict[str, Any]:
    import solcx  # only when compiling: the shipped artifacts need no compiler

    try:
        output: dict[str, Any] = solcx.compile_standard(std_input, solc_binary=find_solc(), base_path=str(PACKAGE_ROOT))
    except solcx.exceptions.SolcError as exc:
        raise CompileError(_solc_errors(exc)) from exc
    errors = [e for e in output.get("errors", []) if e.get("severity") == "error"]
    if errors:
        raise CompileError("\n".join(e.get("formattedMessage", str(e)) for e in errors))
    return output


def _artifacts_of(output: dict[str, Any]) -> dict[str, Artifact]:
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


def compile_all(force: bool = False, evm_version: str = EVM_VERSION) -> dict[str, Artifact]:
    """Compile every contract for ``evm_version`` (or take the user cache's compile of the same input), keyed by
    contract name; needs a compiler and OpenZeppelin's sources. ``force`` compiles even when cached."""
    std_input = _input(source_files(), evm_version)
    key = hashlib.sha256(json.dumps([SOLC_VERSION, std_input], sort_keys=True).encode()).hexdigest()
    cached = cache_dir() / f"{key}.json"
    if cached.exists() and not force:
        output = json.loads(cached.read_text())
    else:
        output = _compile_output(std_input)
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(output))
        tmp.replace(cached)
    return _artifacts_of(output)


def artifacts_file(evm_version: str = EVM_VERSION) -> Path:
    """The shipped file of one EVM version's contracts: ``contracts.json`` for ``EVM_VERSION`` (ABI and bytecode),
    ``contracts-<version>.json`` for another (bytecode only: the ABI does not depend on the EVM version)."""
    return ARTIFACTS_FILE if evm_version == EVM_VERSION else ARTIFACTS_FILE.with_name(f"contracts-{evm_version}.json")


def shipped_document(sources: dict[str, str], output: dict[str, Any], evm_version: str = EVM_VERSION) -> dict[str, Any]:
    """The shipped file's content: the compiler, settings, the hash of every source unit and the project's
    contracts (OpenZeppelin's own compile outputs, unused at run time, are left out); without the ABI for another
    version than ``EVM_VERSION``."""
    artifacts = _artifacts_of(output)
    own = {
        name for unit, contracts in output["contracts"].items() if unit.startswith("contracts/") for name in contracts
    }
    with_abi = evm_version == EVM_VERSION
    return {
        "format": ARTIFACTS_FORMAT,
        "solc_version": SOLC_VERSION,
        "settings": settings_for(evm_version),
        "sources": {unit: _sha256(text) for unit, text in sources.items()},
        "contracts": {
            name: {
                **({"abi": a.abi} if with_abi else {}),
                "bytecode": a.bytecode,
                "deployed_size": a.deployed_size,
                "libraries": {lib: list(offsets) for lib, offsets in a.libraries.items()},
            }
            for name, a in sorted(artifacts.items())
            if name in own
        },
    }


def write_artifacts(path: Path | None = None, evm_version: str = EVM_VERSION) -> Path:
    """Compile afresh and write the shipped artifacts file of ``evm_version`` (``make artifacts`` writes every
    version's)."""
    path = path or artifacts_file(evm_version)
    sources = source_files()
    output = _compile_output(_input(sources, evm_version))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    document = shipped_document(sources_for(sources, evm_version), output, evm_version)
    tmp.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def shipped_artifacts(path: Path | None = None, evm_version: str = EVM_VERSION) -> dict[str, Artifact] | None:
    """The shipped artifacts of ``evm_version`` when they were compiled from the project's sources as they are on
    disk, else None (an edited contract; or no shipped file). Another version's bytecode takes its ABI from the
    ``EVM_VERSION`` file, which must be current too."""
    path = path or artifacts_file(evm_version)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if (
        doc.get("format") != ARTIFACTS_FORMAT
        or doc.get("solc_version") != SOLC_VERSION
        or doc.get("settings") != settings_for(evm_version)
    ):
        return None
    recorded = {unit: h for unit, h in doc["sources"].items() if unit.startswith("contracts/")}
    if recorded != {unit: _sha256(text) for unit, text in project_sources().items()}:
        return None
    abis: dict[str, list[dict[str, Any]]] = {}
    if evm_version != EVM_VERSION:
        main = shipped_artifacts()
        if main is None:
            return None
        abis = {name: a.abi for name, a in main.items()}
    return {
        name: Artifact(
            name=name,
            abi=c["abi"] if "abi" in c else abis.get(name, []),
            bytecode=c["bytecode"],
            deployed_size=c["deployed_size"],
            libraries={lib: tuple(offsets) for lib, offsets in c["libraries"].items()},
        )
        for name, c in doc["contracts"].items()
    }


def load_artifacts(evm_version: str = EVM_VERSION) -> dict[str, Artifact]:
    """The contracts to deploy on a chain of ``evm_version``: the shipped artifacts, or a compile of edited sources
    (module docstring)."""
    shipped = shipped_artifacts(evm_version=evm_version)
    if shipped is not None:
        return shipped
    try:
        return compile_all(evm_version=evm_version)
    except CompileError as exc:
        raise CompileError(
            f"the contracts in {CONTRACTS_DIR} differ from the shipped artifacts and cannot be compiled here: {exc}"
        ) from exc


def warnings() -> list[str]:
    """Compiler warnings of the current sources (compiles without the cache); for reviews, not for the tests."""
    import solcx

    output = solcx.compile_standard(_input(source_files()), solc_binary=find_solc(), base_path=str(PACKAGE_ROOT))
    return [e.get("formattedMessage", "") for e in output.get("errors", []) if e.get("severity") == "warning"]


def main(argv: list[str] | None = None) -> int:
    """``python -m fgbdt_chain.ledger.toolchain.compile [--write | --check]``."""
    ap = argparse.ArgumentParser(description="Compile the contracts; write or check the shipped artifacts file.")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--write", action="store_true", help=f"compile afresh and write the files in {ARTIFACTS_FILE.parent}"
    )
    group.add_argument("--check", action="store_true", help="exit 1 unless the shipped files match the sources")
    args = ap.parse_args(argv)
    if args.write:
        for evm_version in EVM_VERSIONS:
            print(write_artifacts(evm_version=evm_version))
        return 0
    stale = [v for v in EVM_VERSIONS if shipped_artifacts(evm_version=v) is None]
    print(
        f"shipped artifacts are stale ({', '.join(stale)}): run `make artifacts`"
        if stale
        else "shipped artifacts match the sources"
    )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
