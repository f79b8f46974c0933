"""A party's candidate histograms built chunk by chunk from its slots on disk, or spread over Dask workers.

Why: one machine per party means a party's rows must fit in its process's memory. The histograms a party submits
are exact integer sums (``FixedRows``: every row's g and h quantised once per tree, summed in two int64 limbs, the
low one then reduced to [0, 2**32) with its carry in the high one), so the sums of a set of rows are the sums of
its chunks' sums, added limb by limb and the carry taken again, whatever the chunks and their order: the chunked
party computes exactly, to the last unit, the sums the in-memory party (``LocalParty.level_sums``) submits. Memory
is bounded by one chunk of slots (a byte per feature and row) plus what a party keeps per row anyway (its label,
score, gradients and position among the open nodes).

The same work over Dask (``dask.distributed``): a party whose rows live on several machines names a scheduler
(``DaskHistograms``' ``address``) and its parts (a slots file on some worker's disk and where its rows start in the
party's row order); each worker sums its part's rows chunk by chunk and the party adds the parts' sums.

pyarrow and dask are the optional ``scale`` extra, imported when used.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fgbdt_chain.ledger.spec.fixed_point import ONE
from fgbdt_chain.node.data.parquet import DEFAULT_CHUNK_ROWS, ParquetRows, slot_columns, write_slots
from fgbdt_chain.node.kernels.histogram import FixedRows, FixedSums, RowGroups, candidate_sums

LIMB_BOUND = 2**62
"""What the limb sums must stay below: ``FixedRows.of``'s bound, checked over the whole party, not per chunk."""


def add_sums(a: FixedSums, b: FixedSums) -> FixedSums:
    """Two parts' exact histograms of the same nodes and candidates added: limb by limb, the low limbs' carry moved
    to the high ones (each limb pair is one integer, and this is its one form with the low limb in [0, 2**32))."""
    g_lo, h_lo = a.g_lo + b.g_lo, a.h_lo + b.h_lo
    return FixedSums(
        a.g_hi + b.g_hi + (g_lo >> 32), g_lo & 0xFFFFFFFF, a.h_hi + b.h_hi + (h_lo >> 32), h_lo & 0xFFFFFFFF, a.n + b.n
    )


def total_sums(parts: Iterable[FixedSums]) -> FixedSums:
    """The sum of the parts' histograms (at least one part)."""
    out: FixedSums | None = None
    for part in parts:
        out = part if out is None else add_sums(out, part)
    if out is None:
        raise ValueError("no parts to add")
    return out


def chunk_sums(
    slots: np.ndarray,
    k_of_row: np.ndarray,
    candidates: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    nbins: int,
    count: np.ndarray | None = None,
) -> FixedSums:
    """The exact candidate histograms of one chunk's rows: ``slots`` (rows x features), each row's open node
    (``k_of_row``, -1 for none), its g and h (quantised here, as ``LocalParty.fixed_rows`` does) and count."""
    groups = RowGroups.of(k_of_row, candidates.shape[0])
    rows = FixedRows.of(g, h, count)
    return candidate_sums(groups, np.ascontiguousarray(slots.T, dtype=np.uint8), candidates, rows, nbins)


def _check_bound(g: np.ndarray, h: np.ndarray, count: np.ndarray | None) -> None:
    """``FixedRows.of``'s overflow check over all the party's rows (a chunk's own check sees only its rows)."""
    bound = max(float(np.abs(g).max(initial=0.0)), float(np.abs(h).max(initial=0.0)), 1e-18)
    weight = g.shape[0] if count is None else int(np.asarray(count).sum())
    if (int(bound * ONE) >> 32) * max(weight, 1) >= LIMB_BOUND:
        raise OverflowError("gradient sums beyond what 64-bit limbs carry (values near 1e6 over millions of rows)")


@dataclass(frozen=True)
class ChunkedSlots:
    """A party's bin slots as a slots dataset (``node.data.parquet.write_slots``), read ``chunk_rows`` at a time."""

    path: Path
    n_features: int
    nbins: int
    chunk_rows: int = DEFAULT_CHUNK_ROWS

    @classmethod
    def write(
        cls, path: str | os.PathLike[str], slots: np.ndarray, nbins: int, chunk_rows: int = DEFAULT_CHUNK_ROWS
    ) -> ChunkedSlots:
        """Slots held in memory written as a slots dataset of ``chunk_rows``-row files."""
        chunks = (slots[lo : lo + chunk_rows] for lo in range(0, slots.shape[0], chunk_rows))
        write_slots(path, chunks, slots.shape[1], row_group_rows=chunk_rows)
        return cls(Path(path), slots.shape[1], nbins, chunk_rows)

    @classmethod
    def binned(
        cls,
        rows: ParquetRows,
        features: Sequence[str],
        bin_chunk: Any,
        out: str | os.PathLike[str],
        nbins: int,
    ) -> ChunkedSlots:
        """A party's raw rows (``rows``' ``features`` columns) binned chunk by chunk by ``bin_chunk`` (raw chunk ->
        uint8 slots, e.g. ``node.model.trees.bin_matrix`` with the task's edges) into a slots dataset at ``out``."""
        chunks = (np.asarray(bin_chunk(x), dtype=np.uint8) for _, x in rows.chunks(features))
        write_slots(out, chunks, len(features), row_group_rows=rows.chunk_rows)
        return cls(Path(out), len(features), nbins, rows.chunk_rows)

    def chunks(self) -> Iterable[tuple[int, np.ndarray]]:
        return ParquetRows(self.path, self.chunk_rows).chunks(slot_columns(self.n_features), np.uint8)

    @property
    def n_rows(self) -> int:
        return ParquetRows(self.path, self.chunk_rows).n_rows

    def level_sums(
        self,
        k_of_row: np.ndarray,
        candidates: np.ndarray,
        g: np.ndarray,
        h: np.ndarray,
        count: np.ndarray | None = None,
    ) -> FixedSums:
        """The exact candidate histograms of the open nodes, summed chunk by chunk: ``LocalParty.level_sums``'s
        exact sums (before any noise), with one chunk of slots in memory at a time."""
        cand = np.ascontiguousarray(candidates, dtype=np.int64).reshape(len(candidates), -1)
        _check_bound(g, h, count)
        parts = []
        seen = 0
        for lo, slots in self.chunks():
            hi = lo + slots.shape[0]
            c = None if count is None else count[lo:hi]
            parts.append(chunk_sums(slots, k_of_row[lo:hi], cand, g[lo:hi], h[lo:hi], self.nbins, c))
            seen = hi
        if seen != k_of_row.shape[0]:
            raise ValueError(f"{self.path}: {seen} rows of slots but {k_of_row.shape[0]} rows given")
        return total_sums(parts) if parts else _empty(cand, self.nbins)


def _empty(candidates: np.ndarray, nbins: int) -> FixedSums:
    shape = (*candidates.shape, nbins)
    return FixedSums(*(np.zeros(shape, dtype=np.int64) for _ in range(5)))


@dataclass(frozen=True)
class DaskPart:
    """Rows of a party on one Dask worker: a slots dataset on that worker's disk, the party's row index of its
    first row, its rows, and the worker's address (None: any worker can read the path)."""

    path: str
    start: int
    rows: int
    worker: str | None = None


def _part_sums(
    path: str,
    n_features: int,
    nbins: int,
    chunk_rows: int,
    k_of_row: np.ndarray,
    candidates: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    count: np.ndarray | None,
) -> FixedSums:
    """A worker's task: its part's exact histograms (``ChunkedSlots.level_sums`` over the part's file)."""
    return ChunkedSlots(Path(path), n_features, nbins, chunk_rows).level_sums(k_of_row, candidates, g, h, count)


class DaskHistograms:
    """A party's candidate histograms summed by Dask workers, each over its part of the rows (module docstring).

    ``address`` is the scheduler's (the party's configuration), or a ``distributed.Client`` already connected."""

    def __init__(
        self,
        address: Any,
        parts: Sequence[DaskPart],
        n_features: int,
        nbins: int,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ) -> None:
        from distributed import Client  # the scale extra: imported when used

        self.client = address if isinstance(address, Client) else Client(address)
        self.own_client = not isinstance(address, Client)
        self.parts = sorted(parts, key=lambda p: p.start)
        ends = [p.start + p.rows for p in self.parts]
        if [p.start for p in self.parts] != [0, *ends[:-1]]:
            raise ValueError("the parts must cover the party's rows from 0 without gaps or overlaps")
        self.n_rows = ends[-1] if ends else 0
        self.n_features, self.nbins, self.chunk_rows = n_features, nbins, chunk_rows

    def level_sums(
        self,
        k_of_row: np.ndarray,
        candidates: np.ndarray,
        g: np.ndarray,
        h: np.ndarray,
        count: np.ndarray | None = None,
    ) -> FixedSums:
        """``ChunkedSlots.level_sums`` with every part summed on its worker, the parts' sums added here."""
        if k_of_row.shape[0] != self.n_rows:
            raise ValueError(f"{k_of_row.shape[0]} rows given, the parts hold {self.n_rows}")
        cand = np.ascontiguousarray(candidates, dtype=np.int64).reshape(len(candidates), -1)
        _check_bound(g, h, count)
        futures = []
        for p in self.parts:
            lo, hi = p.start, p.start + p.rows
            c = None if count is None else count[lo:hi]
            args = (p.path, self.n_features, self.nbins, self.chunk_rows, k_of_row[lo:hi], cand, g[lo:hi], h[lo:hi])
            workers = None if p.worker is None else [p.worker]
            futures.append(self.client.submit(_part_sums, *args, c, workers=workers, pure=False))
        return total_sums(self.client.gather(futures)) if futures else _empty(cand, self.nbins)

    def close(self) -> None:
        if self.own_client:
            self.client.close()
