"""Progress where nobody watches a terminal, and the demo's shape where no anvil is found."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
from rich.console import Console

from fgbdt_chain.deploy.cmd_simulate import TRAIN_DEPTH, TRAIN_TREES
from fgbdt_chain.deploy.cmd_train import on_chain_progress
from fgbdt_chain.deploy.demo import EMBEDDED_SHAPE, chain_kind, demo_shape
from fgbdt_chain.ledger.spec.train_params import TrainParams


def _info(tree: int, level: int, status: str = "TRAINING") -> dict[str, object]:
    return {"tree": tree, "level": level, "txs": 10 * tree + level, "gas": 5_000_000, "status": status}


def test_progress_is_plain_lines_when_the_output_is_not_a_terminal() -> None:
    """A log or a pipe gets a line at each new tree and at the end (a bar would print nothing until the end), not
    one per level."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with on_chain_progress(console, TrainParams(trees=3, depth=2)) as progress:
        for tree in range(3):
            for level in range(2):
                progress(_info(tree, level))
        progress(_info(2, 1, "COMPLETED"))
    lines = out.getvalue().splitlines()
    assert lines == [
        "training on chain: tree 1/3 level 1/2, 0/6 levels, 0 txs, 5M gas, 0 s",
        "training on chain: tree 2/3 level 1/2, 2/6 levels, 10 txs, 5M gas, 0 s",
        "training on chain: tree 3/3 level 1/2, 4/6 levels, 20 txs, 5M gas, 0 s",
        "training on chain: done, 6/6 levels, 21 txs, 5M gas, 0 s",
    ]


def test_progress_is_silent_when_quiet() -> None:
    out = io.StringIO()
    with on_chain_progress(Console(file=out, force_terminal=False), TrainParams(trees=1), disable=True) as progress:
        progress(_info(0, 0))
    assert out.getvalue() == ""


def test_the_demo_shrinks_on_the_embedded_chain_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without anvil the demo runs ``EMBEDDED_SHAPE`` (fgbdt train's shape takes about 18 minutes there), and says
    so; a shape given on the command line is kept."""
    no_anvil = tmp_path / "anvil"
    no_anvil.write_text("")  # not executable: FGBDT_ANVIL names no usable binary
    monkeypatch.setenv("FGBDT_ANVIL", str(no_anvil))
    kind, why = chain_kind("auto")
    assert kind == "embedded" and "not an executable" in why
    assert demo_shape(argparse.Namespace(trees=None, depth=None), kind) == EMBEDDED_SHAPE
    assert demo_shape(argparse.Namespace(trees=7, depth=None), kind) == (7, EMBEDDED_SHAPE[1])
    assert demo_shape(argparse.Namespace(trees=None, depth=None), "anvil") == (TRAIN_TREES, TRAIN_DEPTH)
    assert EMBEDDED_SHAPE[0] * EMBEDDED_SHAPE[1] < TRAIN_TREES * TRAIN_DEPTH
