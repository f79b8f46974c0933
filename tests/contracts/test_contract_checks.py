"""The contract checks (``docs/contract-checks.md``) keep covering what they claim to.

forge runs the guard, invariant and differential tests of ``tests/foundry/`` (``make contract-checks``, part of
``make test``, which runs halmos's symbolic checks too, ``make symbolic``); these tests hold their coverage to the
contracts as they are: every custom error a contract of ours can raise is reached by a guard test or a differential
case, and the differential cases still reach each rule's error (a generator that drifted to always-valid histograms
would pass vacuously).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from fgbdt_chain.ledger.spec.histogram_rules import RULE_ERRORS
from fgbdt_chain.ledger.toolchain.compile import ARTIFACTS_FILE

ROOT = Path(__file__).resolve().parents[2]
FOUNDRY = ROOT / "tests" / "foundry"
OURS = ("FGBDT", "IFGBDTEvents")
NOT_OURS = {
    # OpenZeppelin's ShortStrings, through EIP712's constructor: raised only for a domain name or version of 32
    # bytes or more, and FGBDTChain's are the constants "FGBDTChain" and "1"
    "InvalidShortString",
    "StringTooLong",
}
"""Errors in our contracts' ABIs that no call can raise."""


def _errors() -> dict[str, set[str]]:
    """Each custom error in the ABIs of our contracts and libraries (not the test harnesses, not the forwarder, which
    is OpenZeppelin's unchanged), with the contracts that declare it."""
    doc = json.loads(ARTIFACTS_FILE.read_text())
    out: dict[str, set[str]] = {}
    for name, contract in doc["contracts"].items():
        if not name.startswith(OURS) or name == "FGBDTForwarder":
            continue
        for item in contract["abi"]:
            if item["type"] == "error":
                out.setdefault(item["name"], set()).add(name)
    return out


def _case_counts(kind: str, count: int) -> dict[str, int]:
    """What the differential cases of ``kind`` expect, as the generator counts them (its stderr line)."""
    run = subprocess.run(
        [sys.executable, str(FOUNDRY / "reference_vectors.py"), kind, str(count), "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert run.stdout.startswith("0x") and len(run.stdout) > 2 + 64 * count
    counts = dict(re.findall(r"([\w ]+?: \w+) (\d+)", run.stderr.split(" cases, ", 1)[1]))
    return {key.split(": ", 1)[1]: int(n) for key, n in counts.items()}


def test_every_custom_error_is_reached_by_a_check() -> None:
    errors = _errors()
    assert {"UnknownTask", "InvalidConfig", "CandidateTotalsMismatch", "HistogramMismatch"} <= set(errors)
    assert set(errors) >= RULE_ERRORS, f"histogram rules no contract error stands for: {RULE_ERRORS - set(errors)}"
    sources = "\n".join(p.read_text() for p in sorted(FOUNDRY.glob("*.sol")))
    generator = (FOUNDRY / "reference_vectors.py").read_text()
    rules = _case_counts("rules", 3000)
    named = {
        name
        for name in errors
        if re.search(rf"\b{name}\.selector\b", sources) or f'error("{name}(' in generator or rules.get(name, 0) > 0
    }
    missing = set(errors) - named - NOT_OURS
    assert not missing, f"custom errors no guard test or differential case reaches: {sorted(missing)}"


def test_the_differential_cases_reach_every_outcome() -> None:
    rules = _case_counts("rules", 3000)
    # InheritedTotalsMismatch needs a level's earlier state: the guard and invariant tests reach it
    for name in (*sorted(RULE_ERRORS - {"InheritedTotalsMismatch"}), "overflow", "value"):
        assert rules.get(name, 0) > 0, f"no rules case expects {name}: {rules}"
    shapley = _case_counts("shapley", 400)
    for name in ("value", "overflow", "ShapleyLengthMismatch", "TooManyShapleyParties"):
        assert shapley.get(name, 0) > 0, f"no Shapley case expects {name}: {shapley}"
    split = _case_counts("split", 400)
    for name in ("value", "leaf", "overflow", "BadHistogramShape"):
        assert split.get(name, 0) > 0, f"no best-split case expects {name}: {split}"
