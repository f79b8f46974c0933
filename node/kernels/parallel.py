"""The simulated parties' independent work of a level, on several cores.

Why: ``simulate`` runs M parties in one process, and some of a level's party-side work is one compiled kernel per
party reading only that party's rows: the votes' local split search, and at a tree's root the verifiers'
statistics. The kernels are ``nogil``, so Python threads run them at once. Threads rather than numba's
``parallel=True``: numba's default (workqueue) threading layer aborts when two Python threads enter parallel
kernels at once, and the API server and the node processes run threads.

The parties are dealt once into as many blocks as threads, balanced by their rows (what the kernels' work follows),
and a phase is one task per block, not one per party: the calling thread runs the first block itself while
persistent worker threads, shared by the process, run the others. A hand-over still costs about 0.1 ms (waking a
sleeping thread, twice, measured on a 2-core virtual machine), and the Python between the kernels takes turns on
the interpreter lock, so work of a few tens of microseconds per party gains nothing on threads (``node.sim.fvtree``
keeps it on the calling thread).

Results come back in party order, and an exception is the first one in party order, as a loop over the parties
would raise it; the caller keeps whatever changes shared state (refusals, observers) on its own thread, in party
order, so the results are the same bit for bit whatever the number of threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

T = TypeVar("T")


class _Worker:
    """A thread that runs one task at a time, handed over and back through two locks: a level's phase is a few
    hundred microseconds, and an executor's futures and queue cost a third more per hand-over than the locks."""

    def __init__(self) -> None:
        self._go = threading.Lock()
        self._done = threading.Lock()
        self._go.acquire()
        self._done.acquire()
        self._task: Callable[[], None] = _nothing
        threading.Thread(target=self._serve, name="fgbdt-parties", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self._go.acquire()
            try:
                self._task()
            finally:
                self._task = _nothing  # an idle worker must not keep the last task's federation alive
                self._done.release()

    def start(self, task: Callable[[], None]) -> None:
        self._task = task
        self._go.release()

    def wait(self) -> None:
        self._done.acquire()


def _nothing() -> None:
    return None


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _forget_workers() -> None:
    """A forked child has none of its parent's threads: it starts its own workers when it needs them, under a fresh
    lock (the parent's may have been held by another thread at the fork)."""
    global _idle_lock
    _idle.clear()
    _idle_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_workers)


def _take(n: int) -> list[_Worker]:
    """``n`` idle workers of the process (started when too few are idle), for one caller until given back."""
    with _idle_lock:
        taken = [_idle.pop() for _ in range(min(n, len(_idle)))]
    return taken + [_Worker() for _ in range(n - len(taken))]


def _give_back(workers: list[_Worker]) -> None:
    with _idle_lock:
        _idle.extend(workers)


def default_threads() -> int:
    """Every core the process may run on."""
    return max(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 1)


def balanced_blocks(sizes: Sequence[int], blocks: int) -> list[list[int]]:
    """The indices of ``sizes`` dealt into at most ``blocks`` non-empty blocks of near-equal total size (largest
    first, each to the lightest block so far; ties to the lower index), each block in increasing order."""
    out: list[list[int]] = [[] for _ in range(max(1, min(blocks, len(sizes))))]
    load = [0] * len(out)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        b = min(range(len(out)), key=lambda b: (load[b], b))
        out[b].append(i)
        load[b] += sizes[i]
    return sorted((sorted(b) for b in out if b), key=lambda b: b[0]) or [[]]


class PartyThreads:
    """Runs a function of the party index over the parties on ``threads`` threads (None: every core; 1: a plain
    loop on the calling thread), the parties dealt into blocks by their ``sizes`` (rows)."""

    def __init__(self, sizes: Sequence[int], threads: int | None = None) -> None:
        self.threads = default_threads() if threads is None else threads
        if self.threads < 1:
            raise ValueError(f"threads must be at least 1, got {self.threads}")
        self.parties = len(sizes)
        self.blocks = balanced_blocks(sizes, self.threads)

    def map(self, fn: Callable[[int], T]) -> list[T]:
        """``[fn(i) for i in range(self.parties)]``, each block's parties in one task."""
        blocks = self.blocks
        if len(blocks) == 1:
            return [fn(i) for i in blocks[0]]
        # each block stops at its first exception, as the loop would; the lowest party's is raised
        done: dict[int, T] = {}
        failed: dict[int, BaseException] = {}

        def run(block: list[int]) -> None:
            for i in block:
                try:
                    done[i] = fn(i)
                except BaseException as exc:  # re-raised below, in party order
                    failed[i] = exc
                    return

        workers = _take(len(blocks) - 1)
        try:
            for worker, block in zip(workers, blocks[1:], strict=True):
                worker.start(partial(run, block))
            run(blocks[0])
        finally:
            for worker in workers:
                worker.wait()
            _give_back(workers)
        if failed:
            raise failed[min(failed)]
        return [done[i] for i in range(self.parties)]
