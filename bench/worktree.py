"""An earlier commit checked out beside this one, for benchmarks that measure a change against the code before it.

The machine's speed drifts by 10-20% within an hour here, so a change is measured in the same session as the code
before it, runs interleaved (``bench.chain_ab``, ``bench.simulate_ab``). The earlier commit goes into a temporary git
worktree, with this checkout's ``node_modules`` and the data sets directory beside it linked in; each run is a process
started in the tree it measures, whose working directory puts that tree's ``fgbdt_chain`` first on the import path.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def short_commit(rev: str) -> str:
    """``git rev-parse --short`` of ``rev`` in this checkout (an error names a revision git does not know)."""
    return subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


@contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """A worktree of ``rev``, removed on the way out."""
    with tempfile.TemporaryDirectory(prefix="fgbdt-ab-") as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=ROOT, check=True)
        try:
            if (ROOT / "node_modules").exists():
                (tree / "node_modules").symlink_to(ROOT / "node_modules")
            if (ROOT.parent / "shared").exists():  # the data sets directory, where bench.datasets looks by default
                (tree.parent / "shared").symlink_to(ROOT.parent / "shared")
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
