"""The task's small events as one party reads them, incrementally: the recorded splits and leaves of every tree, the
levels' starts, their candidates and closed steps (``TreeLog``)."""

from __future__ import annotations

from collections.abc import Callable

from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.wrappers.contracts import TaskContract

RESCAN_BLOCKS = 2
"""Blocks read again by every incremental event scan (see :meth:`TreeLog.refresh`): the newest ones a node may have
announced before serving their logs, a race of a block. It was 8 while a level took nine blocks; with a level in one
block (``node.party.relay``) eight re-read eight levels' events at every read, which the node serialised and each party
parsed again."""


def read_bound(announced: int, client: ChainClient) -> tuple[int | str, int]:
    """(the block an incremental event read goes up to, the block it counts as read up to). Subscribed
    (``announced`` >= 0): the node's latest, counted up to the announced block, so no request for the number; a block
    served before it was announced is read again next time. Else the number the node gives, both."""
    if announced >= 0:
        return "latest", announced
    latest = int(client.block_number)
    return latest, latest


LIGHT_EVENTS = ("NodeSplit", "LeafSet", "LevelStarted", "CandidatesFixed", "HistogramsClosed", "VotingClosed")
"""The small events a party reads at every level, in one incremental query (:meth:`TreeLog.refresh`): the resolution
that closes a level records its splits and leaves, opens the next level and, its ballots sent ahead, fixes that
level's candidates, all in one transaction (and ``VotingClosed``, when every ballot came ahead); ``HistogramsClosed``
ends the next step. Read by their own consumers,
they were 4.3 ``eth_getLogs`` per level and party (the splits, the candidates, the level's start, the closed step);
shared, about one per step a party acts in."""


class TreeLog:
    """The recorded splits and leaves of every tree, with the levels' starts, candidates and closed histogram steps,
    fetched incrementally from the task's events (``LIGHT_EVENTS``)."""

    def __init__(self, task: TaskContract, task_id: int, announced: Callable[[], int] = lambda: -1) -> None:
        self.task, self.task_id = task, task_id
        self.announced = announced
        """The latest block a live subscription announced, -1 without one."""
        self.splits: dict[int, dict[int, tuple[int, int]]] = {}
        self.leaves: dict[int, dict[int, int]] = {}
        self.totals: dict[int, dict[int, ref.Totals]] = {}
        """Each split's children's totals (the chain's record of them), by tree and child id."""
        self.level_starts: dict[tuple[int, int], tuple[int, int]] = {}
        """Where each level's ``LevelStarted`` is: (block, log index), by (tree, level)."""
        self.candidates: dict[int, dict[int, tuple[int, int]]] = {}
        """The candidates ``CandidatesFixed`` fixed, by tree and node (of the newest tree read and the one before)."""
        self.closed: dict[tuple[int, int], int] = {}
        """Each level's ``HistogramsClosed`` submitter mask, by (tree, level) (of the newest tree read and the one
        before). Each is emitted once per tree and node, or tree and level, so a record read stays true unless the
        node loses blocks: an outage (``forget_recent``) forgets them."""
        self.voting_closed: dict[tuple[int, int], int] = {}
        """The block of each level's ``VotingClosed`` (by (tree, level), as ``closed``): in the block of its
        ``LevelStarted``, the resolution that opened it took every ballot sent ahead."""
        self.next_block = 0
        self._decoded: dict[tuple[bytes, int], int] = {}
        """The logs of the blocks read again that are already recorded (block hash and log index: block number)."""

    def forget_recent(self) -> None:
        """After an outage: a node restarted from a saved state may have lost blocks, so the level starts, candidates
        and closed steps noted from them are read again, from the start (the splits and leaves are keyed records
        that a re-read overwrites)."""
        self.level_starts.clear()
        self.candidates.clear()
        self.closed.clear()
        self.voting_closed.clear()
        self._decoded.clear()
        self.next_block = 0

    def refresh(self, since: int | None = None) -> bool:
        """Read the records added since the last refresh, or again from block ``since`` (the start of a tree whose
        records look short: bounded by one tree, where reading again from genesis grew with the chain); whether it
        read (False: no block announced since the last read).

        Subscribed, the announced block bounds what counts as read, and the node's latest is read up to without
        asking its number first (one request per refresh where there were two: the number was 5% of a party's
        CPU). A block the node served but had not announced yet is read again next time; a state that is ahead of
        the announcements reads as lag (``ChainLag``), and the announcement that follows within a millisecond steps
        the party again."""
        latest, counted = read_bound(self.announced(), self.task.client)
        if since is None and counted < self.next_block:
            return False
        # A node may report a new block number before it serves that block's logs (a known race of anvil and
        # geth alike), so the last few blocks are read again each time: the records are keyed, re-reading is
        # idempotent, and a missed log cannot leave a node without its split or leaf.
        start = max(0, self.next_block - RESCAN_BLOCKS) if since is None else since
        if since is not None:
            self._decoded.clear()  # a tree read again is read whole
        self._decoded = {k: b for k, b in self._decoded.items() if b >= start}
        client = self.task.client
        events = client.fresh_logs(self.task.contract, list(LIGHT_EVENTS), self.task_id, start, latest, self._decoded)
        newest = -1
        for ev in events:
            a = ev.args
            t = int(a["tree"])
            newest = max(newest, t)
            if ev.name == "NodeSplit":
                node = int(a["node"])
                self.splits.setdefault(t, {})[node] = (int(a["feature"]), int(a["threshold"]))
                g_l, h_l, n_l, g_r, h_r, n_r = (int(v) for v in a["sides"])
                children = self.totals.setdefault(t, {})
                children[2 * node], children[2 * node + 1] = ref.Totals(g_l, h_l, n_l), ref.Totals(g_r, h_r, n_r)
            elif ev.name == "LeafSet":
                self.leaves.setdefault(t, {})[int(a["node"])] = int(a["value"])
            elif ev.name == "LevelStarted":
                self.level_starts[(t, int(a["level"]))] = (ev.block_number, ev.log_index)
            elif ev.name == "CandidatesFixed":
                self.candidates.setdefault(t, {})[int(a["node"])] = (int(a["first"]), int(a["second"]))
            elif ev.name == "VotingClosed":
                self.voting_closed[(t, int(a["level"]))] = ev.block_number
            else:
                self.closed[(t, int(a["level"]))] = int(a["submitterMask"])
        if newest >= 0:  # what a party asks of these is about its current tree and the one before
            self.candidates = {k: v for k, v in self.candidates.items() if k >= newest - 1}
            self.closed = {k: v for k, v in self.closed.items() if k[0] >= newest - 1}
            self.voting_closed = {k: v for k, v in self.voting_closed.items() if k[0] >= newest - 1}
        self.next_block = counted + 1
        return True
