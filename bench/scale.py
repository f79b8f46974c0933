"""A party of millions of rows from Parquet, chunk by chunk: one tree's histograms (time per level and peak memory),
and a whole model with the party in a process of its own, from Parquet, in memory and on two Dask workers.

    python -m bench.scale --rows 10000000 --features 10 --depth 6 --chunk-rows 262144

Each mode runs in its own process, whose peak resident memory (``ru_maxrss``) is the run's: ``parquet`` reads the
party's slots from a slots dataset (``node.protocol.chunked_party.ChunkedSlots``), one chunk at a time; ``memory``
holds them as ``LocalParty`` does (``BinnedRows``). Both keep what a party keeps per row anyway (label, score, g, h
and each row's open node), and both compute one tree's levels: at level l, 2^l open nodes (rows dealt to them by a
hash of the row), two candidate features per node, exact fixed-point sums. The histograms of the two modes are
compared on every level (a digest of the limbs) and must be equal. The slots are synthetic (uniform over 16 bins
and a missing slot), written once per run and not timed.

    python -m bench.scale --part train --rows 10000000 --trees 5 --check-rows 1000000

The ``train`` part trains a whole model (``node.protocol.party_rounds``): three parties, the first one holding
``--rows`` rows as a slots dataset and computing every per-row pass chunk by chunk (``node.protocol.chunked_rows``:
votes over all features, candidate histograms, routing, scores) in a process of its own, whose peak resident memory
is measured; the two others hold ``--other-rows`` rows each in memory. Its labels, scores, gradients, fixed-point rows
and node positions stay in memory (a few float64 per row), its slots never whole. At ``--check-rows`` rows the first
party also trains in memory (``LocalParty`` over its slots) and on a two-worker Dask cluster (``DaskChunks``, one
part per worker): the three models (trees and contributions) must be identical. The algorithm is PV-tree (votes on
the parties' raw gradients): the slots are synthetic, without raw rows for the PSDs that FV-tree's weights need.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
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


TRAIN_MODES = ("parquet", "memory", "dask")


def write_parts(rows: int, features: int, chunk_rows: int, seed: int, path: Path) -> None:
    """The first party's slots as a slots dataset in two parts (``a`` and ``b``, half the chunks each): read whole
    in name order by a chunked party, one part per worker by a Dask one."""
    from fgbdt_chain.node.data.parquet import write_slots

    sizes = [min(chunk_rows, rows - lo) for lo in range(0, rows, chunk_rows)]
    half = (len(sizes) + 1) // 2
    for name, ks in (("a", range(half)), ("b", range(half, len(sizes)))):
        write_slots(path / name, (chunk_of(k, sizes[k], features, seed)[0] for k in ks), features)


def party_labels(rows: int, features: int, chunk_rows: int, seed: int) -> np.ndarray:
    sizes = [min(chunk_rows, rows - lo) for lo in range(0, rows, chunk_rows)]
    return np.concatenate([chunk_of(k, n, features, seed)[1] for k, n in enumerate(sizes)])


def _serve(conn: Any, mode: str, path: str, rows: int, features: int, chunk_rows: int, seed: int, params: Any) -> None:
    """The first party's process: builds its party (``mode``) and answers ``train_rounds``' calls until told to
    stop; its last answer is its peak resident memory and the seconds it computed."""
    from fgbdt_chain.node.protocol.chunked_party import ChunkedSlots, DaskPart
    from fgbdt_chain.node.protocol.chunked_rows import ChunkedRows, DaskChunks, LocalChunks
    from fgbdt_chain.node.protocol.local_party import LocalParty
    from fgbdt_chain.node.protocol.party_rounds import PartyWork

    y = party_labels(rows, features, chunk_rows, seed)
    cluster = client = None
    start = time.perf_counter()
    if mode == "memory":
        slots = np.vstack([s for _, s in ChunkedSlots(Path(path), features, NBINS, chunk_rows).chunks()])
        party = LocalParty(slots, y, params)
        del slots
    elif mode == "parquet":
        party = LocalParty(ChunkedRows(LocalChunks(ChunkedSlots(Path(path), features, NBINS, chunk_rows))), y, params)
    else:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
        client = Client(cluster)
        workers = sorted(client.scheduler_info()["workers"])
        parts: list[DaskPart] = []
        for w, name in zip(workers, ("a", "b"), strict=True):
            n = ChunkedSlots(Path(path) / name, features, NBINS, chunk_rows).n_rows
            parts.append(DaskPart(str(Path(path) / name), sum(p.rows for p in parts), n, w))
        party = LocalParty(ChunkedRows(DaskChunks(client, parts, features, NBINS, chunk_rows)), y, params)
    work = PartyWork(party)
    setup = time.perf_counter() - start
    busy = 0.0
    while True:
        name, args = conn.recv()
        if name == "stop":
            break
        start = time.perf_counter()
        answer = getattr(work, name)(*args)
        busy += time.perf_counter() - start
        conn.send(answer)
    if client is not None and cluster is not None:
        client.close()
        cluster.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send({"setup_seconds": setup, "party_seconds": busy, "peak_rss_mb": peak})


class RemoteParty:
    """A party in a process of its own (``_serve``), asked as ``train_rounds`` asks a ``PartyWork``."""

    def __init__(self, *args: Any) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, *args))
        self.process.start()

    def _ask(self, name: str, *args: Any) -> Any:
        self.conn.send((name, args))
        return self.conn.recv()

    def start_tree(self, tree: int) -> None:
        self._ask("start_tree", tree)

    def votes(self, tree: int, level: int, open_nodes: Any) -> list[int]:
        return list(self._ask("votes", tree, level, open_nodes))

    def histograms(self, tree: int, level: int, open_nodes: Any, candidates: Any) -> Any:
        return self._ask("histograms", tree, level, open_nodes, candidates)

    def apply(self, splits: dict[int, tuple[int, int]]) -> None:
        self._ask("apply", splits)

    def end_tree(self, leaf_value: np.ndarray) -> None:
        self._ask("end_tree", leaf_value)

    def stop(self) -> dict[str, Any]:
        self.conn.send(("stop", ()))
        stats = dict(self.conn.recv())
        self.process.join()
        return stats


def train_one(args: argparse.Namespace, rows: int, mode: str, path: Path) -> dict[str, Any]:
    """A whole model with the first party (``rows`` rows, ``mode``) in its own process: the model's digest, the
    seconds per tree and that party's peak memory."""
    from fgbdt_chain.ledger.spec.train_params import TrainParams
    from fgbdt_chain.node.protocol.local_party import LocalParty
    from fgbdt_chain.node.protocol.party_rounds import PartyWork, train_rounds

    params = TrainParams(trees=args.trees, depth=args.depth, bins=NBINS - 1)
    first = RemoteParty(mode, str(path), rows, args.features, args.chunk_rows, args.seed, params)
    others = []
    for i in (1, 2):
        slots, y = chunk_of(0, args.other_rows, args.features, args.seed + 1000 * i)
        others.append(PartyWork(LocalParty(slots, y, params)))
    ticks = [time.perf_counter()]
    try:
        result = train_rounds(
            [first, *others], params, args.features, "pvtree", progress=lambda _: ticks.append(time.perf_counter())
        )
    finally:
        stats = first.stop()
    trees = [sorted((k, repr(v)) for k, v in t.nodes.items()) for t in result.trees]
    digest = hashlib.sha256(repr((trees, result.phi, result.kappa, result.total)).encode()).hexdigest()[:16]
    per_tree = [b - a for a, b in itertools.pairwise(ticks)]
    return {
        "mode": mode,
        "rows": rows,
        "model_digest": digest,
        "tree_seconds": per_tree,
        "nodes": sum(len(t.nodes) for t in result.trees),
        **stats,
    }


def train_part(args: argparse.Namespace, record: Run) -> list[dict[str, Any]]:
    """The train part (module docstring): the identity check at ``--check-rows``, then ``--rows`` from Parquet."""
    results: list[dict[str, Any]] = []
    sizes: list[tuple[int, tuple[str, ...]]] = [(args.check_rows, TRAIN_MODES)] if args.check_rows else []
    sizes.append((args.rows, ("parquet",)))
    for rows, modes in sizes:
        with tempfile.TemporaryDirectory(prefix="fgbdt-scale-") as tmp:
            path = Path(tmp) / "slots"
            write_parts(rows, args.features, args.chunk_rows, args.seed, path)
            for rep in range(args.repeat):
                for mode in modes:
                    results.append({**train_one(args, rows, mode, path), "repeat": rep})
                    print(json.dumps(results[-1]), file=sys.stderr, flush=True)
                    record.save({"measurements": results}, complete=False)
        same = {r["model_digest"] for r in results if r["rows"] == rows}
        if len(same) != 1:
            raise SystemExit(f"{rows:,} rows: the modes' models differ")
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=10)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--chunk-rows", type=int, default=262_144)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", choices=("histograms", "train"), default="histograms")
    ap.add_argument("--modes", default="parquet,memory", help="histograms part: the modes compared")
    ap.add_argument("--trees", type=int, default=5, help="train part: trees of the model")
    ap.add_argument("--other-rows", type=int, default=100_000, help="train part: rows of each in-memory party")
    ap.add_argument(
        "--check-rows", type=int, default=1_000_000, help="train part: rows of the identity check (0: none)"
    )
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--out", help="results file (default bench/results/scale.json, bench.record)")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return 0
    if args.part == "train":
        drop: tuple[str, ...] = ("one", "path", "repeat", "modes")
        record = Run("scale", parameters_of(args, drop=drop), args.out)
        measured = train_part(args, record)
        record.save({"measurements": measured})
        print(tables([{"parameters": record.parameters, "results": {"measurements": measured}}]))
        return 0
    drop = ("one", "path", "repeat", "trees", "other_rows", "check_rows")
    record = Run("scale", parameters_of(args, drop=drop), args.out)
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
    if p.get("part") == "train":
        return train_tables(p, pooled)
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


def train_tables(p: dict[str, Any], pooled: list[dict[str, Any]]) -> str:
    """Markdown of the train part: per size and mode, the first party's peak memory and the seconds per tree."""
    lines = [
        f"Three parties, the first of the given rows ({p['features']} features, chunks of {p['chunk_rows']:,} rows), "
        f"the others of {p['other_rows']:,} rows each in memory; PV-tree, {p['trees']} trees of depth {p['depth']}. "
        "A model is its trees and every party's contributions (compared by digest). The first tree "
        "includes loading the compiled kernels in every process.",
        "",
        "| rows | first party | peak RSS MiB | first tree s | later trees, s per tree | models at this size |",
        "|---|---|---|---|---|---|",
    ]
    for key in dict.fromkeys((m["rows"], m["mode"]) for m in pooled):
        mine = [m for m in pooled if (m["rows"], m["mode"]) == key]
        peak = mean_se(m["peak_rss_mb"] for m in mine)
        first = mean_se(m["tree_seconds"][0] for m in mine)
        later = mean_se(s for m in mine for s in m["tree_seconds"][1:])
        models = len({m["model_digest"] for m in pooled if m["rows"] == key[0]})
        modes = len({m["mode"] for m in pooled if m["rows"] == key[0]})
        same = f"{models} for {modes} modes" if models != 1 else f"one, identical in all {modes} modes"
        if modes == 1:
            same = "one mode run"
        lines.append(
            f"| {key[0]:,} | {key[1]} | {peak[0]:.0f} ± {peak[1]:.0f} | {first[0]:.1f} ± {first[1]:.1f} | "
            f"{later[0]:.1f} ± {later[1]:.1f} | {same} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
