"""The quickstarts of README.md and docs/quickstart.md run exactly as written, and do what the text says.

Python groups run in this process, in a temporary working directory; shell groups run as one ``bash`` script with the
virtualenv's ``python`` and ``fgbdt`` first on ``PATH``, in a temporary directory with their own state directory (so
that ``fgbdt devnet up`` starts a fresh chain and its first task is task 1). The one change made to what is written:
``fgbdt devnet up`` gets a free port, so that the test never meets another chain running on this machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from doc_blocks import QUICKSTART, README, Group, groups

from fgbdt_chain import Model
from fgbdt_chain.ledger.devnet.anvil import free_port

TEST_ROWS = 16281
"""Rows of a9a.t, the test file of the shipped a9a copy: one prediction each."""


def _python_checks(out: str, ns: dict[str, Any], cwd: Path) -> None:
    """What both Python quickstarts print and leave behind."""
    model, test = ns["model"], ns["test"]
    assert len(model.contributions) == 3 and sum(c["share"] for c in model.contributions) == pytest.approx(1.0)
    assert re.search(r"test error 0\.1[0-9]{2}", out), out  # a9a: about 0.15, far below the 0.24 of "always 0"
    saved = Model.load(cwd / "a9a.model.json")
    np.testing.assert_array_equal(saved.predict(test.X), model.predict(test.X))
    assert re.search(r"\[\s*(0\.[89]\d*\s*){3}\]", out), out  # three cross-validated AUCs above 0.8


def _shell_checks(out: str, cwd: Path) -> None:
    """What both command-line quickstarts print and leave behind."""
    assert len((cwd / "predictions.csv").read_text().splitlines()) == TEST_ROWS + 1  # the header and one per row
    assert Model.load(cwd / "model.json").trees
    assert re.search(r"task 1 on http://127\.0\.0\.1:\d+: test error 0\.\d+", out), out  # train's summary
    assert re.search(r"^OK: 5 trees, 15 levels", out, flags=re.M), out  # the audit's verdict
    assert "stopped" in out  # devnet down


CHECKS: dict[str, Callable[..., None]] = {
    "README.md:python": _python_checks,
    "README.md:cli": _shell_checks,
    "docs/quickstart.md:python": _python_checks,
    "docs/quickstart.md:cli": _shell_checks,
}
"""Every group the pages mark to run, with what it must do; a group added to a page needs its checks here."""

GROUPS = [g for page in (README, QUICKSTART) for g in groups(page)]


def test_every_marked_group_is_checked() -> None:
    assert sorted(g.id for g in GROUPS) == sorted(CHECKS)


@pytest.mark.slow
@pytest.mark.parametrize("group", [g for g in GROUPS if g.lang == "python"], ids=lambda g: g.id)
def test_python_quickstart_runs(
    group: Group, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "quickstart"}
    for block in group.blocks:
        exec(compile(block, str(group.page), "exec"), namespace)
    CHECKS[group.id](capsys.readouterr().out, namespace, tmp_path)


def _script(group: Group, port: int) -> str:
    code = group.code
    assert code.count("fgbdt devnet up\n") + code.count("fgbdt devnet up ") == 1, "one devnet per quickstart"
    code = re.sub(r"fgbdt devnet up\b", f"fgbdt devnet up --port {port}", code)
    return "set -euo pipefail\n" + code


@pytest.mark.slow
@pytest.mark.chain
@pytest.mark.parametrize("group", [g for g in GROUPS if g.lang == "sh"], ids=lambda g: g.id)
def test_shell_quickstart_runs(group: Group, tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "FGBDT_STATE_DIR": str(tmp_path / "state"),
    }
    env.pop("FGBDT_DEVNET_DIR", None)
    work = tmp_path / "work"
    work.mkdir()
    try:
        done = subprocess.run(
            ["bash", "-c", _script(group, port)], cwd=work, env=env, capture_output=True, text=True, timeout=900
        )
    finally:  # a failed step must not leave anvil running
        subprocess.run(
            [sys.executable, "-m", "fgbdt_chain.deploy.cli", "devnet", "down", "--port", str(port)],
            env=env,
            capture_output=True,
            timeout=120,
        )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    CHECKS[group.id](out, work)
