"""A party whose rows are a Parquet dataset: its configuration, its binning sketch, its PSD, its slots binned with the
task's edges and its distribution weights, each taken chunk by chunk, and its ``LocalParty`` over those slots
(``node.protocol.chunked_rows``).

Configuration (:class:`ParquetParty`, party-local: nothing of it goes on chain or into the task's parameters):

* ``rows``: the party's raw rows, a Parquet file or directory (``node.data.parquet``: every column but the label a
  feature, in the file's order);
* ``slots``: where its bin slots are written once the task's edges are known (one ``uint8`` per feature and row);
* ``chunk_rows``: rows per chunk, what bounds the memory of every pass;
* ``scheduler`` and ``parts``: a Dask scheduler's address and the party's slots in parts on its workers' disks
  (``DaskPart``), for a party whose rows live on several machines; without them the passes run in this process.

Memory: one chunk of raw rows or slots at a time, plus what the party keeps per row (label, score, gradients, its
weight, fixed-point rows, each row's node: 100 to 150 bytes a row) and, while the weights are taken, each row's leaf
in every party's PSD and its weight towards it (12 bytes per row and party).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.parquet import DEFAULT_CHUNK_ROWS, LABEL, ParquetRows, _pyarrow, slot_columns
from fgbdt_chain.node.kernels.bucketing import bucket_counts_by_feature
from fgbdt_chain.node.model.trees import EdgesLike, bin_matrix
from fgbdt_chain.node.privacy.binning import (
    DEFAULT_RESOLUTION,
    Sketch,
    local_sketch,
)
from fgbdt_chain.node.privacy.psd import PSD, build_psd_of
from fgbdt_chain.node.privacy.weights import leaf_weights
from fgbdt_chain.node.protocol.chunked_party import ChunkedSlots, DaskPart
from fgbdt_chain.node.protocol.chunked_rows import ChunkedRows, DaskChunks, LocalChunks
from fgbdt_chain.node.protocol.local_party import LocalParty
from fgbdt_chain.node.protocol.verify import PartyEstimator


@dataclass(frozen=True)
class ParquetParty:
    """Where a party's rows are and how they are read (module docstring)."""

    rows: Path
    slots: Path
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    label: str = LABEL
    scheduler: str | None = None
    parts: tuple[DaskPart, ...] = ()

    def __post_init__(self) -> None:
        if self.chunk_rows < 1:
            raise ValueError(f"chunk_rows must be at least 1, got {self.chunk_rows}")
        if self.parts and self.scheduler is None:
            raise ValueError("parts on Dask workers need the scheduler's address (scheduler)")

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> ParquetParty:
        """From a party's configuration (a mapping, e.g. read from its JSON or TOML file): ``rows`` and ``slots``
        paths, optional ``chunk_rows``, ``label``, ``scheduler`` and ``parts`` (each with ``path``, ``start``,
        ``rows`` and optionally ``worker``). Unknown keys are refused by name."""
        known = {"rows", "slots", "chunk_rows", "label", "scheduler", "parts"}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(
                f"unknown Parquet party setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        for key in ("rows", "slots"):
            if key not in config:
                raise ValueError(f"a Parquet party needs {key!r} (a path)")
        parts = []
        for i, p in enumerate(config.get("parts", ())):
            try:
                parts.append(DaskPart(str(p["path"]), int(p["start"]), int(p["rows"]), p.get("worker")))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"parts[{i}]: needs path, start and rows (and optionally worker): {exc}") from exc
        return cls(
            Path(config["rows"]),
            Path(config["slots"]),
            int(config.get("chunk_rows", DEFAULT_CHUNK_ROWS)),
            str(config.get("label", LABEL)),
            config.get("scheduler"),
            tuple(parts),
        )

    @property
    def reader(self) -> ParquetRows:
        return ParquetRows(self.rows, self.chunk_rows)

    def features(self) -> list[str]:
        return self.reader.features(self.label)

    def labels(self) -> np.ndarray:
        return self.reader.labels(self.label)

    def bin(self, edges: EdgesLike, nbins: int) -> ChunkedSlots:
        """The party's slots with the task's ``edges``, written chunk by chunk to ``slots``."""
        features = self.features()
        return ChunkedSlots.binned(self.reader, features, lambda x: bin_matrix(x, edges), self.slots, nbins)

    def sketch(
        self,
        low: np.ndarray,
        high: np.ndarray,
        *,
        epsilon: float,
        rng: np.random.Generator,
        resolution: int = DEFAULT_RESOLUTION,
    ) -> Sketch:
        """The party's binning sketch (``node.privacy.binning.local_sketch``), its raw rows read chunk by chunk."""
        return chunked_sketch(self.reader, self.features(), low, high, epsilon=epsilon, rng=rng, resolution=resolution)

    def psd(self, lows: np.ndarray, highs: np.ndarray, **options: Any) -> PSD:
        """The party's PSD (``node.privacy.psd.build_psd`` with ``options``), its raw rows read chunk by chunk: one
        pass per level of the tree, its labels in memory."""
        features = self.features()
        column = ChunkedColumns(self.reader, features, self.label, self.labels())
        return build_psd_of(len(features), column.y, column, lows, highs, **options)

    def weights(self, psds: Sequence[PSD], delta: float) -> np.ndarray:
        """w* of every row (``node.privacy.weights.distribution_weights``' second value), its raw rows read chunk
        by chunk: each row's leaf in every PSD from its chunk, then the weights from the whole party's leaf counts."""
        return chunked_weights(self.reader, self.features(), self.label, psds, delta)

    def distribution(self, psds: Sequence[PSD], delta: float) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """W, w* and each row's leaf in every PSD (``chunked_distribution``), its raw rows read chunk by chunk."""
        return chunked_distribution(self.reader, self.features(), self.label, psds, delta)

    def estimators(
        self, W: np.ndarray, leaves: Sequence[np.ndarray], psds: Sequence[PSD], scales: Sequence[float]
    ) -> list[PartyEstimator]:
        """This party's view of every party as a verifier (``node.protocol.endorsement.estimators_for``) from W and
        its rows' leaves (:meth:`distribution`): the same estimators, no pass over the rows."""
        if W.shape != (W.shape[0], len(psds)) or len(scales) != len(psds) or len(leaves) != len(psds):
            raise ValueError("one weight column, leaf array, PSD and noise scale per party is required")
        return [
            PartyEstimator.build(W[:, m], leaves[m], psd.num_leaves, float(scales[m]), psd.total)
            for m, psd in enumerate(psds)
        ]

    def bin_parts(self, edges: EdgesLike, nbins: int, client: Any = None) -> None:
        """The party's slots with the task's ``edges`` written to its ``parts`` on the Dask workers' disks: its raw
        rows binned here chunk by chunk, each chunk's stretch of a part sent to that part's worker, which writes it as
        the part's next file (``_write_part_chunk``). One chunk of raw rows and slots in this process at a time; a
        part's folder must hold no other files."""
        from distributed import Client  # the scale extra: imported when used

        if not self.parts:
            raise ValueError("bin_parts writes the slots of parts on Dask workers: this party has none")
        own = client is None
        client = Client(self.scheduler) if own else client
        try:
            parts = sorted(self.parts, key=lambda p: p.start)
            features = self.features()
            written = [0] * len(parts)
            futures: list[Any] = []
            for lo, x in self.reader.chunks(features):
                slots = np.asarray(bin_matrix(x, edges), dtype=np.uint8)
                hi = lo + slots.shape[0]
                for k, p in enumerate(parts):
                    a, b = max(lo, p.start), min(hi, p.start + p.rows)
                    if a < b:
                        workers = None if p.worker is None else [p.worker]
                        chunk = slots[a - lo : b - lo]
                        task = client.submit(_write_part_chunk, p.path, written[k], chunk, workers=workers, pure=False)
                        futures.append(task)
                        written[k] += 1
                client.gather(futures)  # written before the next chunk is read: one chunk in flight at a time
                futures = []
        finally:
            if own:
                client.close()

    def rows_of(self, n_features: int, nbins: int, client: Any = None) -> ChunkedRows:
        """The party's slots for ``LocalParty``: read here chunk by chunk, or on the Dask workers of ``parts``
        (``client``: a connected ``distributed.Client``, else one to ``scheduler``)."""
        if self.parts:
            return ChunkedRows(DaskChunks(client or self.scheduler, self.parts, n_features, nbins, self.chunk_rows))
        return ChunkedRows(LocalChunks(ChunkedSlots(self.slots, n_features, nbins, self.chunk_rows)))

    def party(self, params: TrainParams, weights: np.ndarray | None, n_features: int, client: Any = None) -> LocalParty:
        """The party's ``LocalParty`` over its slots (written by :meth:`bin`), with ``params`` fitted to the task's
        edges and its w* (None: votes on raw gradients)."""
        return LocalParty(self.rows_of(n_features, params.nbins, client), self.labels(), params, weights)


def _write_part_chunk(path: str, k: int, slots: np.ndarray) -> None:
    """A worker's task: a chunk of its part's slots as the part's ``k``-th file (``node.data.parquet.write_slots``'
    layout, so that ``ChunkedSlots`` reads the part's files in order)."""
    pa, pq = _pyarrow()
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    names = slot_columns(slots.shape[1])
    table = pa.table({name: np.ascontiguousarray(slots[:, j]) for j, name in enumerate(names)})
    pq.write_table(table, out / f"part-{k:05d}.parquet", row_group_size=max(slots.shape[0], 1))


@dataclass(frozen=True)
class ChunkedColumns:
    """``build_psd_of``'s column function over a Parquet dataset: each call one pass over the chunks, reading every
    feature column and taking the asked rows' values (the label's from ``y``, held in memory)."""

    rows: ParquetRows
    features: Sequence[str]
    label: str
    y: np.ndarray

    def __call__(self, rows: np.ndarray, dims: np.ndarray) -> np.ndarray:
        out = np.empty(rows.shape[0], dtype=np.float64)
        n_features = len(self.features)
        is_label = dims == n_features
        out[is_label] = self.y[rows[is_label]]
        want = np.flatnonzero(~is_label)
        if want.size == 0:
            return out
        if np.any(np.diff(rows) <= 0):
            raise ValueError("rows must be increasing")
        at = rows[want]
        for lo, X in self.rows.chunks(self.features):
            a, b = np.searchsorted(at, [lo, lo + X.shape[0]])
            if a < b:
                mine = want[a:b]
                out[mine] = X[rows[mine] - lo, dims[mine]]
        return out


def chunked_sketch(
    rows: ParquetRows,
    features: Sequence[str],
    low: np.ndarray,
    high: np.ndarray,
    *,
    epsilon: float,
    rng: np.random.Generator,
    resolution: int = DEFAULT_RESOLUTION,
) -> Sketch:
    """``local_sketch(X, low, high, ...)`` with X read chunk by chunk, the same sketch bit for bit: a stage's bucket
    counts add up over the chunks (``binning.local_sketch`` draws the noise), one pass over the chunks a stage."""
    n_features = len(features)
    if len(low) != n_features or len(high) != n_features:
        raise ValueError(f"low and high need one value per feature ({n_features})")

    def count(bounds: Sequence[np.ndarray | None]) -> list[np.ndarray | None]:
        total = [None if b is None else np.zeros(b.size + 1, dtype=np.int64) for b in bounds]
        for _, X in rows.chunks(features):
            for t, c in zip(total, bucket_counts_by_feature(X, bounds), strict=True):
                if t is not None and c is not None:
                    t += c
        return total

    return local_sketch(count, low, high, resolution=resolution, epsilon=epsilon, rng=rng)


def chunked_weights(
    rows: ParquetRows, features: Sequence[str], label: str, psds: Sequence[PSD], delta: float
) -> np.ndarray:
    """``distribution_weights(X, y, psds, delta)[1]`` with X and y read chunk by chunk (``chunked_distribution``).
    W (8 bytes per row and party) is held while w* is taken, before training starts."""
    return chunked_distribution(rows, features, label, psds, delta)[1]


def chunked_distribution(
    rows: ParquetRows, features: Sequence[str], label: str, psds: Sequence[PSD], delta: float
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """``distribution_weights(X, y, psds, delta)`` (W and w*) with X and y read chunk by chunk, and each row's leaf
    in every PSD (what a verifier's ``PartyEstimator`` of that party takes): each row's leaf from its chunk, then
    the same steps on the leaves (``leaf_weights``, W times the parties' shares), so the same values bit for bit."""
    columns = [*features, label]
    leaves: list[list[np.ndarray]] = [[] for _ in psds]
    n = 0
    for _, chunk in rows.chunks(columns):
        X, y = chunk[:, :-1], chunk[:, -1]
        for j, psd in enumerate(psds):
            leaves[j].append(psd.leaf_of(X, y).astype(np.int32))
        n += chunk.shape[0]
    leaf = [np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64) for parts in leaves]
    W = np.zeros((n, len(psds)), dtype=np.float64)
    for j, psd in enumerate(psds):
        W[:, j] = leaf_weights(leaf[j], psd.counts)
    totals = np.array([psd.total for psd in psds], dtype=np.float64)
    total = float(totals.sum())
    if not psds or total <= 0.0:
        return W, np.zeros(n, dtype=np.float64), leaf
    return W, delta * (W @ (totals / total)), leaf
