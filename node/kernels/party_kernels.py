"""Every simulated party's kernel of a level phase in one compiled call, the parties spread over the cores.

Why: ``simulate`` runs M parties in one process, and a level's party-side phases (the votes' refitted histograms,
the exact candidate histograms, the splits' partitions) are each one kernel per party of a few tens to a hundred
microseconds. Handing them to Python threads (``node.kernels.parallel``) costs about 0.1 ms per hand-over and turns of
the interpreter lock, as much as the candidates and partitions themselves, so those stayed on one thread. Here each
phase is one numba call whose loop over the parties is a ``prange``: OpenMP's threads take the parties with no
interpreter in between, and one Python call replaces M.

Each party's work is the very kernel its node runs (``node.kernels.vote_histograms.level_gains``,
``node.kernels.histogram``'s
``candidates_into`` and ``partition_into``) on the same arrays, so the floats and integers are the same bit for bit
whatever the number of threads (tests compare them with the per-party calls). The votes' histograms are kept from
level to level here, so that a split's larger child is its parent less the smaller; a node sums both from its rows,
which gives the same integers. A ``threads=1`` federation, or a process where numba has no
thread-safe threading layer, runs the same loop serially: numba's workqueue layer aborts when two Python threads
enter parallel kernels at once, and trainings may run on threads. So does a process forked from one that compiled
them: GNU OpenMP does not survive a fork, and numba kills a forked child that runs a parallel kernel. (A party node,
forked by ``deploy.party_forks``, runs its own kernels, per party, serially anyway.) An exception is never raised
on OpenMP's threads, where it would be lost: a kernel flags what is wrong and the caller raises.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.typed import List

from fgbdt_chain.node.kernels.histogram import (
    BinnedRows,
    FixedRows,
    RowGroups,
    _check_features,
    _check_splits,
    candidates_into,
    counts_from_votes,
    pair_limbs_into,
    partition_into,
    votes_into,
)
from fgbdt_chain.node.kernels.parallel import balanced_blocks, default_threads
from fgbdt_chain.node.kernels.vote_histograms import level_gains, quantise_votes

Arrays = Sequence[np.ndarray]
"""One array per party, in party order, as a ``numba.typed.List`` (its arrays alike): one compiled kernel serves
every party count, where a tuple would be compiled again for each (15 s for the six kernels)."""

numba.config.THREADING_LAYER = "threadsafe"  # type: ignore[attr-defined]
"""tbb or OpenMP, never workqueue (module docstring); set before the first parallel launch of the process."""


@njit(cache=True, nogil=True)
def _gains_of(  # pragma: no cover - compiled
    p: int,
    order: Arrays,
    start: np.ndarray,
    parents: np.ndarray,
    prev: Arrays,
    prev_tot: Arrays,
    hist: Arrays,
    tot: Arrays,
    row_cells: Arrays,
    tail_ptr: Arrays,
    tail_cell: Arrays,
    cell_start: Arrays,
    default_cell: Arrays,
    qg: Arrays,
    qh: Arrays,
    inv: np.ndarray,
    lam: float,
    min_rows: int,
    active: np.ndarray,
    kept: np.ndarray,
    keeps: np.ndarray,
    out: np.ndarray,
    votes: np.ndarray,
) -> None:
    # the party's slice starts at -inf here, on the party's thread: filled by the caller, a level of 128 groups
    # was half a megabyte written on one thread while the other core waited
    out[p][:] = -np.inf
    if not active[p]:
        votes[p][:] = -1
        keeps[p] = False
        return
    level_gains(
        order[p],
        start[p],
        parents if kept[p] else parents[:0],
        prev[p],
        prev_tot[p],
        hist[p],
        tot[p],
        row_cells[p],
        tail_ptr[p],
        tail_cell[p],
        cell_start[p],
        default_cell[p],
        qg[p],
        qh[p],
        inv[p],
        lam,
        min_rows,
        out[p],
    )
    votes_into(out[p], votes[p])
    keeps[p] = True


# Each phase's loop over the blocks of parties (``blocks_of``) comes twice, as a ``prange`` and as a plain loop
# (``run_on_cores`` picks one), with the arguments spelled out: passed as one tuple, they cost 50 us of dispatch per
# call (numba types a tuple of lists in Python), more than the partition itself.


@njit(cache=True, nogil=True, parallel=True)
def _gains_parallel(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    order: Arrays,
    start: np.ndarray,
    parents: np.ndarray,
    prev: Arrays,
    prev_tot: Arrays,
    hist: Arrays,
    tot: Arrays,
    row_cells: Arrays,
    tail_ptr: Arrays,
    tail_cell: Arrays,
    cell_start: Arrays,
    default_cell: Arrays,
    qg: Arrays,
    qh: Arrays,
    inv: np.ndarray,
    lam: float,
    min_rows: int,
    active: np.ndarray,
    kept: np.ndarray,
    keeps: np.ndarray,
    out: np.ndarray,
    votes: np.ndarray,
) -> None:
    for b in prange(block_start.shape[0] - 1):
        for t in range(block_start[b], block_start[b + 1]):
            p = block_party[t]
            _gains_of(
                p,
                order,
                start,
                parents,
                prev,
                prev_tot,
                hist,
                tot,
                row_cells,
                tail_ptr,
                tail_cell,
                cell_start,
                default_cell,
                qg,
                qh,
                inv,
                lam,
                min_rows,
                active,
                kept,
                keeps,
                out,
                votes,
            )


@njit(cache=True, nogil=True)
def _gains_serial(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    order: Arrays,
    start: np.ndarray,
    parents: np.ndarray,
    prev: Arrays,
    prev_tot: Arrays,
    hist: Arrays,
    tot: Arrays,
    row_cells: Arrays,
    tail_ptr: Arrays,
    tail_cell: Arrays,
    cell_start: Arrays,
    default_cell: Arrays,
    qg: Arrays,
    qh: Arrays,
    inv: np.ndarray,
    lam: float,
    min_rows: int,
    active: np.ndarray,
    kept: np.ndarray,
    keeps: np.ndarray,
    out: np.ndarray,
    votes: np.ndarray,
) -> None:
    for b in range(block_start.shape[0] - 1):
        for t in range(block_start[b], block_start[b + 1]):
            p = block_party[t]
            _gains_of(
                p,
                order,
                start,
                parents,
                prev,
                prev_tot,
                hist,
                tot,
                row_cells,
                tail_ptr,
                tail_cell,
                cell_start,
                default_cell,
                qg,
                qh,
                inv,
                lam,
                min_rows,
                active,
                kept,
                keeps,
                out,
                votes,
            )


@njit(cache=True, nogil=True)
def _quantise_votes(  # pragma: no cover - compiled
    g: Arrays, h: Arrays, qg: Arrays, qh: Arrays, inv: np.ndarray
) -> int:
    """Every party's ``quantise_votes`` (``inv``: its 2^-scale); the first party whose values do not fit, or -1."""
    for p in range(len(g)):
        inv[p] = quantise_votes(g[p], h[p], qg[p], qh[p])
        if inv[p] == 0.0:
            return p
    return -1


@njit(cache=True, nogil=True)
def _party_candidates(  # pragma: no cover - compiled
    p: int,
    order: Arrays,
    start: np.ndarray,
    slots_t: Arrays,
    features: np.ndarray,
    g_hi: Arrays,
    g_lo: Arrays,
    h_hi: Arrays,
    h_lo: Arrays,
    count: Arrays,
    from_votes: np.ndarray,
    cell_of: Arrays,
    vote_hist: Arrays,
    ghi: np.ndarray,
    glo: np.ndarray,
    hhi: np.ndarray,
    hlo: np.ndarray,
    hn: np.ndarray,
) -> None:
    """Party ``p``'s candidate sums into zeroed (groups, C, nbins) arrays: its counts from its vote histograms of
    the level where ``from_votes[p]`` (``TreeLevels.candidates_fixed``), else summed with the limbs."""
    if from_votes[p]:
        pair_limbs_into(
            order[p], start[p], slots_t[p], features, g_hi[p], g_lo[p], h_hi[p], h_lo[p], ghi, glo, hhi, hlo
        )
        counts_from_votes(features, cell_of[p], vote_hist[p], hn)
    else:
        candidates_into(
            order[p],
            start[p],
            slots_t[p],
            features,
            g_hi[p],
            g_lo[p],
            h_hi[p],
            h_lo[p],
            count[p],
            ghi,
            glo,
            hhi,
            hlo,
            hn,
        )


@njit(cache=True, nogil=True, parallel=True)
def _candidates_parallel(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    order: Arrays,
    start: np.ndarray,
    slots_t: Arrays,
    features: np.ndarray,
    g_hi: Arrays,
    g_lo: Arrays,
    h_hi: Arrays,
    h_lo: Arrays,
    count: Arrays,
    from_votes: np.ndarray,
    cell_of: Arrays,
    vote_hist: Arrays,
    ghi: np.ndarray,
    glo: np.ndarray,
    hhi: np.ndarray,
    hlo: np.ndarray,
    hn: np.ndarray,
) -> None:
    _check_features(features, slots_t[0].shape[0])
    for b in prange(block_start.shape[0] - 1):
        for t in range(block_start[b], block_start[b + 1]):
            p = block_party[t]
            # summed in arrays of the thread's own, then copied: the parties' slices of the outputs share cache lines
            # at a level of one or two nodes, and two threads adding into one line take turns owning it
            sums = np.zeros((5, ghi.shape[1], ghi.shape[2], ghi.shape[3]), dtype=np.int64)
            _party_candidates(
                p,
                order,
                start,
                slots_t,
                features,
                g_hi,
                g_lo,
                h_hi,
                h_lo,
                count,
                from_votes,
                cell_of,
                vote_hist,
                sums[0],
                sums[1],
                sums[2],
                sums[3],
                sums[4],
            )
            ghi[p] = sums[0]
            glo[p] = sums[1]
            hhi[p] = sums[2]
            hlo[p] = sums[3]
            hn[p] = sums[4]


@njit(cache=True, nogil=True)
def _candidates_serial(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    order: Arrays,
    start: np.ndarray,
    slots_t: Arrays,
    features: np.ndarray,
    g_hi: Arrays,
    g_lo: Arrays,
    h_hi: Arrays,
    h_lo: Arrays,
    count: Arrays,
    from_votes: np.ndarray,
    cell_of: Arrays,
    vote_hist: Arrays,
    ghi: np.ndarray,
    glo: np.ndarray,
    hhi: np.ndarray,
    hlo: np.ndarray,
    hn: np.ndarray,
) -> None:
    _check_features(features, slots_t[0].shape[0])
    for b in range(block_start.shape[0] - 1):
        for t in range(block_start[b], block_start[b + 1]):
            p = block_party[t]
            _party_candidates(
                p,
                order,
                start,
                slots_t,
                features,
                g_hi,
                g_lo,
                h_hi,
                h_lo,
                count,
                from_votes,
                cell_of,
                vote_hist,
                ghi[p],
                glo[p],
                hhi[p],
                hlo[p],
                hn[p],
            )


@njit(cache=True, nogil=True, parallel=True)
def _partition_parallel(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    slots_t: Arrays,
    order: Arrays,
    start: np.ndarray,
    split_feature: np.ndarray,
    split_threshold: np.ndarray,
    node_id: Arrays,
    group_of_row: Arrays,
    new_order: Arrays,
    new_start: np.ndarray,
) -> None:
    _check_splits(split_feature, slots_t[0].shape[0])
    for b in prange(block_start.shape[0] - 1):
        for t in range(block_start[b], block_start[b + 1]):
            p = block_party[t]
            partition_into(
                slots_t[p],
                order[p],
                start[p],
                split_feature,
                split_threshold,
                node_id[p],
                group_of_row[p],
                new_order[p],
                new_start[p],
            )


@njit(cache=True, nogil=True)
def _partition_serial(  # pragma: no cover - compiled
    block_start: np.ndarray,
    block_party: np.ndarray,
    slots_t: Arrays,
    order: Arrays,
    start: np.ndarray,
    split_feature: np.ndarray,
    split_threshold: np.ndarray,
    node_id: Arrays,
    group_of_row: Arrays,
    new_order: Arrays,
    new_start: np.ndarray,
) -> None:
    _check_splits(split_feature, slots_t[0].shape[0])
    for b in range(block_start.shape[0] - 1):
        for t in range(block_start[b], block_start[b + 1]):
            p = block_party[t]
            partition_into(
                slots_t[p],
                order[p],
                start[p],
                split_feature,
                split_threshold,
                node_id[p],
                group_of_row[p],
                new_order[p],
                new_start[p],
            )


def _listed(arrays: Sequence[np.ndarray], dtype: type | None = None) -> Arrays:
    """The arrays as a numba list, which shares their memory: all of one dtype (``dtype``, or the widest, when the
    parties' cell numbers need different widths)."""
    kind = np.result_type(*arrays) if dtype is None else np.dtype(dtype)
    return List([np.ascontiguousarray(a, dtype=kind) for a in arrays])


@njit(cache=True, nogil=True)
def _restart(order: Arrays, start: np.ndarray, group_of_row: Arrays, node_id: Arrays) -> None:  # pragma: no cover
    """Every party's rows as one group, at the root (node 1)."""
    for p in range(len(order)):
        rows, groups, ids = order[p], group_of_row[p], node_id[p]
        n = rows.shape[0]
        for r in range(n):
            rows[r] = r
            groups[r] = 0
            ids[r] = 1
        start[p, 0], start[p, 1] = 0, n


FIXED_FIELDS = ("g_hi", "g_lo", "h_hi", "h_lo", "count")
"""``FixedRows``' arrays, in the kernels' argument order."""

_PARALLEL_FAILED: list[str] = []
"""Why parallel kernels cannot run in this process (no thread-safe threading layer), once found out."""


def others_running() -> int | None:
    """How many threads of other processes are running or waiting to run right now (Linux: the system's runnable
    count in ``/proc/loadavg`` less this process's threads in state R), None where that cannot be read.

    Why: OpenMP gives each thread a fixed share of a ``prange`` and waits at its end for all of them, its own
    threads spinning meanwhile. A thread that shares a core with another process's runnable thread gets that core
    only between the other's time slices, so each region waits milliseconds for it: with one core of two kept busy,
    50 trees of depth 6 on a9a took 3.4-3.9 s on two threads against 0.35 s on an idle machine (measured; Python
    threads, which sleep while they wait, took 0.46 s). So the kernels run on as many threads as there are cores
    with nothing else to run."""
    try:
        return min(_others_now(), _others_now())  # a thread runnable for an instant is not a busy core
    except (OSError, ValueError, IndexError):
        return None


def _others_now() -> int:
    """One look at ``others_running``: this process's running threads first, so that one of them going to sleep
    meanwhile (OpenMP's idle threads spin, then sleep) is not taken for another process's."""
    own = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        own += stat[stat.rindex(")") + 2] == "R"
    with open("/proc/loadavg") as f:
        running = int(f.read().split()[3].split("/")[0])
    return max(0, running - max(own, 1))


def free_threads(threads: int) -> int:
    """``threads``, or fewer where other processes keep cores of this process busy (``others_running``): the threads
    the kernels should take now."""
    if threads <= 1:
        return 1
    others = others_running()
    if others is None:
        return threads
    return max(1, min(threads, default_threads() - others))


def blocks_of(sizes: Sequence[int], threads: int) -> tuple[np.ndarray, np.ndarray]:
    """Items of these sizes (a party's rows) dealt into one block per thread of near-equal total size
    (``node.kernels.parallel.balanced_blocks``), as the kernels take them: each block's start in ``party`` and the
    items in
    block order. OpenMP gives each thread an equal share of a ``prange``'s iterations, not of their work, so the
    blocks are the iterations: with a9a's parties of 10,672, 10,672, 5,609 and 5,608 rows, parties 0 and 1 on one
    thread would leave the other waiting for a third of the time."""
    blocks = balanced_blocks(sizes, max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
    start = np.cumsum([0] + [len(b) for b in blocks]).astype(np.int64)
    return start, np.array([i for b in blocks for i in b], dtype=np.int64)


def run_on_cores(
    threads: int,
    blocks: tuple[np.ndarray, np.ndarray],
    parallel: Callable[..., None],
    serial: Callable[..., None],
    *args: object,
) -> None:
    """``parallel(*blocks, *args)`` (a ``prange`` over the ``blocks_of`` blocks) on ``threads`` threads, or
    ``serial(*blocks, *args)``, the same loop as a plain ``range``, on one thread or where numba has no thread-safe
    threading layer (module docstring)."""
    threads = min(threads, numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    if threads > 1 and not _PARALLEL_FAILED:
        # numba's thread count is per calling thread and costs as much as a small kernel to set: only when it is not
        # every thread numba has
        every = threads == numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
        before = 0
        try:
            if not every:
                before = numba.get_num_threads()
                numba.set_num_threads(threads)
            try:
                parallel(*blocks, *args)
                return
            finally:
                if not every:
                    numba.set_num_threads(before)
        except ValueError as exc:
            if not _no_layer(exc):
                raise
    serial(*blocks, *args)


def _no_layer(exc: ValueError) -> bool:
    """Whether numba refused a parallel kernel for want of a threading layer; remembered, so that every later call
    runs the serial twin."""
    if "threading layer" not in str(exc):
        return False
    _PARALLEL_FAILED.append(str(exc))
    return True


def _forked() -> None:
    """A child forked from a process that has used GNU OpenMP (compiling a parallel kernel is enough) is killed by
    numba when it runs one: its kernels run serially (a party node forked by ``deploy.party_forks`` runs its own
    serial kernels anyway)."""
    _PARALLEL_FAILED.append("forked: GNU OpenMP does not survive a fork")


os.register_at_fork(after_in_child=_forked)


LOOK_EVERY = 0.05
"""Seconds between two looks at the cores other processes keep busy (``free_threads``): a core taken by another
process costs a region milliseconds (``others_running``), so a look every 50 ms finds it within a few trees, at a
fortieth of looking at every tree on a9a."""


class PartyKernels:
    """The parties' rows, laid out once for the phases' one-call kernels, on ``threads`` threads (1: serially)."""

    KEPT_BYTES = 2**29
    """The most the vote histograms of two levels may take (every party's): above it a level sums every node from
    its rows, as a party node does, into buffers of its own. a9a's widest level takes 0.5 MiB a party; 1,000
    features of 64 bins at 512 open nodes would take 6 GiB at M = 4."""

    def __init__(self, rows: Sequence[BinnedRows], threads: int) -> None:
        if not rows:
            raise ValueError("need at least one party's rows")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        features = {r.n_features for r in rows}
        nbins = {r.nbins for r in rows}
        if len(features) != 1 or len(nbins) != 1:
            raise ValueError(f"the parties' rows disagree on features {sorted(features)} or slots {sorted(nbins)}")
        self._rows = list(rows)
        self.parties = len(rows)
        self.n_features = rows[0].n_features
        self.nbins = rows[0].nbins
        self.n_rows = [r.n_rows for r in rows]
        self.threads = min(threads, numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
        self.now = self.threads
        """The threads the current tree's kernels take (``free_threads``, looked at once per tree)."""
        self._free_before = self.threads
        self._looked_at = -math.inf
        self.row_lists: dict[tuple[object, ...], Any] = {}
        """The verifiers' buffers and row lists of this federation's roots (``verify.measure_many``'s cache):
        dropped with it."""
        self._blocks = {n: blocks_of(self.n_rows, n) for n in range(1, self.threads + 1)}
        self.row_cells = _listed([r.row_cells for r in rows])
        self.tail_cell = _listed([r.tail_cell for r in rows])
        self.tail_ptr = _listed([r.tail_ptr for r in rows], np.int64)
        self.cell_start = _listed([r.cell_start for r in rows], np.int64)
        self.default_cell = _listed([r.default_cell for r in rows], np.int64)
        self.slots_t = _listed([r.slots_t for r in rows], np.uint8)
        self.cell_of = _listed([r.cell_of for r in rows], np.int64)
        """Per party, each (feature, slot)'s cell of its vote histograms (-1: unused), where the candidates' counts
        are read (``TreeLevels.candidates_fixed``)."""
        self._no_hist = _listed([np.zeros((0, 1, 3), dtype=np.int64) for _ in rows])
        """Stands for the vote histograms where the candidates' counts are summed from the rows."""
        # a tree's rows, in buffers the lists share with these arrays (a list costs 20 us per party to build): the
        # rows' places and node ids, the votes' gradients, the fixed-point rows, and the row groups (the current
        # order and a spare that the partition writes into, then swapped)
        self.group_of_row = [np.zeros(n, dtype=np.int64) for n in self.n_rows]
        self.node_id = [np.ones(n, dtype=np.int64) for n in self.n_rows]
        self._g_vote = [np.zeros(n) for n in self.n_rows]
        self._h_vote = [np.zeros(n) for n in self.n_rows]
        self._fixed = [[np.zeros(n, dtype=np.int64) for n in self.n_rows] for _ in FIXED_FIELDS]
        # the logistic loss's rows made in place (``logistic_tree``): gradients, hessians and e^-|score|
        self._g = [np.zeros(n) for n in self.n_rows]
        self._h = [np.zeros(n) for n in self.n_rows]
        self._e = [np.zeros(n) for n in self.n_rows]
        self._inputs: tuple[list[np.ndarray], tuple[Arrays, Arrays, Arrays]] | None = None
        self._lists = {
            "g": _listed(self._g),
            "h": _listed(self._h),
            "e": _listed(self._e),
            "group_of_row": _listed(self.group_of_row),
            "node_id": _listed(self.node_id),
            "g_vote": _listed(self._g_vote),
            "h_vote": _listed(self._h_vote),
            **{name: _listed(arrays) for name, arrays in zip(FIXED_FIELDS, self._fixed, strict=True)},
        }
        self._orders = (
            _listed([np.empty(n, dtype=np.int64) for n in self.n_rows]),
            _listed([np.empty(n, dtype=np.int64) for n in self.n_rows]),
        )
        # the votes' quantised values and the histograms of two levels (``node.kernels.vote_histograms``), grown as
        # needed
        self._qg = _listed([np.zeros(n, dtype=np.int64) for n in self.n_rows])
        self._qh = _listed([np.zeros(n, dtype=np.int64) for n in self.n_rows])
        self._inv = np.ones(self.parties)
        self._cells = [int(r.cell_start[-1]) + r.row_cells.shape[1] for r in rows]
        self._hists: list[tuple[Arrays, Arrays]] = []
        self._hist_arrays: list[tuple[list[np.ndarray], list[np.ndarray]]] = []
        self._hist_groups = 0

    def __reduce__(self) -> tuple[type[PartyKernels], tuple[list[BinnedRows], int]]:
        """Copied and pickled as its rows and threads (numba lists do neither): a copy gets buffers and caches of
        its own."""
        return PartyKernels, (self._rows, self.threads)

    def tree(
        self, g_vote: Sequence[np.ndarray], h_vote: Sequence[np.ndarray], fixed: Sequence[FixedRows]
    ) -> TreeLevels:
        """A tree's levels from its root: every row in the root's group, ``group_of_row`` 0 and ``node_id`` 1 (the
        arrays of this object, which the splits update in place; valid until the next tree), on the parties'
        vote gradients and fixed-point rows (copied in)."""
        for arrays in (g_vote, h_vote, [f.count for f in fixed]):
            if len(arrays) != self.parties or any(a.shape != (n,) for a, n in zip(arrays, self.n_rows, strict=True)):
                raise ValueError(f"need one array per party of its rows ({self.n_rows})")
        for into, values in ((self._g_vote, g_vote), (self._h_vote, h_vote)):
            for a, v in zip(into, values, strict=True):
                np.copyto(a, v)
        for into, name in zip(self._fixed, FIXED_FIELDS, strict=True):
            for a, f in zip(into, fixed, strict=True):
                np.copyto(a, getattr(f, name))
        self._look()
        return TreeLevels(self, unit_counts=all(bool((f.count == 1).all()) for f in fixed))

    def logistic_tree(
        self, scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], weights: Sequence[np.ndarray] | None
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], TreeLevels] | None:
        """``tree`` on the logistic loss's rows made in place from the parties' scores, labels and w* (None: votes
        on raw gradients) by ``node.kernels.logistic_rows``: every party's (g, h), valid until the next tree, and the
        tree's levels. None where a value does not fit the fixed point (the caller's usual path raises)."""
        from fgbdt_chain.node.kernels import logistic_rows

        sources = [*scores, *labels, *(weights or [])]
        if (
            self._inputs is None
            or len(self._inputs[0]) != len(sources)
            or any(a is not b for a, b in zip(self._inputs[0], sources, strict=True))
        ):
            # the parties' own arrays (scores change in place), as numba lists once, not per tree
            lists = (_listed(scores), _listed(labels), _listed(weights if weights is not None else labels))
            self._inputs = sources, lists
        score, label, weight = self._inputs[1]
        logistic_rows.exp_neg_abs_into(self._e, scores)
        bound = np.zeros(self.parties, dtype=np.int64)
        self._look()
        kept = self._lists
        self._run(
            logistic_rows._rows_parallel,
            logistic_rows._rows_serial,
            kept["e"],
            score,
            label,
            weight,
            weights is not None,
            kept["g"],
            kept["h"],
            kept["g_vote"],
            kept["h_vote"],
            *(kept[name] for name in FIXED_FIELDS),
            bound,
        )
        # ``FixedRows.of``'s bound on the limb sums, every row counted once
        if any(b < 0 or max(int(b), 1) * max(n, 1) >= 2**62 for b, n in zip(bound.tolist(), self.n_rows, strict=True)):
            return None
        return list(zip(self._g, self._h, strict=True)), TreeLevels(self, unit_counts=True)

    def _look(self) -> None:
        """The threads this tree's kernels take (``free_threads``): fewer only when the cores were busy at this look
        and the last one, since a thread of the kernel's own or of the system runnable for an instant is often seen
        once (13 of 500 trees on an idle machine), a process that keeps a core busy every time. A look reads every
        thread's /proc entry (about 0.2 ms), so it is taken at a tree's start at most every ``LOOK_EVERY`` seconds,
        not at every tree (a9a's take 9 ms)."""
        now = time.monotonic()
        if now - self._looked_at >= LOOK_EVERY:
            self._looked_at = now
            free = free_threads(self.threads)
            self.now, self._free_before = max(free, self._free_before), free

    def _run(self, parallel: Callable[..., None], serial: Callable[..., None], *args: object) -> None:
        run_on_cores(self.now, self._blocks[self.now], parallel, serial, *args)

    def keeps_levels(self, groups: int) -> bool:
        """Whether two levels' vote histograms of ``groups`` open nodes fit in ``KEPT_BYTES``."""
        return 2 * groups * sum(self._cells) * 3 * 8 <= self.KEPT_BYTES

    def level_hists(self, groups: int) -> tuple[Arrays, Arrays]:
        """One level's vote histograms, not kept (where two levels would not fit in ``KEPT_BYTES``)."""
        return (
            _listed([np.empty((groups, c, 3), dtype=np.int64) for c in self._cells]),
            _listed([np.empty((groups, 3), dtype=np.int64) for _ in self._cells]),
        )

    def hists(self, groups: int) -> list[tuple[Arrays, Arrays]]:
        """The two levels' histogram buffers (histograms, totals per party), for at least ``groups`` groups."""
        if groups > self._hist_groups:
            size = max(groups, 2 * self._hist_groups, 8)
            arrays = []
            for which in range(2):
                hist = [np.zeros((size, c, 3), dtype=np.int64) for c in self._cells]
                tot = [np.zeros((size, 3), dtype=np.int64) for _ in self._cells]
                if self._hist_arrays:  # the level before's histograms are read by the next level
                    for p in range(self.parties):
                        hist[p][: self._hist_groups] = self._hist_arrays[which][0][p]
                        tot[p][: self._hist_groups] = self._hist_arrays[which][1][p]
                arrays.append((hist, tot))
            # the numba lists share the arrays' memory; copied from the arrays, not through the lists (a list's
            # item read from Python compiles a helper on first use: 0.27 s)
            self._hist_arrays = arrays
            self._hists = [(_listed(hist), _listed(tot)) for hist, tot in arrays]
            self._hist_groups = size
        return self._hists


class TreeLevels:
    """One tree's rows of every party, level by level: the votes' gains, the candidate histograms and the
    partition, each one call for all parties (``PartyKernels.tree``)."""

    def __init__(self, kernels: PartyKernels, unit_counts: bool = False) -> None:
        self.kernels = kernels
        self.unit_counts = unit_counts
        """Whether every row of every party counts one (no attack's weights): the candidates' counts are then the
        rows' counts, which a level's vote histograms hold already."""
        self._vote_hist = kernels._no_hist
        self._filled = np.zeros(kernels.parties, dtype=np.bool_)
        """Per party, whether ``_vote_hist`` holds its histograms of this level's groups (it voted at this level)."""
        lists = kernels._lists
        self.group_of_row, self.node_id = lists["group_of_row"], lists["node_id"]
        self.g_vote, self.h_vote = lists["g_vote"], lists["h_vote"]
        self.fixed = tuple(lists[name] for name in FIXED_FIELDS)
        self.order, self.spare = kernels._orders
        self.start = np.empty((kernels.parties, 2), dtype=np.int64)
        _restart(self.order, self.start, self.group_of_row, self.node_id)
        bad = _quantise_votes(self.g_vote, self.h_vote, kernels._qg, kernels._qh, kernels._inv)
        if bad >= 0:
            raise ValueError(f"party {bad}'s vote values are not finite or too large to sum in fixed point")
        self.kept = np.zeros(kernels.parties, dtype=np.bool_)
        """Per party, whether the buffers hold its histograms of the level before (else it starts from rows)."""
        self.keeps = np.zeros(kernels.parties, dtype=np.bool_)
        """Per party, whether this level's votes made its histograms (the next level's ``kept``)."""
        self.parents = np.zeros(0, dtype=np.int64)
        self._now = 0  # which of the two buffers this level's histograms go to
        self._voted = False

    @property
    def num_groups(self) -> int:
        return int(self.start.shape[1]) - 1

    def groups(self, party: int) -> RowGroups:
        """Party ``party``'s rows of every group now (a copy)."""
        start = self.start[party].copy()
        return RowGroups(self.order[party][: start[-1]].copy(), start)

    def best_gains(self, lam: float, min_rows: int, active: Sequence[bool]) -> np.ndarray:
        """Every active party's ``BinnedRows.best_gains`` on its vote gradients, shape (parties, groups,
        features); -inf for the others."""
        return self._gains(lam, min_rows, active)[0]

    def votes(self, lam: float, min_rows: int, active: Sequence[bool]) -> np.ndarray:
        """Every party's ``histogram.votes_from_gains`` of its ``best_gains``, shape (parties, groups), taken by the
        same call right after each party's gains (a second pass over them and its hand-over cost 15 us a level);
        -1 for an inactive party."""
        return self._gains(lam, min_rows, active)[1]

    def _gains(self, lam: float, min_rows: int, active: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
        k = self.kernels
        if len(active) != k.parties:
            raise ValueError(f"one active flag per party ({k.parties}), got {len(active)}")
        out = np.empty((k.parties, self.num_groups, k.n_features))  # each party's slice set by its kernel
        votes = np.empty((k.parties, self.num_groups), dtype=np.int64)
        flags = np.array([bool(a) for a in active], dtype=np.bool_)
        keeping = k.keeps_levels(self.num_groups)
        parents, kept = self.parents, self.kept
        if keeping:
            bufs = k.hists(self.num_groups)
            (prev, prev_tot), (hist, tot) = bufs[1 - self._now], bufs[self._now]
        else:  # too wide to keep: this level from its rows, and the next level from its rows too
            hist, tot = prev, prev_tot = k.level_hists(self.num_groups)
            parents, kept = parents[:0], np.zeros_like(kept)
        k._run(
            _gains_parallel,
            _gains_serial,
            self.order,
            self.start,
            parents,
            prev,
            prev_tot,
            hist,
            tot,
            k.row_cells,
            k.tail_ptr,
            k.tail_cell,
            k.cell_start,
            k.default_cell,
            k._qg,
            k._qh,
            k._inv,
            float(lam),
            int(min_rows),
            flags,
            kept,
            self.keeps,
            out,
            votes,
        )
        self._voted = True
        self._vote_hist = hist
        self._filled[:] = self.keeps
        if not keeping:
            self.keeps[:] = False
        return out, votes

    def candidates_fixed(
        self, features: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every party's ``BinnedRows.group_candidates_fixed`` as limbs and counts, each (parties, groups, C,
        nbins): party ``i``'s ``FixedSums`` is the five arrays' ``[i]``."""
        k = self.kernels
        if features.ndim != 2 or features.shape[0] != self.num_groups:
            raise ValueError(f"features must have shape ({self.num_groups}, C), got {features.shape}")
        shape = (k.parties, self.num_groups, features.shape[1], k.nbins)
        ghi, glo, hhi, hlo, hn = (np.zeros(shape, dtype=np.int64) for _ in range(5))
        # the counts from the level's vote histograms where every row counts one and the party voted on these
        # groups (two candidates, the votes' own level): the same integers, two updates a row fewer
        counted = self._voted and self.unit_counts and features.shape[1] == 2
        try:
            k._run(
                _candidates_parallel,
                _candidates_serial,
                self.order,
                self.start,
                k.slots_t,
                np.ascontiguousarray(features, dtype=np.int64),
                *self.fixed,
                self._filled if counted else np.zeros(k.parties, dtype=np.bool_),
                k.cell_of,
                self._vote_hist if counted else k._no_hist,
                ghi,
                glo,
                hhi,
                hlo,
                hn,
            )
        except ValueError as exc:
            if "feature index" in str(exc):
                raise ValueError(f"candidate features must be in [0, {k.n_features})") from exc
            raise
        return ghi, glo, hhi, hlo, hn

    def split(self, split_feature: np.ndarray, split_threshold: np.ndarray) -> None:
        """Every party's ``BinnedRows.split_groups``: the next level's groups, the rows' node ids and positions."""
        k = self.kernels
        if split_feature.shape != (self.num_groups,) or split_threshold.shape != (self.num_groups,):
            raise ValueError(f"need one split feature and threshold per group ({self.num_groups})")
        new_start = np.zeros((k.parties, 2 * int((split_feature >= 0).sum()) + 1), dtype=np.int64)
        k._run(
            _partition_parallel,
            _partition_serial,
            k.slots_t,
            self.order,
            self.start,
            np.ascontiguousarray(split_feature, dtype=np.int64),
            np.ascontiguousarray(split_threshold, dtype=np.int64),
            self.node_id,
            self.group_of_row,
            self.spare,
            new_start,
        )
        self.order, self.spare, self.start = self.spare, self.order, new_start
        self.kernels._orders = self.order, self.spare
        self._filled[:] = False  # the vote histograms are of the groups before the split
        # the next level's groups are the splits' children in pairs: their histograms subtract from this level's
        if self._voted:
            self.parents = np.flatnonzero(split_feature >= 0).astype(np.int64)
            self._now = 1 - self._now
            self.kept[:] = self.keeps
        else:
            self.kept[:] = False
        self._voted = False


class _Compiler(PartyKernels):
    """Compiles (or loads) both variants of each kernel for the arguments it is given, without running them."""

    def _run(self, parallel: Callable[..., None], serial: Callable[..., None], *args: object) -> None:
        compile_both(parallel, serial, *self._blocks[self.threads], *args)


def compile_both(parallel: Callable[..., None], serial: Callable[..., None], *args: object) -> None:
    """Compiles (or loads from the cache) both variants of a kernel for these arguments, without running either."""
    signature = tuple(numba.typeof(a) for a in args)
    serial.compile(signature)  # type: ignore[attr-defined]
    if _PARALLEL_FAILED:
        return
    try:
        parallel.compile(signature)  # type: ignore[attr-defined]
    except ValueError as exc:  # no threading layer: the serial twin serves
        if not _no_layer(exc):
            raise


def warm_up() -> None:
    """Load (or compile) the one-call kernels, so that a timed run measures training; nothing runs. A child forked
    afterwards (``deploy.party_forks``) runs them serially (``_forked``)."""
    rows = BinnedRows(np.array([[0, 1], [1, 0]], dtype=np.uint8), 2)
    kernels = _Compiler([rows, rows], 2)
    ones = [np.ones(2) for _ in range(2)]
    fixed = [FixedRows.of(np.ones(2), np.ones(2))] * 2
    levels = kernels.tree(ones, ones, fixed)
    kernels.logistic_tree(ones, ones, ones)
    levels.votes(1.0, 1, [True, True])
    levels.candidates_fixed(np.zeros((1, 2), dtype=np.int64))
    levels.split(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
