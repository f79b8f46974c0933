"""Every per-row pass of a party over its bin slots on disk, chunk by chunk, or over Dask workers: ``BinnedRows``'
searches with one chunk of slots in memory at a time.

Why: ``LocalParty`` keeps its slots in memory (``BinnedRows``: the slots, a feature-major copy and the vote layout,
about three bytes per feature and row), which bounds a party by one process's memory. A party's per-row work is its
votes' histograms, its candidate histograms and the routing of its rows when the chain splits a node. The first two
are exact integer sums (the votes' values quantised at the party's one scale, ``node.kernels.vote_histograms``; the
candidates' in fixed-point limbs, ``node.protocol.chunked_party``), so a chunk's sums add up to the whole party's,
bit for bit, in any order; routing is row by row. What a party keeps per row (label, score, gradients, each row's
node) stays in memory: a few float64 per row.

The votes: the in-memory party scans each feature's *used* slots (the slots any of its rows takes) and fills its
most common slot from the node's totals. Both are facts of the whole party, taken here in one pass over the chunks
when the party is opened (:class:`SlotLayout`); each level then sums the dense (node, feature, slot) histograms of
the quantised values over the chunks, keeps the used slots and scans them with the same compiled ``scan``, on the
same integers: the same gains to the last bit, so the same votes.

Where the chunks come from: a slots dataset on this machine (:class:`LocalChunks`, ``ChunkedSlots``), or parts of
one on Dask workers (:class:`DaskChunks`): each worker runs the pass over its part's chunks and the party adds the
parts' sums (or concatenates its rows' new nodes).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numba import njit

from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedRows, FixedSums, RowGroups
from fgbdt_chain.node.kernels.vote_histograms import MIN_SCALE, quantise, scan, vote_scale
from fgbdt_chain.node.protocol.chunked_party import ChunkedSlots, DaskPart, _empty, total_sums
from fgbdt_chain.node.protocol.local_party import route

Pass = Callable[..., Any]
"""A per-chunk function: ``fn(slots, *row_slices, *args)``, with ``slots`` the chunk's (rows, features) ``uint8``
slots and ``row_slices`` the chunk's stretch of each per-row array (None stays None)."""


class Chunks(Protocol):
    """Where a party's slots are read from, a pass at a time."""

    @property
    def n_rows(self) -> int: ...

    @property
    def n_features(self) -> int: ...

    @property
    def nbins(self) -> int: ...

    def run(self, fn: Pass, rows: Sequence[np.ndarray | None], *args: Any) -> list[Any]:
        """``fn`` over every chunk in row order, each with its stretch of ``rows``: the results, in row order."""
        ...


def _over_chunks(source: ChunkedSlots, fn: Pass, rows: Sequence[np.ndarray | None], args: tuple[Any, ...]) -> list[Any]:
    out = []
    seen = 0
    for lo, slots in source.chunks():
        hi = lo + slots.shape[0]
        out.append(fn(slots, *(None if a is None else a[lo:hi] for a in rows), *args))
        seen = hi
    for a in rows:
        if a is not None and a.shape[0] != seen:
            raise ValueError(f"{source.path}: {seen} rows of slots but {a.shape[0]} rows given")
    return out


@dataclass(frozen=True)
class LocalChunks:
    """A slots dataset on this machine (``ChunkedSlots``), read a chunk at a time."""

    slots: ChunkedSlots

    @property
    def n_rows(self) -> int:
        return self.slots.n_rows

    @property
    def n_features(self) -> int:
        return self.slots.n_features

    @property
    def nbins(self) -> int:
        return self.slots.nbins

    def run(self, fn: Pass, rows: Sequence[np.ndarray | None], *args: Any) -> list[Any]:
        return _over_chunks(self.slots, fn, rows, args)


def _part_run(
    path: str, n_features: int, nbins: int, chunk_rows: int, fn: Pass, rows: list[np.ndarray | None], args: tuple
) -> list[Any]:
    """A worker's task: the pass over its part's chunks."""
    return _over_chunks(ChunkedSlots(Path(path), n_features, nbins, chunk_rows), fn, rows, args)


class DaskChunks:
    """A party's slots in parts on Dask workers (``DaskPart``: a slots dataset on a worker's disk and where its rows
    start): each pass runs on the workers, each over its part, and comes back in row order.

    A per-row array is sent to the workers once, each its part's stretch, and kept there while the party holds the
    array: a tree's fixed-point rows and vote values serve every level, a level's positions its votes and its
    histograms, so a pass sends only its small arguments. So a per-row array given to a pass must not be changed in
    place afterwards (``PartyWork`` makes new ones). ``address`` is the scheduler's (the party's configuration) or a
    ``distributed.Client`` already connected."""

    def __init__(self, address: Any, parts: Sequence[DaskPart], n_features: int, nbins: int, chunk_rows: int) -> None:
        from distributed import Client  # the scale extra: imported when used

        self.client = address if isinstance(address, Client) else Client(address)
        self.own_client = not isinstance(address, Client)
        self.parts = sorted(parts, key=lambda p: p.start)
        ends = [p.start + p.rows for p in self.parts]
        if not self.parts or [p.start for p in self.parts] != [0, *ends[:-1]]:
            raise ValueError("the parts must cover the party's rows from 0 without gaps or overlaps")
        self.n_rows = ends[-1]
        self.n_features, self.nbins, self.chunk_rows = n_features, nbins, chunk_rows
        self._sent: dict[int, tuple[weakref.ref[np.ndarray], list[Any]]] = {}

    def _on_workers(self, a: np.ndarray) -> list[Any]:
        """Each part's stretch of ``a`` on its worker (futures), sent when ``a`` was not sent before."""
        self._sent = {k: v for k, v in self._sent.items() if v[0]() is not None}
        hit = self._sent.get(id(a))
        if hit is not None and hit[0]() is a:
            return hit[1]
        # copies: a view would keep ``a`` alive from an in-process worker, and with it this entry, for ever
        futures = [
            self.client.scatter(
                a[p.start : p.start + p.rows].copy(), workers=None if p.worker is None else [p.worker], hash=False
            )
            for p in self.parts
        ]
        self._sent[id(a)] = (weakref.ref(a), futures)
        return futures

    def run(self, fn: Pass, rows: Sequence[np.ndarray | None], *args: Any) -> list[Any]:
        for a in rows:
            if a is not None and a.shape[0] != self.n_rows:
                raise ValueError(f"{a.shape[0]} rows given, the parts hold {self.n_rows}")
        sent = [None if a is None else self._on_workers(a) for a in rows]
        futures = []
        for k, p in enumerate(self.parts):
            part_rows = [None if s is None else s[k] for s in sent]
            workers = None if p.worker is None else [p.worker]
            futures.append(
                self.client.submit(
                    _part_run,
                    p.path,
                    self.n_features,
                    self.nbins,
                    self.chunk_rows,
                    fn,
                    part_rows,
                    args,
                    workers=workers,
                    pure=False,
                )
            )
        return [r for part in self.client.gather(futures) for r in part]

    def close(self) -> None:
        if self.own_client:
            self.client.close()


def _slot_counts(slots: np.ndarray, nbins: int) -> np.ndarray:
    """Rows per (feature, slot) of a chunk."""
    if slots.size and int(slots.max()) >= nbins:
        raise ValueError(f"slot {int(slots.max())} out of range for {nbins} slots")
    f = slots.shape[1]
    flat = (slots.astype(np.int64) + np.arange(f, dtype=np.int64) * nbins).ravel()
    return np.bincount(flat, minlength=f * nbins).reshape(f, nbins)


@dataclass(frozen=True)
class SlotLayout:
    """The vote layout ``BinnedRows`` builds from the whole party's slots: each feature's used slots as compact
    cells (``cell_of``, ``cell_start``) and its default (most common) slot's cell."""

    cell_of: np.ndarray
    cell_start: np.ndarray
    default_cell: np.ndarray
    used_slots: np.ndarray
    """For each compact cell, its flat (feature * nbins + slot) index in a dense histogram."""

    @classmethod
    def of(cls, per_cell: np.ndarray) -> SlotLayout:
        """From the party's rows per (feature, slot), exactly as ``BinnedRows.__init__`` derives it."""
        n_features = per_cell.shape[0]
        used = per_cell > 0
        used[:, 0] |= ~used.any(axis=1)
        cell_of = np.where(used, np.cumsum(used.ravel()).reshape(used.shape) - 1, -1).astype(np.int64)
        cell_start = np.concatenate(([0], np.cumsum(used.sum(axis=1)))).astype(np.int64)
        default_cell = cell_of[np.arange(n_features), per_cell.argmax(axis=1)]
        return cls(cell_of, cell_start, default_cell, np.flatnonzero(used.ravel()))


@njit(cache=True, nogil=True)
def _dense_votes(  # pragma: no cover - compiled
    slots: np.ndarray, k_of_row: np.ndarray, qg: np.ndarray, qh: np.ndarray, num_groups: int, nbins: int
) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's vote histograms, dense: (groups, features * nbins, 3) sums of the quantised g, h and the rows, and
    the groups' totals (groups, 3)."""
    n, f = slots.shape
    hist = np.zeros((num_groups, f * nbins, 3), dtype=np.int64)
    tot = np.zeros((num_groups, 3), dtype=np.int64)
    for r in range(n):
        k = k_of_row[r]
        if k < 0:
            continue
        if k >= num_groups:
            raise ValueError("a row's group is not below num_groups")
        gr, hr = qg[r], qh[r]
        tot[k, 0] += gr
        tot[k, 1] += hr
        tot[k, 2] += 1
        for j in range(f):
            c = j * nbins + slots[r, j]
            hist[k, c, 0] += gr
            hist[k, c, 1] += hr
            hist[k, c, 2] += 1
    return hist, tot


def _vote_pass(
    slots: np.ndarray, k_of_row: np.ndarray, g: np.ndarray, h: np.ndarray, scale: int, num_groups: int, nbins: int
) -> tuple[np.ndarray, np.ndarray]:
    qg = np.empty(g.shape[0], dtype=np.int64)
    qh = np.empty(h.shape[0], dtype=np.int64)
    quantise(np.ascontiguousarray(g, dtype=np.float64), scale, qg)
    quantise(np.ascontiguousarray(h, dtype=np.float64), scale, qh)
    return _dense_votes(slots, np.ascontiguousarray(k_of_row, dtype=np.int64), qg, qh, num_groups, nbins)


def _candidate_pass(
    slots: np.ndarray,
    k_of_row: np.ndarray,
    g_hi: np.ndarray,
    g_lo: np.ndarray,
    h_hi: np.ndarray,
    h_lo: np.ndarray,
    count: np.ndarray,
    candidates: np.ndarray,
    nbins: int,
) -> FixedSums:
    from fgbdt_chain.node.kernels.histogram import candidate_sums

    groups = RowGroups.of(k_of_row, candidates.shape[0])
    rows = FixedRows(g_hi, g_lo, h_hi, h_lo, count)
    return candidate_sums(groups, np.ascontiguousarray(slots.T, dtype=np.uint8), candidates, rows, nbins)


def _cells_pass(slots: np.ndarray, k_of_row: np.ndarray, candidates: np.ndarray, nbins: int) -> np.ndarray:
    """A chunk's rows in the level (group >= 0), each one's cell (group * nbins + slot) in both candidates: what
    ``node.protocol.verify.VerifierLevel.of`` takes from the slots in memory, the same integers."""
    idx = np.flatnonzero(k_of_row >= 0)
    node = k_of_row[idx]
    out = np.empty((2, idx.size), dtype=np.int64)
    for r in range(2):
        out[r] = node * nbins + slots[idx, candidates[node, r]].astype(np.int64)
    return out


def route_rows(rows: BinnedRows, node_id: np.ndarray, splits: dict[int, tuple[int, int]]) -> np.ndarray:
    """Each row at a split node to its child: over the chunks for ``ChunkedRows``, else over the slots in memory
    (``node.protocol.local_party.route``), the same node ids either way."""
    if isinstance(rows, ChunkedRows):
        return rows.route(node_id, splits)
    return route(rows.slots, node_id, splits)


def _route_pass(slots: np.ndarray, node_id: np.ndarray, feature: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """``node.protocol.local_party.route`` of a chunk's rows, the splits as arrays by node id (-1: no split)."""
    out = node_id.copy()
    at = node_id.clip(max=feature.shape[0] - 1)
    rows = np.nonzero((node_id < feature.shape[0]) & (feature[at] >= 0))[0]
    at = node_id[rows]
    out[rows] = 2 * at + (slots[rows, feature[at]] > threshold[at]).astype(np.int64)
    return out


@dataclass(frozen=True)
class RowsAt(RowGroups):
    """A level's groups as each row's group (-1: none), as the chunked passes take them: no row lists."""

    group_of_row: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


class ChunkedRows(BinnedRows):
    """``BinnedRows``' searches a party runs (``LocalParty``'s votes and candidate histograms, and routing, and a
    verifier's cells, ``level_cells``) with its slots read chunk by chunk from ``chunks`` (module docstring). The
    slots are never held whole: the simulator's own partitions (``split_groups``) and the float histograms of the
    overlap rule's estimate, which need them, are refused by name."""

    def __init__(self, chunks: Chunks) -> None:
        self.chunks = chunks
        self.n_rows, self.n_features, self.nbins = chunks.n_rows, chunks.n_features, chunks.nbins
        if self.n_rows >= 2**31:
            raise ValueError("at most 2**31 - 1 rows")
        counts = chunks.run(_slot_counts, [], self.nbins)
        per_cell = sum(counts[1:], counts[0]) if counts else np.zeros((self.n_features, self.nbins), np.int64)
        layout = SlotLayout.of(per_cell)
        self.layout = layout
        self.cell_of, self.cell_start, self.default_cell = layout.cell_of, layout.cell_start, layout.default_cell

    @property
    def slots(self) -> np.ndarray:  # type: ignore[override]
        raise NotImplementedError("a chunked party's slots are read chunk by chunk (ChunkedRows.route routes them)")

    def groups(self, group_of_row: np.ndarray, num_groups: int) -> RowsAt:
        self._check_rows(group_of_row)
        if num_groups < 0:
            raise ValueError("num_groups must be non-negative")
        empty = np.zeros(0, dtype=np.int64)
        return RowsAt(empty, np.zeros(num_groups + 1, dtype=np.int64), np.ascontiguousarray(group_of_row, np.int64))

    def best_gains(
        self, group_of_row: np.ndarray, num_groups: int, g: np.ndarray, h: np.ndarray, lam: float, min_rows: int = 1
    ) -> np.ndarray:
        """``BinnedRows.best_gains``, its histograms summed over the chunks (module docstring)."""
        self._check_rows(group_of_row, g, h)
        g, h = np.ascontiguousarray(g, dtype=np.float64), np.ascontiguousarray(h, dtype=np.float64)
        scale = int(vote_scale(g, h))
        if scale < MIN_SCALE:
            raise ValueError("vote values must be finite and small enough to sum in fixed point")
        k = int(num_groups)
        parts = self.chunks.run(_vote_pass, [group_of_row, g, h], scale, k, self.nbins)
        hist = np.zeros((k, self.n_features * self.nbins, 3), dtype=np.int64)
        tot = np.zeros((k, 3), dtype=np.int64)
        for ph, pt in parts:
            hist += ph
            tot += pt
        compact = np.ascontiguousarray(hist[:, self.layout.used_slots, :])
        best = np.full((k, self.n_features), -np.inf)
        inv = 2.0 ** (-scale)
        for j in range(k):
            scan(j, compact, tot, self.cell_start, self.default_cell, inv, float(lam), int(min_rows), best)
        return best

    def group_candidates_fixed(self, groups: RowGroups, features: np.ndarray, rows: FixedRows) -> FixedSums:
        """``BinnedRows.group_candidates_fixed``: each chunk's exact sums, added limb by limb."""
        if not isinstance(groups, RowsAt):
            raise TypeError("a chunked party's groups come from ChunkedRows.groups")
        if rows.count.shape != (self.n_rows,):
            raise ValueError(f"fixed rows must have shape ({self.n_rows},)")
        cand = np.ascontiguousarray(features, dtype=np.int64)
        if cand.ndim != 2 or cand.shape[0] != groups.num_groups:
            raise ValueError(f"features must have shape ({groups.num_groups}, C), got {cand.shape}")
        if cand.size and not (int(cand.min()) >= 0 and int(cand.max()) < self.n_features):
            raise ValueError(f"candidate features must be in [0, {self.n_features})")
        per_row = [groups.group_of_row, rows.g_hi, rows.g_lo, rows.h_hi, rows.h_lo, rows.count]
        parts = self.chunks.run(_candidate_pass, per_row, cand, self.nbins)
        return total_sums(parts) if parts else _empty(cand, self.nbins)

    def route(self, node_id: np.ndarray, splits: dict[int, tuple[int, int]]) -> np.ndarray:
        """``node.protocol.local_party.route`` over the chunks: each row at a split node to its child."""
        self._check_rows(node_id)
        if not splits:
            return node_id.copy()
        size = max(splits) + 1
        feature = np.full(size, -1, dtype=np.int64)
        threshold = np.zeros(size, dtype=np.int64)
        for nid, (f, t) in splits.items():
            feature[nid], threshold[nid] = f, t
        parts = self.chunks.run(_route_pass, [np.ascontiguousarray(node_id, np.int64)], feature, threshold)
        return np.concatenate(parts) if parts else node_id.copy()

    def level_cells(self, k_of_row: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """The verifier's cells of a level over the chunks (``_cells_pass``): for the rows in the level (group
        ``k_of_row`` >= 0), in row order, their cell in each of their group's two candidate features, (2, rows).
        The only part of a verifier's work that reads the slots; its statistics then run on per-row arrays."""
        self._check_rows(k_of_row)
        cand = np.ascontiguousarray(candidates, dtype=np.int64)
        if cand.ndim != 2 or cand.shape[1] != 2:
            raise ValueError(f"candidates must have shape (groups, 2), got {cand.shape}")
        if cand.size and not (int(cand.min()) >= 0 and int(cand.max()) < self.n_features):
            raise ValueError(f"candidate features must be in [0, {self.n_features})")
        k = np.ascontiguousarray(k_of_row, dtype=np.int64)
        if k.size and int(k.max()) >= cand.shape[0]:
            raise ValueError("a row's group is not below the number of candidate rows")
        parts = self.chunks.run(_cells_pass, [k], cand, self.nbins)
        return np.concatenate(parts, axis=1) if parts else np.zeros((2, 0), dtype=np.int64)

    def candidate_histograms(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a chunked party sends exact histograms only (group_candidates_fixed)")

    def group_candidates(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a chunked party sends exact histograms only (group_candidates_fixed)")

    def split_groups(self, *args: Any, **kwargs: Any) -> RowGroups:
        raise NotImplementedError("a chunked party routes its rows by node id (ChunkedRows.route)")
