"""Reads of finished tasks served from memory while the chain holds nothing new about them.

Why: a completed or cancelled task no longer trains, so what the API reads of it (its state, detail, members,
contributions, model, audit) changes only through a new event of the task (a withdrawal, and nothing else the
contract allows). Read from the chain, one such read took 4 to 11 JSON-RPC calls and the decoding of every event of
the task, 10 to 70 ms of the server's CPU; under 200 clients the reads queued behind each other. Here each finished
task keeps its reads with the block they are good up to; a read older than ``recheck`` seconds is checked first with
one ``eth_blockNumber`` and, when blocks came, one ``eth_getLogs`` of the task's events since (decoded only if there
are any): none, and the reads hold up to the new block; some, and the task's reads are dropped and read again. A
write the API relays for a task drops its reads at once, so a client sees its own write. A task still open or
training is always read from the chain.

So a finished task's read is at most ``recheck`` seconds older than the chain's head, as any read is older than the
head by the time it arrives; the memory is bounded by ``tasks`` entries, the least recently used dropped first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Entry:
    """One finished task's reads, good up to ``block`` (checked at ``checked``, monotonic seconds)."""

    block: int
    checked: float
    reads: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    computing: dict[str, threading.Lock] = field(default_factory=dict)

    def guard(self, kind: str) -> threading.Lock:
        """The lock under which ``kind`` is computed: concurrent first reads compute it once, the others wait."""
        with self.lock:
            return self.computing.setdefault(kind, threading.Lock())


class FinishedTasks:
    """The reads of up to ``tasks`` finished tasks (module docstring).

    ``head`` gives the chain's latest block; ``changed(task_id, first, last)`` whether the task has an event in
    blocks ``first..last``."""

    def __init__(
        self,
        head: Callable[[], int],
        changed: Callable[[int, int, int], bool],
        tasks: int = 256,
        recheck: float = 0.1,
    ) -> None:
        self._head = head
        self._changed = changed
        self.tasks = tasks
        self.recheck = recheck
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, Entry] = OrderedDict()

    def entry(self, task_id: int) -> Entry | None:
        """The task's entry if it still holds (checked against the chain when due), else None."""
        with self._lock:
            entry = self._entries.get(task_id)
            if entry is not None:
                self._entries.move_to_end(task_id)
        if entry is None:
            return None
        if time.monotonic() - entry.checked < self.recheck:
            return entry
        with entry.lock:  # one check at a time; the others wait for it and use its answer
            if time.monotonic() - entry.checked < self.recheck:
                return entry
            latest = self._head()
            if latest > entry.block and self._changed(task_id, entry.block + 1, latest):
                self.drop(task_id)
                return None
            entry.block = max(entry.block, latest)
            entry.checked = time.monotonic()
        return entry

    def fresh(self, task_id: int, kind: str) -> Any | None:
        """The ``kind`` read of a finished task when it was checked less than ``recheck`` seconds ago, else None;
        never touches the chain, so a route may call it from the event loop before going to a thread."""
        with self._lock:
            entry = self._entries.get(task_id)
        if entry is None or time.monotonic() - entry.checked >= self.recheck:
            return None
        return entry.reads.get(kind)

    def finished(self, task_id: int, block: int) -> Entry:
        """Start keeping the reads of ``task_id``, found finished at ``block`` or later (``block`` read before the
        task's state, so that an event after the state was read is still seen)."""
        with self._lock:
            entry = self._entries.get(task_id)
            if entry is None:
                entry = self._entries[task_id] = Entry(block, time.monotonic())
                while len(self._entries) > self.tasks:
                    self._entries.popitem(last=False)
            self._entries.move_to_end(task_id)
            return entry

    def read(self, task_id: int, kind: str, compute: Callable[[], T]) -> T | None:
        """The ``kind`` read of a finished task, computed once while the task's entry holds; None when the task is
        not known to be finished (the caller reads the chain)."""
        entry = self.entry(task_id)
        if entry is None:
            return None
        with entry.guard(kind):
            if kind not in entry.reads:
                entry.reads[kind] = compute()  # into this entry: a newer entry of the task gets no older read
            value: T = entry.reads[kind]
        return value

    def drop(self, task_id: int) -> None:
        """Forget the task's reads (a write changed it)."""
        with self._lock:
            self._entries.pop(task_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
