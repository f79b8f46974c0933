"""A party whose rows are a Parquet dataset: its configuration, its slots binned chunk by chunk with the task's edges,
its distribution weights chunk by chunk, and its ``LocalParty`` over those slots (``node.protocol.chunked_rows``).

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
from fgbdt_chain.node.data.parquet import DEFAULT_CHUNK_ROWS, LABEL, ParquetRows
from fgbdt_chain.node.model.trees import EdgesLike, bin_matrix
from fgbdt_chain.node.privacy.psd import PSD
from fgbdt_chain.node.privacy.weights import leaf_weights
from fgbdt_chain.node.protocol.chunked_party import ChunkedSlots, DaskPart
from fgbdt_chain.node.protocol.chunked_rows import ChunkedRows, DaskChunks, LocalChunks
from fgbdt_chain.node.protocol.local_party import LocalParty


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

    def weights(self, psds: Sequence[PSD], delta: float) -> np.ndarray:
        """w* of every row (``node.privacy.weights.distribution_weights``' second value), its raw rows read chunk
        by chunk: each row's leaf in every PSD from its chunk, then the weights from the whole party's leaf counts."""
        return chunked_weights(self.reader, self.features(), self.label, psds, delta)

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


def chunked_weights(
    rows: ParquetRows, features: Sequence[str], label: str, psds: Sequence[PSD], delta: float
) -> np.ndarray:
    """``distribution_weights(X, y, psds, delta)[1]`` with X and y read chunk by chunk: each row's leaf in every PSD
    from its chunk, then the same steps on the leaves (``leaf_weights``, W times the parties' shares), so the same
    values bit for bit. W (8 bytes per row and party) is held while w* is taken, before training starts."""
    columns = [*features, label]
    leaves: list[list[np.ndarray]] = [[] for _ in psds]
    n = 0
    for _, chunk in rows.chunks(columns):
        X, y = chunk[:, :-1], chunk[:, -1]
        for j, psd in enumerate(psds):
            leaves[j].append(psd.leaf_of(X, y).astype(np.int32))
        n += chunk.shape[0]
    totals = np.array([psd.total for psd in psds], dtype=np.float64)
    total = float(totals.sum())
    if not psds or total <= 0.0:
        return np.zeros(n, dtype=np.float64)
    W = np.zeros((n, len(psds)), dtype=np.float64)
    for j, psd in enumerate(psds):
        W[:, j] = leaf_weights(np.concatenate(leaves[j]).astype(np.int64), psd.counts)
        leaves[j] = []
    return delta * (W @ (totals / total))
