"""What this party sent at each level, and by which route (its own transaction, or handed to the level's relayer), and
whether the chain has it: the restart check that keeps a node from submitting twice.

A node killed mid-level and restarted with the same key resumes where the chain is: before it votes or submits it
asks the chain whether its event is there (the contract would refuse a second vote or histogram anyway). What it
sent itself since it started following is remembered, so that check reads no events for the levels it followed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fgbdt_chain.ledger.wrappers.contracts import Phase, TaskState
from fgbdt_chain.node.party.following import ChainFollower
from fgbdt_chain.node.party.session import PartySession

if TYPE_CHECKING:
    from fgbdt_chain.node.party.level_state import LevelContext


class SentLog:
    """This party's own votes and submissions, as far as it knows them on chain."""

    def __init__(self, session: PartySession, chain: ChainFollower) -> None:
        self.s, self.chain = session, chain
        self.seen: set[tuple[str, int, int]] = set()
        """(event, tree, level) of this party's events known to be on chain; once seen, that cannot change."""
        self.fresh_from: tuple[int, int] | None = None
        """The first (tree, level) this process followed from its start, without an outage since: its own votes and
        submissions of those levels are all in ``seen``, so the restart check needs no event read."""
        self.early_roots: set[int] = set()
        """Trees whose root ballot this party sent ahead where it computed that the tree before stopped short of its
        depth: counted only if the chain stopped it there too, so whether it voted is read from the chain (``has``:
        the ballot is counted exactly when it was sent after the start of that tree's last level)."""
        self.relayed: set[tuple[int, int]] = set()
        """The (tree, level)s whose ballot this party handed to a relayer: whether it landed is read from the chain."""
        self.handed: dict[tuple[int, int], float] = {}
        """When this party handed each level's histograms to a relayer (by (tree, level)): past the patience and not
        on chain, it sends them itself."""
        self.own_submission: set[tuple[int, int]] = set()
        """Levels whose histograms this party handed over and did not see land: it submits them itself."""

    def note_following(self, st: TaskState) -> None:
        """Note the first level this process follows from its start (``fresh_from``), at its first look at a task
        in training."""
        if self.fresh_from is not None:
            return
        # the levels this process follows from their start; a resolving level's next one (after a tree's last
        # level, the next root) may already hold this party's votes sent ahead (before a restart or an outage),
        # so it is not one of them
        self.fresh_from = (st.tree, st.level + 1)
        if st.phase == Phase.RESOLVING:  # the next level's or, the tree ending, the next root's votes
            self.fresh_from = (st.tree + 1, 1)

    def forget(self) -> None:
        """After an outage: a transaction may have landed unseen, and a node that restarted may have lost blocks this
        party saw, so what it sent is asked of the chain again."""
        self.fresh_from = None
        self.seen.clear()
        self.relayed = set()
        self.handed = {}

    def has(self, names: list[str], tree: int, level: int) -> bool:
        """Whether this party's event for (tree, level) is already on chain (the restart check); once seen, the
        answer cannot change, so it is remembered."""
        key = (names[0], tree, level)
        if key in self.seen:
            return True
        early_root = names[0] == "VotesSubmitted" and level == 0 and tree in self.early_roots
        relayed = (names[0] == "VotesSubmitted" and (tree, level) in self.relayed) or (
            names[0] == "HistogramsSubmitted" and (tree, level) in self.handed
        )
        if relayed and self.taken_on_chain(names[0], tree, level):
            self.seen.add(key)
            return True
        if self.fresh_from is not None and (tree, level) >= self.fresh_from and not early_root and not relayed:
            return False  # followed from its start by this process: its own event would be in seen
        # votes sent ahead landed while the level before resolved (a root's: the tree before's last level)
        since = (tree, level)
        if names[0] == "VotesSubmitted" and since != (0, 0):
            since = (tree, level - 1) if level > 0 else (tree - 1, self.s.params.depth - 1)
        start = self.chain.level_block(*since)
        task = self.s.task
        with self.s.timed("chain reads"):
            events = task.client.logs(task.contract, names, self.s.task_id, start)
        # a root ballot sent where this party computed the tree before stopped counts only if sent after the start
        # of that tree's last level (log order: on a network that mines at intervals the two can share a block)
        after = (0, -1)
        if early_root:
            with self.s.lock:
                starts = self.chain.trees.level_starts
                after = max((at for k, at in starts.items() if k[0] == tree - 1), default=after)
        for ev in events:
            a = ev.args
            if int(a["tree"]) == tree and int(a["level"]) == level and str(a["party"]) == self.s.address:
                if early_root and (ev.block_number, ev.log_index) < after:
                    continue
                self.seen.add(key)
                return True
        return False

    def taken_on_chain(self, name: str, tree: int, level: int) -> bool:
        """Whether the tree records show this party's relayed call of ``name`` at (tree, level) landed, without a read
        of its own: histograms, if the level's ``HistogramsClosed`` marks this party; a ballot sent ahead, if the
        transaction that opened the level also closed its voting (it took a ballot from every party taking part; a
        step closed at its deadline closes blocks after it opened)."""
        trees = self.chain.trees
        with self.s.lock:
            if name == "HistogramsSubmitted":
                mask = trees.closed.get((tree, level))
                return mask is not None and bool((mask >> self.s.index) & 1)
            start = trees.level_starts.get((tree, level))
            closed = trees.voting_closed.get((tree, level))
        return start is not None and closed == start[0]

    def has_submitted(self, ctx: LevelContext) -> bool:
        """Whether this party's histograms of the level are on chain, as far as it knows without a read: sent as its
        own transaction, or handed to the relayer and marked by the level's ``HistogramsClosed``."""
        key = (ctx.tree, ctx.level)
        if ("HistogramsSubmitted", *key) in self.seen:
            return True
        if key not in self.handed:
            return False
        with self.s.timed("chain reads"):
            mask = self.chain.closed_submitters(ctx)
        if mask is None or not (mask >> self.s.index) & 1:
            return False
        self.seen.add(("HistogramsSubmitted", *key))
        return True

    def sent_histograms(self, tree: int, level: int) -> bool:
        """Whether this party submitted (tree, level)'s histograms, or handed them to the relayer."""
        return ("HistogramsSubmitted", tree, level) in self.seen or (tree, level) in self.handed
