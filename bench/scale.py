"""A party of millions of rows building its histograms from Parquet, chunk by chunk: time per level and peak memory.

    python -m bench.scale --rows 10000000 --features 10 --depth 6 --chunk-rows 262144

Each mode runs in its own process, whose peak resident memory (``ru_maxrss``) is the run's: ``parquet`` reads the
party's slots from a slots dataset (``node.protocol.chunked_party.ChunkedSlots``), one chunk at a time; ``memory``
holds them as ``LocalParty`` does (``BinnedRows``). Both keep what a party keeps per row anyway (label, score, g, h
and each row's open node), and both compute one tree's levels: at level l, 2^l open nodes (rows dealt to them by a
hash of the row), two candidate features per node, exact fixed-point sums. The histograms of the two modes are
compared on every level (a digest of the limbs) and must be equal. The slots are synthetic (uniform over 16 bins
and a missing slot), written once per run and not timed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.record import Run, parameters_of
from bench.stats import mean_se

NBINS = 17


def chunk_of(k: int, rows: int, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ``k``'s slots and labels: made from its own seed, so that no process holds more than a chunk."""
    rng = np.random.default_rng([seed, k])
    slots = rng.integers(0, NBINS, size=(rows, features), dtype=np.uint8)
    y = (rng.random(rows) < 0.3 + 0.04 * slots[:, 0]).astype(np.float64)
    return slots, y


def chunks(args: argparse.Namespace) -> Iterator[tuple[int, int]]:
    for k, lo in enumerate(range(0, args.rows, args.chunk_rows)):
        yield k, min(args.chunk_rows, args.rows - lo)


def write(args: argparse.Namespace, path: Path) -> None:
    from fgbdt_chain.node.data.parquet import write_slots

    write_slots(path, (chunk_of(k, n, args.features, args.seed)[0] for k, n in chunks(args)), args.features)


def labels(args: argparse.Namespace) -> np.ndarray:
    return np.concatenate([chunk_of(k, n, args.features, args.seed)[1] for k, n in chunks(args)])


def one(args: argparse.Namespace) -> dict[str, Any]:
    from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedRows
    from fgbdt_chain.node.model.objective import gradients
    from fgbdt_chain.node.protocol.chunked_party import ChunkedSlots

    y = labels(args)
    score = np.zeros_like(y)
    g, h = gradients("binary", y, score)
    rows = np.arange(args.rows, dtype=np.uint64)
    mixed = (rows * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)  # a hash of the row: its place in the tree
    del rows
    start = time.perf_counter()
    if args.one == "memory":
        slots = np.vstack([chunk_of(k, n, args.features, args.seed)[0] for k, n in chunks(args)])
        party: Any = BinnedRows(slots, NBINS)
        del slots
    else:
        party = ChunkedSlots(Path(args.path), args.features, NBINS, args.chunk_rows)
    setup = time.perf_counter() - start
    # the kernels and the Parquet reader loaded (or compiled) before the clock: one untimed pass of the root
    root = np.zeros((1, 2), dtype=np.int64)
    if args.one == "memory":
        party.group_candidates_fixed(party.groups(np.zeros(args.rows, np.int64), 1), root, FixedRows.of(g, h))
    else:
        party.level_sums(np.zeros(args.rows, np.int64), root, g, h)
    levels = []
    for level in range(args.depth):
        k = 1 << level
        k_of_row = (mixed % np.uint64(k)).astype(np.int64)
        cand = np.stack([np.arange(k) % args.features, (np.arange(k) + 1 + level) % args.features], axis=1)
        start = time.perf_counter()
        if args.one == "memory":
            sums = party.group_candidates_fixed(party.groups(k_of_row, k), cand, FixedRows.of(g, h))
        else:
            sums = party.level_sums(k_of_row, cand, g, h)
        seconds = time.perf_counter() - start
        digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in sums.__dict__.values()))
        levels.append({"level": level, "seconds": seconds, "digest": digest.hexdigest()[:16]})
    return {
        "mode": args.one,
        "setup_seconds": setup,
        "levels": levels,
        "tree_seconds": sum(x["seconds"] for x in levels),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=10)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--chunk-rows", type=int, default=262_144)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="parquet,memory")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--out", help="results file (default bench/results/scale.json, bench.record)")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return 0
    record = Run("scale", parameters_of(args, drop=("one", "path", "repeat")), args.out)
    results = []
    with tempfile.TemporaryDirectory(prefix="fgbdt-scale-") as tmp:
        path = Path(tmp) / "slots"
        write(args, path)
        for rep in range(args.repeat):
            for mode in args.modes.split(","):
                cmd = [sys.executable, "-m", "bench.scale", *sys.argv[1:], "--one", mode, "--path", str(path)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                results.append({**json.loads(out.strip().splitlines()[-1]), "repeat": rep})
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    digests = {tuple(x["digest"] for x in r["levels"]) for r in results}
    if len(digests) != 1:
        raise SystemExit("the modes' histograms differ")
    record.save({"measurements": results})
    print(tables([{"parameters": record.parameters, "results": {"measurements": results}}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown: per mode, one tree's histogram seconds and the peak memory (mean ± SE over the repetitions)."""
    pooled = [m for run in runs for m in run["results"]["measurements"]]
    p = runs[0]["parameters"]
    lines = [
        f"{p['rows']:,} rows of {p['features']} features, a tree of depth {p['depth']} (two candidates per node), "
        f"chunks of {p['chunk_rows']:,} rows; the histograms of every mode equal on every level.",
        "",
        "| mode | setup s | histograms of one tree, s | peak RSS MiB |",
        "|---|---|---|---|",
    ]
    for mode in dict.fromkeys(m["mode"] for m in pooled):
        mine = [m for m in pooled if m["mode"] == mode]
        setup, tree, peak = (mean_se(m[key] for m in mine) for key in ("setup_seconds", "tree_seconds", "peak_rss_mb"))
        cells = [f"{setup[0]:.2f} ± {setup[1]:.2f}", f"{tree[0]:.2f} ± {tree[1]:.2f}", f"{peak[0]:.0f} ± {peak[1]:.0f}"]
        lines.append(f"| {mode} | {' | '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
