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

    python -m bench.scale --part fvtree --rows 10000000 --trees 10 --check-rows 1000000

The ``fvtree`` part starts from raw rows (normal features, one log-normal, 2% missing), the first party's as a
Parquet dataset written a chunk at a time: each party publishes its binning sketch and its PSD, the edges come from
the sketches, and each party bins its rows and takes its FV-tree weights from every PSD; the first party does all of
it chunk by chunk (``node.protocol.parquet_party``) in its own process, whose peak memory covers it, and the time
before training is reported with it. At ``--check-rows`` rows the first party also does it all in memory and on two
Dask workers: the models must be identical.
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
    busy = _answer(conn, work)
    if client is not None and cluster is not None:
        client.close()
        cluster.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send({"setup_seconds": setup, "party_seconds": busy, "peak_rss_mb": peak})


class RemoteParty:
    """A party in a process of its own (``_serve``), asked as ``train_rounds`` asks a ``PartyWork``."""

    def __init__(self, *args: Any, target: Any = None) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=target or _serve, args=(child, *args))
        self.process.start()

    def ask(self, name: str, *args: Any) -> Any:
        """Any of the party's own calls (the fvtree part's ``sketch``, ``psd`` and ``prepare``)."""
        return self._ask(name, *args)

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


SCHEMA = (-5.0, 5.0)
"""The fvtree part's declared feature range (the skewed second feature: 0 to 50); the label's is 0 to 1."""


def raw_chunk(k: int, rows: int, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ``k``'s raw rows: normal features, the second one log-normal (skewed), 2% missing, and a label of the
    first two with noise; from its own seed, so that no process holds more than a chunk while writing."""
    rng = np.random.default_rng([seed, k, 7])
    X = rng.normal(size=(rows, features))
    y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=rows) > 0).astype(np.float64)
    X[:, 1] = np.exp(X[:, 1])
    X[rng.random(X.shape) < 0.02] = np.nan
    return X, y


def schema(features: int) -> tuple[np.ndarray, np.ndarray]:
    low, high = np.full(features, SCHEMA[0]), np.full(features, SCHEMA[1])
    low[1], high[1] = 0.0, 50.0
    return low, high


def write_raw(rows: int, features: int, chunk_rows: int, seed: int, path: Path) -> None:
    """The first party's raw rows as a Parquet dataset, one file per chunk, written a chunk at a time."""
    from fgbdt_chain.node.data.parquet import write_rows

    for k, lo in enumerate(range(0, rows, chunk_rows)):
        X, y = raw_chunk(k, min(chunk_rows, rows - lo), features, seed)
        write_rows(path / f"part-{k:05d}.parquet", X, y, row_group_rows=chunk_rows)


class RawParty:
    """The fvtree part's first party, in its own process: publishes its binning sketch and PSD from its raw rows,
    then bins them with the task's edges, takes its weights and trains (``mode``: from Parquet chunk by chunk, in
    memory, or on two Dask workers)."""

    def __init__(self, mode: str, raw: str, slots: str, chunk_rows: int, seed: int, epsilon: float, delta: float):
        from fgbdt_chain.node.protocol.parquet_party import ParquetParty

        self.mode, self.seed, self.epsilon, self.delta = mode, seed, epsilon, delta
        self.source = ParquetParty(Path(raw), Path(slots), chunk_rows)
        self.X: np.ndarray | None = None
        self.y: np.ndarray | None = None
        if mode == "memory":
            from fgbdt_chain.node.data.parquet import read_party

            self.X, self.y, _ = read_party(raw, chunk_rows=chunk_rows)
        self.work: Any = None
        self.closers: list[Any] = []

    def sketch(self, low: np.ndarray, high: np.ndarray) -> Any:
        from fgbdt_chain.node.privacy.binning import local_sketch, sketch_rng

        rng = sketch_rng(self.seed, 0)
        if self.X is not None:
            return local_sketch(self.X, low, high, epsilon=self.epsilon, rng=rng)
        return self.source.sketch(low, high, epsilon=self.epsilon, rng=rng)

    def psd(self, lows: np.ndarray, highs: np.ndarray) -> Any:
        from fgbdt_chain.node.privacy.psd import build_psd, psd_rng

        rng = psd_rng(self.seed, 0)
        if self.X is not None and self.y is not None:
            return build_psd(self.X, self.y, lows, highs, epsilon=self.epsilon, rng=rng)
        return self.source.psd(lows, highs, epsilon=self.epsilon, rng=rng)

    def prepare(self, edges: list[np.ndarray], psds: list[Any], params: Any) -> None:
        from fgbdt_chain.node.data.parquet import files_of
        from fgbdt_chain.node.model.trees import bin_matrix
        from fgbdt_chain.node.privacy.weights import distribution_weights
        from fgbdt_chain.node.protocol.chunked_party import ChunkedSlots, DaskPart
        from fgbdt_chain.node.protocol.chunked_rows import ChunkedRows, DaskChunks
        from fgbdt_chain.node.protocol.local_party import LocalParty
        from fgbdt_chain.node.protocol.party_rounds import PartyWork

        if self.X is not None and self.y is not None:
            w = distribution_weights(self.X, self.y, psds, self.delta)[1]
            party = LocalParty(bin_matrix(self.X, edges), self.y, params, w)
            self.X = None
        elif self.mode == "parquet":
            self.source.bin(edges, params.nbins)
            party = self.source.party(params, self.source.weights(psds, self.delta), len(edges))
        else:
            from distributed import Client, LocalCluster

            self.source.bin(edges, params.nbins)
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
            client = Client(cluster)
            self.closers += [client, cluster]
            workers = sorted(client.scheduler_info()["workers"])
            parts: list[DaskPart] = []
            for i, f in enumerate(files_of(self.source.slots)):
                n = ChunkedSlots(f, len(edges), params.nbins, self.source.chunk_rows).n_rows
                parts.append(DaskPart(str(f), sum(p.rows for p in parts), n, workers[i % 2]))
            rows = ChunkedRows(DaskChunks(client, parts, len(edges), params.nbins, self.source.chunk_rows))
            party = LocalParty(rows, self.source.labels(), params, self.source.weights(psds, self.delta))
        self.work = PartyWork(party)

    def __getattr__(self, name: str) -> Any:  # the PartyWork calls, once prepared
        return getattr(self.__dict__["work"], name)

    def close(self) -> None:
        for c in self.closers:
            c.close()


def _answer(conn: Any, party: Any) -> float:
    """Answer the parent's calls of ``party``'s methods over ``conn`` until told to stop; the seconds computed."""
    busy = 0.0
    while True:
        name, call = conn.recv()
        if name == "stop":
            return busy
        start = time.perf_counter()
        answer = getattr(party, name)(*call)
        busy += time.perf_counter() - start
        conn.send(answer)


def _serve_raw(conn: Any, *args: Any) -> None:
    """The fvtree part's first party's process (``RawParty``): answers until told to stop, then sends its peak
    resident memory and the seconds it computed."""
    party = RawParty(*args)
    busy = _answer(conn, party)
    party.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send({"setup_seconds": 0.0, "party_seconds": busy, "peak_rss_mb": peak})


def fvtree_one(args: argparse.Namespace, rows: int, mode: str, raw: Path, tmp: Path) -> dict[str, Any]:
    """FV-tree from raw rows with the first party (``rows`` rows, ``mode``) in its own process: its sketch, PSD,
    slots and weights from its rows, then the model; the seconds before training and per tree, and its peak memory."""
    from fgbdt_chain.ledger.spec.train_params import TrainParams
    from fgbdt_chain.node.model.trees import bin_matrix
    from fgbdt_chain.node.privacy.binning import edges_from_sketch, local_sketch, sketch_rng
    from fgbdt_chain.node.privacy.psd import build_psd, psd_rng
    from fgbdt_chain.node.privacy.weights import distribution_weights
    from fgbdt_chain.node.protocol.local_party import LocalParty
    from fgbdt_chain.node.protocol.party_rounds import PartyWork, train_rounds

    eps, delta = 1.0, 1.0
    start = time.perf_counter()
    first = RemoteParty(
        mode, str(raw), str(tmp / f"slots-{mode}"), args.chunk_rows, args.seed, eps, delta, target=_serve_raw
    )
    low, high = schema(args.features)
    lows, highs = np.append(low, 0.0), np.append(high, 1.0)
    others = [raw_chunk(0, args.other_rows, args.features, args.seed + 1000 * i) for i in (1, 2)]
    try:
        sketches = [first.ask("sketch", low, high)]
        sketches += [
            local_sketch(X, low, high, epsilon=eps, rng=sketch_rng(args.seed, i)) for i, (X, _) in enumerate(others, 1)
        ]
        edges = edges_from_sketch(sketches, low, high, NBINS - 1)
        psds = [first.ask("psd", lows, highs)]
        psds += [
            build_psd(X, y, lows, highs, epsilon=eps, rng=psd_rng(args.seed, i)) for i, (X, y) in enumerate(others, 1)
        ]
        params = TrainParams(trees=args.trees, depth=args.depth, bins=NBINS - 1).fitted(edges)
        first.ask("prepare", edges, psds, params)
        works = [
            PartyWork(LocalParty(bin_matrix(X, edges), y, params, distribution_weights(X, y, psds, delta)[1]))
            for X, y in others
        ]
        ticks = [time.perf_counter()]
        result = train_rounds(
            [first, *works], params, args.features, "fvtree", progress=lambda _: ticks.append(time.perf_counter())
        )
    finally:
        stats = first.stop()
    trees = [sorted((k, repr(v)) for k, v in t.nodes.items()) for t in result.trees]
    digest = hashlib.sha256(repr((trees, result.phi, result.kappa, result.total)).encode()).hexdigest()[:16]
    return {
        "mode": mode,
        "rows": rows,
        "model_digest": digest,
        "prepare_seconds": ticks[0] - start,
        "tree_seconds": [b - a for a, b in itertools.pairwise(ticks)],
        "nodes": sum(len(t.nodes) for t in result.trees),
        **stats,
    }


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
            path = Path(tmp) / ("raw" if args.part == "fvtree" else "slots")
            if args.part == "fvtree":
                write_raw(rows, args.features, args.chunk_rows, args.seed, path)
            else:
                write_parts(rows, args.features, args.chunk_rows, args.seed, path)
            for rep in range(args.repeat):
                for mode in modes:
                    if args.part == "fvtree":
                        measured = fvtree_one(args, rows, mode, path, Path(tmp))
                    else:
                        measured = train_one(args, rows, mode, path)
                    results.append({**measured, "repeat": rep})
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
    ap.add_argument("--part", choices=("histograms", "train", "fvtree"), default="histograms")
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
    if args.part == "train" and args.check_rows and args.check_rows <= args.chunk_rows:
        # the Dask mode gives each of its two workers half the chunks: one chunk would leave a worker no rows
        raise SystemExit(
            f"--check-rows {args.check_rows:,} makes one chunk of --chunk-rows {args.chunk_rows:,}: the train part's "
            "Dask mode needs at least two, one per worker"
        )
    if args.part in ("train", "fvtree"):
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
    if p.get("part") in ("train", "fvtree"):
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
    fvtree = p.get("part") == "fvtree"
    algo = "FV-tree from raw rows (each party's sketch, PSD, slots and weights its own)" if fvtree else "PV-tree"
    lines = [
        f"Three parties, the first of the given rows ({p['features']} features, chunks of {p['chunk_rows']:,} rows), "
        f"the others of {p['other_rows']:,} rows each in memory; {algo}, {p['trees']} trees of depth {p['depth']}. "
        "A model is its trees and every party's contributions (compared by digest). The first tree "
        "includes loading the compiled kernels in every process.",
        "",
        "| rows | first party | peak RSS MiB | before training s | first tree s | later trees, s per tree "
        "| models at this size |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in dict.fromkeys((m["rows"], m["mode"]) for m in pooled):
        mine = [m for m in pooled if (m["rows"], m["mode"]) == key]
        peak = mean_se(m["peak_rss_mb"] for m in mine)
        first = mean_se(m["tree_seconds"][0] for m in mine)
        prepare = mean_se(m.get("prepare_seconds", m["setup_seconds"]) for m in mine)
        later = mean_se(s for m in mine for s in m["tree_seconds"][1:])
        models = len({m["model_digest"] for m in pooled if m["rows"] == key[0]})
        modes = len({m["mode"] for m in pooled if m["rows"] == key[0]})
        same = f"{models} for {modes} modes" if models != 1 else f"one, identical in all {modes} modes"
        if modes == 1:
            same = "one mode run"
        lines.append(
            f"| {key[0]:,} | {key[1]} | {peak[0]:.0f} ± {peak[1]:.0f} | {prepare[0]:.1f} ± {prepare[1]:.1f} | "
            f"{first[0]:.1f} ± {first[1]:.1f} | "
            f"{later[0]:.1f} ± {later[1]:.1f} | {same} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
