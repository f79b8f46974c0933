"""The README's first command, `fgbdt demo`, end to end on a small setting: devnet, API, party processes, audit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fgbdt_chain.ledger.devnet.anvil import Anvil

pytestmark = [pytest.mark.chain, pytest.mark.slow]


def test_the_demo_runs_end_to_end_and_stops_what_it_started(anvil_node: Anvil, tmp_path: Path) -> None:
    """The demo glues every part (task creation through the API, party processes, rewards, audit); a break in the
    glue that no unit test sees (a request the API refuses, say) shows here. ``anvil_node`` only makes sure anvil is
    installed: the demo starts its own devnet."""
    out = subprocess.run(
        [sys.executable, "-m", "fgbdt_chain.deploy.cli", "demo", "--parties", "2", "--trees", "2", "--depth", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    text = " ".join((out.stdout + out.stderr).split())  # rich wraps lines
    assert out.returncode == 0, text[-2000:]
    assert "task 1 created through the API" in text and "trained on chain" in text
    assert "(replayed from the chain with the Python reference): OK" in text
    assert "everything it started is stopped" in text
