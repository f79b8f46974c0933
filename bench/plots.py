"""The benchmarks' plots: matplotlib on its file backend, and PNGs that are the same bytes for the same results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DPI = 100


def pyplot() -> Any:
    """matplotlib's pyplot on the file backend (the ``plots`` extra: ``pip install 'fgbdt-chain[plots]'``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> None:
    """Write a figure as PNG at a fixed resolution and without metadata (matplotlib would stamp its version): the
    same results give the same bytes, so regenerating the benchmarks page changes no plot whose figures did not."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    pyplot().close(fig)
