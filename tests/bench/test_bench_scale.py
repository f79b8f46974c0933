"""The scale benchmark's two modes compute the same histograms on every level (what its run checks at scale)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench import scale


def test_parquet_and_memory_modes_give_the_same_histograms(tmp_path: Path) -> None:
    args = argparse.Namespace(rows=5_000, features=4, depth=3, chunk_rows=700, seed=2, path=str(tmp_path / "slots"))
    scale.write(args, Path(args.path))
    out = {mode: scale.one(argparse.Namespace(**vars(args), one=mode)) for mode in ("parquet", "memory")}
    digests = {mode: [level["digest"] for level in r["levels"]] for mode, r in out.items()}
    assert digests["parquet"] == digests["memory"]
    assert len(set(digests["parquet"])) == 3  # the levels differ from each other
    assert all(r["peak_rss_mb"] > 0 for r in out.values())
    table = scale.tables(
        [
            {
                "parameters": {**vars(args), "modes": "parquet,memory"},
                "results": {"measurements": [{**r, "repeat": 0} for r in out.values()]},
            }
        ]
    )
    assert "| parquet |" in table and "| memory |" in table
